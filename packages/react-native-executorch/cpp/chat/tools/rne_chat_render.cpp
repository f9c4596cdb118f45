// rne_chat_render: renders conversations with a chat template, as transformers'
// apply_chat_template(**case) would, for scripts and the parity tests.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <string>

#include "rne/chat/chat_template.h"
#include "rne/json/file.h"
#include "rne/json/json.h"

namespace {

constexpr const char* kUsage = R"(usage: rne_chat_render (--template FILE | --model-dir DIR) --input FILE [--batch]

Renders a conversation with a chat template and prints the text (no newline added).
  --template FILE   a Jinja chat template file; special tokens come from the input
  --model-dir DIR   a model directory: chat_template.jinja, else tokenizer_config.json's
                    "chat_template", with that file's special tokens (bos_token, ...)
  --input FILE      JSON ("-": stdin) with apply_chat_template's arguments:
                    {"messages": [...], "tools": [...], "add_generation_prompt": true, ...};
                    every other key (enable_thinking, bos_token, ...) is a template variable
  --batch           the input is a JSON array of such cases; prints a JSON array with, per case,
                    {"prompt": TEXT} or {"error": {"kind", "message", "line", "column"}}
  --now SECONDS     strftime_now's time, seconds since the epoch (UTC), for reproducible
                    renders; default: the clock
  --parts           with --batch: also "parts", [{"text", "plain"}...] (which stretches are
                    message content), and "plain_spans_found" (ChatTemplate::render_prompt)
A template error exits with status 1 and prints it to stderr (in --batch mode, a template that
does not parse or a render error is that case's "error").
)";

[[noreturn]] void die(const std::string& message) {
  std::cerr << "rne_chat_render: " << message << "\n";
  std::exit(2);
}

rne::chat::Result<rne::chat::RenderedPrompt> render_case(const rne::chat::ChatTemplate& tmpl,
                                                         const rne::json::Value& c, bool parts, int64_t now) {
  if (!c.is_object()) return rne::chat::Error{rne::chat::ErrorKind::kInvalidInput, "a case must be a JSON object"};
  rne::json::Value messages;
  rne::chat::RenderOptions options;
  options.now_seconds = now;
  for (const auto& [key, value] : c.as_object()) {
    if (key == "messages") {
      messages = value;
    } else if (key == "tools") {
      options.tools = value;
    } else if (key == "documents") {
      options.documents = value;
    } else if (key == "add_generation_prompt") {
      options.add_generation_prompt = value.is_bool() && value.as_bool();
    } else {
      options.extra.emplace_back(key, value);
    }
  }
  if (parts) return tmpl.render_prompt(messages, options);
  auto text = tmpl.render(messages, options);
  if (!text.ok()) return text.error();
  rne::chat::RenderedPrompt out;
  out.text = std::move(text).value();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string template_file;
  std::string model_dir;
  std::string input;
  bool batch = false;
  bool parts = false;
  int64_t now = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(arg + " needs a value (see --help)");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--template") {
      template_file = value();
    } else if (arg == "--model-dir") {
      model_dir = value();
    } else if (arg == "--input") {
      input = value();
    } else if (arg == "--batch") {
      batch = true;
    } else if (arg == "--parts") {
      parts = true;
    } else if (arg == "--now") {
      const std::string text = value();
      char* end = nullptr;
      now = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || *end != '\0' || now <= 0) die("--now needs a positive number of seconds, got '" + text + "'");
    } else {
      die("unknown argument " + arg + " (see --help)");
    }
  }
  if (template_file.empty() == model_dir.empty() || input.empty()) {
    die("give --input and one of --template or --model-dir (see --help)");
  }
  auto tmpl = template_file.empty() ? rne::chat::ChatTemplate::from_model_dir(model_dir)
                                    : rne::chat::ChatTemplate::from_file(template_file);
  std::string text;
  if (input == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else if (auto read = rne::json::read_regular_file(input, 256u << 20); read.ok()) {
    text = std::move(read).value();
  } else {
    die(read.error().message);
  }
  auto parsed = rne::json::parse(text);
  if (!parsed.ok()) {
    die(input + ": not valid JSON at byte " + std::to_string(parsed.error().offset) + ": " +
        parsed.error().message);
  }
  const rne::json::Value& doc = *parsed;
  if (!tmpl.ok() && (!batch || tmpl.error().code != rne::chat::ErrorKind::kSyntax)) {
    std::cerr << "rne_chat_render: " << tmpl.error().to_string() << "\n";
    return 1;
  }
  if (!batch) {
    auto rendered = render_case(*tmpl, doc, false, now);
    if (!rendered.ok()) {
      std::cerr << "rne_chat_render: " << rendered.error().to_string() << "\n";
      return 1;
    }
    std::cout << rendered->text;
    return 0;
  }
  if (!doc.is_array()) die("--batch expects a JSON array of cases");
  std::string out = "[";
  for (size_t k = 0; k < doc.as_array().size(); ++k) {
    if (k) out += ",\n";
    // A template that does not parse fails every case, as it would fail every Python render.
    auto rendered = tmpl.ok() ? render_case(*tmpl, doc.as_array()[k], parts, now)
                              : rne::chat::Result<rne::chat::RenderedPrompt>(tmpl.error());
    if (rendered.ok()) {
      out += "{\"prompt\":";
      rne::json::write_string(rendered->text, out);
      if (parts) {
        out += ",\"plain_spans_found\":";
        out += rendered->plain_spans_found ? "true" : "false";
        out += ",\"parts\":[";
        for (size_t p = 0; p < rendered->parts.size(); ++p) {
          out += p ? ",{\"text\":" : "{\"text\":";
          rne::json::write_string(rendered->parts[p].text, out);
          out += rendered->parts[p].plain ? ",\"plain\":true}" : ",\"plain\":false}";
        }
        out += "]";
      }
    } else {
      const auto& e = rendered.error();
      out += "{\"error\":{\"kind\":\"";
      out += rne::chat::error_kind_name(e.code);
      out += "\",\"message\":";
      rne::json::write_string(e.message, out);
      out += ",\"line\":" + std::to_string(e.line) + ",\"column\":" + std::to_string(e.column) + "}";
    }
    out += "}";
  }
  std::cout << out << "]\n";
  return 0;
}
