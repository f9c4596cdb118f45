// Which ExecuTorch delegates this binary was linked with (asked of the runtime's registry, so
// it reflects what can actually run, not what was requested at build time).
#pragma once

#include <string>
#include <vector>

namespace rne::runner {

// Registered backend names, e.g. {"XnnpackBackend"}; "VulkanBackend" / "MLXBackend" appear
// only in builds that link those delegates.
std::vector<std::string> registered_backends();

// True when `name` (e.g. "XnnpackBackend") is registered.
bool has_backend(const std::string& name);

}  // namespace rne::runner
