// GENERATED FILE: do not edit. Source: model-registry/chat_formats/gemma4.yaml.
// Regenerate with: .venv/bin/python tools/gen_registry.py
#pragma once

#include <array>
#include <string_view>

namespace rne::chat {

// The markers Gemma 4's chat template writes (special tokens of its tokenizer).
inline constexpr std::string_view kGemma4ToolCallOpen{"<|tool_call>"};
inline constexpr std::string_view kGemma4ToolCallClose{"<tool_call|>"};
inline constexpr std::string_view kGemma4ToolCallQuote{"<|\"|>"};
inline constexpr std::string_view kGemma4ToolCallResponseOpen{"<|tool_response>"};
inline constexpr std::string_view kGemma4ThoughtOpen{"<|channel>thought\n"};
inline constexpr std::string_view kGemma4ThoughtClose{"<channel|>"};
inline constexpr std::array<std::string_view, 2> kGemma4ThoughtTokens{std::string_view{"<|channel>"}, std::string_view{"<channel|>"}};
inline constexpr std::string_view kGemma4MediaPlaceholdersImage{"<|image|>"};
inline constexpr std::string_view kGemma4MediaPlaceholdersAudio{"<|audio|>"};

}  // namespace rne::chat
