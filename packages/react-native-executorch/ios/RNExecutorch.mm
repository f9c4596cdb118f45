#import "RNExecutorch.h"

#import <TargetConditionals.h>
#import <UIKit/UIKit.h>

#include "rne_jsi.h"

@implementation RNExecutorch

RCT_EXPORT_MODULE(RNExecutorch)

// React Native calls this on the JS thread before JS receives the module.
- (void)installJSIBindingsWithRuntime:(facebook::jsi::Runtime &)runtime
                          callInvoker:(const std::shared_ptr<facebook::react::CallInvoker> &)callInvoker
{
  rne::jsi::PlatformInfo platform{
      "ios",
      TARGET_OS_SIMULATOR != 0,  // MLX cannot run on the simulator's Metal
      std::string(UIDevice.currentDevice.systemVersion.UTF8String),
  };
  rne::jsi::install(runtime, callInvoker, platform);
}

// The bindings are installed by the time JS can call this.
- (NSNumber *)install
{
  return @YES;
}

- (std::shared_ptr<facebook::react::TurboModule>)getTurboModule:
    (const facebook::react::ObjCTurboModule::InitParams &)params
{
  return std::make_shared<facebook::react::NativeRNExecutorchSpecJSI>(params);
}

@end
