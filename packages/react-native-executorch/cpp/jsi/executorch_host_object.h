// `globalThis.__RNExecutorch`: the JSI host object behind the TypeScript seam. Every method is
// called on the JS thread; loads and generations run on one WorkQueue thread and report back
// through the CallInvoker (so every JS value is created, used and destroyed on the JS thread).
#pragma once

#include <jsi/jsi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rne/runner/llm_runner.h"
#include "rne_jsi.h"
#include "work_queue.h"

namespace rne::jsi {

// One loaded model. `runner` and `conversation` are used on the worker thread only.
struct LoadedModel {
  std::unique_ptr<runner::LlmRunner> runner;
  // Token ids in the KV cache (+ the last generated one, which the runner feeds next time):
  // lets generate() prefill only what extends the previous conversation.
  std::vector<int64_t> conversation;
  std::atomic<bool> running{false};
  // Set by interrupt(), cleared by generate() on the JS thread: an interrupt that arrives
  // before the queued generation starts (when the runner would clear its own flag) still stops it.
  std::atomic<bool> stop_requested{false};
  std::mutex stats_mutex;
  std::optional<runner::Stats> last_stats;  // guarded by stats_mutex
};

class ExecutorchHostObject : public facebook::jsi::HostObject,
                             public std::enable_shared_from_this<ExecutorchHostObject> {
 public:
  ExecutorchHostObject(std::shared_ptr<facebook::react::CallInvoker> js_invoker,
                       PlatformInfo platform);
  ~ExecutorchHostObject() override;

  facebook::jsi::Value get(facebook::jsi::Runtime& rt,
                           const facebook::jsi::PropNameID& name) override;
  std::vector<facebook::jsi::PropNameID> getPropertyNames(facebook::jsi::Runtime& rt) override;

 private:
  facebook::jsi::Value availableBackends(facebook::jsi::Runtime& rt);
  facebook::jsi::Value platformInfo(facebook::jsi::Runtime& rt);
  facebook::jsi::Value loadLLM(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                               size_t count);
  facebook::jsi::Value generate(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                                size_t count);
  facebook::jsi::Value interrupt(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                                 size_t count);
  facebook::jsi::Value reset(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                             size_t count);
  facebook::jsi::Value stats(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                             size_t count);
  facebook::jsi::Value release(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                               size_t count);

  // The model behind args[0]; throws a JS Error (code invalid_argument) for an unknown handle.
  std::shared_ptr<LoadedModel> model(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                                     size_t count);

  std::shared_ptr<facebook::react::CallInvoker> js_invoker_;
  PlatformInfo platform_;
  std::unordered_map<int64_t, std::shared_ptr<LoadedModel>> models_;  // JS thread only
  int64_t next_handle_ = 1;
  std::unique_ptr<WorkQueue> worker_;  // destroyed first: its tasks use the models
};

}  // namespace rne::jsi
