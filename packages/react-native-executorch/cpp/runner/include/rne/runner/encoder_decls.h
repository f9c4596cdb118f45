// What the encoder headers (audio_encoder.h, vision_encoder.h) declare alike: the types their
// load and encode calls take and return, and the two that the one program loader
// (runner/src/program_loader.h) keeps behind them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rne/runner/embeddings.h"
#include "rne/runner/model_file.h"
#include "rne/runner/result.h"

namespace executorch::extension::module {
class Module;
}

namespace rne::runner::detail {
struct OpenedProgram;
}
