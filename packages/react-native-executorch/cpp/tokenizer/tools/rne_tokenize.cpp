// Host CLI over rne::tokenizer, used by the Python parity tests and the benchmark.
//
//   rne_tokenize TOKENIZER_JSON TEXT          ids of TEXT, space separated
//   rne_tokenize TOKENIZER_JSON --jsonl       stdin: one JSON string per line; stdout: one JSON
//                                             object per line with ids (with/without special
//                                             tokens; ids_as_text: without, special-token text
//                                             read as text), decode (with/without skipping special
//                                             tokens) and the concatenated stream-decoder output.
//                                             A bad line gets {"error": ...} on stdout (so output
//                                             line N still answers input line N) and a message on
//                                             stderr; the rest of the stream is processed and the
//                                             exit status is 1 when any line failed
//   rne_tokenize TOKENIZER_JSON --decode-jsonl
//                                             stdin: one JSON array of ids per line; stdout:
//                                             {"decoded", "decoded_skip_special"} per line (bad
//                                             lines as in --jsonl)
//   rne_tokenize TOKENIZER_JSON --parts-jsonl
//                                             stdin: one prompt per line, a JSON array of
//                                             {"text": string, "plain": bool} parts (plain: its
//                                             special-token text is read as text); stdout:
//                                             {"ids": [...]} per line, nothing added (bad lines
//                                             as in --jsonl)
//   rne_tokenize TOKENIZER_JSON --vocab       JSON: vocab_size and id_to_token for every id below
//                                             it plus the added tokens (null where no token)
//   rne_tokenize TOKENIZER_JSON --bench FILE [REPEAT]
//                                             FILE: one JSON string (a document) per line;
//                                             encodes every document REPEAT times and prints
//                                             JSON timings (load and encode)
#include <chrono>
#include <cstdio>
#include <fstream>
#include <cstdint>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "rne/json/json.h"
#include "rne/tokenizer/tokenizer.h"
#include "unicode.h"

namespace {

using rne::tokenizer::TokenId;
using rne::tokenizer::Tokenizer;
namespace json = rne::json;

void append_ids(const std::vector<TokenId>& ids, std::string& out) {
  out += '[';
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  out += ']';
}

// Parses one input line. Returns why it is not usable: the parser's own reason (e.g. "unpaired
// surrogate in \u escape") with its byte offset, or the type found instead of `expected`.
std::optional<std::string> parse_line(const std::string& line, json::Value& value,
                                      bool (json::Value::*is_expected)() const,
                                      const char* expected) {
  auto parsed = json::parse(line);
  if (!parsed.ok()) {
    return "not valid JSON: " + parsed.error().message + " at byte " +
           std::to_string(parsed.error().offset);
  }
  value = std::move(parsed).value();
  if (!(value.*is_expected)()) return std::string("expected ") + expected + ", got " + value.type_name();
  return std::nullopt;
}

// Reports a bad input line on stderr and as {"error": ...} in its place on stdout.
void report_bad_line(size_t line_number, const std::string& problem) {
  std::cerr << "stdin line " << line_number << ": " << problem << "\n";
  std::string out = "{\"error\":";
  json::write_string("line " + std::to_string(line_number) + ": " + problem, out);
  std::cout << out << "}\n";
}

int run_jsonl(const Tokenizer& tokenizer) {
  std::string line;
  size_t failed = 0;
  for (size_t line_number = 1; std::getline(std::cin, line); ++line_number) {
    json::Value text;
    auto problem = parse_line(line, text, &json::Value::is_string, "a JSON string");
    if (!problem) {
      // Raw bytes inside the quotes are taken as they are; encode() would replace bad ones.
      if (const auto bad = rne::tokenizer::find_invalid_utf8(text.as_string())) {
        problem = "the string is not valid UTF-8 (invalid byte at offset " + std::to_string(*bad) +
                  " of the decoded text); send UTF-8";
      }
    }
    if (problem) {
      report_bad_line(line_number, *problem);
      ++failed;
      continue;
    }
    const std::vector<TokenId> ids = tokenizer.encode(text.as_string(), true);
    std::string stream;
    auto decoder = tokenizer.stream_decoder(false);
    for (const TokenId id : ids) stream += decoder.next(id);

    std::string out = "{\"ids\":";
    append_ids(ids, out);
    out += ",\"ids_no_special\":";
    append_ids(tokenizer.encode(text.as_string(), false), out);
    out += ",\"ids_as_text\":";
    append_ids(tokenizer.encode(text.as_string(), false, rne::tokenizer::SpecialTokens::kAsText),
               out);
    out += ",\"decoded\":";
    json::write_string(tokenizer.decode(ids, false), out);
    out += ",\"decoded_skip_special\":";
    json::write_string(tokenizer.decode(ids, true), out);
    out += ",\"stream\":";
    json::write_string(rne::tokenizer::unicode::to_valid_utf8_lossy(stream), out);
    out += "}\n";
    std::cout << out;
  }
  return failed == 0 ? 0 : 1;
}

int run_decode_jsonl(const Tokenizer& tokenizer) {
  std::string line;
  size_t failed = 0;
  for (size_t line_number = 1; std::getline(std::cin, line); ++line_number) {
    json::Value array;
    std::vector<TokenId> ids;
    auto problem = parse_line(line, array, &json::Value::is_array, "a JSON array of token ids");
    for (size_t i = 0; !problem && i < array.as_array().size(); ++i) {
      const json::Value& id = array.as_array()[i];
      if (!id.is_integer() || id.as_integer() < 0 || id.as_integer() > INT32_MAX) {
        problem = "element " + std::to_string(i) + " is not a token id (an integer 0.." +
                  std::to_string(INT32_MAX) + ")";
      } else {
        ids.push_back(static_cast<TokenId>(id.as_integer()));
      }
    }
    if (problem) {
      report_bad_line(line_number, *problem);
      ++failed;
      continue;
    }
    std::string out = "{\"decoded\":";
    json::write_string(tokenizer.decode(ids, false), out);
    out += ",\"decoded_skip_special\":";
    json::write_string(tokenizer.decode(ids, true), out);
    out += "}\n";
    std::cout << out;
  }
  return failed == 0 ? 0 : 1;
}

int run_parts_jsonl(const Tokenizer& tokenizer) {
  std::string line;
  size_t failed = 0;
  for (size_t line_number = 1; std::getline(std::cin, line); ++line_number) {
    json::Value array;
    std::vector<rne::tokenizer::TextPart> parts;
    auto problem = parse_line(line, array, &json::Value::is_array, "a JSON array of parts");
    for (size_t i = 0; !problem && i < array.as_array().size(); ++i) {
      const json::Value& part = array.as_array()[i];
      const json::Value* text = part.is_object() ? part.find("text") : nullptr;
      const json::Value* plain = part.is_object() ? part.find("plain") : nullptr;
      if (text == nullptr || !text->is_string() || plain == nullptr || !plain->is_bool()) {
        problem = "element " + std::to_string(i) + " is not {\"text\": string, \"plain\": bool}";
      } else if (const auto bad = rne::tokenizer::find_invalid_utf8(text->as_string())) {
        problem = "the text of element " + std::to_string(i) + " is not valid UTF-8 (offset " +
                  std::to_string(*bad) + "); send UTF-8";
      } else {
        parts.push_back({text->as_string(), plain->as_bool() ? rne::tokenizer::SpecialTokens::kAsText
                                                             : rne::tokenizer::SpecialTokens::kParse});
      }
    }
    if (problem) {
      report_bad_line(line_number, *problem);
      ++failed;
      continue;
    }
    std::string out = "{\"ids\":";
    append_ids(tokenizer.encode_parts(parts, false), out);
    out += "}\n";
    std::cout << out;
  }
  return failed == 0 ? 0 : 1;
}

int run_vocab(const Tokenizer& tokenizer) {
  // Ids can exceed vocab_size() when added tokens sit above the model's range.
  TokenId end = static_cast<TokenId>(tokenizer.vocab_size());
  for (TokenId probe = end; probe < end + 4096; ++probe) {
    if (tokenizer.id_to_token(probe)) end = probe + 1;
  }
  std::string out = "{\"vocab_size\":" + std::to_string(tokenizer.vocab_size()) + ",\"tokens\":[";
  for (TokenId id = 0; id < end; ++id) {
    if (id > 0) out += ',';
    const auto token = tokenizer.id_to_token(id);
    if (token) json::write_string(*token, out);
    else out += "null";
  }
  out += "],\"special\":";
  std::vector<TokenId> special;
  for (TokenId id = 0; id < end; ++id) {
    if (tokenizer.is_special(id)) special.push_back(id);
  }
  append_ids(special, out);
  out += "}\n";
  std::cout << out;
  return 0;
}

int run_bench(const Tokenizer& tokenizer, const std::string& path, int repeat,
              double load_seconds) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    std::cerr << "cannot open corpus " << path << "\n";
    return 2;
  }
  std::vector<std::string> documents;
  size_t bytes = 0;
  for (std::string line; std::getline(file, line);) {
    auto text = json::parse(line);
    if (!text.ok() || !text->is_string()) {
      std::cerr << path << " line " << documents.size() + 1 << ": expected a JSON string\n";
      return 2;
    }
    bytes += text->as_string().size();
    documents.push_back(text->as_string());
  }
  size_t tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < repeat; ++r) {
    for (const std::string& document : documents) tokens += tokenizer.encode(document, false).size();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "{\"load_seconds\":%.6f,\"bytes\":%zu,\"tokens\":%zu,\"repeat\":%d,\"seconds\":%.6f}\n",
      load_seconds, bytes * static_cast<size_t>(repeat), tokens, repeat, seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: rne_tokenize TOKENIZER_JSON (TEXT | --jsonl | --decode-jsonl | --parts-jsonl | "
                 "--vocab | "
                 "--bench FILE [REPEAT])\n";
    return 2;
  }
  const auto load_start = std::chrono::steady_clock::now();
  auto loaded = Tokenizer::from_file(argv[1]);
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  if (!loaded.ok()) {
    std::cerr << "error (" << rne::tokenizer::to_string(loaded.error().code)
              << "): " << loaded.error().message << "\n";
    return 1;
  }
  const Tokenizer& tokenizer = loaded.value();
  const std::string mode = argv[2];
  if (mode == "--jsonl") return run_jsonl(tokenizer);
  if (mode == "--decode-jsonl") return run_decode_jsonl(tokenizer);
  if (mode == "--parts-jsonl") return run_parts_jsonl(tokenizer);
  if (mode == "--vocab") return run_vocab(tokenizer);
  if (mode == "--bench") {
    if (argc < 4) {
      std::cerr << "--bench needs a corpus file\n";
      return 2;
    }
    return run_bench(tokenizer, argv[3], argc > 4 ? std::atoi(argv[4]) : 1, load_seconds);
  }
  std::string out;
  for (const TokenId id : tokenizer.encode(mode, true)) {
    if (!out.empty()) out += ' ';
    out += std::to_string(id);
  }
  std::cout << out << "\n";
  return 0;
}
