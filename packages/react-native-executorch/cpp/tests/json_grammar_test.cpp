// The JSON Schema compiler and the JSON automaton: which documents each keyword accepts and
// rejects, and the compiler's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "rne/grammar/json_grammar.h"
#include "rne/grammar/json_schema.h"

namespace rne::grammar {
namespace {

std::shared_ptr<const JsonSchema> compile(const std::string& text) {
  auto schema = compile_json_schema(text);
  EXPECT_TRUE(schema.ok()) << (schema.ok() ? "" : schema.error().message);
  return schema.ok() ? *schema : nullptr;
}

// Asserts that `schema` accepts every document in `good` and none in `bad`.
void expect_language(const std::string& schema_text, std::initializer_list<const char*> good,
                     std::initializer_list<const char*> bad) {
  auto schema = compile(schema_text);
  ASSERT_NE(schema, nullptr);
  JsonGrammar grammar(*schema);
  for (const char* text : good) EXPECT_TRUE(grammar.matches(text)) << schema_text << " should accept " << text;
  for (const char* text : bad) EXPECT_FALSE(grammar.matches(text)) << schema_text << " should reject " << text;
}

TEST(JsonGrammar, String) {
  expect_language(R"({"type":"string"})",
                  {R"("")", R"("abc")", R"("a\"b\\c\/\b\f\n\r\t")", R"("\u00e9\uD83D")",
                   "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\""},
                  {"", "abc", R"("abc)", R"("a"b")", "\"a\nb\"", R"("\x")", R"("\u12G4")",
                   "\"\xC3\"", "\"\xC0\x80\"", "\"\xED\xA0\x80\"", "\"\xF5\x80\x80\x80\"",
                   "\"\xE0\x80\x80\"", R"( "a")", R"("a" )"});
}

TEST(JsonGrammar, NumberAndInteger) {
  expect_language(R"({"type":"number"})",
                  {"0", "-0", "12", "-3.25", "1e5", "1E+5", "2.5e-3", "0.0", "123456789012345"},
                  {"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1.5.2", "1234567890123456",
                   "1e1234", "NaN", "1 "});
  expect_language(R"({"type":"integer"})", {"0", "-7", "42"}, {"1.0", "1e3", "-", "00"});
}

TEST(JsonGrammar, BooleanNullAndTypeLists) {
  expect_language(R"({"type":"boolean"})", {"true", "false"}, {"tru", "truee", "null", "1"});
  expect_language(R"({"type":"null"})", {"null"}, {"nul", "false"});
  expect_language(R"({"type":["string","null"]})", {"null", R"("x")"}, {"1", "true"});
  expect_language(R"({"type":["integer","number"]})", {"1", "1.5"}, {R"("1")"});
}

TEST(JsonGrammar, EnumAndConst) {
  expect_language(R"({"enum":["red","green",1,12,1.5,null,[1,"a"],{"k":true}]})",
                  {R"("red")", R"("green")", "1", "12", "1.5", "null", R"([1,"a"])",
                   R"({"k":true})"},
                  {R"("re")", R"("blue")", "2", "123", "1.", "[1, \"a\"]", R"({"k":false})"});
  expect_language(R"({"const":"fixed"})", {R"("fixed")"}, {R"("fixe")", R"("fixedd")"});
  // enum values of a type the schema does not allow can never validate: they are dropped.
  expect_language(R"({"type":"string","enum":["a",1]})", {R"("a")"}, {"1"});
}

TEST(JsonGrammar, ObjectPropertiesRequiredAndOrder) {
  const std::string schema = R"({"type":"object","properties":{
      "name":{"type":"string"},"age":{"type":"integer"},"tags":{"type":"array"}},
      "required":["age"]})";
  expect_language(schema,
                  {R"({"name":"a","age":3})", R"({"age":3})", R"({"age":3,"tags":[]})",
                   R"({"name": "a", "age": 3, "tags": [1, "x"]})"},
                  {"{}", R"({"name":"a"})", R"({"age":3,"name":"a"})", R"({"age":"3"})",
                   R"({"age":3,"extra":1})", R"({"age":3,})", R"({ "age":3})",
                   R"({"age":  3})", R"({"age":3 })", R"({"age":3,"age":4})"});
  expect_language(R"({"type":"object"})", {"{}"}, {R"({"a":1})"});
  expect_language(R"({"type":"object","properties":{"a":{}},"additionalProperties":true})",
                  {"{}", R"({"a":[{}]})", R"({"a":"x"})"}, {R"({"b":1})"});
}

TEST(JsonGrammar, ArrayItemsAndBounds) {
  expect_language(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
                  {"[1]", "[1,2,3]", "[1, 2]"},
                  {"[]", "[1,2,3,4]", "[1.5]", "[1,]", "[ 1]", "[1 ]", "[1,  2]"});
  expect_language(R"({"type":"array","items":{"type":"array","items":{"type":"string"}}})",
                  {"[]", "[[]]", R"([["a","b"],[]])"}, {R"(["a"])", "[[1]]"});
}

TEST(JsonGrammar, NestedObjects) {
  expect_language(R"({"type":"object","properties":{"user":{"type":"object","properties":{
      "id":{"type":"integer"},"email":{"type":["string","null"]}},"required":["id","email"]},
      "ok":{"type":"boolean"}},"required":["user","ok"]})",
                  {R"({"user":{"id":1,"email":null},"ok":true})",
                   R"({"user": {"id": -2, "email": "a@b"}, "ok": false})"},
                  {R"({"user":{"id":1},"ok":true})", R"({"user":{"id":1,"email":null}})",
                   R"({"ok":true,"user":{"id":1,"email":null}})"});
}

TEST(JsonGrammar, AnyValue) {
  expect_language("true", {"1", R"("s")", "null", "[1,[true,{}]]", "{}", "-2.5e3"},
                  {R"({"a":1})", "nul", ""});
  expect_language("{}", {"false"}, {"x"});
}

TEST(JsonGrammar, PrefixesAndCompleteness) {
  auto schema = compile(R"({"type":"object","properties":{"n":{"type":"number"}},"required":["n"]})");
  JsonGrammar grammar(*schema);
  JsonStack stack = grammar.start();
  ASSERT_TRUE(grammar.accepts_prefix(stack, R"({"n":12)"));
  EXPECT_FALSE(grammar.complete(stack));
  ASSERT_TRUE(grammar.accepts_prefix(stack, "}"));
  EXPECT_TRUE(grammar.complete(stack));
  EXPECT_TRUE(JsonGrammar::closed(stack));
  // A top-level number is complete as soon as it could end, and may still go on.
  auto number = compile(R"({"type":"number"})");
  JsonGrammar numbers(*number);
  JsonStack n = numbers.start();
  ASSERT_TRUE(numbers.accepts_prefix(n, "12"));
  EXPECT_TRUE(numbers.complete(n));
  EXPECT_FALSE(JsonGrammar::closed(n));
  ASSERT_TRUE(numbers.accepts_prefix(n, ".5"));
  EXPECT_TRUE(numbers.complete(n));
}

// Schemas with every kind of value, nested, with required and optional properties, minItems,
// enums that prefix each other, and the "any value" schema.
const char* const kCompletionSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
        "tags":{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":4},
        "kind":{"enum":["person","pet",12,1,null]},"score":{"type":"number"}},
        "required":["name","tags","kind"]})",
    R"({"type":"object","properties":{"user":{"type":"object","properties":{
        "id":{"type":"integer"},"email":{"type":["string","null"]},
        "roles":{"type":"array","items":{"enum":["admin","dev"]},"minItems":1}},
        "required":["id","email","roles"]},"ok":{"type":"boolean"},"note":{"const":"fixed"}},
        "required":["user","ok"]})",
    R"({"type":"array","items":{"type":"array","items":{"type":"number"},"minItems":1},
        "minItems":2})",
    R"({"type":["object","string","null"],"properties":{"a":{}},"required":["a"]})",
    R"({"type":"object","properties":{"opt1":{"type":"string"},"opt2":{"type":"boolean"},
        "last":{"type":"object"}}})",
    "true",
    R"({"type":"string"})",
    R"({"type":"number"})",
    // A recursive type via $defs, with bounded strings.
    R"({"$defs":{"node":{"type":"object","properties":{
        "name":{"type":"string","minLength":2,"maxLength":5},
        "children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},
        "required":["name","children"]}},"$ref":"#/$defs/node"})",
    // Unions and nullables (Zod's anyOf), integer ranges, constants of any type.
    R"({"type":"object","properties":{"id":{"type":"integer","minimum":10,"maximum":250},
        "value":{"anyOf":[{"type":"string","maxLength":3},{"type":"number"},{"type":"null"}]},
        "kind":{"anyOf":[{"const":"a"},{"const":"bb"},{"const":[1,{"x":null}]},
          {"type":"array","items":{"type":"integer","exclusiveMinimum":-5,"maximum":-2},
           "minItems":1}]}},"required":["id","value","kind"]})",
    // allOf over a definition, and recursion through "#" in a nullable.
    R"({"definitions":{"base":{"type":"object","properties":{
        "v":{"type":"integer","minimum":-30,"maximum":-7}},"required":["v"]}},
        "allOf":[{"$ref":"#/definitions/base"},{"properties":{
          "next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["next"]}]})",
    // Patterns whose characters need JSON escapes, formats, a pattern with length bounds and
    // a non-ASCII one (search semantics: unanchored).
    R"({"type":"object","properties":{"d":{"type":"string","format":"date"},
        "p":{"type":"string","pattern":"^(\"|\\\\|a\\n|/)+x?$","maxLength":6},
        "t":{"type":"string","format":"time"},"u":{"type":"string","pattern":"\u00e9[0-9]{2}",
        "minLength":4}},"required":["d","p","u"]})",
    R"({"type":"array","items":{"type":"string","format":"uuid"},"minItems":1})",
    // Object shapes told apart by a tag (a Zod discriminated union), nested and with an enum
    // tag; tuples (prefixItems, draft 7's array of items) and uniqueItems.
    R"({"type":"array","items":{"oneOf":[{"type":"object","properties":{"v":{"type":"string"},
        "kind":{"const":"text"}},"required":["kind","v"]},{"type":"object","properties":{
        "kind":{"enum":["n","num"]},"v":{"type":"number"},"w":{"type":"integer"}},
        "required":["kind","w"]},{"type":"null"}]},"minItems":1})",
    R"({"type":"object","properties":{"p":{"type":"array","prefixItems":[{"type":"number"},
        {"enum":["x","yy"]},{"type":"array","items":[{"type":"boolean"}],"additionalItems":false}],
        "items":{"type":"string"},"minItems":2},"u":{"type":"array","uniqueItems":true}},
        "required":["p","u"]})",
    R"({"type":"object","properties":{"c":{"type":"array","items":{"type":"integer"},
        "contains":{"minimum":7},"minContains":2},"o":{"type":"object","properties":{"a":{},
        "b":{"type":"boolean"},"z":false},"minProperties":1,"maxProperties":1}},
        "required":["c","o"]})",
    // A maxLength counted by the frame (too large to fold into this pattern's automaton).
    R"({"type":"array","items":{"type":"string","pattern":"(a|b)a(a|b){8}\\\\?",
        "maxLength":3000},"minItems":1})",
};

// Feeds the minimal completion to a copy of `stack` and reports whether the document is then
// complete.
::testing::AssertionResult completes(const JsonGrammar& grammar, const JsonStack& stack,
                                     const std::string& text) {
  const std::string completion = grammar.minimal_completion(stack);
  if (completion.size() != grammar.minimal_completion_size(stack)) {
    return ::testing::AssertionFailure() << "size differs after '" << text << "'";
  }
  JsonStack copy = stack;
  if (!grammar.accepts_prefix(copy, completion) || !grammar.complete(copy)) {
    return ::testing::AssertionFailure()
           << "'" << text << "' + completion '" << completion << "' is not a document";
  }
  return ::testing::AssertionSuccess();
}

// A key for a set of automaton states.
std::string state_key(const JsonStack& stack) {
  std::string key;
  for (const JsonFrame& f : stack) {
    key.append(reinterpret_cast<const char*>(&f.node), sizeof f.node);
    key += static_cast<char>(f.kind);
    key += static_cast<char>(f.sub);
    key += static_cast<char>(f.depth);
    key.append(reinterpret_cast<const char*>(&f.pos), sizeof f.pos);
    key.append(reinterpret_cast<const char*>(&f.count), sizeof f.count);
    key.append(reinterpret_cast<const char*>(&f.current), sizeof f.current);
    key.append(reinterpret_cast<const char*>(&f.candidates), sizeof f.candidates);
  }
  return key;
}

// The length of the shortest completion by breadth-first search over bytes (the reference);
// nullopt when the search would visit more than `max_states` states (deep "any value" nesting
// branches too widely to search).
std::optional<size_t> shortest_completion_by_search(const JsonGrammar& grammar,
                                                    const JsonStack& stack,
                                                    size_t max_states = 1000) {
  std::vector<JsonStack> level = {stack};
  std::set<std::string> seen = {state_key(stack)};
  for (size_t length = 0; !level.empty(); ++length) {
    std::vector<JsonStack> next;
    for (const JsonStack& state : level) {
      if (grammar.complete(state)) return length;
      for (int byte = 0; byte < 256; ++byte) {
        JsonStack fed = state;
        if (grammar.feed(fed, static_cast<uint8_t>(byte)) != JsonGrammar::Feed::kAccepted) continue;
        if (seen.insert(state_key(fed)).second) next.push_back(std::move(fed));
      }
      if (seen.size() > max_states) return std::nullopt;
    }
    level = std::move(next);
  }
  return std::nullopt;
}

TEST(JsonGrammar, MinimalCompletionOfExamples) {
  auto person = compile(kCompletionSchemas[0]);
  JsonGrammar grammar(*person);
  auto completion_after = [&](const std::string& prefix) {
    JsonStack stack = grammar.start();
    EXPECT_TRUE(grammar.accepts_prefix(stack, prefix)) << prefix;
    return grammar.minimal_completion(stack);
  };
  EXPECT_EQ(grammar.minimal_value(person->root), R"({"name":"","tags":["",""],"kind":1})");
  EXPECT_EQ(completion_after(""), R"({"name":"","tags":["",""],"kind":1})");
  EXPECT_EQ(completion_after(R"({"na)"), R"(me":"","tags":["",""],"kind":1})");
  EXPECT_EQ(completion_after(R"({"name":"Al)"), R"(","tags":["",""],"kind":1})");
  EXPECT_EQ(completion_after(R"({"name":"a\)"), R"(n","tags":["",""],"kind":1})");
  EXPECT_EQ(completion_after(R"({"name":"\u0)"), R"(000","tags":["",""],"kind":1})");
  EXPECT_EQ(completion_after("{\"name\":\"caf\xC3"), "\x80\",\"tags\":[\"\",\"\"],\"kind\":1}");
  EXPECT_EQ(completion_after("{\"name\":\"\xE0"), "\xA0\x80\",\"tags\":[\"\",\"\"],\"kind\":1}");
  EXPECT_EQ(completion_after(R"({"name":"a","age":-)"), R"(0,"tags":["",""],"kind":1})");
  EXPECT_EQ(completion_after(R"({"name":"a","age":1)"), R"(,"tags":["",""],"kind":1})");
  EXPECT_EQ(completion_after(R"({"name":"a", )"), R"("tags":["",""],"kind":1})");
  EXPECT_EQ(completion_after(R"({"name":"a","tags":["x")"), R"(,""],"kind":1})");
  EXPECT_EQ(completion_after(R"({"name":"a","tags":["x",)"), R"(""],"kind":1})");
  EXPECT_EQ(completion_after(R"({"name":"a","tags":["x","y"],"kind":"pe)"), R"(t"})");
  EXPECT_EQ(completion_after(R"({"name":"a","tags":["x","y"],"kind":1)"), "}");
  EXPECT_EQ(completion_after(R"({"name":"a","tags":["x","y"],"kind":null})"), "");
}

// Random byte-level walks through documents of `schema`: at every state the minimal
// completion completes the document, and (on a sample) no shorter completion exists. Half of
// the steps prefer the bytes in `structural`, so walks leave strings and nest.
void walk_completions(const JsonSchema& schema, const char* schema_text,
                      const std::string& structural, std::mt19937& rng, int& states,
                      int& searched) {
  JsonGrammar grammar(schema);
  EXPECT_TRUE(grammar.matches(grammar.minimal_value(schema.root))) << schema_text;
  // Random byte-level walks: every accepted byte (any escape, \u digit, UTF-8 byte, key
  // byte, digit, whitespace) is as likely as any other, so walks stop mid-everything.
  for (int walk = 0; walk < 30; ++walk) {
    JsonStack stack = grammar.start();
    std::string text;
    for (int step = 0; step < 120 && !JsonGrammar::closed(stack); ++step) {
      ASSERT_TRUE(completes(grammar, stack, text)) << schema_text;
      if (step % 13 == 0) {  // the search is slower: a sample of the states
        if (auto shortest = shortest_completion_by_search(grammar, stack)) {
          EXPECT_EQ(grammar.minimal_completion_size(stack), *shortest)
              << schema_text << " after '" << text << "'";
          ++searched;
        }
      }
      ++states;
      std::vector<uint8_t> accepted;
      for (int byte = 0; byte < 256; ++byte) {
        JsonStack fed = stack;
        if (grammar.feed(fed, static_cast<uint8_t>(byte)) == JsonGrammar::Feed::kAccepted) {
          accepted.push_back(static_cast<uint8_t>(byte));
        }
      }
      if (accepted.empty()) break;  // a complete top-level number at its digit limit
      std::vector<uint8_t> preferred;
      for (uint8_t byte : accepted) {
        if (structural.find(static_cast<char>(byte)) != std::string::npos) preferred.push_back(byte);
      }
      const auto& pool = !preferred.empty() && rng() % 2 == 0 ? preferred : accepted;
      const uint8_t byte = pool[rng() % pool.size()];
      ASSERT_EQ(grammar.feed(stack, byte), JsonGrammar::Feed::kAccepted);
      text += static_cast<char>(byte);
    }
  }
}

TEST(JsonGrammar, MinimalCompletionCompletesEveryStateAndIsShortest) {
  std::mt19937 rng(11);
  const std::string structural = "\"{}[],: \\u-+.eE019atfn\xC3\xA9";
  int states = 0;
  int searched = 0;
  for (const char* schema_text : kCompletionSchemas) {
    auto schema = compile(schema_text);
    ASSERT_NE(schema, nullptr);
    walk_completions(*schema, schema_text, structural, rng, states, searched);
  }
  EXPECT_GT(states, 5000);
  EXPECT_GT(searched, 500);
}

TEST(JsonGrammar, PatternAndFormat) {
  // Unanchored unless anchored; escapes decoded before matching; lengths in code points.
  expect_language(R"({"type":"string","pattern":"ab"})", {R"("ab")", R"("xaby")", R"("\"ab")"},
                  {R"("a")", R"("a\u0062")", R"("ba")"});
  expect_language(R"({"type":"string","pattern":"^a\\\"b$"})", {R"("a\"b")"},
                  {R"("a"b")", R"("ab")", R"("a\\b")"});
  expect_language(R"({"type":"string","pattern":"^[\\n/]{2}$"})",
                  {R"("\n/")", R"("\//")", R"("//")", R"("\n\n")"}, {R"("\t/")", "\"\n/\""});
  expect_language(R"({"type":"string","pattern":"^[a-z\u00e9]*$","minLength":2,"maxLength":3})",
                  {R"("ab")", "\"\xC3\xA9\xC3\xA9\xC3\xA9\"", R"("abc")"},
                  {R"("a")", R"("abcd")", R"("aB")"});
  expect_language(R"({"type":"string","format":"date"})",
                  {R"("2024-01-31")", R"("1999-02-28")", R"("2000-04-30")"},
                  {R"("2024-02-30")", R"("2024-04-31")", R"("2024-13-01")", R"("24-01-01")",
                   R"("2024-01-01x")"});
  expect_language(R"({"type":"string","format":"date-time"})",
                  {R"("2024-01-31T23:59:59Z")", R"("2024-01-31T00:00:00.123+05:30")"},
                  {R"("2024-01-31 23:59:59Z")", R"("2024-01-31T24:00:00Z")",
                   R"("2024-01-31T23:59:60Z")"});
  expect_language(R"({"type":"string","format":"ipv4"})", {R"("255.0.10.1")"},
                  {R"("256.0.0.1")", R"("01.2.3.4")", R"("1.2.3")"});
  expect_language(R"({"type":"string","format":"email","maxLength":8})", {R"("a.b@c.io")"},
                  {R"("a@b")", R"("a.b@cd.io")", R"(".a@b.io")"});
  expect_language(R"({"type":"string","format":"uuid"})",
                  {R"("123e4567-e89b-12d3-a456-426614174000")"},
                  {R"("123e4567e89b12d3a456426614174000")"});
  // enum values are kept only when the pattern matches them; pattern and format both apply.
  expect_language(R"({"enum":["ab","b",3],"pattern":"a"})", {R"("ab")", "3"}, {R"("b")"});
  expect_language(R"({"type":"string","format":"ipv4","pattern":"^10\\."})", {R"("10.0.0.1")"},
                  {R"("11.0.0.1")"});
  // An anchored pattern under a large maxLength stays small: states that can no longer match
  // (the unanchored prefix once ^ has passed) are not multiplied by the length counter.
  expect_language(R"({"type":"string","format":"date-time","maxLength":1000})",
                  {R"("2024-01-31T23:59:59Z")"}, {R"("x2024-01-31T23:59:59Z")"});
  // A maxLength too large to fold into the automaton is counted by the frame instead.
  expect_language(R"({"type":"string","pattern":"^[a-z]+$","minLength":2,"maxLength":20000})",
                  {R"("ab")", R"("abc")"}, {R"("a")", R"("aB")"});
  const std::string tail = R"({"type":"string","pattern":"(a|b)a(a|b){10}","maxLength":40})";
  auto counted = compile(tail);
  ASSERT_NE(counted, nullptr);
  ASSERT_EQ(counted->patterns.size(), 1u);
  EXPECT_EQ(counted->patterns[0].max_length, 40u);  // counted, not folded
  const std::string a12(12, 'a');
  JsonGrammar tails(*counted);
  EXPECT_TRUE(tails.matches('"' + a12 + '"'));
  EXPECT_TRUE(tails.matches('"' + std::string(28, 'x') + a12 + '"'));
  EXPECT_FALSE(tails.matches('"' + std::string(29, 'x') + a12 + '"'));
  EXPECT_FALSE(tails.matches('"' + a12.substr(1) + '"'));
  // The shortest value is the shortest match, with JSON's escapes counted.
  auto quoted = compile(R"({"type":"string","pattern":"^(\\\"\\\"|zzz)$"})");
  ASSERT_NE(quoted, nullptr);
  EXPECT_EQ(JsonGrammar(*quoted).minimal_value(quoted->root), R"("zzz")");
  auto date = compile(R"({"type":"string","format":"date-time"})");
  ASSERT_NE(date, nullptr);
  EXPECT_EQ(JsonGrammar(*date).minimal_value(date->root), R"("1000-01-01T00:00:00Z")");
}

TEST(JsonGrammar, RegexAnswer) {
  auto answer = compile_regex_format(R"((yes|no)(, [a-z]+)?\.)");
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  JsonGrammar grammar(**answer);
  for (const char* good : {"yes.", "no, because.", "no, x."}) EXPECT_TRUE(grammar.matches(good));
  for (const char* bad : {"yes", "\"yes.\"", "maybe.", "yes. ", " yes."}) {
    EXPECT_FALSE(grammar.matches(bad)) << bad;
  }
  EXPECT_EQ(grammar.minimal_value((*answer)->root), "no.");
  JsonStack stack = grammar.start();
  ASSERT_TRUE(grammar.accepts_prefix(stack, "yes, a"));
  EXPECT_EQ(grammar.minimal_completion(stack), ".");
  EXPECT_FALSE(grammar.complete(stack));
  // Raw text: characters JSON would escape are written as themselves.
  auto raw = compile_regex_format("a\"\n");
  ASSERT_TRUE(raw.ok());
  EXPECT_TRUE(JsonGrammar(**raw).matches("a\"\n"));
  auto bad = compile_regex_format("(?=x)");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("lookaround"), std::string::npos);
}

TEST(JsonGrammar, PatternPropertiesAndPropertyNames) {
  // A declared property whose name a patternProperties regex matches takes that schema too.
  expect_language(R"({"type":"object","properties":{"x_id":{"type":"integer"},"name":{}},
                      "patternProperties":{"_id$":{"minimum":5}},"required":["x_id"]})",
                  {R"({"x_id":5})", R"({"x_id":9,"name":"a"})"},
                  {R"({"x_id":4})", R"({"x_id":5,"other":1})"});
  // propertyNames: optional properties it refuses are never generated.
  expect_language(R"({"properties":{"ok":{},"Bad":{}},"propertyNames":{"pattern":"^[a-z]+$"}})",
                  {R"({"ok":1})", "{}"}, {R"({"Bad":1})"});
  expect_language(R"({"properties":{"a":{}},"propertyNames":false})", {"{}"}, {R"({"a":1})"});
  auto error_of = [](const std::string& text) {
    auto schema = compile_json_schema(text);
    return schema.ok() ? std::string() : schema.error().message;
  };
  EXPECT_NE(error_of(R"({"properties":{"Ab":{}},"required":["Ab"],
                         "propertyNames":{"maxLength":1}})")
                .find("'#/propertyNames': the required property 'Ab'"),
            std::string::npos);
  EXPECT_NE(error_of(R"js({"patternProperties":{"(?=a)":{}}})js")
                .find("'#/patternProperties': regex '(?=a)' at offset 0: lookaround"),
            std::string::npos);
}

TEST(JsonSchemaCompiler, ErrorsNameTheKeywordAndPlace) {
  auto error_of = [](const std::string& text) {
    auto schema = compile_json_schema(text);
    EXPECT_FALSE(schema.ok()) << text;
    return schema.ok() ? std::string() : schema.error().message;
  };
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  const std::string lookahead =
      error_of(R"js({"type":"object","properties":{"a":{"type":"string","pattern":"x(?=y)"}}})js");
  EXPECT_NE(lookahead.find("'#/properties/a/pattern'"), std::string::npos) << lookahead;
  EXPECT_NE(lookahead.find("offset 1: lookaround"), std::string::npos) << lookahead;
  EXPECT_NE(error_of(R"({"type":"string","pattern":"(a)\\1"})").find("backreferences"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"multipleOf":0.7})").find("'#/multipleOf': multipleOf 0.7"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"anyOf":[]})").find("non-empty array"), std::string::npos);
  EXPECT_NE(error_of(R"({"not":{"multipleOf":2,"uniqueItems":true}})")
                .find("not: {multipleOf, uniqueItems} cannot be enforced"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"text"})").find("unknown type 'text'"), std::string::npos);
  EXPECT_NE(error_of(R"({"properties":{},"required":["x"],"additionalProperties":false})")
                .find("'x' is not declared"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"enum":[]})").find("non-empty array"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","enum":[1]})").find("no enum/const value"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"minItems":3,"maxItems":2})").find("minItems is larger"),
            std::string::npos);
  EXPECT_NE(error_of("false").find("allows no value"), std::string::npos);
  EXPECT_NE(error_of("3").find("must be an object or a boolean"), std::string::npos);
  EXPECT_NE(error_of(R"({"prefixItems":{}})").find("'#/prefixItems': prefixItems must be an array"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"array","uniqueItems":true,"minItems":2})")
                .find("'#/uniqueItems'"),
            std::string::npos);
  // Annotations are fine.
  EXPECT_TRUE(compile_json_schema(R"({"title":"t","description":"d","type":"string",
      "default":"x","examples":["y"],"$schema":"https://json-schema.org/draft/2020-12/schema"})")
                  .ok());
}

TEST(JsonGrammar, RefsAndRecursion) {
  // A recursive list through "#", and a tree through $defs and definitions.
  expect_language(R"({"type":"object","properties":{"v":{"type":"integer"},
      "next":{"$ref":"#"}},"required":["v"]})",
                  {R"({"v":1})", R"({"v":1,"next":{"v":2,"next":{"v":3}}})"},
                  {R"({"v":1,"next":{}})", R"({"next":{"v":1}})"});
  expect_language(R"({"$defs":{"t":{"type":"array","items":{"$ref":"#/$defs/t"}}},
      "$ref":"#/$defs/t"})", {"[]", "[[],[[]]]"}, {"[1]", "[[1]]"});
  expect_language(R"({"definitions":{"a":{"$ref":"#/definitions/b"},"b":{"type":"boolean"}},
      "properties":{"x":{"$ref":"#/definitions/a"}},"type":"object"})",
                  {R"({"x":true})", "{}"}, {R"({"x":1})"});
  // $ref with siblings: both apply.
  expect_language(R"({"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxLength":2})",
                  {R"("ab")"}, {R"("abc")"});
}

TEST(JsonGrammar, RecursionStopsWhereItsShortestValueStillFits) {
  // Arrays of arrays: nesting stops at kMaxDepth frames, and any state still completes.
  auto schema = compile(R"({"$defs":{"t":{"type":"array","items":{"$ref":"#/$defs/t"}}},
      "$ref":"#/$defs/t"})");
  JsonGrammar grammar(*schema);
  JsonStack stack = grammar.start();
  EXPECT_TRUE(grammar.accepts_prefix(stack, std::string(JsonGrammar::kMaxDepth, '[')));
  JsonStack deeper = stack;
  EXPECT_FALSE(grammar.accepts_prefix(deeper, "["));
  EXPECT_EQ(grammar.minimal_completion(stack), std::string(JsonGrammar::kMaxDepth, ']'));
  // Objects whose shortest value is two frames deep stop one level earlier.
  auto objects = compile(R"({"$defs":{"o":{"type":"object","properties":{
      "n":{"type":"null"},"c":{"$ref":"#/$defs/o"}},"required":["n"]}},"$ref":"#/$defs/o"})");
  JsonGrammar object_grammar(*objects);
  JsonStack o = object_grammar.start();
  // Object k sits at index k; its shortest value needs a second frame (for "n").
  std::string text = "{";
  for (size_t i = 1; i + 1 < JsonGrammar::kMaxDepth; ++i) text += R"("n":null,"c":{)";
  EXPECT_TRUE(object_grammar.accepts_prefix(o, text));
  JsonStack too_deep = o;
  EXPECT_FALSE(object_grammar.accepts_prefix(too_deep, R"("n":null,"c":{)"));
  EXPECT_TRUE(completes(object_grammar, o, text));
}

TEST(JsonGrammar, UnionsNullablesAndConstants) {
  expect_language(R"({"anyOf":[{"type":"string"},{"type":"null"}]})", {R"("a")", "null"},
                  {"1", "{}"});
  // nullable is OpenAPI's; JSON Schema ignores it: null is not generated (valid either way).
  expect_language(R"({"type":"integer","nullable":true})", {"1"}, {"null", R"("1")"});
  expect_language(R"({"oneOf":[{"const":"a"},{"const":2},{"type":"object","properties":{
      "k":{"const":{"z":[1,null]}}},"required":["k"]}]})",
                  {R"("a")", "2", R"({"k":{"z":[1,null]}})"}, {R"("b")", "3", "{}"});
  // anyOf where two alternatives allow objects: the first one is generated.
  expect_language(R"({"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},
      "required":["a"]},{"type":["object","boolean"],"properties":{"b":{}},"required":["b"]}]})",
                  {R"({"a":1})", "true"}, {R"({"b":1})"});
  expect_language(R"({"type":["string","null"],"enum":["x",null,3]})", {R"("x")", "null"},
                  {"3"});
}

TEST(JsonGrammar, AllOfIsMerged) {
  expect_language(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer",
      "minimum":0}},"required":["a"]},{"properties":{"a":{"maximum":5},"b":{"type":"string"}},
      "required":["b"]}]})",
                  {R"({"a":0,"b":""})", R"({"a":5,"b":"x"})"},
                  {R"({"a":6,"b":""})", R"({"a":1})", R"({"b":""})"});
  expect_language(R"({"allOf":[{"type":["string","integer"]},{"type":["number","null"]}]})",
                  {"3"}, {"3.5", R"("s")", "null"});
  expect_language(R"({"allOf":[{"enum":["a","b","c"]},{"enum":["c","b"]}]})",
                  {R"("b")", R"("c")"}, {R"("a")"});
}

TEST(JsonGrammar, StringLengths) {
  expect_language(R"({"type":"string","minLength":2,"maxLength":3})",
                  {R"("ab")", R"("abc")", "\"\xC3\xA9\xE2\x82\xAC\"", R"("a\n")"},
                  {R"("a")", R"("abcd")", R"("\u0041b")", "\"\xF0\x9F\x98\x80\""});
  expect_language(R"({"type":"string","maxLength":0})", {R"("")"}, {R"("a")"});
}

TEST(JsonGrammar, IntegerRanges) {
  expect_language(R"({"type":"integer","minimum":-12,"maximum":305})",
                  {"-12", "-1", "0", "-0", "7", "305", "299"},
                  {"-13", "306", "1000", "-120", "3050"});
  expect_language(R"({"type":"integer","exclusiveMinimum":100,"exclusiveMaximum":103})",
                  {"101", "102"}, {"100", "103", "0", "1"});
  expect_language(R"({"type":"integer","minimum":5,"exclusiveMinimum":true})", {"6"}, {"5"});
  // A bounded number generates integers in its range.
  expect_language(R"({"type":"number","minimum":0.5,"maximum":2.5})", {"1", "2"},
                  {"0", "3", "1.5"});
  expect_language(R"({"enum":[1,5,9],"maximum":5})", {"1", "5"}, {"9"});
}

TEST(JsonSchemaCompiler, LimitsAndUnrepresentableValuesAreCleanErrors) {
  auto error_of = [](const std::string& text) {
    auto schema = compile_json_schema(text);
    EXPECT_FALSE(schema.ok()) << text;
    return schema.ok() ? std::string() : schema.error().message;
  };
  EXPECT_NE(error_of(R"({"type":"array","minItems":1000000000000})").find("kMaxMinItems"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","minLength":99999999})").find("kMaxMinLength"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"array","minItems":4000,"items":{"type":"array","minItems":4000}})")
                .find("kMaxMinimalValueBytes"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"const":1e400})").find("not exactly representable"), std::string::npos);
  EXPECT_NE(error_of(R"({"enum":[1,12345678901234567890]})").find("'#/enum/1'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/a"}}})")
                .find("$ref cycle"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"object","properties":{"c":{"$ref":"#"}},"required":["c"]})")
                .find("no finite value"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"#/nowhere"})").find("points at nothing"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"other.json#/a"})").find("remote references are not fetched"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})").find("left recursion"),
            std::string::npos);
  // Integers match both; numbers that are not integers are not generated.
  EXPECT_NE(error_of(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})")
                .find("'#/oneOf/1': overlaps '#/oneOf/0'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"allOf":[{"type":"string"},{"type":"integer"}]})")
                .find("no type in common"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"allOf":[{"minContains":1},{"minContains":2}]})").find("cannot be merged"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"integer","minimum":3,"maximum":2})").find("no integer"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","$dynamicRef":"#x"})").find("'#/$dynamicRef'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"^a+$","maxLength":0})")
                .find("matches no string"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"^(a|b)*a(a|b){14}$"})")
                .find("kMaxRegexStates"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"^\\x01$"})").find("\\u escape"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"^a$","enum":["b"]})").find("patterns"),
            std::string::npos);
  // 140 $defs each merging the next (the JSON text itself stays shallow).
  std::string deep = R"({"$ref":"#/$defs/d0","$defs":{)";
  for (int i = 0; i < 140; ++i) {
    deep += "\"d" + std::to_string(i) + "\":{\"allOf\":[{\"$ref\":\"#/$defs/d" +
            std::to_string(i + 1) + "\"}]},";
  }
  deep += R"("d140":{"type":"integer"}}})";
  EXPECT_NE(error_of(deep).find("kMaxSchemaNesting"), std::string::npos);
}

TEST(JsonGrammar, ObjectShapesToldApartByATag) {
  // A Zod discriminated union: oneOf of object shapes with a const tag; the tag is generated
  // first and its value picks the shape.
  const std::string fields = R"({"oneOf":[
      {"type":"object","properties":{"kind":{"const":"text"},"value":{"type":"string"}},
       "required":["kind","value"]},
      {"type":"object","properties":{"value":{"type":"number"},"kind":{"const":"number"}},
       "required":["kind","value"]},
      {"type":"object","properties":{"kind":{"enum":["bool","flag"]},"value":{"type":"boolean"},
       "note":{"type":"string"}},"required":["kind"]},
      {"type":"null"}]})";
  expect_language(fields,
                  {R"({"kind":"text","value":"a"})", R"({"kind":"number","value":2.5})",
                   R"({"kind":"bool"})", R"({"kind":"flag","value":true,"note":"n"})", "null",
                   R"({"kind":"text", "value":"a"})"},
                  {R"({"kind":"text","value":2})", R"({"kind":"number","value":"a"})",
                   R"({"value":"a","kind":"text"})", R"({"kind":"other"})", "{}",
                   R"({"kind":"text"})", R"({"kind": "text","value":"a"})"});
  auto schema = compile(fields);
  ASSERT_NE(schema, nullptr);
  EXPECT_EQ(JsonGrammar(*schema).minimal_value(schema->root), "null");
  auto only_objects = compile(R"({"anyOf":[{"type":"object","properties":{"t":{"const":"aa"},
      "x":{"type":"integer"}},"required":["t","x"]},{"type":"object","properties":{
      "t":{"const":"b"},"y":{"type":"array","minItems":1}},"required":["t","y"]}]})");
  ASSERT_NE(only_objects, nullptr);
  JsonGrammar grammar(*only_objects);
  EXPECT_EQ(grammar.minimal_value(only_objects->root), R"({"t":"aa","x":0})");
  JsonStack stack = grammar.start();
  ASSERT_TRUE(grammar.accepts_prefix(stack, R"({"t":"b)"));
  EXPECT_EQ(grammar.minimal_completion(stack), R"(","y":[0]})");
  // Without a tag that tells them apart: oneOf generates a shape apart from the others (here
  // the second's "b"), anyOf the first shape.
  expect_language(R"({"oneOf":[{"type":"object","properties":{
      "t":{"const":"a"}},"required":["t"]},{"type":"object","properties":{"t":{"enum":["a","b"]}},
      "required":["t"]}]})",
                  {R"({"t":"b"})"}, {R"({"t":"a"})"});
  expect_language(R"({"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},
      "required":["a"]},{"type":"object","properties":{"b":{"type":"integer"}},"required":["b"]}]})",
                  {R"({"a":1})"}, {R"({"b":1})"});
  // Gemma 4's syntax: the tag must sort first in every shape.
  auto gemma = compile_json_schema(fields, JsonSyntax::kGemma4);
  ASSERT_TRUE(gemma.ok()) << gemma.error().message;
  JsonGrammar g(**gemma);
  EXPECT_TRUE(g.matches(R"({kind:<|"|>text<|"|>,value:<|"|>a<|"|>})"));
  EXPECT_TRUE(g.matches(R"({kind:<|"|>flag<|"|>,note:<|"|>n<|"|>,value:true})"));
  EXPECT_FALSE(g.matches(R"({kind:<|"|>text<|"|>,value:1})"));
}

TEST(JsonGrammar, TuplesAndUniqueItems) {
  expect_language(R"({"prefixItems":[{"type":"integer"},{"type":"string"}],"items":false,
      "minItems":1})",
                  {"[1]", R"([1,"a"])"}, {"[]", R"(["a"])", R"([1,2])", R"([1,"a",2])"});
  expect_language(R"({"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"null"}})",
                  {"[]", "[1]", "[1,null,null]"}, {"[null]", "[1,2]"});
  // Draft 7: an array of items, then additionalItems (which applies only after one).
  expect_language(R"({"type":"array","items":[{"type":"boolean"},{"const":"x"}],
      "additionalItems":{"type":"integer"}})",
                  {"[]", "[true]", R"([false,"x",3,4])"}, {"[1]", R"([true,"y"])", R"([true,"x","z"])"});
  expect_language(R"({"type":"array","items":{"type":"integer"},"additionalItems":false})",
                  {"[1,2,3]"}, {R"(["a"])"});
  expect_language(R"({"type":"array","prefixItems":[{"type":"integer"},false]})", {"[]", "[1]"},
                  {"[1,2]"});
  // uniqueItems: at most one item, so none repeats.
  expect_language(R"({"type":"array","items":{"enum":["a","b"]},"uniqueItems":true})",
                  {"[]", R"(["a"])"}, {R"(["a","b"])", R"(["a","a"])"});
  expect_language(R"({"type":"array","uniqueItems":false,"minItems":2})", {"[1,1]"}, {"[1]"});
  // Annotations editors write are ignored.
  expect_language(R"({"id":"x","markdownDescription":"*d*","type":"integer"})", {"1"}, {"\"1\""});
}

TEST(JsonGrammar, ContainsNotConditionalsDependenciesAndFalseSchemas) {
  // contains: the first minContains items match it too.
  expect_language(R"({"type":"array","items":{"type":"integer"},"contains":{"minimum":5}})",
                  {"[5]", "[7,1,2]"}, {"[]", "[1,7]", R"(["a"])"});
  expect_language(R"({"type":"array","contains":{"const":"x"},"minContains":2,"maxItems":3})",
                  {R"(["x","x"])", R"(["x","x",1])"}, {R"(["x"])", R"(["x",1,"x"])"});
  expect_language(R"({"type":"array","contains":{"type":"null"},"minContains":0})", {"[]", "[1]"},
                  {});
  // not of types: those types are not generated (numbers go with integers).
  expect_language(R"({"not":{"type":["integer","null"]}})", {R"("a")", "true", "{}", "[]"},
                  {"1", "1.5", "null"});
  // min/maxProperties: optional properties become required, or are left out, in order.
  expect_language(R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"minProperties":2})",
                  {R"({"a":1,"b":2})", R"({"a":1,"b":2,"c":3})"}, {R"({"a":1})", R"({"b":1,"c":2})"});
  expect_language(R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"required":["c"],
      "maxProperties":2})",
                  {R"({"a":1,"c":2})", R"({"c":2})"}, {R"({"a":1,"b":2,"c":3})", R"({"b":1,"c":2})"});
  // false: a property never generated, an alternative never taken.
  expect_language(R"({"type":"object","properties":{"a":false,"b":{"type":"integer"}}})",
                  {"{}", R"({"b":1})"}, {R"({"a":1})"});
  expect_language(R"({"anyOf":[false,{"type":"integer"}]})", {"1"}, {R"("a")"});
  // unevaluatedProperties judges no generated property; in an allOf branch it sees only that
  // branch's, like additionalProperties.
  expect_language(R"({"type":"object","properties":{"a":{}},"unevaluatedProperties":false})",
                  {"{}", R"({"a":1})"}, {R"({"b":1})"});
  expect_language(R"({"allOf":[{"properties":{"a":{}},"unevaluatedProperties":false},
      {"properties":{"b":{}}}]})",
                  {R"({"a":1})"}, {R"({"b":1})"});
  // Dependencies: a required property's apply always; an optional one with dependencies is
  // left out.
  expect_language(R"({"type":"object","properties":{"a":{},"b":{},"c":{"type":"integer"}},
      "required":["a"],"dependentRequired":{"a":["b"],"c":["a"]},
      "dependentSchemas":{"a":{"properties":{"b":{"type":"string"}}}}})",
                  {R"({"a":1,"b":"x"})"}, {R"({"a":1})", R"({"a":1,"b":2})", R"({"a":1,"b":"x","c":1})"});
  expect_language(R"({"type":"object","properties":{"a":{},"b":{}},"dependencies":{"b":["a"]}})",
                  {"{}", R"({"a":1})"}, {R"({"b":1})", R"({"a":1,"b":1})"});
  // if/then/else: values valid against then and else alike, whichever way if goes.
  expect_language(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{}},
      "if":{"properties":{"a":{"minimum":3}}},"then":{"required":["b"]},
      "else":{"properties":{"a":{"maximum":9}}}})",
                  {R"({"a":5,"b":1})", R"({"b":1})"}, {R"({"a":5})", R"({"a":10,"b":1})"});
  expect_language(R"({"type":"integer","then":{"minimum":5}})", {"1"}, {});
  auto error_of = [](const std::string& text) {
    auto schema = compile_json_schema(text);
    EXPECT_FALSE(schema.ok()) << text;
    return schema.ok() ? std::string() : schema.error().message;
  };
  EXPECT_NE(error_of(R"({"if":{"type":"string"},"else":false})").find("'#/else'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"array","contains":{},"minContains":2,"maxContains":1})")
                .find("'#/maxContains'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"not":{"multipleOf":2}})").find("'#/not'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"object","properties":{"a":{}},"minProperties":2,
      "additionalProperties":false})")
                .find("'#/minProperties'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"object","properties":{"a":false},"required":["a"]})")
                .find("has the schema false"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"oneOf":[false]})").find("'#/oneOf'"), std::string::npos);
}

// ---- Gemma 4's tool-call syntax (JsonSyntax::kGemma4) ----

std::shared_ptr<const JsonSchema> compile_gemma(const std::string& text) {
  auto schema = compile_json_schema(text, JsonSyntax::kGemma4);
  EXPECT_TRUE(schema.ok()) << (schema.ok() ? "" : schema.error().message);
  return schema.ok() ? *schema : nullptr;
}

void expect_gemma_language(const std::string& schema_text, std::initializer_list<const char*> good,
                           std::initializer_list<const char*> bad) {
  auto schema = compile_gemma(schema_text);
  ASSERT_NE(schema, nullptr);
  JsonGrammar grammar(*schema);
  for (const char* text : good) EXPECT_TRUE(grammar.matches(text)) << schema_text << " should accept " << text;
  for (const char* text : bad) EXPECT_FALSE(grammar.matches(text)) << schema_text << " should reject " << text;
}

TEST(JsonGrammarGemma4, StringsAreRawBetweenQuoteTokens) {
  expect_gemma_language(
      R"({"type":"string"})",
      {R"(<|"|><|"|>)", R"(<|"|>Kraków<|"|>)", R"(<|"|>say "hi" \n<|"|>)", "<|\"|>a\nb\t<|\"|>",
       R"(<|"|>a<b<<c<"|><|"|>)", R"(<|"|><<|"|>)", R"(<|"|>x<|"|>)"},
      {R"("abc")", R"(<|"|>abc)", R"(<|"|>a<|b<|"|>)", R"(<|"|>a<|"|>b<|"|>)", R"(<|"|abc<|"|>)",
       "<|\"|>\xC3<|\"|>", R"( <|"|>a<|"|>)", R"(<|"|>a<|"|> )"});
  // Length bounds count the raw content's code points, a '<' included.
  expect_gemma_language(R"({"type":"string","minLength":2,"maxLength":3})",
                        {R"(<|"|>ab<|"|>)", R"(<|"|><<<|"|>)", "<|\"|>\xC3\xA9\xC3\xA9<|\"|>"},
                        {R"(<|"|>a<|"|>)", R"(<|"|>abcd<|"|>)", R"(<|"|><<<<<|"|>)"});
}

TEST(JsonGrammarGemma4, ObjectsHaveBareKeysInDictsortOrder) {
  // Schema order b, A, c, a_b; dictsort (case-insensitive): A, a_b, b, c.
  const std::string schema = R"({"type":"object","properties":{"b":{"type":"integer"},
      "A":{"type":"boolean"},"c":{"type":"object","properties":{"z":{"type":"null"},
      "Y":{"type":"string"}},"required":["z","Y"]},"a_b":{"type":"array",
      "items":{"type":"string"}}},"required":["b","c"]})";
  expect_gemma_language(
      schema,
      {R"({b:3,c:{Y:<|"|>y<|"|>,z:null}})", R"({A:true,a_b:[<|"|>a<|"|>,<|"|>b<|"|>],b:-1,c:{Y:<|"|><|"|>,z:null}})",
       R"({a_b:[],b:0,c:{Y:<|"|>{x:1}<|"|>,z:null}})"},
      {R"({"b":3,"c":{"Y":"y","z":null}})",      // JSON
       R"({c:{Y:<|"|>y<|"|>,z:null},b:3})",      // schema-independent order broken
       R"({b:3,A:true,c:{Y:<|"|>y<|"|>,z:null}})",  // schema order, not dictsort
       R"({b:3,c:{z:null,Y:<|"|>y<|"|>}})",
       R"({b: 3,c:{Y:<|"|>y<|"|>,z:null}})", R"({b:3, c:{Y:<|"|>y<|"|>,z:null}})",
       R"({b:3,c:{Y:<|"|>y<|"|>,z:null},})", R"({b:3,c:{Y:"y",z:null}})",
       R"({b:3,c:{Y:<|"|>y<|"|>,z:null},a_b:[<|"|>a<|"|>, <|"|>b<|"|>]})"});
  // Ties of the lowercased name go by the name itself.
  auto tie = compile_gemma(R"({"type":"object","properties":{"ab":{"const":1},"AB":{"const":2},"Ab":{"const":3}},
      "required":["ab","AB","Ab"]})");
  ASSERT_NE(tie, nullptr);
  EXPECT_EQ(JsonGrammar(*tie).minimal_value(tie->root), "{AB:2,Ab:3,ab:1}");
}

TEST(JsonGrammarGemma4, EnumsPatternsUnionsAndFormats) {
  expect_gemma_language(R"({"enum":["red","green",3,null,{"b":1,"a":"x"},["<y"]]})",
                        {R"(<|"|>red<|"|>)", R"(<|"|>green<|"|>)", "3", "null",
                         R"({a:<|"|>x<|"|>,b:1})", R"([<|"|><y<|"|>])"},
                        {R"("red")", R"(<|"|>re<|"|>)", R"({b:1,a:<|"|>x<|"|>})", "red"});
  // A pattern applies to the raw content: no escapes, '<' only where the pattern has it.
  expect_gemma_language(R"({"type":"string","pattern":"^a<b\"c\\\\d$"})",
                        {R"(<|"|>a<b"c\d<|"|>)"}, {R"(<|"|>a<b\"c\\d<|"|>)", R"(<|"|>a<|"|>)"});
  // A pattern that allows "<|" generates only its strings without it.
  expect_gemma_language(R"({"type":"string","pattern":"^<.$"})", {R"(<|"|><x<|"|>)"},
                        {R"(<|"|><|<|"|>)", R"(<|"|><<|"|>)"});
  expect_gemma_language(R"({"type":"string","format":"date"})", {R"(<|"|>2024-02-28<|"|>)"},
                        {R"(<|"|>2024-02-30<|"|>)", R"("2024-02-28")"});
  expect_gemma_language(
      R"({"type":"object","properties":{"v":{"anyOf":[{"type":"string","maxLength":2},
          {"type":"integer"},{"type":"null"},{"const":[1]}]}},"required":["v"]})",
      {R"({v:<|"|>ab<|"|>})", R"({v:7})", R"({v:null})", R"({v:[1]})"},
      {R"({v:<|"|>abc<|"|>})", R"({v:"ab"})", R"({v:[2]})"});
  // Recursion through $ref, and nesting to any depth.
  expect_gemma_language(
      R"({"$defs":{"n":{"type":"object","properties":{"name":{"type":"string"},
          "kids":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["name"]}},
          "$ref":"#/$defs/n"})",
      {R"({name:<|"|>r<|"|>})", R"({kids:[{kids:[],name:<|"|>b<|"|>}],name:<|"|>a<|"|>})"},
      {R"({name:<|"|>r<|"|>,kids:[]})"});
}

TEST(JsonGrammarGemma4, MinimalCompletionIsDialectAndCompletes) {
  auto person = compile_gemma(R"({"type":"object","properties":{"name":{"type":"string",
      "minLength":2},"tags":{"type":"array","items":{"type":"string","pattern":"^x[0-9]$"},
      "minItems":2},"Kind":{"enum":["pet",12]},"age":{"type":"integer"}},
      "required":["name","tags","Kind"]})");
  ASSERT_NE(person, nullptr);
  JsonGrammar grammar(*person);
  auto completion_after = [&](const std::string& prefix) {
    JsonStack stack = grammar.start();
    EXPECT_TRUE(grammar.accepts_prefix(stack, prefix)) << prefix;
    return grammar.minimal_completion(stack);
  };
  const std::string minimal = R"({Kind:12,name:<|"|>aa<|"|>,tags:[<|"|>x0<|"|>,<|"|>x0<|"|>]})";
  EXPECT_EQ(grammar.minimal_value(person->root), minimal);
  EXPECT_TRUE(grammar.matches(minimal));
  EXPECT_EQ(completion_after(""), minimal);
  EXPECT_EQ(completion_after("{Kind:<|\"|>p"), R"(et<|"|>,name:<|"|>aa<|"|>,tags:[<|"|>x0<|"|>,<|"|>x0<|"|>]})");
  EXPECT_EQ(completion_after(R"({Kind:12,na)"), R"(me:<|"|>aa<|"|>,tags:[<|"|>x0<|"|>,<|"|>x0<|"|>]})");
  EXPECT_EQ(completion_after(R"({Kind:12,name:<|)"), R"("|>aa<|"|>,tags:[<|"|>x0<|"|>,<|"|>x0<|"|>]})");
  // A '<' in the content: it may end the string (once minLength is met) or be content.
  EXPECT_EQ(completion_after(R"({Kind:12,name:<|"|><)"), R"(a<|"|>,tags:[<|"|>x0<|"|>,<|"|>x0<|"|>]})");
  EXPECT_EQ(completion_after(R"({Kind:12,name:<|"|>ab<)"), R"(|"|>,tags:[<|"|>x0<|"|>,<|"|>x0<|"|>]})");
  EXPECT_EQ(completion_after(R"({Kind:12,name:<|"|>ab<|"|>,tags:[<|"|>x)"), R"(0<|"|>,<|"|>x0<|"|>]})");
  // dictsort: age < Kind (case-insensitive), though 'K' < 'a' in ASCII.
  EXPECT_EQ(completion_after(R"({age:4)"), R"(,Kind:12,name:<|"|>aa<|"|>,tags:[<|"|>x0<|"|>,<|"|>x0<|"|>]})");
  EXPECT_EQ(completion_after(R"({Kind:12,name:<|"|>ab<|"|>,tags:[<|"|>x1<|"|>,<|"|>x2<|"|>])"), "}");

  // Random walks over dialect schemas: the completion always completes and is the shortest.
  const char* const schemas[] = {
      R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer",
          "minimum":1,"maximum":14},"opts":{"type":"object","properties":{"metric":{"type":
          "boolean"}}},"tags":{"type":"array","items":{"type":"string","maxLength":4},
          "minItems":1}},"required":["city","tags"]})",
      R"({"type":"object","properties":{"p":{"type":"string","pattern":"^(<a|b<)+<?$",
          "maxLength":7},"d":{"type":"string","format":"date-time"},"e":{"enum":["<x","<","y"]},
          "u":{"anyOf":[{"type":"string","minLength":3},{"type":"number"},{"type":"null"}]}},
          "required":["p","e","u"]})",
      R"({"$defs":{"n":{"type":"object","properties":{"Name":{"type":"string","minLength":1,
          "maxLength":3},"kids":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2}},
          "required":["Name","kids"]}},"$ref":"#/$defs/n"})",
      "true",
  };
  std::mt19937 rng(5);
  int states = 0;
  int searched = 0;
  for (const char* schema_text : schemas) {
    auto schema = compile_gemma(schema_text);
    ASSERT_NE(schema, nullptr);
    walk_completions(*schema, schema_text, "<|\"{}[],:-.019atfn", rng, states, searched);
  }
  EXPECT_GT(states, 2000);
  EXPECT_GT(searched, 150);
}

TEST(JsonGrammarGemma4, WhatTheSyntaxCannotWriteIsRefused) {
  auto error_of = [](const std::string& text) {
    auto schema = compile_json_schema(text, JsonSyntax::kGemma4);
    EXPECT_FALSE(schema.ok()) << text;
    return schema.ok() ? std::string() : schema.error().message;
  };
  EXPECT_NE(error_of(R"({"properties":{"a:b":{}}})").find("'#/properties/a:b'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"properties":{"":{}}})").find("empty property name"), std::string::npos);
  EXPECT_NE(error_of(R"({"properties":{" a":{}}})").find("whitespace"), std::string::npos);
  EXPECT_NE(error_of(R"({"properties":{"a<b":{}}})").find(": { } [ ] , <"), std::string::npos);
  EXPECT_NE(error_of(R"({"enum":["a<|b"]})").find("'#/enum/0'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"^x<\\|$"})").find("contains '<|'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"properties":{"é":{},"b":{}}})").find("not ASCII"), std::string::npos);
  // One non-ASCII key alone has no order to get wrong; JSON keeps taking what it took.
  EXPECT_TRUE(compile_json_schema(R"({"properties":{"é":{}}})", JsonSyntax::kGemma4).ok());
  EXPECT_TRUE(compile_json_schema(R"({"properties":{"a:b":{},"":{}},"enum":[{"a<|":"<|"}]})").ok());
}


// ---- Keywords added for coverage (issue 37): multipleOf, maxContains, URI references and
// anchors, more formats, unevaluatedItems, more forms of not, anyOf alternatives and optional
// properties left out, oneOf object shapes kept apart by a required property. ----

// Random documents the grammar generates for `schema_text`: each byte drawn among those it
// takes (so far from the shortest values), ended by its minimal completion.
std::vector<std::string> random_documents(const std::string& schema_text, int count,
                                          uint32_t seed) {
  auto schema = compile(schema_text);
  if (schema == nullptr) return {};
  JsonGrammar grammar(*schema);
  std::mt19937 rng(seed);
  std::vector<std::string> documents;
  for (int n = 0; n < count; ++n) {
    JsonStack stack = grammar.start();
    std::string text;
    for (int step = 0; step < 48; ++step) {
      if (grammar.complete(stack) && rng() % 6 == 0) break;
      std::vector<uint8_t> allowed;
      for (int byte = 0; byte < 256; ++byte) {
        JsonStack copy = stack;
        if (grammar.feed(copy, static_cast<uint8_t>(byte)) == JsonGrammar::Feed::kAccepted) {
          allowed.push_back(static_cast<uint8_t>(byte));
        }
      }
      if (allowed.empty()) break;
      const uint8_t byte = allowed[rng() % allowed.size()];
      grammar.feed(stack, byte);
      text += static_cast<char>(byte);
    }
    text += grammar.minimal_completion(stack);
    EXPECT_TRUE(grammar.matches(text)) << schema_text << ": " << text;
    documents.push_back(text);
  }
  return documents;
}

// The integers of a flat integer array "[a,b,...]" (or one integer).
std::vector<long long> integers_in(const std::string& text) {
  std::vector<long long> values;
  std::string digits;
  for (char c : text + ",") {
    if (c == '-' || (c >= '0' && c <= '9')) {
      digits += c;
    } else if (!digits.empty()) {
      values.push_back(std::stoll(digits));
      digits.clear();
    }
  }
  return values;
}

TEST(JsonGrammarCoverage, MultipleOfGeneratesOnlyMultiplesInRange) {
  expect_language(R"({"type":"integer","multipleOf":7,"minimum":-20,"maximum":30})",
                  {"0", "7", "-14", "28"}, {"1", "35", "-21", "6", "14.0"});
  // 1.5: the integers that are multiples, 3k (every one divides exactly in floating point).
  expect_language(R"({"multipleOf":1.5})", {"0", "3", "-9", R"("x")"}, {"1.5", "4"});
  expect_language(R"({"type":"number","multipleOf":0.01,"exclusiveMinimum":0})", {"1", "250"},
                  {"0", "0.5"});
  // allOf: multiples of both (the least common multiple); enum values are filtered.
  expect_language(R"({"allOf":[{"multipleOf":4},{"multipleOf":6}]})", {"12", "-24"},
                  {"4", "6"});
  expect_language(R"({"enum":[3,4,6,7.5],"multipleOf":3})", {"3", "6"}, {"4", "7.5"});
  // Beyond the 15 digits the grammar writes, only 0 is a multiple.
  expect_language(R"({"type":"integer","multipleOf":1e300})", {"0"}, {"1"});
  // Every generated document is a multiple in the range (fails if the grammar ever ends a
  // number off the step: checked once with in_range's multiple test removed).
  for (const char* schema : {R"({"type":"integer","multipleOf":7,"minimum":-50,"maximum":500})",
                             R"({"type":"array","items":{"type":"integer","multipleOf":13,
                                 "minimum":20}})"}) {
    const long long step = std::string(schema).find("13") != std::string::npos ? 13 : 7;
    for (const std::string& doc : random_documents(schema, 300, 3)) {
      for (long long value : integers_in(doc)) {
        EXPECT_EQ(value % step, 0) << schema << ": " << doc;
        EXPECT_GE(value, step == 7 ? -50 : 20) << doc;
        if (step == 7) EXPECT_LE(value, 500) << doc;
      }
    }
  }
  auto error_of = [](const std::string& text) {
    auto schema = compile_json_schema(text);
    EXPECT_FALSE(schema.ok()) << text;
    return schema.ok() ? std::string() : schema.error().message;
  };
  // 0.7's double is too far from 7/10 for k * 7 / 0.7 to come out an integer every time.
  EXPECT_NE(error_of(R"({"multipleOf":0.7})").find("multipleOf 0.7 cannot be enforced"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"multipleOf":0})").find("above 0"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"integer","multipleOf":10,"minimum":1,"maximum":9})")
                .find("no integer"),
            std::string::npos);
}

TEST(JsonGrammarCoverage, MaxContainsCapsTheLength) {
  const char* schema =
      R"({"type":"array","items":{"type":"integer"},"contains":{"const":1},"maxContains":2})";
  expect_language(schema, {"[1]", "[1,5]"}, {"[]", "[5]", "[1,1,1]", "[1,2,3]"});
  for (const std::string& doc : random_documents(schema, 200, 4)) {
    const auto values = integers_in(doc);
    const auto ones = std::count(values.begin(), values.end(), 1LL);
    EXPECT_GE(ones, 1) << doc;
    EXPECT_LE(ones, 2) << doc;
  }
  // Without contains, minContains/maxContains say nothing.
  expect_language(R"({"type":"array","items":{"type":"integer"},"maxContains":0})", {"[1,2]"},
                  {});
  expect_language(R"({"type":"array","contains":{"const":1},"minContains":0,"maxContains":0})",
                  {"[]"}, {"[1]"});
}

TEST(JsonGrammarCoverage, ReferencesResolveAgainstIdsAndAnchors) {
  // A relative reference against the root's $id, and one to a nested $id.
  expect_language(R"({"$id":"http://example.com/root.json","type":"object",
      "properties":{"a":{"$ref":"item.json"},"b":{"$ref":"http://example.com/root.json#/$defs/n"}},
      "$defs":{"i":{"$id":"item.json","type":"string"},"n":{"type":"null"}}})",
                  {R"({"a":"x","b":null})"}, {R"({"a":1})", R"({"b":"x"})"});
  // $anchor, and "#/..." inside a nested resource is relative to that resource.
  expect_language(R"({"$schema":"https://json-schema.org/draft/2020-12/schema",
      "$id":"http://example.com/r","$ref":"#thing",
      "$defs":{"t":{"$anchor":"thing","type":"integer"},
               "nested":{"$id":"nested/","$defs":{"x":{"type":"boolean"}},"$ref":"#/$defs/x"}}})",
                  {"1"}, {"true", R"("a")"});
  expect_language(R"({"$schema":"https://json-schema.org/draft/2020-12/schema",
      "$id":"http://example.com/a","$ref":"nested/#/$defs/x",
      "$defs":{"n":{"$id":"nested/","$defs":{"x":{"type":"boolean"}}},"x":{"type":"string"}}})",
                  {"true"}, {R"("a")"});
  // Draft 7's anchors ("$id": "#name"); JSON pointers are percent-decoded.
  expect_language(R"({"$schema":"http://json-schema.org/draft-07/schema#",
      "allOf":[{"$ref":"#foo"}],"definitions":{"A":{"$id":"#foo","type":"integer"}}})",
                  {"3"}, {R"("a")"});
  expect_language(R"({"properties":{"p":{"$ref":"#/$defs/a%25b"}},
      "$defs":{"a%b":{"type":"null"}}})",
                  {R"({"p":null})"}, {R"({"p":1})"});
  // urn: bases; references to the document's own absolute URI.
  expect_language(R"({"$id":"urn:uuid:1234","properties":{"f":{"$ref":"urn:uuid:1234#/$defs/b"}},
      "$defs":{"b":{"type":"string"}}})",
                  {R"({"f":"x"})"}, {R"({"f":1})"});
  auto error_of = [](const std::string& text) {
    auto schema = compile_json_schema(text);
    EXPECT_FALSE(schema.ok()) << text;
    return schema.ok() ? std::string() : schema.error().message;
  };
  EXPECT_NE(error_of(R"({"$ref":"http://example.com/other.json"})")
                .find("'http://example.com/other.json', which is not this document"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"#nowhere"})").find("anchor that is not in the document"),
            std::string::npos);
  // Without $schema, a $id beside $ref moves the base only from draft 2019-09 on: where that
  // changes the target, refused.
  EXPECT_NE(error_of(R"({"$id":"http://x/base/","definitions":{
      "a":{"$id":"http://x/a.json","type":"string"},"b":{"$id":"a.json","type":"number"}},
      "allOf":[{"$id":"http://x/","$ref":"a.json"}]})")
                .find("resolves differently in draft 7"),
            std::string::npos);
  // A $ref inside a value (enum) is data, not a reference, and is left alone.
  expect_language(R"({"enum":[{"$ref":"#/x"}]})", {R"({"$ref":"#/x"})"}, {});
}

TEST(JsonGrammarCoverage, MoreFormats) {
  expect_language(R"({"type":"string","format":"uri-reference"})",
                  {R"("http://a.b/c?d#e")", R"("a/b")", R"("/a")"}, {R"("a:b")", R"("")"});
  expect_language(R"({"type":"string","format":"json-pointer"})", {R"("")", R"("/a~1b/0")"},
                  {R"("a")", R"("/~2")"});
  expect_language(R"({"type":"string","format":"relative-json-pointer"})",
                  {R"("0")", R"("1/a")", R"("2#")"}, {R"("01")", R"("/a")"});
  expect_language(R"({"type":"string","format":"duration"})", {R"("P3D")", R"("PT1H")",
                  R"("P1W")", R"("P2DT3H")"}, {R"("P")", R"("PT")", R"("3D")"});
  expect_language(R"({"type":"string","format":"regex"})", {R"("ab c1")", R"("")"},
                  {R"("a(")", R"("[")"});
  expect_language(R"({"type":"string","format":"idn-hostname"})", {R"("a.b1")"},
                  {R"("ab--cd")", R"("-a")"});
  expect_language(R"({"type":"string","format":"uri-template"})", {R"("/a/b?c=d")"},
                  {R"("/a/{b}")"});
}

TEST(JsonGrammarCoverage, UnevaluatedItemsJudgesTheItemsNothingEvaluates) {
  expect_language(R"({"prefixItems":[{"type":"string"}],"unevaluatedItems":false})",
                  {"[]", R"(["a"])"}, {R"(["a",1])", "[1]"});
  expect_language(R"({"type":"array","unevaluatedItems":{"type":"integer"}})", {"[1,2]"},
                  {R"(["a"])"});
  // items evaluates every item: unevaluatedItems has nothing left to judge.
  expect_language(R"({"items":{"type":"integer"},"unevaluatedItems":false})", {"[1,2]"}, {});
  // An allOf branch's items count for the outer keyword only if nothing else speaks of items;
  // otherwise (then/else, alternatives, other branches' items) refused rather than guessed.
  expect_language(R"({"allOf":[true],"unevaluatedItems":false})", {"[]"}, {"[1]"});
  auto schema = compile_json_schema(
      R"({"if":{"type":"array"},"then":{"prefixItems":[true]},"unevaluatedItems":false})");
  ASSERT_FALSE(schema.ok());
  EXPECT_NE(schema.error().message.find("unevaluatedItems"), std::string::npos);
}

TEST(JsonGrammarCoverage, NotRequiredNotOfTypesAndDoubleNegation) {
  // not: {required: [a, b]}: only objects, never with both a and b (the last optional one is
  // left out).
  expect_language(R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"required":["a"],
      "not":{"required":["a","b"]}})",
                  {R"({"a":1})", R"({"a":1,"c":2})"}, {R"({"a":1,"b":2})", "1"});
  // allOf of two nots: each of them.
  expect_language(R"({"allOf":[{"not":{"type":"string"}},{"not":{"type":"null"}}]})",
                  {"1", "true"}, {R"("a")", "null"});
  // not: {type: T, ...}: a value of another type fails the inner schema.
  expect_language(R"({"not":{"type":"object","properties":{"foo":{"type":"string"}}}})",
                  {"1", R"("x")"}, {"{}"});
  expect_language(R"({"not":{"not":{"type":"integer"}}})", {"3"}, {R"("a")"});
  // An optional property that no value fits is never generated; not: {} fits nothing.
  expect_language(R"({"type":"object","properties":{"a":{"not":{}},"b":{"type":"null"}}})",
                  {"{}", R"({"b":null})"}, {R"({"a":1})"});
}

TEST(JsonGrammarCoverage, AnyOfLeavesOutAlternativesItCannotCompile) {
  // The second alternative uses an unsupported keyword: the first alone is generated.
  expect_language(R"({"anyOf":[{"type":"integer"},{"type":"string","$dynamicRef":"#a"}]})",
                  {"1"}, {R"("a")"});
  // A left-out alternative takes back what it compiled (here a $ref target that failed).
  expect_language(R"js({"type":"object","properties":{
      "x":{"anyOf":[{"$ref":"#/$defs/bad"},{"type":"null"}]},"y":{"$ref":"#/$defs/ok"}},
      "$defs":{"bad":{"type":"string","pattern":"(?=a)"},"ok":{"type":"boolean"}}})js",
                  {R"({"x":null,"y":true})"}, {R"({"x":"a"})"});
  // Every alternative refused: the first error is reported.
  auto schema = compile_json_schema(R"js({"anyOf":[{"$dynamicRef":"#a"},{"pattern":"(?=a)"}]})js");
  ASSERT_FALSE(schema.ok());
  EXPECT_NE(schema.error().message.find("'#/anyOf/0/$dynamicRef'"), std::string::npos);
  // oneOf alternatives are not left out (a value of another might match the one left out).
  EXPECT_FALSE(
      compile_json_schema(R"({"oneOf":[{"type":"integer"},{"$dynamicRef":"#a"}]})").ok());
}

// ---- Real schemas as they come (issue 61) ----

TEST(JsonSchemaReal, UnknownKeywordsAndFormatsAreAnnotations) {
  // Vendor and typo keys, OpenAPI's example/readonly, a property-like key at the top, free-text
  // and OpenAPI formats: ignored as JSON Schema says (jsonschema ignores them too). Fails if
  // unknown keywords are refused again.
  const char* schema = R"({"type":"object","example":{"a":1},"readonly":true,"name":"x",
      "weight":3,"preferredOrder":["a"],"_format":"int","_uniqueItems":true,"secureString":true,
      "self":{"vendor":"v"},"age":{"type":"integer"},
      "properties":{"a":{"type":"integer","format":"int64","comment":"c"},
                    "b":{"type":"string","format":"free text","x-order":1}},
      "required":["a","b"]})";
  expect_language(schema, {R"({"a":-3,"b":"anything"})"}, {R"({"a":"1","b":"x"})", "{}"});
  // An unknown keyword's value is never read as a schema: its "$ref" or "type" asserts nothing.
  expect_language(R"({"type":"string","unknownKeyword":{"type":"integer","$ref":"#/nowhere"}})",
                  {R"("s")"}, {"1"});
  // ...but it may hold the target of a $ref (OpenAPI's components/schemas), whose own $refs
  // resolve.
  expect_language(R"({"$ref":"#/components/schemas/Pet","components":{"schemas":{
      "Pet":{"type":"object","properties":{"tag":{"$ref":"#/components/schemas/Tag"}},
             "required":["tag"],"example":{"tag":"t"}},
      "Tag":{"type":"string","readOnly":true,"maxLength":3}}}})",
                  {R"({"tag":"abc"})"}, {R"({"tag":"abcd"})", R"({"tag":1})"});
  // An optional property that refers to another document (not fetched) is never generated;
  // a required one is refused.
  expect_language(R"({"type":"object","properties":{"lint":{"$ref":"eslintrc.json"},
      "n":{"type":"integer"}}})",
                  {R"({"n":1})", "{}"}, {R"({"lint":{}})"});
  EXPECT_FALSE(compile_json_schema(R"({"type":"object","properties":{"lint":{"$ref":"x.json"}},
      "required":["lint"]})")
                   .ok());
  // allOf branches that give an unknown keyword different values still merge.
  expect_language(R"({"allOf":[{"type":"integer","weight":1},{"minimum":2,"weight":2}]})",
                  {"2"}, {"1"});
  // not of only unknown keywords: the inner schema accepts everything, so nothing is left.
  EXPECT_FALSE(compile_json_schema(R"({"not":{"foo":1}})").ok());

  // strict: unknown keywords and formats are refused, named.
  auto strict_error = [](const std::string& text) {
    auto compiled = compile_json_schema(text, JsonSyntax::kJson, /*strict=*/true);
    EXPECT_FALSE(compiled.ok()) << text;
    return compiled.ok() ? std::string() : compiled.error().message;
  };
  EXPECT_NE(strict_error(schema).find("keyword 'example'"), std::string::npos);
  EXPECT_NE(strict_error(R"({"type":"string","format":"iso-week"})").find("'#/format'"),
            std::string::npos);
  EXPECT_NE(strict_error(R"({"allOf":[{"weight":1},{"weight":2}]})").find("'weight'"),
            std::string::npos);
  EXPECT_TRUE(compile_json_schema(R"({"type":"string","format":"date","title":"t","x-a":1})",
                                  JsonSyntax::kJson, true)
                  .ok());

  // Known assertions that are not enforced stay refused, strict or not, with what to do.
  auto error_of = [](const std::string& text) {
    auto compiled = compile_json_schema(text);
    EXPECT_FALSE(compiled.ok()) << text;
    return compiled.ok() ? std::string() : compiled.error().message;
  };
  EXPECT_NE(error_of(R"({"$dynamicRef":"#meta"})").find("keyword '$dynamicRef'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"divisibleBy":2})").find("multipleOf"), std::string::npos);
  EXPECT_NE(error_of(R"({"disallow":"string"})").find("'#/disallow'"), std::string::npos);
}

TEST(JsonSchemaReal, DecimalMultipleOfIsExactInFloatingPoint) {
  // Every integer is a multiple of 0.1, and validators' check (instance / 0.1 is whole in
  // binary floating point) passes for every one of them: generated. 0.7 fails it (7 / 0.7 is
  // 10.000000000000002): refused with why.
  std::mt19937_64 rng(5);
  for (double m : {0.1, 0.2, 0.3, 0.05, 0.01, 0.001, 0.25, 1.5, 0.7, 1.1, 0.07}) {
    char text[64];
    std::snprintf(text, sizeof(text), R"({"type":"number","multipleOf":%.17g})", m);
    auto schema = compile_json_schema(text);
    if (!schema.ok()) {
      EXPECT_NE(schema.error().message.find("cannot be enforced"), std::string::npos) << text;
      // Refused only when some multiple of the least integer step really fails the check.
      continue;
    }
    const int64_t step = (*schema)->nodes[(*schema)->root].multiple_of;
    for (int k = 0; k < 300000; ++k) {
      const int64_t n = k < 200000 ? k : static_cast<int64_t>(rng() % (999999999999999 / step));
      const double x = static_cast<double>(n * step);
      const double q = x / m;
      ASSERT_EQ(std::floor(q), q) << text << ": " << x << " / " << m;
    }
  }
  EXPECT_TRUE(compile_json_schema(R"({"multipleOf":0.1})").ok());
  EXPECT_FALSE(compile_json_schema(R"({"multipleOf":0.7})").ok());
}

// Every document the grammar generates for `schema_text` (random walks) must fail `rejects`.
void expect_never_generated(const std::string& schema_text, const std::string& rejects,
                            int count = 200) {
  auto rejected = compile(rejects);
  ASSERT_NE(rejected, nullptr);
  JsonGrammar judge(*rejected);
  for (const std::string& doc : random_documents(schema_text, count, 11)) {
    EXPECT_FALSE(judge.matches(doc)) << schema_text << " generated " << doc
                                     << ", which `not` rejects";
  }
}

TEST(JsonSchemaReal, NotOfValuesPatternsBoundsAndAnyOf) {
  // not: {enum} / {const}: every other value; over literals, the rest of them.
  expect_language(R"({"type":"string","not":{"enum":["a","b\u0000"]}})",
                  {R"("c")", R"("ab")", R"("")"}, {R"("a")", R"("b\u0000")"});
  expect_language(R"({"enum":[1,2,"x"],"not":{"const":2}})", {"1", R"("x")"}, {"2"});
  expect_language(R"({"type":"integer","minimum":0,"maximum":9,"not":{"enum":[0,1,2,7]}})",
                  {"3", "6"}, {"0", "1", "2", "7"});
  expect_language(R"({"type":"boolean","not":{"const":true}})", {"false"}, {"true"});
  expect_language(R"({"type":["string","null"],"not":{"const":null}})", {R"("a")"}, {"null"});
  // not: {pattern}: the strings it does not match, under Python's reading too (\\d takes other
  // digits there, $ a final newline).
  expect_language(R"({"type":"string","not":{"pattern":"^(/)?([^/\u0000]+(/)?)+$"}})",
                  {R"("")", R"("a//b")"}, {R"("/a/b")", R"("ab")"});
  expect_language(R"({"type":"string","not":{"pattern":"\\d"}})", {R"("ab")"},
                  {R"("a1")", "\"\xd9\xa3\""});
  expect_language(R"({"type":"string","not":{"pattern":"^a$"}})", {R"("b")", R"("aa")"},
                  {R"("a")", R"("a
")"});
  // Bounds: the other side.
  expect_language(R"({"type":"string","not":{"minLength":3}})", {R"("ab")"}, {R"("abc")", "1"});
  expect_language(R"({"not":{"maximum":5}})", {"6", "100"}, {"5", R"("a")", "null"});
  expect_language(R"({"not":{"exclusiveMinimum":5}})", {"5", "-3"}, {"6"});
  expect_language(R"({"type":"array","not":{"maxItems":1}})", {"[1,2]"}, {"[]", "[1]"});
  // A conjunction inside: one keyword's negation is enough (the first that fits the rest).
  expect_language(R"({"type":"string","not":{"type":"string","pattern":"^a"}})",
                  {R"("ba")"}, {R"("ab")"});
  // anyOf: every alternative rejected; not of not; $ref and allOf inside.
  expect_language(R"({"type":"string","not":{"anyOf":[{"pattern":"^x"},{"maxLength":1}]}})",
                  {R"("ax")", R"("abc")"}, {R"("xa")", R"("a")", "1"});
  // Strings not matching ^x and numbers below 5 at once: nothing (a string passes minimum).
  auto nothing = compile_json_schema(R"({"not":{"anyOf":[{"pattern":"^x"},{"minimum":5}]}})");
  ASSERT_FALSE(nothing.ok());
  EXPECT_NE(nothing.error().message.find("no value fails every alternative"), std::string::npos)
      << nothing.error().message;
  expect_language(R"({"not":{"$ref":"#/$defs/a"},"$defs":{"a":{"type":"object"}}})", {"1"},
                  {"{}"});
  // allOf of two nots (merged into not: {anyOf}).
  expect_language(R"({"type":"string","allOf":[{"not":{"const":"a"}},{"not":{"pattern":"b"}}]})",
                  {R"("c")"}, {R"("a")", R"("abc")"});

  // The generated documents never satisfy the negated schema (fails if `not` is dropped).
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type":"string","maxLength":3,"not":{"enum":["a","ab",""]}})",
       R"({"enum":["a","ab",""]})"},
      {R"({"type":"string","maxLength":4,"not":{"pattern":"[ab]"}})", R"({"pattern":"[ab]"})"},
      {R"({"type":"integer","minimum":-3,"maximum":3,"not":{"enum":[-1,0,1]}})",
       R"({"enum":[-1,0,1]})"},
      {R"({"type":"array","items":{"type":"integer"},"not":{"minItems":2}})",
       R"({"minItems":2})"},
      {R"({"type":"object","properties":{"a":{},"b":{}},"not":{"required":["a","b"]}})",
       R"({"required":["a","b"]})"},
      {R"({"not":{"anyOf":[{"type":"string"},{"type":"object"},{"minimum":0}]}})",
       R"({"anyOf":[{"type":"string"},{"type":"object"},{"minimum":0}]})"},
  };
  for (const auto& [schema, inner] : cases) expect_never_generated(schema, inner);

  // not: {} and not: true allow nothing; a keyword without a negation is refused, named.
  EXPECT_FALSE(compile_json_schema(R"({"not":{}})").ok());
  EXPECT_FALSE(compile_json_schema(R"({"type":"integer","not":{"type":"integer","minimum":0,
      "maximum":-1}})")
                   .ok() &&
               false);
  auto refused = compile_json_schema(R"({"not":{"format":"date"}})");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("not: {format} cannot be enforced"), std::string::npos);
}

TEST(JsonSchemaReal, OverlappingOneOfGeneratesValuesOfExactlyOne) {
  // Each alternative apart from the others (not of the others), combined as anyOf.
  expect_language(R"({"oneOf":[{"type":"string"},{"const":"a"}]})", {R"("b")"}, {R"("a")"});
  expect_language(R"({"oneOf":[{"type":"string","maxLength":5},{"type":"string","minLength":3}]})",
                  {R"("ab")"}, {R"("abc")", R"("abcdef")"});
  expect_language(R"({"oneOf":[{"type":"string","pattern":"^a"},{"type":"string","pattern":"b$"}]})",
                  {R"("a")", R"("ac")"}, {R"("ab")", R"("b")"});
  // Object shapes with the same required property: a value the first's schema rejects.
  expect_language(R"({"oneOf":[{"type":"object","properties":{"a":{"type":"integer"}},
      "required":["a"]},{"type":"object","properties":{"a":{}},"required":["a"]}]})",
                  {R"({"a":"x"})", R"({"a":null})"}, {R"({"a":1})"});
  // Required sets that overlap (SchemaStore's shapes): objects without the other's names.
  const char* shapes = R"({"type":"object","properties":{"run":{"type":"string"},
      "shell":{"type":"string"},"uses":{"type":"string"},"with":{"type":"object"}},
      "oneOf":[{"required":["run"]},{"required":["uses"]},{"required":["with"]}]})";
  expect_language(shapes, {R"({"run":"a","shell":"b"})"},
                  {R"({"run":"a","uses":"b"})", R"({"uses":"b","with":{}})"});
  // Every generated document matches exactly one alternative (fails if the exclusions are
  // dropped and the first alternative generated as it is).
  const std::pair<const char*, std::vector<const char*>> cases[] = {
      {shapes, {R"({"properties":{"run":{},"shell":{},"uses":{},"with":{}},"required":["run"]})",
                R"({"properties":{"run":{},"shell":{},"uses":{},"with":{}},"required":["uses"]})",
                R"({"properties":{"run":{},"shell":{},"uses":{},"with":{}},"required":["with"]})"}},
      {R"({"type":"array","maxItems":3,"items":{"oneOf":[{"type":"string","maxLength":3},
          {"type":"string","pattern":"[a-f]"},{"enum":["x","y",1]}]}})",
       {}},
      {R"({"oneOf":[{"type":"integer","minimum":0,"maximum":20},{"type":"integer","multipleOf":3},
          {"enum":[1,2,4,"z"]}]})",
       {R"({"type":"integer","minimum":0,"maximum":20})", R"({"type":"integer","multipleOf":3})",
        R"({"enum":[1,2,4,"z"]})"}},
  };
  for (const auto& [schema, alternatives] : cases) {
    std::vector<std::shared_ptr<const JsonSchema>> judges;
    for (const char* alternative : alternatives) judges.push_back(compile(alternative));
    for (const std::string& doc : random_documents(schema, 200, 13)) {
      int matched = 0;
      for (const auto& judge : judges) matched += JsonGrammar(*judge).matches(doc) ? 1 : 0;
      if (!judges.empty()) EXPECT_EQ(matched, 1) << schema << " generated " << doc;
    }
  }
  // An alternative no value satisfies beside the siblings is left out (none generated can
  // match it); travis' env: the closed object shapes overlap in {}, told apart by negation.
  expect_language(R"({"type":"string","oneOf":[{"type":"object"},{"maxLength":2},
      {"minLength":5}]})",
                  {R"("a")"}, {R"("abc")", "{}"});
  const char* env = R"({"oneOf":[{"$ref":"#/$defs/vars"},{"type":"object","properties":{
      "global":{"$ref":"#/$defs/vars"},"jobs":{"$ref":"#/$defs/vars"}},"additionalProperties":false}],
      "$defs":{"vars":{"oneOf":[{"$ref":"#/$defs/var"},{"type":"array","items":{"$ref":"#/$defs/var"}}]},
      "var":{"oneOf":[{"type":"string","pattern":"[^=]+=.*"},{"type":"object",
      "additionalProperties":false,"properties":{"secure":{"type":"string"}}}]}}})";
  expect_language(env, {R"("a=b")", R"(["a=b"])"}, {"{}", R"("ab")"});
  // Nothing is left apart: refused, naming the overlap.
  auto both = compile_json_schema(R"({"oneOf":[{"type":"integer"},{"minimum":0,"type":"integer"},
      {"type":"integer","maximum":-1}]})");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.error().message.find("overlaps"), std::string::npos);
}

TEST(JsonSchemaReal, AllOfMergesPatternsOneOfsAndClosedObjects) {
  // Two patterns (or a pattern and a format): one automaton, both must match.
  expect_language(R"({"allOf":[{"type":"string","pattern":"^a"},{"pattern":"b$"},
      {"pattern":"\\d"}]})",
                  {R"("a1b")"}, {R"("ab")", R"("a1")", R"("1b")"});
  expect_language(R"({"allOf":[{"type":"string","format":"date"},{"pattern":"-12-"}]})",
                  {R"("2024-12-01")"}, {R"("2024-11-01")"});
  // items on one side still reaches the positions the other side's prefixItems give.
  expect_language(R"({"allOf":[{"type":"array","items":{"type":"integer"}},
      {"prefixItems":[{"minimum":3}]}]})",
                  {"[3,1]", "[]"}, {"[1]", R"(["a"])", R"([3,"a"])"});
  // (Netlify's collections: oneOf of required names beside the properties, so the other
  // alternative's negation reaches into an array's first item.)
  const char* collection = R"({"properties":{"fields":{"type":"array","items":{
      "properties":{"name":{"type":"string"}},"required":["name"]}},"files":{"type":"array"},
      "folder":{"type":"string"}},"oneOf":[{"required":["files"]},{"required":["folder"]}]})";
  auto fields = compile(R"({"properties":{"fields":{"type":"array","items":{
      "properties":{"name":{"type":"string"}},"required":["name"]}},"files":{},"folder":{}}})");
  for (const std::string& doc : random_documents(collection, 300, 19)) {
    if (doc[0] == '{') EXPECT_TRUE(JsonGrammar(*fields).matches(doc)) << doc;
  }
  // enum and const together (a branch's enum, another's const): the values in both.
  expect_language(R"({"allOf":[{"enum":["a","b",1]},{"const":"b"}]})", {R"("b")"},
                  {R"("a")", "1"});
  EXPECT_FALSE(compile_json_schema(R"({"enum":[1,2],"const":3})").ok());
  // Two oneOfs: their product (exactly one pair holds when exactly one of each side does).
  const char* product = R"({"allOf":[{"oneOf":[{"type":"string"},{"type":"integer"}]},
      {"oneOf":[{"minLength":2},{"maximum":3}]}]})";
  expect_language(product, {R"("a")", "5"}, {R"("ab")", "3"});
  expect_language(R"({"anyOf":[{"type":"string"},{"type":"integer"}],
      "oneOf":[{"minLength":2},{"maximum":3}]})",
                  {R"("a")", "5"}, {R"("ab")", "3", "null"});
  std::string wide = R"({"allOf":[{"oneOf":[)";
  for (int i = 0; i < 9; ++i) wide += std::string(i ? "," : "") + "{\"const\":" + std::to_string(i) + "}";
  wide += "]},{\"oneOf\":[";
  for (int i = 0; i < 9; ++i) wide += std::string(i ? "," : "") + "{\"minimum\":" + std::to_string(i) + "}";
  wide += "]}]}";
  auto too_wide = compile_json_schema(wide);
  ASSERT_FALSE(too_wide.ok());
  EXPECT_NE(too_wide.error().message.find("kMaxOneOfProduct"), std::string::npos);
  // A required property against another branch's additionalProperties: its schema applies
  // (as additionalProperties or a matching patternProperties); only false is unsatisfiable.
  expect_language(R"({"allOf":[{"properties":{"a":{"type":"integer"}},"required":["a"]},
      {"type":"object","properties":{"b":{}},"additionalProperties":{"minimum":3}}]})",
                  {R"({"a":3})", R"({"a":4,"b":null})"}, {R"({"a":2})", "{}"});
  expect_language(R"({"allOf":[{"properties":{"x_id":{"type":"integer"}},"required":["x_id"]},
      {"type":"object","patternProperties":{"_id$":{"maximum":9}},"additionalProperties":false}]})",
                  {R"({"x_id":9})"}, {R"({"x_id":10})"});
  // unevaluatedProperties beside allOf sees its branches' properties; a branch's own does not.
  expect_language(R"({"type":"object","properties":{"foo":{"type":"string"}},
      "allOf":[{"properties":{"bar":{"type":"string"}},"required":["bar"]}],
      "unevaluatedProperties":false})",
                  {R"({"foo":"a","bar":"b"})", R"({"bar":"b"})"}, {R"({"foo":"a"})"});
  // An allOf branch's unevaluatedProperties, merged up, still judges a sibling anyOf's
  // properties (the test suite's unevaluatedProperties #31).
  expect_language(R"({"allOf":[{"properties":{"foo":true},"unevaluatedProperties":false}],
      "anyOf":[{"properties":{"bar":true}}]})",
                  {R"({"foo":1})", "{}"}, {R"({"bar":1})", R"({"foo":1,"bar":1})"});
  EXPECT_FALSE(compile_json_schema(R"({"type":"object","allOf":[{"properties":{"bar":{}},
      "required":["bar"],"unevaluatedProperties":false},{"properties":{"baz":{}},
      "required":["baz"]}]})")
                   .ok());
  auto closed = compile_json_schema(R"({"allOf":[{"properties":{"a":{}},"required":["a"]},
      {"type":"object","properties":{"b":{}},"additionalProperties":false}]})");
  ASSERT_FALSE(closed.ok());
  EXPECT_NE(closed.error().message.find("no object satisfies both"), std::string::npos);
  // The generated documents validate against every branch (checked by the product's parts).
  auto first = compile(R"({"oneOf":[{"type":"string"},{"type":"integer"}]})");
  auto at_least_two = compile(R"({"minLength":2})");
  auto at_most_three = compile(R"({"maximum":3})");
  for (const std::string& doc : random_documents(product, 200, 17)) {
    EXPECT_TRUE(JsonGrammar(*first).matches(doc)) << doc;
    EXPECT_NE(JsonGrammar(*at_least_two).matches(doc), JsonGrammar(*at_most_three).matches(doc))
        << product << " generated " << doc;
  }
}

TEST(JsonSchemaReal, LimitsSizedForRealSchemasAndBadInputBounded) {
  // 300 required properties (the grammar's key window slides): all of them, in order.
  std::string properties, required, document = "{";
  for (int i = 0; i < 300; ++i) {
    const std::string name = "p" + std::to_string(i);
    properties += std::string(i ? "," : "") + "\"" + name + "\":{\"type\":\"integer\"}";
    required += std::string(i ? "," : "") + "\"" + name + "\"";
    document += std::string(i ? "," : "") + "\"" + name + "\":" + std::to_string(i);
  }
  document += "}";
  const std::string many = R"({"type":"object","properties":{)" + properties +
                           R"(},"required":[)" + required + "]}";
  auto schema = compile(many);
  ASSERT_NE(schema, nullptr);
  JsonGrammar grammar(*schema);
  EXPECT_TRUE(grammar.matches(document));
  EXPECT_FALSE(grammar.matches(R"({"p0":0})"));
  JsonStack stack = grammar.start();
  ASSERT_TRUE(grammar.accepts_prefix(stack, R"({"p0":0,"p1":1)"));
  EXPECT_EQ(grammar.minimal_completion(stack).substr(0, 12), R"(,"p2":0,"p3")");
  // Optional properties between required ones: 63 in a row at most, the rest left out.
  std::string mixed = R"({"type":"object","properties":{)";
  for (int i = 0; i < 200; ++i) mixed += "\"o" + std::to_string(i) + "\":{\"type\":\"null\"},";
  mixed += R"("r":{"type":"null"}},"required":["r"]})";
  expect_language(mixed, {R"({"o0":null,"o62":null,"r":null})", R"({"r":null})"},
                  {R"({"o63":null,"r":null})", R"({"o199":null,"r":null})", "{}"});
  // Nesting deeper than 64 subschemas (here 100 levels of $ref and properties).
  std::string nested = R"({"$ref":"#/$defs/d0","$defs":{)";
  for (int i = 0; i < 100; ++i) {
    nested += "\"d" + std::to_string(i) + "\":{\"type\":\"object\",\"properties\":{\"x\":{"
              "\"$ref\":\"#/$defs/d" + std::to_string(i + 1) + "\"}}},";
  }
  nested += R"("d100":{"type":"integer"}}})";
  expect_language(nested, {"{}", R"({"x":{"x":{}}})"}, {R"({"x":1})"});
  // 100,000 enum values: the first 64 generated, compiled at once.
  std::string values;
  for (int i = 0; i < 100000; ++i) values += std::string(i ? "," : "") + std::to_string(i);
  expect_language(R"({"enum":[)" + values + "]}", {"0", "63"}, {"64", "99999"});
  // Bad input: a clear error, bounded.
  auto error_of = [](const std::string& text) {
    auto compiled = compile_json_schema(text);
    EXPECT_FALSE(compiled.ok()) << text.substr(0, 200);
    return compiled.ok() ? std::string() : compiled.error().message;
  };
  EXPECT_NE(error_of(std::string(kMaxSchemaBytes + 1, ' ')).find("kMaxSchemaBytes"),
            std::string::npos);
  // Cycles: a $ref chain with no schema, and allOf cycles that fan out (2^depth merges).
  EXPECT_NE(error_of(R"({"$ref":"#/$defs/a","$defs":{"a":{"$ref":"#/$defs/b"},
      "b":{"$ref":"#/$defs/a"}}})")
                .find("cycle"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"#/$defs/a","$defs":{
      "a":{"allOf":[{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"}]},
      "b":{"allOf":[{"$ref":"#/$defs/a"},{"$ref":"#/$defs/a"}]}}})")
                .find("kMaxSchemaNesting"),
            std::string::npos);
  std::string fan = R"({"$ref":"#/$defs/d0","$defs":{)";
  for (int i = 0; i < 24; ++i) {
    const std::string next = "{\"$ref\":\"#/$defs/d" + std::to_string(i + 1) + "\"}";
    fan += "\"d" + std::to_string(i) + "\":{\"allOf\":[" + next + "," + next + "," + next + "]},";
  }
  fan += R"("d24":{"type":"integer"}}})";
  EXPECT_NE(error_of(fan).find("kMaxFlattenSteps"), std::string::npos);
  // A pattern built to explode the automaton, and one whose negation would.
  EXPECT_NE(error_of(R"({"type":"string","pattern":"^(a|b)*a(a|b){20}$"})").find("kMaxRegex"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","not":{"pattern":"(a|b)*a(a|b){20}"}})")
                .find("kMaxRegex"),
            std::string::npos);
}

TEST(JsonSchemaReal, NulCharactersAreCharactersLikeAnyOther) {
  // SchemaStore's pattern: cut at the NUL it would read "unterminated character class".
  const char* path = R"({"type":"string","pattern":"^(/)?([^/\u0000]+(/)?)+$"})";
  expect_language(path, {R"("/a/b/")", R"("ab")"},
                  {R"("a//b")", R"("a\u0000b")", R"("")"});
  // A pattern that requires the NUL: only \u0000 can write it, which is not generated.
  auto nul_only = compile_json_schema(R"({"type":"string","pattern":"^\u0000$"})");
  ASSERT_FALSE(nul_only.ok());
  EXPECT_NE(nul_only.error().message.find("\\u escape"), std::string::npos);
  // Two patterns that differ after a NUL are two patterns (the cache key keeps them apart).
  expect_language(R"({"type":"object","properties":{
      "p":{"type":"string","pattern":"^a\u0000?b$"},"q":{"type":"string","pattern":"^a\u0000?c$"}},
      "required":["p","q"]})",
                  {R"({"p":"ab","q":"ac"})"}, {R"({"p":"ac","q":"ac"})"});
  // Enum values, constants and property names with a NUL: written with \u0000.
  expect_language(R"({"enum":["a\u0000b","c"]})", {R"("a\u0000b")", R"("c")"},
                  {R"("a")", R"("ab")"});
  expect_language(R"({"const":{"k\u0000":"\u0000"}})", {R"({"k\u0000":"\u0000"})"},
                  {R"({"k":""})"});
  expect_language(R"({"type":"object","properties":{"n\u0000m":{"type":"integer"}},
      "required":["n\u0000m"],"additionalProperties":false})",
                  {R"({"n\u0000m":1})"}, {R"({"nm":1})", R"({"n":1})"});
  // Gemma 4's raw strings write the NUL itself.
  auto gemma = compile_json_schema(R"({"enum":["a\u0000b"]})", JsonSyntax::kGemma4);
  ASSERT_TRUE(gemma.ok());
  EXPECT_TRUE(JsonGrammar(**gemma).matches(std::string("<|\"|>a\0b<|\"|>", 13)));
}

TEST(JsonGrammarCoverage, OneOfObjectShapesKeptApartByARequiredProperty) {
  // The first shape is generated for objects without "uses" (which the second requires), so
  // every object generated fails the second alternative.
  const char* schema = R"({"type":"object","properties":{"run":{"type":"string"},
      "shell":{"type":"string"},"uses":{"type":"string"}},"additionalProperties":false,
      "oneOf":[{"required":["run","shell"]},{"required":["uses"]}]})";
  expect_language(schema, {R"({"run":"a","shell":"b"})"},
                  {R"({"run":"a","shell":"b","uses":"c"})", R"({"uses":"c"})"});
  for (const std::string& doc : random_documents(schema, 100, 6)) {
    EXPECT_EQ(doc.find("\"uses\""), std::string::npos) << doc;
  }
  // Both require the same properties: nothing keeps them apart, refused.
  EXPECT_FALSE(compile_json_schema(R"({"oneOf":[{"type":"object","properties":{"a":{}},
      "required":["a"]},{"type":"object","properties":{"a":{}},"required":["a"]}]})")
                   .ok());
}

TEST(JsonGrammarCoverage, UndeclaredRequiredPropertiesTakeAnyValue) {
  // Nothing judges undeclared names: a required one is declared with the schema true.
  expect_language(R"({"required":["__proto__","a\nb"]})",
                  {R"({"__proto__":1,"a\nb":[]})", "1"}, {R"({"__proto__":1})", "{}"});
  // oneOf of two required lists: the first shape never writes "baz", which the second needs.
  expect_language(R"({"type":"object","oneOf":[{"required":["foo","bar"]},
      {"required":["foo","baz"]}]})",
                  {R"({"foo":1,"bar":2})"}, {R"({"foo":1,"baz":2})", R"({"foo":1,"bar":2,"baz":3})"});
}

TEST(JsonGrammarCoverage, MinPropertiesMakesUpNamesWhereTheSchemaAllowsThem) {
  // Other names are allowed: "a" (after the declared ones), with additionalProperties' schema.
  expect_language(R"({"type":"object","properties":{"x":{"type":"null"}},"minProperties":2,
      "additionalProperties":{"type":"integer"}})",
                  {R"({"x":null,"a":1})"}, {"{}", R"({"x":null})", R"({"x":null,"a":"s"})"});
  // Only names a regex matches: its shortest match, with that regex's schema.
  expect_language(R"({"type":"object","minProperties":1,"additionalProperties":false,
      "patternProperties":{"^[_a-z][a-z0-9]*$":{"type":"boolean"}}})",
                  {R"({"_":true})"}, {"{}", R"({"_":1})"});
  // propertyNames still applies: "a" to "z" fail it, so refused; and a required name that
  // patternProperties judges is not declared as any value behind its back.
  EXPECT_FALSE(compile_json_schema(R"({"type":"object","minProperties":1,
      "propertyNames":{"pattern":"^zz"},"additionalProperties":{}})")
                   .ok());
  expect_language(R"({"type":"object","minProperties":1,"propertyNames":{"pattern":"^[yz]"}})",
                  {R"({"y":1})"}, {R"({"a":1})"});
  EXPECT_FALSE(compile_json_schema(R"({"required":["foo"],
      "patternProperties":{"^f":{"type":"integer"}}})")
                   .ok());
}

TEST(JsonGrammarCoverage, LargeObjectsAndEnumsKeepTheFirst64) {
  std::string properties;
  for (int i = 0; i < 70; ++i) {
    properties += std::string(i ? "," : "") + "\"p" + std::to_string(i) + "\":{\"type\":\"null\"}";
  }
  const std::string schema = R"({"type":"object","properties":{)" + properties +
                             R"(},"required":["p69"]})";
  expect_language(schema, {R"({"p0":null,"p69":null})", R"({"p69":null})"},
                  {R"({"p64":null,"p69":null})", "{}"});
  std::string values;
  for (int i = 0; i < 70; ++i) values += std::string(i ? "," : "") + std::to_string(i);
  expect_language(R"({"enum":[)" + values + "]}", {"0", "63"}, {"64", "69"});
  // patternProperties of two allOf branches: both apply.
  expect_language(R"({"type":"object","properties":{"ab":{}},"allOf":[
      {"patternProperties":{"^a":{"type":"integer"}}},
      {"patternProperties":{"b$":{"minimum":3}}}]})",
                  {R"({"ab":3})"}, {R"({"ab":2})", R"({"ab":"x"})"});
}

}  // namespace
}  // namespace rne::grammar
