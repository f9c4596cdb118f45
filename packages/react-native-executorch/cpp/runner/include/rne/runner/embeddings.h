// What an encoder program (VisionEncoder, AudioEncoder) gives for one image or clip: the rows
// that replace its soft tokens in the decoder's input, in order.
#pragma once

#include <cstdint>
#include <vector>

namespace rne::runner {

struct Embeddings {
  int64_t num_tokens = 0;
  int64_t hidden = 0;
  std::vector<float> values;  // [num_tokens, hidden] float32, row-major
};

}  // namespace rne::runner
