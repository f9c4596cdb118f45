// Integrity of model files: a file whose sha256 is known (from the registry, passed by the
// caller) is hashed before its first load, and a success is remembered so that later loads of
// the same unchanged file skip the multi-second hash.
#pragma once

#include <string>

#include "rne/runner/result.h"

namespace rne::host {

enum class IntegrityCheck {
  kHashed,      // the file was hashed now and matched
  kRemembered,  // an earlier run hashed this very file (same inode, size, mtime, ctime)
};

const char* integrity_check_name(IntegrityCheck check);

// True for 64 hex digits (either case).
bool is_sha256_hex(const std::string& text);

// Checks `path` against `expected_sha256` (64 hex digits). A mismatch is kInvalidModel with a
// message that says "corrupt file" and both checksums; an unreadable file is kNotFound.
// Successes are remembered in verified/ under $RNE_CACHE_DIR, else ~/.cache/rne; when that is
// not writable the file is simply hashed every time.
runner::Result<IntegrityCheck> verify_model_file(const std::string& path,
                                                 const std::string& expected_sha256);

}  // namespace rne::host
