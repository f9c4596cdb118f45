#include "rne/chat/jinja.h"

#include <new>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "interp.h"

namespace rne::chat {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNotFound: return "NotFound";
    case ErrorKind::kInvalidFile: return "InvalidFile";
    case ErrorKind::kInvalidInput: return "InvalidInput";
    case ErrorKind::kSyntax: return "TemplateSyntaxError";
    case ErrorKind::kUndefined: return "UndefinedError";
    case ErrorKind::kRaised: return "TemplateError";
    case ErrorKind::kType: return "TypeError";
    case ErrorKind::kValue: return "ValueError";
    case ErrorKind::kSecurity: return "SecurityError";
    case ErrorKind::kLimit: return "LimitError";
  }
  return "Error";
}

std::string Error::to_string() const {
  std::string out = std::string(error_kind_name(code)) + ": " + message;
  if (line > 0) out += " (template line " + std::to_string(line) + ", column " + std::to_string(column) + ")";
  return out;
}

namespace {

using detail::Fail;
using detail::Value;

Value from_json(const json::Value& v, int depth, int max_depth) {
  if (depth > max_depth) {
    detail::fail(ErrorKind::kLimit, "the template's input nests deeper than " + std::to_string(max_depth) + " levels");
  }
  if (v.is_null()) return Value::none();
  if (v.is_bool()) return Value::boolean(v.as_bool());
  if (v.is_integer()) return Value::integer(v.as_integer());
  if (v.is_number()) return Value::number(v.as_number());
  if (v.is_string()) return Value::string(v.as_string());
  if (v.is_array()) {
    detail::List items;
    items.reserve(v.as_array().size());
    for (const auto& item : v.as_array()) items.push_back(from_json(item, depth + 1, max_depth));
    return Value::make_list(std::move(items));
  }
  const json::Object& members = v.as_object();
  detail::Dict items;
  items.reserve(members.size());
  // A repeated key keeps its first place and its last value, as Python's json.loads. Found
  // through an index, so an object with 300,000 keys converts in linear time.
  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(members.size());
  for (const auto& [k, item] : members) {
    Value value = from_json(item, depth + 1, max_depth);
    auto [at, inserted] = seen.emplace(k, items.size());
    if (inserted) {
      items.emplace_back(Value::string(k), std::move(value));
    } else {
      items[at->second].second = std::move(value);
    }
  }
  return Value::make_dict(std::move(items));
}

template <typename F>
auto guarded(F&& body) -> Result<decltype(body())> {
  try {
    return body();
  } catch (const Fail& f) {
    return Error{{f.kind, f.message}, f.line, f.column};
  } catch (const std::bad_alloc&) {
    return Error{ErrorKind::kLimit, "out of memory while rendering the chat template"};
  } catch (const std::length_error&) {
    return Error{ErrorKind::kLimit, "a string or list grew past what this process can hold"};
  } catch (const std::exception& e) {  // a library throw a check above missed: an error, not an abort
    return Error{ErrorKind::kValue, std::string("the template failed in the renderer: ") + e.what()};
  }
}

}  // namespace

Result<Template> Template::parse(std::string_view source, const Limits& limits) {
  if (source.size() > limits.max_template_bytes) {
    return Error{ErrorKind::kLimit, "the template is " + std::to_string(source.size()) + " bytes, over the " +
                                        std::to_string(limits.max_template_bytes) + "-byte limit (Limits::max_template_bytes)"};
  }
  // Jinja reads "\r\n" and "\r" as "\n" and drops one trailing newline (keep_trailing_newline=False).
  std::string text;
  text.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      text += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      text += source[k];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return guarded([&]() -> Template {
    Template t;
    t.program_ = detail::parse_template(text, limits.max_nesting, limits.max_expression_depth);
    t.limits_ = limits;
    return t;
  });
}

Result<std::string> Template::render(const json::Value& context, int64_t now_seconds) const {
  if (!program_) return Error{ErrorKind::kInvalidInput, "render() on a Template that was not parsed"};
  if (!context.is_object()) {
    return Error{ErrorKind::kInvalidInput, std::string("the template context must be a JSON object, got ") + context.type_name()};
  }
  return guarded([&]() -> std::string {
    detail::Budget budget;
    budget.max_steps = limits_.max_steps;
    budget.max_bytes = limits_.max_alloc_bytes;
    budget.max_value_bytes = limits_.max_value_bytes;
    budget.max_ms = limits_.max_render_ms;
    detail::Frame globals;
    detail::add_globals(globals);
    // The caller's variables shadow the builtins, as Jinja's render(**kwargs) over its globals.
    // They are the caller's memory, converted before the template's budget starts.
    detail::Frame vars{&globals, {}};
    for (const auto& [k, v] : context.as_object()) vars.set(k, from_json(v, 1, limits_.max_nesting));
    detail::BudgetScope scope(budget);
    detail::Interp interp(limits_, vars);
    interp.now_seconds = now_seconds;
    interp.run(*program_);
    return std::move(interp.out);
  });
}

}  // namespace rne::chat
