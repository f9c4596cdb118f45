#!/usr/bin/env bash
# Every test suite of the repository, in order of speed. Assumes scripts/setup.sh ran.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1
# Every CMake build below (and those the tests start) goes through ccache, with paths relative to
# the checkout, so a fresh clone on a machine that built before recompiles nothing unchanged.
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi

step() { printf '\n=== %s\n' "$*"; }

step "model registry: validate and check the generated TypeScript"
.venv/bin/python tools/gen_registry.py --check

step "ruff"
.venv/bin/ruff check tools tests

step "TypeScript: typecheck and jest"
npm run --silent typecheck
npm test --silent

if [ -f packages/react-native-executorch/cpp/CMakeLists.txt ]; then
  step "C++: host build and ctest"
  .venv/bin/python tools/build_binaries.py --platform host
  .venv/bin/ctest --test-dir build/host --output-on-failure

  step "TypeScript end to end: LLMModule and useLLM on the real runner (Node-API addon)"
  RNE_NODE_ADDON="$PWD/build/host/node/rne_node.node" npm run --silent test:e2e -w react-native-executorch
fi

# ExecuTorch built from the locked source (kernels, XNNPACK, Vulkan on lavapipe, MLX on its CPU
# backend), where the source cache exists (~/.cache/rne, or RNE_CACHE_DIR): the execution-parity
# tests run on it. Without the source, pytest does not collect those tests and prints one NOT RUN
# line saying how to get it.
FROM_SOURCE=()
if PYTHONPATH=tools .venv/bin/python -c 'import sys; from rne_tools.binaries.lock import load_lock; from rne_tools.binaries.source_cache import SourceLayout; from rne_tools.paths import cache_root; sys.exit(not SourceLayout(cache_root(), load_lock()).is_complete())' 2>/dev/null; then
  step "C++: ExecuTorch from source (build or reuse) and our core against it"
  .venv/bin/python tools/build_binaries.py --platform linux --jobs 2
  FROM_SOURCE=(--from-source)
fi

# Our C++ core cross-compiled for arm64, where the cross toolchain is installed (scripts/setup.sh):
# against ExecuTorch cross-built from the same locked source where that exists, else against the
# release's aarch64 SDK. tests/runner/test_arm64_emulated.py runs it under qemu-user; without the
# toolchain that module prints one NOT RUN line (docs/arm64.md).
if command -v aarch64-linux-gnu-g++ >/dev/null && command -v qemu-aarch64 >/dev/null; then
  step "C++: arm64 cross build (build/linux-arm64, tested under qemu by pytest)"
  .venv/bin/python tools/build_binaries.py --platform linux-arm64 --jobs 2 "${FROM_SOURCE[@]}"
fi

step "pytest"
.venv/bin/python -m pytest tests --durations=15
