#include "config.h"

namespace rne::tokenizer {

std::string ConfigReader::child_path(std::string_view key) const {
  std::string p = path_;
  if (!p.empty()) p += '.';
  p += key;
  return p;
}

void ConfigReader::fail(ErrorCode code, std::string message) {
  if (failed_) return;  // keep the first problem: later ones are usually consequences
  failed_ = true;
  error_ = Error{code, std::move(message)};
}

const json::Value* ConfigReader::optional(std::string_view key) const {
  const json::Value* v = value_.find(key);
  return v == nullptr || v->is_null() ? nullptr : v;
}

const json::Value* ConfigReader::typed(std::string_view key, bool (json::Value::*test)() const,
                                       const char* expected) {
  if (!value_.is_object()) {
    fail(ErrorCode::kInvalidTokenizer,
         "expected an object at " + (path_.empty() ? std::string("top level") : path_) +
             ", found " + value_.type_name());
    return nullptr;
  }
  const json::Value* v = value_.find(key);
  if (v == nullptr) {
    fail(ErrorCode::kInvalidTokenizer, "missing field " + child_path(key));
    return nullptr;
  }
  if (!(v->*test)()) {
    fail(ErrorCode::kInvalidTokenizer, "field " + child_path(key) + " must be " + expected +
                                           ", found " + v->type_name());
    return nullptr;
  }
  return v;
}

std::string ConfigReader::string(std::string_view key) {
  const json::Value* v = typed(key, &json::Value::is_string, "a string");
  return v ? v->as_string() : std::string();
}

std::string ConfigReader::string_or(std::string_view key, std::string fallback) {
  if (optional(key) == nullptr) return fallback;
  return string(key);
}

bool ConfigReader::boolean_or(std::string_view key, bool fallback) {
  if (optional(key) == nullptr) return fallback;
  const json::Value* v = typed(key, &json::Value::is_bool, "true or false");
  return v ? v->as_bool() : fallback;
}

int64_t ConfigReader::integer(std::string_view key) {
  const json::Value* v = typed(key, &json::Value::is_integer, "an integer");
  return v ? v->as_integer() : 0;
}

const json::Value* ConfigReader::array(std::string_view key) {
  return typed(key, &json::Value::is_array, "an array");
}

const json::Value* ConfigReader::object(std::string_view key) {
  return typed(key, &json::Value::is_object, "an object");
}

std::optional<Error> check_pipeline(std::string_view path, size_t steps, double growth) {
  if (steps > kMaxPipelineSteps) {
    return Error{ErrorCode::kInvalidTokenizer,
                 std::string(path) + " has " + std::to_string(steps) + " steps (nested Sequences "
                 "included), over the limit of " + std::to_string(kMaxPipelineSteps) +
                 " (kMaxPipelineSteps); real tokenizers use a handful: the file is damaged"};
  }
  if (growth > kMaxPipelineGrowth) {
    return Error{ErrorCode::kInvalidTokenizer,
                 std::string(path) + " can make one input byte into up to " +
                 (growth < 1e15 ? std::to_string(static_cast<long long>(growth)) : "> 1e15") +
                 " bytes, over the limit of " +
                 std::to_string(static_cast<int>(kMaxPipelineGrowth)) +
                 " (kMaxPipelineGrowth): its Replace/Prepend/Metaspace/ByteLevel steps would "
                 "grow text without bound; the file is damaged"};
  }
  return std::nullopt;
}

std::optional<Error> check_step_string(const std::string& text, const std::string& path) {
  if (text.size() <= kMaxStepStringBytes) return std::nullopt;
  return Error{ErrorCode::kInvalidTokenizer,
               path + " is " + std::to_string(text.size()) + " bytes, over the limit of " +
                   std::to_string(kMaxStepStringBytes) +
                   " (kMaxStepStringBytes) for a pattern or replacement; the file is damaged"};
}

Error unsupported(std::string_view what, std::string_view type, std::string_view path,
                  std::string_view supported) {
  std::string m = "unsupported ";
  m += what;
  m += " \"";
  m += type;
  m += "\" at ";
  m += path;
  m += " (supported: ";
  m += supported;
  m += ")";
  return Error{ErrorCode::kUnsupported, std::move(m)};
}

}  // namespace rne::tokenizer
