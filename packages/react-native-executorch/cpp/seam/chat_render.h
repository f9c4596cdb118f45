// Chat templates rendered for TypeScript (NativeExecutorch.renderChatTemplate in
// src/native/seam.ts): the C++ engine of cpp/chat, so the phone (JSI), the Node addon, the CLI
// and the tests render a model's template with one engine, as transformers'
// apply_chat_template does. JSON text in and out: a host only passes strings.
#pragma once

#include <string>
#include <string_view>

namespace rne::seam {

// `request`: {"template": TEXT, "specialTokens": {...}, "messages": [...], "tools": [...],
// "addGenerationPrompt": BOOL, "extra": {...}, "parts": BOOL}, or {"template": TEXT,
// "check": true} to parse only. The answer: {"prompt": TEXT} (with "parts":
// [{"text", "plain"}...] and "plainSpansFound" when "parts" was asked), {"ok": true} for a
// check, or {"error": {"kind", "message", "line", "column"}}. Parsed templates are cached (the
// last few sources), so rendering every turn does not parse again.
std::string renderChatTemplate(std::string_view request);

}  // namespace rne::seam
