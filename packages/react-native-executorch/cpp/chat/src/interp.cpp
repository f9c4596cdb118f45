#include "interp.h"

#include <cmath>
#include <cstdint>

namespace rne::chat::detail {

Value* Frame::find_local(const std::string& name) {
  for (auto& [k, v] : vars) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Frame::set(const std::string& name, Value v) {
  if (Value* slot = find_local(name)) {
    *slot = std::move(v);
  } else {
    vars.emplace_back(name, std::move(v));
  }
}

Interp::Interp(const Limits& limits, Frame& globals) : limits_(limits), globals_(globals) {}

void Interp::step() { charge_steps(1); }

void Interp::check_stack() {
  const char here = 0;
  // The distance from run()'s frame, whichever way the stack grows.
  const auto base = reinterpret_cast<uintptr_t>(stack_base_);
  const auto now = reinterpret_cast<uintptr_t>(&here);
  const size_t used = base > now ? base - now : now - base;
  if (used > limits_.max_stack_bytes) {
    fail(ErrorKind::kLimit, "the template recursed deeper than Limits::max_stack_bytes (" +
                                std::to_string(limits_.max_stack_bytes) + " bytes of stack) allows");
  }
}

void Interp::check_output() {
  if (out.size() > limits_.max_output_bytes) {
    fail(ErrorKind::kLimit, "the rendered text passed " + std::to_string(limits_.max_output_bytes) +
                                " bytes (Limits::max_output_bytes)");
  }
}

void Interp::run(const Program& program) {
  const char base = 0;
  stack_base_ = &base;
  Frame root{&globals_, {}};
  root_ = &root;
  exec(program.body, root);
}

Interp::Flow Interp::exec(const Body& body, Frame& frame) {
  for (const auto& node : body) {
    const Flow flow = exec_node(*node, frame);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

namespace {

// Binds `value` to for/set targets: one name takes it whole, several unpack it.
void bind_targets(Interp& in, Frame& frame, const std::vector<std::string>& targets, const Value& value) {
  if (targets.size() == 1) {
    frame.set(targets[0], value);
    return;
  }
  const List items = in.iterate(value);
  if (items.size() != targets.size()) {
    fail(ErrorKind::kValue, items.size() < targets.size()
                                ? "not enough values to unpack (expected " + std::to_string(targets.size()) +
                                      ", got " + std::to_string(items.size()) + ")"
                                : "too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  }
  for (size_t k = 0; k < targets.size(); ++k) frame.set(targets[k], items[k]);
}

bool holds_namespace(const Value& v) {
  if (v.type == Value::Type::kNamespace) return true;
  if (v.is_list()) {
    for (const Value& item : *v.list) {
      if (holds_namespace(item)) return true;
    }
  } else if (v.is_dict()) {
    for (const auto& [k, item] : *v.dict) {
      if (holds_namespace(item)) return true;
    }
  }
  return false;
}

}  // namespace

Interp::Flow Interp::exec_node(const Node& node, Frame& frame) {
  step();
  try {
    switch (node.kind) {
      case Node::Kind::kText:
        out += node.text;
        check_output();
        return Flow::kNormal;
      case Node::Kind::kOutput:
        out += to_str(eval(*node.expr, frame));
        check_output();
        return Flow::kNormal;
      case Node::Kind::kIf:
        for (const auto& [cond, body] : node.branches) {
          if (eval(*cond, frame).truthy()) return exec(body, frame);
        }
        return exec(node.else_body, frame);
      case Node::Kind::kFor: return exec_for(node, frame);
      case Node::Kind::kSet: {
        Value value = eval(*node.expr, frame);
        if (node.attr_target) {
          const Value target = lookup(node.targets[0], frame);
          if (target.type != Value::Type::kNamespace) {
            fail(ErrorKind::kType, "cannot assign attribute on non-namespace object");
          }
          // No namespace inside a namespace: namespaces are the one mutable value, so this is
          // what keeps values free of cycles.
          if (holds_namespace(value)) {
            fail(ErrorKind::kType, "a namespace attribute cannot hold a namespace");
          }
          const std::string& attr = node.targets[1];
          if (!attr.empty() && attr[0] == '_') {
            fail(ErrorKind::kSecurity, "Chat templates cannot store underscore-prefixed attributes on a "
                                       "namespace, but got '" + attr + "'. Please rename the attribute.");
          }
          for (auto& [k, v] : *target.dict) {
            if (k.is_string() && k.s == attr) {
              v = std::move(value);
              return Flow::kNormal;
            }
          }
          target.dict->emplace_back(Value::string(attr), std::move(value));
          return Flow::kNormal;
        }
        bind_targets(*this, frame, node.targets, value);
        return Flow::kNormal;
      }
      case Node::Kind::kSetBlock:
        frame.set(node.targets[0], apply_filters(node.filters, Value::string(capture(node.body, frame)), frame));
        return Flow::kNormal;
      case Node::Kind::kFilterBlock:
        out += to_str(apply_filters(node.filters, Value::string(capture(node.body, frame)), frame));
        check_output();
        return Flow::kNormal;
      case Node::Kind::kMacro: {
        const Node* macro = &node;
        frame.set(node.name, Value::function(node.name, [macro](Interp& in, Args& args) {
                    return in.call_macro(*macro, args);
                  }));
        return Flow::kNormal;
      }
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
    }
  } catch (Fail& f) {
    if (f.line == 0) {
      f.line = node.line;
      f.column = node.column;
    }
    throw;
  }
  return Flow::kNormal;
}

Interp::Flow Interp::exec_for(const Node& node, Frame& frame) {
  const Value iterable = eval(*node.expr, frame);
  if (iterable.is_none() || iterable.is_number()) {
    fail(ErrorKind::kType, "'" + type_name(iterable) + "' object is not iterable");
  }
  // A list is iterated in place (templates cannot mutate it); anything else is copied.
  std::shared_ptr<const List> items =
      iterable.is_list() ? iterable.list : std::make_shared<const List>(iterate(iterable));
  if (node.condition) {
    List kept;
    for (const Value& item : *items) {
      Frame probe{&frame, {}};
      bind_targets(*this, probe, node.targets, item);
      if (eval(*node.condition, probe).truthy()) kept.push_back(item);
    }
    items = std::make_shared<const List>(std::move(kept));
  }
  if (items->empty()) return exec(node.else_body, frame);
  const auto n = static_cast<int64_t>(items->size());
  // One `loop` object per loop, updated in place each iteration.
  auto index = std::make_shared<int64_t>(0);
  Value loop = Value::make_dict({});
  const char* names[] = {"index", "index0", "revindex", "revindex0", "first", "last",
                         "length", "depth", "depth0", "previtem", "nextitem", "cycle"};
  for (const char* name : names) loop.dict->emplace_back(Value::string(name), Value());
  (*loop.dict)[11].second = Value::function("cycle", [index](Interp&, Args& args) {
    if (args.positional.empty()) fail(ErrorKind::kType, "no items for cycling given");
    return args.positional[static_cast<size_t>(*index) % args.positional.size()];
  });
  auto& fields = *loop.dict;
  fields[6].second = Value::integer(n);
  fields[7].second = Value::integer(1);
  fields[8].second = Value::integer(0);
  for (size_t f = 0; f < 4; ++f) fields[f].second = Value::integer(0);
  fields[4].second = Value::boolean(false);
  fields[5].second = Value::boolean(false);
  for (int64_t k = 0; k < n; ++k) {
    step();
    *index = k;
    fields[0].second.i = k + 1;
    fields[1].second.i = k;
    fields[2].second.i = n - k;
    fields[3].second.i = n - k - 1;
    fields[4].second.b = k == 0;
    fields[5].second.b = k == n - 1;
    fields[9].second = k > 0 ? (*items)[k - 1] : Value::undefined("there is no previous item");
    fields[10].second = k + 1 < n ? (*items)[k + 1] : Value::undefined("there is no next item");
    Frame iteration{&frame, {}};
    iteration.vars.reserve(1 + node.targets.size());
    iteration.vars.emplace_back("loop", loop);
    bind_targets(*this, iteration, node.targets, (*items)[k]);
    if (exec(node.body, iteration) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

std::string Interp::capture(const Body& body, Frame& frame) {
  const size_t mark = out.size();
  exec(body, frame);
  std::string text = out.substr(mark);
  out.resize(mark);
  return text;
}

Value Interp::apply_filters(const std::vector<ExprPtr>& filters, Value v, Frame& frame) {
  for (const auto& f : filters) {
    Args args = eval_args(*f, frame);
    v = filter(f->name, std::move(v), args);
  }
  return v;
}

Value Interp::call_macro(const Node& macro, Args& args) {
  check_stack();
  if (call_depth_ >= limits_.max_call_depth) {
    fail(ErrorKind::kLimit, "macro calls nested deeper than " + std::to_string(limits_.max_call_depth) +
                                " (runaway recursion in '" + macro.name + "'?)");
  }
  if (args.positional.size() > macro.params.size()) {
    fail(ErrorKind::kType, "macro '" + macro.name + "' takes not more than " +
                               std::to_string(macro.params.size()) + " argument(s)");
  }
  Frame frame{root_, {}};
  std::vector<bool> given(macro.params.size(), false);
  for (size_t k = 0; k < args.positional.size(); ++k) {
    frame.set(macro.params[k].first, args.positional[k]);
    given[k] = true;
  }
  for (auto& [key, value] : args.keywords) {
    size_t k = 0;
    while (k < macro.params.size() && macro.params[k].first != key) ++k;
    if (k == macro.params.size()) {
      fail(ErrorKind::kType, "macro '" + macro.name + "' takes no keyword argument '" + key + "'");
    }
    if (given[k]) fail(ErrorKind::kType, "macro '" + macro.name + "' got multiple values for argument '" + key + "'");
    frame.set(key, value);
    given[k] = true;
  }
  for (size_t k = 0; k < macro.params.size(); ++k) {
    if (given[k]) continue;
    const auto& [name, def] = macro.params[k];
    frame.set(name, def ? eval(*def, frame) : Value::undefined("parameter '" + name + "' was not provided"));
  }
  ++call_depth_;
  struct Leave {
    int& depth;
    ~Leave() { --depth; }
  } leave{call_depth_};
  return Value::string(capture(macro.body, frame));
}

Value Interp::lookup(const std::string& name, Frame& frame) {
  for (Frame* f = &frame; f; f = f->parent) {
    if (Value* v = f->find_local(name)) return *v;
  }
  return Value::undefined("'" + name + "' is undefined");
}

Args Interp::eval_args(const Expr& e, Frame& frame) {
  Args args;
  for (const auto& a : e.args) args.positional.push_back(eval(*a, frame));
  for (const auto& [k, a] : e.kwargs) args.keywords.emplace_back(k, eval(*a, frame));
  return args;
}

Value Interp::eval(const Expr& e, Frame& frame) {
  check_stack();
  try {
    return eval_inner(e, frame);
  } catch (Fail& f) {
    if (f.line == 0) {
      f.line = e.line;
      f.column = e.column;
    }
    throw;
  }
}

namespace {

// a op b on int64, or a kLimit error where Python would go past 64 bits.
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op(a, b, &r)) fail(ErrorKind::kLimit, "integer overflow: results beyond 64 bits are not supported");
  return r;
}
bool add_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul_overflow(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

// Python slice indices over a sequence of `size`.
std::vector<size_t> slice_indices(int64_t size, const Value* start, const Value* stop, const Value* step_v) {
  int64_t step = 1;
  if (step_v && !step_v->is_none()) {
    if (!step_v->is_integral()) fail(ErrorKind::kType, "slice indices must be integers or None");
    step = step_v->as_int();
    if (step == 0) fail(ErrorKind::kValue, "slice step cannot be zero");
  }
  auto bound = [&](const Value* v, int64_t def) {
    if (!v || v->is_none()) return def;
    if (!v->is_integral()) fail(ErrorKind::kType, "slice indices must be integers or None");
    int64_t x = v->as_int();
    if (x < 0) x += size;
    if (step > 0) return std::min(std::max<int64_t>(x, 0), size);
    return std::min(std::max<int64_t>(x, -1), size - 1);
  };
  const int64_t lo = bound(start, step > 0 ? 0 : size - 1);
  const int64_t hi = bound(stop, step > 0 ? size : -1);
  std::vector<size_t> out;
  for (int64_t k = lo; step > 0 ? k < hi : k > hi; k += step) out.push_back(static_cast<size_t>(k));
  return out;
}

}  // namespace

Value Interp::eval_slice(const Expr& e, Frame& frame) {
  const Value obj = eval(*e.children[0], frame);
  Value parts[3];
  for (int k = 0; k < 3; ++k) {
    if (e.slice[k]) parts[k] = eval(*e.slice[k], frame);
  }
  auto arg = [&](int k) { return e.slice[k] ? &parts[k] : nullptr; };
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_string()) {
    const std::u32string text = decode_utf8(obj.s);
    std::u32string out_text;
    for (size_t k : slice_indices(static_cast<int64_t>(text.size()), arg(0), arg(1), arg(2))) out_text += text[k];
    return Value::string(encode_utf8(out_text));
  }
  if (obj.is_list() && !obj.generator) {
    List items;
    for (size_t k : slice_indices(static_cast<int64_t>(obj.list->size()), arg(0), arg(1), arg(2))) {
      items.push_back((*obj.list)[k]);
    }
    return Value::make_list(std::move(items), obj.tuple);
  }
  return Value::undefined(type_repr(obj) + " has no element slice");
}

Value Interp::eval_inner(const Expr& e, Frame& frame) {
  using K = Expr::Kind;
  step();
  switch (e.kind) {
    case K::kLiteral: return e.value;
    case K::kName: return lookup(e.name, frame);
    case K::kAttr: return getattr(eval(*e.children[0], frame), e.name);
    case K::kItem: {
      const Value obj = eval(*e.children[0], frame);
      return getitem(obj, eval(*e.children[1], frame));
    }
    case K::kSlice: return eval_slice(e, frame);
    case K::kCall: {
      const Value callee = eval(*e.children[0], frame);
      Args args = eval_args(e, frame);
      return call(callee, args);
    }
    case K::kFilter: {
      Value operand = eval(*e.children[0], frame);
      Args args = eval_args(e, frame);
      return filter(e.name, std::move(operand), args);
    }
    case K::kTest: {
      const Value operand = eval(*e.children[0], frame);
      Args args = eval_args(e, frame);
      return Value::boolean(test(e.name, operand, args) != e.negated);
    }
    case K::kNeg:
    case K::kPos: {
      const Value v = eval(*e.children[0], frame);
      if (v.is_undefined()) fail_undefined(v);
      if (!v.is_number()) {
        fail(ErrorKind::kType, std::string("bad operand type for unary ") + (e.kind == K::kNeg ? "-" : "+") +
                                   ": '" + type_name(v) + "'");
      }
      if (e.kind == K::kPos) return v.type == Value::Type::kBool ? Value::integer(v.as_int()) : v;
      if (v.type == Value::Type::kFloat) return Value::number(-v.f);
      return Value::integer(checked(sub_overflow, 0, v.as_int()));
    }
    case K::kNot: return Value::boolean(!eval(*e.children[0], frame).truthy());
    case K::kAnd: {
      Value left = eval(*e.children[0], frame);
      return left.truthy() ? eval(*e.children[1], frame) : left;
    }
    case K::kOr: {
      Value left = eval(*e.children[0], frame);
      return left.truthy() ? left : eval(*e.children[1], frame);
    }
    case K::kBinary: {
      const Value a = eval(*e.children[0], frame);
      const Value b = eval(*e.children[1], frame);
      return binary(e.name, a, b);
    }
    case K::kCompare: {
      Value left = eval(*e.children[0], frame);
      for (size_t k = 0; k < e.ops.size(); ++k) {
        Value right = eval(*e.children[k + 1], frame);
        const std::string& op = e.ops[k];
        bool ok;
        if (op == "==") {
          ok = equals(left, right);
        } else if (op == "!=") {
          ok = !equals(left, right);
        } else if (op == "<") {
          ok = less(left, right);
        } else if (op == ">") {
          ok = less(right, left);
        } else if (op == "<=") {
          ok = equals(left, right) || less(left, right);
        } else if (op == ">=") {
          ok = equals(left, right) || less(right, left);
        } else if (op == "in") {
          ok = contains(right, left);
        } else {
          ok = !contains(right, left);
        }
        if (!ok) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case K::kCond: {
      if (eval(*e.children[0], frame).truthy()) return eval(*e.children[1], frame);
      if (e.children.size() > 2) return eval(*e.children[2], frame);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    case K::kList:
    case K::kTuple: {
      List items;
      for (const auto& c : e.children) items.push_back(eval(*c, frame));
      return Value::make_list(std::move(items), e.kind == K::kTuple);
    }
    case K::kDict: {
      Dict items;
      for (size_t k = 0; k + 1 < e.children.size(); k += 2) {
        Value key = eval(*e.children[k], frame);
        Value value = eval(*e.children[k + 1], frame);
        bool replaced = false;
        for (auto& [ek, ev] : items) {
          if (equals(ek, key)) {
            ev = value;
            replaced = true;
          }
        }
        if (!replaced) items.emplace_back(std::move(key), std::move(value));
      }
      return Value::make_dict(std::move(items));
    }
  }
  return Value::undefined();
}

Value Interp::binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    if (s.size() > limits_.max_output_bytes) fail(ErrorKind::kLimit, "a string passed Limits::max_output_bytes");
    return Value::string(std::move(s));
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  const bool numbers = a.is_number() && b.is_number();
  const bool ints = numbers && a.is_integral() && b.is_integral();
  auto unsupported = [&]() -> Value {
    fail(ErrorKind::kType, "unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" +
                               type_name(b) + "'");
  };
  auto repeat = [&](const Value& seq, int64_t times) -> Value {
    if (times <= 0) return seq.is_string() ? Value::string("") : Value::make_list({}, seq.tuple);
    const size_t unit = seq.is_string() ? seq.s.size() : seq.list->size();
    if (unit != 0 && static_cast<uint64_t>(times) > limits_.max_output_bytes / unit) {
      fail(ErrorKind::kLimit, "a repeated string or list would pass Limits::max_output_bytes");
    }
    // What the copies hold: a list's strings are copied with it.
    size_t bytes = seq.is_string() ? seq.s.size() : 0;
    if (seq.is_list()) {
      for (const Value& item : *seq.list) bytes += sizeof(Value) + item.s.size();
    }
    if (bytes != 0 && static_cast<uint64_t>(times) > SIZE_MAX / bytes) reserve_bytes(SIZE_MAX);
    reserve_bytes(bytes * static_cast<size_t>(times));
    if (seq.is_string()) {
      std::string s;
      for (int64_t k = 0; k < times; ++k) s += seq.s;
      Value repeated = Value::string(std::move(s));
      repeated.markup = seq.markup;
      return repeated;
    }
    List items;
    for (int64_t k = 0; k < times; ++k) items.insert(items.end(), seq.list->begin(), seq.list->end());
    return Value::make_list(std::move(items), seq.tuple);
  };
  if (op == "+") {
    if (ints) return Value::integer(checked(add_overflow, a.as_int(), b.as_int()));
    if (numbers) return Value::number(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      if (a.s.size() + b.s.size() > limits_.max_output_bytes) fail(ErrorKind::kLimit, "a string passed Limits::max_output_bytes");
      // Markup + str escapes the str (and str + Markup, through Markup.__radd__): "'x'|safe + text".
      if (a.markup != b.markup) {
        return Value::make_markup(a.markup ? a.s + html_escape(b.s) : html_escape(a.s) + b.s);
      }
      Value sum = Value::string(a.s + b.s);
      sum.markup = a.markup;
      return sum;
    }
    if (a.is_list() && b.is_list() && a.tuple == b.tuple && !a.generator && !b.generator) {
      reserve_bytes((a.list->size() + b.list->size()) * sizeof(Value));
      List items = *a.list;
      items.insert(items.end(), b.list->begin(), b.list->end());
      return Value::make_list(std::move(items), a.tuple);
    }
    if (a.is_string() || a.is_list()) {
      fail(ErrorKind::kType, "can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
    }
    return unsupported();
  }
  if (op == "-") {
    if (ints) return Value::integer(checked(sub_overflow, a.as_int(), b.as_int()));
    if (numbers) return Value::number(a.as_float() - b.as_float());
    return unsupported();
  }
  if (op == "*") {
    if (ints) return Value::integer(checked(mul_overflow, a.as_int(), b.as_int()));
    if (numbers) return Value::number(a.as_float() * b.as_float());
    if ((a.is_string() || (a.is_list() && !a.generator)) && b.is_integral()) return repeat(a, b.as_int());
    if ((b.is_string() || (b.is_list() && !b.generator)) && a.is_integral()) return repeat(b, a.as_int());
    fail(ErrorKind::kType, "can't multiply sequence by non-int of type '" +
                               type_name(a.is_string() || a.is_list() ? b : a) + "'");
  }
  if (op == "/") {
    if (!numbers) return unsupported();
    if (b.as_float() == 0) fail(ErrorKind::kValue, "division by zero");
    return Value::number(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    if (op == "%" && a.is_string()) {
      Args args;
      args.positional.push_back(b);
      return filter("format", a, args);
    }
    if (!numbers) return unsupported();
    if (ints) {
      const int64_t x = a.as_int();
      const int64_t y = b.as_int();
      if (y == 0) fail(ErrorKind::kValue, op == "//" ? "integer division or modulo by zero" : "integer modulo by zero");
      if (x == INT64_MIN && y == -1) fail(ErrorKind::kLimit, "integer overflow: results beyond 64 bits are not supported");
      int64_t q = x / y;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        q -= 1;
        m += y;
      }
      return Value::integer(op == "//" ? q : m);
    }
    const double x = a.as_float();
    const double y = b.as_float();
    if (y == 0) fail(ErrorKind::kValue, op == "//" ? "float floor division by zero" : "float modulo");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    if (op == "%") return Value::number(m);
    return Value::number(std::floor(x / y));
  }
  if (op == "**") {
    if (!numbers) return unsupported();
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int();
      int64_t exp = b.as_int();
      int64_t result = 1;
      while (exp > 0) {
        if (exp & 1) result = checked(mul_overflow, result, base);
        exp >>= 1;
        if (exp) base = checked(mul_overflow, base, base);
      }
      return Value::integer(result);
    }
    if (a.as_float() == 0 && b.as_float() < 0) fail(ErrorKind::kValue, "0.0 cannot be raised to a negative power");
    return Value::number(std::pow(a.as_float(), b.as_float()));
  }
  return unsupported();
}

Value Interp::call(const Value& callee, Args& args) {
  if (callee.type == Value::Type::kFunction) return (*callee.fn)(*this, args);
  if (callee.is_undefined()) fail_undefined(callee);
  fail(ErrorKind::kType, "'" + type_name(callee) + "' object is not callable");
}

List Interp::iterate(const Value& v) {
  switch (v.type) {
    case Value::Type::kUndefined: return {};
    case Value::Type::kList:
      charge_steps(v.list->size() >> 4);
      return *v.list;
    case Value::Type::kDict: {
      charge_steps(v.dict->size() >> 4);
      List keys;
      for (const auto& [k, item] : *v.dict) keys.push_back(k);
      return keys;
    }
    case Value::Type::kString: {
      reserve_bytes(code_point_count(v.s) * sizeof(Value));  // one str per character
      List chars;
      for (char32_t c : decode_utf8(v.s)) chars.push_back(Value::string(encode_utf8(std::u32string(1, c))));
      return chars;
    }
    default: fail(ErrorKind::kType, "'" + type_name(v) + "' object is not iterable");
  }
}

namespace {

// Python's special attributes (__class__, __globals__, __init__...): what Jinja's sandbox refuses,
// so a template cannot walk from a value to the interpreter's internals.
bool is_dunder(const std::string& name) {
  return name.size() > 4 && name.compare(0, 2, "__") == 0 && name.compare(name.size() - 2, 2, "__") == 0;
}

Value refused(const Value& obj, const std::string& name) {
  return Value::unsafe("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.");
}

}  // namespace

Value Interp::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (is_dunder(name)) return refused(obj, name);
  if (obj.type == Value::Type::kNamespace) {
    if (const Value* v = obj.lookup(name)) return *v;
    return Value::undefined("'" + type_repr(obj) + "' has no attribute '" + name + "'");
  }
  // Python attribute first (a dict's .items is the method), then the item, as Jinja does.
  Value method = bound_method(obj, name);
  if (!method.is_undefined()) return method;
  if (obj.is_dict()) {
    if (const Value* v = obj.lookup(name)) return *v;
  }
  return Value::undefined("'" + type_repr(obj) + "' has no attribute '" + name + "'");
}

Value Interp::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  // A missing key's Undefined as a key finds nothing (Python: a KeyError, so Undefined), as in
  // Hermes' basic_type_map[json_spec.type].
  if (obj.is_dict() || obj.type == Value::Type::kNamespace) {
    if (obj.is_dict()) {
      if (const Value* v = obj.lookup(key)) return *v;
    }
  } else if (((obj.is_list() && !obj.generator) || obj.is_string()) && key.is_integral()) {
    int64_t index = key.as_int();
    if (obj.is_list()) {
      const auto size = static_cast<int64_t>(obj.list->size());
      if (index < 0) index += size;
      if (index >= 0 && index < size) return (*obj.list)[static_cast<size_t>(index)];
    } else {
      const std::u32string text = decode_utf8(obj.s);
      const auto size = static_cast<int64_t>(text.size());
      if (index < 0) index += size;
      if (index >= 0 && index < size) {
        return Value::string(encode_utf8(std::u32string(1, text[static_cast<size_t>(index)])));
      }
    }
  }
  if (key.is_string()) {
    if (is_dunder(key.s)) return refused(obj, key.s);
    if (obj.type == Value::Type::kNamespace) {
      if (const Value* v = obj.lookup(key.s)) return *v;
    }
    Value method = bound_method(obj, key.s);
    if (!method.is_undefined()) return method;
    return Value::undefined("'" + type_repr(obj) + "' has no attribute '" + key.s + "'");
  }
  return Value::undefined(type_repr(obj) + " has no element " + to_repr(key));
}

}  // namespace rne::chat::detail
