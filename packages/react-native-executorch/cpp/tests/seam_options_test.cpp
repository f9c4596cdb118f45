// generate()'s config read through the seam's option table (seam_core.cpp, kGenerationOptions):
// each name lands in its GenerationConfig field, required options are named when missing or of
// another type, optional ones keep their defaults when absent, and the sampler's ranges apply.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "seam_core.h"

namespace {

using Value = std::variant<double, std::string, std::vector<std::string>>;

// A JS object as a map of its properties.
class MapReader : public rne::seam::ObjectReader {
 public:
  std::map<std::string, Value> values;

  bool has(const char* name) const override { return values.count(name) > 0; }
  std::optional<double> number(const char* name) const override { return get<double>(name); }
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
  return config;
}

TEST(SeamOptions, EachOptionLandsInItsField) {
  MapReader config = fullConfig();
  config.values["responseFormat"] = std::string(R"({"type":"object"})");
  config.values["responseSyntax"] = std::string("gemma4");
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
  EXPECT_EQ(c.json_syntax, rne::runner::JsonSyntax::kGemma4);
  EXPECT_EQ(c.keep_special_tokens, (std::vector<std::string>{"<|channel>", "<channel|>"}));
}

TEST(SeamOptions, OptionalOptionsKeepTheirDefaultsWhenAbsent) {
  auto parsed = rne::seam::parseGenerationConfig(fullConfig());
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed.value().json_schema, "");
  EXPECT_EQ(parsed.value().json_syntax, rne::runner::JsonSyntax::kJson);
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
}

TEST(SeamOptions, TheSamplersRangesApply) {
  MapReader config = fullConfig();
  config.values["topP"] = 2.0;
  auto parsed = rne::seam::parseGenerationConfig(config);
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("top_p"), std::string::npos) << parsed.error().message;
}

}  // namespace
