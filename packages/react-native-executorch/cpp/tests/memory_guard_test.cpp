// Memory-aware loading (seam/memory_guard.h): the refusal names both numbers and a smaller
// variant only when that one fits; the environment override replaces the OS figure.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "memory_guard.h"

namespace {

using rne::seam::checkMemory;
using rne::seam::MemoryNeed;

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(MemoryGuard, RefusesWithBothNumbersAndASmallerVariantThatFits) {
  const MemoryNeed need{1409 * kMiB, "mlx int4", 900 * kMiB};
  auto refused = checkMemory(need, 1000 * kMiB);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, rne::runner::ErrorCode::kInsufficientMemory);
  const std::string& message = refused.error().message;
  EXPECT_NE(message.find("1409 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("1000 MiB"), std::string::npos) << message;
  EXPECT_NE(message.find("mlx int4 variant needs about 900 MiB and would fit"), std::string::npos)
      << message;
}

TEST(MemoryGuard, NamesNoSmallerVariantThatDoesNotFitEither) {
  const MemoryNeed need{1409 * kMiB, "mlx int4", 1200 * kMiB};
  auto refused = checkMemory(need, 1000 * kMiB);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message.find("mlx int4"), std::string::npos);
}

TEST(MemoryGuard, LoadsWhatFitsAndWhatWasNeverMeasured) {
  EXPECT_TRUE(checkMemory({1409 * kMiB, "", 0}, 1409 * kMiB).ok());
  EXPECT_TRUE(checkMemory({0, "", 0}, 1 * kMiB).ok());       // no measured peak
  EXPECT_TRUE(checkMemory({1409 * kMiB, "", 0}, std::nullopt).ok());  // the OS does not say
}

TEST(MemoryGuard, TheEnvironmentReplacesWhatTheSystemSays) {
  ::setenv("RNE_AVAILABLE_MEMORY_BYTES", "123456789", 1);
  EXPECT_EQ(rne::seam::availableMemoryBytes(), std::optional<uint64_t>(123456789));
  ::setenv("RNE_AVAILABLE_MEMORY_BYTES", "lots", 1);
  EXPECT_EQ(rne::seam::availableMemoryBytes(), std::nullopt);
  ::unsetenv("RNE_AVAILABLE_MEMORY_BYTES");
#ifdef __linux__
  // /proc/meminfo's MemAvailable: some memory, less than 2^50 bytes.
  auto measured = rne::seam::availableMemoryBytes();
  ASSERT_TRUE(measured.has_value());
  EXPECT_GT(*measured, 0u);
  EXPECT_LT(*measured, uint64_t{1} << 50);
#endif
}

}  // namespace
