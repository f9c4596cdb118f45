// Memory-aware loading: a model's measured peak (the registry's peak_memory_bytes) against what
// the operating system says this process may still use, checked before the load so an app is
// refused with the numbers instead of being killed halfway through it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "rne/runner/result.h"

namespace rne::seam {

// Bytes this process can still allocate, as the OS sees it now: iOS
// os_proc_available_memory() (the app's own limit, below the device's free memory), Linux and
// Android /proc/meminfo's MemAvailable. The environment variable RNE_AVAILABLE_MEMORY_BYTES
// (a decimal count) replaces the measurement (tests; a device farm that wants to simulate a
// small phone). nullopt where neither is known (macOS host).
std::optional<uint64_t> availableMemoryBytes();

// What a load asks for: the variant's measured peak, and the smallest other variant of the same
// model this device can run (empty name: none), to name in the refusal when it fits.
struct MemoryNeed {
  uint64_t peak_bytes = 0;  // 0: not measured, nothing is checked
  std::string smaller_variant;
  uint64_t smaller_variant_peak_bytes = 0;
  // Replaces availableMemoryBytes() for this load (the seam option availableMemoryBytes: tests
  // run a fake figure through the real load path).
  std::optional<uint64_t> available_bytes;
};

// kInsufficientMemory when `need` exceeds `available`, naming both numbers (MiB) and, when it
// fits, the smaller variant.
runner::Result<void> checkMemory(const MemoryNeed& need, std::optional<uint64_t> available);

}  // namespace rne::seam
