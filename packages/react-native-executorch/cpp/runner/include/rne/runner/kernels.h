// The runner's own operator kernels: ops our exports call that no ExecuTorch library provides.
#pragma once

namespace rne::runner {

// Registers them with ExecuTorch's kernel registry, once per process (later calls return the
// first result). ModelFile::open calls it, so every program the runner loads finds them; code
// that loads programs through ExecuTorch's Module directly calls it first. False if a
// registration failed (logged).
bool register_kernels();

}  // namespace rne::runner
