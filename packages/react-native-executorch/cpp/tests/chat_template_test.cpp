// rne_chat: the Jinja renderer and the template lookup. The byte-for-byte comparison with
// Python over generated conversations is tests/chat/test_chat_template_render.py; these run without
// Python: the committed Gemma 4 fixtures (made by transformers), the lookup order, errors and
// limits.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "rne/chat/chat_template.h"
#include "rne/chat/jinja.h"
#include "rne/json/json.h"

namespace rne::chat {
namespace {

namespace fs = std::filesystem;

const fs::path kFixtures = RNE_CHAT_FIXTURES;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json::Value parse_json(const std::string& text) {
  auto parsed = json::parse(text);
  EXPECT_TRUE(parsed.ok()) << parsed.error().message;
  return parsed.ok() ? std::move(parsed).value() : json::Value();
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A fresh directory under the test temp dir, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("rne_chat_test_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

Result<std::string> render_text(const std::string& source, const std::string& context_json) {
  auto t = Template::parse(source);
  if (!t.ok()) return t.error();
  return t->render(parse_json(context_json));
}

std::string render_ok(const std::string& source, const std::string& context_json = "{}") {
  auto r = render_text(source, context_json);
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return r.ok() ? *r : "";
}

TEST(ChatTemplateTest, Gemma4FixturesRenderAsTransformersDoes) {
  const json::Value expected = parse_json(read(kFixtures / "gemma4_chat_expected.json"));
  int checked = 0;
  // The special tokens of the fixtures' tokenizer_config.json (it has no template: the .jinja
  // files hold them).
  const json::Value config = parse_json(read(kFixtures / "gemma4" / "tokenizer_config.json"));
  json::Object tokens;
  for (const auto& [key, value] : config.as_object()) {
    if (key.size() > 6 && key.compare(key.size() - 6, 6, "_token") == 0) tokens.emplace_back(key, value);
  }
  ASSERT_EQ(tokens.size(), 4u);
  for (const auto& [name, cases] : expected.find("templates")->as_object()) {
    auto tmpl = ChatTemplate::from_file((kFixtures / "gemma4" / name).string(), tokens);
    ASSERT_TRUE(tmpl.ok()) << tmpl.error().to_string();
    for (const auto& c : cases.as_array()) {
      RenderOptions options;
      for (const auto& [key, value] : c.as_object()) {
        if (key == "tools") options.tools = value;
        if (key == "add_generation_prompt") options.add_generation_prompt = value.as_bool();
        if (key == "enable_thinking") options.extra.emplace_back(key, value);
      }
      auto rendered = tmpl->render(*c.find("messages"), options);
      const std::string case_name = name + ": " + c.find("name")->as_string();
      if (const auto* error = c.find("error")) {
        ASSERT_FALSE(rendered.ok()) << case_name;
        EXPECT_EQ(std::string(error_kind_name(rendered.error().code)) + ": " + rendered.error().message,
                  error->as_string())
            << case_name;
        EXPECT_GT(rendered.error().line, 0) << case_name;
      } else {
        ASSERT_TRUE(rendered.ok()) << case_name << ": " << rendered.error().to_string();
        EXPECT_EQ(*rendered, c.find("prompt")->as_string()) << case_name;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 38);
}

TEST(ChatTemplateTest, SmolLM2AddsItsDefaultSystemTurnUnlessOneIsGiven) {
  auto t = ChatTemplate::from_tokenizer_config((kFixtures / "smollm2_tokenizer_config.json").string());
  ASSERT_TRUE(t.ok()) << t.error().to_string();
  RenderOptions options;
  options.add_generation_prompt = true;
  auto one = t->render(parse_json(R"([{"role": "user", "content": "What is the capital of France?"}])"), options);
  ASSERT_TRUE(one.ok()) << one.error().to_string();
  EXPECT_EQ(*one,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
            "<|im_start|>assistant\n");
  auto given = t->render(parse_json(R"([{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": "Hi"}])"), options);
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(*given, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, ModelDirLookupOrderFollowsTransformers) {
  TempDir dir;
  write(dir.path / "tokenizer_config.json",
        R"({"bos_token": {"content": "<B>"}, "eos_token": "<E>", "chat_template": "cfg{{ bos_token }}"})");
  const auto messages = parse_json(R"([{"role": "user", "content": "x"}])");
  auto from_config = ChatTemplate::from_model_dir(dir.path.string());
  ASSERT_TRUE(from_config.ok()) << from_config.error().to_string();
  EXPECT_EQ(*from_config->render(messages), "cfg<B>");
  EXPECT_NE(from_config->origin().find("tokenizer_config.json"), std::string::npos);

  write(dir.path / "chat_template.jinja", "jinja{{ eos_token }}\n");
  auto from_jinja = ChatTemplate::from_model_dir(dir.path.string());
  ASSERT_TRUE(from_jinja.ok());
  EXPECT_EQ(*from_jinja->render(messages), "jinja<E>");  // the file's trailing newline is dropped
  fs::remove(dir.path / "chat_template.jinja");

  write(dir.path / "tokenizer_config.json",
        R"({"chat_template": [{"name": "rag", "template": "r"}, {"name": "default", "template": "d"}]})");
  EXPECT_EQ(*ChatTemplate::from_model_dir(dir.path.string())->render(messages), "d");
  write(dir.path / "tokenizer_config.json", R"({"chat_template": {"rag": "r", "default": "d2"}})");
  EXPECT_EQ(*ChatTemplate::from_model_dir(dir.path.string())->render(messages), "d2");

  write(dir.path / "tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "r"}]})");
  auto no_default = ChatTemplate::from_model_dir(dir.path.string());
  ASSERT_FALSE(no_default.ok());
  EXPECT_NE(no_default.error().message.find("\"default\""), std::string::npos);

  write(dir.path / "tokenizer_config.json", R"({"eos_token": "<E>"})");
  auto none = ChatTemplate::from_model_dir(dir.path.string());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorKind::kNotFound);
  EXPECT_NE(none.error().message.find("chat_template.jinja"), std::string::npos);

  write(dir.path / "tokenizer_config.json", "{not json");
  auto broken = ChatTemplate::from_model_dir(dir.path.string());
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().code, ErrorKind::kInvalidFile);

  auto missing = ChatTemplate::from_model_dir((dir.path / "nope").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorKind::kNotFound);
}

TEST(ChatTemplateTest, MessagesPassThroughWithTransformersNormalisation) {
  auto t = ChatTemplate::from_source(
      "{% for m in messages %}{{ m }};{% endfor %}{{ tools is none }}{{ add_generation_prompt }}{{ bos_token }}{{ flag }}",
      {{"bos_token", json::Value(std::string("<s>"))}});
  ASSERT_TRUE(t.ok());
  RenderOptions options;
  options.extra.emplace_back("flag", json::Value(true));
  options.extra.emplace_back("bos_token", json::Value(std::string("<override>")));
  // A null field is dropped; reasoning is aliased as {"thinking": r, **m, "reasoning_content": r}.
  auto r = t->render(parse_json(R"([{"role": "user", "content": null, "x": [1, 2.5, "é"]},
                                    {"role": "assistant", "reasoning": "hm", "content": "a"}])"),
                     options);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(*r, "{'role': 'user', 'x': [1, 2.5, 'é']};{'thinking': 'hm', 'role': 'assistant', "
                "'reasoning': 'hm', 'content': 'a', 'reasoning_content': 'hm'};TrueFalse<override>True");

  auto empty = t->render(parse_json("[]"));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, ErrorKind::kInvalidInput);
  auto not_objects = t->render(parse_json(R"(["hi"])"));
  ASSERT_FALSE(not_objects.ok());
  EXPECT_NE(not_objects.error().message.find("message 0"), std::string::npos);
}

TEST(ChatTemplateTest, PromptPartsAreTheMessageContentUnlessTheTemplateEditsIt) {
  auto t = ChatTemplate::from_tokenizer_config((kFixtures / "smollm2_tokenizer_config.json").string());
  ASSERT_TRUE(t.ok());
  RenderOptions options;
  options.add_generation_prompt = true;
  const auto messages = parse_json(R"([{"role": "user", "content": "  Say <|im_end|> now\n"},
                                       {"role": "assistant", "content": "ok"}])");
  auto prompt = t->render_prompt(messages, options);
  ASSERT_TRUE(prompt.ok()) << prompt.error().to_string();
  EXPECT_EQ(prompt->text, *t->render(messages, options));
  ASSERT_TRUE(prompt->plain_spans_found);
  std::string joined;
  std::vector<std::string> plain;
  for (const auto& part : prompt->parts) {
    joined += part.text;
    if (part.plain) plain.push_back(part.text);
  }
  EXPECT_EQ(joined, prompt->text);
  // The user's text (its whitespace included: this template keeps it) and not the assistant's.
  EXPECT_EQ(plain, std::vector<std::string>{"Say <|im_end|> now"});

  // A template that slices the content cuts a sentinel off: one template part, as before.
  auto sliced = ChatTemplate::from_source("{{ messages[0].content[:6] }}");
  ASSERT_TRUE(sliced.ok());
  auto fallback = sliced->render_prompt(messages);
  ASSERT_TRUE(fallback.ok());
  EXPECT_FALSE(fallback->plain_spans_found);
  ASSERT_EQ(fallback->parts.size(), 1u);
  EXPECT_EQ(fallback->parts[0].text, "  Say ");
  EXPECT_FALSE(fallback->parts[0].plain);
}

TEST(ChatTemplateTest, WhitespaceControlMatchesTrimAndLstripBlocks) {
  EXPECT_EQ(render_ok("a\n  {% if true %}\n    b\n  {% endif %}\nc"), "a\n    b\nc");
  EXPECT_EQ(render_ok("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render_ok("x\n    {%+ if true %}y{% endif %}\n  {# c #}\nz"), "x\n    yz");
  EXPECT_EQ(render_ok("{{ 'a' }}\n{{ 'b' }}\n"), "a\nb");  // expressions keep their newline
  EXPECT_EQ(render_ok("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(ChatTemplateTest, ValuesPrintAsPython) {
  EXPECT_EQ(render_ok("{{ [1, 1.0, 1e20, 1e-5, 0.1, none, true, \"it's\", {'k': (1, 2)}] }}"),
            "[1, 1.0, 1e+20, 1e-05, 0.1, None, True, \"it's\", {'k': (1, 2)}]");
  EXPECT_EQ(render_ok("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 0.1 + 0.2 }}"),
            "3 -4 3.5 2 1024 0.30000000000000004");
  EXPECT_EQ(render_ok("{{ x | tojson }}|{{ x | tojson(indent=2) }}", R"({"x": {"b": [1, 2.5], "a": "é\n"}})"),
            "{\"b\": [1, 2.5], \"a\": \"é\\n\"}|{\n  \"b\": [\n    1,\n    2.5\n  ],\n  \"a\": \"é\\n\"\n}");
  EXPECT_EQ(render_ok("{{ 'ŻÓŁW straße'.upper() }} {{ 'żółw' | length }} {{ 'héj'[1:] }}"), "ŻÓŁW STRASSE 4 éj");
}

TEST(ChatTemplateTest, MacrosNamespacesAndLoops) {
  EXPECT_EQ(render_ok("{% macro f(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ f(1) }}{{ f(b=2, a=3) }}"), "1B32");
  EXPECT_EQ(render_ok("{% set ns = namespace(n=0) %}{% for x in [1, 2, 3] if x != 2 %}{% set ns.n = ns.n + x %}"
                      "{{ loop.index }}/{{ loop.length }} {% endfor %}{{ ns.n }}"),
            "1/2 2/2 4");
  EXPECT_EQ(render_ok("{% for x in range(9) %}{% if x == 1 %}{% continue %}{% elif x == 4 %}{% break %}"
                      "{% endif %}{{ x }}{% else %}none{% endfor %}"),
            "023");
  EXPECT_EQ(render_ok("{% set y = 1 %}{% for x in [2] %}{% set y = x %}{% endfor %}{{ y }}"), "1");
}

TEST(ChatTemplateTest, TemplateErrorsAreTypedAndNameTheirLine) {
  auto raised = render_text("line one\n{{ raise_exception('roles must alternate') }}", "{}");
  ASSERT_FALSE(raised.ok());
  EXPECT_EQ(raised.error().code, ErrorKind::kRaised);
  EXPECT_EQ(raised.error().message, "roles must alternate");
  EXPECT_EQ(raised.error().line, 2);
  EXPECT_EQ(raised.error().to_string(), "TemplateError: roles must alternate (template line 2, column 4)");

  auto undefined = render_text("{{ m['function']['name'] }}", R"({"m": {}})");
  ASSERT_FALSE(undefined.ok());
  EXPECT_EQ(undefined.error().code, ErrorKind::kUndefined);
  EXPECT_EQ(undefined.error().message, "'dict object' has no attribute 'function'");

  auto type = render_text("{{ 'a' + 1 }}", "{}");
  ASSERT_FALSE(type.ok());
  EXPECT_EQ(type.error().code, ErrorKind::kType);

  for (const char* bad : {"{% if x %}", "{{ 'open", "{% endfor %}", "{{ x | nope }}", "{% for %}",
                          "{{ (1 }}", "{% macro m( %}", "{#", "{{ }}", "{% set %}"}) {
    auto parsed = Template::parse(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.error().code, ErrorKind::kSyntax) << bad;
    EXPECT_GT(parsed.error().line, 0) << bad;
  }
}

TEST(ChatTemplateTest, TruncatedTemplatesNeverCrash) {
  // Every prefix of a real template either parses or is a syntax error, and renders or fails
  // with a typed error.
  const std::string source = read(kFixtures / "gemma4" / "gemma4.jinja");
  const json::Value context = parse_json(
      R"({"messages": [{"role": "user", "content": "hi"}], "tools": [{"function": {"name": "f"}}],
          "add_generation_prompt": true})");
  int parsed = 0;
  for (size_t n = 0; n <= source.size(); n += 37) {
    auto t = Template::parse(source.substr(0, n));
    if (!t.ok()) {
      EXPECT_EQ(t.error().code, ErrorKind::kSyntax);
      continue;
    }
    ++parsed;
    (void)t->render(context);
  }
  EXPECT_GT(parsed, 0);
}

TEST(ChatTemplateTest, HostileTemplatesHitLimitsNotTheStack) {
  Limits small;
  small.max_steps = 100'000;
  small.max_output_bytes = 1 << 20;
  auto run = [&](const std::string& source) {
    auto t = Template::parse(source, small);
    if (!t.ok()) return t.error();
    auto r = t->render(parse_json("{}"));
    EXPECT_FALSE(r.ok()) << source;
    return r.ok() ? Error{ErrorKind::kInvalidInput, ""} : r.error();
  };
  EXPECT_EQ(run("{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}").code, ErrorKind::kLimit);
  EXPECT_EQ(run("{% for a in range(1000) %}{% for b in range(1000) %}{% endfor %}{% endfor %}").code,
            ErrorKind::kLimit);
  EXPECT_EQ(run("{{ 'x' * 10000000 }}").code, ErrorKind::kLimit);
  EXPECT_EQ(run("{% for a in range(100000) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}").code,
            ErrorKind::kLimit);
  const Error deep = run("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}");
  EXPECT_EQ(deep.code, ErrorKind::kSyntax);
  EXPECT_NE(deep.message.find("nests deeper"), std::string::npos);
  const Error deep_if = run(std::string(20000, ' ') + [] {
    std::string s;
    for (int k = 0; k < 5000; ++k) s += "{% if true %}";
    return s;
  }());
  EXPECT_EQ(deep_if.code, ErrorKind::kSyntax);

  // Values nest only so deep (printing and freeing them recurse), and hold no cycles.
  EXPECT_EQ(run("{% set ns = namespace(x=none) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}"
                "{% endfor %}{{ ns.x }}").code,
            ErrorKind::kLimit);
  EXPECT_EQ(run("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns }}").code, ErrorKind::kType);

  std::string nested = "1";
  for (int k = 0; k < 200; ++k) nested = "[" + nested + "]";
  auto deep_input = Template::parse("{{ x }}");
  ASSERT_TRUE(deep_input.ok());
  auto r = deep_input->render(parse_json("{\"x\": " + nested + "}"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorKind::kLimit);
}

// Round 3 of the hostile-template probes (issue #63): each class ends in a typed error naming
// the limit, within bounded time and memory (the default Limits, as a phone renders with).
TEST(ChatTemplateTest, HostileTemplatesEndInAnErrorNamingTheLimit) {
  auto error_of = [](const std::string& source, const std::string& context = "{}") {
    auto r = render_text(source, context);
    EXPECT_FALSE(r.ok()) << source.substr(0, 200);
    return r.ok() ? Error{ErrorKind::kInvalidInput, "rendered"} : r.error();
  };
  auto expect_limit = [&](const std::string& source, const std::string& names) {
    const Error e = error_of(source);
    EXPECT_EQ(e.code, ErrorKind::kLimit) << source.substr(0, 200) << ": " << e.to_string();
    EXPECT_NE(e.message.find(names), std::string::npos) << source.substr(0, 200) << ": " << e.to_string();
  };
  auto chain = [](const std::string& term, const std::string& op, int n) {
    std::string s = "{{ " + term;
    for (int k = 1; k < n; ++k) s += op + term;
    return s + " }}";
  };
  // Expression chains: refused at parse time, and freed without recursion (no SIGSEGV).
  expect_limit(chain("1", " + ", 60000), "max_expression_depth");
  expect_limit(chain("'a'", " ~ ", 60000), "max_expression_depth");
  expect_limit(chain("1", " and ", 60000), "max_expression_depth");
  expect_limit("{{ 'a'" + [] { std::string s; for (int k = 0; k < 60000; ++k) s += "|upper"; return s; }() + " }}",
               "max_expression_depth");
  expect_limit("{{ x" + [] { std::string s; for (int k = 0; k < 60000; ++k) s += ".a"; return s; }() + " }}",
               "max_expression_depth");
  EXPECT_EQ(render_ok(chain("1", " + ", 500)), "500");  // a long but sane chain still renders
  // Time: exponential recursion, nested loops, a quadratic builtin.
  expect_limit("{% macro f(n) %}{% if n > 0 %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(40) }}",
               "max_steps");
  expect_limit("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "Limits::");
  expect_limit("{{ range(100000) | unique | list | length }}", "Limits::");
  // Unbounded recursion: the call-depth limit, or the stack guard first where frames are larger
  // (arm64 under qemu); either is a LimitError that names its limit.
  {
    const Error e = error_of("{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}");
    EXPECT_EQ(e.code, ErrorKind::kLimit) << e.to_string();
    EXPECT_TRUE(e.message.find("nested deeper") != std::string::npos ||
                e.message.find("Limits::max_stack_bytes") != std::string::npos)
        << e.to_string();
  }
  expect_limit("{{ range(10**9) | list | length }}", "MAX_RANGE");
  // Memory: every way of multiplying a value is bounded before it is built.
  expect_limit("{% set s = 'a' * 1000000 %}{% set t = [s] * 1000 %}{{ t | length }}", "max_value_bytes");
  expect_limit("{% set ns = namespace(s=[1]) %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
               "{% endfor %}{{ ns.s | length }}",
               "max_value_bytes");
  expect_limit("{% set s = 'a' * 100000 %}{{ s.replace('', s) | length }}", "max_value_bytes");
  expect_limit("{{ 'a\na' | indent(10**9) }}", "max_value_bytes");
  expect_limit("{{ [[[[1]]]] | tojson(indent=100000000) | length }}", "max_value_bytes");
  expect_limit("{% set a = [1] * 1000 %}{% set b = [a] * 1000 %}{% set c = [b] * 1000 %}{{ c | length }}{{ c }}",
               "Limits::");  // shared sublists print a billion items
  expect_limit("{{ ('a' * 30000000) | list | length }}", "max_value_bytes");
  expect_limit("{{ '%.999999999f' | format(1.5) }}", "9999");
  expect_limit("{{ '%999999999d' % 1 }}", "9999");
  // Python's ints: past 64 bits is an error, never a rounded float.
  expect_limit("{{ 2 ** 64 }}", "64 bits");
  expect_limit("{{ 9223372036854775807 + 1 }}", "64 bits");
  expect_limit("{{ 99999999999999999999999 }}", "64 bits");
  expect_limit("{{ '99999999999999999999999' | int }}", "64 bits");
  EXPECT_EQ(render_ok("{{ 2 ** 62 }} {{ -9223372036854775807 - 1 }}"), "4611686018427387904 -9223372036854775808");
  // 20-digit indices: no uncaught std::out_of_range.
  EXPECT_EQ(render_ok("{{ [[1]] | map(attribute='99999999999999999999') | list }}"), "[Undefined]");
  EXPECT_EQ(error_of("{{ '{99999999999999999999}'.format(1) }}").code, ErrorKind::kValue);
  // Python's errors.
  EXPECT_EQ(error_of("{{ 'abc'[::0] }}").code, ErrorKind::kValue);
  EXPECT_EQ(error_of("{{ [1, 2][::0] }}").code, ErrorKind::kValue);
  EXPECT_EQ(error_of("{{ 'a' + [1] }}").code, ErrorKind::kType);
  EXPECT_EQ(error_of("{{ 'a' + {} }}").code, ErrorKind::kType);
  EXPECT_EQ(error_of("{{ [1] + 'a' }}").code, ErrorKind::kType);
  // Internals: an unsafe Undefined, as Jinja's sandbox (prints empty, fails when used).
  EXPECT_EQ(render_ok("{{ ''.__class__ }}|{{ x.__class__ }}|{{ ''['__class__'] }}|{{ raise_exception.__globals__ }}",
                      R"({"x": {"__class__": 1}})"),
            "|||");
  EXPECT_EQ(render_ok("{{ ''.__class__ is defined }}"), "False");
  const Error internals = error_of("{{ ''.__class__.__mro__ }}");
  EXPECT_EQ(internals.code, ErrorKind::kSecurity);
  EXPECT_EQ(internals.message, "access to attribute '__class__' of 'str' object is unsafe.");
  EXPECT_EQ(error_of("{{ namespace().__init__.__globals__ }}").code, ErrorKind::kSecurity);
}

// The classes the template corpus (tests/fixtures/chat_templates) found where Python differs.
TEST(ChatTemplateTest, PythonSemanticsTheCorpusRelyOn) {
  // Markup: `'...' | safe + text` escapes the plain side (functionary v3.1 prints tool JSON so).
  EXPECT_EQ(render_ok(R"({{ "a '"|safe + x + "'"|safe }})", R"({"x": "<b \"q\">"})"), "a '&lt;b &#34;q&#34;&gt;'");
  EXPECT_EQ(render_ok(R"({{ x + "!"|safe }}|{{ "<"|safe + "<"|safe }}|{{ "<"|safe ~ "<" }})", R"({"x": "&"})"),
            "&amp;!|<<|<<");
  EXPECT_EQ(render_ok(R"({{ (x|e) + "<" }}|{{ x|e|e }})", R"({"x": "<"})"), "&lt;&lt;|&lt;");
  // Filters that Jinja writes as generators: always true, no len(), not JSON.
  EXPECT_EQ(render_ok("{{ 'yes' if (xs | selectattr('a')) else 'no' }}", R"({"xs": []})"), "yes");
  EXPECT_EQ(render_ok("{{ none | selectattr('a') | list }}{{ none | map(attribute='a') | list }}"), "[][]");
  EXPECT_EQ(render_ok("{{ xs | map(attribute='a') | list }}{{ xs | map(attribute='a') | join(',') }}",
                      R"({"xs": [{"a": 1}, {"a": 2}]})"),
            "[1, 2]1,2");
  EXPECT_EQ(render_text("{{ xs | map(attribute='a') | tojson }}", R"({"xs": [{"a": 1}]})").error().code,
            ErrorKind::kType);
  EXPECT_EQ(render_text("{{ xs | select | length }}", R"({"xs": [1]})").error().code, ErrorKind::kType);
  EXPECT_EQ(render_ok("{{ (d | items | list)[0] }}{{ d | items is sequence }}", R"({"d": {"k": 1}})"),
            "('k', 1)False");
  // A missing key's Undefined used as a key finds nothing, as a KeyError does in Python.
  EXPECT_EQ(render_ok("{{ m[d.missing] is defined }}", R"({"m": {"a": 1}, "d": {}})"), "False");
}

TEST(ChatTemplateTest, AHugeInputCostsItsSizeOnlyWhereUsed) {
  std::string big = "{\"big\": {";
  for (int k = 0; k < 300000; ++k) big += (k ? ",\"k" : "\"k") + std::to_string(k) + "\": " + std::to_string(k);
  big += "}, \"x\": \"hi\"}";
  const json::Value context = parse_json(big);
  auto t = Template::parse("{{ x }}");
  ASSERT_TRUE(t.ok());
  const auto start = std::chrono::steady_clock::now();
  auto r = t->render(context);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(*r, "hi");
  EXPECT_LT(seconds, 30.0);  // quadratic duplicate-key checks took minutes; linear is well under 1 s
  // Looking every key up in a loop: a linear search each time, charged to the step budget.
  auto lookups = Template::parse("{% for k in big %}{{ big[k] }}{% endfor %}");
  ASSERT_TRUE(lookups.ok());
  auto looped = lookups->render(context);
  ASSERT_FALSE(looped.ok());
  EXPECT_EQ(looped.error().code, ErrorKind::kLimit);
}

TEST(ChatTemplateTest, TheRenderDeadlineEndsWhatTheStepsDoNot) {
  Limits slow;
  slow.max_steps = SIZE_MAX;
  slow.max_render_ms = 50;
  auto t = Template::parse("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", slow);
  ASSERT_TRUE(t.ok());
  auto r = t->render(parse_json("{}"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorKind::kLimit);
  EXPECT_NE(r.error().message.find("max_render_ms"), std::string::npos) << r.error().to_string();
}

}  // namespace
}  // namespace rne::chat
