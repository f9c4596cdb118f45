"""Fetch a published registry variant through ``huggingface_hub`` and verify every file.

The registry pins the repository revision and each file's sha256 and size; a file that does not
match is deleted and fetched once more (a corrupt local copy), and if the server still serves
different bytes the download fails naming the file, the expected and the received checksum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import hf_hub_download
from huggingface_hub.errors import HfHubHTTPError
from tqdm import tqdm

from rne_tools import registry
from rne_tools.hashing import sha256_file
from rne_tools.paths import REGISTRY_DIR, contained_path
from rne_tools.publish.errors import DownloadError
from rne_tools.registry import FileSpec


@dataclass(frozen=True)
class DownloadedVariant:
    """Local paths of a verified variant: its program (the one with the assistant drafter where
    asked for), tokenizer files and published encoders."""

    model_id: str
    backend: str
    revision: str
    directory: Path
    pte: Path
    tokenizer_files: dict[str, Path]  # repository path -> local path
    chat_template: Path  # the tokenizer file that holds the chat template
    # The variant's published encoders: media capability ("vision", "audio") -> local path.
    encoders: dict[str, Path] = field(default_factory=dict)


def _mismatch(path: Path, expected: FileSpec) -> str | None:
    size = path.stat().st_size
    if size != expected.size:
        return f"size {size} bytes, registry says {expected.size}"
    digest = sha256_file(path)
    if digest != expected.sha256:
        return f"sha256 {digest}, registry says {expected.sha256}"
    return None


def download_variant(
    model_id: str,
    backend: str,
    dest: Path,
    *,
    registry_dir: Path = REGISTRY_DIR,
    endpoint: str | None = None,
    token: str | bool | None = None,
    assistant: bool = False,
) -> DownloadedVariant:
    """Download the ``backend`` variant of ``model_id``, its tokenizer and its published encoders
    into ``dest`` (an unpublished encoder is left out, as the SDK's downloader does: the model
    then runs without that input).

    Files land under ``dest`` at their repository paths, fetched at the revision the registry
    pins. ``endpoint``/``token`` default to the standard Hugging Face settings (``HF_ENDPOINT``,
    ``HF_TOKEN`` or the saved login). Raises ``DownloadError`` for an unpublished variant, an
    unreachable file, or a file whose sha256 or size differs from the registry.

    ``assistant``: fetch the variant's program with the assistant drafter instead of its plain
    program, as the SDK does for ``assistant: true`` (``DownloadError`` where the variant has
    none, naming the variants that do, or where it is unpublished).
    """
    reg = registry.load_registry(registry_dir)
    spec = reg.model(model_id)
    variant = spec.variant(backend)
    program = _assistant_file(reg, model_id, backend) if assistant else variant.pte
    if not variant.published or not spec.tokenizer.published:
        what = "variant" if not variant.published else "tokenizer"
        raise DownloadError(
            f"the {what} of '{model_id}' ({backend}) is not published yet, so the registry has no "
            "checksums to verify a download against; publish it with tools/publish_models.py"
        )
    dest = Path(dest)
    encoders = {kind: e.file for kind, e in variant.encoders.items() if e.published}
    others = [f for f in variant.files if f != variant.pte]
    files = [program, *others, *spec.tokenizer.files, *encoders.values()]
    local: dict[str, Path] = {}
    for f in tqdm(files, desc=f"{model_id}/{backend}", unit="file"):
        local[f.path] = _fetch_verified(spec.hf_repo, spec.revision, f, dest, endpoint, token)
    return DownloadedVariant(
        model_id=model_id,
        backend=backend,
        revision=spec.revision,
        directory=dest,
        pte=local[program.path],
        tokenizer_files={f.path: local[f.path] for f in spec.tokenizer.files},
        chat_template=local[spec.chat_template],
        encoders={kind: local[f.path] for kind, f in encoders.items()},
    )


def _assistant_file(reg: registry.Registry, model_id: str, backend: str) -> FileSpec:
    found = reg.model(model_id).variant(backend).assistant
    if found is None:
        having = [
            f"{m.id} ({b})" for m in reg.models.values() for b, v in m.variants.items() if v.assistant
        ]
        raise DownloadError(
            f"the {backend} variant of '{model_id}' has no assistant drafter; variants with one: "
            f"{', '.join(having) or 'none'}"
        )
    if not found.published:
        raise DownloadError(
            f"the assistant of '{model_id}' ({backend}, {found.file.path}) is not published yet, "
            "so the registry has no checksum to verify a download against; publish it with "
            "tools/publish_models.py"
        )
    return found.file


def _fetch_verified(
    repo: str,
    revision: str,
    f: FileSpec,
    dest: Path,
    endpoint: str | None,
    token: str | bool | None,
) -> Path:
    # hf_hub_download joins local_dir and the repository path itself: check the join first, and
    # that it wrote exactly there.
    target = contained_path(dest, f.path, what=f"{repo}@{revision}: registry file path")
    problem = None
    for force in (False, True):
        try:
            path = Path(
                hf_hub_download(
                    repo,
                    f.path,
                    revision=revision,
                    local_dir=dest,
                    endpoint=endpoint,
                    token=token,
                    force_download=force,
                )
            )
        except (HfHubHTTPError, OSError) as exc:
            raise DownloadError(
                f"cannot download {f.path} from {repo}@{revision}: {exc}".rstrip()
            ) from exc
        if path.resolve() != target.resolve():
            raise DownloadError(f"{repo}@{revision}: {f.path} was written to {path}, not {target}")
        problem = _mismatch(path, f)
        if problem is None:
            return path
        path.unlink()
    raise DownloadError(
        f"{repo}@{revision}: {f.path} does not match the registry ({problem}); the repository "
        "content differs from what was published, so it was deleted and not used"
    )
