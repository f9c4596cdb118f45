// Host implementations of the two ExecuTorch LLM custom ops our XNNPACK exports use
// (tools/rne_tools/export/custom_ops.py): llama::update_cache.out and llama::custom_sdpa.out.
//
// Why here: the executorch wheel ships those kernels only inside a Python-side library (it
// links libtorch and the interpreter), so a standalone host binary has none. Device builds link
// ExecuTorch's own LLM kernels instead (tools/build_binaries.py), so this file is host-only.
// (The wheel's libcustom_ops_aot_lib.so does carry ExecuTorch's custom_sdpa, but it needs
// libtorch_python, i.e. a Python interpreter in the process: dlopen fails on PyType_GenericAlloc.)
// Caches are float32 or fp16 (the quantized exports' half-size KV cache).
//
// The attention itself is cpp/kernels/attention_span.h, the same source the ExecuTorch source
// build's custom_sdpa runs (third-party/patches/linux/0003); its tasks (spans of keys) run on
// ExecuTorch's shared thread pool, the one XNNPACK runs on, so long contexts do not serialise on
// one core. Correctness is checked end to end: tests/runner/test_cpp_runner.py compares this runner's
// greedy tokens and logits with the Python reference runner's (ExecuTorch's kernels), up to a
// 706-token context where the key spans run on the thread pool.
#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <cmath>
#include <cstring>

#include "attention_span.h"
#include "executorch_threadpool.h"

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

namespace span = ::rne::attention_span;

span::Strides strides_of(const Tensor& t) {
  return span::Strides{t.strides()[0], t.strides()[1], t.strides()[2]};
}

// Attention of query [1, T, H, D] at positions start..start+T-1 over the caches in element
// type T (float or Half); shapes and strides were checked by custom_sdpa_out.
template <typename T>
void attend(const Tensor& q, const Tensor& k, const Tensor& v, int64_t start, bool is_causal,
            float scale, Tensor& out) {
  const int64_t steps = q.size(1);
  const span::Problem<T> problem{
      q.const_data_ptr<T>(), strides_of(q), k.const_data_ptr<T>(), strides_of(k),
      v.const_data_ptr<T>(), strides_of(v), out.mutable_data_ptr<T>(), strides_of(out),
      /*batch=*/1, steps, q.size(2), k.size(2), q.size(3), start,
      /*num_keys=*/start + steps, is_causal, scale};
  auto* pool = ::executorch::extension::threadpool::get_threadpool();
  const int64_t threads = pool == nullptr ? 1 : static_cast<int64_t>(pool->get_thread_count());
  span::attend(problem, span::split(problem, threads),
               [pool](size_t count, auto&& task) { pool->run(task, count); });
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
  if (q.strides()[3] != 1 || k.strides()[3] != 1 || v.strides()[3] != 1 ||
      out.strides()[3] != 1) {
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
