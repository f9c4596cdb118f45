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
  facebook::jsi::Value availableBackends(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                                         size_t count);
  facebook::jsi::Value platformInfo(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                                    size_t count);
  facebook::jsi::Value checkMemory(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                                   size_t count);
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
  facebook::jsi::Value renderChatTemplate(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                                          size_t count);
  facebook::jsi::Value countTokens(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                                   size_t count);
  facebook::jsi::Value maxContextLength(facebook::jsi::Runtime& rt,
                                        const facebook::jsi::Value* args, size_t count);
  facebook::jsi::Value release(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                               size_t count);
  facebook::jsi::Value saveSession(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                                   size_t count);
  facebook::jsi::Value loadSession(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                                   size_t count);
  facebook::jsi::Value createSession(facebook::jsi::Runtime& rt, const facebook::jsi::Value* args,
                                     size_t count);
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
