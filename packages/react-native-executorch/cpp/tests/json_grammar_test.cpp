// The JSON Schema compiler and the JSON automaton: which documents each keyword accepts and
// rejects, and the compiler's errors.
#include <gtest/gtest.h>

#include <optional>
#include <random>
#include <set>
#include <string>

#include "rne/runner/json_grammar.h"
#include "rne/runner/json_schema.h"

namespace rne::runner {
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

TEST(JsonGrammar, MinimalCompletionCompletesEveryStateAndIsShortest) {
  std::mt19937 rng(11);
  const std::string structural = "\"{}[],: \\u-+.eE019atfn\xC3\xA9";
  int states = 0;
  int searched = 0;
  for (const char* schema_text : kCompletionSchemas) {
    auto schema = compile(schema_text);
    ASSERT_NE(schema, nullptr);
    JsonGrammar grammar(*schema);
    EXPECT_TRUE(grammar.matches(grammar.minimal_value(schema->root))) << schema_text;
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
        // Half of the steps prefer JSON's structural bytes, so walks leave strings and nest.
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
  EXPECT_GT(states, 5000);
  EXPECT_GT(searched, 500);
}

TEST(JsonSchemaCompiler, ErrorsNameTheKeywordAndPlace) {
  auto error_of = [](const std::string& text) {
    auto schema = compile_json_schema(text);
    EXPECT_FALSE(schema.ok()) << text;
    return schema.ok() ? std::string() : schema.error().message;
  };
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"object","properties":{"a":{"type":"string","pattern":"x"}}})")
                .find("'#/properties/a/pattern'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"anyOf":[]})").find("keyword 'anyOf' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"text"})").find("unknown type 'text'"), std::string::npos);
  EXPECT_NE(error_of(R"({"properties":{},"required":["x"]})").find("'x' is not declared"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"enum":[]})").find("non-empty array"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","enum":[1]})").find("no enum/const value"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"minItems":3,"maxItems":2})").find("minItems is larger"),
            std::string::npos);
  EXPECT_NE(error_of("false").find("allows no value"), std::string::npos);
  EXPECT_NE(error_of("3").find("must be an object or a boolean"), std::string::npos);
  EXPECT_NE(error_of(R"({"items":[{}]})").find("tuple-style"), std::string::npos);
  // Annotations are fine.
  EXPECT_TRUE(compile_json_schema(R"({"title":"t","description":"d","type":"string",
      "default":"x","examples":["y"],"$schema":"https://json-schema.org/draft/2020-12/schema"})")
                  .ok());
}

}  // namespace
}  // namespace rne::runner
