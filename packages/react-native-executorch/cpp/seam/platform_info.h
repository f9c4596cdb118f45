// Facts only the platform layer knows (src/native/seam.ts, NativePlatformInfo). Kept apart from
// seam_core.h so that the platform glue (ios/, android/) needs no runner headers.
#pragma once

#include <string>

namespace rne::seam {

struct PlatformInfo {
  std::string os;          // "ios" or "android"
  bool is_simulator = false;
  std::string os_version;  // "17.4" on iOS, the API level ("34") on Android
};

}  // namespace rne::seam
