// `globalThis.__RNExecutorch`: the JSI host of the native seam. The behaviour lives in SeamCore
// (seam_core.h); this class converts JSI values and delivers the core's worker-thread results
// and streamed tokens on the JS thread through the CallInvoker (so every JS value is created,
// used and destroyed on the JS thread).
#pragma once

#include <jsi/jsi.h>

#include <memory>
#include <vector>

#include "rne_jsi.h"
#include "seam_core.h"

namespace rne::jsi {

class ExecutorchHostObject : public facebook::jsi::HostObject {
 public:
  ExecutorchHostObject(std::shared_ptr<facebook::react::CallInvoker> js_invoker,
                       PlatformInfo platform);

  facebook::jsi::Value get(facebook::jsi::Runtime& rt,
                           const facebook::jsi::PropNameID& name) override;
  std::vector<facebook::jsi::PropNameID> getPropertyNames(facebook::jsi::Runtime& rt) override;

 private:
  // Every JS method's signature: (runtime, arguments, their count) -> result.
  using JsMethod = facebook::jsi::Value(facebook::jsi::Runtime& rt,
                                        const facebook::jsi::Value* args, size_t count);
  JsMethod availableBackends, platformInfo, checkMemory, loadLLM, generate, interrupt, reset,
      stats, renderChatTemplate, countTokens, maxContextLength, release, saveSession,
      loadSession, createSession;
  // loadLLM / createSession's promise of a handle; `start` calls the core with the completion.
  facebook::jsi::Value handlePromise(
      facebook::jsi::Runtime& rt,
      const std::function<seam::Result<void>(seam::SeamCore::LoadDone)>& start);
  // saveSession / loadSession's promise; `start` calls the core with the completion.
  facebook::jsi::Value sessionPromise(
      facebook::jsi::Runtime& rt,
      const std::function<seam::Result<void>(seam::SeamCore::SessionDone)>& start);

  std::shared_ptr<facebook::react::CallInvoker> js_invoker_;
  std::shared_ptr<seam::SeamCore> core_;
};

}  // namespace rne::jsi
