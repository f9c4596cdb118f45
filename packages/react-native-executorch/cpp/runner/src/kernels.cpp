// rne::tied_head_4bit.out (tools/rne_tools/export/tied_head.py): the logits of a head tied to
// the model's packed 4-bit token table, computed by cpp/kernels/tied_head.h on ExecuTorch's
// shared thread pool (the one XNNPACK runs on).
#include "rne/runner/kernels.h"

#include <executorch/runtime/kernel/kernel_includes.h>
#include <executorch/runtime/kernel/operator_registry.h>

#include <string>

#include "../../kernels/executorch_threadpool.h"
#include "../../kernels/tied_head.h"

namespace rne::runner {
namespace {

namespace rt = ::executorch::runtime;
using ::executorch::aten::ScalarType;
using ::executorch::aten::Tensor;

void fail(rt::KernelRuntimeContext& context, const std::string& why) {
  ET_LOG(Error, "rne::tied_head_4bit.out: %s", why.c_str());
  context.fail(rt::Error::InvalidArgument);
}

// tied_head_4bit.out(Tensor x, Tensor packed, Tensor scales, *, Tensor(a!) out)
// x [..., D] float32; packed uint8 [V, D/2]; scales [V, D/group] float32 or fp16;
// out [..., V] float32.
void tied_head_4bit_out(rt::KernelRuntimeContext& context, rt::Span<rt::EValue*> stack) {
  const Tensor& x = stack[0]->toTensor();
  const Tensor& packed = stack[1]->toTensor();
  const Tensor& scales = stack[2]->toTensor();
  Tensor& out = stack[3]->toTensor();
  if (x.scalar_type() != ScalarType::Float || out.scalar_type() != ScalarType::Float) {
    return fail(context, "x and out must be float32");
  }
  if (packed.scalar_type() != ScalarType::Byte || packed.dim() != 2 || scales.dim() != 2) {
    return fail(context, "packed must be uint8 [V, D/2] and scales [V, D/group]");
  }
  const bool fp16 = scales.scalar_type() == ScalarType::Half;
  if (!fp16 && scales.scalar_type() != ScalarType::Float) {
    return fail(context, "scales must be float32 or fp16");
  }
  if (x.dim() < 1 || x.dim() > static_cast<int64_t>(rt::kTensorDimensionLimit)) {
    return fail(context, "x must have a width dimension");
  }
  const int64_t dim = x.size(x.dim() - 1);
  const int64_t vocab = packed.size(0);
  if (dim != 2 * packed.size(1) || scales.size(0) != vocab || scales.size(1) == 0 ||
      dim % scales.size(1) != 0) {
    return fail(context, "x, packed and scales disagree on the width or the rows");
  }
  // `out` is planned at the upper bound of x's dynamic dims: give it x's leading dims.
  ::executorch::aten::SizesType sizes[rt::kTensorDimensionLimit];
  for (int64_t d = 0; d + 1 < x.dim(); ++d) sizes[d] = x.size(d);
  sizes[x.dim() - 1] = static_cast<::executorch::aten::SizesType>(vocab);
  const ::executorch::aten::ArrayRef<::executorch::aten::SizesType> out_sizes(
      sizes, static_cast<size_t>(x.dim()));
  if (rt::resize_tensor(out, out_sizes) != rt::Error::Ok) {
    return fail(context, "cannot resize out to [..., V]");
  }
  const tied_head::Problem problem{x.const_data_ptr<float>(),
                                   x.numel() / dim,
                                   dim,
                                   packed.const_data_ptr<uint8_t>(),
                                   scales.const_data_ptr(),
                                   fp16,
                                   dim / scales.size(1),
                                   vocab,
                                   out.mutable_data_ptr<float>()};
  if (const std::string problem_error = tied_head::check(problem); !problem_error.empty()) {
    return fail(context, problem_error);
  }
  auto* pool = ::executorch::extension::threadpool::get_threadpool();
  const int64_t threads = pool == nullptr ? 1 : static_cast<int64_t>(pool->get_thread_count());
  tied_head::compute(problem, tied_head::tasks(problem, threads),
                     [pool](size_t count, auto&& task) {
                       if (pool == nullptr) {
                         for (size_t i = 0; i < count; ++i) task(i);
                       } else {
                         pool->run(task, count);
                       }
                     });
}

}  // namespace

bool register_kernels() {
  static const bool registered = [] {
    static const rt::Kernel kernels[] = {
        rt::Kernel("rne::tied_head_4bit.out", tied_head_4bit_out),
    };
    const auto error = rt::register_kernels({kernels, 1});
    if (error != rt::Error::Ok) ET_LOG(Error, "registering the runner's kernels failed");
    return error == rt::Error::Ok;
  }();
  return registered;
}

}  // namespace rne::runner

// For processes that load our programs through ExecuTorch's Python runtime (the exporter's
// checks): they dlopen the library built from this file and call this.
extern "C" __attribute__((visibility("default"))) bool rne_register_kernels() {
  return rne::runner::register_kernels();
}
