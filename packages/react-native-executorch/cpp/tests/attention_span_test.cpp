// kernels/attention_span.h against a plain double-precision attention: causal and not, grouped
// query heads, serial and split into spans (tasks run out of order, as a pool may), float32 and
// fp16 caches, a head size the AVX2 path takes (64) and one only the portable path takes (12).
// ctest runs the suite twice, the second time with RNE_SDPA_GENERIC=1 (portable path only).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "attention_span.h"
#include "half_type.h"

namespace {

namespace span = rne::attention_span;

struct Shape {
  int64_t positions, heads, kv_heads, head_dim, start_pos;
  bool causal;
};

// Layout [1, positions, heads, head_dim] for q and out, [1, keys, kv_heads, head_dim] for k/v.
std::vector<double> reference(const Shape& s, const std::vector<float>& q,
                              const std::vector<float>& k, const std::vector<float>& v,
                              float scale) {
  const int64_t num_keys = s.start_pos + s.positions;
  std::vector<double> out(q.size());
  for (int64_t t = 0; t < s.positions; ++t) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kv = h / (s.heads / s.kv_heads);
      const int64_t seen = s.causal ? s.start_pos + t + 1 : num_keys;
      std::vector<double> scores(seen);
      double max = -INFINITY;
      for (int64_t j = 0; j < seen; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < s.head_dim; ++d) {
          dot += double(q[(t * s.heads + h) * s.head_dim + d]) *
                 k[(j * s.kv_heads + kv) * s.head_dim + d];
        }
        scores[j] = dot * scale;
        max = std::max(max, scores[j]);
      }
      double total = 0;
      for (double& x : scores) total += x = std::exp(x - max);
      for (int64_t d = 0; d < s.head_dim; ++d) {
        double sum = 0;
        for (int64_t j = 0; j < seen; ++j) {
          sum += scores[j] * v[(j * s.kv_heads + kv) * s.head_dim + d];
        }
        out[(t * s.heads + h) * s.head_dim + d] = sum / total;
      }
    }
  }
  return out;
}

template <typename T>
void check(const Shape& s, int64_t spans, double tolerance) {
  const int64_t num_keys = s.start_pos + s.positions;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  auto make = [&](int64_t n) {
    std::vector<float> values(n);
    // Rounded to T first, so the reference sees exactly what the kernel reads.
    for (float& x : values) x = static_cast<float>(static_cast<T>(normal(rng)));
    return values;
  };
  const std::vector<float> q = make(s.positions * s.heads * s.head_dim);
  const std::vector<float> k = make(num_keys * s.kv_heads * s.head_dim);
  const std::vector<float> v = make(num_keys * s.kv_heads * s.head_dim);
  auto as_t = [](const std::vector<float>& x) { return std::vector<T>(x.begin(), x.end()); };
  const std::vector<T> qt = as_t(q), kt = as_t(k), vt = as_t(v);
  std::vector<T> out(q.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
  const span::Strides qs{0, s.heads * s.head_dim, s.head_dim};
  const span::Strides ks{0, s.kv_heads * s.head_dim, s.head_dim};
  const span::Problem<T> problem{qt.data(), qs, kt.data(), ks, vt.data(), ks, out.data(), qs,
                                 1, s.positions, s.heads, s.kv_heads, s.head_dim, s.start_pos,
                                 num_keys, s.causal, scale};
  const int64_t span_len = span::ceil_div(num_keys, spans);
  const span::Split split{span::ceil_div(num_keys, span_len), span_len, spans > 1};
  int64_t ran = 0;
  span::attend(problem, split, [&](size_t count, auto&& task) {
    for (size_t i = count; i-- > 0;) task(i);  // out of order
    ran += static_cast<int64_t>(count);
  });
  EXPECT_EQ(ran, spans > 1 ? split.spans : 0);

  const std::vector<double> expected = reference(s, q, k, v, scale);
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(static_cast<double>(out[i]), expected[i], tolerance) << "element " << i;
  }
}

const Shape kDecode{1, 6, 2, 64, 300, true};
const Shape kChunk{16, 6, 2, 64, 200, true};
const Shape kOddHead{5, 4, 4, 12, 90, true};
const Shape kNotCausal{3, 6, 3, 64, 40, false};

TEST(AttentionSpan, Float32MatchesPlainAttention) {
  for (const Shape& shape : {kDecode, kChunk, kOddHead, kNotCausal}) {
    for (int64_t spans : {1, 3, 8}) check<float>(shape, spans, 2e-5);
  }
}

TEST(AttentionSpan, Fp16CachesMatchPlainAttention) {
  // The output is rounded to fp16 (about 1e-3 relative at these magnitudes).
  for (const Shape& shape : {kDecode, kChunk, kOddHead}) {
    for (int64_t spans : {1, 5}) check<Half>(shape, spans, 2e-3);
  }
}

TEST(AttentionSpan, SplitIsSerialForShortContextsAndTwoSpansPerThreadOtherwise) {
  span::Problem<float> p{};
  p.batch = 1;
  p.heads = 9;
  p.num_keys = 100;  // 900 key reads: serial
  EXPECT_FALSE(span::split(p, 4).parallel);
  EXPECT_EQ(span::split(p, 4).spans, 1);
  p.num_keys = 2000;
  const span::Split parallel = span::split(p, 4);
  EXPECT_TRUE(parallel.parallel);
  EXPECT_EQ(parallel.spans, 8);
  EXPECT_GE(parallel.span_len * parallel.spans, p.num_keys);
  EXPECT_FALSE(span::split(p, 1).parallel);  // no pool threads: one span
  p.num_keys = 500;  // at least kMinSpanKeys keys per span
  EXPECT_EQ(span::split(p, 8).spans, span::ceil_div(500, span::kMinSpanKeys));
}

}  // namespace
