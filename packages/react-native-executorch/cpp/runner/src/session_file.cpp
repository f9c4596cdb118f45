#include "rne/runner/session_file.h"

#include <executorch/extension/module/module.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string_view>
#include <vector>

namespace rne::runner {

namespace {

using Clock = std::chrono::steady_clock;

// "RNESESS" and a NUL: the first bytes of every session file. The fields after it are
// little-endian (every platform this package builds for is).
constexpr char kMagic[8] = {'R', 'N', 'E', 'S', 'E', 'S', 'S', '\0'};
constexpr uint32_t kKindCache = 0;
constexpr uint32_t kKindTokens = 1;
// The program's identity hashes this much of its start and of its end: the FlatBuffer header,
// the method tables and the last weight segment, enough to tell two exports apart without
// reading a multi-GB file.
constexpr size_t kIdentitySpan = size_t{1} << 20;
constexpr size_t kMaxNameBytes = 4096;
constexpr uint32_t kMaxDims = 16;

// A 64-bit hash over 8-byte words (multiply, xor-shift), for damage detection, not security:
// fast enough that hashing a few hundred MB of cache costs a small part of writing it.
class Hasher {
 public:
  void update(const void* data, size_t size) {
    const auto* bytes = static_cast<const uint8_t*>(data);
    while (size > 0) {
      const size_t take = std::min(size, sizeof(uint64_t) - fill_);
      std::memcpy(reinterpret_cast<uint8_t*>(&word_) + fill_, bytes, take);
      fill_ += take;
      bytes += take;
      size -= take;
      if (fill_ == sizeof(uint64_t)) {
        mix(word_);
        word_ = 0;
        fill_ = 0;
      }
      // Whole words straight from the input while it is aligned to one.
      while (fill_ == 0 && size >= sizeof(uint64_t)) {
        uint64_t w;
        std::memcpy(&w, bytes, sizeof(w));
        mix(w);
        bytes += sizeof(w);
        size -= sizeof(w);
      }
    }
  }
  uint64_t digest() const {
    uint64_t h = state_;
    if (fill_ > 0) h = (h ^ word_ ^ (uint64_t{fill_} << 56)) * kPrime;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
  }

 private:
  static constexpr uint64_t kPrime = 0x9e3779b97f4a7c15ull;
  void mix(uint64_t w) {
    state_ = (state_ ^ w) * kPrime;
    state_ ^= state_ >> 29;
  }
  uint64_t state_ = 0xcbf29ce484222325ull;
  uint64_t word_ = 0;
  size_t fill_ = 0;
};

Error bad_file(const std::string& path, const std::string& what) {
  return {ErrorCode::kInvalidArgument,
          path + ": " + what + "; the current conversation is unchanged (start the conversation "
                               "over or load another session file)"};
}

}  // namespace

// One named mutable buffer of `forward`, and how much of it a conversation fills.
struct SessionBuffer {
  std::string name;
  std::vector<int64_t> sizes;
  uint32_t element_bytes = 0;
  // The one dimension of max_context (a flat, position-addressed cache), or -1: saved whole.
  int32_t context_dim = -1;
  uint8_t* data = nullptr;
  // Rows before and bytes after the context dimension (whole buffer: 1 and its size).
  size_t outer = 1;
  size_t inner_bytes = 0;

  size_t filled_bytes(int64_t position) const {
    if (context_dim < 0) return inner_bytes;
    return outer * static_cast<size_t>(position) * inner_bytes;
  }
};

// Reaches into the runner's private state (a friend of ModelSession and TextGenerator).
class SessionAccess {
 public:
  static std::vector<SessionBuffer> buffers(ModelSession& session) {
    std::vector<SessionBuffer> out;
    auto meta = session.module_->method_meta("forward");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    auto method = session.module_->method("forward");
#pragma GCC diagnostic pop
    if (!meta.ok() || !method.ok()) return out;
    const int64_t max_context = session.contract_.max_context;
    for (size_t i = 0; i < meta->num_attributes(); ++i) {
      auto info = meta->attribute_tensor_meta(i);
      if (!info.ok()) continue;
      auto tensor = (*method)->get_attribute(info->name());
      if (!tensor.ok() || tensor->nbytes() == 0 || tensor->numel() == 0) continue;
      SessionBuffer b;
      b.name = std::string(info->name());
      for (auto size : info->sizes()) b.sizes.push_back(size);
      b.element_bytes = static_cast<uint32_t>(tensor->nbytes() / tensor->numel());
      b.data = static_cast<uint8_t*>(tensor->mutable_data_ptr());
      int matches = 0;
      for (size_t d = 0; d < b.sizes.size(); ++d) {
        if (b.sizes[d] == max_context) {
          ++matches;
          b.context_dim = static_cast<int32_t>(d);
        }
      }
      // Two dimensions of max_context (a mask, say): which one is positions is unknown, so it
      // is saved whole.
      if (matches != 1) b.context_dim = -1;
      if (b.context_dim < 0) {
        b.inner_bytes = tensor->nbytes();
      } else {
        size_t inner = b.element_bytes;
        for (size_t d = 0; d < b.sizes.size(); ++d) {
          if (static_cast<int32_t>(d) < b.context_dim) b.outer *= static_cast<size_t>(b.sizes[d]);
          if (static_cast<int32_t>(d) > b.context_dim) inner *= static_cast<size_t>(b.sizes[d]);
        }
        b.inner_bytes = inner;
      }
      out.push_back(std::move(b));
    }
    return out;
  }
  static ModelSession& session(TextGenerator& g) { return *g.session_; }
  static const ModelFile& file(ModelSession& s) { return *s.file_; }
  static bool running(TextGenerator& g) { return g.running_.load(); }

  // The conversation, as a session file holds it.
  struct State {
    std::vector<int64_t> cached;
    std::vector<uint64_t> keys;
    std::vector<int64_t> pending;
    int64_t high_water = 0;
    struct Checkpoint {
      int64_t position;
      int64_t high_water;
      std::vector<uint8_t> rings;
    };
    std::vector<Checkpoint> checkpoints;
  };
  static State state(const TextGenerator& g) {
    State s{g.cached_, g.cached_keys_, g.pending_, g.high_water_, {}};
    for (const auto& c : g.checkpoints_) s.checkpoints.push_back({c.position, c.high_water, c.rings});
    return s;
  }
  static void set_state(TextGenerator& g, State s) {
    g.cached_ = std::move(s.cached);
    g.cached_keys_ = std::move(s.keys);
    g.pending_ = std::move(s.pending);
    g.high_water_ = s.high_water;
    g.checkpoints_.clear();
    for (auto& c : s.checkpoints) {
      g.checkpoints_.push_back({c.position, c.high_water, std::move(c.rings)});
    }
    g.logits_ = {};
  }
  static void reset_for_prefill(TextGenerator& g) { g.reset(); }
  static void set_pending(TextGenerator& g, std::vector<int64_t> pending) {
    g.pending_ = std::move(pending);
  }
};

namespace {

uint64_t program_hash(const ModelFile& file) {
  Hasher h;
  const size_t size = file.size();
  h.update(&size, sizeof(size));
  const size_t head = std::min(size, kIdentitySpan);
  h.update(file.data(), head);
  const size_t tail = std::min(size - head, kIdentitySpan);
  h.update(file.data() + size - tail, tail);
  return h.digest();
}

// Appends to the file and to the checksum.
class Writer {
 public:
  explicit Writer(int fd) : fd_(fd) {}
  template <typename T>
  void put(const T& value) { bytes(&value, sizeof(value)); }
  void bytes(const void* data, size_t size) {
    if (!ok_) return;
    hasher_.update(data, size);
    raw(data, size);
  }
  void raw(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    // Small fields gather in a buffer; large spans go straight to the file.
    if (buffer_.size() + size > kBuffer) flush();
    if (size >= kBuffer) {
      write_all(p, size);
      return;
    }
    buffer_.insert(buffer_.end(), p, p + size);
  }
  bool finish() {
    const uint64_t sum = hasher_.digest();
    raw(&sum, sizeof(sum));
    flush();
    return ok_;
  }
  uint64_t written() const { return written_; }
  int error() const { return errno_; }

 private:
  static constexpr size_t kBuffer = size_t{1} << 16;
  void flush() {
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  void write_all(const uint8_t* p, size_t size) {
    while (ok_ && size > 0) {
      const ssize_t n = ::write(fd_, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok_ = false;
        errno_ = n < 0 ? errno : ENOSPC;
        return;
      }
      p += n;
      size -= static_cast<size_t>(n);
      written_ += static_cast<uint64_t>(n);
    }
  }
  int fd_;
  Hasher hasher_;
  std::vector<uint8_t> buffer_;
  bool ok_ = true;
  int errno_ = 0;
  uint64_t written_ = 0;
};

// Reads fields from the file's bytes; every read is bounds-checked and a short one sets failed.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  bool get(T& value) { return bytes(&value, sizeof(value)); }
  bool bytes(void* out, size_t size) {
    const uint8_t* p = take(size);
    if (p == nullptr) return false;
    std::memcpy(out, p, size);
    return true;
  }
  // A pointer to the next `size` bytes, or null when fewer are left.
  const uint8_t* take(size_t size) {
    if (size > size_ - at_) return nullptr;
    const uint8_t* p = data_ + at_;
    at_ += size;
    return p;
  }
  size_t left() const { return size_ - at_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// What no generation of this program could have left in a session file, as a file bound.
uint64_t max_file_bytes(const ModelContract& c, const std::vector<SessionBuffer>& buffers,
                        size_t ring_bytes) {
  uint64_t bound = 4096 + static_cast<uint64_t>(c.max_context + 1) * 16;
  for (const auto& b : buffers) {
    bound += 64 + b.name.size() + b.sizes.size() * 8 +
             b.filled_bytes(c.max_context);
  }
  return bound + TextGenerator::kMaxCheckpoints * (24 + ring_bytes) + kMaxSessionAppBytes;
}

}  // namespace

const char* session_restore_name(SessionRestore restore) {
  return restore == SessionRestore::kCache ? "cache" : "prefill";
}

Result<SessionInfo> SessionFile::save(TextGenerator& generator, const std::string& path,
                                      bool tokens_only, const std::string& app_data) {
  const auto start = Clock::now();
  if (app_data.size() > kMaxSessionAppBytes) {
    return Error{ErrorCode::kInvalidArgument,
                 "the session's app data is " + std::to_string(app_data.size()) +
                     " bytes; at most " + std::to_string(kMaxSessionAppBytes) + " are stored"};
  }
  if (SessionAccess::running(generator)) {
    return Error{ErrorCode::kBusy, "cannot save the session while a generation runs; wait for "
                                   "it to finish or interrupt it first"};
  }
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return Error{ErrorCode::kInvalidArgument,
                 path + ": " + (S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file") +
                     "; give a file path for the session (it is created or replaced)"};
  }
  ModelSession& session = SessionAccess::session(generator);
  const ModelContract& c = session.contract();
  std::vector<SessionBuffer> buffers = SessionAccess::buffers(session);
  // No named buffer: the caches live inside a delegate and only the tokens can be saved.
  const bool tokens = tokens_only || buffers.empty();
  if (tokens) buffers.clear();
  const auto state = SessionAccess::state(generator);
  const int64_t position = static_cast<int64_t>(state.cached.size());

  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Error{ErrorCode::kNotFound, "cannot write the session file " + path + ": " +
                                           std::strerror(errno) +
                                           " (its directory must exist and be writable)"};
  }
  Writer w(fd);
  w.raw(kMagic, sizeof(kMagic));
  w.put(kSessionFormatVersion);
  w.put(tokens ? kKindTokens : kKindCache);
  w.put(static_cast<uint64_t>(SessionAccess::file(session).size()));
  w.put(program_hash(SessionAccess::file(session)));
  w.put(c.max_context);
  w.put(c.vocab_size);
  w.put(position);
  w.put(static_cast<int64_t>(state.pending.size()));
  w.put(state.high_water);
  w.bytes(state.cached.data(), state.cached.size() * sizeof(int64_t));
  w.bytes(state.keys.data(), state.keys.size() * sizeof(uint64_t));
  w.bytes(state.pending.data(), state.pending.size() * sizeof(int64_t));
  w.put(static_cast<uint32_t>(buffers.size()));
  for (const SessionBuffer& b : buffers) {
    w.put(static_cast<uint32_t>(b.name.size()));
    w.bytes(b.name.data(), b.name.size());
    w.put(static_cast<uint32_t>(b.sizes.size()));
    w.bytes(b.sizes.data(), b.sizes.size() * sizeof(int64_t));
    w.put(b.element_bytes);
    w.put(b.context_dim);
    w.put(static_cast<uint64_t>(b.filled_bytes(position)));
    if (b.context_dim < 0) {
      w.bytes(b.data, b.inner_bytes);
    } else {
      // Each row's first `position` entries along the context dimension.
      const size_t row = static_cast<size_t>(c.max_context) * b.inner_bytes;
      for (size_t o = 0; o < b.outer; ++o) {
        w.bytes(b.data + o * row, static_cast<size_t>(position) * b.inner_bytes);
      }
    }
  }
  const uint32_t checkpoints = tokens ? 0 : static_cast<uint32_t>(state.checkpoints.size());
  w.put(checkpoints);
  for (uint32_t i = 0; i < checkpoints; ++i) {
    const auto& cp = state.checkpoints[i];
    w.put(cp.position);
    w.put(cp.high_water);
    w.put(static_cast<uint64_t>(cp.rings.size()));
    w.bytes(cp.rings.data(), cp.rings.size());
  }
  w.put(static_cast<uint64_t>(app_data.size()));
  w.bytes(app_data.data(), app_data.size());
  bool ok = w.finish();
  int err = w.error();
  if (ok && ::fsync(fd) != 0) {
    ok = false;
    err = errno;
  }
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return Error{ErrorCode::kNotFound, "writing the session file " + path + " failed: " +
                                           std::strerror(err) + " (nothing was replaced)"};
  }
  SessionInfo info;
  info.file_bytes = w.written();
  info.app_data = app_data;
  info.tokens = position + static_cast<int64_t>(state.pending.size());
  info.restore = tokens ? SessionRestore::kPrefill : SessionRestore::kCache;
  info.ms = ms_since(start);
  return info;
}

Result<SessionInfo> SessionFile::load(TextGenerator& generator, const std::string& path) {
  const auto start = Clock::now();
  if (SessionAccess::running(generator)) {
    return Error{ErrorCode::kBusy, "cannot load a session while a generation runs; wait for it "
                                   "to finish or interrupt it first (the current conversation "
                                   "is unchanged)"};
  }
  ModelSession& session = SessionAccess::session(generator);
  const ModelContract& c = session.contract();
  const std::vector<SessionBuffer> buffers = SessionAccess::buffers(session);

  // Non-blocking: a FIFO at the path is refused below instead of waiting for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return Error{ErrorCode::kNotFound, "cannot open the session file " + path + ": " +
                                           std::strerror(errno)};
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{ErrorCode::kNotFound,
                 path + ": " + (S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file") +
                     ", not a session file (the current conversation is unchanged)"};
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  const uint64_t bound = max_file_bytes(c, buffers, session.ring_state_bytes());
  if (size > bound) {
    ::close(fd);
    return bad_file(path, "is " + std::to_string(size) + " bytes, more than any session of this "
                          "model can be (" + std::to_string(bound) + "): not a session file of "
                          "this model");
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got != bytes.size()) return bad_file(path, "could not be read whole");

  Reader r(bytes.data(), bytes.size());
  char magic[sizeof(kMagic)];
  uint32_t version = 0;
  if (!r.bytes(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0 ||
      !r.get(version)) {
    return bad_file(path, "is not a session file (no RNESESS header)");
  }
  if (version > kSessionFormatVersion || version == 0) {
    return bad_file(path, "is a session file of format " + std::to_string(version) +
                              ", newer than this build reads (up to " +
                              std::to_string(kSessionFormatVersion) +
                              "): update react-native-executorch to load it");
  }
  // The checksum covers everything between the magic and itself.
  if (bytes.size() < sizeof(kMagic) + sizeof(uint64_t) + sizeof(version)) {
    return bad_file(path, "is truncated");
  }
  uint64_t stored_sum;
  std::memcpy(&stored_sum, bytes.data() + bytes.size() - sizeof(stored_sum), sizeof(stored_sum));
  Hasher h;
  h.update(bytes.data() + sizeof(kMagic), bytes.size() - sizeof(kMagic) - sizeof(stored_sum));
  if (h.digest() != stored_sum) {
    return bad_file(path, "is damaged or truncated (its checksum does not match)");
  }
  Reader body(bytes.data() + sizeof(kMagic) + sizeof(version),
              bytes.size() - sizeof(kMagic) - sizeof(version) - sizeof(stored_sum));
  auto truncated = [&]() { return bad_file(path, "is truncated or malformed"); };

  uint32_t kind;
  uint64_t program_size, program_id;
  int64_t max_context, vocab, position, pending_count, high_water;
  if (!body.get(kind) || !body.get(program_size) || !body.get(program_id) ||
      !body.get(max_context) || !body.get(vocab) || !body.get(position) ||
      !body.get(pending_count) || !body.get(high_water)) {
    return truncated();
  }
  const ModelFile& file = SessionAccess::file(session);
  if (program_size != file.size() || program_id != program_hash(file) ||
      max_context != c.max_context || vocab != c.vocab_size) {
    return bad_file(path, "was saved with another model (a program of " +
                              std::to_string(program_size) + " bytes; the one loaded, " +
                              file.path() + ", has " + std::to_string(file.size()) +
                              " bytes or other contents): load it with the model it was saved "
                              "with");
  }
  if (kind != kKindCache && kind != kKindTokens) return bad_file(path, "has an unknown kind");
  if (position < 0 || position > c.max_context || pending_count < 0 || pending_count > 1 ||
      position + pending_count > c.max_context || high_water < position ||
      high_water > c.max_context) {
    return bad_file(path, "holds positions this model's context of " +
                              std::to_string(c.max_context) + " cannot");
  }
  SessionAccess::State state;
  state.cached.resize(static_cast<size_t>(position));
  state.keys.resize(static_cast<size_t>(position));
  state.pending.resize(static_cast<size_t>(pending_count));
  state.high_water = high_water;
  if (!body.bytes(state.cached.data(), state.cached.size() * sizeof(int64_t)) ||
      !body.bytes(state.keys.data(), state.keys.size() * sizeof(uint64_t)) ||
      !body.bytes(state.pending.data(), state.pending.size() * sizeof(int64_t))) {
    return truncated();
  }
  for (int64_t id : state.cached) {
    if (id < 0 || id >= c.vocab_size) return bad_file(path, "holds a token id outside the vocabulary");
  }
  for (int64_t id : state.pending) {
    if (id < 0 || id >= c.vocab_size) return bad_file(path, "holds a token id outside the vocabulary");
  }
  uint32_t buffer_count;
  if (!body.get(buffer_count)) return truncated();
  const bool tokens = kind == kKindTokens;
  if (!tokens && buffer_count != buffers.size()) {
    return bad_file(path, "holds " + std::to_string(buffer_count) + " cache buffers, this model "
                              "has " + std::to_string(buffers.size()) + ": saved with another "
                              "model");
  }
  if (tokens && buffer_count != 0) return truncated();
  // Where each buffer's saved bytes are in `bytes`; copied only once everything checked out.
  std::vector<const uint8_t*> sources(buffer_count);
  for (uint32_t i = 0; i < buffer_count; ++i) {
    const SessionBuffer& b = buffers[i];
    uint32_t name_bytes, dims, element_bytes;
    int32_t context_dim;
    uint64_t data_bytes;
    if (!body.get(name_bytes) || name_bytes > kMaxNameBytes) return truncated();
    std::string name(name_bytes, '\0');
    if (!body.bytes(name.data(), name_bytes) || !body.get(dims) || dims > kMaxDims) {
      return truncated();
    }
    std::vector<int64_t> sizes(dims);
    if (!body.bytes(sizes.data(), dims * sizeof(int64_t)) || !body.get(element_bytes) ||
        !body.get(context_dim) || !body.get(data_bytes)) {
      return truncated();
    }
    if (name != b.name || sizes != b.sizes || element_bytes != b.element_bytes ||
        context_dim != b.context_dim) {
      return bad_file(path, "holds cache buffer '" + name + "', which this model's (" + b.name +
                                ") does not match: saved with another model");
    }
    if (data_bytes != b.filled_bytes(position)) {
      return bad_file(path, "holds " + std::to_string(data_bytes) + " bytes of cache '" + name +
                                "' for " + std::to_string(position) + " positions; expected " +
                                std::to_string(b.filled_bytes(position)));
    }
    sources[i] = body.take(static_cast<size_t>(data_bytes));
    if (sources[i] == nullptr) return truncated();
  }
  uint32_t checkpoints;
  if (!body.get(checkpoints) || checkpoints > TextGenerator::kMaxCheckpoints) return truncated();
  int64_t previous = -1;
  for (uint32_t i = 0; i < checkpoints; ++i) {
    SessionAccess::State::Checkpoint cp;
    uint64_t ring_bytes;
    if (!body.get(cp.position) || !body.get(cp.high_water) || !body.get(ring_bytes)) {
      return truncated();
    }
    if (cp.position <= previous || cp.position > position || cp.high_water < cp.position ||
        cp.high_water > c.max_context || ring_bytes != session.ring_state_bytes()) {
      return bad_file(path, "holds a ring checkpoint this model cannot use");
    }
    previous = cp.position;
    const uint8_t* rings = body.take(static_cast<size_t>(ring_bytes));
    if (rings == nullptr) return truncated();
    cp.rings.assign(rings, rings + ring_bytes);
    state.checkpoints.push_back(std::move(cp));
  }
  uint64_t app_bytes;
  if (!body.get(app_bytes) || app_bytes > kMaxSessionAppBytes) return truncated();
  const uint8_t* app = body.take(static_cast<size_t>(app_bytes));
  if (app == nullptr) return truncated();
  if (body.left() != 0) return bad_file(path, "has bytes after its last field");

  SessionInfo info;
  info.app_data.assign(reinterpret_cast<const char*>(app), static_cast<size_t>(app_bytes));
  info.file_bytes = size;
  info.tokens = position + pending_count;
  if (tokens) {
    // Prefilled again: a conversation with media in it cannot be, without the images' rows, so
    // it is left empty and the next turn (which sends the whole conversation) prefills it.
    const bool media = std::any_of(state.keys.begin(), state.keys.end(),
                                   [](uint64_t key) { return key != 0; });
    SessionAccess::reset_for_prefill(generator);
    if (!media && !state.cached.empty()) {
      auto filled = generator.prefill(state.cached);
      if (!filled.ok()) {
        generator.reset();
        return filled.error();
      }
      SessionAccess::set_pending(generator, std::move(state.pending));
    }
    info.restore = SessionRestore::kPrefill;
  } else {
    for (uint32_t i = 0; i < buffer_count; ++i) {
      const SessionBuffer& b = buffers[i];
      if (b.context_dim < 0) {
        std::memcpy(b.data, sources[i], b.inner_bytes);
        continue;
      }
      const size_t row = static_cast<size_t>(c.max_context) * b.inner_bytes;
      const size_t filled = static_cast<size_t>(position) * b.inner_bytes;
      for (size_t o = 0; o < b.outer; ++o) {
        std::memcpy(b.data + o * row, sources[i] + o * filled, filled);
      }
    }
    SessionAccess::set_state(generator, std::move(state));
    info.restore = SessionRestore::kCache;
  }
  info.ms = ms_since(start);
  return info;
}

}  // namespace rne::runner
