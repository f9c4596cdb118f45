#include "rne/json/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rne::json {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

FileProblem not_regular(const std::string& path, mode_t mode) {
  return {FileError::kNotRegular, path + " is " + kind_of(mode) + ", not a regular file"};
}

FileProblem open_failed(const std::string& path, int error) {
  if (error == ENOENT || error == ENOTDIR) {
    struct stat link {};
    const bool dangling = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
    return {FileError::kMissing, path + (dangling ? " is a symlink to a file that does not exist"
                                                  : ": no such file (check the path)")};
  }
  // A socket cannot be opened at all.
  if (error == ENXIO || error == EOPNOTSUPP) {
    return {FileError::kNotRegular, path + " is a socket or device, not a regular file"};
  }
  return {FileError::kUnreadable,
          path + ": cannot be opened (" + std::strerror(error) + "); check its permissions"};
}

}  // namespace

FileResult<int> open_regular_file(const std::string& path) {
  // Refused before opening where possible: opening some devices has side effects.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return open_failed(path, errno);
  if (!S_ISREG(st.st_mode)) return not_regular(path, st.st_mode);
  // The path may have been swapped for a FIFO since: O_NONBLOCK keeps the open from waiting
  // for a writer, and the descriptor's own type is what counts.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return open_failed(path, errno);
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int error = errno;
    ::close(fd);
    return S_ISREG(st.st_mode) ? open_failed(path, error) : not_regular(path, st.st_mode);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

FileResult<std::string> read_regular_file(const std::string& path, size_t max_bytes) {
  auto opened = open_regular_file(path);
  if (!opened.ok()) return opened.error();
  const int fd = *opened;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return open_failed(path, error);
  }
  const auto too_large = [&](const std::string& size) {
    return FileProblem{FileError::kTooLarge,
                       path + " is " + size + " bytes, over the limit of " +
                           std::to_string(max_bytes) +
                           " bytes for this file; check that it is the right file"};
  };
  if (static_cast<unsigned long long>(st.st_size) > max_bytes) {
    ::close(fd);
    return too_large(std::to_string(st.st_size));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  bool ok = true;
  int error = 0;
  while (true) {
    if (done == text.size()) {
      // A file that grows while read is still bounded by the limit.
      if (text.size() >= max_bytes + 1) break;
      text.resize(std::min(max_bytes + 1, text.size() + 4096));
    }
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ok = false;
      error = errno;
      break;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (!ok) {
    return FileProblem{FileError::kUnreadable,
                       path + ": read failed (" + std::strerror(error) + ")"};
  }
  if (done > max_bytes) return too_large("more than " + std::to_string(max_bytes));
  text.resize(done);
  return text;
}

}  // namespace rne::json
