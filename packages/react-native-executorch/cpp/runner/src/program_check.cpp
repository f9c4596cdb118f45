#include "rne/runner/program_check.h"

#include <cstring>
#include <limits>
#include <optional>
#include <vector>

namespace rne::runner {

namespace {

// Field ids of ExecuTorch's program.fbs (file identifier "ET12"), in declaration order; a union
// takes two ids, its type byte and then its value.
namespace program {
constexpr int kExecutionPlan = 1, kConstantBuffer = 2, kBackendDelegateData = 3, kSegments = 4,
              kConstantSegment = 5, kMutableDataSegments = 6, kNamedData = 7;
}
namespace plan {
constexpr int kName = 0, kValues = 2, kInputs = 3, kOutputs = 4, kChains = 5, kOperators = 6,
              kDelegates = 7, kNonConstBufferSizes = 8;
}
namespace tensor {
constexpr int kScalarType = 0, kSizes = 2, kDimOrder = 3, kDataBufferIdx = 5,
              kAllocationInfo = 6, kShapeDynamism = 8, kExtraTensorInfo = 9;
}
namespace extra_info {
constexpr int kMutableDataSegmentsIdx = 0, kFullyQualifiedName = 1, kLocation = 2;
}
namespace chain {
constexpr int kInputs = 0, kOutputs = 1, kInstructions = 2;
}

// Union tags (0 is FlatBuffers' NONE).
enum ValueType : uint8_t {
  kNull = 1, kInt, kBool, kDouble, kTensor, kString, kIntList, kDoubleList, kBoolList,
  kTensorList, kOptionalTensorList,
};
enum InstructionType : uint8_t {
  kKernelCall = 1, kDelegateCall, kMoveCall, kJumpFalseCall, kFreeCall,
};

constexpr uint8_t kTensorExternal = 1;  // ExtraTensorInfo.location
constexpr uint8_t kDynamicUnbound = 2;  // Tensor.shape_dynamism

// Bytes per element of scalar_type.fbs's types; 0: not a type the runtime knows.
size_t element_size(int8_t type) {
  switch (type) {
    case 0: case 1: case 11: case 12: case 13: case 16: case 17: case 23: case 24: case 25:
    case 26:
      return 1;
    case 2: case 5: case 15: case 22: case 27:
      return 2;
    case 3: case 6: case 14: case 28:
      return 4;
    case 4: case 7: case 29:
      return 8;
    default:
      return 0;
  }
}

// What each argument of an operator our exports call outside a delegate must be, from its
// schema (torch.ops...._schema) plus the returned value ExecuTorch appends: ExecuTorch's kernel
// wrappers unbox arguments with toTensor()/toInt()/..., which abort on another type, so an
// argument index shifted onto a neighbouring value of the wrong type must stop here. One letter
// per argument: T tensor, t tensor or none, I int, i int or none, S scalar (int, double or bool),
// B bool, D double, d double or none, L int list, l int list or none, O list of optional tensors.
// Operators not listed are checked for indices only.
struct OperatorKinds {
  const char* name;
  const char* kinds;
};
constexpr OperatorKinds kOperatorKinds[] = {
    {"aten::_local_scalar_dense", "TS"},
    {"aten::add.out", "TTSTT"},
    {"aten::arange.start_out", "SSSTT"},
    {"aten::bitwise_and.Tensor_out", "TTTT"},
    {"aten::bitwise_not.out", "TTT"},
    {"aten::copy_", "TTBT"},
    {"aten::embedding.out", "TTIBBTT"},
    {"aten::ge.Scalar_out", "TSTT"},
    {"aten::index.Tensor_out", "TOTT"},
    {"aten::index_put.out", "TOTBTT"},
    {"aten::le.Tensor_out", "TTTT"},
    {"aten::lt.Scalar_out", "TSTT"},
    {"aten::remainder.Scalar_out", "TSTT"},
    {"aten::repeat.out", "TLTT"},
    {"aten::select_copy.int_out", "TIITT"},
    {"aten::slice_copy.Tensor_out", "TIiiITT"},
    {"aten::sub.out", "TTSTT"},
    {"aten::sym_size.int", "TII"},
    {"aten::unsqueeze_copy.out", "TITT"},
    {"dim_order_ops::_to_dim_order_copy.out", "TBlTT"},
    {"executorch_prim::add.Scalar", "SSS"},
    {"executorch_prim::et_view.default", "TLT"},
    {"executorch_prim::mul.Scalar", "SSS"},
    {"executorch_prim::sub.Scalar", "SSS"},
    {"llama::custom_sdpa.out", "TTTItDBdTT"},
    {"llama::update_cache.out", "TTITT"},
    {"quantized_decomposed::embedding_4bit.dtype_out", "TTtIITiTT"},
    {"quantized_decomposed::embedding_4bit.out", "TTtIITTT"},
    {"quantized_decomposed::embedding_byte.out", "TTtIITTT"},
};

const char* operator_kinds(const std::string& name) {
  for (const auto& op : kOperatorKinds) {
    if (name == op.name) return op.kinds;
  }
  return nullptr;
}

bool kind_accepts(char kind, uint8_t type) {
  switch (kind) {
    case 'T': return type == kTensor;
    case 't': return type == kTensor || type == kNull;
    case 'I': return type == kInt;
    case 'i': return type == kInt || type == kNull;
    case 'S': return type == kInt || type == kDouble || type == kBool;
    case 'B': return type == kBool;
    case 'D': return type == kDouble;
    case 'd': return type == kDouble || type == kNull;
    case 'L': return type == kIntList;
    case 'l': return type == kIntList || type == kNull;
    case 'O': return type == kOptionalTensorList;
    default: return false;
  }
}

const char* type_name(uint8_t type) {
  static const char* const names[] = {"none-tag", "none", "int", "bool", "double", "tensor",
                                      "string", "int list", "double list", "bool list",
                                      "tensor list", "optional tensor list"};
  return type < sizeof(names) / sizeof(names[0]) ? names[type] : "unknown";
}

struct Table {
  size_t pos = 0;
  size_t vtable = 0;
  uint16_t vtable_size = 0;
  uint16_t table_size = 0;
};

struct Vector {
  size_t pos = 0;  // of the first element
  uint32_t size = 0;
};

// A FlatBuffer reader that checks every offset against the buffer before it reads (the runtime's
// verifier may not have run on these bytes), plus the program's checks. Each step returns false
// after recording the first problem; nothing is read after that.
class Checker {
 public:
  Checker(const uint8_t* data, size_t size) : data_(data), file_size_(size), size_(size) {}

  std::string run();

 private:
  bool fits(uint64_t pos, uint64_t len) const { return pos <= size_ && len <= size_ - pos; }
  template <typename T>
  T load(size_t pos) const {
    T value;
    std::memcpy(&value, data_ + pos, sizeof(T));
    return value;
  }

  bool fail(const std::string& what) {
    if (error_.empty()) error_ = where() + what;
    return false;
  }
  std::string where() const {
    if (plan_.empty()) return "";
    std::string out = "method '" + plan_ + "'";
    if (value_ >= 0) out += ", value " + std::to_string(value_);
    if (chain_ >= 0) out += ", chain " + std::to_string(chain_);
    if (instruction_ >= 0) out += ", instruction " + std::to_string(instruction_);
    return out + ": ";
  }

  // The table that the offset stored at `at` points to.
  bool follow(size_t at, Table& out) {
    if (!fits(at, 4)) return fail("an offset lies outside the program");
    const uint64_t pos = at + uint64_t{load<uint32_t>(at)};
    if (!fits(pos, 4)) return fail("an offset points outside the program");
    const int64_t vtable = static_cast<int64_t>(pos) - load<int32_t>(pos);
    if (vtable < 0 || !fits(static_cast<uint64_t>(vtable), 4)) {
      return fail("a table's layout lies outside the program");
    }
    out.pos = pos;
    out.vtable = static_cast<size_t>(vtable);
    out.vtable_size = load<uint16_t>(out.vtable);
    out.table_size = load<uint16_t>(out.vtable + 2);
    if (out.vtable_size < 4 || out.vtable_size % 2 != 0 || !fits(out.vtable, out.vtable_size) ||
        out.table_size < 4 || !fits(out.pos, out.table_size)) {
      return fail("a table's layout is malformed");
    }
    return true;
  }

  // Where field `id` of `t` is (0: absent, the schema's default), `width` bytes inside the table.
  bool field(const Table& t, int id, size_t width, size_t& pos) {
    pos = 0;
    const size_t slot = 4 + 2 * static_cast<size_t>(id);
    if (slot + 2 > t.vtable_size) return true;
    const uint16_t offset = load<uint16_t>(t.vtable + slot);
    if (offset == 0) return true;
    if (offset < 4 || offset + width > t.table_size) return fail("a field lies outside its table");
    pos = t.pos + offset;
    return true;
  }

  template <typename T>
  bool scalar(const Table& t, int id, T& out) {
    size_t pos = 0;
    if (!field(t, id, sizeof(T), pos)) return false;
    out = pos == 0 ? T{} : load<T>(pos);
    return true;
  }

  bool child(const Table& t, int id, std::optional<Table>& out) {
    out.reset();
    size_t pos = 0;
    if (!field(t, id, 4, pos)) return false;
    if (pos == 0) return true;
    Table child;
    if (!follow(pos, child)) return false;
    out = child;
    return true;
  }

  bool required_child(const Table& t, int id, const char* name, Table& out) {
    std::optional<Table> found;
    if (!child(t, id, found)) return false;
    if (!found) return fail(std::string(name) + " is missing");
    out = *found;
    return true;
  }

  bool vector(const Table& t, int id, size_t element, std::optional<Vector>& out) {
    out.reset();
    size_t pos = 0;
    if (!field(t, id, 4, pos)) return false;
    if (pos == 0) return true;
    const uint64_t start = pos + uint64_t{load<uint32_t>(pos)};
    if (!fits(start, 4)) return fail("a list lies outside the program");
    const uint32_t size = load<uint32_t>(start);
    if (!fits(start + 4, uint64_t{size} * element)) return fail("a list runs past the program");
    out = Vector{static_cast<size_t>(start + 4), size};
    return true;
  }

  bool required_vector(const Table& t, int id, size_t element, const char* name, Vector& out) {
    std::optional<Vector> found;
    if (!vector(t, id, element, found)) return false;
    if (!found) return fail(std::string(name) + " is missing");
    out = *found;
    return true;
  }

  // A string the runtime reads with c_str(): its bytes and terminator inside the program.
  bool string(const Table& t, int id, const char* name, bool required) {
    std::optional<Vector> found;
    if (!vector(t, id, 1, found)) return false;
    if (!found) return required ? fail(std::string(name) + " is missing") : true;
    if (!fits(found->pos + uint64_t{found->size}, 1) || data_[found->pos + found->size] != 0) {
      return fail(std::string(name) + " is not terminated");
    }
    return true;
  }

  bool element(const Vector& v, uint32_t i, Table& out) {
    return follow(v.pos + 4 * size_t{i}, out);
  }

  template <typename T>
  T item(const Vector& v, uint32_t i) const {
    return load<T>(v.pos + sizeof(T) * size_t{i});
  }

  bool index_in(int64_t index, size_t count, const std::string& what, const char* table) {
    if (index >= 0 && static_cast<uint64_t>(index) < count) return true;
    return fail(what + " is " + std::to_string(index) + ", outside the " + std::to_string(count) +
                " " + table);
  }

  bool value_indices(const Vector& v, const std::string& what) {
    for (uint32_t i = 0; i < v.size; ++i) {
      if (!index_in(item<int32_t>(v, i), types_.size(), what + " " + std::to_string(i), "values")) {
        return false;
      }
    }
    return true;
  }

  bool check_segments(const Table& root);
  bool check_plan(const Table& plan);
  bool check_value(const Table& value, uint8_t type);
  bool check_tensor(const Table& tensor);
  bool check_lists(const Vector& values);
  bool check_chain(const Table& chain);
  bool check_kernel_args(const std::string& op, const Vector& args);
  bool check_delegate_arity(size_t delegate, uint32_t count) {
    if (count < delegate_min_args_[delegate]) {
      return fail("delegate " + std::to_string(delegate) + " (XNNPACK) reads " +
                  std::to_string(delegate_min_args_[delegate]) + " arguments but is called with " +
                  std::to_string(count));
    }
    int64_t& arity = delegate_arity_[delegate];
    if (arity < 0) arity = count;
    if (arity == count) return true;
    return fail("delegate " + std::to_string(delegate) + " is called with " +
                std::to_string(count) +
                " arguments here and " + std::to_string(arity) + " elsewhere");
  }

  // A string field's text ("" when absent); only after string() accepted it.
  std::string text(const Table& t, int id) {
    std::optional<Vector> found;
    if (!vector(t, id, 1, found) || !found) return "";
    return std::string(reinterpret_cast<const char*>(data_ + found->pos), found->size);
  }

  const uint8_t* data_;
  size_t file_size_;
  size_t size_;  // the FlatBuffer's bytes: [0, program_size)
  std::string error_;

  // The program's tables that values and delegates index.
  uint64_t segment_base_ = 0;
  size_t segments_ = 0;
  size_t inline_delegate_data_ = 0;
  size_t constants_ = 0;
  std::vector<uint32_t> mutable_offsets_;  // per mutable_data_segments entry

  // The plan being checked.
  std::string plan_;
  int64_t value_ = -1, chain_ = -1, instruction_ = -1;
  std::vector<uint8_t> types_;
  std::vector<int64_t> facts_;  // an Int's value, a tensor's rank
  std::vector<bool> unbacked_;  // tensors with no data of their own yet
  std::vector<std::string> op_names_;  // "name.overload", as the runtime looks them up
  std::vector<int64_t> buffer_sizes_;
  std::vector<uint64_t> buffer_ends_;  // the furthest end of a tensor planned in each buffer
  size_t operators_ = 0, delegates_ = 0;
  std::vector<uint64_t> delegate_min_args_;  // arguments each delegate reads by position
  struct Span {
    uint64_t pos = 0, size = 0;  // in the file
  };
  std::vector<Span> inline_spans_, segment_spans_;
  uint64_t xnnpack_externs(const Span& blob) const;
  std::vector<int64_t> delegate_arity_;  // arguments per call of each delegate; -1: not called
};

std::string Checker::run() {
  if (file_size_ < 8) {
    fail("shorter than a program header");
    return error_;
  }
  // The extended header ("eh00" after the root offset and identifier) sizes the FlatBuffer and
  // places the segments after it.
  if (file_size_ >= 32 && std::memcmp(data_ + 8, "eh00", 4) == 0) {
    const uint32_t length = load<uint32_t>(12);
    const uint64_t program_size = load<uint64_t>(16);
    segment_base_ = load<uint64_t>(24);
    if (length < 24 || program_size < 8 || program_size > file_size_ ||
        segment_base_ > file_size_) {
      fail("the extended header's sizes do not fit the " + std::to_string(file_size_) +
           "-byte file");
      return error_;
    }
    size_ = static_cast<size_t>(program_size);
  }
  Table root;
  if (!follow(0, root) || !check_segments(root)) return error_;
  Vector plans;
  if (!required_vector(root, program::kExecutionPlan, 4, "the execution plan list", plans)) {
    return error_;
  }
  for (uint32_t i = 0; i < plans.size; ++i) {
    Table p;
    if (!element(plans, i, p) || !check_plan(p)) return error_;
  }
  return error_;
}

// The file-level tables: segments inside the file, and every index into them.
bool Checker::check_segments(const Table& root) {
  std::optional<Vector> segments;
  if (!vector(root, program::kSegments, 4, segments)) return false;
  segments_ = segments ? segments->size : 0;
  for (uint32_t i = 0; i < segments_; ++i) {
    Table segment;
    uint64_t offset = 0, size = 0;
    if (!element(*segments, i, segment) || !scalar(segment, 0, offset) ||
        !scalar(segment, 1, size)) {
      return false;
    }
    const uint64_t room = file_size_ - segment_base_;
    if (offset > room || size > room - offset) {
      return fail("data segment " + std::to_string(i) + " (" + std::to_string(size) +
                  " bytes at " + std::to_string(offset) + ") runs past the end of the " +
                  std::to_string(file_size_) + "-byte file");
    }
    segment_spans_.push_back({segment_base_ + offset, size});
  }

  std::optional<Vector> inline_data;
  if (!vector(root, program::kBackendDelegateData, 4, inline_data)) return false;
  inline_delegate_data_ = inline_data ? inline_data->size : 0;
  for (uint32_t i = 0; i < inline_delegate_data_; ++i) {
    Table data;
    Vector bytes;
    if (!element(*inline_data, i, data) ||
        !required_vector(data, 0, 1, "inline delegate data", bytes)) {
      return false;
    }
    inline_spans_.push_back({bytes.pos, bytes.size});
  }

  std::optional<Vector> constant_buffers;
  if (!vector(root, program::kConstantBuffer, 4, constant_buffers)) return false;
  constants_ = constant_buffers ? constant_buffers->size : 0;
  std::optional<Table> constant_segment;
  if (!child(root, program::kConstantSegment, constant_segment)) return false;
  if (constant_segment) {
    uint32_t segment = 0;
    std::optional<Vector> offsets;
    if (!scalar(*constant_segment, 0, segment) || !vector(*constant_segment, 1, 8, offsets)) {
      return false;
    }
    if (offsets && offsets->size > 0) {
      if (!index_in(segment, segments_, "the constant segment's index", "data segments")) {
        return false;
      }
      constants_ = offsets->size;
    }
  }

  std::optional<Vector> mutable_segments;
  if (!vector(root, program::kMutableDataSegments, 4, mutable_segments)) return false;
  for (uint32_t i = 0; mutable_segments && i < mutable_segments->size; ++i) {
    Table entry;
    uint32_t segment = 0;
    Vector offsets;
    if (!element(*mutable_segments, i, entry) || !scalar(entry, 0, segment) ||
        !required_vector(entry, 1, 8, "a mutable segment's offsets", offsets) ||
        !index_in(segment, segments_, "mutable data segment " + std::to_string(i) + "'s index",
                  "data segments")) {
      return false;
    }
    mutable_offsets_.push_back(offsets.size);
  }

  std::optional<Vector> named;
  if (!vector(root, program::kNamedData, 4, named)) return false;
  for (uint32_t i = 0; named && i < named->size; ++i) {
    Table entry;
    uint32_t segment = 0;
    if (!element(*named, i, entry) || !string(entry, 0, "a named data key", true) ||
        !scalar(entry, 1, segment) ||
        !index_in(segment, segments_, "named data " + std::to_string(i) + "'s segment",
                  "data segments")) {
      return false;
    }
  }
  return true;
}

bool Checker::check_plan(const Table& p) {
  plan_ = "?";
  value_ = chain_ = instruction_ = -1;
  if (!string(p, plan::kName, "the method name", true)) return false;
  {
    Vector name;
    if (!required_vector(p, plan::kName, 1, "the method name", name)) return false;
    plan_.assign(reinterpret_cast<const char*>(data_ + name.pos), name.size);
  }

  std::optional<Vector> sizes;
  if (!vector(p, plan::kNonConstBufferSizes, 8, sizes)) return false;
  buffer_sizes_.clear();
  for (uint32_t i = 0; sizes && i < sizes->size; ++i) {
    buffer_sizes_.push_back(item<int64_t>(*sizes, i));
    if (buffer_sizes_.back() < 0) return fail("a planned buffer has a negative size");
  }

  Vector operators;
  if (!required_vector(p, plan::kOperators, 4, "the operator list", operators)) return false;
  operators_ = operators.size;
  op_names_.assign(operators_, "");
  for (uint32_t i = 0; i < operators_; ++i) {
    Table op;
    if (!element(operators, i, op) || !string(op, 0, "an operator name", true) ||
        !string(op, 1, "an operator overload", false)) {
      return false;
    }
    const std::string overload = text(op, 1);
    op_names_[i] = text(op, 0) + (overload.empty() ? "" : "." + overload);
  }

  Vector delegates;
  if (!required_vector(p, plan::kDelegates, 4, "the delegate list", delegates)) return false;
  delegates_ = delegates.size;
  delegate_min_args_.clear();
  for (uint32_t i = 0; i < delegates_; ++i) {
    Table delegate, processed;
    Vector specs;
    uint8_t location = 0;
    uint32_t index = 0;
    const std::string name = "delegate " + std::to_string(i);
    if (!element(delegates, i, delegate) || !string(delegate, 0, "a delegate id", true) ||
        !required_child(delegate, 1, "a delegate's data reference", processed) ||
        !scalar(processed, 0, location) || !scalar(processed, 1, index) ||
        !required_vector(delegate, 2, 4, "a delegate's compile specs", specs)) {
      return false;
    }
    Span blob;
    if (location == 0) {
      if (!index_in(index, inline_delegate_data_, name + "'s inline data", "inline data")) {
        return false;
      }
      blob = inline_spans_[index];
    } else if (location == 1) {
      if (!index_in(index, segments_, name + "'s segment", "data segments")) return false;
      blob = segment_spans_[index];
    } else {
      return fail(name + "'s data location " + std::to_string(location) + " is unknown");
    }
    delegate_min_args_.push_back(text(delegate, 0) == "XnnpackBackend" ? xnnpack_externs(blob) : 0);
    for (uint32_t s = 0; s < specs.size; ++s) {
      Table spec;
      Vector bytes;
      if (!element(specs, s, spec) || !string(spec, 0, "a compile spec key", true) ||
          !required_vector(spec, 1, 1, "a compile spec value", bytes)) {
        return false;
      }
    }
  }

  buffer_ends_.assign(buffer_sizes_.size(), 0);
  // Types first: lists and instructions are checked against the types they point at.
  Vector values;
  if (!required_vector(p, plan::kValues, 4, "the value list", values)) return false;
  types_.assign(values.size, 0);
  facts_.assign(values.size, 0);
  unbacked_.assign(values.size, false);
  for (uint32_t i = 0; i < values.size; ++i) {
    value_ = i;
    Table value;
    if (!element(values, i, value) || !scalar(value, 0, types_[i]) ||
        !check_value(value, types_[i])) {
      return false;
    }
  }
  if (!check_lists(values)) return false;
  value_ = -1;
  // The runtime allocates each planned buffer at its stored size: a damaged size asks for
  // terabytes (bad_alloc, reported as a device short of memory). ExecuTorch's memory planning
  // stores the furthest tensor end, rounded up to its alignment (within 76 bytes in every
  // export measured); twice that plus 1 MiB leaves room for any other planner.
  for (size_t b = 1; b < buffer_sizes_.size(); ++b) {
    const auto size = static_cast<uint64_t>(buffer_sizes_[b]);
    if (size > 2 * buffer_ends_[b] + (uint64_t{1} << 20)) {
      return fail("planned buffer " + std::to_string(b) + " asks for " + std::to_string(size) +
                  " bytes, but its tensors end at byte " + std::to_string(buffer_ends_[b]));
    }
  }

  for (int id : {plan::kInputs, plan::kOutputs}) {
    Vector list;
    const char* name = id == plan::kInputs ? "input" : "output";
    if (!required_vector(p, id, 4, id == plan::kInputs ? "the input list" : "the output list",
                         list) ||
        !value_indices(list, name)) {
      return false;
    }
    for (uint32_t i = 0; i < list.size; ++i) {
      unbacked_[static_cast<size_t>(item<int32_t>(list, i))] = false;
    }
  }

  Vector chains;
  if (!required_vector(p, plan::kChains, 4, "the chain list", chains)) return false;
  if (chains.size == 0) return fail("the method has no chains");
  delegate_arity_.assign(delegates_, -1);
  for (uint32_t c = 0; c < chains.size; ++c) {
    chain_ = c;
    Table ch;
    if (!element(chains, c, ch) || !check_chain(ch)) return false;
  }
  chain_ = -1;
  // A delegate reads its arguments by the positions its compiled graph was built with, without
  // checking their count (XNNPACK indexes past a shorter list), so a call moved to another
  // delegate must show: the exporter emits a delegate for the calls of one lowered module,
  // which all pass the same number of arguments.
  for (size_t d = 0; d < delegates_; ++d) {
    if (delegate_arity_[d] < 0) return fail("delegate " + std::to_string(d) + " is never called");
  }
  // A tensor with neither constant data nor planned memory gets its data pointer from the
  // caller (a method input or output) or from a view; anywhere else a kernel or delegate reads
  // through a null pointer. A constant whose data index was zeroed looks like that.
  for (size_t v = 0; v < unbacked_.size(); ++v) {
    if (unbacked_[v]) {
      value_ = static_cast<int64_t>(v);
      return fail("the tensor has no data: no constant, no planned memory, and it is not an "
                  "input or output of the method");
    }
  }
  return true;
}

bool Checker::check_value(const Table& value, uint8_t type) {
  if (type < kNull || type > kOptionalTensorList) {
    return fail("its type tag " + std::to_string(type) + " is unknown");
  }
  if (type == kNull) return true;
  Table v;
  if (!required_child(value, 1, "its content", v)) return false;
  Vector items;
  switch (type) {
    case kInt: return scalar(v, 0, facts_[static_cast<size_t>(value_)]);
    case kDouble: {
      double unused = 0;
      return scalar(v, 0, unused);
    }
    case kBool: {
      uint8_t unused = 0;
      return scalar(v, 0, unused);
    }
    case kString: return string(v, 0, "its text", true);
    case kIntList: case kDoubleList: return required_vector(v, 0, 8, "its items", items);
    case kBoolList: return required_vector(v, 0, 1, "its items", items);
    case kTensorList: case kOptionalTensorList: return required_vector(v, 0, 4, "its items", items);
    case kTensor: return check_tensor(v);
    default: return true;
  }
}

bool Checker::check_tensor(const Table& t) {
  int8_t scalar_type = 0;
  uint8_t dynamism = 0;
  uint32_t data_buffer = 0;
  Vector sizes, dim_order;
  if (!scalar(t, tensor::kScalarType, scalar_type) ||
      !scalar(t, tensor::kShapeDynamism, dynamism) ||
      !scalar(t, tensor::kDataBufferIdx, data_buffer) ||
      !required_vector(t, tensor::kSizes, 4, "the tensor's sizes", sizes) ||
      !required_vector(t, tensor::kDimOrder, 1, "the tensor's dim_order", dim_order)) {
    return false;
  }
  facts_[static_cast<size_t>(value_)] = sizes.size;
  const size_t element = element_size(scalar_type);
  if (element == 0) {
    return fail("the tensor's scalar type " + std::to_string(scalar_type) + " is unknown");
  }
  if (dim_order.size != sizes.size) {
    return fail("the tensor has " + std::to_string(sizes.size) + " sizes but " +
                std::to_string(dim_order.size) + " dim_order entries");
  }
  // dim_order is a permutation of the dimensions; numel without overflow.
  uint64_t seen = 0;
  uint64_t nbytes = element;
  bool overflow = false;
  for (uint32_t d = 0; d < sizes.size; ++d) {
    const uint8_t dim = item<uint8_t>(dim_order, d);
    if (dim >= sizes.size || dim >= 64 || (seen >> dim & 1) != 0) {
      return fail("the tensor's dim_order is not a permutation of its " +
                  std::to_string(sizes.size) + " dimensions");
    }
    seen |= uint64_t{1} << dim;
    const int32_t size = item<int32_t>(sizes, d);
    if (size < 0) return fail("the tensor has a negative size " + std::to_string(size));
    if (size != 0 && nbytes > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(size)) {
      overflow = true;
    }
    nbytes = overflow ? 0 : nbytes * static_cast<uint64_t>(size);
  }

  std::optional<Table> allocation, extra;
  if (!child(t, tensor::kAllocationInfo, allocation) ||
      !child(t, tensor::kExtraTensorInfo, extra)) {
    return false;
  }
  uint8_t location = 0;
  uint64_t mutable_segment = 0;
  if (extra && (!scalar(*extra, extra_info::kLocation, location) ||
                !scalar(*extra, extra_info::kMutableDataSegmentsIdx, mutable_segment) ||
                !string(*extra, extra_info::kFullyQualifiedName, "the tensor's name",
                        location == kTensorExternal))) {
    return false;
  }

  if (allocation) {
    uint32_t memory_id = 0, low = 0, high = 0;
    if (!scalar(*allocation, 0, memory_id) || !scalar(*allocation, 1, low) ||
        !scalar(*allocation, 2, high)) {
      return false;
    }
    // Planned buffer 0 is reserved: the runtime places memory_id in buffer memory_id - 1 of
    // its allocator, built from non_const_buffer_sizes[1:].
    if (memory_id == 0 || memory_id >= buffer_sizes_.size()) {
      return fail("the tensor's memory id " + std::to_string(memory_id) + " is outside the " +
                  std::to_string(buffer_sizes_.size() == 0 ? 0 : buffer_sizes_.size() - 1) +
                  " planned buffers");
    }
    const uint64_t offset = uint64_t{high} << 32 | low;
    const auto room = static_cast<uint64_t>(buffer_sizes_[memory_id]);
    if (dynamism != kDynamicUnbound && !overflow && offset + nbytes > buffer_ends_[memory_id]) {
      buffer_ends_[memory_id] = offset + nbytes;
    }
    if (dynamism != kDynamicUnbound && (overflow || offset > room || nbytes > room - offset)) {
      const std::string bytes = overflow ? std::string("overflowing") : std::to_string(nbytes);
      return fail("the tensor (" + bytes +
                  " bytes at " + std::to_string(offset) + ") runs past its " +
                  std::to_string(room) + "-byte planned buffer");
    }
    if (data_buffer > 0) {
      if (!index_in(static_cast<int64_t>(mutable_segment), mutable_offsets_.size(),
                    "the tensor's mutable segment", "mutable data segments") ||
          !index_in(data_buffer, mutable_offsets_[mutable_segment],
                    "the tensor's initial data index", "mutable data offsets")) {
        return false;
      }
    }
  } else if (data_buffer > 0 && location != kTensorExternal) {
    return index_in(data_buffer, constants_, "the tensor's constant data index", "constants");
  } else if (location != kTensorExternal && dynamism != kDynamicUnbound) {
    unbacked_[static_cast<size_t>(value_)] = true;
  }
  return true;
}

// Indices stored inside values: every list item names a value of the type the list unboxes.
bool Checker::check_lists(const Vector& values) {
  for (uint32_t i = 0; i < values.size; ++i) {
    const uint8_t type = types_[i];
    if (type != kIntList && type != kTensorList && type != kOptionalTensorList) continue;
    value_ = i;
    Table value, list;
    Vector items;
    if (!element(values, i, value) || !required_child(value, 1, "its content", list)) return false;
    const size_t width = type == kIntList ? 8 : 4;
    if (!required_vector(list, 0, width, "its items", items)) return false;
    for (uint32_t j = 0; j < items.size; ++j) {
      const int64_t index = width == 8 ? item<int64_t>(items, j) : item<int32_t>(items, j);
      const std::string what = "list item " + std::to_string(j);
      if (type == kOptionalTensorList && index == -1) continue;
      if (!index_in(index, types_.size(), what, "values")) return false;
      const uint8_t target = types_[static_cast<size_t>(index)];
      const bool fits_list = type == kIntList      ? target == kInt
                             : type == kTensorList ? target == kTensor
                                                   : target == kTensor || target == kNull;
      if (!fits_list) {
        return fail(what + " names value " + std::to_string(index) + " of type " +
                    std::to_string(target) + ", not an element the list can hold");
      }
    }
  }
  return true;
}

bool Checker::check_chain(const Table& ch) {
  for (int id : {chain::kInputs, chain::kOutputs}) {
    std::optional<Vector> list;
    if (!vector(ch, id, 4, list)) return false;
    if (list && !value_indices(*list, id == chain::kInputs ? "chain input" : "chain output")) {
      return false;
    }
  }
  Vector instructions;
  if (!required_vector(ch, chain::kInstructions, 4, "the instruction list", instructions)) {
    return false;
  }
  for (uint32_t k = 0; k < instructions.size; ++k) {
    instruction_ = k;
    Table instruction, args;
    uint8_t type = 0;
    if (!element(instructions, k, instruction) || !scalar(instruction, 0, type)) return false;
    if (type < kKernelCall || type > kFreeCall) {
      return fail("its type tag " + std::to_string(type) + " is unknown");
    }
    if (!required_child(instruction, 1, "its arguments", args)) return false;
    int32_t first = 0, second = 0;
    if (!scalar(args, 0, first)) return false;
    switch (type) {
      case kKernelCall:
      case kDelegateCall: {
        Vector list;
        const bool kernel = type == kKernelCall;
        if (!(kernel ? index_in(first, operators_, "the operator index", "operators")
                     : index_in(first, delegates_, "the delegate index", "delegates")) ||
            !required_vector(args, 1, 4, "its argument list", list) ||
            !value_indices(list, "argument") ||
            (!kernel && !check_delegate_arity(static_cast<size_t>(first), list.size)) ||
            (kernel && !check_kernel_args(op_names_[static_cast<size_t>(first)], list))) {
          return false;
        }
        break;
      }
      case kMoveCall:
        if (!scalar(args, 1, second) ||
            !index_in(first, types_.size(), "the move source", "values") ||
            !index_in(second, types_.size(), "the move target", "values")) {
          return false;
        }
        break;
      case kJumpFalseCall:
        // A jump to the chain's end (== its size) ends the chain.
        if (!scalar(args, 1, second) ||
            !index_in(first, types_.size(), "the jump condition", "values") ||
            !index_in(second, size_t{instructions.size} + 1, "the jump destination",
                      "instruction positions")) {
          return false;
        }
        break;
      case kFreeCall:
        if (!index_in(first, types_.size(), "the freed value", "values")) return false;
        if (types_[static_cast<size_t>(first)] != kTensor) {
          return fail("it frees value " + std::to_string(first) + ", which is not a tensor");
        }
        break;
      default:
        break;
    }
  }
  instruction_ = -1;
  return true;
}

// How many arguments an XNNPACK delegate reads: its executor takes the argument at each external
// value id of its graph (all below the graph's num_externs) without checking the call's argument
// count. 0 when the blob is not the layout this reads ("XH00" header, then an XNNGraph
// FlatBuffer whose field 3 is num_externs), which leaves the call unchecked rather than refused.
uint64_t Checker::xnnpack_externs(const Span& blob) const {
  if (blob.size < 26 || blob.pos + blob.size > file_size_ ||
      std::memcmp(data_ + blob.pos + 4, "XH00", 4) != 0) {
    return 0;
  }
  const uint8_t* bytes = data_ + blob.pos;
  uint32_t offset = 0, size = 0;
  std::memcpy(&offset, bytes + 10, 4);
  std::memcpy(&size, bytes + 14, 4);
  if (offset > blob.size || size > blob.size - offset) return 0;
  Checker graph(bytes + offset, size);
  Table root;
  if (!graph.follow(0, root)) return 0;
  uint32_t externs = 0;
  return graph.scalar(root, 3, externs) ? externs : 0;
}

// The argument types of a kernel call (indices already checked), where the operator is known.
bool Checker::check_kernel_args(const std::string& op, const Vector& args) {
  const char* kinds = operator_kinds(op);
  if (kinds == nullptr) return true;
  if (std::strlen(kinds) != args.size) {
    return fail(op + " takes " + std::to_string(std::strlen(kinds)) + " arguments, not " +
                std::to_string(args.size));
  }
  for (uint32_t j = 0; j < args.size; ++j) {
    const auto index = static_cast<size_t>(item<int32_t>(args, j));
    if (!kind_accepts(kinds[j], types_[index])) {
      return fail(op + "'s argument " + std::to_string(j) + " is value " + std::to_string(index) +
                  ", a " + type_name(types_[index]) + ", which this operator cannot take");
    }
  }
  // A view's result shares its input's data, set when the view runs.
  if (op == "executorch_prim::et_view.default") {
    unbacked_[static_cast<size_t>(item<int32_t>(args, args.size - 1))] = false;
  }
  if (op != "aten::sym_size.int") return true;
  // ExecuTorch's prim op aborts on a dimension outside [0, rank): a flipped literal dimension.
  const auto self = static_cast<size_t>(item<int32_t>(args, 0));
  const auto dim = static_cast<size_t>(item<int32_t>(args, 1));
  if (facts_[dim] < 0 || facts_[dim] >= facts_[self]) {
    return fail("aten::sym_size.int asks for dimension " + std::to_string(facts_[dim]) +
                " of a rank-" + std::to_string(facts_[self]) + " tensor");
  }
  return true;
}

}  // namespace

Result<void> check_program(const uint8_t* data, size_t size, const std::string& path) {
  Checker checker(data, size);
  const std::string problem = checker.run();
  if (problem.empty()) return {};
  return Error{ErrorCode::kInvalidModel,
               path + ": corrupt file: the program's tables do not hold together (" + problem +
                   "); the file is damaged or truncated: verify it (rne_llm --sha256) and "
                   "download it again, or re-export it with tools/export_model.py"};
}

}  // namespace rne::runner
