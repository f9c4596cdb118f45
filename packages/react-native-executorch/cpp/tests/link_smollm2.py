"""Links the real SmolLM2-135M-Instruct files into a directory for the runner's model tests:
model.pte (the cached fp32 XNNPACK export, exported once per machine, ~2-3 min) and
tokenizer.json (from the imported checkpoint). Run by CTest's smollm2_files fixture with the
repo's .venv python; the paths come from the end-to-end suites' helper, so both use one export."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[4]
HELPER = REPO_ROOT / "packages/react-native-executorch/__tests__/e2e/smollm2_paths.py"


def main(out_dir: str) -> None:
    found = subprocess.run([sys.executable, str(HELPER)], cwd=REPO_ROOT, capture_output=True,
                           text=True, check=True,
                           env=dict(os.environ, PYTHONPATH=str(REPO_ROOT / "tools")))
    paths = json.loads(found.stdout)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, target in (("model.pte", Path(paths["RNE_E2E_PTE"])),
                         ("tokenizer.json", Path(paths["RNE_E2E_TOKENIZER_DIR"]) / "tokenizer.json")):
        link = out / name
        link.unlink(missing_ok=True)
        link.symlink_to(target)


if __name__ == "__main__":
    main(sys.argv[1])
