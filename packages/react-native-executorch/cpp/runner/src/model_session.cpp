#include "rne/runner/model_session.h"

#include "rne/runner/backends.h"
#include "rne/runner/program_check.h"
#include "program_loader.h"

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/core/data_loader.h>
#include <executorch/runtime/platform/log.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

namespace rne::runner {

namespace et = ::executorch;
using et::extension::module::Module;

namespace {

Error contract_error(const std::string& path, const std::string& what) {
  return {ErrorCode::kInvalidModel,
          path + ": " + what +
              " (the file does not follow the .pte contract: re-export it with "
              "tools/export_model.py; if it was copied or downloaded, it may be a corrupt file: "
              "verify its sha256)"};
}

using detail::RuntimeError;

std::string runtime_error_text(RuntimeError error) {
  const char* name = "unknown";
  switch (error) {
    case RuntimeError::Ok: name = "Ok"; break;
    case RuntimeError::Internal: name = "Internal"; break;
    case RuntimeError::InvalidState: name = "InvalidState"; break;
    case RuntimeError::EndOfMethod: name = "EndOfMethod"; break;
    case RuntimeError::AlreadyLoaded: name = "AlreadyLoaded"; break;
    case RuntimeError::NotSupported: name = "NotSupported"; break;
    case RuntimeError::NotImplemented: name = "NotImplemented"; break;
    case RuntimeError::InvalidArgument: name = "InvalidArgument"; break;
    case RuntimeError::InvalidType: name = "InvalidType"; break;
    case RuntimeError::OperatorMissing: name = "OperatorMissing"; break;
    case RuntimeError::NotFound: name = "NotFound"; break;
    case RuntimeError::MemoryAllocationFailed: name = "MemoryAllocationFailed"; break;
    case RuntimeError::AccessFailed: name = "AccessFailed"; break;
    case RuntimeError::InvalidProgram: name = "InvalidProgram"; break;
    case RuntimeError::InvalidExternalData: name = "InvalidExternalData"; break;
    case RuntimeError::OutOfResources: name = "OutOfResources"; break;
    case RuntimeError::DelegateInvalidCompatibility: name = "DelegateInvalidCompatibility"; break;
    case RuntimeError::DelegateMemoryAllocationFailed: name = "DelegateMemoryAllocationFailed"; break;
    case RuntimeError::DelegateInvalidHandle: name = "DelegateInvalidHandle"; break;
    default: break;
  }
  char code[8];
  std::snprintf(code, sizeof(code), "0x%02x", static_cast<unsigned>(error));
  return std::string("runtime error ") + name + " " + code;
}

// Output 1 of a forward/verify call of `rows` positions in a program with `draft` (`width` > 0):
// each position's hidden state. Null when `width` is 0.
Result<float*> hidden_output(const std::vector<et::runtime::EValue>& out, int64_t rows,
                             int64_t width, const std::string& path) {
  if (width == 0) return static_cast<float*>(nullptr);
  if (out.size() < 2 || !out[1].isTensor() || out[1].toTensor().numel() != rows * width) {
    return contract_error(path, "a program with 'draft' must return " + std::to_string(rows) +
                                    " x " + std::to_string(width) + " hidden states second");
  }
  return out[1].toTensor().mutable_data_ptr<float>();
}

std::string registered_backend_list() {
  std::string out;
  for (const auto& name : registered_backends()) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "none" : out;
}

// Why loading the program or its `forward` method failed, in words a user can act on. A damaged
// file shows up as almost any of these codes (a flipped byte can turn an operator name into one
// that does not exist), so every message that could be damage says so.
Error load_error(const std::string& path, const std::string& stage, RuntimeError error) {
  const std::string prefix = path + ": " + stage + " failed (" + runtime_error_text(error) + "): ";
  const char* damaged =
      "corrupt file: it is damaged or truncated; verify it (rne_llm --sha256) and download or "
      "export it again";
  switch (error) {
    case RuntimeError::MemoryAllocationFailed:
    case RuntimeError::OutOfResources:
    case RuntimeError::DelegateMemoryAllocationFailed:
      return {ErrorCode::kExecutionFailed,
              prefix + "not enough memory; close other apps or use a smaller variant (a " +
                  damaged + " can also ask for an impossible size)"};
    case RuntimeError::OperatorMissing:
      return {ErrorCode::kInvalidModel,
              prefix + "the program names an operator this binary does not have. Either it is a " +
                  damaged + ", or it was exported with operators this build lacks (re-export it "
                  "with tools/export_model.py)"};
    case RuntimeError::NotFound:
      return {ErrorCode::kInvalidModel,
              prefix + "the program names a delegate or data this binary does not have " +
                  "(registered backends: " + registered_backend_list() + "). Either it is a " +
                  damaged + ", or it was exported for a backend this build lacks"};
    default:
      return {ErrorCode::kInvalidModel, prefix + damaged};
  }
}

// The LLM program written by tools/export_model.py, for the one program loader.
class ModelKind final : public detail::ProgramKind {
 public:
  Error contract_error(const std::string& path, const std::string& what) const override {
    return runner::contract_error(path, what);
  }
  Error not_a_program(const std::string& path) const override {
    return {ErrorCode::kInvalidModel,
            path + ": not an ExecuTorch program (.pte); expected a file written by "
                   "tools/export_model.py"};
  }
  Error load_failure(const std::string& path, const std::string& stage,
                     RuntimeError error) const override {
    return load_error(path, stage, error);
  }
  // A delegate throws too when the device cannot hold what an intact file asks for (Vulkan: a
  // tensor larger than the GPU's storage-buffer limit), so the message names both causes.
  Error load_threw(const std::string& path, const char* what) const override {
    return {ErrorCode::kInvalidModel,
            path + ": loading failed (" + what +
                "): the file is damaged or truncated, or it needs more than this device "
                "offers (memory, or a GPU buffer limit the message above names); verify it "
                "(rne_llm --sha256) and download or export it again, or use another "
                "variant (backend) of the model"};
  }
  // Another session of the same file, and `verify`, reuse the packed weights.
  bool weight_cache() const override { return true; }
};

const ModelKind kModel;

// Reads a constant method that returns one int (or bool) scalar.
Result<int64_t> read_int(Module& module, const std::string& path, const char* method) {
  auto out = module.execute(method);
  if (!out.ok()) {
    return contract_error(path, std::string("constant method '") + method +
                                    "' is missing or failed to run");
  }
  if (out->empty()) return contract_error(path, std::string("'") + method + "' returned nothing");
  const auto& value = out->at(0);
  if (value.isInt()) return value.toInt();
  if (value.isBool()) return value.toBool() ? 1 : 0;
  return contract_error(path, std::string("'") + method + "' did not return an integer");
}

Result<std::vector<int64_t>> read_int_list(Module& module, const std::string& path,
                                           const char* method) {
  auto out = module.execute(method);
  if (!out.ok()) {
    return contract_error(path, std::string("constant method '") + method +
                                    "' is missing or failed to run");
  }
  std::vector<int64_t> ids;
  // A list constant comes back as one EValue per element.
  for (const auto& value : *out) {
    if (!value.isInt()) {
      return contract_error(path, std::string("'") + method + "' returned a non-integer");
    }
    ids.push_back(value.toInt());
  }
  return ids;
}

}  // namespace

ModelSession::~ModelSession() = default;

Result<std::unique_ptr<ModelSession>> ModelSession::load(const std::string& path) {
  return detail::load_mapped<ModelSession>(path);
}

// A program with a `verify` method shares its KV caches between the two methods (exported with
// share_mutable_buffers): the runtime gives all its methods one set of arenas.
Result<std::unique_ptr<ModelSession>> ModelSession::load(std::shared_ptr<const ModelFile> file) {
  return detail::load_program(
      kModel, std::move(file), {"forward"},
      [](auto file, auto& opened) { return finish_load(std::move(file), opened); }, "verify");
}

Result<std::unique_ptr<ModelSession>> ModelSession::finish_load(
    std::shared_ptr<const ModelFile> file, detail::OpenedProgram& opened) {
  const std::string path = file->path();
  std::unique_ptr<ModelSession> session(new ModelSession());
  session->path_ = path;
  session->file_ = std::move(file);
  session->module_ = std::move(opened.module);
  const auto& names = opened.methods;
  const bool shared_arenas = names.count("verify") == 1;
  Module& module = *session->module_;

  auto meta = module.method_meta("forward");
  if (!meta.ok() || (meta->num_inputs() != 2 && meta->num_inputs() != 3)) {
    return contract_error(path, "'forward' must take (tokens[1, T], input_pos[1]) or, with media, "
                                "(tokens[1, T], input_pos[1], embeds[1, T, D])");
  }
  auto tokens_meta = meta->input_tensor_meta(0);
  if (!tokens_meta.ok() || tokens_meta->sizes().size() != 2 ||
      tokens_meta->scalar_type() != et::aten::ScalarType::Long) {
    return contract_error(path, "'forward' input 0 must be int64 tokens of shape [1, T]");
  }
  auto logits_meta = meta->output_tensor_meta(0);
  if (!logits_meta.ok() || logits_meta->scalar_type() != et::aten::ScalarType::Float) {
    return contract_error(path, "'forward' output 0 must be float32 logits");
  }

  ModelContract& c = session->contract_;
  // The declared upper bound of the dynamic T dimension is the prefill chunk.
  c.max_chunk = tokens_meta->sizes()[1];
  auto max_context = read_int(module, path, "get_max_context_len");
  if (!max_context.ok()) return max_context.error();
  auto vocab = read_int(module, path, "get_vocab_size");
  if (!vocab.ok()) return vocab.error();
  auto eos = read_int_list(module, path, "get_eos_ids");
  if (!eos.ok()) return eos.error();
  c.max_context = *max_context;
  c.vocab_size = *vocab;
  c.eos_ids = std::move(*eos);
  if (names.count("get_bos_id")) {
    auto bos = read_int(module, path, "get_bos_id");
    if (!bos.ok()) return bos.error();
    c.bos_id = *bos;
  }
  if (names.count("get_backend")) {
    auto backend = read_int(module, path, "get_backend");
    if (!backend.ok()) return backend.error();
    c.backend_code = *backend;
  }
  if (names.count("get_kv_ring_size")) {
    auto ring = read_int(module, path, "get_kv_ring_size");
    if (!ring.ok()) return ring.error();
    c.kv_ring_size = *ring;
  }
  if (meta->num_inputs() == 3) {
    auto embeds_meta = meta->input_tensor_meta(2);
    if (!embeds_meta.ok() || embeds_meta->sizes().size() != 3 ||
        embeds_meta->scalar_type() != et::aten::ScalarType::Float || embeds_meta->sizes()[2] < 1 ||
        names.count("get_media_token_ids") == 0) {
      return contract_error(path, "'forward' input 2 must be float32 embeds[1, T, D], declared by "
                                  "get_media_token_ids");
    }
    c.embeds_width = embeds_meta->sizes()[2];
    auto media = read_int_list(module, path, "get_media_token_ids");
    if (!media.ok()) return media.error();
    c.media_token_ids = std::move(*media);
  }
  if (shared_arenas) {
    auto verify = read_int(module, path, "get_max_verify_len");
    if (!verify.ok()) return verify.error();
    if (*verify < 2 || *verify > c.max_chunk) {
      return contract_error(path, "get_max_verify_len=" + std::to_string(*verify) +
                                      " is outside 2..max_chunk");
    }
    c.max_verify = *verify;
  }
  if (names.count("draft")) {
    // Gemma 4's assistant: draft(token[1, 1], hidden[1, 1, D], input_pos[1]) -> (token[1],
    // hidden[1, 1, D]); forward and verify then return each position's hidden state second.
    auto draft_meta = module.method_meta("draft");
    if (!shared_arenas || !draft_meta.ok() || draft_meta->num_inputs() != 3 ||
        meta->num_outputs() < 2) {
      return contract_error(path, "'draft' must come with 'verify' and take (token[1, 1], "
                                  "hidden[1, 1, D], input_pos[1]), and 'forward' must return "
                                  "the hidden states second");
    }
    auto hidden_meta = draft_meta->input_tensor_meta(1);
    if (!hidden_meta.ok() || hidden_meta->sizes().size() != 3 ||
        hidden_meta->scalar_type() != et::aten::ScalarType::Float) {
      return contract_error(path, "'draft' input 1 must be float32 hidden[1, 1, D]");
    }
    c.draft_hidden = hidden_meta->sizes()[2];
    session->draft_hidden_.resize(static_cast<size_t>(c.draft_hidden));
  }
  if (c.max_chunk < 1 || c.max_context < 1 || c.vocab_size < 1 || c.max_chunk > c.max_context) {
    return contract_error(path, "inconsistent metadata: max_chunk=" + std::to_string(c.max_chunk) +
                                    " max_context=" + std::to_string(c.max_context) +
                                    " vocab_size=" + std::to_string(c.vocab_size));
  }
  // Shared arenas are sized for the largest need of the methods that share them, buffer by
  // buffer.
  std::vector<int64_t> planned;
  for (const char* method : {"forward", "verify", "draft"}) {
    if (names.count(method) == 0 || (!shared_arenas && std::strcmp(method, "forward") != 0)) {
      continue;
    }
    auto method_meta = module.method_meta(method);
    if (!method_meta.ok()) continue;
    for (size_t i = 0; i < method_meta->num_memory_planned_buffers(); ++i) {
      auto bytes = method_meta->memory_planned_buffer_size(i);
      if (i >= planned.size()) planned.push_back(0);
      if (bytes.ok()) planned[i] = std::max(planned[i], *bytes);
    }
  }
  for (int64_t bytes : planned) session->planned_bytes_ += static_cast<uint64_t>(bytes);
  session->shares_weights_ = meta->num_backends() > 0;
  for (size_t i = 0; i < meta->num_backends(); ++i) {
    auto name = meta->get_backend_name(i);
    if (!name.ok() || std::strcmp(*name, "XnnpackBackend") != 0) session->shares_weights_ = false;
  }
  session->tokens_buffer_.resize(static_cast<size_t>(c.max_chunk));
  session->embeds_buffer_.resize(static_cast<size_t>(c.max_chunk * c.embeds_width));
  session->find_ring_buffers();
  return session;
}

void ModelSession::find_ring_buffers() {
  auto meta = module_->method_meta("forward");
  // Module offers no other way to a Method's attributes (get_attribute) in this ExecuTorch.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  auto method = module_->method("forward");
#pragma GCC diagnostic pop
  if (!meta.ok() || !method.ok()) return;
  for (size_t i = 0; i < meta->num_attributes(); ++i) {
    auto info = meta->attribute_tensor_meta(i);
    if (!info.ok()) continue;
    bool flat = false;
    for (auto size : info->sizes()) flat = flat || size == contract_.max_context;
    if (flat) continue;
    auto tensor = (*method)->get_attribute(info->name());
    if (!tensor.ok() || tensor->nbytes() == 0) continue;
    ring_buffers_.push_back({static_cast<uint8_t*>(tensor->mutable_data_ptr()), tensor->nbytes()});
    ring_state_bytes_ += tensor->nbytes();
  }
}

void ModelSession::save_ring_state(std::vector<uint8_t>& out) const {
  out.resize(ring_state_bytes_);
  size_t at = 0;
  for (const Buffer& b : ring_buffers_) {
    std::memcpy(out.data() + at, b.data, b.bytes);
    at += b.bytes;
  }
}

void ModelSession::restore_ring_state(const std::vector<uint8_t>& state) {
  if (state.size() != ring_state_bytes_) return;
  size_t at = 0;
  for (const Buffer& b : ring_buffers_) {
    std::memcpy(b.data, state.data() + at, b.bytes);
    at += b.bytes;
  }
}

Result<void> ModelSession::prepare_call(const char* method, const int64_t* tokens,
                                        int64_t count, int64_t start_pos, int64_t limit) {
  if (count < 1 || count > limit) {
    return Error{ErrorCode::kInvalidArgument,
                 std::string(method) + ": " + std::to_string(count) + " tokens; must be 1.." +
                     std::to_string(limit) +
                     (std::string(method) == "forward" ? " (max_chunk)" : " (max_verify)")};
  }
  if (start_pos < 0 || start_pos + count > contract_.max_context) {
    return Error{ErrorCode::kContextFull,
                 std::string(method) + ": positions " + std::to_string(start_pos) + ".." +
                     std::to_string(start_pos + count - 1) + " exceed the context of " +
                     std::to_string(contract_.max_context)};
  }
  if (auto whole = file_->check_still_whole(); !whole.ok()) return whole.error();
  std::copy(tokens, tokens + count, tokens_buffer_.begin());
  position_ = start_pos;
  return {};
}

void ModelSession::count_tokens(int64_t count) {
  tokens_since_page_drop_ += count;
  if (tokens_since_page_drop_ >= kTokensPerPageDrop) {
    file_->drop_looked_up_pages();
    tokens_since_page_drop_ = 0;
  }
}

Result<void> ModelSession::check_finite(const float* data, int64_t rows, int64_t start_pos) const {
  // Damaged weights that load still compute: a flipped exponent bit shows up as NaN or +inf,
  // which no sampler can turn into a meaningful token (-inf is a legitimate "never").
  const int64_t n = rows * contract_.vocab_size;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(data[i]) || data[i] == INFINITY) {
      return Error{ErrorCode::kExecutionFailed,
                   path_ + ": the model at position " +
                       std::to_string(start_pos + i / contract_.vocab_size) +
                       " produced a non-finite logit (" + std::to_string(data[i]) + " for token " +
                       std::to_string(i % contract_.vocab_size) +
                       "): the weights are damaged (corrupt file); verify its sha256 and download "
                       "or export it again"};
    }
  }
  return {};
}

static Error execution_error(const std::string& path, const char* method, int64_t start_pos,
                      int64_t count, RuntimeError error) {
  return {ErrorCode::kExecutionFailed,
          std::string(method) + " failed at position " + std::to_string(start_pos) + " with " +
              std::to_string(count) + " tokens (" + runtime_error_text(error) +
              "); if it fails again, " + path +
              " may be a corrupt file: verify its sha256 and download or export it again"};
}

Result<LogitsView> ModelSession::forward(const int64_t* tokens, int64_t count, int64_t start_pos,
                                         const float* embeds) {
  if (embeds != nullptr && contract_.embeds_width == 0) {
    return Error{ErrorCode::kInvalidArgument,
                 path_ + " takes token ids only: it has no input for image or audio embeddings"};
  }
  if (auto ready = prepare_call("forward", tokens, count, start_pos, contract_.max_chunk);
      !ready.ok()) {
    return ready.error();
  }
  auto tokens_tensor = et::extension::from_blob(
      tokens_buffer_.data(), {1, static_cast<et::aten::SizesType>(count)},
      et::aten::ScalarType::Long);
  auto pos_tensor = et::extension::from_blob(&position_, {1}, et::aten::ScalarType::Long);
  std::vector<et::runtime::EValue> inputs{tokens_tensor, pos_tensor};
  et::extension::TensorPtr embeds_tensor;
  if (contract_.embeds_width > 0) {
    const size_t values = static_cast<size_t>(count * contract_.embeds_width);
    if (embeds != nullptr) {
      std::copy(embeds, embeds + values, embeds_buffer_.begin());
    } else {
      std::fill(embeds_buffer_.begin(), embeds_buffer_.begin() + values, 0.0f);
    }
    embeds_tensor = et::extension::from_blob(
        embeds_buffer_.data(),
        {1, static_cast<et::aten::SizesType>(count),
         static_cast<et::aten::SizesType>(contract_.embeds_width)},
        et::aten::ScalarType::Float);
    inputs.emplace_back(embeds_tensor);
  }
  auto out = module_->execute("forward", inputs);
  count_tokens(count);
  if (!out.ok()) return execution_error(path_, "forward", start_pos, count, out.error());
  auto& logits = out->at(0).toTensor();
  if (logits.numel() != contract_.vocab_size) {
    return contract_error(path_, "forward returned " + std::to_string(logits.numel()) +
                                     " logits, expected vocab_size=" +
                                     std::to_string(contract_.vocab_size) +
                                     " (logits of the last position only)");
  }
  float* data = logits.mutable_data_ptr<float>();
  if (auto finite = check_finite(data, 1, start_pos + count - 1); !finite.ok()) {
    return finite.error();
  }
  auto hidden = hidden_output(*out, 1, contract_.draft_hidden, path_);
  if (!hidden.ok()) return hidden.error();
  hidden_ = *hidden;
  return LogitsView{data, contract_.vocab_size, 1};
}

Result<int64_t> ModelSession::draft(int64_t token, const float* hidden, int64_t position,
                                    float* next_hidden) {
  if (contract_.draft_hidden == 0) {
    return Error{ErrorCode::kInvalidModel,
                 path_ + " has no 'draft' method, which the 'assistant' drafter needs: re-export "
                         "it with tools/export_model.py --assistant <assistant checkpoint dir> "
                         "--verify-tokens 5 (Gemma 4, XNNPACK), or use 'promptLookup'"};
  }
  if (token < 0 || token >= contract_.vocab_size || position < 1 ||
      position >= contract_.max_context) {
    return Error{ErrorCode::kInvalidArgument,
                 "draft: token " + std::to_string(token) + " at position " +
                     std::to_string(position) + " is outside the vocabulary or the context"};
  }
  if (!draft_loaded_) {
    if (auto err = module_->load_method("draft"); err != RuntimeError::Ok) {
      return load_error(path_, "loading method 'draft'", err);
    }
    draft_loaded_ = true;
  }
  // Inputs are copied first: `hidden` may point into an output of the shared arenas that this
  // very call overwrites.
  std::copy(hidden, hidden + contract_.draft_hidden, draft_hidden_.begin());
  draft_token_ = token;
  position_ = position;
  const auto width = static_cast<et::aten::SizesType>(contract_.draft_hidden);
  auto token_tensor = et::extension::from_blob(&draft_token_, {1, 1}, et::aten::ScalarType::Long);
  auto hidden_tensor = et::extension::from_blob(draft_hidden_.data(), {1, 1, width},
                                                et::aten::ScalarType::Float);
  auto pos_tensor = et::extension::from_blob(&position_, {1}, et::aten::ScalarType::Long);
  auto out = module_->execute("draft", {token_tensor, hidden_tensor, pos_tensor});
  if (!out.ok()) return execution_error(path_, "draft", position, 1, out.error());
  if (out->size() < 2 || out->at(1).toTensor().numel() != contract_.draft_hidden) {
    return contract_error(path_, "draft must return (token[1], hidden[1, 1, D])");
  }
  const float* next = out->at(1).toTensor().const_data_ptr<float>();
  std::copy(next, next + contract_.draft_hidden, next_hidden);
  const int64_t drafted = out->at(0).toTensor().const_data_ptr<int64_t>()[0];
  if (drafted < 0 || drafted >= contract_.vocab_size) {
    return contract_error(path_, "draft returned token " + std::to_string(drafted) +
                                     " outside the vocabulary");
  }
  return drafted;
}

Result<void> ModelSession::load_verify() {
  if (contract_.max_verify == 0) {
    return Error{ErrorCode::kInvalidModel,
                 path_ + " has no 'verify' method, which speculative decoding needs: it was "
                         "exported before the method existed or without it; re-export it with "
                         "tools/export_model.py --verify-tokens 8 (XNNPACK), or turn "
                         "speculative decoding off"};
  }
  if (!verify_loaded_) {
    if (auto err = module_->load_method("verify"); err != RuntimeError::Ok) {
      return load_error(path_, "loading method 'verify'", err);
    }
    verify_loaded_ = true;
  }
  return {};
}

Result<LogitsView> ModelSession::verify(const int64_t* tokens, int64_t count, int64_t start_pos) {
  if (auto ready = prepare_call("verify", tokens, count, start_pos, contract_.max_verify);
      !ready.ok()) {
    return ready.error();
  }
  if (auto loaded = load_verify(); !loaded.ok()) return loaded.error();
  auto tokens_tensor = et::extension::from_blob(
      tokens_buffer_.data(), {1, static_cast<et::aten::SizesType>(count)},
      et::aten::ScalarType::Long);
  auto pos_tensor = et::extension::from_blob(&position_, {1}, et::aten::ScalarType::Long);
  auto out = module_->execute("verify", {tokens_tensor, pos_tensor});
  count_tokens(count);
  if (!out.ok()) return execution_error(path_, "verify", start_pos, count, out.error());
  auto& logits = out->at(0).toTensor();
  if (logits.numel() != count * contract_.vocab_size) {
    return contract_error(path_, "verify returned " + std::to_string(logits.numel()) +
                                     " logits, expected " + std::to_string(count) + " x " +
                                     std::to_string(contract_.vocab_size));
  }
  float* data = logits.mutable_data_ptr<float>();
  if (auto finite = check_finite(data, count, start_pos); !finite.ok()) return finite.error();
  auto hidden = hidden_output(*out, count, contract_.draft_hidden, path_);
  if (!hidden.ok()) return hidden.error();
  hidden_ = *hidden;
  return LogitsView{data, contract_.vocab_size, count};
}

}  // namespace rne::runner
