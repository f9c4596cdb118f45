#include "chat_template.h"

#include <gtest/gtest.h>

namespace rne::host {
namespace {

// SmolLM2-135M-Instruct's template (as imported from the GGUF by rne_tools.gguf_import).
const char* kSmolLM2Template =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

// The shape of Gemma's template: bos_token, then <start_of_turn>role ... <end_of_turn>.
const char* kGemmaTemplate =
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\n' + "
    "message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{'<start_of_turn>model\n'}}{% endif %}";

TEST(ChatTemplateTest, ChatMLAddsTheTemplatesDefaultSystemMessage) {
  auto t = ChatTemplate::from_template(kSmolLM2Template, "<|im_start|>");
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->format(), ChatTemplate::Format::kChatML);
  EXPECT_EQ(t->render({{"user", "What is the capital of France?"}}),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, ChatMLUsesAGivenSystemMessageInstead) {
  auto t = ChatTemplate::from_template(kSmolLM2Template, "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->render({{"system", "Be brief."}, {"user", "Hi"}}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, NextTurnContinuesTheRenderedConversationExactly) {
  auto t = ChatTemplate::from_template(kSmolLM2Template, "");
  ASSERT_TRUE(t.ok());
  const std::string first = t->render({{"user", "A"}});
  // The cache then holds the answer and, when the turn closed with EOS, the <|im_end|> token.
  const std::string cached = first + "Paris.<|im_end|>";
  EXPECT_EQ(cached + t->next_turn("B", /*turn_closed=*/true),
            t->render({{"user", "A"}, {"assistant", "Paris."}, {"user", "B"}}));
  EXPECT_EQ(first + "Paris." + t->next_turn("B", /*turn_closed=*/false),
            t->render({{"user", "A"}, {"assistant", "Paris."}, {"user", "B"}}));
}

TEST(ChatTemplateTest, GemmaWritesBosAndFoldsTheSystemMessageIntoTheFirstUserTurn) {
  auto t = ChatTemplate::from_template(kGemmaTemplate, "<bos>");
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->format(), ChatTemplate::Format::kGemma);
  EXPECT_EQ(t->render({{"system", "Be brief."}, {"user", "Hi"}}),
            "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  const std::string cached = t->render({{"user", "Hi"}}) + "Hello!<end_of_turn>";
  EXPECT_EQ(cached + t->next_turn("Bye", true),
            t->render({{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}}));
}

TEST(ChatTemplateTest, UnknownTemplatesAndMissingFilesAreErrorsThatSayWhatToDo) {
  auto unknown = ChatTemplate::from_template("{{ messages }}", "");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("--raw"), std::string::npos);
  auto missing = ChatTemplate::from_tokenizer_config("/nonexistent/tokenizer_config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/tokenizer_config.json"), std::string::npos);
}

}  // namespace
}  // namespace rne::host
