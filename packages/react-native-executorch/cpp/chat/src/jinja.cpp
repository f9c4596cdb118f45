#include "rne/chat/jinja.h"

#include <new>
#include <stdexcept>

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
  std::string out = std::string(error_kind_name(kind)) + ": " + message;
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
  detail::Dict items;
  for (const auto& [k, item] : v.as_object()) {
    // A repeated key keeps its first place and its last value, as Python's json.loads.
    Value key = Value::string(k);
    Value value = from_json(item, depth + 1, max_depth);
    bool replaced = false;
    for (auto& [ek, ev] : items) {
      if (ek.s == k) {
        ev = value;
        replaced = true;
      }
    }
    if (!replaced) items.emplace_back(std::move(key), std::move(value));
  }
  return Value::make_dict(std::move(items));
}

template <typename F>
auto guarded(F&& body) -> Result<decltype(body())> {
  try {
    return body();
  } catch (const Fail& f) {
    return Error{f.kind, f.message, f.line, f.column};
  } catch (const std::bad_alloc&) {
    return Error{ErrorKind::kLimit, "out of memory while rendering the chat template"};
  } catch (const std::length_error&) {
    return Error{ErrorKind::kLimit, "a string or list grew past what this process can hold"};
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
    t.program_ = detail::parse_template(text, limits.max_nesting);
    t.limits_ = limits;
    return t;
  });
}

Result<std::string> Template::render(const json::Value& context) const {
  if (!program_) return Error{ErrorKind::kInvalidInput, "render() on a Template that was not parsed"};
  if (!context.is_object()) {
    return Error{ErrorKind::kInvalidInput, std::string("the template context must be a JSON object, got ") + context.type_name()};
  }
  return guarded([&]() -> std::string {
    detail::Frame globals;
    detail::add_globals(globals);
    // The caller's variables shadow the builtins, as Jinja's render(**kwargs) over its globals.
    detail::Frame vars{&globals, {}};
    for (const auto& [k, v] : context.as_object()) vars.set(k, from_json(v, 1, limits_.max_nesting));
    detail::Interp interp(limits_, vars);
    interp.run(*program_);
    return std::move(interp.out);
  });
}

}  // namespace rne::chat
