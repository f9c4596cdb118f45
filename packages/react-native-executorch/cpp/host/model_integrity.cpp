#include "model_integrity.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "sha256.h"

namespace rne::host {

namespace fs = std::filesystem;
using runner::Error;
using runner::ErrorCode;

namespace {

// What identifies one version of a file without reading it. Any write changes ctime (which no
// user call can set back), so a file altered after its verification is hashed again.
std::optional<std::string> file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
#ifdef __APPLE__
  const auto& mtime = st.st_mtimespec;
  const auto& ctime = st.st_ctimespec;
#else
  const auto& mtime = st.st_mtim;
  const auto& ctime = st.st_ctim;
#endif
  std::ostringstream out;
  out << st.st_dev << ' ' << st.st_ino << ' ' << st.st_size << ' ' << mtime.tv_sec << '.'
      << mtime.tv_nsec << ' ' << ctime.tv_sec << '.' << ctime.tv_nsec;
  return out.str();
}

// The project's cache root, as the tooling resolves it: $RNE_CACHE_DIR, else ~/.cache/rne.
std::optional<fs::path> memo_dir() {
  if (const char* dir = std::getenv("RNE_CACHE_DIR"); dir && *dir) return fs::path(dir) / "verified";
  if (const char* home = std::getenv("HOME"); home && *home) {
    return fs::path(home) / ".cache" / "rne" / "verified";
  }
  return std::nullopt;
}

// One memo file per model path (named by the hash of its absolute path), holding
// "<sha256> <identity>" of the last successful verification.
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

std::string memo_line(const std::string& sha256, const std::string& identity) {
  return sha256 + ' ' + identity;
}

bool remembered(const std::optional<fs::path>& memo, const std::string& line) {
  if (!memo) return false;
  std::ifstream in(*memo);
  std::string stored;
  return in && std::getline(in, stored) && stored == line;
}

// Best effort: a cache that cannot be written only costs a hash next time.
void remember(const std::optional<fs::path>& memo, const std::string& line) {
  if (!memo) return;
  std::error_code ec;
  fs::create_directories(memo->parent_path(), ec);
  const fs::path tmp = memo->string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!(out << line << '\n')) return;
  }
  fs::rename(tmp, *memo, ec);
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

runner::Result<IntegrityCheck> verify_model_file(const std::string& path,
                                                 const std::string& expected_sha256) {
  const std::string expected = lowercase(expected_sha256);
  const auto identity = file_identity(path);
  if (!identity) {
    return Error{ErrorCode::kNotFound, path + ": no such file or not readable (check the model path)"};
  }
  const auto memo = memo_file(path);
  if (remembered(memo, memo_line(expected, *identity))) return IntegrityCheck::kRemembered;

  const auto actual = sha256_file(path);
  if (!actual) {
    return Error{ErrorCode::kNotFound, path + ": cannot be read to verify its sha256"};
  }
  if (*actual != expected) {
    return Error{ErrorCode::kInvalidModel,
                 path + ": corrupt file: its sha256 is " + *actual + " but " + expected +
                     " was expected (damaged, truncated or a different file); download or "
                     "export it again"};
  }
  // Stat again: the identity recorded must be the one of the bytes just hashed.
  if (file_identity(path) == identity) remember(memo, memo_line(expected, *identity));
  return IntegrityCheck::kHashed;
}

}  // namespace rne::host
