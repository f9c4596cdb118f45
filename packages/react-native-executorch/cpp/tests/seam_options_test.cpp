// generate()'s config read through the seam's option table (seam_core.cpp, kGenerationOptions):
// each name lands in its GenerationConfig field, required options are named when missing or of
// another type, optional ones keep their defaults when absent, and the sampler's and the
// speculative options' ranges apply. The stats carry the speculative counts.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "rne/runner/sampler_ranges.generated.h"
#include "seam_core.h"

namespace {

using Value = std::variant<double, std::string, std::vector<std::string>, bool>;

// A JS object as a map of its properties.
class MapReader : public rne::seam::ObjectReader {
 public:
  std::map<std::string, Value> values;

  bool has(const char* name) const override { return values.count(name) > 0; }
  std::optional<double> number(const char* name) const override { return get<double>(name); }
  std::optional<bool> boolean(const char* name) const override { return get<bool>(name); }
  std::optional<std::string> string(const char* name) const override {
    return get<std::string>(name);
  }
  std::optional<std::vector<std::string>> strings(const char* name) const override {
    return get<std::vector<std::string>>(name);
  }

 private:
  template <typename T>
  std::optional<T> get(const char* name) const {
    auto found = values.find(name);
    if (found == values.end() || !std::holds_alternative<T>(found->second)) return std::nullopt;
    return std::get<T>(found->second);
  }
};

MapReader fullConfig() {
  MapReader config;
  config.values = {{"maxNewTokens", 12.0}, {"temperature", 0.5},      {"topK", 40.0},
                   {"topP", 0.9},          {"minP", 0.05},            {"repetitionPenalty", 1.1},
                   {"seed", 7.0},          {"stopStrings", std::vector<std::string>{"END"}}};
  // Every other sampler option of the generated list, at its default (off).
#define RNE_AT_DEFAULT(field, name) \
  config.values.emplace(name, static_cast<double>(rne::runner::SamplerConfig{}.field));
  RNE_SAMPLER_OPTIONS(RNE_AT_DEFAULT)
#undef RNE_AT_DEFAULT
  return config;
}

TEST(SeamOptions, EachOptionLandsInItsField) {
  MapReader config = fullConfig();
  config.values["responseFormat"] = std::string(R"({"type":"object"})");
  config.values["responseSyntax"] = std::string("gemma4");
  config.values["responseStrict"] = true;
  config.values["keepSpecialTokens"] = std::vector<std::string>{"<|channel>", "<channel|>"};
  auto parsed = rne::seam::parseGenerationConfig(config);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const rne::runner::GenerationConfig& c = parsed.value();
  EXPECT_EQ(c.max_new_tokens, 12);
  EXPECT_FLOAT_EQ(c.sampling.temperature, 0.5f);
  EXPECT_EQ(c.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(c.sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(c.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(c.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(c.sampling.seed, 7u);
  EXPECT_EQ(c.stop_strings, std::vector<std::string>{"END"});
  EXPECT_EQ(c.json_schema, R"({"type":"object"})");
  EXPECT_EQ(c.json_syntax, rne::grammar::JsonSyntax::kGemma4);
  EXPECT_TRUE(c.json_strict);
  EXPECT_EQ(c.keep_special_tokens, (std::vector<std::string>{"<|channel>", "<channel|>"}));
}

TEST(SeamOptions, OptionalOptionsKeepTheirDefaultsWhenAbsent) {
  auto parsed = rne::seam::parseGenerationConfig(fullConfig());
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed.value().json_schema, "");
  EXPECT_EQ(parsed.value().json_syntax, rne::grammar::JsonSyntax::kJson);
  EXPECT_FALSE(parsed.value().json_strict);
  EXPECT_TRUE(parsed.value().keep_special_tokens.empty());
}

TEST(SeamOptions, MissingOrMistypedOptionsAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"topK", "config.topK must be a number"},
      {"stopStrings", "config.stopStrings must be an array of strings"},
  };
  for (const auto& [name, message] : cases) {
    MapReader missing = fullConfig();
    missing.values.erase(name);
    auto parsed = rne::seam::parseGenerationConfig(missing);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.error().code, rne::runner::ErrorCode::kInvalidArgument);
    EXPECT_EQ(parsed.error().message, message);
  }
  MapReader mistyped = fullConfig();
  mistyped.values["responseFormat"] = 3.0;
  auto parsed = rne::seam::parseGenerationConfig(mistyped);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().message, "config.responseFormat must be a string");
  for (const Value& value : {Value(std::string("yaml")), Value(1.0)}) {
    MapReader syntax = fullConfig();
    syntax.values["responseSyntax"] = value;
    auto bad = rne::seam::parseGenerationConfig(syntax);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().message, R"(config.responseSyntax must be "json" or "gemma4")");
  }
  for (const Value& value : {Value(1.0), Value(std::string("true"))}) {
    MapReader strict = fullConfig();
    strict.values["responseStrict"] = value;
    auto bad = rne::seam::parseGenerationConfig(strict);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().message, "config.responseStrict must be a boolean");
  }
}

TEST(SeamOptions, TheSamplersRangesApply) {
  MapReader config = fullConfig();
  config.values["topP"] = 2.0;
  auto parsed = rne::seam::parseGenerationConfig(config);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("top_p"), std::string::npos) << parsed.error().message;
}

TEST(SeamOptions, SpeculativeOptionsLandInTheirFields) {
  using rne::runner::Drafter;
  MapReader config = fullConfig();
  config.values["drafter"] = std::string("promptLookup");
  config.values["maxDraftTokens"] = 5.0;
  config.values["ngramMax"] = 4.0;
  config.values["ngramMin"] = 2.0;
  auto parsed = rne::seam::parseGenerationConfig(config);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  const rne::runner::SpeculativeConfig& s = parsed.value().speculative;
  EXPECT_EQ(s.drafter, Drafter::kPromptLookup);
  EXPECT_EQ(s.max_draft_tokens, 5);
  EXPECT_EQ(s.ngram_max, 4);
  EXPECT_EQ(s.ngram_min, 2);

  MapReader assistant = fullConfig();
  assistant.values["drafter"] = std::string("assistant");
  parsed = rne::seam::parseGenerationConfig(assistant);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed.value().speculative.drafter, Drafter::kAssistant);
  EXPECT_EQ(parsed.value().speculative.max_draft_tokens, 0);  // the model's bound

  parsed = rne::seam::parseGenerationConfig(fullConfig());
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed.value().speculative.drafter, Drafter::kNone);
}

TEST(SeamOptions, BadSpeculativeOptionsAreNamed) {
  const std::string drafters = R"(config.drafter must be "promptLookup" or "assistant")";
  const std::string integer = "config.maxDraftTokens must be a 32-bit integer";
  const int32_t default_max = rne::runner::SpeculativeConfig{}.ngram_max;
  const struct {
    std::vector<std::pair<const char*, Value>> options;
    std::string message;
  } cases[] = {
      {{{"drafter", std::string("none")}}, drafters},
      {{{"drafter", std::string("prompt-lookup")}}, drafters},
      {{{"drafter", 1.0}}, drafters},
      {{{"drafter", std::string("promptLookup")}, {"maxDraftTokens", 2.5}}, integer},
      {{{"drafter", std::string("promptLookup")}, {"maxDraftTokens", 1e10}}, integer},
      {{{"drafter", std::string("promptLookup")}, {"maxDraftTokens", std::nan("")}}, integer},
      {{{"drafter", std::string("promptLookup")}, {"maxDraftTokens", -1.0}},
       "max_draft_tokens must be >= 1 (0 = as many as the model verifies in one forward), got -1"},
      {{{"drafter", std::string("promptLookup")}, {"ngramMin", 0.0}},
       "ngram_min must be >= 1 (the shortest n-gram prompt lookup matches), got 0"},
      {{{"drafter", std::string("promptLookup")}, {"ngramMin", 3.0}, {"ngramMax", 2.0}},
       "ngram_max (2) must be >= ngram_min (3)"},
      // Against the default ngram_max.
      {{{"drafter", std::string("promptLookup")}, {"ngramMin", double(default_max + 1)}},
       "ngram_max (" + std::to_string(default_max) + ") must be >= ngram_min (" +
           std::to_string(default_max + 1) + ")"},
      {{{"maxDraftTokens", 4.0}},
       "max_draft_tokens, ngram_max and ngram_min tune a speculative drafter, and none is "
       "chosen: choose one or leave them out"},
  };
  for (const auto& c : cases) {
    MapReader config = fullConfig();
    for (const auto& [name, value] : c.options) config.values[name] = value;
    auto parsed = rne::seam::parseGenerationConfig(config);
    ASSERT_FALSE(parsed.ok()) << c.message;
    EXPECT_EQ(parsed.error().code, rne::runner::ErrorCode::kInvalidArgument);
    EXPECT_EQ(parsed.error().message, c.message);
  }
}

TEST(SeamStats, SpeculativeCountsAreReported) {
  auto field = [](const rne::seam::StatsFields& fields, std::string_view name) {
    for (const auto& [key, value] : fields.numbers) {
      if (key == name) return value;
    }
    ADD_FAILURE() << "no stats field " << name;
    return -1.0;
  };
  rne::runner::Stats stats;
  stats.generated_tokens = 21;
  stats.drafted_tokens = 16;
  stats.accepted_tokens = 12;
  stats.decode_forwards = 8;
  const rne::seam::StatsFields fields = rne::seam::statsFields(stats);
  EXPECT_EQ(field(fields, "draftedTokens"), 16);
  EXPECT_EQ(field(fields, "acceptedTokens"), 12);
  EXPECT_EQ(field(fields, "decodeForwards"), 8);
  EXPECT_DOUBLE_EQ(field(fields, "acceptanceRate"), 0.75);
  EXPECT_EQ(field(rne::seam::statsFields(rne::runner::Stats{}), "acceptanceRate"), 0);
}

}  // namespace
