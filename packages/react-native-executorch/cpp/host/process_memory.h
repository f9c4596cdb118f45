// This process's resident memory as Linux reports it in /proc/self/status, for the host tools
// and tests that measure it (other systems have no such file: every figure stays -1).
#pragma once

#include <cstdint>
#include <cstdio>

namespace rne::host {

struct ResidentBytes {
  int64_t peak = -1;  // VmHWM: the highest VmRSS since the last clear_refs "5"
  int64_t anon = -1;  // RssAnon: the process's own memory (heap, caches, packed weights)
  int64_t file = -1;  // RssFile: pages of mapped files (the model), reclaimable when clean
};

inline ResidentBytes resident_bytes() {
  ResidentBytes r;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return r;
  char line[256];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    long long kb = 0;
    if (std::sscanf(line, "VmHWM: %lld kB", &kb) == 1) r.peak = kb * 1024;
    else if (std::sscanf(line, "RssAnon: %lld kB", &kb) == 1) r.anon = kb * 1024;
    else if (std::sscanf(line, "RssFile: %lld kB", &kb) == 1) r.file = kb * 1024;
  }
  std::fclose(f);
  return r;
}

}  // namespace rne::host
