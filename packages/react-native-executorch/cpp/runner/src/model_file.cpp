#include "rne/runner/model_file.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sstream>

#include "rne/json/file.h"
#include "rne/runner/kernels.h"

namespace rne::runner {

namespace {

FileVersion version_of(const struct stat& st) {
#ifdef __APPLE__
  const auto& mtime = st.st_mtimespec;
  const auto& ctime = st.st_ctimespec;
#else
  const auto& mtime = st.st_mtim;
  const auto& ctime = st.st_ctim;
#endif
  FileVersion v;
  v.device = static_cast<uint64_t>(st.st_dev);
  v.inode = static_cast<uint64_t>(st.st_ino);
  v.size = static_cast<int64_t>(st.st_size);
  v.mtime_ns = static_cast<int64_t>(mtime.tv_sec) * 1000000000 + mtime.tv_nsec;
  v.ctime_ns = static_cast<int64_t>(ctime.tv_sec) * 1000000000 + ctime.tv_nsec;
  return v;
}

size_t page_size() {
  static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// The whole pages inside [data, data + size).
bool inner_pages(const void* data, size_t size, uintptr_t& begin, uintptr_t& end) {
  const uintptr_t page = page_size();
  const uintptr_t start = reinterpret_cast<uintptr_t>(data);
  begin = (start + page - 1) / page * page;
  end = (start + size) / page * page;
  return begin < end;
}

}  // namespace

bool FileVersion::operator==(const FileVersion& o) const {
  return device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns &&
         ctime_ns == o.ctime_ns;
}

std::string FileVersion::to_string() const {
  std::ostringstream out;
  out << device << ' ' << inode << ' ' << size << ' ' << mtime_ns << ' ' << ctime_ns;
  return out.str();
}

Result<std::shared_ptr<const ModelFile>> ModelFile::open(const std::string& path, Hold hold) {
  // Every program the runner loads comes through here: the ops it may call must be registered.
  register_kernels();
  auto opened = json::open_regular_file(path);
  if (!opened.ok()) {
    const bool special = opened.error().code == json::FileError::kNotRegular;
    return Error{ErrorCode::kNotFound,
                 opened.error().message + (special ? "; pass the path of a .pte model file" : "")};
  }
  const int fd = *opened;
  std::shared_ptr<ModelFile> file(new ModelFile());
  file->path_ = path;
  file->hold_ = hold;
  file->fd_ = fd;  // closed by the destructor from here on
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return Error{ErrorCode::kNotFound, path + ": cannot be read (" + std::strerror(errno) + ")"};
  }
  file->opened_ = file->read_ = version_of(st);
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ == 0) return std::shared_ptr<const ModelFile>(std::move(file));

  if (hold == Hold::kMapped) {
    void* mapped = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      return Error{ErrorCode::kNotFound,
                   path + ": cannot be memory-mapped (" + std::strerror(errno) + ")"};
    }
    file->data_ = static_cast<uint8_t*>(mapped);
    return std::shared_ptr<const ModelFile>(std::move(file));
  }

  // Page-aligned anonymous memory: the same alignment the runtime gets from a mapping.
  void* copy = ::mmap(nullptr, file->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                      -1, 0);
  if (copy == MAP_FAILED) {
    return Error{ErrorCode::kExecutionFailed,
                 path + ": not enough memory to read the " + std::to_string(file->size_) +
                     "-byte model (" + std::strerror(errno) + ")"};
  }
  file->data_ = static_cast<uint8_t*>(copy);
  size_t done = 0;
  while (done < file->size_) {
    const ssize_t n = ::read(fd, file->data_ + done, file->size_ - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Error{ErrorCode::kNotFound,
                   path + ": read failed (" + std::strerror(errno) + ")"};
    }
    if (n == 0) {
      return Error{ErrorCode::kInvalidModel,
                   path + ": the file shrank from " + std::to_string(file->size_) + " to " +
                       std::to_string(done) + " bytes while it was read; it is being written "
                       "or truncated by another program: wait for it to finish, then retry"};
    }
    done += static_cast<size_t>(n);
  }
  if (::fstat(fd, &st) == 0) file->read_ = version_of(st);
  ::close(fd);
  file->fd_ = -1;
  return std::shared_ptr<const ModelFile>(std::move(file));
}

ModelFile::~ModelFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

Result<void> ModelFile::check_still_whole() const {
  if (hold_ != Hold::kMapped || fd_ < 0) return {};
  struct stat st {};
  if (::fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) >= size_) return {};
  return Error{ErrorCode::kInvalidModel,
               path_ + ": the model file was truncated while loaded (" +
                   std::to_string(st.st_size) + " of " + std::to_string(size_) +
                   " bytes left); another program changed it. Load it again once it is "
                   "complete; files should be replaced by renaming a new file over them"};
}

void ModelFile::release(const void* data, size_t size) const {
  if (hold_ != Hold::kMapped) return;
  uintptr_t begin = 0, end = 0;
  if (!inner_pages(data, size, begin, end)) return;
  ::munlock(reinterpret_cast<void*>(begin), end - begin);
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void ModelFile::lock(const void* data, size_t size) const {
  if (hold_ != Hold::kMapped) return;
  uintptr_t begin = 0, end = 0;
  if (inner_pages(data, size, begin, end)) ::mlock(reinterpret_cast<void*>(begin), end - begin);
}

void ModelFile::look_up_randomly(const void* data, size_t size) const {
  if (hold_ != Hold::kMapped) return;
  uintptr_t begin = 0, end = 0;
  if (inner_pages(data, size, begin, end)) {
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_RANDOM);
    std::lock_guard<std::mutex> guard(lookups_mutex_);
    lookups_.emplace_back(begin, end);
  }
}

void ModelFile::drop_looked_up_pages() const {
  if (hold_ != Hold::kMapped) return;
  std::lock_guard<std::mutex> guard(lookups_mutex_);
  for (const auto& [begin, end] : lookups_) {
    // The mapping is read-only and private: no page was ever written, so none can be lost.
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
}

}  // namespace rne::runner
