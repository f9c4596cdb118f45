// ExecuTorch's shared thread pool (the one XNNPACK runs on), for our kernels in every build. The
// executorch wheel ships libexecutorch_threadpool but not its header, so these are the functions
// of extension/threadpool/threadpool.h we call, declared again (the linker checks the mangled
// signatures).
#pragma once

#include <executorch/runtime/core/function_ref.h>

#include <cstddef>

namespace executorch::extension::threadpool {
class ThreadPool {
 public:
  size_t get_thread_count() const;
  void run(::executorch::runtime::FunctionRef<void(size_t)> fn, size_t range);
};
ThreadPool* get_threadpool();
}  // namespace executorch::extension::threadpool
