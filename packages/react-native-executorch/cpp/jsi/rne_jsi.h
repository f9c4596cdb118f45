// The React Native binding of the runner: installs `globalThis.__RNExecutorch`, the object the
// TypeScript seam (src/native/seam.ts, interface NativeExecutorch) describes. The only file set
// of cpp/ that includes JSI; the platform glue (ios/, android/) calls install() once per runtime.
#pragma once

#include <memory>
#include <string>

#include "platform_info.h"

namespace facebook::jsi {
class Runtime;
}
namespace facebook::react {
class CallInvoker;
}

namespace rne::jsi {

using PlatformInfo = seam::PlatformInfo;

// Installs the binding on `runtime` (call on the JS thread). `js_invoker` schedules work on the
// JS thread: results and streamed tokens are delivered through it.
void install(facebook::jsi::Runtime& runtime,
             std::shared_ptr<facebook::react::CallInvoker> js_invoker, PlatformInfo platform);

}  // namespace rne::jsi
