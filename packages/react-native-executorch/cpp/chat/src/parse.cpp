// Lexer and parser. The lexer follows Jinja's rules for what output whitespace a tag removes:
// "-" strips all whitespace on that side; trim_blocks drops the newline after a block or comment
// tag; lstrip_blocks drops spaces and tabs before a block or comment tag that starts its line
// ("+" keeps them); expression tags are never trimmed without "-".
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "ast.h"

namespace rne::chat::detail {
namespace {

struct Token {
  enum class Type { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };
  Type type;
  std::string text;
  int line = 0;
  int column = 0;
};
using TT = Token::Type;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python's str.rstrip() and "only whitespace" over UTF-8 text.
std::string rstrip_text(const std::string& s) {
  std::u32string u = decode_utf8(s);
  while (!u.empty() && is_py_space(u.back())) u.pop_back();
  return encode_utf8(u);
}
bool all_space(const std::string& s) {
  if (s.empty()) return false;
  for (char32_t c : decode_utf8(s)) {
    if (!is_py_space(c)) return false;
  }
  return true;
}

class Lexer {
 public:
  explicit Lexer(const std::string& src) : src_(src) {
    line_starts_.push_back(0);
    for (size_t k = 0; k < src.size(); ++k) {
      if (src[k] == '\n') line_starts_.push_back(k + 1);
    }
  }

  std::vector<Token> run() {
    const size_t n = src_.size();
    while (pos_ < n) {
      size_t at = std::string::npos;
      for (size_t k = src_.find('{', pos_); k != std::string::npos && k + 1 < n; k = src_.find('{', k + 1)) {
        const char c = src_[k + 1];
        if (c == '{' || c == '%' || c == '#') {
          at = k;
          break;
        }
      }
      if (at == std::string::npos) {
        emit(TT::kData, src_.substr(pos_), pos_);
        break;
      }
      const char kind = src_[at + 1];
      size_t after = at + 2;
      const char sign = after < n && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
      std::string text = src_.substr(pos_, at - pos_);
      if (sign == '-') {
        text = rstrip_text(text);
      } else if (sign != '+' && kind != '{') {
        const size_t nl = text.rfind('\n');
        const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting_) && all_space(text.substr(l_pos))) text.resize(l_pos);
      }
      if (!text.empty()) emit(TT::kData, text, pos_);
      if (sign) ++after;
      if (kind == '#') {
        comment(at, after);
      } else if (kind == '%' && raw_block(at, after)) {
        // handled
      } else {
        tag(kind, at, after);
      }
    }
    tokens_.push_back({TT::kEof, "", position(n).first, position(n).second});
    return std::move(tokens_);
  }

 private:
  std::pair<int, int> position(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts_[line - 1] + 1)};
  }
  [[noreturn]] void error(size_t offset, const std::string& message) const {
    const auto [line, column] = position(offset);
    throw Fail{ErrorKind::kSyntax, message, line, column};
  }
  void emit(TT type, std::string text, size_t offset) {
    const auto [line, column] = position(offset);
    tokens_.push_back({type, std::move(text), line, column});
  }
  // After a block/comment end: "-" strips all following whitespace, "+" nothing, else one "\n".
  void close(size_t end_pos, char sign, bool trim_newline) {
    pos_ = end_pos;
    if (sign == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (sign != '+' && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  void comment(size_t at, size_t after) {
    const size_t end = src_.find("#}", after);
    if (end == std::string::npos) error(at, "missing end of comment tag");
    const char sign = end > after && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    close(end + 2, sign, true);
  }

  // {% raw %}...{% endraw %}: the text between is output as is.
  bool raw_block(size_t at, size_t after) {
    size_t p = after;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    char begin_sign = 0;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) begin_sign = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) return false;
    p += 2;
    if (begin_sign == '-') {
      while (p < src_.size() && is_space(src_[p])) ++p;
    }
    for (size_t k = src_.find("{%", p); k != std::string::npos; k = src_.find("{%", k + 2)) {
      size_t q = k + 2;
      char end_sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) end_sign = src_[q++];
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") != 0) continue;
      q += 6;
      while (q < src_.size() && is_space(src_[q])) ++q;
      char close_sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) close_sign = src_[q++];
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(p, k - p);
      if (end_sign == '-') text = rstrip_text(text);
      if (!text.empty()) emit(TT::kData, text, p);
      close(q + 2, close_sign, true);
      return true;
    }
    error(at, "missing end of raw directive");
  }

  void tag(char kind, size_t at, size_t after) {
    emit(kind == '{' ? TT::kVarBegin : TT::kBlockBegin, "", at);
    pos_ = after;
    int depth = 0;  // open brackets: a "}}" inside {'a': {'b': 1}} is not the tag's end
    bool after_dot = false;
    const size_t n = src_.size();
    while (true) {
      while (pos_ < n && is_space(src_[pos_])) ++pos_;
      if (pos_ >= n) {
        error(at, kind == '{' ? "unexpected end of template, expected end of print statement ('}}')"
                             : "unexpected end of template, expected end of statement block ('%}')");
      }
      if (depth == 0) {
        if (kind == '{') {
          if (src_.compare(pos_, 3, "-}}") == 0) {
            emit(TT::kVarEnd, "", pos_);
            close(pos_ + 3, '-', false);
            return;
          }
          if (src_.compare(pos_, 2, "}}") == 0) {
            emit(TT::kVarEnd, "", pos_);
            close(pos_ + 2, '+', false);
            return;
          }
        } else {
          const char s = src_[pos_];
          if ((s == '-' || s == '+') && src_.compare(pos_ + 1, 2, "%}") == 0) {
            emit(TT::kBlockEnd, "", pos_);
            close(pos_ + 3, s, true);
            return;
          }
          if (src_.compare(pos_, 2, "%}") == 0) {
            emit(TT::kBlockEnd, "", pos_);
            close(pos_ + 2, 0, true);
            return;
          }
        }
      }
      const size_t start = pos_;
      const char c = src_[pos_];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        while (pos_ < n && (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) ++pos_;
        emit(TT::kName, src_.substr(start, pos_ - start), start);
        after_dot = false;
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        number(start, after_dot);
        after_dot = false;
        continue;
      }
      if (c == '\'' || c == '"') {
        string_literal(start);
        after_dot = false;
        continue;
      }
      static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
      std::string op;
      for (const char* two : kTwo) {
        if (src_.compare(pos_, 2, two) == 0) op = two;
      }
      if (op.empty()) {
        if (std::strchr("+-/*%~[](){}<>=.:|,;", c) == nullptr) {
          error(start, std::string("unexpected char '") + c + "'");
        }
        op = std::string(1, c);
      }
      if (op == "(" || op == "[" || op == "{") ++depth;
      if (op == ")" || op == "]" || op == "}") {
        if (depth == 0) error(start, "unexpected '" + op + "'");
        --depth;
      }
      pos_ += op.size();
      emit(TT::kOp, op, start);
      after_dot = op == ".";
    }
  }

  void number(size_t start, bool integer_only) {
    const size_t n = src_.size();
    auto digits = [&] {
      while (pos_ < n && (std::isdigit(static_cast<unsigned char>(src_[pos_])) ||
                          (src_[pos_] == '_' && pos_ + 1 < n && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))))) {
        ++pos_;
      }
    };
    digits();
    bool is_float = false;
    if (!integer_only && pos_ + 1 < n && src_[pos_] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos_ + 1]))) {
      ++pos_;
      digits();
      is_float = true;
    }
    if (!integer_only && pos_ < n && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t q = pos_ + 1;
      if (q < n && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < n && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        pos_ = q;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (size_t k = start; k < pos_; ++k) {
      if (src_[k] != '_') text += src_[k];
    }
    emit(is_float ? TT::kFloat : TT::kInt, text, start);
  }

  void string_literal(size_t start) {
    const char quote = src_[pos_++];
    std::string out;
    const size_t n = src_.size();
    while (true) {
      if (pos_ >= n) error(start, "unexpected end of string literal");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= n) error(start, "unexpected end of string literal");
      const char e = src_[pos_++];
      auto hex = [&](int count) {
        if (pos_ + count > n) error(start, "truncated \\x/\\u escape in a string literal");
        uint32_t v = 0;
        for (int k = 0; k < count; ++k) {
          const char h = src_[pos_++];
          if (!std::isxdigit(static_cast<unsigned char>(h))) error(start, "bad \\x/\\u escape in a string literal");
          v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        if (v > 0x10FFFF) error(start, "escape out of the Unicode range in a string literal");
        out += encode_utf8(std::u32string(1, static_cast<char32_t>(v)));
      };
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '0': out += '\0'; break;
        case '\n': break;  // a line continuation
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        default:
          out += '\\';
          out += e;
      }
    }
    emit(TT::kString, out, start);
  }

  const std::string& src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_nesting) : t_(std::move(tokens)), max_nesting_(max_nesting) {}

  std::unique_ptr<Program> run() {
    auto program = std::make_unique<Program>();
    program->body = subparse({});
    if (cur().type != TT::kEof) error("unexpected '" + cur().text + "'");
    return program;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  Token next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  [[noreturn]] void error(const std::string& message) const {
    throw Fail{ErrorKind::kSyntax, message, cur().line, cur().column};
  }
  bool is_op(const char* op) const { return cur().type == TT::kOp && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == TT::kName && cur().text == name; }
  void expect_op(const char* op) {
    if (!is_op(op)) error(std::string("expected '") + op + "', got " + describe(cur()));
    next();
  }
  std::string expect_name() {
    if (cur().type != TT::kName) error("expected a name, got " + describe(cur()));
    return next().text;
  }
  void expect_block_end() {
    if (cur().type != TT::kBlockEnd) error("expected end of statement block, got " + describe(cur()));
    next();
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case TT::kEof: return "end of template";
      case TT::kBlockEnd: return "end of statement block";
      case TT::kVarEnd: return "end of print statement";
      case TT::kString: return "a string";
      default: return "'" + t.text + "'";
    }
  }
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > p.max_nesting_) {
        p.error("the template nests deeper than " + std::to_string(p.max_nesting_) + " levels");
      }
    }
    ~DepthGuard() { --p.depth_; }
  };

  NodePtr make_node(Node::Kind kind, const Token& at) {
    auto node = std::make_unique<Node>();
    node->kind = kind;
    node->line = at.line;
    node->column = at.column;
    return node;
  }
  ExprPtr make_expr(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  // Statements up to a block tag whose first name is in `ends` (left unconsumed after "{%").
  Body subparse(const std::vector<std::string>& ends) {
    DepthGuard guard(*this);
    Body body;
    while (cur().type != TT::kEof) {
      const Token start = cur();
      if (start.type == TT::kData) {
        auto node = make_node(Node::Kind::kText, start);
        node->text = next().text;
        body.push_back(std::move(node));
      } else if (start.type == TT::kVarBegin) {
        next();
        auto node = make_node(Node::Kind::kOutput, start);
        node->expr = parse_tuple(false);
        if (cur().type != TT::kVarEnd) error("expected end of print statement, got " + describe(cur()));
        next();
        body.push_back(std::move(node));
      } else if (start.type == TT::kBlockBegin) {
        const Token& word = peek();
        if (word.type == TT::kName && std::find(ends.begin(), ends.end(), word.text) != ends.end()) {
          next();
          return body;
        }
        next();
        body.push_back(statement(start));
      } else {
        error("unexpected " + describe(start));
      }
    }
    if (!ends.empty()) {
      error("unexpected end of template; Jinja was looking for one of these tags: '" + join(ends) +
            "'. The innermost block that needs to be closed is not closed");
    }
    return body;
  }
  static std::string join(const std::vector<std::string>& words) {
    std::string out;
    for (const auto& w : words) out += (out.empty() ? "" : "' or '") + w;
    return out;
  }

  NodePtr statement(const Token& start) {
    if (cur().type != TT::kName) error("tag name expected");
    const std::string word = next().text;
    if (word == "if") return parse_if(start);
    if (word == "for") return parse_for(start);
    if (word == "set") return parse_set(start);
    if (word == "macro") return parse_macro(start);
    if (word == "filter") return parse_filter_block(start);
    if (word == "break" || word == "continue") {
      if (loop_depth_ == 0) error("'" + word + "' outside of a for loop");
      expect_block_end();
      return make_node(word == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, start);
    }
    if (word == "generation") {  // transformers' assistant-mask marker: renders its body
      expect_block_end();
      auto node = make_node(Node::Kind::kFilterBlock, start);
      node->body = subparse({"endgeneration"});
      next();
      expect_block_end();
      return node;
    }
    i_ -= 1;
    error("Encountered unknown tag '" + word + "'.");
  }

  NodePtr parse_if(const Token& start) {
    auto node = make_node(Node::Kind::kIf, start);
    while (true) {
      ExprPtr cond = parse_tuple(false);
      expect_block_end();
      Body body = subparse({"elif", "else", "endif"});
      node->branches.emplace_back(std::move(cond), std::move(body));
      const std::string word = next().text;
      if (word == "elif") continue;
      if (word == "else") {
        expect_block_end();
        node->else_body = subparse({"endif"});
        next();
      }
      expect_block_end();
      return node;
    }
  }

  NodePtr parse_for(const Token& start) {
    auto node = make_node(Node::Kind::kFor, start);
    node->targets.push_back(expect_name());
    while (is_op(",")) {
      next();
      if (cur().type != TT::kName) break;
      node->targets.push_back(expect_name());
    }
    if (!is_name("in")) error("expected 'in', got " + describe(cur()));
    next();
    node->expr = parse_tuple(true);
    if (is_name("if")) {
      next();
      node->condition = parse_expression(true);
    }
    if (is_name("recursive")) error("recursive for loops are not supported by this renderer");
    expect_block_end();
    ++loop_depth_;
    node->body = subparse({"endfor", "else"});
    --loop_depth_;
    if (next().text == "else") {
      expect_block_end();
      node->else_body = subparse({"endfor"});
      next();
    }
    expect_block_end();
    return node;
  }

  NodePtr parse_set(const Token& start) {
    std::vector<std::string> targets{expect_name()};
    bool attr = false;
    if (is_op(".")) {
      next();
      targets.push_back(expect_name());
      attr = true;
    } else {
      while (is_op(",")) {
        next();
        targets.push_back(expect_name());
      }
    }
    if (is_op("=")) {
      next();
      auto node = make_node(Node::Kind::kSet, start);
      node->targets = std::move(targets);
      node->attr_target = attr;
      node->expr = parse_tuple(false);
      expect_block_end();
      return node;
    }
    if (attr || targets.size() != 1) error("expected '=' after the set target");
    auto node = make_node(Node::Kind::kSetBlock, start);
    node->targets = std::move(targets);
    while (is_op("|")) {
      next();
      node->filters.push_back(parse_filter_call(nullptr));
    }
    expect_block_end();
    node->body = subparse({"endset"});
    next();
    expect_block_end();
    return node;
  }

  NodePtr parse_macro(const Token& start) {
    auto node = make_node(Node::Kind::kMacro, start);
    node->name = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!node->params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string param = expect_name();
      ExprPtr def;
      if (is_op("=")) {
        next();
        def = parse_expression(true);
      } else if (!node->params.empty() && node->params.back().second) {
        error("non-default argument follows default argument");
      }
      node->params.emplace_back(std::move(param), std::move(def));
    }
    next();
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    node->body = subparse({"endmacro"});
    loop_depth_ = saved;
    next();
    if (cur().type == TT::kName) next();  // {% endmacro name %}
    expect_block_end();
    return node;
  }

  NodePtr parse_filter_block(const Token& start) {
    auto node = make_node(Node::Kind::kFilterBlock, start);
    node->filters.push_back(parse_filter_call(nullptr));
    while (is_op("|")) {
      next();
      node->filters.push_back(parse_filter_call(nullptr));
    }
    expect_block_end();
    node->body = subparse({"endfilter"});
    next();
    expect_block_end();
    return node;
  }

  // ---- expressions (Jinja's precedence) ----
  ExprPtr parse_tuple(bool simplified) {
    const Token start = cur();
    ExprPtr first = simplified ? parse_or() : parse_expression(true);
    if (!is_op(",")) return first;
    auto tuple = make_expr(Expr::Kind::kTuple, start);
    tuple->children.push_back(std::move(first));
    while (is_op(",")) {
      next();
      if (cur().type == TT::kVarEnd || cur().type == TT::kBlockEnd || is_op(")")) break;
      tuple->children.push_back(simplified ? parse_or() : parse_expression(true));
    }
    return tuple;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    const Token start = cur();
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      next();
      auto cond = make_expr(Expr::Kind::kCond, start);
      cond->children.push_back(parse_or());
      cond->children.push_back(std::move(expr));
      if (is_name("else")) {
        next();
        cond->children.push_back(parse_condexpr());
      }
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const Token at = next();
      auto node = make_expr(Expr::Kind::kOr, at);
      node->children.push_back(std::move(left));
      node->children.push_back(parse_and());
      left = std::move(node);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const Token at = next();
      auto node = make_expr(Expr::Kind::kAnd, at);
      node->children.push_back(std::move(left));
      node->children.push_back(parse_not());
      left = std::move(node);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      const Token at = next();
      auto node = make_expr(Expr::Kind::kNot, at);
      node->children.push_back(parse_not());
      return node;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token start = cur();
    ExprPtr first = parse_math1();
    ExprPtr node;
    while (true) {
      std::string op;
      if (cur().type == TT::kOp &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
           cur().text == ">" || cur().text == ">=")) {
        op = next().text;
      } else if (is_name("in")) {
        next();
        op = "in";
      } else if (is_name("not") && peek().type == TT::kName && peek().text == "in") {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!node) {
        node = make_expr(Expr::Kind::kCompare, start);
        node->children.push_back(std::move(first));
      }
      node->ops.push_back(op);
      node->children.push_back(parse_math1());
    }
    return node ? std::move(node) : std::move(first);
  }

  ExprPtr binary(const std::string& op, ExprPtr left, ExprPtr right, const Token& at) {
    auto node = make_expr(Expr::Kind::kBinary, at);
    node->name = op;
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    return node;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token at = next();
      left = binary(at.text, std::move(left), parse_concat(), at);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const Token at = next();
      left = binary("~", std::move(left), parse_math2(), at);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token at = next();
      left = binary(at.text, std::move(left), parse_pow(), at);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const Token at = next();
      left = binary("**", std::move(left), parse_unary(true), at);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token at = next();
      node = make_expr(at.text == "-" ? Expr::Kind::kNeg : Expr::Kind::kPos, at);
      node->children.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token at = cur();
    switch (at.type) {
      case TT::kName: {
        next();
        auto node = make_expr(Expr::Kind::kLiteral, at);
        if (at.text == "true" || at.text == "True") {
          node->value = Value::boolean(true);
        } else if (at.text == "false" || at.text == "False") {
          node->value = Value::boolean(false);
        } else if (at.text == "none" || at.text == "None") {
          node->value = Value::none();
        } else {
          node->kind = Expr::Kind::kName;
          node->name = at.text;
        }
        return node;
      }
      case TT::kString: {
        std::string text;
        while (cur().type == TT::kString) text += next().text;  // adjacent literals concatenate
        auto node = make_expr(Expr::Kind::kLiteral, at);
        node->value = Value::string(std::move(text));
        return node;
      }
      case TT::kInt: {
        next();
        auto node = make_expr(Expr::Kind::kLiteral, at);
        errno = 0;
        const long long v = std::strtoll(at.text.c_str(), nullptr, 10);
        if (errno == ERANGE) {
          // Python would hold it as a big int; printing a rounded float instead would be wrong.
          throw Fail{ErrorKind::kLimit, "the integer " + at.text.substr(0, 40) +
                                            " is beyond 64 bits, which this renderer does not support",
                     at.line, at.column};
        } else {
          node->value = Value::integer(v);
        }
        return node;
      }
      case TT::kFloat: {
        next();
        auto node = make_expr(Expr::Kind::kLiteral, at);
        node->value = Value::number(std::strtod(at.text.c_str(), nullptr));
        return node;
      }
      case TT::kOp:
        if (at.text == "(") {
          next();
          if (is_op(")")) {
            next();
            return make_expr(Expr::Kind::kTuple, at);
          }
          ExprPtr inner = parse_tuple(false);
          expect_op(")");
          return inner;
        }
        if (at.text == "[") {
          next();
          auto node = make_expr(Expr::Kind::kList, at);
          while (!is_op("]")) {
            if (!node->children.empty()) expect_op(",");
            if (is_op("]")) break;
            node->children.push_back(parse_expression(true));
          }
          next();
          return node;
        }
        if (at.text == "{") {
          next();
          auto node = make_expr(Expr::Kind::kDict, at);
          while (!is_op("}")) {
            if (!node->children.empty()) expect_op(",");
            if (is_op("}")) break;
            node->children.push_back(parse_expression(true));
            expect_op(":");
            node->children.push_back(parse_expression(true));
          }
          next();
          return node;
        }
        break;
      default: break;
    }
    error("unexpected " + describe(at));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      const Token at = cur();
      if (is_op(".")) {
        next();
        auto attr = make_expr(Expr::Kind::kAttr, at);
        if (cur().type == TT::kName) {
          attr->name = next().text;
        } else if (cur().type == TT::kInt) {  // x.0 is x[0]
          attr->kind = Expr::Kind::kItem;
          auto index = make_expr(Expr::Kind::kLiteral, cur());
          index->value = Value::integer(std::strtoll(next().text.c_str(), nullptr, 10));
          attr->children.push_back(std::move(node));
          attr->children.push_back(std::move(index));
          node = std::move(attr);
          continue;
        } else {
          error("expected an attribute name after '.', got " + describe(cur()));
        }
        attr->children.push_back(std::move(node));
        node = std::move(attr);
      } else if (is_op("[")) {
        next();
        node = parse_subscript(std::move(node), at);
      } else if (is_op("(")) {
        auto call = make_expr(Expr::Kind::kCall, at);
        call->line = node->line;  // a failing call names where the callee starts
        call->column = node->column;
        call->children.push_back(std::move(node));
        parse_call_args(*call);
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target, const Token& at) {
    ExprPtr parts[3];
    int colons = 0;
    while (!is_op("]")) {
      if (is_op(":")) {
        if (++colons > 2) error("too many ':' in a slice");
        next();
        continue;
      }
      if (parts[colons]) error("expected ':' or ']' in a subscript, got " + describe(cur()));
      parts[colons] = parse_expression(true);
    }
    next();
    if (colons == 0) {
      if (!parts[0]) error("empty subscript");
      auto item = make_expr(Expr::Kind::kItem, at);
      item->children.push_back(std::move(target));
      item->children.push_back(std::move(parts[0]));
      return item;
    }
    auto slice = make_expr(Expr::Kind::kSlice, at);
    slice->children.push_back(std::move(target));
    for (int k = 0; k < 3; ++k) slice->slice[k] = std::move(parts[k]);
    return slice;
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) error("*args and **kwargs in calls are not supported by this renderer");
      if (cur().type == TT::kName && peek().type == TT::kOp && peek().text == "=") {
        std::string key = next().text;
        next();
        call.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!call.kwargs.empty()) error("positional argument after a keyword argument");
        call.args.push_back(parse_expression(true));
      }
    }
    next();
  }

  // name[.name](args) after "|"; `operand` becomes children[0].
  ExprPtr parse_filter_call(ExprPtr operand) {
    const Token at = cur();
    auto filter = make_expr(Expr::Kind::kFilter, at);
    filter->name = expect_name();
    while (is_op(".")) {
      next();
      filter->name += "." + expect_name();
    }
    if (!is_known_filter(filter->name)) {
      throw Fail{ErrorKind::kSyntax, "No filter named '" + filter->name + "'.", at.line, at.column};
    }
    filter->children.push_back(std::move(operand));
    if (is_op("(")) parse_call_args(*filter);
    return filter;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        node = parse_filter_call(std::move(node));
      } else if (is_name("is")) {
        const Token at = next();
        auto test = make_expr(Expr::Kind::kTest, at);
        if (is_name("not")) {
          next();
          test->negated = true;
        }
        test->name = expect_name();
        while (is_op(".")) {
          next();
          test->name += "." + expect_name();
        }
        if (!is_known_test(test->name)) {
          throw Fail{ErrorKind::kSyntax, "No test named '" + test->name + "'.", at.line, at.column};
        }
        test->children.push_back(std::move(node));
        if (is_op("(")) {
          parse_call_args(*test);
        } else if ((cur().type == TT::kName || cur().type == TT::kString || cur().type == TT::kInt ||
                    cur().type == TT::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) error("You cannot chain multiple tests with is");
          test->args.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(test);
      } else if (is_op("(")) {
        const Token at = cur();
        auto call = make_expr(Expr::Kind::kCall, at);
        call->children.push_back(std::move(node));
        parse_call_args(*call);
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int max_nesting_;
  int depth_ = 0;
  int loop_depth_ = 0;
};

// Every direct subexpression of `e`.
template <typename F>
void for_each_child(Expr& e, F&& f) {
  for (auto& c : e.children) f(c);
  for (auto& c : e.args) f(c);
  for (auto& kw : e.kwargs) f(kw.second);
  for (auto& c : e.slice) f(c);
}

// The deepest path below `root`, found without recursion; fails past `limit`.
void check_expression_depth(Expr& root, int limit) {
  std::vector<std::pair<Expr*, int>> pending{{&root, 1}};
  while (!pending.empty()) {
    auto [e, depth] = pending.back();
    pending.pop_back();
    if (depth > limit) {
      throw Fail{ErrorKind::kLimit,
                 "an expression nests or chains deeper than " + std::to_string(limit) +
                     " operands (Limits::max_expression_depth); split it with {% set %}",
                 e->line, e->column};
    }
    for_each_child(*e, [&](ExprPtr& c) {
      if (c) pending.emplace_back(c.get(), depth + 1);
    });
  }
}

void check_body(Body& body, int limit) {
  auto expr = [&](ExprPtr& e) {
    if (e) check_expression_depth(*e, limit);
  };
  for (auto& node : body) {
    expr(node->expr);
    expr(node->condition);
    for (auto& [cond, branch] : node->branches) {
      expr(cond);
      check_body(branch, limit);
    }
    for (auto& param : node->params) expr(param.second);
    for (auto& f : node->filters) expr(f);
    check_body(node->body, limit);
    check_body(node->else_body, limit);
  }
}

}  // namespace

Expr::~Expr() {
  std::vector<ExprPtr> pending;
  auto adopt = [&](ExprPtr& c) {
    if (c) pending.push_back(std::move(c));
  };
  for_each_child(*this, adopt);
  while (!pending.empty()) {
    ExprPtr e = std::move(pending.back());
    pending.pop_back();
    for_each_child(*e, adopt);
  }  // each `e` is freed childless: one frame deep
}

std::unique_ptr<Program> parse_template(const std::string& source, int max_nesting, int max_expression_depth) {
  auto program = Parser(Lexer(source).run(), max_nesting).run();
  check_body(program->body, max_expression_depth);
  return program;
}

}  // namespace rne::chat::detail
