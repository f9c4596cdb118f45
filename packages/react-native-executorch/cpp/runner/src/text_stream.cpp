#include "rne/runner/text_stream.h"

#include <algorithm>

#include "rne/base/utf8.h"

namespace rne::runner {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    size_t length = 0;
    const size_t have = base::utf8::valid_prefix_length(pending_, i, length);
    if (length == 0) {
      out.append(kReplacement);
      ++i;
      continue;
    }
    if (have == length) {
      out.append(pending_, i, length);
      i += length;
      continue;
    }
    if (i + have == pending_.size()) break;  // unfinished: keep it for the next push
    out.append(kReplacement);
    i += have;  // resynchronise at the offending byte
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
