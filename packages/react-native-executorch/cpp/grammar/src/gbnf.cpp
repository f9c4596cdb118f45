#include "rne/grammar/gbnf.h"

#include "code_point_ranges.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

namespace rne::grammar {

namespace {

constexpr uint32_t kMaxCodePoint = code_points::kMax;
constexpr uint32_t kUnbounded = UINT32_MAX;
constexpr uint64_t kNever = UINT64_MAX;  // a rule that derives no finite string

using Ranges = GbnfGrammar::Ranges;
using Element = GbnfGrammar::Element;
using Sequence = std::vector<Element>;

// Sorted, disjoint, without the surrogates (they are not characters and UTF-8 cannot hold them).
Ranges normalized(Ranges r) {
  return code_points::normalized(code_points::without_surrogates(r));
}

Ranges complement(const Ranges& r) { return normalized(code_points::complement(r)); }

uint8_t utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_';
}

class Parser {
 public:
  struct Rule {
    std::string name;
    std::vector<Sequence> alternatives;
    bool defined = false;
    size_t defined_at = 0;  // offset of its name
    size_t used_at = 0;     // offset of its first reference
    std::string origin;     // generated rules: the rule they were written in
  };

  explicit Parser(const std::string& text) : text_(text) {}

  Result<void> parse() {
    skip_space(true);
    while (more()) {
      const size_t name_at = at_;
      const std::string name = read_name();
      if (name.empty()) return fail("expected a rule name");
      skip_space(false);
      if (text_.compare(at_, 3, "::=") != 0) return fail("expected '::=' after rule name '" + name + "'");
      at_ += 3;
      skip_space(true);
      const uint32_t id = rule_id(name, name_at);
      if (rules_[id].defined) {
        at_ = name_at;
        return fail("rule '" + name + "' is defined twice (first on line " +
                    std::to_string(line_of(rules_[id].defined_at)) + ")");
      }
      rules_[id].defined = true;
      rules_[id].defined_at = name_at;
      auto alternatives = parse_alternatives(id, /*nested=*/false);
      if (!alternatives.ok()) return alternatives.error();
      rules_[id].alternatives = std::move(*alternatives);
      skip_space(false);
      if (more() && peek() != '\n') return fail(std::string("unexpected '") + peek() + "'");
      skip_space(true);
    }
    return {};
  }

  std::vector<Rule>& rules() { return rules_; }
  std::vector<Ranges>& classes() { return classes_; }
  const std::unordered_map<std::string, uint32_t>& ids() const { return ids_; }

  Error error_at(size_t offset, const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < offset && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<uint8_t>(text_[i]) & 0xC0) != 0x80) {
        ++column;  // columns count characters, not bytes
      }
    }
    return Error{ErrorCode::kInvalidArgument, "grammar line " + std::to_string(line) +
                                                  ", column " + std::to_string(column) + ": " +
                                                  what};
  }
  size_t line_of(size_t offset) const {
    return 1 + static_cast<size_t>(std::count(text_.begin(), text_.begin() + offset, '\n'));
  }

 private:
  Error fail(const std::string& what) const { return error_at(at_, what); }
  bool more() const { return at_ < text_.size(); }
  char peek(size_t ahead = 0) const { return at_ + ahead < text_.size() ? text_[at_ + ahead] : '\0'; }

  void skip_space(bool newlines) {
    while (more()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++at_;
      } else if (c == '#') {
        while (more() && peek() != '\n') ++at_;
      } else {
        break;
      }
    }
  }

  std::string read_name() {
    const size_t begin = at_;
    while (more() && name_char(peek())) ++at_;
    return text_.substr(begin, at_ - begin);
  }

  uint32_t rule_id(const std::string& name, size_t used_at) {
    auto found = ids_.find(name);
    if (found != ids_.end()) return found->second;
    const auto id = static_cast<uint32_t>(rules_.size());
    ids_.emplace(name, id);
    rules_.push_back(Rule{name, {}, false, 0, used_at, {}});
    return id;
  }

  // A rule for a group or a repetition inside rule `owner`.
  uint32_t generated_rule(uint32_t owner, std::vector<Sequence> alternatives) {
    const auto id = static_cast<uint32_t>(rules_.size());
    const std::string& origin =
        rules_[owner].origin.empty() ? rules_[owner].name : rules_[owner].origin;
    rules_.push_back(Rule{origin + "/" + std::to_string(id), std::move(alternatives), true,
                          at_, at_, origin});
    return id;
  }

  Result<void> count(size_t elements) {
    elements_ += elements;
    if (elements_ > kMaxGbnfElements) {
      return fail("the grammar is too large: more than " + std::to_string(kMaxGbnfElements) +
                  " elements once repetitions are expanded (kMaxGbnfElements)");
    }
    return {};
  }

  Result<std::vector<Sequence>> parse_alternatives(uint32_t owner, bool nested) {
    std::vector<Sequence> alternatives;
    for (;;) {
      auto sequence = parse_sequence(owner, nested);
      if (!sequence.ok()) return sequence.error();
      alternatives.push_back(std::move(*sequence));
      // A '|' may also start the next line of a rule.
      const size_t save = at_;
      skip_space(true);
      if (peek() != '|') {
        at_ = save;
        return alternatives;
      }
      ++at_;
      skip_space(true);
    }
  }

  Result<Sequence> parse_sequence(uint32_t owner, bool nested) {
    Sequence sequence;
    for (;;) {
      skip_space(nested);
      const char c = peek();
      if (!more() || c == '|' || c == ')' || c == '\n') return sequence;
      const size_t atom_at = at_;
      const size_t atom_start = sequence.size();
      if (c == '"') {
        ++at_;
        while (peek() != '"') {
          if (!more() || peek() == '\n') {
            at_ = atom_at;
            return fail("unterminated string literal");
          }
          auto cp = read_char();
          if (!cp.ok()) return cp.error();
          sequence.push_back(char_class({{*cp, *cp}}));
        }
        ++at_;
      } else if (c == '[') {
        auto cls = parse_class();
        if (!cls.ok()) return cls.error();
        sequence.push_back(*cls);
      } else if (c == '.') {
        ++at_;
        sequence.push_back(char_class({{0, kMaxCodePoint}}));
      } else if (c == '(') {
        if (depth_ == kMaxGbnfNesting) {
          return fail("groups nested more than " + std::to_string(kMaxGbnfNesting) +
                      " deep (kMaxGbnfNesting); give inner groups rules of their own");
        }
        ++at_;
        skip_space(true);
        ++depth_;
        auto inner = parse_alternatives(owner, /*nested=*/true);
        --depth_;
        if (!inner.ok()) return inner.error();
        skip_space(true);
        if (peek() != ')') return fail("expected ')' to close the group opened at line " +
                                       std::to_string(line_of(atom_at)));
        ++at_;
        sequence.push_back({GbnfGrammar::kRule, generated_rule(owner, std::move(*inner))});
      } else if (name_char(c)) {
        const std::string name = read_name();
        sequence.push_back({GbnfGrammar::kRule, rule_id(name, atom_at)});
      } else if (c == '<') {
        return fail("token references (<...>) are not supported; write the token's text as a "
                    "literal");
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        return fail(std::string("'") + c + "' has nothing to repeat");
      } else {
        return fail(std::string("unexpected '") + c + "'");
      }
      if (auto counted = count(sequence.size() - atom_start); !counted.ok()) return counted.error();
      skip_space(nested);
      auto repeated = parse_repetition(owner, sequence, atom_start);
      if (!repeated.ok()) return repeated.error();
    }
  }

  // A quantifier after the atom sequence[atom_start...], if any.
  Result<void> parse_repetition(uint32_t owner, Sequence& sequence, size_t atom_start) {
    uint32_t min = 0, max = kUnbounded;
    const size_t quantifier_at = at_;
    const char c = peek();
    if (c == '*') {
      ++at_;
    } else if (c == '+') {
      min = 1;
      ++at_;
    } else if (c == '?') {
      max = 1;
      ++at_;
    } else if (c == '{') {
      ++at_;
      skip_space(false);
      auto number = [&](uint32_t& out) -> Result<bool> {
        if (!(peek() >= '0' && peek() <= '9')) return false;
        uint64_t v = 0;
        while (peek() >= '0' && peek() <= '9') {
          v = std::min<uint64_t>(v * 10 + static_cast<uint64_t>(peek() - '0'), uint64_t{1} << 32);
          ++at_;
        }
        if (v > kMaxGbnfRepeat) {
          at_ = quantifier_at;
          return fail("repetition counts above " + std::to_string(kMaxGbnfRepeat) +
                      " are not supported (kMaxGbnfRepeat)");
        }
        out = static_cast<uint32_t>(v);
        skip_space(false);
        return true;
      };
      auto has_min = number(min);
      if (!has_min.ok()) return has_min.error();
      if (peek() == ',') {
        ++at_;
        skip_space(false);
        auto has_max = number(max);
        if (!has_max.ok()) return has_max.error();
        if (!*has_min && !*has_max) return fail("expected a number in {m,n}");
      } else {
        if (!*has_min) return fail("expected a number after '{'");
        max = min;
      }
      if (peek() != '}') return fail("expected '}' to close the repetition");
      ++at_;
      if (max < min) {
        at_ = quantifier_at;
        return fail("repetition {m,n} with m > n");
      }
    } else {
      return {};
    }
    if (sequence.size() == atom_start) return {};  // "" repeated is still ""
    // The whole atom (a literal of several characters) is what repeats: make it one element.
    Element atom = sequence[atom_start];
    if (sequence.size() - atom_start > 1) {
      atom = {GbnfGrammar::kRule,
              generated_rule(owner, {Sequence(sequence.begin() + static_cast<long>(atom_start),
                                              sequence.end())})};
    }
    sequence.resize(atom_start);
    const size_t optional = max == kUnbounded ? 1 : max - min;
    if (auto counted = count(size_t{min} + 2 * optional); !counted.ok()) return counted.error();
    for (uint32_t i = 0; i < min; ++i) sequence.push_back(atom);
    if (max == kUnbounded) {
      // R ::= atom R | "": right recursion, which the matcher pops as it goes.
      const auto id = generated_rule(owner, {});
      rules_[id].alternatives = {{atom, {GbnfGrammar::kRule, id}}, {}};
      sequence.push_back({GbnfGrammar::kRule, id});
    } else if (max > min) {
      // Q1 ::= atom | "";  Qk ::= atom Q(k-1) | ""
      uint32_t previous = kUnbounded;
      for (uint32_t k = 0; k < max - min; ++k) {
        Sequence first = {atom};
        if (previous != kUnbounded) first.push_back({GbnfGrammar::kRule, previous});
        previous = generated_rule(owner, {std::move(first), {}});
      }
      sequence.push_back({GbnfGrammar::kRule, previous});
    }
    return {};
  }

  Element char_class(Ranges ranges) {
    classes_.push_back(normalized(std::move(ranges)));
    return {GbnfGrammar::kChar, static_cast<uint32_t>(classes_.size() - 1)};
  }

  Result<Element> parse_class() {
    const size_t open = at_;
    ++at_;
    const bool negated = peek() == '^';
    if (negated) ++at_;
    Ranges ranges;
    while (peek() != ']') {
      if (!more() || peek() == '\n') {
        at_ = open;
        return fail("unterminated character class");
      }
      auto lo = read_char();
      if (!lo.ok()) return lo.error();
      uint32_t hi = *lo;
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\n' && at_ + 1 < text_.size()) {
        ++at_;
        const size_t hi_at = at_;
        auto end = read_char();
        if (!end.ok()) return end.error();
        hi = *end;
        if (hi < *lo) {
          at_ = hi_at;
          return fail("character range out of order");
        }
      }
      ranges.emplace_back(*lo, hi);
    }
    ++at_;
    if (negated) ranges = complement(ranges);
    if (normalized(ranges).empty()) {
      at_ = open;
      return fail("character class matches no character");
    }
    return char_class(std::move(ranges));
  }

  Result<uint32_t> hex(size_t digits) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      const char d = peek();
      const int x = d >= '0' && d <= '9'   ? d - '0'
                    : d >= 'a' && d <= 'f' ? d - 'a' + 10
                    : d >= 'A' && d <= 'F' ? d - 'A' + 10
                                           : -1;
      if (x < 0) return fail("expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(x);
      ++at_;
    }
    return v;
  }

  // One character of a literal or class (an escape or a UTF-8 sequence).
  Result<uint32_t> read_char() {
    const size_t begin = at_;
    const auto c = static_cast<uint8_t>(peek());
    if (c == '\\') {
      ++at_;
      const char e = peek();
      ++at_;
      Result<uint32_t> cp = 0u;
      switch (e) {
        case 'n': return uint32_t{'\n'};
        case 'r': return uint32_t{'\r'};
        case 't': return uint32_t{'\t'};
        case '\\': case '"': case '[': case ']': case '-': case '/': case '\'': case '^':
          return static_cast<uint32_t>(e);
        case 'x': cp = hex(2); break;
        case 'u': cp = hex(4); break;
        case 'U': cp = hex(8); break;
        default:
          at_ = begin;
          return fail(std::string("unknown escape '\\") + e + "'");
      }
      if (!cp.ok()) return cp;
      if (*cp > kMaxCodePoint || (*cp >= 0xD800 && *cp <= 0xDFFF)) {
        at_ = begin;
        return fail("escape is not a Unicode character (surrogate or beyond U+10FFFF)");
      }
      return cp;
    }
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || at_ + static_cast<size_t>(n) > text_.size()) return fail("invalid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7Fu >> n);
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<uint8_t>(text_[at_ + static_cast<size_t>(k)]);
      if ((b & 0xC0) != 0x80) return fail("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    if (utf8_length(cp) != n || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return fail("invalid UTF-8");
    }
    at_ += static_cast<size_t>(n);
    return cp;
  }

  const std::string& text_;
  size_t at_ = 0;
  size_t elements_ = 0;
  size_t depth_ = 0;  // groups open around at_
  std::vector<Rule> rules_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<Ranges> classes_;
};

std::string describe(const Parser::Rule& rule) {
  return rule.origin.empty() ? "rule '" + rule.name + "'"
                             : "a group or repetition in rule '" + rule.origin + "'";
}

}  // namespace

Result<std::shared_ptr<const GbnfGrammar>> compile_gbnf(const std::string& text) {
  if (text.size() > kMaxGbnfBytes) {
    return Error{ErrorCode::kInvalidArgument,
                 "grammar is " + std::to_string(text.size()) + " bytes; at most " +
                     std::to_string(kMaxGbnfBytes) + " are supported (kMaxGbnfBytes)"};
  }
  Parser parser(text);
  if (auto parsed = parser.parse(); !parsed.ok()) return parsed.error();
  auto& rules = parser.rules();
  for (const auto& rule : rules) {
    if (!rule.defined) return parser.error_at(rule.used_at, "rule '" + rule.name + "' is used but never defined");
  }
  const auto root = parser.ids().find("root");
  if (root == parser.ids().end()) {
    return Error{ErrorCode::kInvalidArgument,
                 "grammar has no 'root' rule; generation starts from `root ::= ...`"};
  }

  auto grammar = std::make_shared<GbnfGrammar>();
  grammar->root = root->second;
  grammar->classes = std::move(parser.classes());
  for (const auto& ranges : grammar->classes) {
    grammar->class_min_bytes.push_back(utf8_length(ranges.front().first));
  }
  for (const auto& rule : rules) {
    grammar->rule_names.push_back(rule.name);
    std::vector<uint32_t> starts;
    for (const auto& alternative : rule.alternatives) {
      starts.push_back(static_cast<uint32_t>(grammar->elements.size()));
      grammar->elements.insert(grammar->elements.end(), alternative.begin(), alternative.end());
      grammar->elements.push_back({GbnfGrammar::kEnd, 0});
    }
    grammar->alternatives.push_back(std::move(starts));
  }
  const auto& elements = grammar->elements;
  const size_t n_rules = rules.size();

  // The shortest string of each rule, by passes until nothing changes (each pass settles at
  // least one more rule, so at most n_rules + 1 passes).
  std::vector<uint64_t> shortest(n_rules, kNever);
  auto element_min = [&](const Element& e) -> uint64_t {
    return e.kind == GbnfGrammar::kChar ? grammar->class_min_bytes[e.value] : shortest[e.value];
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n_rules; ++r) {
      for (uint32_t pos : grammar->alternatives[r]) {
        uint64_t sum = 0;
        for (; elements[pos].kind != GbnfGrammar::kEnd && sum != kNever; ++pos) {
          const uint64_t m = element_min(elements[pos]);
          sum = m == kNever ? kNever : sum + m;
        }
        if (sum < shortest[r]) {
          shortest[r] = sum;
          changed = true;
        }
      }
    }
  }

  // The rules root can reach; each must derive some string.
  std::vector<uint8_t> reachable(n_rules, 0);
  std::vector<uint32_t> todo = {grammar->root};
  reachable[grammar->root] = 1;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    for (uint32_t pos : grammar->alternatives[r]) {
      for (; elements[pos].kind != GbnfGrammar::kEnd; ++pos) {
        if (elements[pos].kind == GbnfGrammar::kRule && !reachable[elements[pos].value]) {
          reachable[elements[pos].value] = 1;
          todo.push_back(elements[pos].value);
        }
      }
    }
  }
  for (size_t r = 0; r < n_rules; ++r) {
    if (reachable[r] && shortest[r] == kNever) {
      return parser.error_at(rules[r].defined_at,
                             describe(rules[r]) + " generates no string: every alternative "
                                                  "needs the rule itself again (add a way out)");
    }
  }

  // Left recursion: rule A reads rule B first (after rules that may be empty). A cycle there
  // would make the matcher expand forever before reading a byte.
  std::vector<std::vector<uint32_t>> first_rules(n_rules);
  for (size_t r = 0; r < n_rules; ++r) {
    if (!reachable[r]) continue;
    for (uint32_t pos : grammar->alternatives[r]) {
      for (; elements[pos].kind == GbnfGrammar::kRule; ++pos) {
        first_rules[r].push_back(elements[pos].value);
        if (shortest[elements[pos].value] != 0) break;
      }
    }
  }
  std::vector<uint8_t> color(n_rules, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (size_t start = 0; start < n_rules; ++start) {
    if (!reachable[start] || color[start] != 0) continue;
    path.emplace_back(static_cast<uint32_t>(start), 0);
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == first_rules[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t s = first_rules[r][next++];
      if (color[s] == 1) {
        return parser.error_at(rules[s].defined_at,
                               describe(rules[s]) + " is left-recursive: it can reach itself "
                               "before reading a character; rewrite it with right recursion "
                               "or a repetition (x ::= y (\"+\" y)*)");
      }
      if (color[s] == 0) {
        color[s] = 1;
        path.emplace_back(s, 0);
      }
    }
  }

  grammar->rest.assign(elements.size(), 0);
  for (size_t r = 0; r < n_rules; ++r) {
    for (uint32_t start : grammar->alternatives[r]) {
      uint32_t end = start;
      while (elements[end].kind != GbnfGrammar::kEnd) ++end;
      uint64_t sum = 0;
      for (uint32_t pos = end; pos-- > start;) {
        sum += element_min(elements[pos]);  // finite: every reachable rule is productive
        grammar->rest[pos] = static_cast<uint32_t>(std::min<uint64_t>(sum, UINT32_MAX));
      }
    }
  }
  return std::shared_ptr<const GbnfGrammar>(std::move(grammar));
}

GbnfMatcher::GbnfMatcher(std::shared_ptr<const GbnfGrammar> grammar)
    : grammar_(std::move(grammar)), frames_{Frame{UINT32_MAX, 0, 0}} {}

uint32_t GbnfMatcher::push(uint32_t pos, uint32_t parent) {
  frames_.push_back({pos, parent, grammar_->rest[pos] + frames_[parent].cost});
  return static_cast<uint32_t>(frames_.size() - 1);
}

bool GbnfMatcher::same(uint32_t a, uint32_t b) const {
  while (a != b) {
    if (a == 0 || b == 0 || frames_[a].pos != frames_[b].pos) return false;
    a = frames_[a].parent;
    b = frames_[b].parent;
  }
  return true;
}

bool GbnfMatcher::add(std::vector<uint32_t>& out, uint32_t stack) {
  for (uint32_t other : out) {
    if (same(other, stack)) return true;
  }
  if (out.size() >= kMaxGbnfStacks) return false;
  out.push_back(stack);
  return true;
}

bool GbnfMatcher::expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out) {
  const GbnfGrammar& g = *grammar_;
  // Depth first, in the order a recursive walk takes (a rule's alternatives are pushed last
  // first), so the stacks come out in the same order.
  pending_.clear();
  pending_.emplace_back(pos, parent);
  while (!pending_.empty()) {
    std::tie(pos, parent) = pending_.back();
    pending_.pop_back();
    for (;;) {
      const Element e = g.elements[pos];
      if (e.kind == GbnfGrammar::kChar) {
        if (!add(out, push(pos, parent))) return false;
        break;
      }
      if (e.kind == GbnfGrammar::kRule) {
        // The rest of this alternative waits below the rule's; nothing left: pop it now, so a
        // right-recursive repetition keeps the stack flat.
        const uint32_t next = g.elements[pos + 1].kind == GbnfGrammar::kEnd
                                  ? parent
                                  : push(pos + 1, parent);
        const auto& starts = g.alternatives[e.value];
        for (auto it = starts.rbegin(); it != starts.rend(); ++it) {
          pending_.emplace_back(*it, next);
        }
        break;
      }
      // kEnd: this alternative is done; go on with the frame below.
      if (parent == 0) {
        if (!add(out, 0)) return false;
        break;
      }
      const Frame below = frames_[parent];
      if (g.elements[below.pos].kind == GbnfGrammar::kChar) {
        if (!add(out, parent)) return false;
        break;
      }
      pos = below.pos;
      parent = below.parent;
    }
  }
  return true;
}

Error GbnfMatcher::too_ambiguous() {
  return Error{ErrorCode::kInvalidArgument,
               "grammar is too ambiguous here: more than " + std::to_string(kMaxGbnfStacks) +
                   " parses of the text so far are alive at once (kMaxGbnfStacks); make "
                   "alternatives differ in their first characters"};
}

Result<GbnfState> GbnfMatcher::start() {
  GbnfState state;
  for (uint32_t start : grammar_->alternatives[grammar_->root]) {
    if (!expand(start, 0, state.stacks)) return too_ambiguous();
  }
  return state;
}

GbnfMatcher::Step GbnfMatcher::step(const GbnfState& in, uint8_t byte, GbnfState& out) {
  out.stacks.clear();
  if (in.pending == 0) {
    if (byte < 0x80) {
      out.length = 1, out.pending = 0, out.bits = byte;
    } else if (byte >= 0xC2 && byte <= 0xDF) {
      out.length = 2, out.pending = 1, out.bits = byte & 0x1Fu;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      out.length = 3, out.pending = 2, out.bits = byte & 0x0Fu;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      out.length = 4, out.pending = 3, out.bits = byte & 0x07u;
    } else {
      return Step::kRejected;
    }
  } else {
    if ((byte & 0xC0) != 0x80) return Step::kRejected;
    out.length = in.length;
    out.pending = static_cast<uint8_t>(in.pending - 1);
    out.bits = (in.bits << 6) | (byte & 0x3Fu);
  }
  // The code points that start with the bytes so far form one interval; clip it to the valid
  // ones of this length (overlong forms and values past U+10FFFF fall out).
  const uint32_t shift = 6u * out.pending;
  uint32_t lo = out.bits << shift;
  uint32_t hi = lo | ((1u << shift) - 1);
  static constexpr uint32_t kLow[5] = {0, 0, 0x80, 0x800, 0x10000};
  static constexpr uint32_t kHigh[5] = {0, 0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  lo = std::max(lo, kLow[out.length]);
  hi = std::min(hi, kHigh[out.length]);
  if (lo > hi) return Step::kRejected;
  const GbnfGrammar& g = *grammar_;
  for (uint32_t stack : in.stacks) {
    if (stack == 0) continue;
    const Frame top = frames_[stack];
    const Ranges& ranges = g.classes[g.elements[top.pos].value];
    // Classes hold no surrogates, so meeting one of their ranges means a valid member.
    auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                               [](const std::pair<uint32_t, uint32_t>& r, uint32_t v) {
                                 return r.second < v;
                               });
    if (it == ranges.end() || it->first > hi) continue;
    const bool ok = out.pending > 0 ? add(out.stacks, stack)
                                    : expand(top.pos + 1, top.parent, out.stacks);
    if (!ok) return Step::kTooAmbiguous;
  }
  return out.stacks.empty() ? Step::kRejected : Step::kOk;
}

bool GbnfMatcher::complete(const GbnfState& state) {
  return state.pending == 0 &&
         std::find(state.stacks.begin(), state.stacks.end(), 0u) != state.stacks.end();
}

uint64_t GbnfMatcher::completion(const GbnfState& state) const {
  uint64_t best = UINT64_MAX;
  for (uint32_t stack : state.stacks) {
    uint64_t cost = frames_[stack].cost;
    if (state.pending > 0) {
      // The top character is under way: its continuation bytes instead of its shortest form.
      const uint32_t cls = grammar_->elements[frames_[stack].pos].value;
      cost = cost - grammar_->class_min_bytes[cls] + state.pending;
    }
    best = std::min(best, cost);
  }
  return best;
}

void GbnfMatcher::key(const GbnfState& state, std::string& out) const {
  out.clear();
  auto put = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(state.bits);
  put(uint32_t{state.pending} << 8 | state.length);
  for (uint32_t stack : state.stacks) {
    for (uint32_t f = stack; f != 0; f = frames_[f].parent) put(frames_[f].pos);
    put(UINT32_MAX);
  }
}

void GbnfMatcher::compact(GbnfState& state) {
  std::vector<Frame> kept = {frames_[0]};
  std::unordered_map<uint32_t, uint32_t> renumber = {{0u, 0u}};
  std::vector<uint32_t> chain;
  for (uint32_t& stack : state.stacks) {
    chain.clear();
    uint32_t f = stack;
    for (; renumber.find(f) == renumber.end(); f = frames_[f].parent) chain.push_back(f);
    uint32_t below = renumber[f];
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      kept.push_back({frames_[*it].pos, below, frames_[*it].cost});
      below = static_cast<uint32_t>(kept.size() - 1);
      renumber.emplace(*it, below);
    }
    stack = renumber[stack];
  }
  frames_ = std::move(kept);
}

Result<bool> GbnfMatcher::matches(const std::string& text) {
  auto first = start();
  if (!first.ok()) return first.error();
  GbnfState state = std::move(*first);
  GbnfState next;
  for (char c : text) {
    const Step s = step(state, static_cast<uint8_t>(c), next);
    if (s == Step::kRejected) return false;
    if (s == Step::kTooAmbiguous) return too_ambiguous();
    std::swap(state, next);
    compact(state);
  }
  return complete(state);
}

}  // namespace rne::grammar
