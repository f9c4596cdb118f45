#include "decoders.h"

#include <algorithm>

#include "byte_level.h"
#include "config.h"
#include "unicode.h"

namespace rne::tokenizer {

namespace {

constexpr const char* kSupported =
    "ByteLevel, Replace (string pattern), ByteFallback, Fuse, Strip, Metaspace, Sequence";

// Joins all tokens and maps byte-level characters back to bytes; a token with a character that
// is not a byte stand-in (an added token like "x y") contributes its own UTF-8 bytes.
class ByteLevel final : public Decoder {
 public:
  void decode(std::vector<std::string>& tokens, DecodeState& state) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      if (!byte_level::decode_token(token, bytes)) bytes += token;
    }
    tokens.assign(1, state.streaming ? std::move(bytes) : unicode::to_valid_utf8_lossy(bytes));
  }
};

class Replace final : public Decoder {
 public:
  Replace(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode(std::vector<std::string>& tokens, DecodeState&) const override {
    for (std::string& token : tokens) {
      std::string out;
      size_t pos = 0;
      for (size_t hit; (hit = token.find(pattern_, pos)) != std::string::npos;
           pos = hit + pattern_.size()) {
        out.append(token, pos, hit - pos);
        out += content_;
      }
      out.append(token, pos, std::string::npos);
      token = std::move(out);
    }
  }
  double growth() const override {
    return std::max(1.0, double(content_.size()) / double(pattern_.size()));
  }

 private:
  std::string pattern_, content_;
};

// Runs of <0xNN> tokens become their bytes; a run that is not valid UTF-8 becomes one U+FFFD
// per byte (HF), except when streaming, where the raw bytes are kept.
class ByteFallback final : public Decoder {
 public:
  void decode(std::vector<std::string>& tokens, DecodeState& state) const override {
    std::vector<std::string> out;
    std::string run;
    size_t run_tokens = 0;
    auto flush = [&] {
      if (run_tokens == 0) return;
      if (state.streaming || unicode::is_valid_utf8(run)) {
        out.push_back(run);
      } else {
        for (size_t i = 0; i < run_tokens; ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      run.clear();
      run_tokens = 0;
    };
    for (std::string& token : tokens) {
      int byte = -1;
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>') {
        byte = hex_byte(token[3], token[4]);
      }
      if (byte >= 0) {
        run += static_cast<char>(byte);
        ++run_tokens;
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int hex_byte(char hi, char lo) {
    const int h = hex_digit(hi), l = hex_digit(lo);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class Fuse final : public Decoder {
 public:
  void decode(std::vector<std::string>& tokens, DecodeState& state) const override {
    std::string joined;
    for (const std::string& token : tokens) joined += token;
    tokens.assign(1, std::move(joined));
    state.fused = true;
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
// After Fuse the single token is the whole text: when streaming, only the text's first token
// can be stripped at the start and the end is not known, so `stop` is not applied.
class Strip final : public Decoder {
 public:
  Strip(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode(std::vector<std::string>& tokens, DecodeState& state) const override {
    const bool whole_text = state.streaming && state.fused;
    for (size_t t = 0; t < tokens.size(); ++t) {
      std::string& token = tokens[t];
      size_t begin = 0, end = token.size();
      if (!whole_text || state.at_text_start) {
        for (size_t i = 0; i < start_ && token.compare(begin, content_.size(), content_) == 0; ++i) {
          begin += content_.size();
        }
      }
      if (!whole_text) {
        for (size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                           token.compare(end - content_.size(), content_.size(), content_) == 0;
             ++i) {
          end -= content_.size();
        }
      }
      token = token.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

// Replacement characters become spaces; in the text's first token they are dropped (HF).
class Metaspace final : public Decoder {
 public:
  Metaspace(std::string replacement, bool prepend)
      : replacement_(std::move(replacement)), prepend_(prepend) {}
  void decode(std::vector<std::string>& tokens, DecodeState& state) const override {
    for (size_t t = 0; t < tokens.size(); ++t) {
      const bool drop = t == 0 && state.at_text_start && prepend_;
      std::string out;
      size_t pos = 0;
      for (size_t hit; (hit = tokens[t].find(replacement_, pos)) != std::string::npos;
           pos = hit + replacement_.size()) {
        out.append(tokens[t], pos, hit - pos);
        if (!drop) out += ' ';
      }
      out.append(tokens[t], pos, std::string::npos);
      tokens[t] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool prepend_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode(std::vector<std::string>& tokens, DecodeState& state) const override {
    for (const auto& step : steps_) step->decode(tokens, state);
  }
  size_t steps() const override { return sequence_steps(steps_); }
  double growth() const override { return sequence_growth(steps_); }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

Result<std::unique_ptr<Decoder>> build(const json::Value& config, const std::string& path) {
  if (config.is_null()) return std::unique_ptr<Decoder>();
  ConfigReader r(config, path);
  const std::string type = r.string("type");
  if (!r.ok()) return r.error();

  std::unique_ptr<Decoder> result;
  if (type == "ByteLevel") {
    result = std::make_unique<ByteLevel>();
  } else if (type == "Replace") {
    const json::Value* pattern = r.object("pattern");
    const std::string content = r.string("content");
    if (!r.ok()) return r.error();
    const json::Value* s = pattern->find("String");
    if (s == nullptr || !s->is_string() || s->as_string().empty()) {
      return unsupported("decoder pattern", "Regex", r.child_path("pattern"), "non-empty String patterns");
    }
    if (auto e = check_step_string(s->as_string(), r.child_path("pattern"))) return *e;
    if (auto e = check_step_string(content, r.child_path("content"))) return *e;
    result = std::make_unique<Replace>(s->as_string(), content);
  } else if (type == "ByteFallback") {
    result = std::make_unique<ByteFallback>();
  } else if (type == "Fuse") {
    result = std::make_unique<Fuse>();
  } else if (type == "Strip") {
    const std::string content = r.string("content");
    const int64_t start = r.integer("start");
    const int64_t stop = r.integer("stop");
    if (!r.ok()) return r.error();
    if (content.empty() || start < 0 || stop < 0) {
      return Error{ErrorCode::kInvalidTokenizer, "Strip decoder at " + path +
                                                     " needs a non-empty content and start/stop >= 0"};
    }
    result = std::make_unique<Strip>(content, static_cast<size_t>(start), static_cast<size_t>(stop));
  } else if (type == "Metaspace") {
    const std::string replacement = r.string("replacement");
    const std::string scheme =
        r.string_or("prepend_scheme", r.boolean_or("add_prefix_space", true) ? "always" : "never");
    if (!r.ok()) return r.error();
    if (replacement.empty()) {
      return Error{ErrorCode::kInvalidTokenizer, "empty Metaspace replacement at " + path};
    }
    result = std::make_unique<Metaspace>(replacement, scheme != "never");
  } else if (type == "Sequence") {
    auto steps = sequence_items<Decoder>(r, "decoders", build);
    if (!steps.ok()) return steps.error();
    result = std::make_unique<Sequence>(std::move(steps).value());
  } else {
    return unsupported("decoder", type, path, kSupported);
  }
  if (!r.ok()) return r.error();
  return result;
}

}  // namespace

Result<std::unique_ptr<Decoder>> make_decoder(const json::Value& config, const std::string& path) {
  auto decoder = build(config, path);
  if (decoder.ok() && decoder.value()) {
    if (auto e = check_pipeline(path, decoder.value()->steps(), decoder.value()->growth())) {
      return *e;
    }
  }
  return decoder;
}

}  // namespace rne::tokenizer
