#include "rne/grammar/regex.h"

#include "code_point_ranges.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <unordered_map>

namespace rne::grammar {

namespace {

constexpr uint32_t kInfinite = UINT32_MAX;  // an unbounded repeat
constexpr uint32_t kMaxCodePoint = code_points::kMax;
constexpr uint32_t kMaxRepeat = 1000;  // {m,n} bounds beyond this are refused
// NFA states the subset construction may touch in all (bounds its time and the memory its
// state sets take, whatever the pattern); past it the pattern is refused like a large DFA.
constexpr size_t kMaxSubsetWork = size_t{1} << 23;

using code_points::complement;
using code_points::normalized;
using code_points::Ranges;

Ranges united(Ranges a, const Ranges& b) {
  a.insert(a.end(), b.begin(), b.end());
  return normalized(std::move(a));
}

struct Ast {
  enum Kind : uint8_t { kSet, kConcat, kAlt, kRepeat, kBol, kEol };
  Kind kind = kConcat;
  Ranges set;
  std::vector<Ast> kids;
  uint32_t min = 0;
  uint32_t max = 0;
};

Ast set_of(Ranges r) {
  Ast a;
  a.kind = Ast::kSet;
  a.set = normalized(std::move(r));
  return a;
}

// A shorthand class (\d \w \s and negations): `sure` is what it matches under both ECMA-262
// and Python's re, `maybe` what it matches under either (see regex.h).
struct ClassPart {
  Ranges sure;
  Ranges maybe;
};

ClassPart shorthand(char letter) {
  const Ranges non_ascii = {{0x80, kMaxCodePoint}};
  Ranges ascii;
  switch (letter | 0x20) {
    case 'd': ascii = {{'0', '9'}}; break;
    case 'w': ascii = normalized({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}); break;
    default: ascii = {{'\t', '\r'}, {' ', ' '}}; break;  // \s: \t \n \v \f \r and space
  }
  // Python's \s also takes \x1c-\x1f; either engine may take non-ASCII ones.
  Ranges extra_maybe = united(non_ascii, (letter | 0x20) == 's' ? Ranges{{0x1C, 0x1F}} : Ranges{});
  if (letter >= 'a') return {ascii, united(ascii, extra_maybe)};
  // Negated: surely everything neither engine's positive form takes (ASCII only, here).
  Ranges sure = complement(united(united(ascii, extra_maybe), non_ascii));
  return {sure, complement(ascii)};
}

class Parser {
 public:
  // wide: what the pattern matches under either engine (for a pattern whose matches are
  // excluded), not under both.
  Parser(const std::string& pattern, bool wide) : pattern_(pattern), wide_(wide) {
    // The pattern is UTF-8 (it came from JSON); decode it once.
    for (size_t i = 0; i < pattern.size();) {
      const auto c = static_cast<uint8_t>(pattern[i]);
      const int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      uint32_t cp = n == 1 ? c : c & (0x3F >> (n - 1));
      for (int k = 1; k < n && i + k < pattern.size(); ++k) {
        cp = (cp << 6) | (static_cast<uint8_t>(pattern[i + k]) & 0x3F);
      }
      cps_.push_back(cp);
      i += n;
    }
  }

  Result<Ast> parse() {
    auto ast = parse_alternation();
    if (!ast.ok()) return ast;
    if (at_ < cps_.size()) return fail("unbalanced ')'");
    return ast;
  }

 private:
  Error fail(const std::string& what) const {
    return Error{ErrorCode::kInvalidArgument, "regex '" + pattern_ + "' at offset " +
                                                  std::to_string(at_) + ": " + what};
  }
  bool more() const { return at_ < cps_.size(); }
  uint32_t peek(size_t ahead = 0) const {
    return at_ + ahead < cps_.size() ? cps_[at_ + ahead] : 0xFFFFFFFF;
  }

  Result<Ast> parse_alternation() {
    Ast alt;
    alt.kind = Ast::kAlt;
    for (;;) {
      auto branch = parse_concat();
      if (!branch.ok()) return branch;
      alt.kids.push_back(std::move(*branch));
      if (peek() != '|') break;
      ++at_;
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Result<Ast> parse_concat() {
    Ast seq;
    seq.kind = Ast::kConcat;
    while (more() && peek() != '|' && peek() != ')') {
      auto atom = parse_atom();
      if (!atom.ok()) return atom;
      auto repeated = parse_quantifier(std::move(*atom));
      if (!repeated.ok()) return repeated;
      if (wide_ && repeated->kind == Ast::kEol) {
        // Python's $ also matches before a final newline: "\n"? then the end.
        Ast newline_end;
        newline_end.kids = {set_of({{'\n', '\n'}}), *repeated};
        Ast either;
        either.kind = Ast::kAlt;
        either.kids = {*repeated, std::move(newline_end)};
        *repeated = std::move(either);
      }
      seq.kids.push_back(std::move(*repeated));
    }
    return seq;
  }

  // Reads {m}, {m,} or {m,n} at at_; false (at_ unchanged) when it is not one: then ECMA-262
  // (Annex B) and Python both read '{' as a literal.
  bool read_braces(uint32_t& min, uint32_t& max, bool& comma_first) {
    size_t i = at_ + 1;
    auto number = [&](uint32_t& out) {
      const size_t begin = i;
      uint64_t v = 0;
      while (i < cps_.size() && cps_[i] >= '0' && cps_[i] <= '9') {
        v = std::min<uint64_t>(v * 10 + (cps_[i] - '0'), uint64_t{kInfinite} - 1);
        ++i;
      }
      out = static_cast<uint32_t>(v);
      return i > begin;
    };
    comma_first = i < cps_.size() && cps_[i] == ',';
    if (!number(min)) return false;
    max = min;
    if (i < cps_.size() && cps_[i] == ',') {
      ++i;
      if (!number(max)) max = kInfinite;
    }
    if (i >= cps_.size() || cps_[i] != '}') return false;
    at_ = i + 1;
    return true;
  }

  Result<Ast> parse_quantifier(Ast atom) {
    for (;;) {
      uint32_t min = 0, max = 0;
      const size_t start = at_;
      if (peek() == '*') {
        max = kInfinite;
        ++at_;
      } else if (peek() == '+') {
        min = 1;
        max = kInfinite;
        ++at_;
      } else if (peek() == '?') {
        max = 1;
        ++at_;
      } else if (peek() == '{') {
        bool comma_first = false;
        if (!read_braces(min, max, comma_first)) {
          if (comma_first) return fail("'{,n}' is a quantifier in Python but a literal in "
                                       "ECMA-262; write {0,n} or escape the brace");
          return atom;
        }
        if (min > max) return fail("quantifier {m,n} with m > n");
        if ((max != kInfinite && max > kMaxRepeat) || min > kMaxRepeat) {
          return fail("repeat counts above " + std::to_string(kMaxRepeat) + " are not supported");
        }
      } else {
        return atom;
      }
      if (atom.kind == Ast::kBol || atom.kind == Ast::kEol) {
        at_ = start;
        return fail("nothing to repeat (a quantifier after an anchor)");
      }
      if (atom.kind == Ast::kRepeat) {
        // "a**" or "a{2}{3}": an error in Python ("multiple repeat") and in ECMA-262.
        at_ = start;
        return fail("multiple repeat (a quantifier after a quantifier); group the repeated part");
      }
      if (peek() == '?') ++at_;  // lazy: the same strings match
      Ast rep;
      rep.kind = Ast::kRepeat;
      rep.min = min;
      rep.max = max;
      rep.kids.push_back(std::move(atom));
      atom = std::move(rep);
    }
  }

  Result<Ast> parse_atom() {
    const uint32_t c = peek();
    switch (c) {
      case '*': case '+': case '?':
        return fail("nothing to repeat");
      case '^': {
        ++at_;
        Ast a;
        a.kind = Ast::kBol;
        return a;
      }
      case '$': {
        ++at_;
        Ast a;
        a.kind = Ast::kEol;
        return a;
      }
      case '.':  // Python's takes \r and U+2028/9 too
        ++at_;
        if (wide_) return set_of(complement({{'\n', '\n'}}));
        return set_of(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
      case '(': {
        const size_t open = at_;
        ++at_;
        if (peek() == '?') {
          if (peek(1) == ':') {
            at_ += 2;
          } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {
            at_ += 2;
            while (more() && peek() != '>') ++at_;
            if (!more()) return fail("unterminated group name");
            ++at_;
          } else if (peek(1) == '=' || peek(1) == '!' || peek(1) == '<') {
            at_ = open;
            return fail("lookaround assertions are not supported");
          } else {
            at_ = open;
            return fail("unsupported group syntax '(?' (flags and the like)");
          }
        }
        if (++depth_ > kMaxRegexNesting) {
          at_ = open;
          return fail("groups nest more than " + std::to_string(kMaxRegexNesting) +
                      " deep (kMaxRegexNesting)");
        }
        auto inner = parse_alternation();
        --depth_;
        if (!inner.ok()) return inner;
        if (peek() != ')') return fail("missing ')'");
        ++at_;
        return inner;
      }
      case '[':
        return parse_class();
      case '\\': {
        ClassPart part;
        auto done = parse_escape(/*in_class=*/false, part);
        if (!done.ok()) return done.error();
        return set_of(wide_ ? part.maybe : part.sure);
      }
      default:
        ++at_;
        return set_of({{c, c}});
    }
  }

  Result<uint32_t> hex(size_t digits) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      const uint32_t d = peek();
      int x = d >= '0' && d <= '9' ? int(d - '0')
              : (d | 0x20) >= 'a' && (d | 0x20) <= 'f' ? int((d | 0x20) - 'a' + 10) : -1;
      if (x < 0) return fail("expected " + std::to_string(digits) + " hex digits");
      v = v * 16 + static_cast<uint32_t>(x);
      ++at_;
    }
    return v;
  }

  // After a backslash (at_ on it): one code point (sure == maybe) or a shorthand class.
  Result<void> parse_escape(bool in_class, ClassPart& out) {
    const size_t backslash = at_;
    ++at_;
    if (!more()) return fail("the pattern ends with a lone backslash");
    const uint32_t c = peek();
    auto single = [&](uint32_t cp) {
      out.sure = out.maybe = {{cp, cp}};
      return Result<void>();
    };
    ++at_;
    switch (c) {
      case 'd': case 'D': case 'w': case 'W': case 's': case 'S':
        out = shorthand(static_cast<char>(c));
        return {};
      case 't': return single('\t');
      case 'n': return single('\n');
      case 'v': return single('\v');
      case 'f': return single('\f');
      case 'r': return single('\r');
      case '0':
        if (peek() >= '0' && peek() <= '9') return fail("octal escapes are not supported");
        return single(0);
      case 'x': {
        auto v = hex(2);
        if (!v.ok()) return v.error();
        return single(*v);
      }
      case 'u': {
        if (peek() == '{') {
          ++at_;
          uint32_t v = 0;
          size_t n = 0;
          while (more() && peek() != '}') {
            auto d = hex(1);
            if (!d.ok()) return d.error();
            v = v * 16 + *d;
            if (++n > 6 || v > kMaxCodePoint) return fail("\\u{...} beyond U+10FFFF");
          }
          if (!more() || n == 0) return fail("unterminated \\u{...}");
          ++at_;
          return single(v);
        }
        auto v = hex(4);
        if (!v.ok()) return v.error();
        if (*v >= 0xD800 && *v <= 0xDFFF) {
          return fail("surrogate escapes (\\uD800-\\uDFFF) are not supported; write the "
                      "character itself");
        }
        return single(*v);
      }
      case 'b':
        if (in_class) return single('\b');
        at_ = backslash;
        return fail("word boundaries (\\b) are not supported");
      case 'B':
        at_ = backslash;
        return fail("word boundaries (\\B) are not supported");
      case 'k':
        at_ = backslash;
        return fail("backreferences are not supported");
      case 'p': case 'P':
        at_ = backslash;
        return fail("Unicode property escapes (\\p{...}) are not supported");
      case 'c':
        at_ = backslash;
        return fail("control escapes (\\cX) are not supported");
      default:
        if (c >= '1' && c <= '9') {
          at_ = backslash;
          return fail("backreferences are not supported");
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) {
          at_ = backslash;
          return fail("unknown escape (its meaning differs between regex engines); write the "
                      "character without a backslash");
        }
        return single(c);  // \ before punctuation: the character itself
    }
  }

  Result<Ast> parse_class() {
    const size_t open = at_;
    ++at_;
    const bool negated = peek() == '^';
    if (negated) ++at_;
    if (peek() == ']') {
      return fail("'[]' and '[^]' mean different things in ECMA-262 and Python; escape the ']'");
    }
    Ranges sure, maybe;
    while (more() && peek() != ']') {
      ClassPart lo;
      bool lo_single = true;
      if (peek() == '\\') {
        auto done = parse_escape(/*in_class=*/true, lo);
        if (!done.ok()) return done.error();
        lo_single = lo.sure == lo.maybe && lo.sure.size() == 1 &&
                    lo.sure[0].first == lo.sure[0].second;
      } else {
        lo.sure = lo.maybe = {{peek(), peek()}};
        ++at_;
      }
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFF) {
        ++at_;
        ClassPart hi;
        if (peek() == '\\') {
          auto done = parse_escape(/*in_class=*/true, hi);
          if (!done.ok()) return done.error();
        } else {
          hi.sure = hi.maybe = {{peek(), peek()}};
          ++at_;
        }
        const bool hi_single = hi.sure == hi.maybe && hi.sure.size() == 1 &&
                               hi.sure[0].first == hi.sure[0].second;
        if (!lo_single || !hi_single) return fail("a class range with a shorthand (\\d, \\w, \\s) "
                                                  "as an end");
        if (lo.sure[0].first > hi.sure[0].first) return fail("a class range out of order");
        lo.sure = lo.maybe = {{lo.sure[0].first, hi.sure[0].first}};
      }
      sure.insert(sure.end(), lo.sure.begin(), lo.sure.end());
      maybe.insert(maybe.end(), lo.maybe.begin(), lo.maybe.end());
    }
    if (!more()) {
      at_ = open;
      return fail("unterminated character class");
    }
    ++at_;
    if (wide_) return set_of(negated ? complement(sure) : maybe);
    return set_of(negated ? complement(maybe) : sure);
  }

  const std::string& pattern_;
  const bool wide_;
  std::vector<uint32_t> cps_;
  size_t at_ = 0;
  size_t depth_ = 0;  // groups open at at_
};

// ---- UTF-8 byte sequences of code-point ranges ----

using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;

int encode(uint32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

// Splits [lo, hi] until each piece is one byte-range per position (the usual UTF-8 range
// split: same length, then same leading bytes where the tails do not span 00-3F fully).
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  if (lo > hi) return;
  if (lo <= 0xDFFF && hi >= 0xD800) {  // surrogates are not characters
    if (lo < 0xD800) utf8_sequences(lo, 0xD7FF, out);
    if (hi > 0xDFFF) utf8_sequences(0xE000, hi, out);
    return;
  }
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && hi > edge) {
      utf8_sequences(lo, edge, out);
      utf8_sequences(edge + 1, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  const int n = encode(lo, a);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  encode(hi, b);
  ByteSeq seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

// ---- Thompson NFA ----

struct NfaState {
  enum Kind : uint8_t { kEps, kByte, kBol, kEol, kMatch };
  Kind kind = kEps;
  uint8_t lo = 0, hi = 0;
  uint32_t out = UINT32_MAX;    // kByte, kBol, kEol
  std::vector<uint32_t> eps;    // kEps
};

class NfaBuilder {
 public:
  explicit NfaBuilder(std::vector<NfaState>& states) : s_(states) {}

  // (start, end): end is a kEps state with no way out yet.
  Result<std::pair<uint32_t, uint32_t>> emit(const Ast& a) {
    if (s_.size() > kMaxRegexNfaStates) {
      return Error{ErrorCode::kInvalidArgument,
                   "regex expands to more than " + std::to_string(kMaxRegexNfaStates) +
                       " automaton states (kMaxRegexNfaStates); lower its {m,n} counts"};
    }
    switch (a.kind) {
      case Ast::kSet: {
        const uint32_t start = add(), end = add();
        std::vector<ByteSeq> seqs;
        for (const auto& [lo, hi] : a.set) utf8_sequences(lo, hi, seqs);
        for (const ByteSeq& seq : seqs) {
          uint32_t prev = start;
          for (size_t i = 0; i < seq.size(); ++i) {
            const uint32_t st = add();
            s_[st].kind = NfaState::kByte;
            s_[st].lo = seq[i].first;
            s_[st].hi = seq[i].second;
            link(prev, st);
            prev = st;
          }
          // The last byte state's out is the end; link() on kByte sets out.
          link(prev, end);
        }
        return std::make_pair(start, end);
      }
      case Ast::kBol:
      case Ast::kEol: {
        const uint32_t start = add(), end = add();
        s_[start].kind = a.kind == Ast::kBol ? NfaState::kBol : NfaState::kEol;
        s_[start].out = end;
        return std::make_pair(start, end);
      }
      case Ast::kConcat: {
        const uint32_t start = add();
        uint32_t end = start;
        for (const Ast& kid : a.kids) {
          auto f = emit(kid);
          if (!f.ok()) return f;
          link(end, f->first);
          end = f->second;
        }
        return std::make_pair(start, end);
      }
      case Ast::kAlt: {
        const uint32_t start = add(), end = add();
        for (const Ast& kid : a.kids) {
          auto f = emit(kid);
          if (!f.ok()) return f;
          link(start, f->first);
          link(f->second, end);
        }
        return std::make_pair(start, end);
      }
      case Ast::kRepeat: {
        const uint32_t start = add(), end = add();
        uint32_t cur = start;
        for (uint32_t i = 0; i < a.min; ++i) {
          auto f = emit(a.kids[0]);
          if (!f.ok()) return f;
          link(cur, f->first);
          cur = f->second;
        }
        if (a.max == kInfinite) {
          auto f = emit(a.kids[0]);
          if (!f.ok()) return f;
          link(cur, f->first);
          link(f->second, f->first);
          link(f->second, end);
        } else {
          for (uint32_t i = a.min; i < a.max; ++i) {
            auto f = emit(a.kids[0]);
            if (!f.ok()) return f;
            link(cur, f->first);
            link(cur, end);
            cur = f->second;
          }
        }
        link(cur, end);
        return std::make_pair(start, end);
      }
    }
    return Error{ErrorCode::kInvalidArgument, "regex: unknown node"};
  }

  uint32_t add() {
    s_.emplace_back();
    return static_cast<uint32_t>(s_.size() - 1);
  }

 private:
  void link(uint32_t from, uint32_t to) {
    if (s_[from].kind == NfaState::kByte) {
      s_[from].out = to;
    } else {
      s_[from].eps.push_back(to);
    }
  }
  std::vector<NfaState>& s_;
};

// The NFA states reachable from `seeds` without reading a byte: ^ edges only at the start,
// $ edges only at the end. Kept: the states that matter after the closure (byte readers, $
// edges still to take, matches), sorted.
std::vector<uint32_t> closure(const std::vector<NfaState>& nfa, const std::vector<uint32_t>& seeds,
                              bool at_start, bool at_end, std::vector<uint32_t>& mark,
                              uint32_t& epoch) {
  ++epoch;
  std::vector<uint32_t> stack(seeds.begin(), seeds.end()), kept;
  while (!stack.empty()) {
    const uint32_t s = stack.back();
    stack.pop_back();
    if (mark[s] == epoch) continue;
    mark[s] = epoch;
    const NfaState& st = nfa[s];
    switch (st.kind) {
      case NfaState::kEps:
        for (uint32_t t : st.eps) stack.push_back(t);
        break;
      case NfaState::kBol:
        if (at_start) stack.push_back(st.out);
        break;
      case NfaState::kEol:
        if (at_end) {
          stack.push_back(st.out);
        } else {
          kept.push_back(s);
        }
        break;
      default:
        kept.push_back(s);
        break;
    }
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

Error too_many_states() {
  return Error{ErrorCode::kInvalidArgument,
               "regex needs more than " + std::to_string(kMaxRegexStates) +
                   " automaton states (kMaxRegexStates), length bounds included; simplify the "
                   "pattern or lower maxLength"};
}

// The states of an automaton (`next`: state * classes + class -> state, UINT32_MAX for none)
// from which a state where `accepting(state)` holds can be reached.
template <class Accepting>
std::vector<bool> reach_accepting(const std::vector<uint32_t>& next, size_t n, size_t classes,
                                  Accepting accepting) {
  std::vector<std::vector<uint32_t>> incoming(n);
  std::vector<bool> live(n, false);
  std::vector<uint32_t> work;
  for (uint32_t s = 0; s < n; ++s) {
    for (size_t cls = 0; cls < classes; ++cls) {
      const uint32_t t = next[s * classes + cls];
      if (t != UINT32_MAX) incoming[t].push_back(s);
    }
    if (accepting(s)) {
      live[s] = true;
      work.push_back(s);
    }
  }
  while (!work.empty()) {
    const uint32_t t = work.back();
    work.pop_back();
    for (uint32_t s : incoming[t]) {
      if (!live[s]) {
        live[s] = true;
        work.push_back(s);
      }
    }
  }
  return live;
}

// `out`'s states, transitions and start: the `live` states of `next` (the start, state 0, among
// them), renumbered in order; the others are dropped (RegexDfa's promise).
template <class Accepting>
void keep_live(const std::vector<uint32_t>& next, uint16_t classes, const std::vector<bool>& live,
               Accepting accepting, RegexDfa& out) {
  const size_t n = live.size();
  std::vector<uint32_t> renumber(n, UINT32_MAX);
  uint32_t kept = 0;
  for (size_t s = 0; s < n; ++s) {
    if (live[s]) renumber[s] = kept++;
  }
  out.classes = classes;
  out.start = 0;
  out.next.assign(size_t{kept} * classes, RegexDfa::kDead);
  out.accepting.assign(kept, 0);
  for (size_t s = 0; s < n; ++s) {
    if (!live[s]) continue;
    const uint32_t id = renumber[s];
    out.accepting[id] = accepting(s);
    for (uint16_t cls = 0; cls < classes; ++cls) {
      const uint32_t t = next[s * classes + cls];
      if (t != UINT32_MAX && live[t]) {
        out.next[size_t{id} * classes + cls] = static_cast<uint16_t>(renumber[t]);
      }
    }
  }
}

}  // namespace

bool RegexDfa::matches(const std::string& text) const {
  if (accepting.empty()) return false;
  uint16_t s = start;
  for (char c : text) {
    s = step(s, static_cast<uint8_t>(c));
    if (s == kDead) return false;
  }
  return accepting[s] != 0;
}

Result<RegexDfa> compile_regex(const std::vector<std::string>& patterns, bool search,
                               uint32_t min_length, uint32_t max_length,
                               const std::vector<std::string>& excluded) {
  std::vector<NfaState> nfa;
  NfaBuilder builder(nfa);
  std::vector<uint32_t> starts, matches, excluded_matches;
  std::vector<std::pair<uint32_t, uint32_t>> owned;  // per pattern: its NFA state ids
  // Without a pattern every string is in (before the exclusions): the search of "".
  const std::vector<std::string> any_string = {""};
  const std::vector<std::string>& required = patterns.empty() ? any_string : patterns;
  const size_t total = required.size() + excluded.size();
  for (size_t i = 0; i < total; ++i) {
    const bool exclude = i >= required.size();
    const std::string& pattern = exclude ? excluded[i - required.size()] : required[i];
    if (pattern.size() > kMaxRegexBytes) {
      return Error{ErrorCode::kInvalidArgument,
                   "regex is longer than " + std::to_string(kMaxRegexBytes) +
                       " bytes (kMaxRegexBytes)"};
    }
    auto ast = Parser(pattern, /*wide=*/exclude).parse();
    if (!ast.ok()) return ast.error();
    Ast whole = std::move(*ast);
    if (search || (patterns.empty() && !exclude)) {  // matches anywhere unless anchored
      Ast any;
      any.kind = Ast::kRepeat;
      any.max = kInfinite;
      any.kids.push_back(set_of({{0, kMaxCodePoint}}));
      Ast seq;
      seq.kids = {any, std::move(whole), any};
      whole = std::move(seq);
    }
    const auto first = static_cast<uint32_t>(nfa.size());
    auto f = builder.emit(whole);
    if (!f.ok()) return f.error();
    const uint32_t match = builder.add();
    nfa[match].kind = NfaState::kMatch;
    nfa[f->second].eps.push_back(match);
    starts.push_back(f->first);
    if (exclude) {
      excluded_matches.push_back(match);
    } else {
      matches.push_back(match);
      owned.emplace_back(first, static_cast<uint32_t>(nfa.size()));
    }
  }

  // Byte classes: bytes that every transition treats alike (and, for counting code points,
  // continuation bytes apart from the others).
  std::array<bool, 257> edge{};
  edge[0x80] = edge[0xC0] = true;
  for (const NfaState& st : nfa) {
    if (st.kind != NfaState::kByte) continue;
    edge[st.lo] = true;
    edge[st.hi + 1] = true;
  }
  RegexDfa dfa;
  std::vector<uint8_t> representative;
  for (int b = 0, cls = -1; b < 256; ++b) {
    if (b == 0 || edge[b]) {
      ++cls;
      representative.push_back(static_cast<uint8_t>(b));
    }
    dfa.byte_class[b] = static_cast<uint8_t>(cls);
  }
  const auto classes = static_cast<uint32_t>(representative.size());

  // Subset construction: a state is the kept closure; the start one is marked apart (^ holds).
  std::vector<uint32_t> mark(nfa.size(), 0);
  uint32_t epoch = 0;
  std::map<std::vector<uint32_t>, uint32_t> ids;
  std::vector<std::vector<uint32_t>> sets;
  std::vector<uint32_t> next;  // set state * classes + class
  std::vector<uint8_t> accepting;
  auto accepts = [&](const std::vector<uint32_t>& seeds, bool at_start) {
    const std::vector<uint32_t> end = closure(nfa, seeds, at_start, true, mark, epoch);
    for (uint32_t m : matches) {
      if (!std::binary_search(end.begin(), end.end(), m)) return false;
    }
    for (uint32_t m : excluded_matches) {
      if (std::binary_search(end.begin(), end.end(), m)) return false;
    }
    return true;
  };
  auto alive = [&](const std::vector<uint32_t>& set) {  // every pattern can still match
    for (const auto& [lo, hi] : owned) {
      auto it = std::lower_bound(set.begin(), set.end(), lo);
      if (it == set.end() || *it >= hi) return false;
    }
    return true;
  };
  auto intern = [&](std::vector<uint32_t> key, bool acc) -> uint32_t {
    auto found = ids.find(key);
    if (found != ids.end()) return found->second;
    const auto id = static_cast<uint32_t>(sets.size());
    ids.emplace(key, id);
    sets.push_back(std::move(key));
    accepting.push_back(acc ? 1 : 0);
    return id;
  };
  {
    std::vector<uint32_t> key = closure(nfa, starts, true, false, mark, epoch);
    const bool acc = accepts(starts, true);
    if (!alive(key)) {
      return Error{ErrorCode::kInvalidArgument, "the regex matches no string at all"};
    }
    key.push_back(UINT32_MAX);  // the start state's marker (last: the set stays sorted)
    intern(std::move(key), acc);
  }
  size_t subset_work = 0;
  for (uint32_t s = 0; s < sets.size(); ++s) {
    if (sets.size() > kMaxRegexStates) return too_many_states();
    if (subset_work > kMaxSubsetWork) {
      return Error{ErrorCode::kInvalidArgument,
                   "regex is too costly to compile (its automaton's states hold too many "
                   "pattern positions, kMaxSubsetWork); lower its {m,n} counts or anchor it"};
    }
    for (uint32_t cls = 0; cls < classes; ++cls) {
      const uint8_t b = representative[cls];
      subset_work += sets[s].size();
      std::vector<uint32_t> seeds;
      for (uint32_t n : sets[s]) {
        if (n == UINT32_MAX) continue;
        const NfaState& st = nfa[n];
        if (st.kind == NfaState::kByte && st.lo <= b && b <= st.hi) seeds.push_back(st.out);
      }
      uint32_t target = UINT32_MAX;
      if (!seeds.empty()) {
        std::vector<uint32_t> key = closure(nfa, seeds, false, false, mark, epoch);
        subset_work += key.size();
        if (alive(key)) {
          const bool acc = accepts(key, false);
          target = intern(std::move(key), acc);
        }
      }
      next.push_back(target);
    }
  }

  // Set states that can still reach an accepting one (an unanchored prefix whose ^ can no
  // longer hold leaves states that read on but never match): the product skips the others.
  const std::vector<bool> can_match =
      reach_accepting(next, sets.size(), classes, [&](size_t s) { return accepting[s]; });

  // Product with a code-point counter: count capped at max_length (bounded) or min_length.
  const bool bounded = max_length != UINT32_MAX;
  const uint64_t cap = bounded ? max_length : min_length;
  std::unordered_map<uint64_t, uint32_t> product_ids;
  std::vector<std::pair<uint32_t, uint64_t>> product;  // (set state, count)
  std::vector<uint32_t> product_next;
  auto product_id = [&](uint32_t s, uint64_t count) -> uint32_t {
    const uint64_t key = uint64_t{s} * (cap + 1) + count;
    auto found = product_ids.find(key);
    if (found != product_ids.end()) return found->second;
    const auto id = static_cast<uint32_t>(product.size());
    product_ids.emplace(key, id);
    product.emplace_back(s, count);
    return id;
  };
  product_id(0, 0);
  for (uint32_t p = 0; p < product.size(); ++p) {
    if (product.size() > kMaxRegexStates) return too_many_states();
    const auto [s, count] = product[p];
    for (uint32_t cls = 0; cls < classes; ++cls) {
      const uint32_t t = next[size_t{s} * classes + cls];
      const bool lead = (representative[cls] & 0xC0) != 0x80;
      uint64_t c = count + (lead ? 1 : 0);
      if (t == UINT32_MAX || !can_match[t] || (bounded && c > cap)) {
        product_next.push_back(UINT32_MAX);
        continue;
      }
      product_next.push_back(product_id(t, std::min(c, cap)));
    }
  }

  // Keep only the states from which an accepting one can be reached.
  auto product_accepting = [&](size_t p) {
    return accepting[product[p].first] && product[p].second >= min_length;
  };
  const std::vector<bool> live =
      reach_accepting(product_next, product.size(), classes, product_accepting);
  if (!live[0]) {
    return Error{ErrorCode::kInvalidArgument,
                 "the regex matches no string whose length lies in [minLength, maxLength]"};
  }
  keep_live(product_next, static_cast<uint16_t>(classes), live, product_accepting, dfa);
  return dfa;
}

RegexPaths shortest_paths(const RegexDfa& dfa, const std::array<uint8_t, 256>& byte_cost) {
  const size_t n = dfa.size();
  RegexPaths paths;
  paths.cost.assign(n, RegexPaths::kNone);
  paths.first_byte.assign(n, 0);
  // Per class: the cheapest writable byte in it (the lowest among equals).
  std::vector<uint8_t> cls_cost(dfa.classes, 0), cls_byte(dfa.classes, 0);
  for (int b = 255; b >= 0; --b) {
    const uint8_t cls = dfa.byte_class[b];
    const uint8_t c = byte_cost[b];
    if (c != 0 && (cls_cost[cls] == 0 || c <= cls_cost[cls])) {
      cls_cost[cls] = c;
      cls_byte[cls] = static_cast<uint8_t>(b);
    }
  }
  std::vector<std::vector<std::pair<uint16_t, uint16_t>>> incoming(n);  // (from, class)
  for (size_t s = 0; s < n; ++s) {
    for (uint16_t cls = 0; cls < dfa.classes; ++cls) {
      const uint16_t t = dfa.next[s * dfa.classes + cls];
      if (t != RegexDfa::kDead && cls_cost[cls] != 0) {
        incoming[t].emplace_back(static_cast<uint16_t>(s), cls);
      }
    }
  }
  using Item = std::pair<uint32_t, uint32_t>;  // (cost, state)
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  for (size_t s = 0; s < n; ++s) {
    if (dfa.accepting[s]) {
      paths.cost[s] = 0;
      queue.emplace(0, static_cast<uint32_t>(s));
    }
  }
  while (!queue.empty()) {
    const auto [cost, t] = queue.top();
    queue.pop();
    if (cost != paths.cost[t]) continue;
    for (const auto& [s, cls] : incoming[t]) {
      const uint32_t c = cost + cls_cost[cls];
      if (c < paths.cost[s]) {
        paths.cost[s] = c;
        queue.emplace(c, s);
      }
    }
  }
  // The first byte of each state's shortest path: the lowest byte that starts one.
  for (size_t s = 0; s < n; ++s) {
    if (paths.cost[s] == RegexPaths::kNone || paths.cost[s] == 0) continue;
    for (int b = 0; b < 256; ++b) {
      if (byte_cost[b] == 0) continue;
      const uint16_t t = dfa.step(static_cast<uint16_t>(s), static_cast<uint8_t>(b));
      if (t != RegexDfa::kDead && paths.cost[t] != RegexPaths::kNone &&
          paths.cost[t] + byte_cost[b] == paths.cost[s]) {
        paths.first_byte[s] = static_cast<uint8_t>(b);
        break;
      }
    }
  }
  return paths;
}

Result<RegexDfa> without_pair(const RegexDfa& dfa, uint8_t first, uint8_t second) {
  // Byte classes: the old ones, with `first` and `second` split off into their own.
  RegexDfa out;
  std::map<std::pair<uint8_t, int>, uint8_t> class_of;
  for (int b = 0; b < 256; ++b) {
    const int tag = b == first ? 1 : b == second ? 2 : 0;
    auto found = class_of.emplace(std::make_pair(dfa.byte_class[b], tag),
                                  static_cast<uint8_t>(class_of.size()));
    out.byte_class[b] = found.first->second;
  }
  const auto classes = static_cast<uint16_t>(class_of.size());
  std::vector<int> representative(classes, -1);
  for (int b = 0; b < 256; ++b) {
    if (representative[out.byte_class[b]] < 0) representative[out.byte_class[b]] = b;
  }
  // Product states (old state, the last byte was `first`), reachable from the start.
  std::map<std::pair<uint16_t, bool>, uint32_t> index;
  std::vector<std::pair<uint16_t, bool>> states;
  std::vector<uint32_t> next;  // state * classes + class -> state or UINT32_MAX
  auto id_of = [&](uint16_t s, bool after) {
    auto found = index.emplace(std::make_pair(s, after), static_cast<uint32_t>(states.size()));
    if (found.second) states.emplace_back(s, after);
    return found.first->second;
  };
  id_of(dfa.start, false);
  for (size_t i = 0; i < states.size(); ++i) {
    if (states.size() > kMaxRegexStates) {
      return Error{ErrorCode::kInvalidArgument,
                   "the regex needs more than " + std::to_string(kMaxRegexStates) +
                       " automaton states (kMaxRegexStates) once '" + std::string(1, first) +
                       std::string(1, second) + "' is left out"};
    }
    const auto [s, after] = states[i];
    next.resize((i + 1) * classes, UINT32_MAX);
    for (uint16_t cls = 0; cls < classes; ++cls) {
      const auto b = static_cast<uint8_t>(representative[cls]);
      if (after && b == second) continue;
      const uint16_t t = dfa.step(s, b);
      if (t == RegexDfa::kDead) continue;
      next[i * classes + cls] = id_of(t, b == first);
    }
  }
  // Keep the states that can still reach an accepting one (RegexDfa's promise).
  auto was_accepting = [&](size_t i) { return dfa.accepting[states[i].first] != 0; };
  const std::vector<bool> live = reach_accepting(next, states.size(), classes, was_accepting);
  if (!live[0]) {
    return Error{ErrorCode::kInvalidArgument,
                 "every string the regex matches contains '" + std::string(1, first) +
                     std::string(1, second) + "'"};
  }
  keep_live(next, classes, live, was_accepting, out);
  return out;
}

}  // namespace rne::grammar
