// kernels/tied_head.h against a plain double-precision reference of the op's definition (block
// int8 quantization of x, 4-bit table times per-group scales): on the path this CPU takes and on
// the portable one, serial and on std::threads, float32 and fp16 scales, shapes with a trailing
// unpaired block (dim 96) and vocabularies that are not multiples of a tile or a task; and a
// verify call's several positions, every count of them up to past one group of tiles.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "half_type.h"
#include "tied_head.h"

namespace {

namespace th = rne::tied_head;

uint16_t half_bits(float f) {
  const Half h = static_cast<Half>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof bits);
  return bits;
}

float half_value(uint16_t bits) {
  Half h;
  std::memcpy(&h, &bits, sizeof h);
  return static_cast<float>(h);
}

struct Shape {
  int64_t rows, dim, group, vocab;
  bool fp16;
};

struct Data {
  std::vector<float> x;
  std::vector<uint8_t> packed;
  std::vector<float> scales_f32;
  std::vector<uint16_t> scales_f16;
};

Data make_data(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_real_distribution<float> log_mag(-3.0f, 3.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  Data d;
  d.x.resize(static_cast<size_t>(s.rows * s.dim));
  // Random signs, magnitudes spread over orders of magnitude block by block.
  for (int64_t i = 0; i < s.rows * s.dim; i += 32) {
    const float block_mag = std::pow(10.0f, log_mag(rng));
    for (int64_t j = i; j < i + 32; ++j) d.x[j] = unit(rng) * block_mag * std::pow(3.0f, unit(rng));
  }
  // An all-zero block (the second of row 0; the first when dim is 32) and a lone large value.
  const int64_t zero_block = s.dim > 32 ? 32 : 0;
  std::fill(d.x.begin() + zero_block, d.x.begin() + zero_block + 32, 0.0f);
  d.x[s.rows * s.dim - 1] = 50.0f;
  d.packed.resize(static_cast<size_t>(s.vocab * s.dim / 2));
  for (uint8_t& b : d.packed) b = static_cast<uint8_t>(byte(rng));
  const int64_t n_scales = s.vocab * (s.dim / s.group);
  for (int64_t i = 0; i < n_scales; ++i) {
    const float scale = std::pow(10.0f, log_mag(rng) / 2.0f) * 0.01f;
    d.scales_f16.push_back(half_bits(scale));
    // The float32 table takes the same values, so both kinds share one reference.
    d.scales_f32.push_back(half_value(d.scales_f16.back()));
  }
  return d;
}

// The definition, with the activation quantization in float32 as the op specifies, and the
// products and sums in double. Also returns, per output, sum_d |xq| * |w| for the bound.
void reference(const Shape& s, const Data& d, std::vector<double>& out,
               std::vector<double>& magnitude) {
  std::vector<double> xq(d.x.size());
  for (int64_t i = 0; i < s.rows * s.dim; i += 32) {
    float amax = 0.0f;
    for (int64_t j = i; j < i + 32; ++j) amax = std::max(amax, std::fabs(d.x[j]));
    const float scale = amax / 127.0f;
    for (int64_t j = i; j < i + 32; ++j) {
      float q = 0.0f;
      if (scale != 0.0f) q = std::min(127.0f, std::max(-127.0f, std::nearbyint(d.x[j] / scale)));
      xq[j] = static_cast<double>(q) * scale;
    }
  }
  out.assign(static_cast<size_t>(s.rows * s.vocab), 0.0);
  magnitude.assign(out.size(), 0.0);
  const int64_t groups = s.dim / s.group;
  for (int64_t v = 0; v < s.vocab; ++v) {
    for (int64_t k = 0; k < s.dim; ++k) {
      const uint8_t byte = d.packed[v * s.dim / 2 + k / 2];
      const int nibble = k % 2 == 0 ? byte >> 4 : byte & 0xF;
      const double w = (nibble - 8) * static_cast<double>(d.scales_f32[v * groups + k / s.group]);
      for (int64_t t = 0; t < s.rows; ++t) {
        out[t * s.vocab + v] += xq[t * s.dim + k] * w;
        magnitude[t * s.vocab + v] += std::fabs(xq[t * s.dim + k] * w);
      }
    }
  }
}

void serial(size_t n, const std::function<void(size_t)>& f) {
  for (size_t i = 0; i < n; ++i) f(i);
}

// Tasks taken from a shared counter by three threads, so they run out of order.
void threaded(size_t n, const std::function<void(size_t)>& f) {
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 3; ++k) {
    threads.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < n;) f(i);
    });
  }
  for (std::thread& t : threads) t.join();
}

th::Problem problem(const Shape& s, const Data& d, std::vector<float>& out) {
  out.assign(static_cast<size_t>(s.rows * s.vocab), NAN);
  return th::Problem{d.x.data(),
                     s.rows,
                     s.dim,
                     d.packed.data(),
                     s.fp16 ? static_cast<const void*>(d.scales_f16.data())
                            : static_cast<const void*>(d.scales_f32.data()),
                     s.fp16,
                     s.group,
                     s.vocab,
                     out.data()};
}

void expect_close(const Shape& s, const std::vector<float>& out, const std::vector<double>& want,
                  const std::vector<double>& magnitude, const char* what) {
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], want[i], 1e-4 * magnitude[i] + 1e-6)
        << what << ": rows " << s.rows << " dim " << s.dim << " group " << s.group << " vocab "
        << s.vocab << (s.fp16 ? " fp16" : " f32") << " row " << i / s.vocab << " logit "
        << i % s.vocab;
  }
}

// Every path this CPU has, serial and threaded, against the reference.
void check_shape(const Shape& s, uint32_t seed) {
  const Data d = make_data(s, seed);
  std::vector<double> want, magnitude;
  reference(s, d, want, magnitude);
  std::vector<float> out;
  const th::detail::Path paths[] = {th::detail::native_path(), th::detail::Path::kPortable};
  for (th::detail::Path path : paths) {
    const char* name = path == th::detail::Path::kPortable ? "portable" : "native";
    th::Problem p = problem(s, d, out);
    ASSERT_EQ(th::check(p), "");
    th::detail::compute_on(path, p, 1, serial);
    expect_close(s, out, want, magnitude, name);

    p = problem(s, d, out);
    // More tasks than the vocabulary has tiles, so some get short or no ranges.
    th::detail::compute_on(path, p, 7, threaded);
    expect_close(s, out, want, magnitude, name);
  }
  th::Problem p = problem(s, d, out);
  th::compute(p, th::tasks(p, 2), threaded);
  expect_close(s, out, want, magnitude, "compute");
}

TEST(TiedHeadTest, SmallShapesMatchReference) {
  uint32_t seed = 1;
  for (int64_t dim : {32, 64, 96}) {
    for (int64_t group : {32, 64, 96}) {
      if (dim % group != 0) continue;
      for (int64_t vocab : {1, 3, 7, 9, 1000}) {
        for (int64_t rows : {1, 3}) {
          for (bool fp16 : {false, true}) check_shape({rows, dim, group, vocab, fp16}, seed++);
        }
      }
    }
  }
}

TEST(TiedHeadTest, GemmaWidthMatchesReference) {
  uint32_t seed = 100;
  for (int64_t group : {32, 64, 128, 256}) {
    for (int64_t vocab : {7, 517}) {
      for (int64_t rows : {1, 3}) {
        for (bool fp16 : {false, true}) check_shape({rows, 1536, group, vocab, fp16}, seed++);
      }
    }
  }
}

// Widths whose blocks do not come in whole runs of eight (pairs left over, an unpaired last
// block) and groups that do not tile eight blocks evenly.
TEST(TiedHeadTest, UnevenWidthsAndGroupsMatchReference) {
  const Shape shapes[] = {{1, 288, 96, 37, true},  {3, 576, 192, 21, false},
                          {1, 320, 64, 19, true},  {2, 352, 32, 13, false},
                          {1, 352, 352, 11, true}, {1, 768, 384, 9, true}};
  uint32_t seed = 200;
  for (const Shape& s : shapes) check_shape(s, seed++);
}

// A verify call's positions share each unpacked table row on the vector paths: every count up
// to past one group (9: groups of 5 and 4), at E2B's width and group with fp16 scales, with an
// unpaired last block, with pairs after the last run of eight blocks and with groups that do
// not tile eight blocks; vocabularies end mid-tile. The positions' activations differ in scale
// by orders of magnitude, so a tile that takes one position's for another's is far off.
TEST(TiedHeadTest, ManyPositionsMatchReference) {
  uint32_t seed = 300;
  for (int64_t rows = 1; rows <= 9; ++rows) {
    check_shape({rows, 1536, 128, 13, true}, seed++);
    check_shape({rows, 96, 32, 7, false}, seed++);
    check_shape({rows, 320, 64, 5, rows % 2 == 0}, seed++);
    check_shape({rows, 288, 96, 3, rows % 2 != 0}, seed++);
  }
  check_shape({17, 256, 64, 11, true}, seed++);
}

// Greedy speculative decoding keeps a drafted token only if verify's row picks it, so a row of
// verify must be what forward computes for that position alone: bit for bit, on every path.
TEST(TiedHeadTest, PositionsTogetherEqualEachAlone) {
  uint32_t seed = 400;
  for (int64_t rows : {2, 3, 5, 8, 9}) {
    for (const Shape& s : {Shape{rows, 1536, 128, 11, true}, Shape{rows, 352, 32, 6, false}}) {
      const Data d = make_data(s, seed++);
      std::vector<float> together;
      for (th::detail::Path path : {th::detail::native_path(), th::detail::Path::kPortable}) {
        th::Problem p = problem(s, d, together);
        th::detail::compute_on(path, p, 1, serial);
        for (int64_t t = 0; t < rows; ++t) {
          std::vector<float> alone;
          const Shape one{1, s.dim, s.group, s.vocab, s.fp16};
          th::Problem q = problem(one, d, alone);
          q.x = d.x.data() + t * s.dim;
          th::detail::compute_on(path, q, 1, serial);
          for (int64_t v = 0; v < s.vocab; ++v) {
            ASSERT_EQ(together[t * s.vocab + v], alone[v])
                << "rows " << rows << " dim " << s.dim << " position " << t << " logit " << v;
          }
        }
      }
    }
  }
}

TEST(TiedHeadTest, PositionsSplitIntoNearEqualGroups) {
  for (int64_t rows = 1; rows <= 40; ++rows) {
    std::vector<int64_t> sizes;
    for (int64_t t = 0; t < rows;) {
      sizes.push_back(th::detail::position_group(rows - t));
      t += sizes.back();
    }
    const int64_t fewest = (rows + th::detail::kMaxPositions - 1) / th::detail::kMaxPositions;
    EXPECT_EQ(static_cast<int64_t>(sizes.size()), fewest) << rows;
    EXPECT_LE(sizes.front(), th::detail::kMaxPositions) << rows;
    EXPECT_LE(sizes.front() - sizes.back(), 1) << rows;
  }
  EXPECT_EQ(th::detail::position_group(9), 5);
  EXPECT_EQ(th::detail::position_group(8), 8);
}

TEST(TiedHeadTest, ManyTasksMatchReference) {
  const Shape s{1, 128, 128, 20011, true};
  const Data d = make_data(s, 9);
  std::vector<double> want, magnitude;
  reference(s, d, want, magnitude);
  std::vector<float> out;
  for (th::detail::Path path : {th::detail::native_path(), th::detail::Path::kPortable}) {
    th::Problem p = problem(s, d, out);
    const int64_t n = th::tasks(p, 4);
    EXPECT_GT(n, 1);
    th::detail::compute_on(path, p, n, threaded);
    expect_close(s, out, want, magnitude, "many tasks");
  }
}

TEST(TiedHeadTest, ExtremeNibblesAndActivations) {
  // Every nibble 0 (-8) or 15 (+7) against activations at +-amax, the int16 and int32 limits of
  // the vector paths.
  for (uint8_t byte : {0x00, 0xFF, 0x0F, 0xF0}) {
    const Shape s{2, 256, 64, 13, false};
    Data d = make_data(s, 3);
    std::fill(d.packed.begin(), d.packed.end(), byte);
    for (size_t i = 0; i < d.x.size(); ++i) d.x[i] = (i % 3 == 0) ? -2.0f : 2.0f;
    std::vector<double> want, magnitude;
    reference(s, d, want, magnitude);
    std::vector<float> out;
    for (th::detail::Path path : {th::detail::native_path(), th::detail::Path::kPortable}) {
      th::Problem p = problem(s, d, out);
      th::detail::compute_on(path, p, 1, serial);
      expect_close(s, out, want, magnitude, "extremes");
    }
  }
}

TEST(TiedHeadTest, ZeroActivationsGiveZeroLogits) {
  const Shape s{1, 64, 32, 10, true};
  Data d = make_data(s, 5);
  std::fill(d.x.begin(), d.x.end(), 0.0f);
  std::vector<float> out;
  for (th::detail::Path path : {th::detail::native_path(), th::detail::Path::kPortable}) {
    th::Problem p = problem(s, d, out);
    th::detail::compute_on(path, p, 1, serial);
    for (float v : out) EXPECT_EQ(v, 0.0f);
  }
}

TEST(TiedHeadTest, HalfConversionMatchesHardware) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float want = half_value(static_cast<uint16_t>(bits));
    const float got = th::detail::half_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << bits;
    } else {
      ASSERT_EQ(got, want) << bits;
    }
  }
}

TEST(TiedHeadTest, TasksSplitLargeVocabularies) {
  th::Problem p{};
  p.vocab = 262144;
  EXPECT_EQ(th::tasks(p, 1), 1);
  EXPECT_EQ(th::tasks(p, 2), 8);
  EXPECT_EQ(th::tasks(p, 8), 32);
  p.vocab = 1000;
  EXPECT_EQ(th::tasks(p, 8), 1);
  p.vocab = 3 * th::kMinTaskRows;
  EXPECT_EQ(th::tasks(p, 8), 3);
}

TEST(TiedHeadTest, CheckRejectsMalformedProblems) {
  const Shape s{1, 128, 64, 4, false};
  const Data d = make_data(s, 2);
  std::vector<float> out;
  const th::Problem good = problem(s, d, out);
  EXPECT_EQ(th::check(good), "");

  th::Problem p = good;
  p.dim = 100;  // not a multiple of 32
  EXPECT_NE(th::check(p), "");
  p = good;
  p.dim = 0;
  EXPECT_NE(th::check(p), "");
  p = good;
  p.group = 96;  // does not divide 128
  EXPECT_NE(th::check(p), "");
  p = good;
  p.group = 16;  // divides dim, but not a multiple of 32
  EXPECT_NE(th::check(p), "");
  p = good;
  p.group = 0;
  EXPECT_NE(th::check(p), "");
  p = good;
  p.rows = 0;
  EXPECT_NE(th::check(p), "");
  p = good;
  p.vocab = 0;
  EXPECT_NE(th::check(p), "");
  for (int which = 0; which < 4; ++which) {
    p = good;
    if (which == 0) p.x = nullptr;
    if (which == 1) p.packed = nullptr;
    if (which == 2) p.scales = nullptr;
    if (which == 3) p.out = nullptr;
    EXPECT_NE(th::check(p), "") << which;
  }
}

}  // namespace
