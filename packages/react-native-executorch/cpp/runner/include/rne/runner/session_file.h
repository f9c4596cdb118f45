// Saved conversations: a TextGenerator's state written to a file and read back, in this process
// or another, so the next turn prefills only what is new (docs/design.md, "Session files").
//
// What a file holds: a versioned header, the identity of the program it was saved with (its
// size and a hash of its first and last MiB), the cached token ids with their media content
// keys, the pending token, the filled part of every named mutable buffer of `forward` (a flat
// cache up to the conversation's position along its max_context dimension, any other buffer,
// e.g. a ring cache, whole), the ring checkpoints, and a checksum over all of it.
//
// Where the program names no mutable buffer (a delegate keeps its caches inside itself: Vulkan,
// MLX), or when the caller asks for a tokens-only file, the file holds the tokens only and
// loading prefills them again (SessionRestore::kPrefill). The caller may store its own bytes
// with them (SessionInfo::app_data).
#pragma once

#include <cstdint>
#include <string>

#include "rne/runner/result.h"
#include "rne/runner/text_generator.h"

namespace rne::runner {

enum class SessionRestore {
  kCache,    // the caches were copied back: nothing is computed again
  kPrefill,  // the tokens were prefilled again (or, with media in them, are by the next turn)
};
// "cache" / "prefill", the names the bindings report.
const char* session_restore_name(SessionRestore restore);

struct SessionInfo {
  uint64_t file_bytes = 0;
  int64_t tokens = 0;  // positions of the conversation (cached + pending)
  SessionRestore restore = SessionRestore::kCache;
  double ms = 0;  // the whole save or load (a load's prefill included)
  // The caller's own bytes, stored with the conversation (LLMModule: its message history as
  // JSON, which the next turn renders). At most kMaxSessionAppBytes.
  std::string app_data;
};

inline constexpr size_t kMaxSessionAppBytes = size_t{16} << 20;

// The newest format this build writes and reads. A file of a newer one is refused.
inline constexpr uint32_t kSessionFormatVersion = 1;

class SessionFile {
 public:
  // Writes `generator`'s conversation to `path` atomically (a temporary file beside it, synced,
  // then renamed over it): a crash leaves the old file or the new one. `tokens_only` writes no
  // cache (a small file; loading prefills). Errors: kBusy while a generation runs, kNotFound when
  // the path's directory is missing or not writable, kInvalidArgument when a directory or other
  // non-regular file is at `path`.
  static Result<SessionInfo> save(TextGenerator& generator, const std::string& path,
                                  bool tokens_only = false, const std::string& app_data = {});
  // Replaces `generator`'s conversation with the one saved in `path`. Everything is read and
  // checked (format, version, checksum, program identity, every length against this model)
  // before anything changes: on any error the current conversation is left as it was.
  // Errors: kBusy while a generation runs, kNotFound (missing, unreadable, not a regular file),
  // kInvalidArgument (not a session file, truncated, damaged, newer format, another model).
  static Result<SessionInfo> load(TextGenerator& generator, const std::string& path);
};

}  // namespace rne::runner
