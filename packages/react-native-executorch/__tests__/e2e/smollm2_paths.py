"""Prints the SmolLM2 files of the end-to-end jest suites as JSON: the cached fp32 export
(exported on first use, ~2-3 min) and the checkpoint holding its tokenizer. Run by
globalSetup.js with the repo's .venv python."""

import json
import subprocess
import sys

from rne_tools.gguf_import import default_checkpoint
from rne_tools.paths import REPO_ROOT


def main() -> None:
    export = subprocess.run(
        [sys.executable, "tools/export_model.py", "--model", "smollm2_135m", "--backend", "xnnpack",
         "--quantization", "fp32", "--cached", "--quiet"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    pte = export.stdout.strip().splitlines()[-1]
    print(json.dumps({"RNE_E2E_PTE": pte, "RNE_E2E_TOKENIZER_DIR": str(default_checkpoint("smollm2_135m"))}))


if __name__ == "__main__":
    main()
