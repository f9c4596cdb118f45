// Integrity of model files. The checksum is taken of the bytes that will run: the caller opens
// the model once as a private copy (runner::ModelFile::Hold::kPrivateCopy), these functions
// hash that copy, and the runner loads the program from the same copy, so a file replaced or
// rewritten after the check cannot slip in. A success is remembered so that later loads of the
// same unchanged file skip the multi-second hash.
#pragma once

#include <optional>
#include <string>

#include "rne/runner/model_file.h"
#include "rne/runner/result.h"

namespace rne::host {

enum class IntegrityCheck {
  kHashed,      // the bytes were hashed now and matched
  kRemembered,  // an earlier run hashed this very file (same inode, size, mtime, ctime)
};

const char* integrity_check_name(IntegrityCheck check);

// True for 64 hex digits (either case).
bool is_sha256_hex(const std::string& text);

// The sha256 the exporter recorded in <stem>.report.json beside <stem>.pte. nullopt when there
// is no report; a report that exists but cannot be used (not a regular file, unreadable, not
// JSON, describing another file, no valid sha256) is a kInvalidArgument error, never a silently
// unchecked run.
runner::Result<std::optional<std::string>> sha256_from_export_report(const std::string& model_path);

// Checks the bytes `model` holds against `expected_sha256` (64 hex digits). A mismatch is
// kInvalidModel with a message that says "corrupt file" and both checksums. The hash is skipped
// when an earlier run recorded this file's version and nobody wrote the file while it was
// read. Successes are remembered in verified/ under $RNE_CACHE_DIR, else ~/.cache/rne (only for
// files last changed more than a few seconds ago: a change within one timestamp tick keeps
// ctime); when that is not writable the file is simply hashed every time.
runner::Result<IntegrityCheck> verify_model_file(const runner::ModelFile& model,
                                                 const std::string& expected_sha256);

}  // namespace rne::host
