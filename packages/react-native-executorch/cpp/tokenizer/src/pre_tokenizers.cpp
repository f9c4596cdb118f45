#include "pre_tokenizers.h"

#include <algorithm>
#include <utility>

#include "byte_level.h"
#include "config.h"
#include "unicode.h"

namespace rne::tokenizer {

namespace {

constexpr const char* kSupported =
    "ByteLevel, Digits, Metaspace, Split (string pattern or the GPT-2 regex), Sequence";

// A contiguous byte range of a piece, and whether the pattern matched it.
struct Segment {
  size_t begin, end;
  bool is_match;
};

// HF SplitDelimiterBehavior.
enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Turns matched/unmatched segments (covering a piece, in order) into sub-pieces following
// `behavior`, with HF's exact rules for runs of consecutive matches.
void apply_behavior(const Piece& piece, std::vector<Segment> segments, Behavior behavior,
                    std::vector<Piece>& out) {
  std::vector<std::pair<size_t, size_t>> ranges;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const Segment& s : segments) {
        if (!s.is_match) ranges.emplace_back(s.begin, s.end);
      }
      break;
    case Behavior::kIsolated:
      for (const Segment& s : segments) ranges.emplace_back(s.begin, s.end);
      break;
    case Behavior::kContiguous: {
      bool previous_match = false;
      for (const Segment& s : segments) {
        if (s.is_match == previous_match && !ranges.empty()) ranges.back().second = s.end;
        else ranges.emplace_back(s.begin, s.end);
        previous_match = s.is_match;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Segment& s : segments) {
        if (s.is_match && !previous_match && !ranges.empty()) ranges.back().second = s.end;
        else ranges.emplace_back(s.begin, s.end);
        previous_match = s.is_match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool next_match = false;
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->is_match && !next_match && !ranges.empty()) ranges.back().first = it->begin;
        else ranges.emplace_back(it->begin, it->end);
        next_match = it->is_match;
      }
      std::reverse(ranges.begin(), ranges.end());
      break;
    }
  }
  for (const auto& [begin, end] : ranges) {
    if (begin == end) continue;
    out.push_back({piece.text.substr(begin, end - begin), piece.at_text_start && begin == 0});
  }
}

// Unmatched gaps between sorted, non-overlapping matches, so segments cover the piece.
std::vector<Segment> with_gaps(const std::vector<std::pair<size_t, size_t>>& matches,
                               size_t size, bool invert) {
  std::vector<Segment> segments;
  size_t pos = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > pos) segments.push_back({pos, begin, invert});
    segments.push_back({begin, end, !invert});
    pos = end;
  }
  if (pos < size) segments.push_back({pos, size, invert});
  return segments;
}

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}

  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 2);
    std::vector<std::pair<size_t, size_t>> ranges;
    for (Piece& piece : pieces) {
      if (add_prefix_space_ && (piece.text.empty() || piece.text[0] != ' ')) {
        piece.text.insert(0, 1, ' ');
      }
      ranges.clear();
      if (use_regex_) byte_level::split_gpt2(piece.text, ranges);
      else ranges.emplace_back(0, piece.text.size());
      for (const auto& [begin, end] : ranges) {
        Piece sub{std::string(), piece.at_text_start && begin == 0};
        byte_level::encode_bytes(std::string_view(piece.text).substr(begin, end - begin), sub.text);
        out.push_back(std::move(sub));
      }
    }
    pieces = std::move(out);
  }
  // A byte becomes a character of up to 2 bytes, and a one-byte piece gains a prefix space.
  double growth() const override { return add_prefix_space_ ? 4 : 2; }

 private:
  bool add_prefix_space_, use_regex_;
};

// Splits numeric characters (Unicode N*) out, one per piece or as runs.
class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}

  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const Piece& piece : pieces) {
      std::vector<std::pair<size_t, size_t>> matches;
      for (size_t pos = 0; pos < piece.text.size();) {
        uint32_t cp = 0;
        const size_t n = unicode::decode_utf8(piece.text, pos, cp);
        if (unicode::classify(cp) == unicode::CharClass::kNumber) matches.emplace_back(pos, pos + n);
        pos += n;
      }
      apply_behavior(piece, with_gaps(matches, piece.text.size(), false),
                     individual_ ? Behavior::kIsolated : Behavior::kContiguous, out);
    }
    pieces = std::move(out);
  }

 private:
  bool individual_;
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  Metaspace(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}

  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (Piece& piece : pieces) {
      std::string text;
      for (const char c : piece.text) {
        if (c == ' ') text += replacement_;
        else text += c;
      }
      const bool starts_with_replacement = text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts_with_replacement &&
          (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && piece.at_text_start))) {
        text.insert(0, replacement_);
      }
      Piece replaced{std::move(text), piece.at_text_start};
      if (!split_) {
        out.push_back(std::move(replaced));
        continue;
      }
      std::vector<std::pair<size_t, size_t>> matches;
      for (size_t pos = 0; (pos = replaced.text.find(replacement_, pos)) != std::string::npos;
           pos += replacement_.size()) {
        matches.emplace_back(pos, pos + replacement_.size());
      }
      apply_behavior(replaced, with_gaps(matches, replaced.text.size(), false),
                     Behavior::kMergedWithNext, out);
    }
    pieces = std::move(out);
  }
  // Each space becomes the replacement, and a one-byte piece may gain it as a prefix.
  double growth() const override {
    const double r = static_cast<double>(replacement_.size());
    return std::max(1.0, r) + r;
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

class Split final : public PreTokenizer {
 public:
  // An empty pattern means the GPT-2 regex.
  Split(std::string pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  void split(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    for (const Piece& piece : pieces) {
      std::vector<std::pair<size_t, size_t>> matches;
      if (pattern_.empty()) {
        byte_level::split_gpt2(piece.text, matches);
      } else {
        for (size_t pos = 0; (pos = piece.text.find(pattern_, pos)) != std::string::npos;
             pos += pattern_.size()) {
          matches.emplace_back(pos, pos + pattern_.size());
        }
      }
      apply_behavior(piece, with_gaps(matches, piece.text.size(), invert_), behavior_, out);
    }
    pieces = std::move(out);
  }

 private:
  std::string pattern_;
  Behavior behavior_;
  bool invert_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void split(std::vector<Piece>& pieces) const override {
    for (const auto& step : steps_) step->split(pieces);
  }
  size_t steps() const override { return sequence_steps(steps_); }
  double growth() const override { return sequence_growth(steps_); }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

bool parse_behavior(const std::string& name, Behavior& out) {
  if (name == "Removed") out = Behavior::kRemoved;
  else if (name == "Isolated") out = Behavior::kIsolated;
  else if (name == "MergedWithPrevious") out = Behavior::kMergedWithPrevious;
  else if (name == "MergedWithNext") out = Behavior::kMergedWithNext;
  else if (name == "Contiguous") out = Behavior::kContiguous;
  else return false;
  return true;
}

Result<std::unique_ptr<PreTokenizer>> build(const json::Value& config, const std::string& path) {
  if (config.is_null()) return std::unique_ptr<PreTokenizer>();
  ConfigReader r(config, path);
  const std::string type = r.string("type");
  if (!r.ok()) return r.error();

  std::unique_ptr<PreTokenizer> result;
  if (type == "ByteLevel") {
    result = std::make_unique<ByteLevel>(r.boolean_or("add_prefix_space", true),
                                         r.boolean_or("use_regex", true));
  } else if (type == "Digits") {
    result = std::make_unique<Digits>(r.boolean_or("individual_digits", false));
  } else if (type == "Metaspace") {
    const std::string replacement = r.string("replacement");
    if (auto e = check_step_string(replacement, r.child_path("replacement"))) return *e;
    // Older files carry add_prefix_space instead of prepend_scheme.
    const std::string scheme =
        r.string_or("prepend_scheme", r.boolean_or("add_prefix_space", true) ? "always" : "never");
    Metaspace::Prepend prepend = Metaspace::Prepend::kAlways;
    if (scheme == "first") prepend = Metaspace::Prepend::kFirst;
    else if (scheme == "never") prepend = Metaspace::Prepend::kNever;
    else if (scheme != "always") return unsupported("Metaspace prepend_scheme", scheme, path, "always, first, never");
    if (!r.ok()) return r.error();
    result = std::make_unique<Metaspace>(replacement, prepend, r.boolean_or("split", true));
  } else if (type == "Split") {
    const json::Value* pattern = r.object("pattern");
    const std::string behavior_name = r.string("behavior");
    const bool invert = r.boolean_or("invert", false);
    if (!r.ok()) return r.error();
    Behavior behavior;
    if (!parse_behavior(behavior_name, behavior)) {
      return unsupported("Split behavior", behavior_name, r.child_path("behavior"),
                         "Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
    }
    if (const json::Value* s = pattern->find("String"); s != nullptr && s->is_string()) {
      if (s->as_string().empty()) {
        return Error{ErrorCode::kInvalidTokenizer, "empty Split pattern at " + r.child_path("pattern")};
      }
      if (auto e = check_step_string(s->as_string(), r.child_path("pattern"))) return *e;
      result = std::make_unique<Split>(s->as_string(), behavior, invert);
    } else if (const json::Value* re = pattern->find("Regex"); re != nullptr && re->is_string()) {
      if (re->as_string() != byte_level::kGpt2Pattern) {
        return unsupported("Split regex", re->as_string(), r.child_path("pattern"),
                           "string patterns and the GPT-2 regex; other regexes need a matcher "
                           "in byte_level.cpp");
      }
      result = std::make_unique<Split>(std::string(), behavior, invert);
    } else {
      return Error{ErrorCode::kInvalidTokenizer,
                   "Split pattern at " + r.child_path("pattern") + " needs a String or Regex"};
    }
  } else if (type == "Sequence") {
    auto steps = sequence_items<PreTokenizer>(r, "pretokenizers", build);
    if (!steps.ok()) return steps.error();
    result = std::make_unique<Sequence>(std::move(steps).value());
  } else {
    return unsupported("pre-tokenizer", type, path, kSupported);
  }
  if (!r.ok()) return r.error();
  return result;
}

}  // namespace

Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const json::Value& config,
                                                         const std::string& path) {
  auto pre_tokenizer = build(config, path);
  if (pre_tokenizer.ok() && pre_tokenizer.value()) {
    const PreTokenizer& built = *pre_tokenizer.value();
    if (auto e = check_pipeline(path, built.steps(), built.growth())) return *e;
  }
  return pre_tokenizer;
}

}  // namespace rne::tokenizer
