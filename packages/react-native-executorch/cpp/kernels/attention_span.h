// Attention of a chunk of query rows (a decode step or a prefill chunk) over the first keys of
// a KV cache, by spans of keys: the one kernel behind `llama::custom_sdpa` in both builds that
// run it.
// - The host build compiles it into cpp/host/llm_custom_ops.cpp (the executorch wheel has no
//   such kernel outside its Python-side library).
// - The ExecuTorch source build (tools/build_binaries.py --platform linux) gets it from
//   third-party/patches/linux/0003-llm-attention-gqa-split-keys.patch, whose `Adds-File:` line
//   makes the patch series add this very file to ExecuTorch's tree
//   (tools/rne_tools/binaries/patches.py); op_sdpa.cpp calls it for causal, unmasked attention.
// So it includes no ExecuTorch or ATen header: callers pass pointers, strides and a way to run
// tasks on their thread pool.
//
// With grouped-query attention every cached key and value row serves the query heads sharing
// its kv head (SmolLM2: 9 query heads over 3 kv heads), so a task per query head would read
// each row once per head. Here a task is one span of keys of every kv head: it reads a
// contiguous stretch of the [S, Hkv, D] cache (a task per kv head would read one row in Hkv
// and leave the hardware prefetcher streaming the others' rows too). Keys are taken in tiles
// that stay in L1, widened to float32 once per tile (fp16), while every query row of the kv
// head (each chunk position of each query head sharing it) is scored against them and their
// values accumulated; the tile after next is prefetched (the cache does not fit in the last
// level cache beside the weights, and a decode step otherwise waited on memory). Each span
// leaves per query row an unnormalised output with its max score and exp sum; the spans are
// merged by rescaling to the common max. Row t of the chunk sees keys [0, start_pos + t].
// Scores, softmax and sums are float32.
//
// On x86-64 the tiles run in AVX2/FMA/F16C with a vector exp when the CPU has them (checked
// once at run time): ExecuTorch's library is compiled for baseline x86-64. The portable path
// is the one arm64 runs; RNE_SDPA_GENERIC in the environment forces it on any CPU, so an x86-64
// host can test it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RNE_ATTENTION_SPAN_AVX2 1
#endif

namespace rne::attention_span {

// Keys per tile: 32 rows of up to 512 floats stay in L1/L2 across the query rows.
constexpr int64_t kTileKeys = 32;
// How far ahead of the tile in use rows are prefetched.
constexpr int64_t kPrefetchKeys = 2 * kTileKeys;
// Fewest keys a span takes: below this, merging spans costs more than it parallelises.
constexpr int64_t kMinSpanKeys = 64;
// Short contexts run serially: the pool's hand-off would cost more than the rows themselves.
constexpr int64_t kParallelMinKeyReads = 4096;

// Element strides of a [batch, position, head, head_dim] tensor; head_dim is contiguous.
struct Strides {
  int64_t batch;
  int64_t position;
  int64_t head;
};

// One call. T is float or a 2-byte IEEE half type that converts to and from float.
template <typename T>
struct Problem {
  const T* q;  // [batch, positions, heads, head_dim]
  Strides q_strides;
  const T* k;  // the caches: [batch, >= num_keys, kv_heads, head_dim]
  Strides k_strides;
  const T* v;
  Strides v_strides;
  T* out;  // like q
  Strides out_strides;
  int64_t batch;
  int64_t positions;
  int64_t heads;
  int64_t kv_heads;  // divides heads: query head h reads kv head h / (heads / kv_heads)
  int64_t head_dim;
  int64_t start_pos;  // position of query row 0
  int64_t num_keys;   // keys the last row sees; at most the cache length
  bool causal;        // row t sees keys [0, start_pos + t]; else all num_keys
  float scale;
};

// How a call is cut into tasks: spans of keys per batch entry.
struct Split {
  int64_t spans;
  int64_t span_len;
  bool parallel;  // whether the tasks go to the thread pool
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Serial (one span) below kParallelMinKeyReads or without threads; otherwise two spans per
// thread, to even out the causal chunk's uneven rows, of at least kMinSpanKeys keys each.
template <typename T>
Split split(const Problem<T>& p, int64_t threads) {
  const bool parallel = threads > 1 && p.batch * p.heads * p.num_keys >= kParallelMinKeyReads;
  int64_t spans = 1;
  if (parallel) {
    spans = std::max<int64_t>(
        1, std::min(ceil_div(2 * threads, p.batch), ceil_div(p.num_keys, kMinSpanKeys)));
  }
  const int64_t span_len = ceil_div(p.num_keys, spans);
  return Split{ceil_div(p.num_keys, span_len), span_len, parallel};
}

// Score floats one task keeps (kv heads x query rows x span keys), for callers with a budget.
template <typename T>
int64_t task_scores(const Problem<T>& p, const Split& s) {
  return p.kv_heads * p.positions * (p.heads / p.kv_heads) * s.span_len;
}

namespace detail {

// One task: every kv head's `rows` query rows (position-major: row i is chunk position
// i / n_rep) against the span's keys [first, first + count). Writes, per kv head and row, the
// unnormalised output (head_dim floats), its max score and its exp sum into `out` (sum 0: the
// row sees none of this span).
template <typename T>
struct Task {
  const float* q;  // kv_heads x rows x head_dim, contiguous
  int64_t kv_heads;
  int64_t rows;
  int64_t n_rep;
  const T* k;  // key `first` of kv head 0
  int64_t k_head_stride;
  int64_t k_stride;  // between keys
  const T* v;
  int64_t v_head_stride;
  int64_t v_stride;
  int64_t first;
  int64_t count;
  int64_t limit0;  // keys chunk position 0 sees, absolute (causal), or all of them
  bool causal;
  int64_t head_dim;
  float scale;
  float* scores;  // kv_heads x rows x count, scratch
  float* tile;    // kTileKeys x head_dim, scratch for widened fp16 rows
  float* out;     // kv_heads x rows x (head_dim + 2)

  int64_t visible(int64_t row) const {
    const int64_t limit = causal ? limit0 + row / n_rep : limit0;
    return std::clamp<int64_t>(limit - first, 0, count);
  }
};

// Rows [t0, t1) of a kv head's keys or values as float32: in place for float, widened into
// `tile` (row stride head_dim) for fp16. Returns the first row and sets `stride`.
template <typename K, typename T>
inline const float* tile_rows(const T* src, int64_t src_stride, int64_t t0, int64_t t1,
                              int64_t head_dim, float* tile, int64_t& stride) {
  if constexpr (std::is_same_v<T, float>) {
    stride = src_stride;
    return src + t0 * src_stride;
  } else {
    for (int64_t t = t0; t < t1; ++t) {
      K::widen(src + t * src_stride, tile + (t - t0) * head_dim, head_dim);
    }
    stride = head_dim;
    return tile;
  }
}

// Asks for the cache lines of rows [t0, t0 + kTileKeys) (below `end`) ahead of their use: the
// rows of one kv head are strided through the cache, and the hardware prefetcher alone left a
// decode step at 2,000 cached tokens waiting on memory for most of its attention time.
template <typename T>
inline void prefetch_rows(const T* src, int64_t src_stride, int64_t t0, int64_t end,
                          int64_t head_dim) {
  constexpr int64_t kLine = 64;
  const int64_t t1 = std::min(t0 + kTileKeys, end);
  const int64_t bytes = head_dim * static_cast<int64_t>(sizeof(T));
  for (int64_t t = t0; t < t1; ++t) {
    const char* row = reinterpret_cast<const char*>(src + t * src_stride);
    for (int64_t b = 0; b < bytes; b += kLine) __builtin_prefetch(row + b);
  }
}

// The three steps of a task over float32 tiles, given the kernels that do the arithmetic
// (portable or AVX2): scores, softmax numerators, weighted values.
template <typename T, typename K>
void run_task(const Task<T>& s, K kernels) {
  const int64_t d_len = s.head_dim;
  const int64_t row_floats = d_len + 2;
  const int64_t seen = s.visible(s.rows - 1);  // the last row sees the most keys
  auto scores_of = [&](int64_t h, int64_t r) { return s.scores + (h * s.rows + r) * s.count; };
  auto out_of = [&](int64_t h, int64_t r) { return s.out + (h * s.rows + r) * row_floats; };
  // Each head's rows of `src` one tile of keys at a time (prefetched, converted to float32
  // once), handed to `visit(h, r, tile, stride, t0, n)` for every row r that sees n > 0 of them.
  auto over_tiles = [&](const T* src, int64_t head_stride, int64_t src_stride, auto&& visit) {
    for (int64_t t0 = 0; t0 < seen; t0 += kTileKeys) {
      const int64_t t_end = std::min(t0 + kTileKeys, seen);
      for (int64_t h = 0; h < s.kv_heads; ++h) {
        prefetch_rows(src + h * head_stride, src_stride, t0 + kPrefetchKeys, seen, d_len);
        int64_t stride = 0;
        const float* tile =
            tile_rows<K>(src + h * head_stride, src_stride, t0, t_end, d_len, s.tile, stride);
        for (int64_t r = 0; r < s.rows; ++r) {
          const int64_t t1 = std::min(t_end, s.visible(r));
          if (t1 > t0) visit(h, r, tile, stride, t0, t1 - t0);
        }
      }
    }
  };
  over_tiles(s.k, s.k_head_stride, s.k_stride,
             [&](int64_t h, int64_t r, const float* keys, int64_t stride, int64_t t0, int64_t n) {
               kernels.scores(s.q + (h * s.rows + r) * d_len, keys, stride, n, d_len, s.scale,
                              scores_of(h, r) + t0);
             });
  for (int64_t h = 0; h < s.kv_heads; ++h) {
    for (int64_t r = 0; r < s.rows; ++r) {
      float* row = out_of(h, r);
      std::fill(row, row + d_len, 0.0f);
      const int64_t n = s.visible(r);
      float max = -std::numeric_limits<float>::infinity();
      float sum = 0.0f;
      if (n > 0) kernels.softmax_numerators(scores_of(h, r), n, max, sum);
      row[d_len] = max;
      row[d_len + 1] = sum;
    }
  }
  over_tiles(s.v, s.v_head_stride, s.v_stride,
             [&](int64_t h, int64_t r, const float* values, int64_t stride, int64_t t0, int64_t n) {
               kernels.weighted_values(out_of(h, r), values, stride, scores_of(h, r) + t0, n,
                                       d_len);
             });
}

// y += alpha * x (vectorises).
inline void axpy(float* __restrict y, const float* __restrict x, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// The portable kernels: plain loops the compiler vectorises (NEON on arm64).
struct GenericKernels {
  template <typename T>
  static void widen(const T* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  }

  // Independent partial sums per lane, so the compiler can keep them in vector registers (one
  // float accumulator may not be reordered), summed pairwise at the end.
  static float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
    constexpr int64_t kLanes = 16;
    float lanes[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes) {
      for (int64_t j = 0; j < kLanes; ++j) lanes[j] += a[i + j] * b[i + j];
    }
    for (int64_t width = kLanes / 2; width > 0; width /= 2) {
      for (int64_t j = 0; j < width; ++j) lanes[j] += lanes[j + width];
    }
    float sum = lanes[0];
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
  }

  static void scores(const float* q, const float* keys, int64_t stride, int64_t n, int64_t d_len,
                     float scale, float* out) {
    for (int64_t t = 0; t < n; ++t) out[t] = scale * dot(q, keys + t * stride, d_len);
  }

  // Scores -> exp(score - max) in place; returns their max and the sum of the exps.
  static void softmax_numerators(float* scores, int64_t n, float& max, float& sum) {
    max = *std::max_element(scores, scores + n);
    sum = 0.0f;
    for (int64_t t = 0; t < n; ++t) sum += scores[t] = std::exp(scores[t] - max);
  }

  static void weighted_values(float* row, const float* values, int64_t stride, const float* p,
                              int64_t n, int64_t d_len) {
    for (int64_t t = 0; t < n; ++t) axpy(row, values + t * stride, p[t], d_len);
  }
};

#ifdef RNE_ATTENTION_SPAN_AVX2
#define RNE_AVX2 __attribute__((target("avx2,fma,f16c")))

RNE_AVX2 inline float hsum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

RNE_AVX2 inline float hmax(__m256 v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  x = _mm_max_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

// The sums of eight vectors' lanes, as one vector: lane j = sum of a[j]'s lanes.
RNE_AVX2 inline __m256 hsum8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]);
  const __m256 t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]);
  const __m256 t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1);  // low lanes' sums of a0..a3 | high lanes'
  const __m256 u1 = _mm256_hadd_ps(t2, t3);  // the same for a4..a7
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// exp(x) for x <= 0 (scores minus their max): x = n ln2 + f with n = round(x / ln2) and
// |f| <= ln2 / 2 (ln2 in two parts, so n ln2 is exact), exp(f) by its degree-6 Taylor
// polynomial (relative error < 2e-7 there), times 2^n built in the exponent bits. Inputs
// below -87 give exp(-87) ~ 1.6e-38, nothing next to the max term's 1.
RNE_AVX2 inline __m256 exp_nonpositive(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504089f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 f = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  f = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), f);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  const __m256i pow2n =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2n));
}

// head_dim a multiple of 8.
struct Avx2Kernels {
  template <typename T>
  RNE_AVX2 static void widen(const T* src, float* dst, int64_t n) {
    static_assert(sizeof(T) == 2, "an IEEE half type");
    for (int64_t i = 0; i < n; i += 8) {
      _mm256_storeu_ps(dst + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    }
  }

  // Eight keys at a time: eight independent FMA chains, summed across lanes together.
  RNE_AVX2 static void scores(const float* q, const float* keys, int64_t stride, int64_t n,
                              int64_t d_len, float scale, float* out) {
    const __m256 sc = _mm256_set1_ps(scale);
    int64_t t = 0;
    for (; t + 8 <= n; t += 8) {
      const float* k = keys + t * stride;
      __m256 acc[8];
      for (int j = 0; j < 8; ++j) acc[j] = _mm256_setzero_ps();
      for (int64_t d = 0; d < d_len; d += 8) {
        const __m256 qd = _mm256_loadu_ps(q + d);
        for (int j = 0; j < 8; ++j) {
          acc[j] = _mm256_fmadd_ps(qd, _mm256_loadu_ps(k + j * stride + d), acc[j]);
        }
      }
      _mm256_storeu_ps(out + t, _mm256_mul_ps(sc, hsum8(acc)));
    }
    for (; t < n; ++t) {
      const float* k = keys + t * stride;
      __m256 acc = _mm256_setzero_ps();
      for (int64_t d = 0; d < d_len; d += 8) {
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), acc);
      }
      out[t] = scale * hsum(acc);
    }
  }

  RNE_AVX2 static void softmax_numerators(float* sc, int64_t n, float& max, float& sum) {
    int64_t t = 0;
    max = -std::numeric_limits<float>::infinity();
    if (n >= 8) {
      __m256 m = _mm256_loadu_ps(sc);
      for (t = 8; t + 8 <= n; t += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(sc + t));
      max = hmax(m);
    }
    for (; t < n; ++t) max = std::max(max, sc[t]);
    const __m256 m = _mm256_set1_ps(max);
    __m256 acc = _mm256_setzero_ps();
    for (t = 0; t + 8 <= n; t += 8) {
      const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(sc + t), m));
      _mm256_storeu_ps(sc + t, e);
      acc = _mm256_add_ps(acc, e);
    }
    sum = hsum(acc);
    for (; t < n; ++t) {
      sc[t] = std::exp(sc[t] - max);
      sum += sc[t];
    }
  }

  // 64 output floats held in registers across the tile's keys.
  RNE_AVX2 static void weighted_values(float* row, const float* values, int64_t stride,
                                       const float* p, int64_t n, int64_t d_len) {
    int64_t d = 0;
    for (; d + 64 <= d_len; d += 64) {
      __m256 o[8];
      for (int j = 0; j < 8; ++j) o[j] = _mm256_loadu_ps(row + d + 8 * j);
      for (int64_t t = 0; t < n; ++t) {
        const float* v = values + t * stride + d;
        const __m256 w = _mm256_set1_ps(p[t]);
        for (int j = 0; j < 8; ++j) o[j] = _mm256_fmadd_ps(_mm256_loadu_ps(v + 8 * j), w, o[j]);
      }
      for (int j = 0; j < 8; ++j) _mm256_storeu_ps(row + d + 8 * j, o[j]);
    }
    for (; d < d_len; d += 8) {
      __m256 o0 = _mm256_loadu_ps(row + d);
      for (int64_t t = 0; t < n; ++t) {
        o0 = _mm256_fmadd_ps(_mm256_loadu_ps(values + t * stride + d), _mm256_set1_ps(p[t]), o0);
      }
      _mm256_storeu_ps(row + d, o0);
    }
  }
};

#undef RNE_AVX2

// RNE_SDPA_GENERIC set in the environment takes the portable path on any CPU.
inline bool cpu_has_avx2_fma_f16c() {
  static const bool yes = std::getenv("RNE_SDPA_GENERIC") == nullptr &&
                          __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("f16c");
  return yes;
}
#endif

template <typename T>
void run(const Task<T>& s) {
#ifdef RNE_ATTENTION_SPAN_AVX2
  if (s.head_dim % 8 == 0 && cpu_has_avx2_fma_f16c()) {
    run_task(s, Avx2Kernels{});
    return;
  }
#endif
  run_task(s, GenericKernels{});
}

}  // namespace detail

// Computes `p` cut as `split` says. `run_tasks(count, task)` calls task(i) once for each i in
// [0, count), in any order and on any threads (the caller's pool); it is only used when
// split.parallel. Per-thread scratch is thread_local and kept between calls.
template <typename T, typename RunTasks>
void attend(const Problem<T>& p, const Split& split, RunTasks&& run_tasks) {
  const int64_t n_rep = p.heads / p.kv_heads;
  const int64_t rows = p.positions * n_rep;  // query rows per kv head, position-major
  const int64_t d_len = p.head_dim;

  // The query rows of each (batch, kv head) in float32.
  std::vector<float> q_rows(static_cast<size_t>(p.batch * p.kv_heads * rows * d_len));
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.kv_heads; ++h) {
      for (int64_t row = 0; row < rows; ++row) {
        const T* src = p.q + b * p.q_strides.batch + (row / n_rep) * p.q_strides.position +
                       (h * n_rep + row % n_rep) * p.q_strides.head;
        float* dst = q_rows.data() + ((b * p.kv_heads + h) * rows + row) * d_len;
        for (int64_t d = 0; d < d_len; ++d) dst[d] = static_cast<float>(src[d]);
      }
    }
  }

  const int64_t spans = split.spans;
  const int64_t row_floats = d_len + 2;
  const int64_t task_floats = p.kv_heads * rows * row_floats;
  const int64_t tasks = p.batch * spans;
  std::vector<float> partial(static_cast<size_t>(tasks * task_floats));
  auto task = [&](int64_t index) {
    const int64_t b = index / spans;
    const int64_t first = (index % spans) * split.span_len;
    const int64_t count = std::min(split.span_len, p.num_keys - first);
    thread_local std::vector<float> scores, tile;
    scores.resize(static_cast<size_t>(p.kv_heads * rows * count));
    tile.resize(static_cast<size_t>(kTileKeys * d_len));
    detail::run(detail::Task<T>{
        q_rows.data() + b * p.kv_heads * rows * d_len, p.kv_heads, rows, n_rep,
        p.k + b * p.k_strides.batch + first * p.k_strides.position, p.k_strides.head,
        p.k_strides.position, p.v + b * p.v_strides.batch + first * p.v_strides.position,
        p.v_strides.head, p.v_strides.position, first, count,
        p.causal ? p.start_pos + 1 : p.num_keys, p.causal, d_len, p.scale, scores.data(),
        tile.data(), partial.data() + index * task_floats});
  };
  if (split.parallel && tasks > 1) {
    run_tasks(static_cast<size_t>(tasks), [&](size_t index) { task(static_cast<int64_t>(index)); });
  } else {
    for (int64_t index = 0; index < tasks; ++index) task(index);
  }

  // Merge the spans of each (batch, kv head, query row).
  std::vector<float> merged(static_cast<size_t>(d_len));
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.kv_heads; ++h) {
      for (int64_t row = 0; row < rows; ++row) {
        auto span_row = [&](int64_t span) {
          return partial.data() + (b * spans + span) * task_floats + (h * rows + row) * row_floats;
        };
        float max = -std::numeric_limits<float>::infinity();
        for (int64_t s = 0; s < spans; ++s) {
          if (span_row(s)[d_len + 1] > 0.0f) max = std::max(max, span_row(s)[d_len]);
        }
        std::fill(merged.begin(), merged.end(), 0.0f);
        float total = 0.0f;
        for (int64_t s = 0; s < spans; ++s) {
          const float* r = span_row(s);
          if (r[d_len + 1] > 0.0f) {
            const float weight = std::exp(r[d_len] - max);
            total += weight * r[d_len + 1];
            detail::axpy(merged.data(), r, weight, d_len);
          }
        }
        const float inv = total > 0.0f ? 1.0f / total : 0.0f;
        T* dst = p.out + b * p.out_strides.batch + (row / n_rep) * p.out_strides.position +
                 (h * n_rep + row % n_rep) * p.out_strides.head;
        for (int64_t d = 0; d < d_len; ++d) dst[d] = static_cast<T>(merged[d] * inv);
      }
    }
  }
}

}  // namespace rne::attention_span
