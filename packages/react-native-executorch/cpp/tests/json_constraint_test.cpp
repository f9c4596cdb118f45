// JsonSchemaConstraint: the token mask of every visited state equals a brute-force check of
// each vocabulary token against the automaton, and the documents it lets through are complete.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "rne/grammar/json_constraint.h"

namespace rne::grammar {
namespace {

constexpr int64_t kEos = 0;
constexpr int64_t kSpecial = 1;  // a special token: no bytes, never allowed
constexpr int64_t kUnbounded = int64_t{1} << 40;  // a token budget that never binds

// A vocabulary with what makes masks hard: every single byte (as byte-fallback tokens have),
// JSON punctuation runs that close and open values in one token, multi-byte UTF-8 pieces cut in
// half, keywords and their prefixes, digits, and random strings over JSON's characters.
std::vector<std::string> test_vocabulary() {
  std::vector<std::string> v = {"", ""};  // kEos, kSpecial
  for (int b = 1; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t :
       {"{\"", "\":", "\": ", "\", \"", "\",\"", "\"}", "},", "\"},{\"", "[{\"", "]}", " \"",
        "name", "age", "tags", "id", "email", "true", "false", "null", "nul", "tr", "12", "3.5",
        "-1", "e+", "E-", "0.", "\\u00", "\\\"", "\\n", "\xC3\xA9", "\xE2\x82", "\xAC",
        "\xF0\x9F", "\x98\x80", "hello world", " the", "\":\"", "\":[", ",\"", "\":{\"",
        "1,", "2]", "3}", "4},", "\"]", "\"],", "[]", "{}", "[[", "]]", "red", "\"red\"", "green",
        "\"gr", "een\"", "  ", "\n", "\t", ", ", ": ", "\":1", "\":true}", "}}", "}]",
        // Pieces of dates, times, ids and escaped characters, for pattern/format strings.
        "\"2024-", "2024", "-01", "-3", "T1", ":00", ":5", "Z\"", "Z\",", ".5", "+0", "ab-",
        "\\n", "\\\\", "\\/", "\\t\"", "@x.", "io\"",
        // Gemma 4's syntax: its <|"|> token, pieces of it, and runs that close a string.
        "<|\"|>", "<|", "\"|>", "|>", "<", "<<", "a<", ":<|\"|>", "<|\"|>,", "<|\"|>}", "<|\"|>]",
        "city:", "days:", "<|\"|>a<|\"|>"}) {
    v.push_back(t);
  }
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\":, -.0123456789eEtrufalsnm\\ab\xC3\xA9";
  for (int i = 0; i < 3000; ++i) {
    std::string token;
    const int length = 1 + static_cast<int>(rng() % 6);
    for (int j = 0; j < length; ++j) token += alphabet[rng() % alphabet.size()];
    v.push_back(token);
  }
  return v;
}

// The mask a brute force gives: each token's bytes fed to a copy of the state.
std::vector<bool> brute_force(const JsonGrammar& grammar, const JsonStack& stack, bool finished,
                              const std::vector<std::string>& vocabulary) {
  std::vector<bool> allowed(vocabulary.size(), false);
  if (finished) return allowed;
  for (size_t id = 0; id < vocabulary.size(); ++id) {
    if (vocabulary[id].empty()) continue;
    JsonStack copy = stack;
    allowed[id] = grammar.accepts_prefix(copy, vocabulary[id]);
  }
  allowed[kEos] = grammar.complete(stack);
  return allowed;
}

// A schema, with a "gemma4:" prefix one in Gemma 4's syntax, or with a "regex:" prefix a whole
// answer constrained by that regex.
Result<std::shared_ptr<const JsonSchema>> compile_case(const std::string& text) {
  if (text.rfind("regex:", 0) == 0) return compile_regex_format(text.substr(6));
  if (text.rfind("gemma4:", 0) == 0) return compile_json_schema(text.substr(7), JsonSyntax::kGemma4);
  return compile_json_schema(text);
}

// Follows random allowed tokens through documents of `schema_text` and compares every mask with
// the brute force. Returns the number of complete documents produced.
int check_masks(const std::string& schema_text, int documents, uint32_t seed) {
  auto schema = compile_case(schema_text);
  EXPECT_TRUE(schema.ok()) << (schema.ok() ? "" : schema.error().message);
  if (!schema.ok()) return 0;
  const auto vocabulary = test_vocabulary();
  auto trie = TokenTrie::build(vocabulary);
  JsonSchemaConstraint constraint(*schema, trie, {kEos});
  JsonGrammar grammar(**schema);
  std::mt19937 rng(seed);
  int complete = 0;
  for (int doc = 0; doc < documents; ++doc) {
    constraint.reset();
    JsonStack stack = grammar.start();
    std::string text;
    bool finished = false;
    for (int step = 0; step < 200 && !finished; ++step) {
      auto mask = constraint.allowed(kUnbounded);
      if (!mask.ok()) {
        ADD_FAILURE() << schema_text << " after '" << text << "': " << mask.error().message;
        return complete;
      }
      const auto expected = brute_force(grammar, stack, false, vocabulary);
      std::vector<int64_t> allowed_ids;
      for (size_t id = 0; id < vocabulary.size(); ++id) {
        if ((*mask)->allows(static_cast<int64_t>(id)) != expected[id]) {
          ADD_FAILURE() << schema_text << " after '" << text << "': token " << id << " ('"
                        << vocabulary[id] << "') mask " << (*mask)->allows(id) << " brute force "
                        << expected[id];
          return complete;
        }
        if (expected[id]) allowed_ids.push_back(static_cast<int64_t>(id));
      }
      EXPECT_FALSE((*mask)->allows(kSpecial));
      // Prefer ending once possible half of the time, so documents finish.
      int64_t token = allowed_ids[rng() % allowed_ids.size()];
      if (expected[kEos] && rng() % 2 == 0) token = kEos;
      EXPECT_TRUE(constraint.accept(token).ok());
      if (token == kEos) {
        finished = true;
        EXPECT_TRUE(grammar.matches(text)) << text;
        ++complete;
      } else {
        EXPECT_TRUE(grammar.accepts_prefix(stack, vocabulary[token]));
        text += vocabulary[token];
      }
    }
    if (finished) {
      auto after = constraint.allowed(kUnbounded);
      EXPECT_FALSE(after.ok()) << "nothing may follow EOS";
    }
  }
  return complete;
}

TEST(JsonSchemaConstraint, MasksEqualBruteForce) {
  const char* schemas[] = {
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
          "tags":{"type":"array","items":{"type":"string"},"maxItems":3}},"required":["name"]})",
      R"({"type":"array","items":{"type":"number"},"maxItems":4})",
      R"({"enum":["red","green",1,12,null]})",
      R"({"type":"object","properties":{"id":{"type":"integer"},"email":{"type":["string","null"]},
          "ok":{"type":"boolean"},"nested":{"type":"object","properties":{"a":{"type":"null"}},
          "required":["a"]}},"required":["id","email","ok","nested"]})",
      R"({"type":"string"})",
      "true",
      // Recursion, bounded strings (long enough that the cache shares walks far from the
      // bounds), unions, nullables, integer ranges.
      R"({"$defs":{"n":{"type":"object","properties":{"name":{"type":"string","minLength":15,
          "maxLength":30},"kids":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2}},
          "required":["name"]}},"$ref":"#/$defs/n"})",
      R"({"type":"object","properties":{"id":{"type":"integer","minimum":-40,"maximum":1234},
          "v":{"anyOf":[{"type":"string","maxLength":3},{"type":"number"},{"type":"null"}]},
          "k":{"anyOf":[{"const":"red"},{"const":12},{"type":"array","items":{"$ref":"#"}}]}},
          "required":["id","v","k"]})",
      // Patterns and formats: the automaton's state is part of the cached frame.
      R"({"type":"object","properties":{"d":{"type":"string","format":"date-time"},
          "p":{"type":"string","pattern":"^(\\\\n|[ab]|\"|/)+-?$","maxLength":7},
          "e":{"type":"string","format":"email"},"s":{"type":"string","pattern":"b.?-"}},
          "required":["d","p","s"]})",
      // A pattern with a maxLength well past the longest token: far from the bound, walks are
      // shared with the unbounded pattern (StringPattern::far_node); near it, they are not.
      R"({"type":"array","items":{"type":"string","pattern":"[ab]","minLength":2,
          "maxLength":24},"minItems":1})",
      // Whole answers constrained by a regex (responseFormat: { regex }).
      R"(regex:(yes|no)(, because [a-z ]{1,20}\.)?)",
      // maxLength counted by the frame: far from it the walks are shared (cache_key).
      R"({"type":"string","pattern":"(a|b)a(a|b){3}a","maxLength":3000})",
      R"({"type":"array","items":{"type":"string","pattern":"b(a|b){9}a","maxLength":40},
          "maxItems":2})",
      "regex:\\d{4}-\\d{2}(\\n[\"\\\\]+)*",
      // Object shapes told apart by a tag, and tuples.
      R"({"type":"array","items":{"oneOf":[{"type":"object","properties":{"kind":{"const":"text"},
          "value":{"type":"string"}},"required":["kind","value"]},{"type":"object","properties":{
          "kind":{"enum":["num","n"]},"value":{"type":"number"}},"required":["kind"]}]},
          "maxItems":3})",
      R"({"type":"array","prefixItems":[{"type":"integer"},{"enum":["red","green"]}],
          "items":{"type":"boolean"},"minItems":1,"maxItems":4})",
      // Gemma 4's syntax: <|"|> strings (the token and its bytes), bare keys, '<' as content.
      R"(gemma4:{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer",
          "minimum":1,"maximum":14},"tags":{"type":"array","items":{"enum":["a","<b"]}},
          "opts":{"type":"object","properties":{"metric":{"type":"boolean"}}}},
          "required":["city"]})",
      R"(gemma4:{"type":"array","items":{"anyOf":[{"type":"string","pattern":"^(a|<)+$",
          "maxLength":5},{"type":"integer"},{"type":"object","properties":{"s":{"type":"string",
          "minLength":20,"maxLength":40}}}]}})",
      R"(gemma4:{"type":"array","items":{"oneOf":[{"type":"object","properties":{"kind":{"const":"a"},
          "v":{"type":"string"}},"required":["kind","v"]},{"type":"object","properties":{
          "kind":{"enum":["b","<c"]},"w":{"type":"integer"}},"required":["kind"]}]},"maxItems":2})",
  };
  int complete = 0;
  for (const char* schema : schemas) complete += check_masks(schema, 12, 1234);
  EXPECT_GT(complete, 30);  // most random walks reach EOS: the check saw whole documents
}

// The mask the budget rule gives, by brute force: the tokens the grammar accepts after which
// the minimal completion still fits in the remaining - 1 tokens left (one of them for EOS, one
// token per byte); EOS once complete.
std::vector<bool> brute_force_with_budget(const JsonGrammar& grammar, const JsonStack& stack,
                                          int64_t remaining,
                                          const std::vector<std::string>& vocabulary) {
  std::vector<bool> allowed(vocabulary.size(), false);
  for (size_t id = 0; id < vocabulary.size(); ++id) {
    if (vocabulary[id].empty()) continue;
    JsonStack copy = stack;
    allowed[id] = grammar.accepts_prefix(copy, vocabulary[id]) &&
                  static_cast<int64_t>(grammar.minimal_completion_size(copy)) <= remaining - 2;
  }
  allowed[kEos] = grammar.complete(stack);
  return allowed;
}

// Random generations under every budget from the least the schema needs up: each mask equals
// the budget rule's brute force (with no token to spare, the completion's prefixes are allowed), and every generation ends with EOS inside its budget with a
// document the grammar accepts. Token choices prefer the ones that lengthen the document, so
// budgets bind.
TEST(JsonSchemaConstraint, EveryBudgetEndsInACompleteDocument) {
  const char* schemas[] = {
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
          "tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3}},
          "required":["name","tags"]})",
      R"({"type":"object","properties":{"id":{"type":"integer"},"email":{"type":["string","null"]},
          "nested":{"type":"object","properties":{"a":{"type":"null"},"b":{"enum":["red","green"]}},
          "required":["a","b"]}},"required":["id","nested"]})",
      R"({"type":"array","items":{"type":"number"},"minItems":2})",
      "true",
      R"({"$defs":{"n":{"type":"object","properties":{"name":{"type":"string","minLength":3,
          "maxLength":8},"kids":{"type":"array","items":{"$ref":"#/$defs/n"},"minItems":1,
          "maxItems":2},"x":{"$ref":"#/$defs/n"}},"required":["name"]}},"$ref":"#/$defs/n"})",
      R"({"type":"object","properties":{"id":{"type":"integer","minimum":150,"maximum":1234},
          "v":{"anyOf":[{"type":"string","minLength":2},{"type":"integer","maximum":-30},
          {"type":"null"}]},"k":{"oneOf":[{"const":"red"},{"type":"array","items":{"$ref":"#"}}]}},
          "required":["id","v","k"]})",
      R"({"type":"object","properties":{"t":{"type":"string","format":"time"},
          "p":{"type":"string","pattern":"^(\\\\\\\\|\\\\n|a)+b{2}$","minLength":4},
          "u":{"type":"array","items":{"type":"string","pattern":"[0-9]-"},"minItems":1}},
          "required":["t","p","u"]})",
      R"({"type":"object","properties":{"s":{"type":"string","pattern":"^[^x]+\\.$",
          "maxLength":30}},"required":["s"]})",
      R"(regex:Answer: (yes|no)( [a-z]+){2,}\.)",
      R"({"type":"array","items":{"type":"string","pattern":"(a|b)a(a|b){8}","maxLength":20},
          "minItems":1,"maxItems":2})",
      // Object shapes told apart by a tag, and tuples.
      R"({"type":"array","items":{"oneOf":[{"type":"object","properties":{"kind":{"const":"text"},
          "value":{"type":"string"}},"required":["kind","value"]},{"type":"object","properties":{
          "kind":{"enum":["num","n"]},"value":{"type":"number"}},"required":["kind"]}]},
          "minItems":1,"maxItems":3})",
      R"({"type":"array","prefixItems":[{"type":"integer"},{"enum":["red","green"]}],
          "items":{"type":"boolean"},"minItems":3,"maxItems":4})",
      // Gemma 4's syntax: <|"|> strings (the token and its bytes), bare keys, '<' as content.
      R"(gemma4:{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer",
          "minimum":1,"maximum":14},"tags":{"type":"array","items":{"enum":["a","<b"]},"minItems":2},
          "opts":{"type":"object","properties":{"metric":{"type":"boolean"}}}},
          "required":["city","tags"]})",
      R"(gemma4:{"type":"array","items":{"anyOf":[{"type":"string","pattern":"^(a|<)+$",
          "maxLength":5},{"type":"string","minLength":20,"maxLength":40},{"type":"null"}]}})",
  };
  const auto vocabulary = test_vocabulary();
  auto trie = TokenTrie::build(vocabulary);
  std::mt19937 rng(99);
  int forced_steps = 0;
  for (const char* schema_text : schemas) {
    auto schema = compile_case(schema_text);
    ASSERT_TRUE(schema.ok()) << schema.error().message;
    JsonGrammar grammar(**schema);
    JsonSchemaConstraint constraint(*schema, trie, {kEos});
    const int64_t least = constraint.min_tokens();
    EXPECT_EQ(least, static_cast<int64_t>(grammar.minimal_value((*schema)->root).size()) + 1);
    for (int64_t budget = least; budget < least + 30; ++budget) {
      constraint.reset();
      JsonStack stack = grammar.start();
      std::string text;
      bool finished = false;
      for (int64_t n = 0; n < budget && !finished; ++n) {
        const int64_t remaining = budget - n;
        auto mask = constraint.allowed(remaining);
        ASSERT_TRUE(mask.ok()) << schema_text << " budget " << budget << " after '" << text
                               << "': " << mask.error().message;
        const auto expected = brute_force_with_budget(grammar, stack, remaining, vocabulary);
        std::vector<int64_t> allowed_ids;
        for (size_t id = 0; id < vocabulary.size(); ++id) {
          ASSERT_EQ((*mask)->allows(static_cast<int64_t>(id)), expected[id])
              << schema_text << " budget " << budget << " remaining " << remaining << " after '"
              << text << "': token '" << vocabulary[id] << "'";
          if (expected[id]) allowed_ids.push_back(static_cast<int64_t>(id));
        }
        ASSERT_FALSE(allowed_ids.empty());
        const std::string completion = grammar.minimal_completion(stack);
        if (remaining <= static_cast<int64_t>(completion.size()) + 1) {
          ++forced_steps;  // no token to spare: the completion's own prefixes are among them
          for (size_t length = 1; length <= completion.size(); ++length) {
            for (size_t id = 0; id < vocabulary.size(); ++id) {
              if (vocabulary[id] == completion.substr(0, length)) {
                EXPECT_TRUE((*mask)->allows(static_cast<int64_t>(id))) << completion;
              }
            }
          }
        }
        // Take the longest of a few random allowed tokens: documents grow until the budget
        // stops them. EOS only when it is the only choice.
        int64_t token = allowed_ids[rng() % allowed_ids.size()];
        for (int k = 0; k < 3; ++k) {
          const int64_t other = allowed_ids[rng() % allowed_ids.size()];
          if (token == kEos || (other != kEos && vocabulary[other].size() > vocabulary[token].size())) {
            token = other;
          }
        }
        ASSERT_TRUE(constraint.accept(token).ok());
        if (token == kEos) {
          finished = true;
        } else {
          ASSERT_TRUE(grammar.accepts_prefix(stack, vocabulary[token]));
          text += vocabulary[token];
        }
      }
      EXPECT_TRUE(finished) << schema_text << " budget " << budget << ": '" << text << "'";
      EXPECT_TRUE(grammar.matches(text)) << text;
    }
  }
  EXPECT_GT(forced_steps, 200);  // the budget did bind: the forced close was exercised
}

TEST(JsonSchemaConstraint, RejectsTokensOutsideTheMask) {
  auto schema = compile_json_schema(R"({"type":"boolean"})");
  ASSERT_TRUE(schema.ok());
  auto trie = TokenTrie::build({"", "tr", "ue", "x", "false"});
  JsonSchemaConstraint constraint(*schema, trie, {0});
  auto mask = constraint.allowed(kUnbounded);
  ASSERT_TRUE(mask.ok());
  EXPECT_TRUE((*mask)->allows(1));
  EXPECT_TRUE((*mask)->allows(4));
  EXPECT_FALSE((*mask)->allows(0));  // EOS before the value is complete
  EXPECT_FALSE((*mask)->allows(3));
  EXPECT_FALSE(constraint.accept(3).ok());
  EXPECT_FALSE(constraint.accept(0).ok());
  ASSERT_TRUE(constraint.accept(1).ok());
  ASSERT_TRUE(constraint.accept(2).ok());
  EXPECT_TRUE(constraint.complete());
  mask = constraint.allowed(kUnbounded);
  ASSERT_TRUE(mask.ok());
  EXPECT_TRUE((*mask)->allows(0));  // only EOS is left
  EXPECT_FALSE((*mask)->allows(4));
}

TEST(JsonSchemaConstraint, VocabularyThatCannotWriteTheSchemaIsAnError) {
  auto schema = compile_json_schema(R"({"type":"null"})");
  ASSERT_TRUE(schema.ok());
  JsonSchemaConstraint constraint(*schema, TokenTrie::build({"", "a", "b"}), {0});
  auto mask = constraint.allowed(kUnbounded);
  ASSERT_FALSE(mask.ok());
  EXPECT_NE(mask.error().message.find("no token of the vocabulary"), std::string::npos);
}

TEST(TokenTrie, PreorderSubtreesAndDuplicates) {
  auto trie = TokenTrie::build({"ab", "", "a", "abc", "b", "ab"});
  const auto& nodes = trie->nodes();
  ASSERT_EQ(nodes.size(), 5u);  // root, a, ab, abc, b
  EXPECT_EQ(nodes[0].end, 5u);
  EXPECT_EQ(nodes[1].byte, 'a');
  EXPECT_EQ(nodes[1].end, 4u);
  EXPECT_EQ(std::vector<int32_t>(trie->token_ids_begin(2), trie->token_ids_end(2)),
            (std::vector<int32_t>{0, 5}));
  EXPECT_EQ(std::vector<int32_t>(trie->token_ids_begin(4), trie->token_ids_end(4)),
            (std::vector<int32_t>{4}));
  EXPECT_EQ(trie->token_ids_begin(0), trie->token_ids_end(0));  // the empty token is left out
}

}  // namespace
}  // namespace rne::grammar
