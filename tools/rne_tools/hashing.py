"""File hashing shared by the export reports, the checkpoint cache, the binary manifests and the
registry downloads: one streaming sha256 with a progress bar for multi-GB files."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tqdm import tqdm

# Below this size hashing is quick enough that a progress bar would only flash.
PROGRESS_MIN_BYTES = 256 << 20


def sha256_file(path: Path | str, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks; a progress bar for large files (several GB)."""
    digest = hashlib.sha256()
    size = Path(path).stat().st_size
    with (
        open(path, "rb") as f,
        tqdm(
            total=size,
            unit="B",
            unit_scale=True,
            desc=f"sha256 {Path(path).name}",
            leave=False,
            disable=size < PROGRESS_MIN_BYTES,
        ) as bar,
    ):
        while block := f.read(chunk):
            digest.update(block)
            bar.update(len(block))
    return digest.hexdigest()
