// The output head of an LLM whose head is tied to its 4-bit quantized embedding table: logits for
// every vocabulary row from the hidden state, read straight from the table in ExecuTorch's
// `quantized_decomposed::embedding_4bit` layout, so the model ships one copy of the table.
// It includes no ExecuTorch or ATen header: callers pass pointers and a way to run tasks on their
// thread pool.
//
// The table (Gemma 4 E2B: 262144 rows of 1536) is ~210 MB, read once per decode step, so the
// kernel is meant to be bound by memory bandwidth: the arithmetic per byte has to stay below what
// one core streams. Hence the activations are quantized to int8 once per call (per block of 32,
// symmetric, scale amax / 127, round half to even; the op's definition, which the Python
// reference shares), and each block's product with a table row is an exact int32 dot product of
// nibbles and int8s, scaled and summed in float32 per block.
//
// Table layout: byte j of a row holds element 2j in its high nibble and 2j + 1 in its low one,
// value nibble - 8, times the row's scale of its group. Each activation block is stored with its
// even elements first and its odd ones after, the order the nibbles come out of a split of 16
// bytes; two consecutive blocks A and B are interleaved as [A even, B even, A odd, B odd] so that
// one 32-byte load of the table (the pair) lines up with two 32-byte activation vectors.
//
// A verify call (speculative decoding) asks for the logits of several positions. The table is
// still read once, but unpacking its nibbles and the dot products then cost as much as the read
// itself, so the vector paths unpack each table row once and dot it with up to kMaxPositions
// positions' activations while it is in registers.
//
// Paths: on x86-64 AVX2/FMA/F16C when the CPU has them (checked once at run time: ExecuTorch's
// library is compiled for baseline x86-64); on arm64 NEON, with the dot-product instructions when
// the compiler targets them; a portable scalar path elsewhere. RNE_TIED_HEAD_GENERIC in the
// environment forces the portable path on any CPU, so an x86-64 host can test it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RNE_TIED_HEAD_AVX2 1
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define RNE_TIED_HEAD_NEON 1
#endif

// Unrolls the loops over a tile's rows, so their accumulators live in registers (GCC at -O2
// leaves them in memory otherwise).
#if defined(__clang__)
#define RNE_TIED_HEAD_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define RNE_TIED_HEAD_UNROLL _Pragma("GCC unroll 8")
#else
#define RNE_TIED_HEAD_UNROLL
#endif

namespace rne::tied_head {

struct Problem {
  const float* x;  // [rows, dim]
  int64_t rows;
  int64_t dim;            // multiple of 32
  const uint8_t* packed;  // [vocab, dim / 2]
  const void* scales;     // [vocab, dim / group], float32 or fp16 bits
  bool scales_fp16;
  int64_t group;  // multiple of 32, divides dim
  int64_t vocab;
  float* out;  // [rows, vocab]
};

// Elements per activation block.
constexpr int64_t kBlock = 32;
// Fewest vocabulary rows a task takes: fewer, and the pool's hand-off costs more than the rows.
constexpr int64_t kMinTaskRows = 4096;
// Tasks per thread, so threads that finish early (or start late) take over the slack.
constexpr int64_t kTasksPerThread = 4;

// Returns an empty string if the problem is well-formed, else a message saying what is wrong.
inline std::string check(const Problem& p) {
  if (p.x == nullptr || p.packed == nullptr || p.scales == nullptr || p.out == nullptr) {
    return "tied_head: null pointer among x, packed, scales, out";
  }
  if (p.rows < 1 || p.vocab < 1) return "tied_head: rows and vocab must be positive";
  if (p.dim < kBlock || p.dim % kBlock != 0) {
    return "tied_head: dim " + std::to_string(p.dim) + " is not a positive multiple of 32";
  }
  if (p.group < kBlock || p.group % kBlock != 0) {
    return "tied_head: group " + std::to_string(p.group) + " is not a positive multiple of 32";
  }
  if (p.dim % p.group != 0) {
    return "tied_head: group " + std::to_string(p.group) + " does not divide dim " +
           std::to_string(p.dim);
  }
  return "";
}

// Tasks the vocabulary is split into for `threads` threads (>= 1).
inline int64_t tasks(const Problem& p, int64_t threads) {
  if (threads <= 1) return 1;
  const int64_t by_size = std::max<int64_t>(1, p.vocab / kMinTaskRows);
  return std::max<int64_t>(1, std::min(kTasksPerThread * threads, by_size));
}

namespace detail {

enum class Path { kPortable, kAvx2, kNeon };

// The quantized activations of every row of x, in the pair-interleaved order above.
struct Activations {
  int64_t blocks;            // per row: dim / 32
  std::vector<int8_t> q;     // [rows, blocks * 32]
  std::vector<float> scale;  // [rows, blocks]
  std::vector<int32_t> sum;  // [rows, blocks]: sum of the block's q, for the nibbles' -8
  // Per pair of blocks, for the AVX2 path. Its dot products come as eight int32 lanes, four
  // per block: pair_scale is [sA x4, sB x4]. Before that, as sixteen int16 lanes of four
  // products each: pair_bias is 8 times the sum of each lane's four q, so subtracting it makes
  // every lane an exact partial sum of q * (nibble - 8). (Subtracting 8 * sum q from one lane
  // instead would leave it to cancel against the others only after scaling, in float, losing a
  // small logit next to a large block scale.)
  std::vector<float> pair_scale;   // [rows, blocks / 2, 8]
  std::vector<int16_t> pair_bias;  // [rows, blocks / 2, 16]

  // Offsets of block b's even and odd elements within its row's q.
  int64_t even(int64_t b) const {
    return b < (blocks & ~int64_t{1}) ? (b & ~int64_t{1}) * kBlock + (b & 1) * 16 : b * kBlock;
  }
  int64_t odd(int64_t b) const {
    return even(b) + (b < (blocks & ~int64_t{1}) ? 32 : 16);
  }
};

inline Activations quantize(const Problem& p) {
  Activations a;
  a.blocks = p.dim / kBlock;
  const int64_t pairs = a.blocks / 2;
  a.q.resize(static_cast<size_t>(p.rows * p.dim));
  a.scale.resize(static_cast<size_t>(p.rows * a.blocks));
  a.sum.resize(static_cast<size_t>(p.rows * a.blocks));
  a.pair_scale.resize(static_cast<size_t>(p.rows * pairs * 8));
  a.pair_bias.resize(static_cast<size_t>(p.rows * pairs * 16));
  for (int64_t t = 0; t < p.rows; ++t) {
    int8_t* q = a.q.data() + t * p.dim;
    for (int64_t b = 0; b < a.blocks; ++b) {
      const float* x = p.x + t * p.dim + b * kBlock;
      float amax = 0.0f;
      for (int64_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
      const float s = amax / 127.0f;
      int32_t sum = 0;
      for (int64_t i = 0; i < kBlock; ++i) {
        int32_t v = 0;
        if (s != 0.0f) {
          v = static_cast<int32_t>(std::clamp(std::nearbyint(x[i] / s), -127.0f, 127.0f));
        }
        q[(i % 2 == 0 ? a.even(b) : a.odd(b)) + i / 2] = static_cast<int8_t>(v);
        sum += v;
      }
      a.scale[t * a.blocks + b] = s;
      a.sum[t * a.blocks + b] = sum;
    }
    for (int64_t k = 0; k < pairs; ++k) {
      float* scale = a.pair_scale.data() + (t * pairs + k) * 8;
      for (int j = 0; j < 8; ++j) scale[j] = a.scale[t * a.blocks + 2 * k + j / 4];
      const int8_t* even = q + k * 64;
      const int8_t* odd = even + 32;
      int16_t* bias = a.pair_bias.data() + (t * pairs + k) * 16;
      for (int j = 0; j < 16; ++j) {
        bias[j] = static_cast<int16_t>(
            8 * (even[2 * j] + even[2 * j + 1] + odd[2 * j] + odd[2 * j + 1]));
      }
    }
  }
  return a;
}

// IEEE half bits to float, for CPUs without a conversion instruction.
inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t bits = 0;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | (mantissa << 13);  // inf, nan
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {
    // Subnormal: shift the leading one up to the implicit bit.
    uint32_t e = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mantissa & 0x3FFu) << 13);
  } else {
    bits = sign;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// How far ahead of the rows in use a task asks for the table's cache lines (the hardware
// prefetcher stops at 4 KB pages). On an x86-64 host the AVX2 path streamed ~4 GB/s from DRAM
// without it and up to the ~7 GB/s of a plain read of the table with it; the gain varied with
// the host's load, and was never a loss.
constexpr int64_t kPrefetchBytes = 16384;
constexpr int64_t kCacheLine = 64;

inline int64_t prefetch_distance(const Problem& p) {
  return std::max<int64_t>(1, kPrefetchBytes / (p.dim / 2));
}

// Asks for the packed bytes of vocabulary rows [first, first + count), below `end`. (The scales,
// a far smaller stream, showed no gain from it.)
inline void prefetch_rows(const Problem& p, int64_t first, int64_t count, int64_t end) {
  const int64_t last = std::min(first + count, end);
  if (first >= last) return;
  const int64_t row_bytes = p.dim / 2;
  const uint8_t* bytes = p.packed + first * row_bytes;
  for (int64_t i = 0; i < (last - first) * row_bytes; i += kCacheLine) {
    __builtin_prefetch(bytes + i);
  }
}

// What one task needs besides its range of vocabulary rows.
struct Job {
  const Problem* p;
  const Activations* a;
};

// Activation rows (positions: a verify call's tokens) that the vector paths dot with each table
// row while its blocks are unpacked, so verifying k tokens unpacks the table once, not k times.
constexpr int64_t kMaxPositions = 8;

// Positions in the next group when `remaining` are left: the fewest groups of at most
// kMaxPositions, near-equal in size (9 goes as 5 and 4, not 8 and 1).
inline int64_t position_group(int64_t remaining) {
  const int64_t groups = (remaining + kMaxPositions - 1) / kMaxPositions;
  return (remaining + groups - 1) / groups;
}

// Calls f(std::integral_constant<int, n>) for n in [1, kMaxPositions]: a tile's positions are
// a compile-time count, so their accumulators live in registers.
template <typename F>
void with_positions(int64_t n, F&& f) {
  static_assert(kMaxPositions == 8, "one case per count below");
  switch (n) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    case 7: return f(std::integral_constant<int, 7>{});
    default: return f(std::integral_constant<int, 8>{});
  }
}

// Vocabulary rows [v0, v1) of every position through a vector path's tile, called as
// tile(rows, positions, v, t) with both counts as std::integral_constant. One position goes in
// tiles of kRows vocabulary rows. Several go one vocabulary row at a time, its blocks shared by
// up to kMaxPositions activation rows (more rows per tile measured slower: the accumulators no
// longer fit in the sixteen AVX2 registers).
template <int kRows, typename Tile>
inline void rows_through(const Job& job, int64_t v0, int64_t v1, Tile&& tile) {
  using One = std::integral_constant<int, 1>;
  const int64_t rows = job.p->rows;
  const int64_t ahead = prefetch_distance(*job.p);
  int64_t v = v0;
  if (rows == 1) {
    for (; v + kRows <= v1; v += kRows) {
      prefetch_rows(*job.p, v + ahead, kRows, v1);
      tile(std::integral_constant<int, kRows>{}, One{}, v, 0);
    }
    for (; v < v1; ++v) tile(One{}, One{}, v, 0);
    return;
  }
  for (; v < v1; ++v) {
    prefetch_rows(*job.p, v + ahead, 1, v1);
    for (int64_t t = 0; t < rows;) {
      const int64_t n = position_group(rows - t);
      with_positions(n, [&](auto positions) { tile(One{}, positions, v, t); });
      t += n;
    }
  }
}

// ---- Portable path -------------------------------------------------------------------------

inline float portable_scale(const Problem& p, int64_t v, int64_t g, int64_t groups) {
  const int64_t i = v * groups + g;
  if (p.scales_fp16) return half_to_float(static_cast<const uint16_t*>(p.scales)[i]);
  return static_cast<const float*>(p.scales)[i];
}

inline void portable_rows(const Job& job, int64_t v0, int64_t v1) {
  const Problem& p = *job.p;
  const Activations& a = *job.a;
  const int64_t groups = p.dim / p.group;
  const int64_t group_blocks = p.group / kBlock;
  for (int64_t v = v0; v < v1; ++v) {
    const uint8_t* row = p.packed + v * (p.dim / 2);
    for (int64_t t = 0; t < p.rows; ++t) {
      const int8_t* q = a.q.data() + t * p.dim;
      const float* s = a.scale.data() + t * a.blocks;
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        float group_acc = 0.0f;
        for (int64_t b = g * group_blocks; b < (g + 1) * group_blocks; ++b) {
          const uint8_t* w = row + b * 16;
          const int8_t* even = q + a.even(b);
          const int8_t* odd = q + a.odd(b);
          int32_t dot = 0;
          for (int j = 0; j < 16; ++j) {
            dot += ((w[j] >> 4) - 8) * even[j] + ((w[j] & 0xF) - 8) * odd[j];
          }
          group_acc += s[b] * static_cast<float>(dot);
        }
        acc += portable_scale(p, v, g, groups) * group_acc;
      }
      p.out[t * p.vocab + v] = acc;
    }
  }
}

// ---- AVX2 path -----------------------------------------------------------------------------

#ifdef RNE_TIED_HEAD_AVX2
#define RNE_AVX2 __attribute__((target("avx2,fma,f16c")))

// Vocabulary rows per inner iteration: they share the activation loads.
constexpr int kAvx2Rows = 4;

RNE_AVX2 inline float avx2_hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

template <bool kHalf>
RNE_AVX2 inline float avx2_scale(const void* scales, int64_t i) {
  if constexpr (kHalf) {
    return _cvtsh_ss(static_cast<const uint16_t*>(scales)[i]);
  } else {
    return static_cast<const float*>(scales)[i];
  }
}

// The table scales of blocks [b, b + 8) of a row (b a multiple of 8) whose scales start at
// index `row` and whose groups are `group_blocks` blocks long.
template <bool kHalf>
RNE_AVX2 inline __m256 avx2_block_scales8(const void* scales, int64_t row, int64_t b,
                                          int64_t group_blocks) {
  const uint16_t* half = static_cast<const uint16_t*>(scales) + row;
  const float* single = static_cast<const float*>(scales) + row;
  if (group_blocks == 1) {
    if constexpr (kHalf) {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(half + b)));
    } else {
      return _mm256_loadu_ps(single + b);
    }
  }
  if (group_blocks % 8 == 0) {
    return _mm256_set1_ps(avx2_scale<kHalf>(scales, row + b / group_blocks));
  }
  if (group_blocks == 2 || group_blocks == 4) {
    // Four or two scales, each repeated over its blocks' lanes.
    const int64_t g = b / group_blocks;
    __m128 few;
    __m256i spread;
    if (group_blocks == 2) {
      if constexpr (kHalf) {
        few = _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(half + g)));
      } else {
        few = _mm_loadu_ps(single + g);
      }
      spread = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    } else {
      if constexpr (kHalf) {
        int32_t bits;
        std::memcpy(&bits, half + g, sizeof bits);
        few = _mm_cvtph_ps(_mm_cvtsi32_si128(bits));
      } else {
        few = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(single + g)));
      }
      spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    }
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(few), spread);
  }
  // Group sizes that do not tile eight blocks evenly (96, 160, ... elements): one at a time.
  alignas(32) float each[8];
  for (int j = 0; j < 8; ++j) each[j] = avx2_scale<kHalf>(scales, row + (b + j) / group_blocks);
  return _mm256_load_ps(each);
}

// A pair of table blocks (32 bytes at w) as unsigned nibbles: the high ones (even elements)
// and the low ones (odd elements).
RNE_AVX2 inline void avx2_unpack(const uint8_t* w, __m256i& hi, __m256i& lo) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
  lo = _mm256_and_si256(bytes, low4);
  hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
}

// The dot products of an unpacked pair of table blocks with the activations at q (pair layout:
// 32 even, then 32 odd elements), as eight exact int32 partial sums, four per block, the -8
// included via `bias`.
RNE_AVX2 inline __m256i avx2_pair_dot(__m256i hi, __m256i lo, const int8_t* q,
                                      const int16_t* bias) {
  const __m256i even = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  const __m256i odd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32));
  // Unsigned nibbles times int8s: a 16-bit lane holds at most 4 * 15 * 127, no saturation, and
  // after the bias at most 4 * 8 * 127.
  const __m256i sum16 = _mm256_sub_epi16(
      _mm256_add_epi16(_mm256_maddubs_epi16(hi, even), _mm256_maddubs_epi16(lo, odd)),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias)));
  return _mm256_madd_epi16(sum16, _mm256_set1_epi16(1));
}

// The exact int32 dot product of one table block (16 bytes at w) with its activations.
RNE_AVX2 inline int32_t avx2_block_dot(const uint8_t* w, const int8_t* even, const int8_t* odd,
                                       int32_t sum) {
  const __m128i low4 = _mm_set1_epi8(0x0F);
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w));
  const __m128i lo = _mm_and_si128(bytes, low4);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low4);
  const __m128i sum16 = _mm_add_epi16(
      _mm_maddubs_epi16(hi, _mm_loadu_si128(reinterpret_cast<const __m128i*>(even))),
      _mm_maddubs_epi16(lo, _mm_loadu_si128(reinterpret_cast<const __m128i*>(odd))));
  __m128i s = _mm_madd_epi16(sum16, _mm_set1_epi16(1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s) - 8 * sum;
}

// Logits of vocabulary rows [v, v + R) for activation rows [t0, t0 + T). Each pair of table
// blocks is loaded and unpacked once and dotted with all T rows' activations, so verifying T
// positions does the unpacking once rather than T times. Pairs go four at a time: the eight
// blocks' table scales are loaded once (with one row, multiplied by its activation scales there
// too) and each pair picks its two lanes; the pairs after the last eight blocks, and an
// unpaired last block, go one by one.
template <int R, int T, bool kHalf>
RNE_AVX2 void avx2_tile(const Job& job, int64_t v, int64_t t0) {
  const Problem& p = *job.p;
  const Activations& a = *job.a;
  const int64_t row_bytes = p.dim / 2;
  const int64_t groups = p.dim / p.group;
  const int64_t group_blocks = p.group / kBlock;
  const int64_t pairs = a.blocks / 2;
  const int8_t* q[T];
  const float* block_scale[T];
  const float* pair_scale[T];
  const int16_t* pair_bias[T];
  RNE_TIED_HEAD_UNROLL
  for (int t = 0; t < T; ++t) {
    q[t] = a.q.data() + (t0 + t) * p.dim;
    block_scale[t] = a.scale.data() + (t0 + t) * a.blocks;
    pair_scale[t] = a.pair_scale.data() + (t0 + t) * pairs * 8;
    pair_bias[t] = a.pair_bias.data() + (t0 + t) * pairs * 16;
  }
  const uint8_t* w[R];
  int64_t scale_row[R];
  __m256 acc[R][T];
  RNE_TIED_HEAD_UNROLL
  for (int r = 0; r < R; ++r) {
    w[r] = p.packed + (v + r) * row_bytes;
    scale_row[r] = (v + r) * groups;
    RNE_TIED_HEAD_UNROLL
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }

  int64_t k = 0;
  for (; k + 4 <= pairs; k += 4) {
    __m256 sw[R];
    RNE_TIED_HEAD_UNROLL
    for (int r = 0; r < R; ++r) {
      sw[r] = avx2_block_scales8<kHalf>(p.scales, scale_row[r], 2 * k, group_blocks);
      if constexpr (T == 1) sw[r] = _mm256_mul_ps(_mm256_loadu_ps(block_scale[0] + 2 * k), sw[r]);
    }
    RNE_TIED_HEAD_UNROLL
    for (int j = 0; j < 4; ++j) {
      const __m256i pick =
          _mm256_setr_epi32(2 * j, 2 * j, 2 * j, 2 * j, 2 * j + 1, 2 * j + 1, 2 * j + 1, 2 * j + 1);
      const int64_t pair = k + j;
      RNE_TIED_HEAD_UNROLL
      for (int r = 0; r < R; ++r) {
        __m256i hi, lo;
        avx2_unpack(w[r] + pair * 32, hi, lo);
        const __m256 ws = _mm256_permutevar8x32_ps(sw[r], pick);
        RNE_TIED_HEAD_UNROLL
        for (int t = 0; t < T; ++t) {
          const __m256i dot = avx2_pair_dot(hi, lo, q[t] + pair * 64, pair_bias[t] + pair * 16);
          const __m256 s =
              T == 1 ? ws : _mm256_mul_ps(ws, _mm256_loadu_ps(pair_scale[t] + pair * 8));
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), s, acc[r][t]);
        }
      }
    }
  }
  for (; k < pairs; ++k) {
    const int64_t g0 = (2 * k) / group_blocks;
    const int64_t g1 = (2 * k + 1) / group_blocks;
    RNE_TIED_HEAD_UNROLL
    for (int r = 0; r < R; ++r) {
      __m256i hi, lo;
      avx2_unpack(w[r] + k * 32, hi, lo);
      const __m256 ws =
          _mm256_set_m128(_mm_set1_ps(avx2_scale<kHalf>(p.scales, scale_row[r] + g1)),
                          _mm_set1_ps(avx2_scale<kHalf>(p.scales, scale_row[r] + g0)));
      RNE_TIED_HEAD_UNROLL
      for (int t = 0; t < T; ++t) {
        const __m256i dot = avx2_pair_dot(hi, lo, q[t] + k * 64, pair_bias[t] + k * 16);
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot),
                                    _mm256_mul_ps(_mm256_loadu_ps(pair_scale[t] + k * 8), ws),
                                    acc[r][t]);
      }
    }
  }
  float tail[R][T] = {};
  if (a.blocks % 2 != 0) {
    const int64_t b = a.blocks - 1;
    RNE_TIED_HEAD_UNROLL
    for (int r = 0; r < R; ++r) {
      const float ws = avx2_scale<kHalf>(p.scales, scale_row[r] + b / group_blocks);
      RNE_TIED_HEAD_UNROLL
      for (int t = 0; t < T; ++t) {
        const int32_t dot = avx2_block_dot(w[r] + b * 16, q[t] + a.even(b), q[t] + a.odd(b),
                                           a.sum[(t0 + t) * a.blocks + b]);
        tail[r][t] = block_scale[t][b] * ws * static_cast<float>(dot);
      }
    }
  }
  RNE_TIED_HEAD_UNROLL
  for (int r = 0; r < R; ++r) {
    RNE_TIED_HEAD_UNROLL
    for (int t = 0; t < T; ++t) {
      p.out[(t0 + t) * p.vocab + v + r] = avx2_hsum(acc[r][t]) + tail[r][t];
    }
  }
}

template <bool kHalf>
RNE_AVX2 void avx2_rows_of(const Job& job, int64_t v0, int64_t v1) {
  rows_through<kAvx2Rows>(job, v0, v1, [&](auto r, auto positions, int64_t v, int64_t t) {
    avx2_tile<decltype(r)::value, decltype(positions)::value, kHalf>(job, v, t);
  });
}

inline void avx2_rows(const Job& job, int64_t v0, int64_t v1) {
  job.p->scales_fp16 ? avx2_rows_of<true>(job, v0, v1) : avx2_rows_of<false>(job, v0, v1);
}

#undef RNE_AVX2

inline bool cpu_has_avx2_fma_f16c() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
  return yes;
}
#endif  // RNE_TIED_HEAD_AVX2

// ---- NEON path -----------------------------------------------------------------------------

#ifdef RNE_TIED_HEAD_NEON
constexpr int kNeonRows = 2;

template <bool kHalf>
inline float neon_scale(const void* scales, int64_t i) {
  if constexpr (kHalf) {
    __fp16 h;
    std::memcpy(&h, static_cast<const uint16_t*>(scales) + i, sizeof h);
    return static_cast<float>(h);
  } else {
    return static_cast<const float*>(scales)[i];
  }
}

// One table block (16 bytes at w) as its elements times 16, in int8s: the even ones in `hi`, the
// odd ones in `lo`. XOR 0x88 turns each nibble n into the 4-bit two's complement of n - 8;
// masking the high nibble in place and shifting the low one up gives both as 16 * (n - 8) in an
// int8: three instructions where shifting down and subtracting 8 from each takes four.
inline void neon_unpack(const uint8_t* w, int8x16_t& hi, int8x16_t& lo) {
  const int8x16_t c = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(w), vdupq_n_u8(0x88)));
  hi = vandq_s8(c, vdupq_n_s8(static_cast<int8_t>(0xF0)));
  lo = vshlq_n_s8(c, 4);
}

// The dot product of an unpacked table block with its activations, times 16, as four int32
// lanes.
inline int32x4_t neon_block_dot16(int8x16_t hi, int8x16_t lo, int8x16_t even, int8x16_t odd) {
#ifdef __ARM_FEATURE_DOTPROD
  return vdotq_s32(vdotq_s32(vdupq_n_s32(0), hi, even), lo, odd);
#else
  // |16 (n - 8)| <= 128 and |q| <= 127: two products sum to at most 32512, within int16.
  int16x8_t low = vmull_s8(vget_low_s8(hi), vget_low_s8(even));
  low = vmlal_s8(low, vget_low_s8(lo), vget_low_s8(odd));
  int16x8_t high = vmull_high_s8(hi, even);
  high = vmlal_high_s8(high, lo, odd);
  return vpadalq_s16(vpaddlq_s16(low), high);
#endif
}

// Logits of vocabulary rows [v, v + R) for activation rows [t0, t0 + T): each table block is
// unpacked once and dotted with all T rows' activations.
template <int R, int T, bool kHalf>
void neon_tile(const Job& job, int64_t v, int64_t t0) {
  const Problem& p = *job.p;
  const Activations& a = *job.a;
  const int64_t row_bytes = p.dim / 2;
  const int64_t groups = p.dim / p.group;
  const int64_t group_blocks = p.group / kBlock;
  const int8_t* q[T];
  const float* s[T];
  RNE_TIED_HEAD_UNROLL
  for (int t = 0; t < T; ++t) {
    q[t] = a.q.data() + (t0 + t) * p.dim;
    s[t] = a.scale.data() + (t0 + t) * a.blocks;
  }
  const uint8_t* w[R];
  float32x4_t acc[R][T];
  RNE_TIED_HEAD_UNROLL
  for (int r = 0; r < R; ++r) {
    w[r] = p.packed + (v + r) * row_bytes;
    RNE_TIED_HEAD_UNROLL
    for (int t = 0; t < T; ++t) acc[r][t] = vdupq_n_f32(0.0f);
  }
  for (int64_t g = 0; g < groups; ++g) {
    float32x4_t group_acc[R][T];
    RNE_TIED_HEAD_UNROLL
    for (int r = 0; r < R; ++r) {
      RNE_TIED_HEAD_UNROLL
      for (int t = 0; t < T; ++t) group_acc[r][t] = vdupq_n_f32(0.0f);
    }
    for (int64_t b = g * group_blocks; b < (g + 1) * group_blocks; ++b) {
      int8x16_t hi[R], lo[R];
      RNE_TIED_HEAD_UNROLL
      for (int r = 0; r < R; ++r) neon_unpack(w[r] + b * 16, hi[r], lo[r]);
      RNE_TIED_HEAD_UNROLL
      for (int t = 0; t < T; ++t) {
        const int8x16_t even = vld1q_s8(q[t] + a.even(b));
        const int8x16_t odd = vld1q_s8(q[t] + a.odd(b));
        RNE_TIED_HEAD_UNROLL
        for (int r = 0; r < R; ++r) {
          // The fixed-point conversion divides by the 16 exactly.
          const float32x4_t dot = vcvtq_n_f32_s32(neon_block_dot16(hi[r], lo[r], even, odd), 4);
          group_acc[r][t] = vfmaq_n_f32(group_acc[r][t], dot, s[t][b]);
        }
      }
    }
    RNE_TIED_HEAD_UNROLL
    for (int r = 0; r < R; ++r) {
      const float ws = neon_scale<kHalf>(p.scales, (v + r) * groups + g);
      RNE_TIED_HEAD_UNROLL
      for (int t = 0; t < T; ++t) acc[r][t] = vfmaq_n_f32(acc[r][t], group_acc[r][t], ws);
    }
  }
  RNE_TIED_HEAD_UNROLL
  for (int r = 0; r < R; ++r) {
    RNE_TIED_HEAD_UNROLL
    for (int t = 0; t < T; ++t) p.out[(t0 + t) * p.vocab + v + r] = vaddvq_f32(acc[r][t]);
  }
}

template <bool kHalf>
void neon_rows_of(const Job& job, int64_t v0, int64_t v1) {
  rows_through<kNeonRows>(job, v0, v1, [&](auto r, auto positions, int64_t v, int64_t t) {
    neon_tile<decltype(r)::value, decltype(positions)::value, kHalf>(job, v, t);
  });
}

inline void neon_rows(const Job& job, int64_t v0, int64_t v1) {
  job.p->scales_fp16 ? neon_rows_of<true>(job, v0, v1) : neon_rows_of<false>(job, v0, v1);
}
#endif  // RNE_TIED_HEAD_NEON

// ---- Dispatch ------------------------------------------------------------------------------

// The fastest path this CPU runs.
inline Path native_path() {
#if defined(RNE_TIED_HEAD_AVX2)
  return cpu_has_avx2_fma_f16c() ? Path::kAvx2 : Path::kPortable;
#elif defined(RNE_TIED_HEAD_NEON)
  return Path::kNeon;
#else
  return Path::kPortable;
#endif
}

// The path `compute` takes: the native one unless RNE_TIED_HEAD_GENERIC is set.
inline Path selected_path() {
  static const Path path =
      std::getenv("RNE_TIED_HEAD_GENERIC") != nullptr ? Path::kPortable : native_path();
  return path;
}

inline void rows_on(Path path, const Job& job, int64_t v0, int64_t v1) {
  switch (path) {
#ifdef RNE_TIED_HEAD_AVX2
    case Path::kAvx2:
      avx2_rows(job, v0, v1);
      return;
#endif
#ifdef RNE_TIED_HEAD_NEON
    case Path::kNeon:
      neon_rows(job, v0, v1);
      return;
#endif
    default:
      portable_rows(job, v0, v1);
      return;
  }
}

// `compute` on a given path; one this CPU lacks falls back to the portable one. Task i takes
// a contiguous range of vocabulary rows, a multiple of the widest tile long.
template <typename Run>
void compute_on(Path path, const Problem& p, int64_t task_count, Run&& run) {
  if (path == Path::kAvx2 || path == Path::kNeon) {
    if (path != native_path()) path = Path::kPortable;
  }
  const Activations a = quantize(p);
  const Job job{&p, &a};
  constexpr int64_t kAlign = 8;
  const int64_t count = std::max<int64_t>(1, task_count);
  const int64_t per_task = (p.vocab + count - 1) / count;
  const int64_t span = (per_task + kAlign - 1) / kAlign * kAlign;
  const int64_t used = (p.vocab + span - 1) / span;
  if (used == 1) {
    rows_on(path, job, 0, p.vocab);
    return;
  }
  run(static_cast<size_t>(used), [&](size_t i) {
    const int64_t v0 = static_cast<int64_t>(i) * span;
    rows_on(path, job, v0, std::min(p.vocab, v0 + span));
  });
}

}  // namespace detail

// Runs the problem (which must pass `check`). `run(count, task)` runs task(i) for i in
// [0, count), possibly in parallel (a thread pool's parallel-for). Scratch for the quantized
// activations is allocated here.
template <typename Run>
void compute(const Problem& p, int64_t task_count, Run&& run) {
  detail::compute_on(detail::selected_path(), p, task_count, std::forward<Run>(run));
}

}  // namespace rne::tied_head

#undef RNE_TIED_HEAD_UNROLL
