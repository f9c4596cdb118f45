// The RNExecutorch TurboModule: installs the JSI binding (cpp/jsi) when React Native creates it.
#import <Foundation/Foundation.h>
#import <RNExecutorchSpec/RNExecutorchSpec.h>
#import <ReactCommon/RCTTurboModuleWithJSIBindings.h>

@interface RNExecutorch : NSObject <NativeRNExecutorchSpec, RCTTurboModuleWithJSIBindings>
@end
