// The parsed template: expressions and statements, each with its template position.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "value.h"

namespace rne::chat::detail {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kAttr,      // a.name            (children[0])
    kItem,      // a[b]              (children[0], children[1])
    kSlice,     // a[b:c:d]          (children[0]; slice[0..2] may be null)
    kCall,      // f(args)           (children[0] callee, args)
    kFilter,    // x | name(args)    (children[0] operand, args)
    kTest,      // x is [not] name(args)
    kNeg, kPos, kNot,
    kBinary,    // name = "+", "-", "*", "/", "//", "%", "**", "~"
    kAnd, kOr,
    kCompare,   // children[0] op[k] children[k+1]...; ops in `ops`
    kCond,      // children[1] if children[0] else children[2] (may be absent)
    kList, kTuple,
    kDict,      // children: key, value, key, value, ...
  };
  Kind kind;
  int line = 0;
  int column = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::string> ops;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr slice[3];

  Expr() = default;
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  // Frees the subtree with an explicit stack: a chain of 60,000 operands must not take 60,000
  // frames to free (parse_template refuses it, after building it).
  ~Expr();
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue, kFilterBlock };
  Kind kind;
  int line = 0;
  int column = 0;
  std::string text;                 // kText
  ExprPtr expr;                     // kOutput, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (condition, body)...
  Body body;                        // kFor, kSetBlock, kMacro, kFilterBlock
  Body else_body;                   // kIf, kFor
  ExprPtr condition;                // kFor's inline `if`
  std::vector<std::string> targets; // kFor/kSet names; kSet "ns.attr" as {"ns", "attr"} with attr_target
  bool attr_target = false;
  std::string name;                 // kMacro name
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro (default may be null)
  std::vector<ExprPtr> filters;     // kSetBlock / kFilterBlock: kFilter exprs with no operand
};

struct Program {
  Body body;
};

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

// Parses a template (newlines already normalised); throws Fail with the position on error.
// Expressions deeper than `max_expression_depth` (operands chained left to right, each a level)
// are a kLimit error.
std::unique_ptr<Program> parse_template(const std::string& source, int max_nesting, int max_expression_depth);

}  // namespace rne::chat::detail
