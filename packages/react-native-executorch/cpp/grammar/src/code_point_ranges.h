// Sets of Unicode code points as sorted, disjoint [lo, hi] ranges: the character classes of the
// regex and GBNF compilers. Private to runner/src.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace rne::grammar::code_points {

constexpr uint32_t kMax = 0x10FFFF;

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

// Sorted, with overlapping and adjacent ranges merged.
inline Ranges normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

// Every code point up to kMax that `r` leaves out.
inline Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : normalized(r)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMax) out.emplace_back(next, kMax);
  return out;
}

// `r` without U+D800..U+DFFF (not characters: UTF-8 cannot hold them).
inline Ranges without_surrogates(const Ranges& r) {
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (lo <= 0xDFFF && hi >= 0xD800) {
      if (lo < 0xD800) out.emplace_back(lo, 0xD7FF);
      if (hi > 0xDFFF) out.emplace_back(0xE000, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

}  // namespace rne::grammar::code_points
