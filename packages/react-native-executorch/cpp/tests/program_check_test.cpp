// The program check (runner/src/program_check.cpp) on a real tiny .pte: it accepts the intact
// file, and on every damaged copy it either accepts or returns a typed error without reading
// outside the bytes it was given (each case is checked from an exactly-sized heap copy, so a
// sanitizer build reports any stray read).
#include "rne/runner/program_check.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace rne::runner {
namespace {

std::vector<uint8_t> read_tiny_pte() {
  const char* path = std::getenv("RNE_TEST_PTE_CHUNKED");
  if (path == nullptr) return {};
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

uint64_t program_size(const std::vector<uint8_t>& file) {
  uint64_t size = 0;
  std::memcpy(&size, file.data() + 16, sizeof(size));
  return size;
}

// The check's error message on `bytes` (its whole heap block), "" when it accepts them.
std::string check(const std::vector<uint8_t>& bytes) {
  auto result = check_program(bytes.data(), bytes.size(), "m.pte");
  if (result.ok()) return "";
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidModel);
  return result.error().message;
}

// The same on a copy of the first `size` bytes, in a block of exactly that size.
std::string check(const std::vector<uint8_t>& bytes, size_t size) {
  return check(
      std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size)));
}

class ProgramCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = read_tiny_pte();
    if (file_.empty()) GTEST_SKIP() << "RNE_TEST_PTE_CHUNKED is not set (ctest sets it)";
    ASSERT_GT(file_.size(), 32u);
    ASSERT_EQ(std::memcmp(file_.data() + 8, "eh00", 4), 0) << "no extended header";
  }
  std::vector<uint8_t> file_;
};

TEST_F(ProgramCheckTest, AcceptsTheIntactProgram) {
  EXPECT_EQ(check(file_), "");
}

// Checks that guard an ExecuTorch abort or wild read, by a phrase of their messages.
constexpr const char* kChecks[] = {
    "the operator index",  // resolve_operator, then a crash
    "output ",             // get_value's ET_CHECK
    "argument ",           // an instruction argument past the values
    "sym_size",            // the prim op's TensorImpl::size ET_CHECK
    "cannot take",         // a kernel wrapper's toTensor()/toInt() ET_CHECK
    "(XNNPACK) reads",     // XNNExecutor indexing past a short argument list
    "planned buffer",      // bad_alloc on a terabyte buffer
    "has no data",         // a constant's data index zeroed: a delegate reads through null
    "memory id",
    "dim_order",
};

// Every byte of the FlatBuffer, with two masks: each damaged copy is accepted (a byte no index
// depends on) or refused as a corrupt file; and the checks that exist for ExecuTorch's unchecked
// indices are seen to fire.
TEST_F(ProgramCheckTest, EveryFlippedProgramByteIsAcceptedOrRefusedCleanly) {
  const uint64_t end = program_size(file_);
  ASSERT_LE(end, file_.size());
  std::map<std::string, int> fired;
  int refused = 0, tried = 0;
  std::vector<uint8_t> damaged = file_;
  for (uint64_t at = 0; at < end; ++at) {
    for (uint8_t mask : {uint8_t{0xFF}, uint8_t{0x01}}) {
      damaged[at] = file_[at] ^ mask;
      const std::string error = check(damaged);
      damaged[at] = file_[at];
      ++tried;
      if (error.empty()) continue;
      ++refused;
      ASSERT_NE(error.find("corrupt file"), std::string::npos) << "byte " << at << ": " << error;
      for (const char* what : kChecks) {
        if (error.find(what) != std::string::npos) ++fired[what];
      }
    }
  }
  EXPECT_GT(refused, tried / 2);
  for (const char* what : kChecks) {
    EXPECT_GT(fired[what], 0) << "no flipped byte was refused for '" << what << "'";
  }
}

// Truncated programs: the file cut short (the header's sizes no longer fit it), and the
// FlatBuffer alone cut short with the header moved to the cut and the segments kept after it,
// so the reader meets offsets past the program's end.
TEST_F(ProgramCheckTest, TruncatedProgramsAreRefusedCleanly) {
  const uint64_t end = program_size(file_);
  uint64_t base = 0;
  std::memcpy(&base, file_.data() + 24, sizeof(base));
  ASSERT_LE(base, file_.size());
  int refused = 0;
  for (uint64_t cut = 0; cut < end; ++cut) {
    EXPECT_NE(check(file_, cut), "") << "file cut at " << cut;
    if (cut < 32) continue;
    std::vector<uint8_t> moved(file_.begin(), file_.begin() + static_cast<std::ptrdiff_t>(cut));
    moved.insert(moved.end(), file_.begin() + static_cast<std::ptrdiff_t>(base), file_.end());
    std::memcpy(moved.data() + 16, &cut, sizeof(cut));
    std::memcpy(moved.data() + 24, &cut, sizeof(cut));
    const std::string error = check(moved);
    if (error.empty()) continue;
    ++refused;
    EXPECT_NE(error.find("corrupt file"), std::string::npos) << "cut at " << cut << ": " << error;
  }
  // Only a cut inside the FlatBuffer's trailing padding can leave every table whole.
  EXPECT_GT(refused, static_cast<int>(end) - 64);
}

}  // namespace
}  // namespace rne::runner
