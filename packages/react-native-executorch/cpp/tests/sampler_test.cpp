#include "rne/runner/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace rne::runner {
namespace {

SamplerConfig sampling(float temperature) {
  SamplerConfig c;
  c.temperature = temperature;
  return c;
}

// Logits whose softmax is exactly `probs`.
std::vector<float> logits_for(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

std::map<int64_t, int> histogram(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::map<int64_t, int> counts;
  for (int i = 0; i < draws; ++i) {
    auto copy = logits;
    ++counts[sampler.sample(copy.data(), {})];
  }
  return counts;
}

TEST(SamplerTest, GreedyPicksTheArgmaxAndTheLowestIdOnTies) {
  Sampler sampler(sampling(0.0f), 5);
  std::vector<float> logits = {0.1f, 3.0f, -2.0f, 3.0f, 1.0f};
  EXPECT_EQ(sampler.sample(logits.data(), {}), 1);
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOncePerId) {
  SamplerConfig c = sampling(0.0f);
  c.repetition_penalty = 2.0f;
  Sampler sampler(c, 4);
  std::vector<float> logits = {4.0f, 3.0f, -1.0f, 0.5f};
  // Token 0 appears three times in the context but is penalised once: 4 / 2 = 2 < 3.
  EXPECT_EQ(sampler.sample(logits.data(), {0, 0, 2, 0}), 1);
  EXPECT_FLOAT_EQ(logits[0], 2.0f);
  EXPECT_FLOAT_EQ(logits[2], -2.0f);
  EXPECT_FLOAT_EQ(logits[1], 3.0f);
}

TEST(SamplerTest, TemperatureSamplingFollowsTheSoftmax) {
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  Sampler sampler(sampling(1.0f), 4);
  const int draws = 40000;
  auto counts = histogram(sampler, logits_for(probs), draws);
  for (size_t i = 0; i < probs.size(); ++i) {
    const double freq = counts[static_cast<int64_t>(i)] / static_cast<double>(draws);
    EXPECT_NEAR(freq, probs[i], 0.012) << "token " << i;
  }
}

TEST(SamplerTest, LowTemperatureSharpensTheDistribution) {
  Sampler sampler(sampling(0.25f), 4);
  auto counts = histogram(sampler, logits_for({0.5, 0.3, 0.15, 0.05}), 20000);
  // p^4 normalised: 0.5^4 / (0.5^4 + 0.3^4 + 0.15^4 + 0.05^4) = 0.877
  EXPECT_NEAR(counts[0] / 20000.0, 0.877, 0.015);
}

TEST(SamplerTest, TopKKeepsOnlyTheKMostLikelyTokensRenormalised) {
  SamplerConfig c = sampling(1.0f);
  c.top_k = 2;
  Sampler sampler(c, 4);
  auto counts = histogram(sampler, logits_for({0.15, 0.5, 0.05, 0.3}), 20000);
  EXPECT_EQ(counts.count(0), 0u);
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_NEAR(counts[1] / 20000.0, 0.5 / 0.8, 0.015);
}

TEST(SamplerTest, TopPKeepsTheSmallestPrefixReachingTheMass) {
  SamplerConfig c = sampling(1.0f);
  c.top_p = 0.7f;  // 0.5 alone is short of 0.7; 0.5 + 0.3 reaches it
  Sampler sampler(c, 4);
  auto counts = histogram(sampler, logits_for({0.3, 0.05, 0.5, 0.15}), 20000);
  EXPECT_EQ(counts.count(1), 0u);
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_NEAR(counts[2] / 20000.0, 0.5 / 0.8, 0.015);
}

TEST(SamplerTest, TopPAfterTopKIsMeasuredOnTheTopKDistribution) {
  SamplerConfig c = sampling(1.0f);
  c.top_k = 2;     // keeps 0.4 and 0.3 -> renormalised 0.571 and 0.429
  c.top_p = 0.5f;  // the first one alone reaches 0.5 of the top-k mass
  Sampler sampler(c, 5);
  auto counts = histogram(sampler, logits_for({0.1, 0.4, 0.1, 0.3, 0.1}), 2000);
  EXPECT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.begin()->first, 1);
}

TEST(SamplerTest, MinPDropsTokensBelowAFractionOfTheTopProbability) {
  SamplerConfig c = sampling(1.0f);
  c.min_p = 0.5f;  // threshold 0.25: keeps 0.5 and 0.3
  Sampler sampler(c, 4);
  auto counts = histogram(sampler, logits_for({0.2, 0.5, 0.3, 0.0001}), 20000);
  EXPECT_EQ(counts.count(0), 0u);
  EXPECT_EQ(counts.count(3), 0u);
  EXPECT_NEAR(counts[2] / 20000.0, 0.3 / 0.8, 0.015);
}

TEST(SamplerTest, SameSeedGivesTheSameTokensAndAnotherSeedDiffers) {
  std::vector<float> logits(1000);
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& l : logits) l = normal(gen);
  auto run = [&](uint64_t seed) {
    SamplerConfig c = sampling(1.0f);
    c.seed = seed;
    Sampler sampler(c, 1000);
    std::vector<int64_t> ids;
    for (int i = 0; i < 50; ++i) {
      auto copy = logits;
      ids.push_back(sampler.sample(copy.data(), {}));
    }
    return ids;
  };
  EXPECT_EQ(run(1), run(1));
  EXPECT_NE(run(1), run(2));
}

// At Gemma's vocabulary size the fast paths (threshold search, partial selection) must agree
// with the definition computed the slow way: full softmax and a full sort.
TEST(SamplerTest, LargeVocabularySamplesStayInsideTheExactNucleusAndMinPSet) {
  const int64_t vocab = 262144;
  std::vector<float> logits(vocab);
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  for (auto& l : logits) l = normal(gen);
  for (int i = 0; i < 20; ++i) logits[gen() % vocab] += 12.0f;  // a peaked head, like an LM

  std::vector<double> p(vocab);
  const double m = *std::max_element(logits.begin(), logits.end());
  double z = 0;
  for (int64_t i = 0; i < vocab; ++i) z += p[i] = std::exp(logits[i] - m);
  for (auto& x : p) x /= z;
  std::vector<int64_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });

  const double top_p = 0.9;
  std::set<int64_t> nucleus;
  double cumulative = 0;
  for (int64_t id : order) {
    nucleus.insert(id);
    cumulative += p[id];
    if (cumulative >= top_p) break;
  }
  SamplerConfig c = sampling(1.0f);
  c.top_p = static_cast<float>(top_p);
  Sampler nucleus_sampler(c, vocab);
  for (int i = 0; i < 300; ++i) {
    auto copy = logits;
    const int64_t id = nucleus_sampler.sample(copy.data(), {});
    EXPECT_TRUE(nucleus.count(id)) << "id " << id << " p=" << p[id] << " outside the top-p set";
  }

  const double min_p = 0.05;
  c = sampling(1.0f);
  c.min_p = static_cast<float>(min_p);
  Sampler min_p_sampler(c, vocab);
  const double p_max = p[order[0]];
  for (int i = 0; i < 300; ++i) {
    auto copy = logits;
    const int64_t id = min_p_sampler.sample(copy.data(), {});
    EXPECT_GE(p[id], min_p * p_max * 0.999) << "id " << id;
  }

  c = sampling(1.0f);
  c.top_k = 5;
  Sampler top_k_sampler(c, vocab);
  const std::set<int64_t> top5(order.begin(), order.begin() + 5);
  std::set<int64_t> seen;
  for (int i = 0; i < 300; ++i) {
    auto copy = logits;
    seen.insert(top_k_sampler.sample(copy.data(), {}));
  }
  for (int64_t id : seen) EXPECT_TRUE(top5.count(id)) << "id " << id << " not in the top 5";
}

// The exact kept set computed the slow way (double softmax, full sort): the shortest prefix of
// the sorted tokens whose mass reaches top_p, minus the tokens below min_p * p_max, with the
// kept probabilities renormalised. Ids within `slack` of either cut count as borderline.
struct ExactKeptSet {
  std::map<int64_t, double> probability;
  std::set<int64_t> borderline;
};

ExactKeptSet exact_kept_set(const std::vector<float>& logits, float temperature, double top_p,
                            double min_p, double slack) {
  const auto vocab = static_cast<int64_t>(logits.size());
  const double m = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double z = 0;
  for (int64_t i = 0; i < vocab; ++i) z += p[i] = std::exp((logits[i] - m) / temperature);
  for (auto& x : p) x /= z;
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  const double p_max = p[order[0]];
  ExactKeptSet kept;
  double before = 0, mass = 0;
  for (int64_t id : order) {
    const double relative = p[id] / p_max;
    if (before >= top_p + slack || relative < min_p * (1 - slack)) break;
    if (before >= top_p - slack || relative < min_p * (1 + slack)) {
      kept.borderline.insert(id);
    } else {
      kept.probability[id] = p[id];
      mass += p[id];
    }
    before += p[id];
  }
  for (auto& [id, q] : kept.probability) q /= mass;
  return kept;
}

// Top-p (alone and with min-p) over the full vocabulary at many cuts, including ones among
// near-equal weights and ones that need nearly the whole vocabulary (the low-floor paths): every
// draw lands in the exact kept set and the frequencies follow the renormalised probabilities.
TEST(SamplerTest, TopPAndMinPDrawsFollowTheExactDistributionAtEveryCut) {
  const int64_t vocab = 4000;
  std::vector<float> logits(vocab);
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (auto& l : logits) l = normal(gen);
  for (int i = 0; i < 8; ++i) logits[gen() % vocab] += 14.0f + 0.05f * i;  // near-equal head
  for (float temperature : {0.7f, 1.0f, 2.0f}) {
    for (double top_p : {0.2, 0.5, 0.9, 0.99999}) {
      for (double min_p : {0.0, 0.001, 0.3}) {
        const ExactKeptSet kept = exact_kept_set(logits, temperature, top_p, min_p, 1e-5);
        SamplerConfig c = sampling(temperature);
        c.top_p = static_cast<float>(top_p);
        c.min_p = static_cast<float>(min_p);
        c.seed = 3;
        Sampler sampler(c, vocab);
        const int draws = 1500;
        std::map<int64_t, int> counts;
        for (int i = 0; i < draws; ++i) {
          auto copy = logits;
          const int64_t id = sampler.sample(copy.data(), {});
          ASSERT_TRUE(kept.probability.count(id) || kept.borderline.count(id))
              << "T=" << temperature << " top_p=" << top_p << " min_p=" << min_p << ": id " << id
              << " outside the kept set";
          ++counts[id];
        }
        for (const auto& [id, q] : kept.probability) {
          if (q < 0.05) continue;  // too rare for 1500 draws to pin down
          EXPECT_NEAR(counts[id] / static_cast<double>(draws), q,
                      4.5 * std::sqrt(q * (1 - q) / draws))
              << "T=" << temperature << " top_p=" << top_p << " min_p=" << min_p << " id " << id;
        }
      }
    }
  }
}

// Temperature sampling over a large vocabulary (the block-sum draw): the frequency of the head
// and of the whole tail match the softmax.
TEST(SamplerTest, LargeVocabularyTemperatureDrawsMatchTheSoftmax) {
  const int64_t vocab = 30000;
  std::vector<float> logits(vocab, 0.0f);
  const int64_t head = 22222;  // in a late block, so the draw walks most block sums
  logits[head] = std::log(0.4f * vocab / 0.6f);  // p(head) = 0.4, the tail shares 0.6
  Sampler sampler(sampling(1.0f), vocab);
  const int draws = 10000;
  int head_count = 0, first_half = 0;
  for (int i = 0; i < draws; ++i) {
    auto copy = logits;
    const int64_t id = sampler.sample(copy.data(), {});
    head_count += id == head;
    first_half += id < vocab / 2;
  }
  EXPECT_NEAR(head_count / static_cast<double>(draws), 0.4, 0.02);
  EXPECT_NEAR(first_half / static_cast<double>(draws), 0.3, 0.02);  // half of the tail's 0.6
}

// A grammar mask: only allowed ids are ever drawn, in every configuration, and they follow the
// softmax renormalised over the allowed set (here {1, 3}: 0.3 and 0.05 -> 6/7 and 1/7).
TEST(SamplerTest, MaskedSamplingDrawsOnlyAllowedTokensWithRenormalisedProbabilities) {
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  TokenMask allowed;
  allowed.resize(4);
  allowed.allow(1);
  allowed.allow(3);
  for (int config = 0; config < 5; ++config) {
    SamplerConfig c = sampling(config == 0 ? 0.0f : 1.0f);
    if (config == 2) c.top_k = 3;
    if (config == 3) c.top_p = 0.99f;
    if (config == 4) c.min_p = 0.01f;
    Sampler sampler(c, 4);
    std::map<int64_t, int> counts;
    const int draws = config == 0 ? 10 : 20000;
    for (int i = 0; i < draws; ++i) {
      auto logits = logits_for(probs);
      ++counts[sampler.sample(logits.data(), {}, &allowed)];
    }
    EXPECT_EQ(counts[0] + counts[2], 0) << "config " << config;
    if (config == 0) {
      EXPECT_EQ(counts[1], draws);  // greedy: the best allowed token
    } else {
      EXPECT_NEAR(counts[1] / double(draws), 6.0 / 7.0, 0.015) << "config " << config;
    }
  }
}

TEST(SamplerTest, ValidateNamesTheBadOption) {
  SamplerConfig c;
  c.top_p = 0.0f;
  auto r = validate(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("top_p"), std::string::npos);
  c = SamplerConfig{};
  c.temperature = -1.0f;
  EXPECT_FALSE(validate(c).ok());
  c = SamplerConfig{};
  c.repetition_penalty = 0.0f;
  EXPECT_FALSE(validate(c).ok());
  c = SamplerConfig{};
  c.min_p = 1.0f;
  EXPECT_FALSE(validate(c).ok());
  EXPECT_TRUE(validate(SamplerConfig{}).ok());
}

}  // namespace
}  // namespace rne::runner
