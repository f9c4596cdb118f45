#include "chat_template.h"

#include <fstream>
#include <sstream>

#include "rne/json/json.h"

namespace rne::host {

using runner::Error;
using runner::ErrorCode;
using runner::Result;

namespace {
constexpr const char* kImStart = "<|im_start|>";
constexpr const char* kImEnd = "<|im_end|>";
constexpr const char* kTurnStart = "<start_of_turn>";
constexpr const char* kTurnEnd = "<end_of_turn>";
}  // namespace

Result<ChatTemplate> ChatTemplate::from_tokenizer_config(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Error{ErrorCode::kNotFound, path + ": no such file or not readable"};
  std::stringstream buffer;
  buffer << file.rdbuf();
  json::Value root;
  json::ParseError parse_error;
  if (!json::parse(buffer.str(), root, parse_error)) {
    return Error{ErrorCode::kInvalidArgument,
                 path + ": not valid JSON at byte " + std::to_string(parse_error.offset) + ": " +
                     parse_error.message};
  }
  const auto* tmpl = root.find("chat_template");
  if (tmpl == nullptr || !tmpl->is_string()) {
    return Error{ErrorCode::kInvalidArgument,
                 path + ": has no \"chat_template\" string; pass --raw to send the prompt "
                        "without a chat template"};
  }
  // bos_token is either "<bos>" or {"content": "<bos>", ...}.
  std::string bos;
  if (const auto* b = root.find("bos_token")) {
    if (b->is_string()) {
      bos = b->as_string();
    } else if (const auto* content = b->find("content"); content && content->is_string()) {
      bos = content->as_string();
    }
  }
  auto result = from_template(tmpl->as_string(), bos);
  if (!result.ok()) return Error{result.error().code, path + ": " + result.error().message};
  return result;
}

Result<ChatTemplate> ChatTemplate::from_template(const std::string& chat_template,
                                                 const std::string& bos_token) {
  ChatTemplate t;
  if (chat_template.find(kTurnStart) != std::string::npos) {
    t.format_ = Format::kGemma;
    // Gemma templates write bos_token themselves at the start of the conversation.
    if (chat_template.find("bos_token") != std::string::npos) t.bos_ = bos_token;
    return t;
  }
  if (chat_template.find(kImStart) != std::string::npos) {
    t.format_ = Format::kChatML;
    // A template that injects a default system turn has it as a literal:
    // '<|im_start|>system\n<text><|im_end|>'.
    const std::string marker = std::string(kImStart) + "system\n";
    const size_t at = chat_template.find(marker);
    if (at != std::string::npos) {
      const size_t begin = at + marker.size();
      const size_t end = chat_template.find(kImEnd, begin);
      const std::string text = chat_template.substr(begin, end - begin);
      // Only a literal; "... + message['content'] ..." is the template's own system turn.
      if (end != std::string::npos && text.find('\'') == std::string::npos &&
          text.find('{') == std::string::npos) {
        t.default_system_ = text;
      }
    }
    return t;
  }
  return Error{ErrorCode::kInvalidArgument,
               "unsupported chat template: only ChatML (<|im_start|>, SmolLM2) and Gemma "
               "(<start_of_turn>) formats are known; pass --raw to send the prompt as is"};
}

const char* ChatTemplate::format_name() const {
  return format_ == Format::kGemma ? "gemma" : "chatml";
}

std::string ChatTemplate::render(const std::vector<Message>& messages) const {
  std::string out;
  if (format_ == Format::kChatML) {
    if (!default_system_.empty() && (messages.empty() || messages[0].role != "system")) {
      out += std::string(kImStart) + "system\n" + default_system_ + kImEnd + "\n";
    }
    for (const auto& m : messages) out += kImStart + m.role + "\n" + m.content + kImEnd + "\n";
    out += std::string(kImStart) + "assistant\n";
    return out;
  }
  // Gemma has user and model turns; a system message is folded into the first user turn.
  out += bos_;
  std::string system;
  for (const auto& m : messages) {
    if (m.role == "system") {
      system = m.content;
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    std::string content = m.content;
    if (!system.empty()) {
      content = system + "\n\n" + content;
      system.clear();
    }
    out += kTurnStart + role + "\n" + content + kTurnEnd + "\n";
  }
  out += std::string(kTurnStart) + "model\n";
  return out;
}

std::string ChatTemplate::next_turn(const std::string& user_message, bool turn_closed) const {
  if (format_ == Format::kChatML) {
    return (turn_closed ? "" : kImEnd) + std::string("\n") + kImStart + "user\n" + user_message +
           kImEnd + "\n" + kImStart + "assistant\n";
  }
  return (turn_closed ? "" : kTurnEnd) + std::string("\n") + kTurnStart + "user\n" +
         user_message + kTurnEnd + "\n" + kTurnStart + "model\n";
}

}  // namespace rne::host
