"""Well-known locations inside the repository, resolved relative to this file."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
REGISTRY_DIR = REPO_ROOT / "model-registry"
PACKAGE_DIR = REPO_ROOT / "packages" / "react-native-executorch"
CACHE_DIR = REPO_ROOT / ".cache"
