// The DataLoader behind every program the runner loads (ModelSession, VisionEncoder). Private
// to runner/src.
#pragma once

#include <executorch/runtime/core/data_loader.h>
#include <executorch/runtime/platform/log.h>

#include <cstring>
#include <memory>

#include "rne/runner/model_file.h"

namespace rne::runner {

// Serves the runtime's reads from the bytes ModelFile holds, so the program is made of the
// bytes its caller checked. A buffer the runtime frees goes back through ModelFile::release.
class HeldBytesLoader final : public ::executorch::runtime::DataLoader {
 public:
  using RuntimeError = ::executorch::runtime::Error;
  template <typename T>
  using RuntimeResult = ::executorch::runtime::Result<T>;
  using FreeableBuffer = ::executorch::runtime::FreeableBuffer;

  explicit HeldBytesLoader(std::shared_ptr<const ModelFile> file) : file_(std::move(file)) {}

  RuntimeResult<FreeableBuffer> load(size_t offset, size_t size,
                                     const SegmentInfo& info) const override {
    if (offset > file_->size() || size > file_->size() - offset) {
      ET_LOG(Error, "read of %zu bytes at %zu past the end of a %zu-byte file", size, offset,
             file_->size());
      return RuntimeError::InvalidArgument;
    }
    const uint8_t* data = file_->data() + offset;
    // The constant segment holds the tables CPU ops index by token (embeddings, Gemma 4's
    // per-layer table: most of an E2B file). Locked, every row of them would be resident;
    // mapped, only the rows looked up are (read without read-ahead: a lookup's neighbours are
    // other tokens' rows), and the system can take them back. The rest (the
    // program, delegate blobs and the weights they pack) is locked until the runtime frees it.
    if (info.segment_type == SegmentInfo::Type::Constant) {
      file_->look_up_randomly(data, size);
    } else {
      file_->lock(data, size);
    }
    return FreeableBuffer(data, size, &HeldBytesLoader::release,
                                       const_cast<ModelFile*>(file_.get()));
  }

  RuntimeError load_into(size_t offset, size_t size, const SegmentInfo& info,
                         void* buffer) const override {
    if (buffer == nullptr) return RuntimeError::InvalidArgument;
    auto bytes = load(offset, size, info);
    if (!bytes.ok()) return bytes.error();
    std::memcpy(buffer, bytes->data(), size);
    return RuntimeError::Ok;
  }

  RuntimeResult<size_t> size() const override { return file_->size(); }

 private:
  static void release(void* context, void* data, size_t size) {
    static_cast<const ModelFile*>(context)->release(data, size);
  }
  std::shared_ptr<const ModelFile> file_;
};

}  // namespace rne::runner
