#include "model_integrity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "rne/json/file.h"
#include "rne/json/json.h"
#include "sha256.h"

namespace rne::host {

namespace fs = std::filesystem;
using runner::Error;
using runner::ErrorCode;

namespace {

// Export reports are a few KB.
constexpr size_t kMaxReportBytes = size_t{4} << 20;
// A memo file holds one line.
constexpr size_t kMaxMemoBytes = 4096;
// Files changed more recently than this are not remembered: timestamps are only as fine as the
// filesystem's clock tick (up to 2 s on FAT), so a second write within the same tick as the
// last one could leave ctime unchanged.
constexpr int64_t kRacyWindowNs = int64_t{2} * 1000 * 1000 * 1000;

// The project's cache root, as the tooling resolves it: $RNE_CACHE_DIR, else ~/.cache/rne.
std::optional<fs::path> memo_dir() {
  if (const char* dir = std::getenv("RNE_CACHE_DIR"); dir && *dir) return fs::path(dir) / "verified";
  if (const char* home = std::getenv("HOME"); home && *home) {
    return fs::path(home) / ".cache" / "rne" / "verified";
  }
  return std::nullopt;
}

// One memo file per model path (named by the hash of its absolute path), holding
// "<sha256> <version>" of the last successful verification.
std::optional<fs::path> memo_file(const std::string& path) {
  const auto dir = memo_dir();
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  if (!dir || ec) return std::nullopt;
  Sha256 name;
  const std::string key = absolute.string();
  name.update(key.data(), key.size());
  return *dir / name.hex_digest();
}

std::string memo_line(const std::string& sha256, const runner::FileVersion& version) {
  return sha256 + ' ' + version.to_string() + '\n';
}

bool remembered(const std::optional<fs::path>& memo, const std::string& line) {
  if (!memo) return false;
  auto stored = json::read_regular_file(memo->string(), kMaxMemoBytes);
  return stored.ok() && *stored == line;
}

// Best effort: a cache that cannot be written only costs a hash next time. The temporary file
// is created afresh (never a planted FIFO or symlink), then renamed over the memo.
void remember(const std::optional<fs::path>& memo, const std::string& line) {
  if (!memo) return;
  std::error_code ec;
  fs::create_directories(memo->parent_path(), ec);
  const std::string tmp = memo->string() + ".tmp";
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), memo->c_str()) != 0) ::unlink(tmp.c_str());
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

const char* integrity_check_name(IntegrityCheck check) {
  return check == IntegrityCheck::kHashed ? "hashed" : "remembered";
}

bool is_sha256_hex(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](unsigned char c) {
           return std::isxdigit(c) != 0;
         });
}

runner::Result<std::optional<std::string>> sha256_from_export_report(
    const std::string& model_path) {
  const fs::path pte(model_path);
  const std::string report = (pte.parent_path() / (pte.stem().string() + ".report.json")).string();
  const auto unusable = [&](const std::string& why) {
    return Error{ErrorCode::kInvalidArgument,
                 why + ". It is the export report beside " + model_path +
                     ", whose sha256 would verify the model: repair or remove it, or pass "
                     "--sha256 HEX (the registry's checksum)"};
  };
  struct stat st {};
  if (::lstat(report.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<std::string>();
    return unusable(report + ": cannot be examined (" + std::strerror(errno) + ")");
  }
  auto text = json::read_regular_file(report, kMaxReportBytes);
  if (!text.ok()) return unusable(text.error().message);
  auto parsed = json::parse(*text);
  if (!parsed.ok()) {
    return unusable(report + ": not valid JSON (" + parsed.error().message + " at byte " +
                    std::to_string(parsed.error().offset) + ")");
  }
  const json::Value& doc = *parsed;
  if (!doc.is_object()) return unusable(report + ": not a JSON object");
  const auto* file = doc.find("file");
  if (!file || !file->is_string()) return unusable(report + ": has no \"file\" string");
  if (file->as_string() != pte.filename().string()) {
    return unusable(report + ": describes \"" + file->as_string() + "\", not \"" +
                    pte.filename().string() + "\"");
  }
  const auto* sha256 = doc.find("sha256");
  if (!sha256 || !sha256->is_string() || !is_sha256_hex(sha256->as_string())) {
    return unusable(report + ": has no \"sha256\" of 64 hex digits");
  }
  return std::optional<std::string>(sha256->as_string());
}

runner::Result<IntegrityCheck> verify_model_file(const runner::ModelFile& model,
                                                 const std::string& expected_sha256) {
  const std::string expected = lowercase(expected_sha256);
  const runner::FileVersion& version = model.opened_version();
  // Unchanged while it was read: the copy holds the bytes of `version`.
  const bool stable = version == model.read_version();
  const auto memo = memo_file(model.path());
  if (stable && remembered(memo, memo_line(expected, version))) return IntegrityCheck::kRemembered;

  Sha256 hash;
  if (model.size() > 0) hash.update(model.data(), model.size());
  const std::string actual = hash.hex_digest();
  if (actual != expected) {
    return Error{ErrorCode::kInvalidModel,
                 model.path() + ": corrupt file: its sha256 is " + actual + " but " + expected +
                     " was expected (damaged, truncated, being written, or a different file); "
                     "download or export it again"};
  }
  if (stable && now_ns() - version.ctime_ns > kRacyWindowNs) {
    remember(memo, memo_line(expected, version));
  }
  return IntegrityCheck::kHashed;
}

}  // namespace rne::host
