#include "memory_guard.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#if defined(__APPLE__)
#include <TargetConditionals.h>
#if TARGET_OS_IPHONE
#include <os/proc.h>
#endif
#endif

namespace rne::seam {
namespace {

std::optional<uint64_t> parseCount(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0') return std::nullopt;
  return static_cast<uint64_t>(value);
}

std::string mib(uint64_t bytes) {
  std::ostringstream out;
  out << (bytes + (uint64_t{1} << 19)) / (uint64_t{1} << 20) << " MiB";
  return out.str();
}

}  // namespace

std::optional<uint64_t> availableMemoryBytes() {
  if (const char* forced = std::getenv("RNE_AVAILABLE_MEMORY_BYTES")) return parseCount(forced);
#if defined(__APPLE__)
#if TARGET_OS_IPHONE
  // The app's remaining allowance under its jetsam limit (iOS 13+); 0 when unknown.
  const size_t available = os_proc_available_memory();
  if (available > 0) return static_cast<uint64_t>(available);
#endif
  return std::nullopt;
#else
  // Linux and Android: the kernel's estimate of memory available without swapping.
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
#endif
}

runner::Result<void> checkMemory(const MemoryNeed& need, std::optional<uint64_t> available) {
  if (need.peak_bytes == 0 || !available || need.peak_bytes <= *available) return {};
  std::string message = "This model variant needs about " + mib(need.peak_bytes) +
                        " of memory at its peak (measured), but the system says only " +
                        mib(*available) + " are available to this app";
  if (!need.smaller_variant.empty() && need.smaller_variant_peak_bytes > 0 &&
      need.smaller_variant_peak_bytes <= *available) {
    message += "; the model's " + need.smaller_variant + " variant needs about " +
               mib(need.smaller_variant_peak_bytes) + " and would fit";
  }
  message += ". Close other apps or load a smaller variant.";
  return runner::Error{runner::ErrorCode::kInsufficientMemory, message};
}

}  // namespace rne::seam
