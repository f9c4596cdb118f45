#include "rne/chat/chat_template.h"

#include <filesystem>

#include "rne/json/file.h"
#include "value.h"

namespace rne::chat {
namespace {

constexpr size_t kMaxConfigBytes = 64u << 20;  // tokenizer_config.json can embed large templates

Result<std::string> read_file(const std::string& path, size_t max_bytes) {
  auto text = json::read_regular_file(path, max_bytes);
  if (!text.ok()) {
    return Error{text.error().code == json::FileError::kMissing ? ErrorKind::kNotFound
                                                                : ErrorKind::kInvalidFile,
                 text.error().message};
  }
  return std::move(text).value();
}

// "<bos>" or {"content": "<bos>", ...} (AddedToken's serialised form).
const json::Value* token_text(const json::Value& v) {
  if (v.is_string()) return &v;
  if (const auto* content = v.find("content"); content && content->is_string()) return content;
  return nullptr;
}

json::Object special_tokens_of(const json::Value& config) {
  json::Object tokens;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (const auto* v = config.find(key)) {
      if (const auto* text = token_text(*v)) tokens.emplace_back(key, *text);
    }
  }
  return tokens;
}

// transformers' named templates: a list of {"name", "template"} or an object; "default" is used.
Result<std::string> template_entry(const json::Value& entry, const std::string& path) {
  if (entry.is_string()) return entry.as_string();
  if (entry.is_array()) {
    for (const auto& item : entry.as_array()) {
      const auto* name = item.find("name");
      const auto* text = item.find("template");
      if (name && name->is_string() && name->as_string() == "default" && text && text->is_string()) {
        return text->as_string();
      }
    }
  } else if (entry.is_object()) {
    if (const auto* text = entry.find("default"); text && text->is_string()) return text->as_string();
  } else {
    return Error{ErrorKind::kInvalidFile, path + ": \"chat_template\" is a " + entry.type_name() +
                                              "; expected a string or a list of {\"name\", \"template\"}"};
  }
  return Error{ErrorKind::kNotFound, path + ": \"chat_template\" has named templates but none called \"default\"; "
                                            "name the template file to use instead"};
}

Result<ChatTemplate> from_dir(const std::filesystem::path& dir, const std::filesystem::path& config_path,
                              const Limits& limits) {
  json::Value config;
  bool have_config = false;
  std::error_code ec;
  if (std::filesystem::exists(config_path, ec)) {
    auto text = read_file(config_path.string(), kMaxConfigBytes);
    if (!text.ok()) return text.error();
    auto parsed = json::parse(*text);
    if (!parsed.ok()) {
      return Error{ErrorKind::kInvalidFile, config_path.string() + ": not a JSON object (at byte " +
                                                std::to_string(parsed.error().offset) + ": " +
                                                parsed.error().message + ")"};
    }
    if (!parsed->is_object()) {
      return Error{ErrorKind::kInvalidFile, config_path.string() + ": not a JSON object (found " +
                                                parsed->type_name() + ")"};
    }
    config = std::move(parsed).value();
    have_config = true;
  }
  json::Object tokens = have_config ? special_tokens_of(config) : json::Object{};
  const auto jinja = dir / "chat_template.jinja";
  if (std::filesystem::exists(jinja, ec)) return ChatTemplate::from_file(jinja.string(), std::move(tokens), limits);
  if (have_config) {
    if (const auto* entry = config.find("chat_template")) {
      auto source = template_entry(*entry, config_path.string());
      if (!source.ok()) return source.error();
      return ChatTemplate::from_source(*source, std::move(tokens), limits, config_path.string());
    }
  }
  return Error{ErrorKind::kNotFound, dir.string() + " has no chat template: neither chat_template.jinja nor a "
                                                    "\"chat_template\" in tokenizer_config.json"};
}

// transformers fills `reasoning_content` from the older names for it and `thinking` for the
// templates that read that: {"thinking": r, **message, "reasoning_content": r}.
json::Value alias_reasoning(const json::Value& message) {
  const json::Value* reasoning = nullptr;
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    const auto* v = message.find(key);
    if (v && !v->is_null()) {
      reasoning = v;
      break;
    }
  }
  if (!reasoning) return message;
  json::Object out{{"thinking", *reasoning}};
  for (const auto& [k, v] : message.as_object()) json::set(out, k, v);
  json::set(out, "reasoning_content", *reasoning);
  return json::Value(std::move(out));
}

// A pair of private-use characters (U+E000 + 2k, the next one) that `seen` does not hold.
bool pick_marks(const std::string& seen, std::string& open, std::string& close) {
  for (char32_t code = 0xE000; code < 0xF8FF; code += 2) {
    open = detail::encode_utf8(std::u32string(1, code));
    close = detail::encode_utf8(std::u32string(1, code + 1));
    if (seen.find(open) == std::string::npos && seen.find(close) == std::string::npos) return true;
  }
  return false;
}

struct Marks {
  std::string open;
  std::string close;

  // lead_ws + open + core + close + trail_ws; an all-whitespace string is left as is.
  std::string wrap(const std::string& text) const {
    const std::u32string u = detail::decode_utf8(text);
    size_t begin = 0;
    size_t end = u.size();
    while (begin < end && detail::is_py_space(u[begin])) ++begin;
    while (end > begin && detail::is_py_space(u[end - 1])) --end;
    if (begin == end) return text;
    return detail::encode_utf8(u.substr(0, begin)) + open + detail::encode_utf8(u.substr(begin, end - begin)) +
           close + detail::encode_utf8(u.substr(end));
  }

  // Every string inside a tool result wrapped; object keys as they are (templates sort by them).
  json::Value wrap_strings(const json::Value& v) const {
    if (v.is_string()) return json::Value(wrap(v.as_string()));
    if (v.is_array()) {
      json::Array items;
      for (const auto& item : v.as_array()) items.push_back(wrap_strings(item));
      return json::Value(std::move(items));
    }
    if (!v.is_object()) return v;
    json::Object fields;
    for (const auto& [k, item] : v.as_object()) fields.emplace_back(k, wrap_strings(item));
    return json::Value(std::move(fields));
  }

  // The content of every message but the model's own (user, system, developer, tool, ...),
  // its text parts, and Gemma 4's tool_responses, wrapped. Assistant content stays template
  // text: it is the model's output, re-encoded to the ids it was generated as.
  json::Value messages(const json::Value& messages) const {
    json::Array out;
    for (const auto& m : messages.as_array()) {
      const auto* role = m.find("role");
      const bool model = role && role->is_string() && (role->as_string() == "assistant" || role->as_string() == "model");
      json::Object fields = m.as_object();
      for (auto& [key, value] : fields) {
        if (key == "content" && !model && value.is_string()) {
          value = json::Value(wrap(value.as_string()));
        } else if (key == "content" && !model && value.is_array()) {
          json::Array parts = value.as_array();
          for (auto& part : parts) {
            const auto* type = part.find("type");
            if (!type || !type->is_string() || type->as_string() != "text") continue;
            for (auto& [k, v] : part.as_object()) {
              if (k == "text" && v.is_string()) v = json::Value(wrap(v.as_string()));
            }
          }
          value = json::Value(std::move(parts));
        } else if (key == "tool_responses" && value.is_array()) {
          json::Array responses = value.as_array();
          for (auto& r : responses) {
            if (!r.is_object()) continue;
            for (auto& [k, v] : r.as_object()) {
              if (k == "response") v = wrap_strings(v);
            }
          }
          value = json::Value(std::move(responses));
        }
      }
      out.push_back(json::Value(std::move(fields)));
    }
    return json::Value(std::move(out));
  }

  // Splits a marked render at the marks; false unless they pair up (not nested) and the text
  // without them is `expected`.
  bool split(const std::string& marked, const std::string& expected, std::vector<PromptPart>& parts) const {
    std::string unmarked;
    std::string current;
    bool inside = false;
    auto flush = [&](bool plain) {
      if (!current.empty()) parts.push_back({std::move(current), plain});
      current.clear();
    };
    for (size_t k = 0; k < marked.size();) {
      if (marked.compare(k, open.size(), open) == 0) {
        if (inside) return false;
        flush(false);
        inside = true;
        k += open.size();
      } else if (marked.compare(k, close.size(), close) == 0) {
        if (!inside) return false;
        flush(true);
        inside = false;
        k += close.size();
      } else {
        current += marked[k];
        unmarked += marked[k];
        ++k;
      }
    }
    if (inside || unmarked != expected) return false;
    flush(false);
    return true;
  }
};

// Every string in `v` (keys included), appended to `out`: what the marks must not collide with.
void collect_strings(const json::Value& v, std::string& out) {
  if (v.is_string()) {
    out += v.as_string();
  } else if (v.is_array()) {
    for (const auto& item : v.as_array()) collect_strings(item, out);
  } else if (v.is_object()) {
    for (const auto& [k, item] : v.as_object()) {
      out += k;
      collect_strings(item, out);
    }
  }
}

}  // namespace

Result<RenderedPrompt> ChatTemplate::render_prompt(const json::Value& messages, const RenderOptions& options) const {
  auto text = render(messages, options);
  if (!text.ok()) return text.error();
  RenderedPrompt out;
  out.text = std::move(text).value();
  std::string seen = out.text;
  collect_strings(messages, seen);
  Marks marks;
  if (pick_marks(seen, marks.open, marks.close)) {
    auto marked = render(marks.messages(messages), options);
    out.plain_spans_found = marked.ok() && marks.split(*marked, out.text, out.parts);
  }
  if (!out.plain_spans_found) out.parts = {{out.text, false}};
  return out;
}

Result<ChatTemplate> ChatTemplate::from_model_dir(const std::string& dir, const Limits& limits) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Error{ErrorKind::kNotFound, dir + ": no such directory (expected a model directory with "
                                             "chat_template.jinja or tokenizer_config.json)"};
  }
  return from_dir(dir, std::filesystem::path(dir) / "tokenizer_config.json", limits);
}

Result<ChatTemplate> ChatTemplate::from_tokenizer_config(const std::string& path, const Limits& limits) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Error{ErrorKind::kNotFound, path + ": no such file"};
  const std::filesystem::path config(path);
  return from_dir(config.parent_path().empty() ? "." : config.parent_path(), config, limits);
}

Result<ChatTemplate> ChatTemplate::from_file(const std::string& path, json::Object special_tokens,
                                             const Limits& limits) {
  auto text = read_file(path, limits.max_template_bytes);
  if (!text.ok()) return text.error();
  return from_source(*text, std::move(special_tokens), limits, path);
}

Result<ChatTemplate> ChatTemplate::from_source(std::string_view source, json::Object special_tokens,
                                               const Limits& limits, std::string origin) {
  auto parsed = Template::parse(source, limits);
  if (!parsed.ok()) {
    Error e = parsed.error();
    e.message = origin + ": " + e.message;
    return e;
  }
  ChatTemplate t;
  t.template_ = std::move(parsed).value();
  t.special_tokens_ = std::move(special_tokens);
  t.origin_ = std::move(origin);
  return t;
}

Result<std::string> ChatTemplate::render(const json::Value& messages, const RenderOptions& options) const {
  if (!messages.is_array()) {
    return Error{ErrorKind::kInvalidInput, std::string("messages must be a JSON array of message objects, got ") +
                                               messages.type_name()};
  }
  json::Array chat;
  for (size_t k = 0; k < messages.as_array().size(); ++k) {
    const auto& m = messages.as_array()[k];
    if (!m.is_object()) {
      return Error{ErrorKind::kInvalidInput, "message " + std::to_string(k) + " is a " + m.type_name() +
                                                 "; each message must be an object such as {\"role\": \"user\", \"content\": \"...\"}"};
    }
    // transformers drops a message's null fields (content=None, tool_calls=None), which many
    // templates would print as "None".
    json::Object fields;
    for (const auto& [key, value] : m.as_object()) {
      if (!value.is_null()) fields.emplace_back(key, value);
    }
    chat.push_back(alias_reasoning(json::Value(std::move(fields))));
  }
  if (chat.empty()) {
    return Error{ErrorKind::kInvalidInput, "Cannot apply chat template to an empty conversation. Provide at least one message."};
  }
  if (!options.tools.is_null() && !options.tools.is_array()) {
    return Error{ErrorKind::kInvalidInput, std::string("tools must be a JSON array of tool schemas, got ") +
                                               options.tools.type_name()};
  }
  if (options.tools.is_array()) {
    for (const auto& tool : options.tools.as_array()) {
      if (!tool.is_object()) {
        return Error{ErrorKind::kInvalidInput, std::string("each tool must be a JSON schema object, got a ") + tool.type_name()};
      }
    }
  }
  json::Object context{{"messages", json::Value(std::move(chat))},
                       {"tools", options.tools},
                       {"documents", options.documents},
                       {"add_generation_prompt", json::Value(options.add_generation_prompt)}};
  for (const auto& [k, v] : special_tokens_) json::set(context, k, v);
  for (const auto& [k, v] : options.extra) json::set(context, k, v);
  return template_.render(json::Value(std::move(context)), options.now_seconds);
}

}  // namespace rne::chat
