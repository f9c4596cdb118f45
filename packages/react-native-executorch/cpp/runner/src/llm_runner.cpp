#include "rne/runner/llm_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "rne/runner/text_stream.h"
#include "rne/runner/token_text.h"
#include "rne/tokenizer/tokenizer.h"

namespace rne::runner {

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}
}  // namespace

Result<void> check_utf8(std::string_view text, const std::string& what) {
  const auto bad = tokenizer::find_invalid_utf8(text);
  if (!bad) return {};
  char byte[8];
  std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned char>(text[*bad]));
  return Error{ErrorCode::kInvalidArgument,
               what + " is not valid UTF-8 (byte " + byte + " at offset " + std::to_string(*bad) +
                   "); send text encoded as UTF-8"};
}

LlmRunner::~LlmRunner() = default;

Result<std::unique_ptr<LlmRunner>> LlmRunner::load(const std::string& model_path,
                                                   const std::string& tokenizer_path) {
  auto model = ModelFile::open(model_path, ModelFile::Hold::kMapped);
  if (!model.ok()) return model.error();
  return load(std::move(model).value(), tokenizer_path);
}

Result<std::unique_ptr<LlmRunner>> LlmRunner::load(std::shared_ptr<const ModelFile> model,
                                                   const std::string& tokenizer_path) {
  const auto start = Clock::now();
  const std::string model_path = model->path();
  auto tok = tokenizer::Tokenizer::from_file(tokenizer_path);
  if (!tok.ok()) {
    const auto code = tok.error().code == tokenizer::ErrorCode::kFileNotFound
                          ? ErrorCode::kNotFound
                          : ErrorCode::kTokenizer;
    return Error{code, tok.error().message};
  }
  auto session = ModelSession::load(std::move(model));
  if (!session.ok()) return session.error();
  const ModelContract& contract = (*session)->contract();
  if (static_cast<int64_t>(tok.value().vocab_size()) > contract.vocab_size) {
    return Error{ErrorCode::kTokenizer,
                 tokenizer_path + " has " + std::to_string(tok.value().vocab_size()) +
                     " tokens but " + model_path + " has a vocabulary of " +
                     std::to_string(contract.vocab_size) +
                     "; they belong to different models"};
  }
  std::unique_ptr<LlmRunner> runner(new LlmRunner());
  runner->tokenizer_ = std::make_unique<tokenizer::Tokenizer>(std::move(tok).value());
  runner->model_file_ = (*session)->file();
  runner->shares_weights_ = (*session)->shares_weights();
  runner->session_bytes_ = (*session)->planned_bytes();
  runner->generator_ = std::make_unique<TextGenerator>(std::move(session).value());
  runner->load_ms_ = ms_since(start);
  return runner;
}

Result<std::unique_ptr<LlmRunner>> LlmRunner::new_session() const {
  if (!shares_weights_) {
    return Error{ErrorCode::kInvalidArgument,
                 model_file_->path() + ": another session of this model would load its weights "
                                       "again (its delegate is not XNNPACK, whose weight cache "
                                       "shares them); keep one session and switch conversations "
                                       "with saveSession/loadSession instead"};
  }
  const auto start = Clock::now();
  auto session = ModelSession::load(model_file_);
  if (!session.ok()) return session.error();
  std::unique_ptr<LlmRunner> runner(new LlmRunner());
  runner->tokenizer_ = std::make_unique<tokenizer::Tokenizer>(*tokenizer_);
  runner->model_file_ = model_file_;
  runner->shares_weights_ = shares_weights_;
  runner->session_bytes_ = (*session)->planned_bytes();
  runner->generator_ = std::make_unique<TextGenerator>(std::move(session).value());
  runner->load_ms_ = ms_since(start);
  return runner;
}

Result<GenerationConfig> LlmRunner::with_json_constraint(const GenerationConfig& config) {
  const int formats = int{!config.json_schema.empty()} + int{!config.regex.empty()} +
                      int{!config.grammar.empty()};
  if (config.json_strict && config.json_schema.empty()) {
    return Error{ErrorCode::kInvalidArgument,
                 "strict applies to a JSON schema (its unknown keywords and formats refused); "
                 "give a JSON schema with it, or leave strict out"};
  }
  if (formats == 0) return config;
  if (formats > 1) {
    return Error{ErrorCode::kInvalidArgument,
                 "give one of a JSON schema, a regex or a grammar for the answer, not several"};
  }
  // The special tokens kept as text: their text is what the grammar reads (Gemma 4's <|"|>
  // token quotes a string), so the trie gives them their bytes.
  std::vector<std::string> kept = config.keep_special_tokens;
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  // What the cached constraint was built for: the syntax, strictness, the kept tokens, and the
  // schema's text or the regex or grammar marked apart.
  std::string key{static_cast<char>(config.json_syntax), config.json_strict ? 's' : '-'};
  for (const std::string& text : kept) key += text + '\0';
  key += !config.grammar.empty() ? "\x01grammar:" + config.grammar
         : !config.regex.empty() ? "\x01regex:" + config.regex
                                 : config.json_schema;
  GenerationConfig constrained = config;
  if (key == json_schema_ && (json_constraint_ || gbnf_constraint_)) {
    if (gbnf_constraint_) {
      gbnf_constraint_->reset();
      constrained.constraint = gbnf_constraint_.get();
    } else {
      json_constraint_->reset();
      constrained.constraint = json_constraint_.get();
    }
    return constrained;
  }
  std::shared_ptr<const grammar::GbnfGrammar> gbnf;
  Result<std::shared_ptr<const grammar::JsonSchema>> schema =
      std::shared_ptr<const grammar::JsonSchema>();
  if (!config.grammar.empty()) {
    auto compiled = grammar::compile_gbnf(config.grammar);
    if (!compiled.ok()) return compiled.error();
    gbnf = *compiled;
  } else {
    schema = config.regex.empty() ? grammar::compile_json_schema(config.json_schema,
                                                                 config.json_syntax,
                                                                 config.json_strict)
                                  : grammar::compile_regex_format(config.regex);
    if (!schema.ok()) return schema.error();
  }
  if (!token_trie_ || kept != token_trie_kept_) {
    auto bytes = grammar::token_byte_strings(*tokenizer_, contract().vocab_size);
    for (const std::string& text : kept) {
      // Unknown or non-special texts: the text stream refuses them with a clear error.
      const auto id = tokenizer_->token_to_id(text);
      if (id && tokenizer_->is_special(*id) && *id < contract().vocab_size) {
        bytes[static_cast<size_t>(*id)] = text;
      }
    }
    // EOS ends the document (allowed only once it is complete), never writes bytes into it,
    // even where the tokenizer gives the id some (e.g. a byte-level vocabulary).
    for (int64_t eos : contract().eos_ids) {
      if (eos >= 0 && eos < contract().vocab_size) bytes[static_cast<size_t>(eos)].clear();
    }
    token_trie_ = grammar::TokenTrie::build(std::move(bytes));
    token_trie_kept_ = std::move(kept);
  }
  json_schema_.clear();
  json_constraint_.reset();
  gbnf_constraint_.reset();
  if (gbnf) {
    auto made = grammar::GbnfConstraint::create(gbnf, token_trie_, contract().eos_ids);
    if (!made.ok()) return made.error();
    gbnf_constraint_ = std::move(*made);
    constrained.constraint = gbnf_constraint_.get();
  } else {
    json_constraint_ =
        std::make_unique<grammar::JsonSchemaConstraint>(*schema, token_trie_, contract().eos_ids);
    constrained.constraint = json_constraint_.get();
  }
  json_schema_ = key;
  return constrained;
}

std::vector<int64_t> LlmRunner::encode(std::string_view text, bool add_special_tokens) const {
  auto ids = tokenizer_->encode(text, add_special_tokens);
  return {ids.begin(), ids.end()};
}

std::string LlmRunner::decode(const std::vector<int64_t>& tokens) const {
  std::vector<tokenizer::TokenId> ids(tokens.begin(), tokens.end());
  return tokenizer_->decode(ids);
}

Result<Stats> LlmRunner::generate(const std::string& prompt, const GenerationConfig& config,
                                  const TextCallback& on_text) {
  if (auto valid = check_utf8(prompt, "prompt"); !valid.ok()) return valid.error();
  const auto start = Clock::now();
  auto tokens = encode(prompt, /*add_special_tokens=*/false);
  const double encode_ms = ms_since(start);
  auto stats = generate(tokens, config, on_text);
  if (stats.ok()) {
    stats->encode_ms = encode_ms;
    stats->ttft_ms += encode_ms;
    last_stats_ = *stats;
  }
  return stats;
}

Result<Stats> LlmRunner::generate(const std::vector<int64_t>& tokens,
                                  const GenerationConfig& config, const TextCallback& on_text) {
  auto constrained = with_json_constraint(config);
  if (!constrained.ok()) return constrained.error();
  return generate_text(
      [&](const TokenSink& sink) { return generator_->generate(tokens, *constrained, sink); },
      config, on_text);
}

Result<Stats> LlmRunner::generate_prompt(const std::vector<int64_t>& prompt,
                                         const GenerationConfig& config,
                                         const TextCallback& on_text,
                                         const std::vector<MediaSpan>& media) {
  auto constrained = with_json_constraint(config);
  if (!constrained.ok()) return constrained.error();
  return generate_text(
      [&](const TokenSink& sink) {
        return generator_->generate_prompt(prompt, *constrained, sink, media);
      },
      config, on_text);
}

Result<Stats> LlmRunner::generate_text(const std::function<Result<Stats>(const TokenSink&)>& run,
                                       const GenerationConfig& config,
                                       const TextCallback& on_text) {
  // Text pipeline per token: decoder bytes (special tokens dropped unless kept) -> whole
  // characters -> stop-string filter -> caller.
  auto decoder = TokenTextStream::create(*tokenizer_, config.keep_special_tokens);
  if (!decoder.ok()) return decoder.error();
  Utf8Stream utf8;
  StopStringFilter stop(config.stop_strings);
  auto emit = [&](const std::string& text) {
    if (!text.empty() && on_text) on_text(text);
  };
  last_tokens_.clear();
  auto sink = [&](int64_t token) {
    last_tokens_.push_back(token);
    emit(stop.push(utf8.push(decoder->next(static_cast<tokenizer::TokenId>(token)))));
    return !stop.stopped();
  };
  auto stats = run(sink);
  if (!stats.ok()) return stats;
  emit(stop.push(utf8.flush()));
  emit(stop.flush());
  stats->load_ms = load_ms_;
  last_stats_ = *stats;
  return stats;
}

}  // namespace rne::runner
