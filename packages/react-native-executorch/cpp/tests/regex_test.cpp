// The regex compiler (regex.h): every DFA agrees with std::regex (ECMAScript) on strings over
// the patterns' alphabets, length bounds are exact, the shortest paths are the shortest, and
// what is unsupported is refused with its offset.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "rne/grammar/regex.h"
#include "small_stack.h"

namespace rne::grammar {
namespace {

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Random strings over `alphabet` (ASCII), plus random walks of the DFA (so accepted strings
// are tried too, not only rejected ones): DFA verdict == std::regex verdict.
void check_against_std_regex(const std::string& pattern, bool search, uint32_t min_length,
                             uint32_t max_length, const std::string& alphabet) {
  auto dfa = compile_regex({pattern}, search, min_length, max_length);
  ASSERT_TRUE(dfa.ok()) << pattern << ": " << dfa.error().message;
  const std::regex reference(pattern, std::regex::ECMAScript);
  auto expected = [&](const std::string& s) {
    const bool hit = search ? std::regex_search(s, reference) : std::regex_match(s, reference);
    return hit && code_points(s) >= min_length && code_points(s) <= max_length;
  };
  std::mt19937 rng(static_cast<uint32_t>(pattern.size() * 31 + min_length));
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    if (i % 2 == 0) {
      const size_t length = rng() % 12;
      for (size_t k = 0; k < length; ++k) s += alphabet[rng() % alphabet.size()];
    } else {  // a random walk through the DFA over the alphabet, stopping at random
      uint16_t state = dfa->start;
      for (int k = 0; k < 40; ++k) {
        if (dfa->accepting[state] && rng() % 4 == 0) break;
        std::vector<char> options;
        for (char c : alphabet) {
          if (dfa->step(state, static_cast<uint8_t>(c)) != RegexDfa::kDead) options.push_back(c);
        }
        if (options.empty()) break;
        const char c = options[rng() % options.size()];
        s += c;
        state = dfa->step(state, static_cast<uint8_t>(c));
      }
    }
    const bool got = dfa->matches(s);
    accepted += got;
    ASSERT_EQ(got, expected(s)) << "/" << pattern << "/ on '" << s << "'";
  }
  EXPECT_GT(accepted, 50) << pattern;  // the comparison saw matches, not only misses
}

TEST(Regex, AgreesWithStdRegex) {
  const std::string ab = "ab-.0129xyz_ \t";
  for (const char* p : {"a", "^a", "a$", "^a$", "^(a|b)*$", "ab|^x", "^a+b?$|z",
                        "^[a-c]{2,4}$", "^[^a]*$", "\\d+", "^\\d{3}-\\d{2}$", "^\\w+\\s\\w+$",
                        "^(?:a|bb)+$", "^[\\d.-]+$", "^a{2}$", "^a{2,}$",
                        "^(a?){3}$", "^\\.\\-$", "[.]", "^[\\w-]+$", "^[^\\W_]+$", "^$",
                        "^x*?y+?$", "^.$", "(^a|b$)", "^(ab|a)(b|)$", "^[\\D]{2}$",
                        "^[^\\s]+$", "\\S\\s"}) {
    check_against_std_regex(p, /*search=*/true, 0, UINT32_MAX, ab);
  }
  check_against_std_regex("^a|b", /*search=*/false, 0, UINT32_MAX, ab);
  check_against_std_regex("[ab]+9?", /*search=*/false, 0, UINT32_MAX, ab);
  // Length bounds fold into the automaton.
  check_against_std_regex("a", true, 3, 6, ab);
  check_against_std_regex("^[ab]*$", true, 2, 4, ab);
  check_against_std_regex("^[ab]*$", true, 5, UINT32_MAX, ab);
}

TEST(Regex, AllPatternsMustMatch) {
  auto dfa = compile_regex({"^a", "b$", "x"}, true);
  ASSERT_TRUE(dfa.ok());
  EXPECT_TRUE(dfa->matches("axb"));
  EXPECT_TRUE(dfa->matches("axyzb"));
  EXPECT_FALSE(dfa->matches("ab"));
  EXPECT_FALSE(dfa->matches("xab"));
}

TEST(Regex, UnicodeClassesAreCodePoints) {
  auto dfa = compile_regex({"^.{2}$"}, true);
  ASSERT_TRUE(dfa.ok());
  EXPECT_TRUE(dfa->matches("\xC3\xA9\xF0\x9F\x98\x80"));  // é and an emoji: 2 code points
  EXPECT_FALSE(dfa->matches("\xC3\xA9"));
  EXPECT_FALSE(dfa->matches("a\n"));  // . is not a line terminator
  auto range = compile_regex({"^[\\u00e0-\\u00ff\\u{1F600}]+$"}, true);
  ASSERT_TRUE(range.ok());
  EXPECT_TRUE(range->matches("\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_FALSE(range->matches("e"));
  // Only valid UTF-8: no surrogate halves or overlong forms even for "anything".
  auto any = compile_regex({"^[^a]*$"}, true);
  ASSERT_TRUE(any.ok());
  EXPECT_FALSE(any->matches("\xED\xA0\x80"));  // an encoded surrogate
  EXPECT_FALSE(any->matches("\xC0\xAF"));      // overlong '/'
  EXPECT_FALSE(any->matches("\xC3"));          // cut short
  // Shorthands mean only what they mean in both ECMA-262 and Python: \D is ASCII here, and a
  // negated class leaves out every character a shorthand in it might mean.
  auto not_digit = compile_regex({"^\\D$"}, true);
  ASSERT_TRUE(not_digit.ok());
  EXPECT_TRUE(not_digit->matches("x"));
  EXPECT_FALSE(not_digit->matches("\xC3\xA9"));
  auto not_word = compile_regex({"^[^\\w]$"}, true);
  ASSERT_TRUE(not_word.ok());
  EXPECT_TRUE(not_word->matches("-"));
  EXPECT_FALSE(not_word->matches("\xC3\xA9"));
  EXPECT_FALSE(not_word->matches("a"));
}

TEST(Regex, UnsupportedSyntaxIsRefusedWithItsOffset) {
  const std::pair<const char*, const char*> cases[] = {
      {"a(?=b)", "offset 1: lookaround"}, {"(a)\\1", "offset 3: backreferences"},
      {"\\bword", "offset 0: word boundaries"}, {"a(?<!b)", "lookaround"},
      {"\\p{L}", "Unicode property"}, {"[a", "unterminated character class"},
      {"a)", "unbalanced"}, {"*a", "nothing to repeat"}, {"a{3,2}", "m > n"},
      {"[]", "escape the ']'"}, {"a{,3}", "{0,n}"}, {"\\q", "unknown escape"},
      {"a{5000}", "repeat counts above"}, {"[z-a]", "out of order"}};
  for (const auto& [pattern, expected] : cases) {
    auto dfa = compile_regex({pattern}, true);
    ASSERT_FALSE(dfa.ok()) << pattern;
    EXPECT_NE(dfa.error().message.find(expected), std::string::npos)
        << pattern << ": " << dfa.error().message;
    EXPECT_NE(dfa.error().message.find(pattern), std::string::npos) << dfa.error().message;
  }
  // Named groups are plain groups.
  auto named = compile_regex({"^x(?<n>ab)*y$"}, true);
  ASSERT_TRUE(named.ok());
  EXPECT_TRUE(named->matches("xababy"));
  EXPECT_FALSE(named->matches("xaby!"));
  // A literal '{' that is no quantifier reads as itself (both engines agree).
  auto brace = compile_regex({"^a{b}$"}, true);
  ASSERT_TRUE(brace.ok());
  EXPECT_TRUE(brace->matches("a{b}"));
}

TEST(Regex, LimitsAreNamed) {
  auto states = compile_regex({"^(a|b)*a(a|b){14}$"}, true);  // 2^15 DFA states
  ASSERT_FALSE(states.ok());
  EXPECT_NE(states.error().message.find("kMaxRegexStates"), std::string::npos);
  auto nfa = compile_regex({"^(((a{1000}){1000}))$"}, true);
  ASSERT_FALSE(nfa.ok());
  EXPECT_NE(nfa.error().message.find("kMaxRegexNfaStates"), std::string::npos);
  auto costly = compile_regex({"(.{100}){10}"}, true);  // bounded time, not a hang
  ASSERT_FALSE(costly.ok());
  EXPECT_NE(costly.error().message.find("kMaxSubsetWork"), std::string::npos);
  auto empty = compile_regex({"^a$"}, true, 2, 5);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("matches no string"), std::string::npos);
}

TEST(Regex, StackedQuantifiersAreRefusedAsPythonDoes) {
  for (const char* pattern : {"a**", "a{2}{3}", "a+?*", "(a)?+"}) {
    auto dfa = compile_regex({pattern}, true);
    ASSERT_FALSE(dfa.ok()) << pattern;
    EXPECT_NE(dfa.error().message.find("multiple repeat"), std::string::npos)
        << dfa.error().message;
  }
  for (const char* pattern : {"^a*?$", "^(a*)*$", "^(a{2}){3}$"}) {
    EXPECT_TRUE(compile_regex({pattern}, true).ok()) << pattern;
  }
}

TEST(Regex, DeepGroupsAreAClearErrorNotAStackOverflow) {
  rne::test::on_small_stack([] {
    const auto nested = [](size_t depth) {
      return "^" + std::string(depth, '(') + "x" + std::string(depth, ')') + "$";
    };
    auto deepest = compile_regex({nested(kMaxRegexNesting)}, true);
    ASSERT_TRUE(deepest.ok()) << deepest.error().message;
    EXPECT_TRUE(deepest->matches("x"));
    auto deeper = compile_regex({nested(kMaxRegexNesting + 1)}, true);
    ASSERT_FALSE(deeper.ok());
    EXPECT_NE(deeper.error().message.find("kMaxRegexNesting"), std::string::npos);
    // The fuzzer's crash: far more groups than fit a thread's stack.
    auto far = compile_regex({"^" + std::string(2000, '(') + "x"}, true);
    ASSERT_FALSE(far.ok());
  });
}

// shortest_paths against breadth-first enumeration of all strings over a small alphabet.
TEST(Regex, ShortestPathsAreShortest) {
  std::array<uint8_t, 256> cost{};
  for (char c : std::string("abc-")) cost[static_cast<uint8_t>(c)] = 1;
  cost['c'] = 2;  // an escaped character: two output bytes
  for (const char* p : {"^a{3}$", "^(abc|c)$", "^(a|b)+c$", "^[ab]*-[ab]{2}$", "cc|a{4}"}) {
    auto dfa = compile_regex({p}, true);
    ASSERT_TRUE(dfa.ok()) << p;
    const RegexPaths paths = shortest_paths(*dfa, cost);
    for (uint16_t s = 0; s < dfa->size(); ++s) {
      // Brute force: the cheapest accepted continuation among all strings of up to 6 bytes.
      uint32_t best = RegexPaths::kNone;
      std::vector<std::pair<uint16_t, uint32_t>> frontier = {{s, 0}};
      for (int depth = 0; depth <= 6; ++depth) {
        std::vector<std::pair<uint16_t, uint32_t>> next;
        for (auto [state, spent] : frontier) {
          if (dfa->accepting[state]) best = std::min(best, spent);
          for (char c : std::string("abc-")) {
            const uint16_t t = dfa->step(state, static_cast<uint8_t>(c));
            if (t != RegexDfa::kDead) next.emplace_back(t, spent + cost[static_cast<uint8_t>(c)]);
          }
        }
        frontier = std::move(next);
      }
      EXPECT_EQ(paths.cost[s], best) << p << " state " << s;
      if (best != RegexPaths::kNone && best > 0) {  // following first_byte spells it
        uint16_t t = s;
        uint32_t spent = 0;
        while (!dfa->accepting[t]) {
          spent += cost[paths.first_byte[t]];
          t = dfa->step(t, paths.first_byte[t]);
          ASSERT_NE(t, RegexDfa::kDead);
        }
        EXPECT_EQ(spent, best) << p;
      }
    }
  }
}

}  // namespace
}  // namespace rne::grammar
