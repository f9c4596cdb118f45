// GBNF grammars (gbnf.h) and GbnfConstraint: parse errors with their positions, which strings a
// grammar accepts, token masks equal to a brute-force check of every token, and outputs that
// are whole sentences whatever the token budget.
#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <functional>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "rne/grammar/gbnf.h"
#include "small_stack.h"
#include "rne/grammar/gbnf_constraint.h"
#include "rne/tokenizer/tokenizer.h"

namespace rne::grammar {
namespace {

constexpr int64_t kEos = 0;
constexpr int64_t kUnbounded = int64_t{1} << 40;

const char* kArithmetic = R"G(
# integer arithmetic
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= number | "(" expr ")"
number ::= [0-9]+
)G";

const char* kJsonish = R"G(
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::=
  "{" ws (
    string ws ":" ws value ws
    ("," ws string ws ":" ws value ws)*
  )? "}"
array  ::= "[" ws ( value ws ("," ws value ws)* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws     ::= [ \t\n]{0,2}
)G";

const char* kList = R"G(root ::= item ("," item){1,3}
item ::= [a-c]{2} | "x"{3,}   # two letters, or three or more x
)G";

const char* kUnicode = "root ::= [\u03b1-\u03c9]+ \" \" [^a-z\\u00e9]{1,2} \"\u20ac\"?\n";

std::string error_of(const std::string& grammar) {
  auto compiled = compile_gbnf(grammar);
  return compiled.ok() ? "" : compiled.error().message;
}

bool matches(const std::string& grammar, const std::string& text) {
  auto compiled = compile_gbnf(grammar);
  EXPECT_TRUE(compiled.ok()) << compiled.error().message;
  GbnfMatcher matcher(*compiled);
  auto result = matcher.matches(text);
  EXPECT_TRUE(result.ok()) << result.error().message;
  return result.ok() && *result;
}

TEST(GbnfParse, ErrorsNameTheLineAndColumn) {
  EXPECT_EQ(error_of("root ::= \"abc"), "grammar line 1, column 10: unterminated string literal");
  EXPECT_EQ(error_of("root ::= foo\n"), "grammar line 1, column 10: rule 'foo' is used but never defined");
  EXPECT_EQ(error_of("root ::= [z-a]"), "grammar line 1, column 13: character range out of order");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""),
            "grammar line 2, column 1: rule 'root' is defined twice (first on line 1)");
  EXPECT_EQ(error_of("root ::= \"a\" )"), "grammar line 1, column 14: unexpected ')'");
  EXPECT_EQ(error_of("root ::= (\"a\" | \"b\""),
            "grammar line 1, column 20: expected ')' to close the group opened at line 1");
  EXPECT_EQ(error_of("root \"a\""), "grammar line 1, column 6: expected '::=' after rule name 'root'");
  EXPECT_EQ(error_of("root ::= * \"a\""), "grammar line 1, column 10: '*' has nothing to repeat");
  EXPECT_EQ(error_of("root ::= \"\\q\""), "grammar line 1, column 11: unknown escape '\\q'");
  EXPECT_EQ(error_of("root ::= \"a\"{3,2}"), "grammar line 1, column 13: repetition {m,n} with m > n");
  EXPECT_EQ(error_of("root ::= [^\\x00-\\U0010FFFF]"),
            "grammar line 1, column 10: character class matches no character");
  EXPECT_EQ(error_of("start ::= \"a\""),
            "grammar has no 'root' rule; generation starts from `root ::= ...`");
}

TEST(GbnfParse, RefusesLeftRecursionAndRulesWithoutStrings) {
  EXPECT_EQ(error_of("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\""),
            "grammar line 2, column 1: rule 'expr' is left-recursive: it can reach itself before "
            "reading a character; rewrite it with right recursion or a repetition "
            "(x ::= y (\"+\" y)*)");
  // Through a rule that can be empty, and through a repetition of something empty.
  EXPECT_NE(error_of("root ::= opt root \"x\" | \"y\"\nopt ::= \"a\"?").find("rule 'root' is left-recursive"),
            std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"?)*").find("a group or repetition in rule 'root' is left-recursive"),
            std::string::npos);
  EXPECT_EQ(error_of("root ::= a | \"b\"\na ::= \"x\" a"),
            "grammar line 2, column 1: rule 'a' generates no string: every alternative needs the "
            "rule itself again (add a way out)");
  // Unreachable rules may be anything but undefined.
  EXPECT_EQ(error_of("root ::= \"b\"\na ::= \"x\" a"), "");
}

TEST(GbnfParse, RefusesGrammarsPastTheLimits) {
  EXPECT_NE(error_of("root ::= \"a\"{1001}").find("repetition counts above 1000"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"" + std::string(kMaxGbnfBytes, 'a') + "\"").find("kMaxGbnfBytes"),
            std::string::npos);
  // Nested repetitions stay linear (each repeats one rule reference); long flat ones do not.
  EXPECT_EQ(error_of("root ::= (((\"ab\"{1000}){1000}){1000})"), "");
  std::string flat = "root ::=";
  for (int i = 0; i < 101; ++i) flat += " \"a\"{1000}";
  EXPECT_NE(error_of(flat).find("kMaxGbnfElements"), std::string::npos);
  // 2^n parses after n 'a's (each 'a' may close with 'b' or 'c').
  auto ambiguous = compile_gbnf("root ::= \"a\" root \"b\" | \"a\" root \"c\" | \"\"");
  ASSERT_TRUE(ambiguous.ok());
  GbnfMatcher matcher(*ambiguous);
  EXPECT_TRUE(*matcher.matches("aaabcb"));
  auto result = matcher.matches(std::string(12, 'a'));
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("kMaxGbnfStacks"), std::string::npos);
}

TEST(GbnfParse, DeepNestingIsAClearErrorNotAStackOverflow) {
  rne::test::on_small_stack([] {
    const auto nested = [](size_t depth) {
      return "root ::= " + std::string(depth, '(') + "\"x\"" + std::string(depth, ')') + "\n";
    };
    EXPECT_EQ(error_of(nested(kMaxGbnfNesting)), "");
    EXPECT_TRUE(matches(nested(kMaxGbnfNesting), "x"));
    const std::string error = error_of(nested(12000));
    EXPECT_NE(error.find("groups nested more than 100 deep (kMaxGbnfNesting)"), std::string::npos)
        << error;
    EXPECT_NE(error.find("line 1, column 110"), std::string::npos) << error;
  });
}

TEST(GbnfMatch, LongChainsOfRulesDoNotRecurse) {
  // Each rule reads the next before any character: thousands of expansions before the first
  // byte, which the matcher walks with a work list, not the thread's stack.
  std::string chain = "root ::= r0\n";
  const int length = 4000;
  for (int i = 0; i < length; ++i) {
    chain += "r" + std::to_string(i) + "::=e r" + std::to_string(i + 1) + "\n";
  }
  chain += "r" + std::to_string(length) + " ::= \"x\"\ne ::= \"\"\n";
  ASSERT_LE(chain.size(), kMaxGbnfBytes);
  rne::test::on_small_stack([&] {
    EXPECT_TRUE(matches(chain, "x"));
    EXPECT_FALSE(matches(chain, "y"));
  });
}

TEST(GbnfMatch, Arithmetic) {
  for (const char* ok : {"1", "12+3", "(1+2)*3", "((4))", "1*2/3-4+56", "(1)-(2)"}) {
    EXPECT_TRUE(matches(kArithmetic, ok)) << ok;
  }
  for (const char* bad : {"", "+1", "1+", "(1", "1)", "1 + 2", "()", "1**2", "a"}) {
    EXPECT_FALSE(matches(kArithmetic, bad)) << bad;
  }
}

TEST(GbnfMatch, JsonLike) {
  for (const char* ok : {"{}", "[]", "true", "-1.5", "\"a\\n\\\"b\"", "{\"a\": [1, 2.0, null]}",
                         "[{\"k\":\"v\"}, \"\xC3\xA9\"]", "{ \"a\" :\t{}\n}"}) {
    EXPECT_TRUE(matches(kJsonish, ok)) << ok;
  }
  for (const char* bad : {"{", "[1,]", "{\"a\"}", "\"\\x\"", "01.", "tru", "{}}", "\"a\nb\"",
                          "[1,   2]"}) {
    EXPECT_FALSE(matches(kJsonish, bad)) << bad;
  }
}

TEST(GbnfMatch, RepetitionBounds) {
  for (const char* ok : {"ab,cc", "ab,cc,aa,bb", "xxx,ab", "xxxxxxx,xxx,aa"}) {
    EXPECT_TRUE(matches(kList, ok)) << ok;
  }
  for (const char* bad : {"ab", "ab,cc,aa,bb,ca", "a,bb", "abc,aa", "xx,ab", "ab,,cc"}) {
    EXPECT_FALSE(matches(kList, bad)) << bad;
  }
  EXPECT_TRUE(matches("root ::= \"ab\"{2}", "abab"));
  EXPECT_FALSE(matches("root ::= \"ab\"{2}", "ab"));
  EXPECT_TRUE(matches("root ::= \"a\"{,2} \"b\"", "aab"));
  EXPECT_FALSE(matches("root ::= \"a\"{,2} \"b\"", "aaab"));
}

TEST(GbnfMatch, Utf8Classes) {
  EXPECT_TRUE(matches(kUnicode, "\u03b1\u03b2 X"));
  EXPECT_TRUE(matches(kUnicode, "\u03c9 \u00e8\U0001F600\u20ac"));
  EXPECT_FALSE(matches(kUnicode, "\u03b1 \u00e9"));    // é is left out of the class
  EXPECT_FALSE(matches(kUnicode, "a X"));              // not Greek
  EXPECT_FALSE(matches(kUnicode, "\u03b1 XYZ"));       // three characters
  EXPECT_FALSE(matches(kUnicode, "\u03b1 \xC3"));      // a cut character
  EXPECT_FALSE(matches(kUnicode, "\u03b1 \xC0\x80"));  // an overlong form
  EXPECT_FALSE(matches("root ::= .", "\xED\xA0\x80"));  // a surrogate
  EXPECT_TRUE(matches("root ::= .", "\xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(matches("root ::= .", "\xF4\x90\x80\x80"));  // past U+10FFFF
}

// Every single byte (as byte-fallback vocabularies have), multi-byte pieces cut in half, and
// random strings over the grammars' characters.
std::vector<std::string> test_vocabulary() {
  std::vector<std::string> v = {""};  // kEos
  for (int b = 1; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"12", "+(", ")*", "))", "((1", "true", "tr", "null", "\": ", "{\"",
                        "\"}", "\\n", "ab,", ",cc", "xxx", "xx,", "\xCE\xB1", "\xCE", "\xB1 ",
                        "\xE2\x82", "\xAC", " \xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xF0\x9F"}) {
    v.push_back(t);
  }
  std::mt19937 rng(11);
  const std::string alphabet = "0123456789+-*/(){}[]\":, .abcx\\trunel\xCE\xB1\xCF\x89";
  for (int i = 0; i < 2000; ++i) {
    std::string token;
    const int length = 1 + static_cast<int>(rng() % 5);
    for (int j = 0; j < length; ++j) token += alphabet[rng() % alphabet.size()];
    v.push_back(token);
  }
  return v;
}

// The mask a brute force gives: each token's bytes fed to a copy of the state.
std::vector<bool> brute_force(GbnfMatcher& matcher, const GbnfState& state,
                              const std::vector<std::string>& vocabulary) {
  std::vector<bool> allowed(vocabulary.size(), false);
  for (size_t id = 0; id < vocabulary.size(); ++id) {
    if (vocabulary[id].empty()) continue;
    const size_t mark = matcher.mark();
    GbnfState s = state, next;
    bool ok = true;
    for (char c : vocabulary[id]) {
      if (matcher.step(s, static_cast<uint8_t>(c), next) != GbnfMatcher::Step::kOk) {
        ok = false;
        break;
      }
      std::swap(s, next);
    }
    allowed[id] = ok;
    matcher.release(mark);
  }
  allowed[kEos] = GbnfMatcher::complete(state);
  return allowed;
}

// Random allowed tokens through sentences of `grammar`, comparing every mask with the brute
// force (no budget). Returns the number of sentences finished.
int check_masks(const std::string& grammar, int sentences, uint32_t seed,
                size_t max_states = GbnfConstraint::kMaxStates) {
  auto compiled = compile_gbnf(grammar);
  EXPECT_TRUE(compiled.ok()) << compiled.error().message;
  if (!compiled.ok()) return 0;
  const auto vocabulary = test_vocabulary();
  auto trie = TokenTrie::build(vocabulary);
  auto constraint = GbnfConstraint::create(*compiled, trie, {kEos}, max_states);
  EXPECT_TRUE(constraint.ok());
  GbnfMatcher reference(*compiled);
  std::mt19937 rng(seed);
  int finished = 0;
  for (int n = 0; n < sentences; ++n) {
    (*constraint)->reset();
    GbnfState state = *reference.start();
    std::string text;
    for (int step = 0; step < 60; ++step) {
      auto mask = (*constraint)->allowed(kUnbounded);
      if (!mask.ok()) {
        ADD_FAILURE() << mask.error().message << " after '" << text << "'";
        return finished;
      }
      const auto expected = brute_force(reference, state, vocabulary);
      std::vector<int64_t> ids;
      for (size_t id = 0; id < vocabulary.size(); ++id) {
        if ((*mask)->allows(static_cast<int64_t>(id)) != expected[id]) {
          ADD_FAILURE() << "token '" << vocabulary[id] << "' after '" << text << "': mask "
                        << (*mask)->allows(static_cast<int64_t>(id)) << ", brute force "
                        << expected[id];
          return finished;
        }
        if (expected[id]) ids.push_back(static_cast<int64_t>(id));
      }
      // Late in a sentence, prefer EOS so that some sentences end.
      int64_t token = ids[rng() % ids.size()];
      if (expected[kEos] && step > 20) token = kEos;
      EXPECT_TRUE((*constraint)->accept(token).ok());
      if (token == kEos) {
        ++finished;
        EXPECT_TRUE(*GbnfMatcher(*compiled).matches(text)) << text;
        break;
      }
      text += vocabulary[token];
      GbnfState next;
      for (char c : vocabulary[token]) {
        EXPECT_EQ(reference.step(state, static_cast<uint8_t>(c), next), GbnfMatcher::Step::kOk);
        std::swap(state, next);
      }
      reference.compact(state);
    }
  }
  if (max_states < 100) EXPECT_GT((*constraint)->automaton_drops(), 0u);
  return finished;
}

TEST(GbnfConstraint, MasksEqualBruteForce) {
  EXPECT_GT(check_masks(kArithmetic, 20, 1), 0);
  EXPECT_GT(check_masks(kJsonish, 20, 2), 0);
  EXPECT_GT(check_masks(kList, 20, 3), 0);
  EXPECT_GT(check_masks(kUnicode, 20, 4), 0);
}

TEST(GbnfConstraint, MasksStayExactWhenTheAutomatonIsDropped) {
  // At most 8 interned states: nearly every step drops the automaton and rebuilds it.
  EXPECT_GT(check_masks(kJsonish, 10, 9, /*max_states=*/8), 0);
  EXPECT_GT(check_masks(kArithmetic, 10, 10, /*max_states=*/8), 0);
}

// Whatever the budget (from the least that fits up), random allowed tokens end in EOS within
// it, and the text is a sentence.
void check_budgets(const std::string& grammar, uint32_t seed) {
  auto compiled = compile_gbnf(grammar);
  ASSERT_TRUE(compiled.ok()) << compiled.error().message;
  const auto vocabulary = test_vocabulary();
  auto trie = TokenTrie::build(vocabulary);
  auto constraint = std::move(GbnfConstraint::create(*compiled, trie, {kEos})).value();
  GbnfMatcher matcher(*compiled);
  std::mt19937 rng(seed);
  const int64_t least = constraint->min_tokens();
  for (int64_t budget = least; budget < least + 25; ++budget) {
    for (int run = 0; run < 8; ++run) {
      constraint->reset();
      std::string text;
      bool ended = false;
      for (int64_t used = 0; used < budget && !ended; ++used) {
        const int64_t remaining = budget - used;
        ASSERT_LE(constraint->min_tokens(), remaining) << "after '" << text << "'";
        auto mask = constraint->allowed(remaining);
        ASSERT_TRUE(mask.ok()) << mask.error().message << " after '" << text << "'";
        std::vector<int64_t> ids;
        for (int64_t id = 0; id < static_cast<int64_t>(vocabulary.size()); ++id) {
          if ((*mask)->allows(id)) ids.push_back(id);
        }
        // Never EOS by choice: the budget alone must end the sentence.
        int64_t token = ids[rng() % ids.size()];
        if (token == kEos && ids.size() > 1) token = ids[(rng() % (ids.size() - 1)) + 1];
        ASSERT_TRUE(constraint->accept(token).ok());
        if (token == kEos) {
          ended = true;
        } else {
          text += vocabulary[token];
        }
      }
      EXPECT_TRUE(ended) << "budget " << budget << ": '" << text << "'";
      EXPECT_TRUE(*matcher.matches(text)) << "budget " << budget << ": '" << text << "'";
    }
  }
}

TEST(GbnfConstraint, EveryBudgetEndsInASentence) {
  check_budgets(kArithmetic, 5);
  check_budgets(kJsonish, 6);
  check_budgets(kList, 7);
  check_budgets(kUnicode, 8);
}

TEST(GbnfConstraint, RefusesTokensItDidNotAllow) {
  auto compiled = compile_gbnf(kArithmetic);
  ASSERT_TRUE(compiled.ok());
  const auto vocabulary = test_vocabulary();
  auto constraint =
      std::move(GbnfConstraint::create(*compiled, TokenTrie::build(vocabulary), {kEos})).value();
  EXPECT_FALSE(constraint->accept(kEos).ok());  // nothing written yet
  const auto plus = std::find(vocabulary.begin(), vocabulary.end(), "+") - vocabulary.begin();
  EXPECT_FALSE(constraint->accept(plus).ok());
  const auto one = std::find(vocabulary.begin(), vocabulary.end(), "1") - vocabulary.begin();
  EXPECT_TRUE(constraint->accept(one).ok());
  EXPECT_TRUE(constraint->accept(kEos).ok());
  EXPECT_FALSE(constraint->allowed(10).ok());  // finished
}

// Mask time per token on a real vocabulary (SmolLM2's 49k), replaying sentences token by
// token. Runs when RNE_GBNF_BENCH_TOKENIZER names a tokenizer.json.
TEST(GbnfBench, MaskTimePerToken) {
  const char* path = std::getenv("RNE_GBNF_BENCH_TOKENIZER");
  if (path == nullptr) GTEST_SKIP() << "set RNE_GBNF_BENCH_TOKENIZER to a tokenizer.json";
  auto loaded = tokenizer::Tokenizer::from_file(path);
  ASSERT_TRUE(loaded.ok());
  const tokenizer::Tokenizer& tokenizer = loaded.value();
  const auto vocab = static_cast<int64_t>(tokenizer.vocab_size());
  auto trie = TokenTrie::build(token_byte_strings(tokenizer, vocab));
  struct Case {
    const char* name;
    const char* grammar;
    std::string text;
  };
  const std::vector<Case> cases = {
      {"arithmetic", kArithmetic, "(12+345)*6-(7/8+90)*(1+2+3+4+5)-((6*7)+8)/9"},
      {"json-ish", kJsonish,
       "{\"name\": \"Ada Lovelace\", \"born\": 1815, \"tags\": [\"math\", \"poetry\"], "
       "\"alive\": false, \"notes\": {\"a\": null}}"},
      {"list", kList, "ab,cc,xxxxx,ba"},
  };
  for (const Case& c : cases) {
    auto compiled = compile_gbnf(c.grammar);
    ASSERT_TRUE(compiled.ok());
    auto constraint = std::move(GbnfConstraint::create(*compiled, trie, {})).value();
    std::vector<double> cold, warm;
    const auto ids = tokenizer.encode(c.text, false);
    for (int pass = 0; pass < 2; ++pass) {
      constraint->reset();
      for (size_t i = 0; i < ids.size(); ++i) {
        const auto start = std::chrono::steady_clock::now();
        auto mask = constraint->allowed(kUnbounded);
        const double us = std::chrono::duration<double, std::micro>(
                              std::chrono::steady_clock::now() - start).count();
        ASSERT_TRUE(mask.ok());
        ASSERT_TRUE((*mask)->allows(ids[i])) << c.name << " token " << i;
        ASSERT_TRUE(constraint->accept(ids[i]).ok());
        if (i > 0) (pass == 0 ? cold : warm).push_back(us);
      }
    }
    for (auto* times : {&cold, &warm}) {
      std::sort(times->begin(), times->end());
      const double median = (*times)[times->size() / 2];
      const double p95 = (*times)[std::min(times->size() - 1, times->size() * 95 / 100)];
      std::printf("%-10s %s: %zu tokens, mask median %.1f us, p95 %.1f us, max %.1f us\n", c.name,
                  times == &cold ? "cold" : "warm", times->size(), median, p95, times->back());
    }
  }
}

}  // namespace
}  // namespace rne::grammar
