// One loaded .pte: the `forward` method plus the contract metadata the exporter wrote
// (see docs/design.md, "The .pte contract"). Knows nothing about tokens' meaning or sampling.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rne/runner/model_file.h"
#include "rne/runner/result.h"

namespace executorch::extension::module {
class Module;
}

namespace rne::runner::detail {
struct OpenedProgram;
}

namespace rne::runner {

// What the runner needs to know about a model, read from the file rather than assumed.
struct ModelContract {
  int64_t max_chunk = 0;        // upper bound of forward's dynamic T (input_tensor_meta(0))
  int64_t max_context = 0;      // KV-cache capacity in positions (get_max_context_len)
  int64_t vocab_size = 0;       // length of the logits row (get_vocab_size)
  int64_t bos_id = -1;          // get_bos_id; -1 when the model declares none
  std::vector<int64_t> eos_ids; // get_eos_ids
  int64_t backend_code = -1;    // get_backend, when the exporter wrote it
  // get_kv_ring_size: slots of the smallest ring-buffer KV cache (sliding-window layers write
  // position p at p % size), 0 when every cache is flat, -1 when the file does not say. Decides
  // whether the cache can be rewound (TextGenerator::rewind).
  int64_t kv_ring_size = -1;
  // A decoder that takes media (Gemma 4 with an image or audio encoder): forward's third input
  // is embeds[1, T, embeds_width] float32, whose rows replace the token embedding at positions
  // holding one of media_token_ids (get_media_token_ids). 0 / empty: token ids only.
  int64_t embeds_width = 0;
  std::vector<int64_t> media_token_ids;
  // get_max_verify_len: the most tokens the `verify` method scores in one call (the last token
  // and up to max_verify - 1 drafts, speculative decoding); 0 when the program has no `verify`.
  int64_t max_verify = 0;
  // Width of the hidden state the `draft` method (Gemma 4's assistant drafter) takes and
  // returns; forward and verify then also return the hidden state of each position they score
  // (.pte contract, docs/design.md). 0 when the program has no `draft`.
  int64_t draft_hidden = 0;
};

// Logits of the last position of the latest forward call (verify(): `rows` rows, one per
// position, each `size` long). Points into the runtime's output buffer: valid until the next
// forward() or verify() on the same session.
struct LogitsView {
  float* data = nullptr;
  int64_t size = 0;
  int64_t rows = 1;
  float* row(int64_t i) const { return data + i * size; }
};

class ModelSession {
 public:
  // Memory-maps `path` (ModelFile::Hold::kMapped), checks it is a .pte, loads `forward` and
  // reads the contract. Errors name the file and the missing or malformed part.
  static Result<std::unique_ptr<ModelSession>> load(const std::string& path);
  // The same from bytes already held (and perhaps verified): the program is read from them, not
  // from the path again. The session keeps `file` alive.
  static Result<std::unique_ptr<ModelSession>> load(std::shared_ptr<const ModelFile> file);
  ~ModelSession();
  ModelSession(const ModelSession&) = delete;
  ModelSession& operator=(const ModelSession&) = delete;

  const ModelContract& contract() const { return contract_; }
  const std::string& path() const { return path_; }
  // The program's bytes, e.g. to load another session of it (LlmRunner::new_session).
  const std::shared_ptr<const ModelFile>& file() const { return file_; }

  // Every method is loaded with XNNPACK's weight cache on, so the delegates of a second
  // ModelSession of the same program (and this one's `verify`) look the packed weights up by
  // their names instead of packing a copy. True when every delegate of `forward` is XNNPACK:
  // then another session of this file adds only its planned memory (below). A Vulkan, MLX or
  // Core ML delegate keeps its own copy of the weights per load.
  bool shares_weights() const { return shares_weights_; }
  // Bytes of `forward`'s memory-planned arenas: its KV caches and activations, what each session
  // holds of its own.
  uint64_t planned_bytes() const { return planned_bytes_; }

  // Runs forward(tokens[1, count], input_pos=[start_pos]); 1 <= count <= max_chunk and
  // start_pos + count <= max_context (checked: the caller gets an Error, not a crash). A mapped
  // file truncated since it was loaded, and logits that are not finite (what damaged weights
  // produce), are errors too. `embeds` (count x embeds_width floats, or null for zeros) is the
  // third input of a program that takes media; passing it to one that does not is an error.
  // Every kTokensPerPageDrop tokens it lets go of the table pages lookups made resident
  // (ModelFile::drop_looked_up_pages), so they do not pile up over a long chat: E2B touches
  // about 27 KB of its tables a token. A row looked up again costs a minor fault.
  static constexpr int64_t kTokensPerPageDrop = 64;
  Result<LogitsView> forward(const int64_t* tokens, int64_t count, int64_t start_pos,
                             const float* embeds = nullptr);

  // Runs verify(tokens[1, count], input_pos=[start_pos]): like forward() (the tokens go into the
  // same KV caches), but returns the logits of every position, `count` rows;
  // 1 <= count <= contract().max_verify. The method is loaded on first use (its delegate packs
  // its own copy of the weights). A program without it is a kInvalidModel error that says to
  // re-export with --verify-tokens.
  Result<LogitsView> verify(const int64_t* tokens, int64_t count, int64_t start_pos);
  // Loads `verify` now (its delegate packs its weights: tens to hundreds of ms), so the first
  // speculative round does not pay for it inside decode. Same errors as verify().
  Result<void> load_verify();

  // With a `draft` method: the hidden state (contract().draft_hidden floats) of row `i` of the
  // latest forward() (row 0) or verify() call, which the assistant drafts from. Valid until the
  // next call that runs the program; null without `draft`.
  const float* hidden_row(int64_t i) const {
    return hidden_ == nullptr ? nullptr : hidden_ + i * contract_.draft_hidden;
  }
  // Runs draft(token[1, 1], hidden[1, 1, D], input_pos=[position]): one step of the assistant
  // at `position`, reading the KV caches forward and verify wrote (positions < position).
  // Returns the drafted token and writes the next step's hidden state into `next_hidden` (D
  // floats; may alias `hidden`). A program without it is a kInvalidModel error that says to
  // re-export with --assistant.
  Result<int64_t> draft(int64_t token, const float* hidden, int64_t position, float* next_hidden);

  // The cache state a rewind cannot recover by itself: every mutable buffer the program names
  // (the exporter names them) that is not a flat, position-addressed cache (no dimension of
  // max_context): the sliding layers' ring caches. Empty for models without rings and for files
  // exported without buffer names. Saved at a turn boundary and restored, it lets a new turn
  // rewind into the previous answer after a ring has wrapped.
  size_t ring_state_bytes() const { return ring_state_bytes_; }
  void save_ring_state(std::vector<uint8_t>& out) const;
  // `state` must come from save_ring_state() of this session.
  void restore_ring_state(const std::vector<uint8_t>& state);

 private:
  friend class SessionAccess;  // session_file.cpp: reads and writes the named buffers
  struct Buffer {
    uint8_t* data;
    size_t bytes;
  };
  // Finds the ring buffers (see ring_state_bytes) among the method's named attributes.
  void find_ring_buffers();
  ModelSession() = default;
  // The session of an opened program, its contract read and checked (program_loader.h).
  static Result<std::unique_ptr<ModelSession>> finish_load(std::shared_ptr<const ModelFile> file,
                                                           detail::OpenedProgram& opened);
  std::string path_;
  std::shared_ptr<const ModelFile> file_;
  std::unique_ptr<executorch::extension::module::Module> module_;
  ModelContract contract_;
  std::vector<Buffer> ring_buffers_;
  size_t ring_state_bytes_ = 0;
  // Checks a forward/verify call's arguments and the file, and fills the token and position
  // inputs; `limit` is the method's most tokens.
  Result<void> prepare_call(const char* method, const int64_t* tokens, int64_t count,
                            int64_t start_pos, int64_t limit);
  // Checks `rows` rows of logits for the damage a flipped weight causes (NaN, +inf).
  Result<void> check_finite(const float* data, int64_t rows, int64_t start_pos) const;
  void count_tokens(int64_t count);
  bool verify_loaded_ = false;
  bool draft_loaded_ = false;
  float* hidden_ = nullptr;           // the latest forward/verify's hidden output (with `draft`)
  std::vector<float> draft_hidden_;   // draft's hidden input, draft_hidden floats
  int64_t draft_token_ = 0;           // draft's token input
  std::vector<int64_t> tokens_buffer_;  // input storage the runtime reads from (max_chunk long)
  std::vector<float> embeds_buffer_;    // max_chunk x embeds_width, for programs that take media
  int64_t position_ = 0;                // storage for input_pos
  int64_t tokens_since_page_drop_ = 0;
  bool shares_weights_ = false;
  uint64_t planned_bytes_ = 0;
};

}  // namespace rne::runner
