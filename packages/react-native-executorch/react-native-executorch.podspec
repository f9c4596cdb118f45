# iOS pod of react-native-executorch: the RNExecutorch TurboModule (ios/), the JSI binding and the
# portable C++ core (cpp/), linked with ExecuTorch's static libraries (MLX, XNNPACK, kernels)
# from ExecuTorch.xcframework (fetched below, or staged by `tools/build_binaries.py --platform ios`).
# Not built in this repository's CI (no Xcode there).
require "json"

package = JSON.parse(File.read(File.join(__dir__, "package.json")))

# ExecuTorch's binaries (ExecuTorch.xcframework, mlx.metallib): scripts/fetch-binaries.js, run here
# at `pod install` (before the pod is integrated), downloads the artifact binaries.lock.json names
# for the chosen backend set, checks its sha256, unpacks it into the machine's cache and links it
# at third-party/ios. RNE_BINARIES_DIR (a staging of `tools/build_binaries.py --platform ios`)
# replaces the download; in this repository the staged ../../third-party/ios is used when built.
# The backend set: RNE_BINARIES_BACKENDS, else Podfile.properties.json's rneBinariesBackends (the
# Expo plugin's `backends` option), else "all". See docs/distribution.md.
fetch_env = {}
monorepo_staging = File.expand_path("../../third-party/ios", __dir__)
if ENV["RNE_BINARIES_DIR"].to_s.empty? && File.exist?(File.join(monorepo_staging, "ExecuTorch.xcframework"))
  fetch_env["RNE_BINARIES_DIR"] = monorepo_staging
end
if ENV["RNE_BINARIES_BACKENDS"].to_s.empty? && defined?(Pod::Config)
  properties_file = File.join(Pod::Config.instance.installation_root.to_s, "Podfile.properties.json")
  if File.exist?(properties_file)
    backends = JSON.parse(File.read(properties_file))["rneBinariesBackends"]
    fetch_env["RNE_BINARIES_BACKENDS"] = backends if backends
  end
end
fetched = system(fetch_env, ENV["NODE_BINARY"] || "node",
                 File.join(__dir__, "scripts", "fetch-binaries.js"), "ios", "--link", "third-party/ios")
if fetched.nil?
  raise "node is not on PATH: react-native-executorch runs scripts/fetch-binaries.js at `pod install` " \
        "to get its native binaries (set NODE_BINARY to node's path)."
elsif !fetched
  raise "react-native-executorch could not get ExecuTorch.xcframework: see the error above."
end
third_party_rel = "third-party/ios"

# stb_image.h, the image decoder of cpp/media, is not in this repository: the pinned upstream file
# (third-party/stb_image.lock.json) is downloaded, checked against its sha256 and patched by the
# CMake module the Android build includes, run here at `pod install` (CocoaPods runs no
# prepare_command for a :path pod, which is how React Native links this one). The header lands
# in ios/generated/stb/include. RNE_STB_IMAGE_URL in the environment replaces the URL (a mirror,
# or a file:// copy); the checksum still applies.
stb_work_dir = File.join(__dir__, "ios", "generated", "stb")
stb_ok = system("cmake", "-DRNE_STB_WORK_DIR=" + stb_work_dir, "-P",
                File.join(__dir__, "cpp", "cmake", "stb_image.cmake"))
if stb_ok.nil?
  raise "cmake is not on PATH: react-native-executorch needs CMake 3.21 or newer at `pod install` " \
        "to fetch stb_image.h (`brew install cmake`)."
elsif !stb_ok
  raise "stb_image.h could not be prepared for react-native-executorch: see the CMake error above."
end

Pod::Spec.new do |s|
  s.name         = "react-native-executorch"
  s.version      = package["version"]
  s.summary      = package["description"]
  s.license      = package["license"]
  s.authors      = "Software Mansion"
  s.homepage     = "https://github.com/software-mansion/react-native-executorch"
  s.source       = { :git => "https://github.com/software-mansion/react-native-executorch.git", :tag => "v#{s.version}" }
  s.platforms    = { :ios => "17.0" }  # MLX needs iOS 17 (the registry's min_platform)

  s.source_files = [
    "ios/**/*.{h,mm}",
    "cpp/base/include/**/*.h",
    "cpp/chat/include/**/*.h",
    "cpp/chat/src/**/*.{h,cpp}",
    "cpp/grammar/include/**/*.h",
    "cpp/grammar/src/**/*.{h,cpp}",
    "cpp/jsi/**/*.{h,cpp}",
    "cpp/json/include/**/*.h",
    "cpp/json/src/**/*.cpp",
    # The runner's own kernels (cpp/runner/src/kernels.cpp includes it by relative path).
    "cpp/kernels/executorch_threadpool.h",
    "cpp/kernels/tied_head.h",
    "cpp/media/include/**/*.h",
    "cpp/media/src/**/*.cpp",
    "cpp/runner/include/**/*.h",
    "cpp/runner/src/**/*.{h,cpp}",
    "cpp/seam/**/*.{h,cpp}",
    "cpp/tokenizer/include/**/*.h",
    "cpp/tokenizer/src/**/*.{h,cpp,inc}",
  ]
  # GoogleTest suites and the host-only tools (CLIs, benchmarks) must not be compiled into the app;
  # stb_image.h is reached through HEADER_SEARCH_PATHS only (as a pod header, the unpatched
  # download could shadow the patched copy).
  s.exclude_files = [
    "ios/generated/**/*",
    "cpp/jsi/tests/**/*",
    "cpp/grammar/tools/**/*",
    "cpp/json/tests/**/*",
    "cpp/media/tests/**/*",
    "cpp/media/tools/**/*",
    "cpp/runner/tools/**/*",
    "cpp/tokenizer/tests/**/*",
    "cpp/tokenizer/tools/**/*",
  ]
  s.private_header_files = "cpp/**/*.h"
  s.vendored_frameworks = "#{third_party_rel}/ExecuTorch.xcframework"
  # MLX's Metal kernels, loaded at runtime by the MLX delegate (absent from the "cpu" backend set).
  if File.exist?(File.join(__dir__, third_party_rel, "mlx.metallib"))
    s.resources = ["#{third_party_rel}/mlx.metallib"]
  end

  s.pod_target_xcconfig = {
    "CLANG_CXX_LANGUAGE_STANDARD" => "c++20",
    # ExecuTorch's headers include <c10/...> from its portable_type copy and need this define
    # to use the macros generated for that copy instead of a PyTorch checkout's.
    # RNE_WITH_MEDIA: the seam takes image and audio prompt parts (cpp/media is compiled in).
    "GCC_PREPROCESSOR_DEFINITIONS" => "$(inherited) C10_USING_CUSTOM_GENERATED_MACROS RNE_WITH_MEDIA=1",
    "HEADER_SEARCH_PATHS" => [
      "\"$(PODS_XCFRAMEWORKS_BUILD_DIR)/react-native-executorch/Headers/executorch/runtime/core/portable_type/c10\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/base/include\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/runner/include\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/grammar/include\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/json/include\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/chat/include\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/media/include\"",
      "\"$(PODS_TARGET_SRCROOT)/ios/generated/stb/include\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/tokenizer/include\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/seam\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/jsi\"",
    ].join(" "),
  }
  # ExecuTorch registers backends and kernels from static initializers: keep every object of
  # our merged libexecutorch.a (and only it: -all_load would also pull every object of every
  # other pod's archive into the app), or the linker drops them and nothing can run.
  s.user_target_xcconfig = {
    # CocoaPods copies the xcframework's slice for the SDK being built to this directory.
    "OTHER_LDFLAGS" =>
      "$(inherited) -force_load \"$(PODS_XCFRAMEWORKS_BUILD_DIR)/react-native-executorch/libexecutorch.a\"",
  }
  s.frameworks = ["Metal", "MetalPerformanceShaders", "Accelerate", "Foundation"]

  install_modules_dependencies(s)
end
