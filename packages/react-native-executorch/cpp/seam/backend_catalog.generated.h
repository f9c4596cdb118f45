// GENERATED FILE: do not edit. Source: model-registry/backends.yaml.
// Regenerate with: .venv/bin/python tools/gen_registry.py
#pragma once

#include <array>
#include <string_view>

namespace rne::seam {

// How a backend may run on a platform's simulator or emulator: never (not even when asked
// for), explicit only (when asked for by name, never chosen automatically), or allowed.
enum class SimulatorRule { kAllowed, kNever, kExplicitOnly };

struct BackendInfo {
  const char* name;     // the SDK's name, as TypeScript passes it ("xnnpack")
  const char* runtime;  // the delegate's name in the ExecuTorch runtime ("XnnpackBackend")
  SimulatorRule ios_simulator;  // the rule on the ios simulator / emulator
  SimulatorRule android_simulator;  // the rule on the android simulator / emulator
};

// Every backend, by name.
inline constexpr std::array<BackendInfo, 3> kBackendCatalog{{
    {"mlx", "MLXBackend", SimulatorRule::kNever, SimulatorRule::kAllowed},
    {"vulkan", "VulkanBackend", SimulatorRule::kAllowed, SimulatorRule::kExplicitOnly},
    {"xnnpack", "XnnpackBackend", SimulatorRule::kAllowed, SimulatorRule::kAllowed},
}};

// The backend's rule on the simulator of `os` ("ios", "android"); allowed elsewhere.
constexpr SimulatorRule simulator_rule(const BackendInfo& backend, std::string_view os) {
  if (os == "ios") return backend.ios_simulator;
  if (os == "android") return backend.android_simulator;
  return SimulatorRule::kAllowed;
}

}  // namespace rne::seam
