// A Jinja interpreter for chat templates: what Hugging Face transformers' apply_chat_template
// renders (an ImmutableSandboxedEnvironment with trim_blocks and lstrip_blocks, the
// loopcontrols extension, and its raise_exception / strftime_now / tojson / namespace), with
// Python's semantics where output depends on them (str() of values, tojson, number formatting,
// Undefined). Values come in and out as rne_json values.
//
// Written here rather than vendored so the core builds with nothing but a C++17 compiler, like
// rne_json. Not a general Jinja: no inheritance, includes, imports, autoescape or call blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rne/chat/result.h"
#include "rne/json/json.h"

namespace rne::chat {

// Bounds that keep a hostile template or input from exhausting the process; exceeding one is a
// kLimit error.
struct Limits {
  size_t max_template_bytes = 1 << 20;  // 1 MiB of template source
  size_t max_output_bytes = 32u << 20;  // 32 MiB rendered
  int max_nesting = 128;                // parser nesting and input JSON depth
  int max_call_depth = 200;             // macro recursion (Python would stop near 1000 frames)
  // Stack the evaluator may use below render()'s frame (a recursive macro takes a few KB a
  // level); render() on a thread needs this much stack plus its caller's.
  size_t max_stack_bytes = 384u << 10;
  size_t max_steps = 2'000'000;         // evaluated nodes, loop iterations and element visits, in all
  // Bytes one string, or one list's or dict's slots and the strings they hold, may take; checked
  // before a value is built, whatever the template multiplies, joins, pads, prints or copies.
  size_t max_value_bytes = 64u << 20;
  // Bytes of such values one render may create, in all (freed ones included): what bounds its
  // memory and the time spent copying.
  size_t max_alloc_bytes = size_t{1} << 30;
  int max_expression_depth = 1000;      // operands chained in one expression (a ~ b ~ c ...)
  int max_render_ms = 5000;             // wall-clock time of one render; 0: no deadline
};

namespace detail {
struct Program;
}

class Template {
 public:
  // Parses `source` (newlines normalised and one trailing newline dropped, as Jinja does).
  static Result<Template> parse(std::string_view source, const Limits& limits = {});

  // Renders with `context` (a JSON object) as the template's variables. Integral JSON numbers
  // are Python ints and the others floats (JSON text "3.0" reads as 3, as in JavaScript).
  // `now_seconds`: strftime_now's time (UTC), or 0 for the clock (local time).
  Result<std::string> render(const json::Value& context, int64_t now_seconds = 0) const;

 private:
  std::shared_ptr<const detail::Program> program_;
  Limits limits_;
};

}  // namespace rne::chat
