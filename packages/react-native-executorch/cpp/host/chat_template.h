// A small formatter for the two chat formats the models we ship use, chosen from what
// tokenizer_config.json's `chat_template` declares. It is not a Jinja interpreter: it
// recognises the format by its markers and writes the same text the template would.
//   ChatML (SmolLM2):  <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
//   Gemma:             <bos><start_of_turn>user\ncontent<end_of_turn>\n<start_of_turn>model\n
#pragma once

#include <string>
#include <vector>

#include "rne/runner/result.h"

namespace rne::host {

struct Message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

class ChatTemplate {
 public:
  enum class Format { kChatML, kGemma };

  // Reads `chat_template` (and `bos_token`) from a tokenizer_config.json. An unrecognised
  // template is an error that says which formats are supported.
  static runner::Result<ChatTemplate> from_tokenizer_config(const std::string& path);
  // From the template text itself (what from_tokenizer_config reads).
  static runner::Result<ChatTemplate> from_template(const std::string& chat_template,
                                                    const std::string& bos_token);

  Format format() const { return format_; }
  const char* format_name() const;

  // The whole conversation, as apply_chat_template(messages, add_generation_prompt=True).
  std::string render(const std::vector<Message>& messages) const;

  // Text to append to a conversation already in the KV cache, for the next user message.
  // `turn_closed`: the previous assistant turn ended with its end-of-turn token (EOS), which
  // the runner feeds itself; otherwise the end-of-turn marker is written here.
  std::string next_turn(const std::string& user_message, bool turn_closed) const;

 private:
  Format format_ = Format::kChatML;
  std::string bos_;             // Gemma: written at the start of the conversation
  std::string default_system_;  // ChatML: the system message the template adds when none given
};

}  // namespace rne::host
