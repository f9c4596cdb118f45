#include "rne/runner/text_stream.h"

#include <algorithm>

namespace rne::runner {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the sequence a lead byte announces, or 0 for a byte that cannot start one.
size_t sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // continuation byte, overlong lead (C0/C1) or beyond U+10FFFF (F5..FF)
}

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Whether the second byte is allowed after `lead` (rules out overlongs and surrogates).
bool valid_second(unsigned char lead, unsigned char second) {
  switch (lead) {
    case 0xE0: return second >= 0xA0 && second <= 0xBF;
    case 0xED: return second >= 0x80 && second <= 0x9F;
    case 0xF0: return second >= 0x90 && second <= 0xBF;
    case 0xF4: return second >= 0x80 && second <= 0x8F;
    default: return is_continuation(second);
  }
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const auto lead = static_cast<unsigned char>(pending_[i]);
    const size_t length = sequence_length(lead);
    if (length == 0) {
      out.append(kReplacement);
      ++i;
      continue;
    }
    // Check the bytes we have; stop (and wait) only if the character is merely unfinished.
    size_t have = 1;
    bool malformed = false;
    while (have < length && i + have < pending_.size()) {
      const auto byte = static_cast<unsigned char>(pending_[i + have]);
      const bool ok = have == 1 ? valid_second(lead, byte) : is_continuation(byte);
      if (!ok) {
        malformed = true;
        break;
      }
      ++have;
    }
    if (malformed) {
      out.append(kReplacement);
      i += have;  // resynchronise at the offending byte
      continue;
    }
    if (have < length) break;  // unfinished: keep it for the next push
    out.append(pending_, i, length);
    i += length;
  }
  pending_.erase(0, i);
  return out;
}

std::string Utf8Stream::flush() {
  std::string out = pending_.empty() ? "" : std::string(kReplacement);
  pending_.clear();
  return out;
}

StopStringFilter::StopStringFilter(std::vector<std::string> stop_strings) {
  for (auto& s : stop_strings) {
    if (!s.empty()) stop_strings_.push_back(std::move(s));
  }
}

std::string StopStringFilter::push(std::string_view text) {
  if (stopped_) return "";
  held_.append(text);
  // Earliest complete match wins.
  size_t match = std::string::npos;
  for (const auto& stop : stop_strings_) match = std::min(match, held_.find(stop));
  if (match != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, match);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& stop : stop_strings_) {
    for (size_t n = std::min(stop.size() - 1, held_.size()); n > hold; --n) {
      if (held_.compare(held_.size() - n, n, stop, 0, n) == 0) {
        hold = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopStringFilter::flush() {
  std::string out = stopped_ ? "" : held_;
  held_.clear();
  return out;
}

}  // namespace rne::runner
