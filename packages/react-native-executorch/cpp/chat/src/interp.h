// The tree-walking evaluator over a parsed Program.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ast.h"
#include "rne/chat/jinja.h"

namespace rne::chat::detail {

struct Frame {
  Frame* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  Value* find_local(const std::string& name);
  void set(const std::string& name, Value v);
};

class Interp {
 public:
  Interp(const Limits& limits, Frame& globals);

  std::string out;
  int64_t now_seconds = 0;  // strftime_now's fixed time (UTC); 0: the clock

  void run(const Program& program);
  Value call(const Value& callee, Args& args);
  Value filter(const std::string& name, Value operand, Args& args);
  bool test(const std::string& name, const Value& operand, Args& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  // Python's iter(): list items, dict keys, string characters; Undefined is empty.
  List iterate(const Value& v);
  void step();
  // A kLimit error once the stack has grown Limits::max_stack_bytes below run()'s frame.
  void check_stack();
  void check_output();

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const Body& body, Frame& frame);
  Flow exec_node(const Node& node, Frame& frame);
  // Kept out of line: their locals would otherwise enlarge the frames every nested statement,
  // expression and recursive macro call pays for.
  __attribute__((noinline)) Flow exec_for(const Node& node, Frame& frame);
  Value eval(const Expr& e, Frame& frame);
  Value eval_inner(const Expr& e, Frame& frame);
  __attribute__((noinline)) Value eval_slice(const Expr& e, Frame& frame);
  Value lookup(const std::string& name, Frame& frame);
  Value binary(const std::string& op, const Value& a, const Value& b);
  Value call_macro(const Node& macro, Args& args);
  std::string capture(const Body& body, Frame& frame);
  Value apply_filters(const std::vector<ExprPtr>& filters, Value v, Frame& frame);
  Args eval_args(const Expr& e, Frame& frame);
  // filter()'s families (builtins.cpp): each returns nothing for a name it does not have.
  std::optional<Value> value_filter(const std::string& name, const Value& v, Args& a);
  std::optional<Value> text_filter(const std::string& name, const Value& v, Args& a);
  std::optional<Value> number_filter(const std::string& name, const Value& v, Args& a);
  std::optional<Value> collection_filter(const std::string& name, const Value& v, Args& a);
  std::optional<Value> per_item_filter(const std::string& name, const Value& v, Args& a);
  std::optional<Value> aggregate_filter(const std::string& name, const Value& v, Args& a);

  const Limits& limits_;
  Frame& globals_;
  Frame* root_ = nullptr;
  int call_depth_ = 0;
  const char* stack_base_ = nullptr;
};

// The builtins templates call by name: range, dict, namespace, raise_exception, strftime_now.
void add_globals(Frame& globals);
// A str/dict/list method bound to `obj`, or an Undefined when `obj` has none called `name`.
Value bound_method(const Value& obj, const std::string& name);
bool contains(const Value& container, const Value& item);

}  // namespace rne::chat::detail
