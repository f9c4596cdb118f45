// Typed, path-aware access to tokenizer.json fields. The first problem is recorded and
// reported as an Error naming the JSON path, e.g. `pre_tokenizer.pretokenizers[1].type`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rne/json/json.h"
#include "rne/tokenizer/result.h"

namespace rne::tokenizer {

class ConfigReader {
 public:
  ConfigReader(const json::Value& value, std::string path) : value_(value), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  std::string child_path(std::string_view key) const;

  // Required fields record an error when absent or of the wrong type; optional ones return
  // the fallback when absent or null.
  std::string string(std::string_view key);
  std::string string_or(std::string_view key, std::string fallback);
  bool boolean_or(std::string_view key, bool fallback);
  int64_t integer(std::string_view key);
  // The member, or nullptr when absent/null (no error).
  const json::Value* optional(std::string_view key) const;
  // The member, which must exist and have the given type test; nullptr (and an error) otherwise.
  const json::Value* array(std::string_view key);
  const json::Value* object(std::string_view key);

  void fail(ErrorCode code, std::string message);
  bool ok() const { return !failed_; }
  const Error& error() const { return error_; }

 private:
  const json::Value* typed(std::string_view key, bool (json::Value::*test)() const,
                           const char* expected);

  const json::Value& value_;
  std::string path_;
  bool failed_ = false;
  Error error_{ErrorCode::kInvalidTokenizer, ""};
};

// Bounds on one normalizer, pre-tokenizer or decoder (nested Sequences included), so that a
// damaged or hostile file is refused when it is loaded rather than making encode() or decode()
// allocate without bound (a chain of Replace "a" -> "aa" doubles the text at every step).
// Real tokenizers use a handful of steps, strings of a few bytes and grow text at most 12x
// (Gemma's normalizer: Prepend "▁" then Replace " " -> "▁").
inline constexpr size_t kMaxPipelineSteps = 64;
inline constexpr double kMaxPipelineGrowth = 64;  // output bytes per input byte, worst case
inline constexpr size_t kMaxStepStringBytes = 256;  // a Replace/Prepend/Metaspace string

// An error naming the limit when `steps` or `growth` of the pipeline at `path` exceed it.
std::optional<Error> check_pipeline(std::string_view path, size_t steps, double growth);

// A Sequence's steps (itself and every nested step) and worst-case growth (its steps' product),
// for check_pipeline; `steps` holds pointers to steps that report their own.
template <typename Steps>
size_t sequence_steps(const Steps& steps) {
  size_t total = 1;
  for (const auto& step : steps) total += step->steps();
  return total;
}
template <typename Steps>
double sequence_growth(const Steps& steps) {
  double total = 1;
  for (const auto& step : steps) total *= step->growth();
  return total;
}
// An error naming the limit when `text` (the field at `path`) is longer than kMaxStepStringBytes.
std::optional<Error> check_step_string(const std::string& text, const std::string& path);

// A Sequence's steps: each item of the array `key` of `r` built by `build(item, path)` (an item
// that builds to nothing is left out), or the first error.
template <typename Step, typename Build>
Result<std::vector<std::unique_ptr<Step>>> sequence_items(ConfigReader& r, std::string_view key,
                                                          Build build) {
  const json::Value* items = r.array(key);
  if (!r.ok()) return r.error();
  std::vector<std::unique_ptr<Step>> steps;
  for (size_t i = 0; i < items->as_array().size(); ++i) {
    auto step = build(items->as_array()[i], r.child_path(key) + "[" + std::to_string(i) + "]");
    if (!step.ok()) return step.error();
    if (step.value()) steps.push_back(std::move(step).value());
  }
  return steps;
}

// "Unsupported <what> \"<type>\" at <path> (supported: <list>)".
Error unsupported(std::string_view what, std::string_view type, std::string_view path,
                  std::string_view supported);

}  // namespace rne::tokenizer
