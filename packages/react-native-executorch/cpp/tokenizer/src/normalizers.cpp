#include "normalizers.h"

#include <algorithm>
#include <vector>

#include "config.h"
#include "unicode.h"

namespace rne::tokenizer {

namespace {

constexpr const char* kSupported = "Replace (string pattern), Prepend, Strip, Sequence";

void replace_all(std::string& text, const std::string& pattern, const std::string& content) {
  if (pattern.empty() || text.find(pattern) == std::string::npos) return;
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  size_t pos = 0;
  for (size_t hit; (hit = text.find(pattern, pos)) != std::string::npos; pos = hit + pattern.size()) {
    out.append(text, pos, hit - pos);
    out += content;
  }
  out.append(text, pos, std::string::npos);
  text = std::move(out);
}

class Replace final : public Normalizer {
 public:
  Replace(std::string pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void apply(std::string& text) const override { replace_all(text, pattern_, content_); }
  double growth() const override {
    return pattern_.empty() ? 1 : std::max(1.0, double(content_.size()) / double(pattern_.size()));
  }

 private:
  std::string pattern_, content_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void apply(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }
  double growth() const override { return 1.0 + double(prefix_.size()); }

 private:
  std::string prefix_;
};

// Strips White_Space characters at either end.
class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void apply(std::string& text) const override {
    size_t first_kept = std::string::npos, end_kept = 0;
    for (size_t pos = 0; pos < text.size();) {
      uint32_t cp = 0;
      const size_t n = unicode::decode_utf8(text, pos, cp);
      if (unicode::classify(cp) != unicode::CharClass::kWhitespace) {
        if (first_kept == std::string::npos) first_kept = pos;
        end_kept = pos + n;
      }
      pos += n;
    }
    if (first_kept == std::string::npos) {
      if (left_ || right_) text.clear();
      return;
    }
    const size_t begin = left_ ? first_kept : 0;
    const size_t end = right_ ? end_kept : text.size();
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void apply(std::string& text) const override {
    for (const auto& step : steps_) step->apply(text);
  }
  size_t steps() const override { return sequence_steps(steps_); }
  double growth() const override { return sequence_growth(steps_); }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

Result<std::unique_ptr<Normalizer>> build(const json::Value& config, const std::string& path) {
  if (config.is_null()) return std::unique_ptr<Normalizer>();
  ConfigReader r(config, path);
  const std::string type = r.string("type");
  if (!r.ok()) return r.error();

  std::unique_ptr<Normalizer> result;
  if (type == "Replace") {
    const json::Value* pattern = r.object("pattern");
    const std::string content = r.string("content");
    if (!r.ok()) return r.error();
    if (const json::Value* s = pattern->find("String"); s != nullptr && s->is_string()) {
      if (auto e = check_step_string(s->as_string(), r.child_path("pattern"))) return *e;
      if (auto e = check_step_string(content, r.child_path("content"))) return *e;
      result = std::make_unique<Replace>(s->as_string(), content);
    } else {
      return unsupported("normalizer pattern", "Regex", r.child_path("pattern"),
                         "String patterns");
    }
  } else if (type == "Prepend") {
    std::string prefix = r.string("prepend");
    if (auto e = check_step_string(prefix, r.child_path("prepend"))) return *e;
    result = std::make_unique<Prepend>(std::move(prefix));
  } else if (type == "Strip") {
    result = std::make_unique<Strip>(r.boolean_or("strip_left", true),
                                     r.boolean_or("strip_right", true));
  } else if (type == "Sequence") {
    auto steps = sequence_items<Normalizer>(r, "normalizers", build);
    if (!steps.ok()) return steps.error();
    result = std::make_unique<Sequence>(std::move(steps).value());
  } else {
    return unsupported("normalizer", type, path, kSupported);
  }
  if (!r.ok()) return r.error();
  return result;
}

}  // namespace

Result<std::unique_ptr<Normalizer>> make_normalizer(const json::Value& config,
                                                    const std::string& path) {
  auto normalizer = build(config, path);
  if (normalizer.ok() && normalizer.value()) {
    if (auto e = check_pipeline(path, normalizer.value()->steps(), normalizer.value()->growth())) {
      return *e;
    }
  }
  return normalizer;
}

}  // namespace rne::tokenizer
