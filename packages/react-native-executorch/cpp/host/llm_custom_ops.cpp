// Host implementations of the two ExecuTorch LLM custom ops our XNNPACK exports use
// (tools/rne_tools/export/custom_ops.py): llama::update_cache.out and llama::custom_sdpa.out.
//
// Why here: the executorch wheel ships those kernels only inside a Python-side library (it
// links libtorch and the interpreter), so a standalone host binary has none. Device builds link
// ExecuTorch's own LLM kernels instead (tools/build_binaries.py), so this file is host-only.
// (The wheel's libcustom_ops_aot_lib.so does carry ExecuTorch's custom_sdpa, but it needs
// libtorch_python, i.e. a Python interpreter in the process: dlopen fails on PyType_GenericAlloc.)
// Caches are float32 or fp16 (the quantized exports' half-size KV cache); fp16 rows are widened
// to float32 as they are read, and scores, softmax and sums are float32 either way.
// Correctness is checked end to end: tests/test_cpp_runner.py compares this runner's greedy
// tokens and logits with the Python reference runner's (ExecuTorch's kernels), up to a
// 706-token context where the key spans run on the thread pool.
//
// Attention tasks (spans of keys, see attend) run on ExecuTorch's shared thread pool, the one
// XNNPACK runs on, so long contexts do not serialise on one core.
#include <executorch/runtime/core/function_ref.h>
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

// The wheel ships libexecutorch_threadpool but not its header; these are the functions of
// extension/threadpool/threadpool.h we call (the linker checks the mangled signatures).
namespace executorch::extension::threadpool {
class ThreadPool {
 public:
  size_t get_thread_count() const;
  void run(::executorch::runtime::FunctionRef<void(size_t)> fn, size_t range);
};
ThreadPool* get_threadpool();
}  // namespace executorch::extension::threadpool

namespace {

namespace rt = ::executorch::runtime;
using ::executorch::aten::Half;
using ::executorch::aten::ScalarType;
using ::executorch::aten::Tensor;

// Element offset of [0, i1, i2, i3] in a rank-4 tensor, honouring its strides.
inline size_t at(const Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  const auto s = t.strides();
  return static_cast<size_t>(i1 * s[1] + i2 * s[2] + i3 * s[3]);
}

// Dot product with independent partial sums, so the compiler can keep them in vector lanes
// (a single float accumulator may not be reordered), summed pairwise at the end: a left-to-right
// sum of the lanes is a chain of dependent adds that costs more than the products for short rows.
float dot_contiguous(const float* __restrict a, const float* __restrict b, int64_t n) {
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

bool fail(rt::KernelRuntimeContext& context, const char* op, const char* why) {
  ET_LOG(Error, "%s: %s", op, why);
  context.fail(rt::Error::InvalidArgument);
  return false;
}

// A [1, S, H, D] tensor of `dtype`, which is float32 or fp16.
bool check_rank4(rt::KernelRuntimeContext& context, const char* op, const Tensor& t,
                 ScalarType dtype) {
  if (t.dim() != 4 || t.size(0) != 1) return fail(context, op, "expected a [1, S, H, D] tensor");
  if (dtype != ScalarType::Float && dtype != ScalarType::Half) {
    return fail(context, op, "only float32 and fp16 are supported");
  }
  if (t.scalar_type() != dtype) {
    return fail(context, op, "query, key, value and cache must share one dtype");
  }
  return true;
}

// `n` elements of `src` as float32: the row itself for float32, else widened into `buffer`.
template <typename T>
const float* as_float(const T* src, int64_t n, std::vector<float>& buffer) {
  if constexpr (std::is_same_v<T, float>) {
    return src;
  } else {
    buffer.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) buffer[i] = static_cast<float>(src[i]);
    return buffer.data();
  }
}

// update_cache.out(Tensor value, Tensor(a!) cache, SymInt start_pos, *, Tensor(b!) out)
// Writes value[0, t] into cache[0, start_pos + t]; `out` is a placeholder the op must return.
void update_cache_out(rt::KernelRuntimeContext& context, rt::Span<rt::EValue*> stack) {
  constexpr const char* kOp = "llama::update_cache.out";
  const Tensor& value = stack[0]->toTensor();
  Tensor& cache = stack[1]->toTensor();
  const int64_t start = stack[2]->toInt();
  if (!check_rank4(context, kOp, value, cache.scalar_type()) ||
      !check_rank4(context, kOp, cache, cache.scalar_type())) {
    return;
  }
  const int64_t steps = value.size(1), heads = value.size(2), dim = value.size(3);
  if (cache.size(2) != heads || cache.size(3) != dim) {
    fail(context, kOp, "value and cache disagree on heads or head_dim");
    return;
  }
  if (start < 0 || start + steps > cache.size(1)) {
    fail(context, kOp, "start_pos + length exceeds the cache");
    return;
  }
  // Same dtype on both sides: rows are copied as bytes.
  const size_t element = value.element_size();
  const auto* src = static_cast<const char*>(value.const_data_ptr());
  auto* dst = static_cast<char*>(cache.mutable_data_ptr());
  for (int64_t t = 0; t < steps; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      if (value.strides()[3] == 1 && cache.strides()[3] == 1) {
        std::memcpy(dst + at(cache, start + t, h, 0) * element,
                    src + at(value, t, h, 0) * element, dim * element);
      } else {
        for (int64_t d = 0; d < dim; ++d) {
          std::memcpy(dst + at(cache, start + t, h, d) * element,
                      src + at(value, t, h, d) * element, element);
        }
      }
    }
  }
}

// y += alpha * x (vectorises).
inline void axpy(float* __restrict y, const float* __restrict x, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Attention of query [1, T, H, D] over the caches in element type T (float or Half); shapes
// and strides were checked by custom_sdpa_out.
//
// A task is one span of keys of every kv head: it reads the span's rows of the [S, Hkv, D]
// caches front to back (a task per kv head would read one row in Hkv while the hardware
// prefetcher streams the others' too), scores every query row against them (the T chunk
// positions of the query heads sharing each kv head, so a cached row is read once), and
// leaves per query row an unnormalised output with its max score and exp sum. The spans are
// then merged by rescaling to the common max. Spans, not heads, are what the threads share:
// a decode step has only T x Hkv rows (SmolLM2: 3) for 2+ threads.
template <typename T>
void attend(const Tensor& q, const Tensor& k, const Tensor& v, int64_t start, bool is_causal,
            float scale, Tensor& out) {
  const int64_t steps = q.size(1), heads = q.size(2), dim = q.size(3);
  const int64_t kv_heads = k.size(2);
  const int64_t group = heads / kv_heads;
  const int64_t rows = steps * group;  // query rows per kv head, position-major
  const int64_t num_keys = start + steps;
  // Causal: position start + t sees keys [0, start + t]; otherwise everything written so far.
  auto visible = [&](int64_t row) { return is_causal ? start + row / group + 1 : num_keys; };
  const T* qd = q.const_data_ptr<T>();
  const T* kd = k.const_data_ptr<T>();
  const T* vd = v.const_data_ptr<T>();
  T* od = out.mutable_data_ptr<T>();
  const auto qs = q.strides(), ks = k.strides(), vs = v.strides(), os = out.strides();

  // The query rows as float32: [kv head][row][dim].
  std::vector<float> queries(static_cast<size_t>(kv_heads * rows * dim));
  for (int64_t h = 0; h < kv_heads; ++h) {
    for (int64_t row = 0; row < rows; ++row) {
      const T* from = qd + (row / group) * qs[1] + (h * group + row % group) * qs[2];
      float* to = queries.data() + (h * rows + row) * dim;
      for (int64_t d = 0; d < dim; ++d) to[d] = static_cast<float>(from[d]);
    }
  }

  // Short contexts: the pool's hand-off would cost more than the rows themselves.
  constexpr int64_t kParallelMinKeyReads = 4096;
  // Fewest keys a span takes: below this, merging spans costs more than it parallelises.
  constexpr int64_t kMinSpanKeys = 64;
  auto* pool = ::executorch::extension::threadpool::get_threadpool();
  const bool parallel = pool != nullptr && heads * num_keys >= kParallelMinKeyReads;
  // Two spans per thread even out the causal chunk's uneven rows; one span when serial.
  int64_t spans = 1;
  if (parallel) {
    const int64_t threads = std::max<int64_t>(1, pool->get_thread_count());
    spans = std::max<int64_t>(1, std::min(2 * threads, ceil_div(num_keys, kMinSpanKeys)));
  }
  const int64_t span_len = ceil_div(num_keys, spans);
  spans = ceil_div(num_keys, span_len);

  // Per span, kv head and query row: the unnormalised output, then its max score and exp sum.
  const int64_t row_floats = dim + 2;
  const int64_t span_floats = kv_heads * rows * row_floats;
  std::vector<float> partial(static_cast<size_t>(spans * span_floats));

  auto task = [&](size_t index) {
    const int64_t span = static_cast<int64_t>(index);
    const int64_t first = span * span_len;
    const int64_t count = std::min(span_len, num_keys - first);
    // Per thread, reused across calls: no allocation per task. scores is [kv head][row][count].
    thread_local std::vector<float> scores, row_buffer;
    scores.resize(static_cast<size_t>(kv_heads * rows * count));
    // Keys of this span row `row` sees; it grows with the row (rows are position-major), so the
    // rows that see key j are a suffix, walked from the last.
    auto seen = [&](int64_t row) { return std::clamp<int64_t>(visible(row) - first, 0, count); };
    const int64_t last_seen = seen(rows - 1);  // the last row sees the most keys
    for (int64_t j = 0; j < last_seen; ++j) {
      for (int64_t h = 0; h < kv_heads; ++h) {
        const float* key = as_float(kd + (first + j) * ks[1] + h * ks[2], dim, row_buffer);
        for (int64_t row = rows - 1; row >= 0 && j < seen(row); --row) {
          scores[(h * rows + row) * count + j] =
              dot_contiguous(queries.data() + (h * rows + row) * dim, key, dim) * scale;
        }
      }
    }
    float* results = partial.data() + span * span_floats;
    for (int64_t h = 0; h < kv_heads; ++h) {
      for (int64_t row = 0; row < rows; ++row) {
        float* p = scores.data() + (h * rows + row) * count;
        float* result = results + (h * rows + row) * row_floats;
        const int64_t n = seen(row);
        const float max_score = n > 0 ? *std::max_element(p, p + n) : 0.0f;
        float total = 0.0f;
        for (int64_t j = 0; j < n; ++j) total += p[j] = std::exp(p[j] - max_score);
        std::fill(result, result + dim, 0.0f);
        result[dim] = max_score;
        result[dim + 1] = total;  // 0: the row sees none of this span
      }
    }
    for (int64_t j = 0; j < last_seen; ++j) {
      for (int64_t h = 0; h < kv_heads; ++h) {
        const float* value = as_float(vd + (first + j) * vs[1] + h * vs[2], dim, row_buffer);
        for (int64_t row = rows - 1; row >= 0 && j < seen(row); --row) {
          axpy(results + (h * rows + row) * row_floats, value,
               scores[(h * rows + row) * count + j], dim);
        }
      }
    }
  };
  if (parallel && spans > 1) {
    pool->run(task, static_cast<size_t>(spans));
  } else {
    for (int64_t span = 0; span < spans; ++span) task(static_cast<size_t>(span));
  }

  std::vector<float> merged(static_cast<size_t>(dim));
  for (int64_t h = 0; h < kv_heads; ++h) {
    for (int64_t row = 0; row < rows; ++row) {
      auto result = [&](int64_t span) {
        return partial.data() + span * span_floats + (h * rows + row) * row_floats;
      };
      float max_score = -std::numeric_limits<float>::infinity();
      for (int64_t span = 0; span < spans; ++span) {
        if (result(span)[dim + 1] > 0.0f) max_score = std::max(max_score, result(span)[dim]);
      }
      std::fill(merged.begin(), merged.end(), 0.0f);
      float total = 0.0f;
      for (int64_t span = 0; span < spans; ++span) {
        const float* r = result(span);
        if (r[dim + 1] > 0.0f) {
          const float weight = std::exp(r[dim] - max_score);
          total += weight * r[dim + 1];
          axpy(merged.data(), r, weight, dim);
        }
      }
      const float inv = total > 0.0f ? 1.0f / total : 0.0f;
      T* to = od + (row / group) * os[1] + (h * group + row % group) * os[2];
      for (int64_t d = 0; d < dim; ++d) to[d] = static_cast<T>(merged[d] * inv);
    }
  }
}

// custom_sdpa.out(Tensor query, Tensor key, Tensor value, SymInt start_pos, Tensor? attn_mask,
//                 float drpout_p, bool is_causal, float? scale, *, Tensor(a!) out)
// query [1, T, H, D] at positions start_pos..start_pos+T-1 attends over the caches
// key/value [1, S, Hkv, D] (grouped-query: head h reads kv head h / (H / Hkv)).
void custom_sdpa_out(rt::KernelRuntimeContext& context, rt::Span<rt::EValue*> stack) {
  constexpr const char* kOp = "llama::custom_sdpa.out";
  const Tensor& q = stack[0]->toTensor();
  const Tensor& k = stack[1]->toTensor();
  const Tensor& v = stack[2]->toTensor();
  const int64_t start = stack[3]->toInt();
  const bool has_mask = !stack[4]->isNone();
  const double dropout = stack[5]->toDouble();
  const bool is_causal = stack[6]->toBool();
  const bool has_scale = !stack[7]->isNone();
  Tensor& out = stack[8]->toTensor();
  const ScalarType dtype = q.scalar_type();
  if (!check_rank4(context, kOp, q, dtype) || !check_rank4(context, kOp, k, dtype) ||
      !check_rank4(context, kOp, v, dtype) || !check_rank4(context, kOp, out, dtype)) {
    return;
  }
  if (has_mask) {
    fail(context, kOp, "attn_mask is not supported by the host kernel");
    return;
  }
  if (dropout != 0.0) {
    fail(context, kOp, "dropout must be 0 at inference");
    return;
  }
  // `out` is planned at the upper bound of the dynamic T: give it the query's shape.
  if (rt::resize_tensor(out, q.sizes()) != rt::Error::Ok) {
    fail(context, kOp, "cannot resize out to the query's shape");
    return;
  }
  const int64_t steps = q.size(1), heads = q.size(2), dim = q.size(3);
  const int64_t kv_heads = k.size(2);
  if (k.size(3) != dim || v.size(3) != dim || v.size(2) != kv_heads || kv_heads == 0 ||
      heads % kv_heads != 0) {
    fail(context, kOp, "query, key, value and out shapes disagree");
    return;
  }
  if (start < 0 || start + steps > k.size(1)) {
    fail(context, kOp, "start_pos + length exceeds the cache");
    return;
  }
  const float scale = has_scale ? static_cast<float>(stack[7]->toDouble())
                                : 1.0f / std::sqrt(static_cast<float>(dim));
  const auto qs = q.strides(), ks = k.strides(), vs = v.strides(), os = out.strides();
  if (qs[3] != 1 || ks[3] != 1 || vs[3] != 1 || os[3] != 1) {
    fail(context, kOp, "head_dim must be the innermost, contiguous dimension");
    return;
  }
  if (dtype == ScalarType::Half) {
    attend<Half>(q, k, v, start, is_causal, scale, out);
  } else {
    attend<float>(q, k, v, start, is_causal, scale, out);
  }
}
// Registered when the binary starts (this object file is linked in whole, see CMakeLists.txt).
const bool registered = [] {
  static const rt::Kernel kernels[] = {
      rt::Kernel("llama::update_cache.out", update_cache_out),
      rt::Kernel("llama::custom_sdpa.out", custom_sdpa_out),
  };
  const auto error = rt::register_kernels({kernels, 2});
  if (error != rt::Error::Ok) ET_LOG(Error, "registering the host LLM custom ops failed");
  return error == rt::Error::Ok;
}();

}  // namespace
