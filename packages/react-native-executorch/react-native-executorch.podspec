# iOS pod of react-native-executorch: the RNExecutorch TurboModule (ios/), the JSI binding and the
# portable C++ core (cpp/), linked with ExecuTorch's static libraries (MLX, XNNPACK, kernels)
# from ExecuTorch.xcframework, staged by `tools/build_binaries.py --platform ios`.
# Not built in this repository's CI (no Xcode there).
require "json"

package = JSON.parse(File.read(File.join(__dir__, "package.json")))

# The binaries live at the monorepo root; a published package carries them in its own folder.
third_party = ["third-party/ios", "../../third-party/ios"]
  .map { |p| File.join(__dir__, p) }
  .find { |p| File.exist?(File.join(p, "ExecuTorch.xcframework")) }
if third_party.nil?
  raise "ExecuTorch.xcframework is missing: run `python tools/build_binaries.py --platform ios` " \
        "on a Mac with Xcode (it stages third-party/ios/)."
end
third_party_rel = Pathname.new(third_party).relative_path_from(Pathname.new(__dir__)).to_s

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
    "cpp/jsi/**/*.{h,cpp}",
    "cpp/runner/include/**/*.h",
    "cpp/runner/src/**/*.{h,cpp}",
    "cpp/tokenizer/include/**/*.h",
    "cpp/tokenizer/src/**/*.{h,cpp,inc}",
  ]
  s.private_header_files = "cpp/**/*.h"
  s.vendored_frameworks = "#{third_party_rel}/ExecuTorch.xcframework"
  # MLX's Metal kernels, loaded at runtime by the MLX delegate.
  s.resources = ["#{third_party_rel}/mlx.metallib"]

  s.pod_target_xcconfig = {
    "CLANG_CXX_LANGUAGE_STANDARD" => "c++20",
    "HEADER_SEARCH_PATHS" => [
      "\"$(PODS_TARGET_SRCROOT)/cpp/runner/include\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/tokenizer/include\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/tokenizer/src\"",
      "\"$(PODS_TARGET_SRCROOT)/cpp/jsi\"",
    ].join(" "),
  }
  # ExecuTorch registers backends and kernels from static initializers: keep every object of
  # libexecutorch.a, or the linker drops them and nothing can run.
  s.user_target_xcconfig = {
    "OTHER_LDFLAGS" => "$(inherited) -all_load",
  }
  s.frameworks = ["Metal", "MetalPerformanceShaders", "Accelerate", "Foundation"]

  install_modules_dependencies(s)
end
