#include "rne/tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <new>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "added_vocabulary.h"
#include "bpe.h"
#include "config.h"
#include "decoders.h"
#include "rne/json/file.h"
#include "rne/json/json.h"
#include "normalizers.h"
#include "pre_tokenizers.h"
#include "unicode.h"

namespace rne::tokenizer {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kFileNotFound: return "file not found";
    case ErrorCode::kIo: return "I/O error";
    case ErrorCode::kInvalidJson: return "invalid JSON";
    case ErrorCode::kInvalidTokenizer: return "invalid tokenizer.json";
    case ErrorCode::kUnsupported: return "unsupported tokenizer";
  }
  return "error";
}

namespace {

// tokenizer.json "post_processor" of type TemplateProcessing (its "single" template), possibly
// inside a Sequence next to ByteLevel (which only adjusts offsets, so it changes no ids).
class PostProcessor {
 public:
  static Result<PostProcessor> load(const json::Value& config, const std::string& path) {
    PostProcessor p;
    if (config.is_null()) return p;
    if (auto e = p.add(config, path)) return *e;
    return p;
  }

  void apply(const std::vector<TokenId>& sequence, std::vector<TokenId>& out) const {
    if (template_.empty()) {
      out.insert(out.end(), sequence.begin(), sequence.end());
      return;
    }
    for (const auto& item : template_) {
      if (item.empty()) out.insert(out.end(), sequence.begin(), sequence.end());
      else out.insert(out.end(), item.begin(), item.end());
    }
  }

 private:
  // std::nullopt on success.
  std::optional<Error> add(const json::Value& config, const std::string& path) {
    ConfigReader r(config, path);
    const std::string type = r.string("type");
    if (!r.ok()) return r.error();
    if (type == "ByteLevel") return std::nullopt;
    if (type == "Sequence") {
      const json::Value* items = r.array("processors");
      if (!r.ok()) return r.error();
      for (size_t i = 0; i < items->as_array().size(); ++i) {
        if (auto e = add(items->as_array()[i],
                         r.child_path("processors") + "[" + std::to_string(i) + "]")) {
          return e;
        }
      }
      return std::nullopt;
    }
    if (type != "TemplateProcessing") {
      return unsupported("post-processor", type, path, "TemplateProcessing, ByteLevel, Sequence");
    }
    if (!template_.empty()) {
      return unsupported("post-processor", "two TemplateProcessing steps", path, "one template");
    }
    const json::Value* single = r.array("single");
    const json::Value* specials = r.object("special_tokens");
    if (!r.ok()) return r.error();
    bool has_sequence = false;
    for (const json::Value& item : single->as_array()) {
      const json::Value* special = item.find("SpecialToken");
      const json::Value* sequence = item.find("Sequence");
      if (sequence != nullptr) {
        template_.emplace_back();  // placeholder: the encoded text
        has_sequence = true;
        continue;
      }
      const json::Value* name = special ? special->find("id") : nullptr;
      if (name == nullptr || !name->is_string()) {
        return Error{ErrorCode::kInvalidTokenizer,
                     "items of " + r.child_path("single") + " must be SpecialToken or Sequence"};
      }
      const json::Value* entry = specials->find(name->as_string());
      const json::Value* ids = entry ? entry->find("ids") : nullptr;
      if (ids == nullptr || !ids->is_array() || ids->as_array().empty()) {
        return Error{ErrorCode::kInvalidTokenizer, "special token \"" + name->as_string() +
                                                       "\" of the template has no ids in " +
                                                       r.child_path("special_tokens")};
      }
      std::vector<TokenId> item_ids;
      for (const json::Value& id : ids->as_array()) {
        if (!id.is_integer()) {
          return Error{ErrorCode::kInvalidTokenizer,
                       "ids of \"" + name->as_string() + "\" must be integers"};
        }
        item_ids.push_back(static_cast<TokenId>(id.as_integer()));
      }
      template_.push_back(std::move(item_ids));
    }
    if (!has_sequence) {
      return Error{ErrorCode::kInvalidTokenizer, r.child_path("single") + " has no Sequence item"};
    }
    return std::nullopt;
  }

  // Each item: special token ids, or empty for the text's ids.
  std::vector<std::vector<TokenId>> template_;
};

std::string line_and_column(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace

struct Tokenizer::Impl {
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Bpe> model;
  std::unique_ptr<Decoder> decoder;
  PostProcessor post_processor;

  std::vector<std::unique_ptr<AddedToken>> added;
  std::unordered_map<TokenId, const AddedToken*> added_by_id;
  std::unordered_map<std::string, const AddedToken*> added_by_content;
  AddedTokenMatcher raw_matcher;         // normalized: false, matched on the input text
  AddedTokenMatcher normalized_matcher;  // normalized: true, matched after normalization
  // A special token matched after normalization: then the text of parts read in different ways
  // is normalized part by part, since its matches could not be traced back to their part.
  bool normalized_special = false;

  const std::string* token_string(TokenId id) const {
    if (const auto it = added_by_id.find(id); it != added_by_id.end()) return &it->second->token;
    return model->id_to_token(id);
  }

  bool is_special(TokenId id) const {
    const auto it = added_by_id.find(id);
    return it != added_by_id.end() && it->second->special;
  }

  // Normalizes, pre-tokenizes and BPE-encodes one span of text that holds no raw added token.
  void encode_plain(std::string text, bool at_text_start, bool skip_special,
                    std::vector<TokenId>& ids) const {
    if (normalizer) normalizer->apply(text);
    std::vector<AddedTokenMatcher::Segment> segments;
    if (normalized_matcher.empty()) segments.push_back({0, text.size(), nullptr});
    else normalized_matcher.split(text, 0, text.size(), skip_special, segments);
    std::vector<Piece> pieces;
    for (const auto& segment : segments) {
      if (segment.token != nullptr) {
        ids.push_back(segment.token->id);
        continue;
      }
      if (segment.begin == segment.end) continue;
      pieces.assign(1, Piece{text.substr(segment.begin, segment.end - segment.begin),
                             at_text_start && segment.begin == 0});
      if (pre_tokenizer) pre_tokenizer->split(pieces);
      for (const Piece& piece : pieces) model->encode_word(piece.text, ids);
    }
  }

  // A stretch of the text to encode, and whether its special tokens are read as text.
  struct Range {
    size_t begin, end;
    bool as_text;
  };

  // Encodes `text`, covered in order by `ranges`: added tokens are split out range by range,
  // then each run of plain text (across ranges) goes through encode_plain.
  std::vector<TokenId> encode(std::string_view text, const std::vector<Range>& ranges,
                              bool add_special_tokens) const {
    struct Run {
      size_t begin, end;
      const AddedToken* token;  // nullptr for plain text
      bool as_text;             // plain text holding text of a kAsText range
    };
    std::vector<Run> runs;
    std::vector<AddedTokenMatcher::Segment> segments;
    for (const Range& range : ranges) {
      segments.clear();
      raw_matcher.split(text, range.begin, range.end, range.as_text, segments);
      for (const auto& segment : segments) {
        Run* last = runs.empty() ? nullptr : &runs.back();
        if (segment.token == nullptr && last != nullptr && last->token == nullptr &&
            last->end == segment.begin && !normalized_special) {
          last->end = segment.end;
          last->as_text = last->as_text || range.as_text;
        } else {
          runs.push_back({segment.begin, segment.end, segment.token, range.as_text});
        }
      }
    }
    std::vector<TokenId> ids;
    for (const Run& run : runs) {
      if (run.token != nullptr) ids.push_back(run.token->id);
      else encode_plain(std::string(text.substr(run.begin, run.end - run.begin)), run.begin == 0,
                        run.as_text, ids);
    }
    if (!add_special_tokens) return ids;
    std::vector<TokenId> out;
    out.reserve(ids.size() + 4);
    post_processor.apply(ids, out);
    return out;
  }

  // Runs the decoder over token strings; without a decoder, HF joins tokens with spaces.
  std::string decode_tokens(std::vector<std::string> tokens, DecodeState& state) const {
    std::string out;
    if (decoder) {
      decoder->decode(tokens, state);
      for (const std::string& t : tokens) out += t;
    } else {
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0 || (state.streaming && !state.at_text_start)) out += ' ';
        out += tokens[i];
      }
    }
    return out;
  }

  // std::nullopt on success.
  std::optional<Error> load(const json::Value& root);
};

std::optional<Error> Tokenizer::Impl::load(const json::Value& root) {
  ConfigReader r(root, "");
  const json::Value* model_config = r.object("model");
  if (!r.ok()) return r.error();
  ConfigReader m(*model_config, "model");
  // Files written by old versions of `tokenizers` may omit model.type for BPE.
  const std::string model_type = m.string_or("type", "BPE");
  if (!m.ok()) return m.error();
  if (model_type != "BPE") {
    return unsupported("model type", model_type, "model.type",
                       "BPE (byte-level like GPT-2/SmolLM2, or SentencePiece-style with "
                       "byte_fallback like Gemma)");
  }
  auto bpe = Bpe::load(*model_config, "model");
  if (!bpe.ok()) return bpe.error();
  model = std::move(bpe).value();

  static const json::Value kNull;
  auto section = [&](const char* key) -> const json::Value& {
    const json::Value* v = root.find(key);
    return v ? *v : kNull;
  };
  auto norm = make_normalizer(section("normalizer"), "normalizer");
  if (!norm.ok()) return norm.error();
  normalizer = std::move(norm).value();
  auto pre = make_pre_tokenizer(section("pre_tokenizer"), "pre_tokenizer");
  if (!pre.ok()) return pre.error();
  pre_tokenizer = std::move(pre).value();
  auto dec = make_decoder(section("decoder"), "decoder");
  if (!dec.ok()) return dec.error();
  decoder = std::move(dec).value();
  auto post = PostProcessor::load(section("post_processor"), "post_processor");
  if (!post.ok()) return post.error();
  post_processor = std::move(post).value();

  if (const json::Value* list = r.optional("added_tokens")) {
    if (!list->is_array()) {
      return Error{ErrorCode::kInvalidTokenizer, "field added_tokens must be an array"};
    }
    for (size_t i = 0; i < list->as_array().size(); ++i) {
      ConfigReader a(list->as_array()[i], "added_tokens[" + std::to_string(i) + "]");
      auto token = std::make_unique<AddedToken>();
      token->content = a.string("content");
      const int64_t id = a.integer("id");
      token->special = a.boolean_or("special", false);
      token->lstrip = a.boolean_or("lstrip", false);
      token->rstrip = a.boolean_or("rstrip", false);
      token->single_word = a.boolean_or("single_word", false);
      token->normalized = a.boolean_or("normalized", !token->special);
      if (!a.ok()) return a.error();
      if (id < 0 || id > INT32_MAX || token->content.empty()) {
        return Error{ErrorCode::kInvalidTokenizer,
                     a.path() + " needs a non-empty content and a non-negative id"};
      }
      token->id = static_cast<TokenId>(id);
      added_by_id[token->id] = token.get();
      added_by_content.emplace(token->content, token.get());
      added.push_back(std::move(token));
    }
  }
  for (const auto& token : added) {
    token->token = token->content;
    if (!token->normalized) {
      raw_matcher.add(token->content, token.get());
    } else {
      // Normalized tokens are looked for in normalized text, so match their normalized form.
      if (normalizer) normalizer->apply(token->token);
      normalized_matcher.add(token->token, token.get());
      normalized_special = normalized_special || token->special;
    }
  }
  return std::nullopt;
}

namespace {

std::optional<Error> parse_document(std::string_view text, json::Value& root) {
  auto parsed = json::parse(text);
  if (!parsed.ok()) {
    return Error{ErrorCode::kInvalidJson, "not valid JSON: " + parsed.error().message + " at " +
                                              line_and_column(text, parsed.error().offset)};
  }
  root = std::move(parsed).value();
  if (!root.is_object()) {
    return Error{ErrorCode::kInvalidTokenizer,
                 std::string("a tokenizer.json must be a JSON object, found ") + root.type_name()};
  }
  return std::nullopt;
}

// The largest tokenizer.json read: 4x Gemma's 33 MB, so a wrong or endless file is refused
// before it is parsed into memory.
constexpr size_t kMaxTokenizerFileBytes = size_t{128} << 20;

// Reads a whole file in one go (tokenizer.json files reach tens of MB). Regular files only: a
// FIFO or device given as the tokenizer is refused, not waited on.
std::optional<Error> read_file(const std::string& path, std::string& content) {
  auto read = json::read_regular_file(path, kMaxTokenizerFileBytes);
  if (read.ok()) {
    content = std::move(read).value();
    return std::nullopt;
  }
  const json::FileProblem& problem = read.error();
  std::string message = "tokenizer file " + problem.message;
  if (problem.code == json::FileError::kNotRegular) {
    message += "; pass the path of a tokenizer.json file";
  }
  const ErrorCode code = problem.code == json::FileError::kMissing ||
                                 problem.code == json::FileError::kNotRegular
                             ? ErrorCode::kFileNotFound
                             : ErrorCode::kIo;
  return Error{code, message};
}

}  // namespace

Result<Tokenizer> Tokenizer::from_document(const json::Value& root) {
  auto impl = std::make_shared<Impl>();
  if (auto e = impl->load(root)) return *e;
  return Tokenizer(std::move(impl));
}

// Loading allocates a lot: running out of memory is reported, not thrown across the API.
Result<Tokenizer> Tokenizer::from_json(std::string_view text) {
  try {
    json::Value root;
    if (auto e = parse_document(text, root)) return *e;
    return from_document(root);
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kIo, "out of memory while loading the tokenizer"};
  }
}

Result<Tokenizer> Tokenizer::from_file(const std::string& path) {
  try {
    std::string content;
    if (auto e = read_file(path, content)) return *e;
    json::Value root;
    auto e = parse_document(content, root);
    // The text is not needed once parsed: free it before building (lower peak memory).
    std::string().swap(content);
    auto result = e ? Result<Tokenizer>(*e) : from_document(root);
    if (!result.ok()) {
      Error error = result.error();
      error.message = path + ": " + error.message;
      return error;
    }
    return result;
  } catch (const std::bad_alloc&) {
    return Error{ErrorCode::kIo, "out of memory while loading the tokenizer " + path};
  }
}

std::optional<size_t> find_invalid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t length = unicode::valid_sequence_length(text, pos);
    if (length == 0) return pos;
    pos += length;
  }
  return std::nullopt;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return encode(text, add_special_tokens, SpecialTokens::kParse);
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       SpecialTokens special_tokens) const {
  return impl_->encode(text, {{0, text.size(), special_tokens == SpecialTokens::kAsText}},
                       add_special_tokens);
}

std::vector<TokenId> Tokenizer::encode_parts(const std::vector<TextPart>& parts,
                                             bool add_special_tokens) const {
  std::string text;
  std::vector<Impl::Range> ranges;
  for (const TextPart& part : parts) {
    ranges.push_back({text.size(), text.size() + part.text.size(),
                      part.special_tokens == SpecialTokens::kAsText});
    text += part.text;
  }
  return impl_->encode(text, ranges, add_special_tokens);
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const TokenId id : ids) {
    if (skip_special_tokens && impl_->is_special(id)) continue;
    if (const std::string* t = impl_->token_string(id)) tokens.push_back(*t);
  }
  DecodeState state;
  return impl_->decode_tokens(std::move(tokens), state);
}

StreamDecoder Tokenizer::stream_decoder(bool skip_special_tokens) const {
  return StreamDecoder(impl_, skip_special_tokens);
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto it = impl_->added_by_content.find(std::string(token));
      it != impl_->added_by_content.end()) {
    return it->second->id;
  }
  return impl_->model->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(TokenId id) const {
  if (const std::string* t = impl_->token_string(id)) return *t;
  return std::nullopt;
}

bool Tokenizer::is_special(TokenId id) const { return impl_->is_special(id); }

size_t Tokenizer::vocab_size() const {
  size_t size = impl_->model->size();
  for (const auto& [content, token] : impl_->added_by_content) {
    if (!impl_->model->token_to_id(content)) ++size;
  }
  return size;
}

std::string StreamDecoder::next(TokenId id) {
  if (skip_special_ && impl_->is_special(id)) return {};
  const std::string* token = impl_->token_string(id);
  if (token == nullptr) return {};
  DecodeState state;
  state.streaming = true;
  state.at_text_start = at_start_;
  std::string piece = impl_->decode_tokens({*token}, state);
  if (!piece.empty()) at_start_ = false;
  return piece;
}

}  // namespace rne::tokenizer
