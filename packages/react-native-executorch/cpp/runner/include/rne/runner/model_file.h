// The bytes of one .pte, opened once. Whatever checks a caller makes (a sha256, the header) and
// the program the runtime loads read the same bytes: the path is not opened again, so a file
// renamed or replaced over the path afterwards cannot slip in between a check and the load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rne/runner/result.h"

namespace rne::runner {

// One version of a file, as fstat on its descriptor sees it. Any write changes ctime (which no
// user call can set back), so two equal versions mean nobody wrote the file in between.
struct FileVersion {
  uint64_t device = 0;
  uint64_t inode = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;

  bool operator==(const FileVersion& other) const;
  bool operator!=(const FileVersion& other) const { return !(*this == other); }
  std::string to_string() const;  // "dev ino size mtime ctime", for memo files
};

class ModelFile {
 public:
  enum class Hold {
    // Memory-mapped: paged in on demand, the pages stay reclaimable (the app's choice: a
    // multi-GB model does not count as the app's own memory). A rename or replacement of the
    // path does not reach the mapping. Truncating the file does: forward() checks the size
    // first and fails cleanly, but a truncation during a forward call kills the process with
    // SIGBUS: the runtime's kernels read weights straight from the mapping, on its own threads,
    // where no signal handler could safely resume them. Writers that replace files by rename,
    // as the downloader does, never cause it.
    kMapped,
    // Read into private memory: nothing done to the file afterwards changes what runs, and a
    // checksum of data() is a checksum of the program. Costs the file's size in memory.
    kPrivateCopy,
  };

  // Opens `path` (a regular file only: a FIFO or device is refused without blocking) and holds
  // its bytes. Errors: kNotFound (missing, unreadable, not a regular file).
  static Result<std::shared_ptr<const ModelFile>> open(const std::string& path, Hold hold);
  ~ModelFile();
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;

  const std::string& path() const { return path_; }
  Hold hold() const { return hold_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // The file's version when opened, and once its bytes were copied (kPrivateCopy; the same as
  // opened for kMapped). Equal when no one wrote the file while it was read.
  const FileVersion& opened_version() const { return opened_; }
  const FileVersion& read_version() const { return read_; }

  // kMapped: an error when the file is now shorter than the mapping (touching the missing
  // pages would be SIGBUS). Always fine for kPrivateCopy. One fstat.
  Result<void> check_still_whole() const;
  // The runtime is done with [data, data + size): kMapped gives its whole pages back to the
  // system (they are re-read from the file if touched again). Nothing for kPrivateCopy, whose
  // bytes could not be restored if an overlapping range were loaded again.
  void release(const void* data, size_t size) const;
  // kMapped: asks the system to keep [data, data + size) resident (best effort, as ExecuTorch's
  // MmapUseMlockIgnoreErrors did); release() lets go.
  void lock(const void* data, size_t size) const;
  // kMapped: [data, data + size) is read at random places (tables indexed by token): the
  // system reads only the pages touched, without read-ahead.
  // It also remembers the range, for drop_looked_up_pages().
  void look_up_randomly(const void* data, size_t size) const;
  // kMapped: takes the pages lookups made resident in those ranges out of the process's
  // resident memory. They are clean file pages: a later lookup maps them again from the page
  // cache (or rereads them from the file), so nothing changes but the count (`RssFile`), which
  // Android's low-memory killer ranks apps by.
  void drop_looked_up_pages() const;

 private:
  ModelFile() = default;
  std::string path_;
  Hold hold_ = Hold::kMapped;
  int fd_ = -1;  // kMapped: kept open for check_still_whole()
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  FileVersion opened_;
  FileVersion read_;
  mutable std::mutex lookups_mutex_;
  mutable std::vector<std::pair<uintptr_t, uintptr_t>> lookups_;  // page ranges read at random
};

}  // namespace rne::runner
