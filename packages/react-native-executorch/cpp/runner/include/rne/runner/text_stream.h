// Turning a stream of token bytes into text a UI can show piece by piece.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rne::runner {

// Accepts arbitrary byte pieces (a byte-level token can end mid-character) and releases only
// whole UTF-8 characters. Malformed bytes come out as U+FFFD so the stream never stalls.
class Utf8Stream {
 public:
  // Appends `bytes` and returns the complete characters now available (possibly empty).
  std::string push(std::string_view bytes);
  // Returns what is left; an unfinished character at the end becomes U+FFFD.
  std::string flush();

 private:
  std::string pending_;
};

// Holds back text that might be the start of a stop string, and reports when one appears.
// Text after the stop string is never released.
class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stop_strings);

  // Appends `text`; returns what is safe to show. Sets stopped() when a stop string matched,
  // in which case the returned text ends right before it.
  std::string push(std::string_view text);
  // Releases the held-back tail (call when generation ended for another reason).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stop_strings_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace rne::runner
