// A model's chat template, found and rendered as Hugging Face transformers does
// (apply_chat_template(messages, tools=..., add_generation_prompt=..., **kwargs)), so every host
// formats a conversation the same way whatever the model's format is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rne/chat/jinja.h"
#include "rne/chat/result.h"
#include "rne/json/json.h"

namespace rne::chat {

struct RenderOptions {
  json::Value tools;      // a JSON array of tool schemas; null: the template sees `tools` as None
  json::Value documents;  // null: None
  bool add_generation_prompt = false;  // transformers' default; a chat turn wants true
  // More template variables (enable_thinking, a template's own switches). They override the
  // special tokens (bos_token, eos_token, ...) read from tokenizer_config.json.
  json::Object extra;
  // strftime_now's time, in seconds since the epoch read as UTC (reproducible renders: tests and
  // scripts); 0: the clock, in local time, as transformers.
  int64_t now_seconds = 0;
};

// A stretch of a rendered prompt: text the template wrote (special-token text in it is those
// tokens) or, `plain`, message content from a user, the app or a tool (encode it as ordinary
// text, so a message cannot write "<|im_end|>" and end its turn).
struct PromptPart {
  std::string text;
  bool plain = false;
};

struct RenderedPrompt {
  std::string text;                // exactly what render() returns
  std::vector<PromptPart> parts;   // `text`, split; concatenated they are `text`
  bool plain_spans_found = false;  // false: one template part (the fallback, see render_prompt)
};

class ChatTemplate {
 public:
  // The template of a Hugging Face model directory, looked up as transformers does:
  // chat_template.jinja first, then "chat_template" in tokenizer_config.json (a string, or the
  // named-templates form, a list of {"name", "template"} or an object, where "default" is used).
  // Special tokens (bos_token, eos_token, ...) come from tokenizer_config.json when it exists.
  static Result<ChatTemplate> from_model_dir(const std::string& dir, const Limits& limits = {});
  // The same lookup from a tokenizer_config.json path (its directory is searched for
  // chat_template.jinja first).
  static Result<ChatTemplate> from_tokenizer_config(const std::string& path, const Limits& limits = {});
  // A template file (.jinja) and the special tokens the caller supplies.
  static Result<ChatTemplate> from_file(const std::string& path, json::Object special_tokens = {},
                                        const Limits& limits = {});
  static Result<ChatTemplate> from_source(std::string_view source, json::Object special_tokens = {},
                                          const Limits& limits = {}, std::string origin = "<string>");

  // `messages`: a JSON array of message objects (role, content as a string or a list of parts,
  // tool_calls, tool_responses, reasoning_content...); every field reaches the template.
  Result<std::string> render(const json::Value& messages, const RenderOptions& options = {}) const;

  // render(), and which stretches of the result are message content (what TypeScript's
  // ChatTemplate.renderParts gives). The content of every message but the model's own (strings,
  // "text" parts, and the strings inside Gemma 4's tool_responses) is rendered again as
  // lead_ws + OPEN + core + CLOSE + trail_ws, OPEN/CLOSE a pair of private-use characters
  // (U+E000, U+E001, or the next pair the conversation does not hold), inside the whitespace so a
  // template's `trim` still works. When removing the marks from that render gives exactly
  // render()'s text and they pair up, the marked stretches are the plain parts. Otherwise (a
  // template that compares, cuts or reorders content) the whole prompt is one template part:
  // what encoding the render as a whole gives.
  Result<RenderedPrompt> render_prompt(const json::Value& messages, const RenderOptions& options = {}) const;

  const std::string& origin() const { return origin_; }  // the file (and entry) it came from
  const json::Object& special_tokens() const { return special_tokens_; }

 private:
  Template template_;
  json::Object special_tokens_;
  std::string origin_;
};

}  // namespace rne::chat
