// JNI entry point of libreact-native-executorch.so: registers the native half of
// RNExecutorchModule, which hands React Native a BindingsInstallerHolder; React Native calls it
// on the JS thread with the runtime and the JS CallInvoker, and it installs the JSI binding.
#include <fbjni/fbjni.h>
#include <react/turbomodule/ReactCommon/BindingsInstallerHolder.h>

#include <string>

#include "rne_jsi.h"

namespace {

using facebook::react::BindingsInstallerHolder;
using facebook::react::CallInvoker;
namespace jni = facebook::jni;

struct JRNExecutorchModule : jni::JavaClass<JRNExecutorchModule> {
  static constexpr auto kJavaDescriptor = "Lcom/swmansion/rnexecutorch/RNExecutorchModule;";

  static jni::local_ref<BindingsInstallerHolder::javaobject> createBindingsInstaller(
      jni::alias_ref<jclass>, jboolean is_emulator, jint api_level) {
    rne::jsi::PlatformInfo platform{"android", is_emulator == JNI_TRUE, std::to_string(api_level)};
    return BindingsInstallerHolder::newObjectCxxArgs(
        [platform](facebook::jsi::Runtime& runtime, const std::shared_ptr<CallInvoker>& invoker) {
          rne::jsi::install(runtime, invoker, platform);
        });
  }

  static void registerNatives() {
    javaClassStatic()->registerNatives({
        makeNativeMethod("createBindingsInstaller", JRNExecutorchModule::createBindingsInstaller),
    });
  }
};

}  // namespace

JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM* vm, void*) {
  return jni::initialize(vm, [] { JRNExecutorchModule::registerNatives(); });
}
