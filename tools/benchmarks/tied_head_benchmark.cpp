// Times cpp/kernels/tied_head.h alone on Gemma 4 E2B's head (262,144 rows x 1,536, 4-bit, group
// 128, fp16 scales, random values) for 1-8 positions: what forward(1) and verify(k) pay for the
// head. Built and run by tied_head_benchmark.py, which compiles it once against this checkout's
// header and once against another revision's, and runs the two in turn. Prints, per count of
// positions, the least thread CPU time of `--repeat` calls on one thread: CPU time rather than
// wall time, so other processes sharing the cores do not count.
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "tied_head.h"

namespace th = rne::tied_head;

int main(int argc, char** argv) {
  const int repeat = argc > 1 ? std::atoi(argv[1]) : 7;
  constexpr int64_t kVocab = 262144, kDim = 1536, kGroup = 128, kMaxRows = 8;
  std::mt19937 rng(1);
  std::vector<uint8_t> packed(static_cast<size_t>(kVocab * kDim / 2));
  for (uint8_t& b : packed) b = static_cast<uint8_t>(rng());
  std::vector<uint16_t> scales(static_cast<size_t>(kVocab * kDim / kGroup), 0x2000);  // 2^-7
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(kMaxRows * kDim));
  for (float& v : x) v = unit(rng);
  std::vector<float> out(static_cast<size_t>(kMaxRows * kVocab));
  const auto serial = [](size_t n, const std::function<void(size_t)>& f) {
    for (size_t i = 0; i < n; ++i) f(i);
  };
  std::printf("{");
  for (int64_t rows = 1; rows <= kMaxRows; ++rows) {
    const th::Problem p{x.data(), rows,  kDim,   packed.data(), scales.data(),
                        true,     kGroup, kVocab, out.data()};
    double best = 1e30;
    for (int i = 0; i < repeat; ++i) {
      timespec start{}, end{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
      th::compute(p, 1, serial);
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
      best = std::min(best, (end.tv_sec - start.tv_sec) * 1e3 +
                                (end.tv_nsec - start.tv_nsec) / 1e6);
    }
    std::printf("%s\"%lld\": %.2f", rows > 1 ? ", " : "", static_cast<long long>(rows), best);
  }
  std::printf("}\n");
  return 0;
}
