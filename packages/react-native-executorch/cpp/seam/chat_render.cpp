#include "chat_render.h"

#include <list>
#include <memory>
#include <mutex>
#include <utility>

#include "rne/chat/chat_template.h"
#include "rne/json/json.h"

namespace rne::seam {
namespace {

using chat::ChatTemplate;

std::string error_json(const chat::Error& e) {
  std::string out = "{\"error\":{\"kind\":\"";
  out += chat::error_kind_name(e.code);
  out += "\",\"message\":";
  json::write_string(e.message, out);
  out += ",\"line\":" + std::to_string(e.line) + ",\"column\":" + std::to_string(e.column) + "}}";
  return out;
}

std::string invalid(std::string message) { return error_json({chat::ErrorKind::kInvalidInput, std::move(message)}); }

const json::Value* member(const json::Value& object, std::string_view name) {
  for (const auto& [key, value] : object.as_object()) {
    if (key == name) return &value;
  }
  return nullptr;
}

// The last few parsed templates (an app renders with one or two), keyed by source and tokens.
class TemplateCache {
 public:
  chat::Result<std::shared_ptr<const ChatTemplate>> get(const std::string& source, const json::Value* tokens) {
    std::string key = source;
    key += '\0';
    if (tokens && tokens->is_object()) {
      for (const auto& [name, value] : tokens->as_object()) {
        json::write_string(name, key);
        json::write_string(value.is_string() ? value.as_string() : value.type_name(), key);
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first != key) continue;
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front().second;
    }
    json::Object special;
    if (tokens && tokens->is_object()) special = tokens->as_object();
    auto parsed = ChatTemplate::from_source(source, std::move(special));
    if (!parsed.ok()) return parsed.error();
    entries_.emplace_front(std::move(key), std::make_shared<const ChatTemplate>(std::move(parsed).value()));
    if (entries_.size() > kEntries) entries_.pop_back();
    return entries_.front().second;
  }

 private:
  static constexpr size_t kEntries = 4;
  std::mutex mutex_;
  std::list<std::pair<std::string, std::shared_ptr<const ChatTemplate>>> entries_;
};

TemplateCache& cache() {
  static TemplateCache instance;
  return instance;
}

}  // namespace

std::string renderChatTemplate(std::string_view request) {
  auto parsed = json::parse(request);
  if (!parsed.ok() || !parsed->is_object()) {
    return invalid("renderChatTemplate(request): request must be a JSON object");
  }
  const json::Value& doc = *parsed;
  const json::Value* source = member(doc, "template");
  if (!source || !source->is_string()) return invalid("renderChatTemplate(request): \"template\" must be a string");
  const json::Value* tokens = member(doc, "specialTokens");
  if (tokens && !tokens->is_object()) return invalid("renderChatTemplate(request): \"specialTokens\" must be an object");
  auto tmpl = cache().get(source->as_string(), tokens);
  if (!tmpl.ok()) return error_json(tmpl.error());
  const json::Value* check = member(doc, "check");
  if (check && check->is_bool() && check->as_bool()) return "{\"ok\":true}";

  const json::Value* messages = member(doc, "messages");
  chat::RenderOptions options;
  if (const json::Value* tools = member(doc, "tools")) options.tools = *tools;
  if (const json::Value* gen = member(doc, "addGenerationPrompt")) options.add_generation_prompt = gen->is_bool() && gen->as_bool();
  if (const json::Value* extra = member(doc, "extra")) {
    if (!extra->is_object()) return invalid("renderChatTemplate(request): \"extra\" must be an object");
    options.extra = extra->as_object();
  }
  const json::Value* parts_field = member(doc, "parts");
  const bool parts = parts_field && parts_field->is_bool() && parts_field->as_bool();
  const json::Value none;
  const json::Value& chat = messages ? *messages : none;
  if (!parts) {
    auto text = (*tmpl)->render(chat, options);
    if (!text.ok()) return error_json(text.error());
    std::string out = "{\"prompt\":";
    json::write_string(*text, out);
    return out + "}";
  }
  auto rendered = (*tmpl)->render_prompt(chat, options);
  if (!rendered.ok()) return error_json(rendered.error());
  std::string out = "{\"prompt\":";
  json::write_string(rendered->text, out);
  {
    out += ",\"plainSpansFound\":";
    out += rendered->plain_spans_found ? "true" : "false";
    out += ",\"parts\":[";
    for (size_t k = 0; k < rendered->parts.size(); ++k) {
      out += k ? ",{\"text\":" : "{\"text\":";
      json::write_string(rendered->parts[k].text, out);
      out += rendered->parts[k].plain ? ",\"plain\":true}" : "}";
    }
    out += "]";
  }
  return out + "}";
}

}  // namespace rne::seam
