"""Load Hugging Face-format checkpoints (config.json + safetensors) into our model definitions.

A checkpoint directory holds ``config.json`` and either ``model.safetensors`` or shards listed in
``model.safetensors.index.json``. Tensors are streamed one at a time into a model whose parameters
were allocated without initialisation, so peak memory stays near one copy of the weights.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from torch import nn
from tqdm import tqdm

from rne_tools.errors import CheckpointError
from rne_tools.models import get_architecture

DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def read_config(checkpoint_dir: Path) -> dict[str, Any]:
    """Read ``config.json`` of a checkpoint directory."""
    path = Path(checkpoint_dir) / "config.json"
    if not path.is_file():
        raise CheckpointError(
            f"{path} not found: a checkpoint directory needs config.json next to its safetensors."
        )
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON: {e}") from e


def safetensors_files(checkpoint_dir: Path) -> list[Path]:
    """The safetensors files of a checkpoint: the single file or every shard of the index."""
    checkpoint_dir = Path(checkpoint_dir)
    index = checkpoint_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        names = sorted(set(weight_map.values()))
        missing = [n for n in names if not (checkpoint_dir / n).is_file()]
        if missing:
            raise CheckpointError(
                f"{index} lists shard(s) that are not in {checkpoint_dir}: {', '.join(missing)}. "
                "Download the complete checkpoint."
            )
        return [checkpoint_dir / n for n in names]
    single = checkpoint_dir / "model.safetensors"
    if single.is_file():
        return [single]
    raise CheckpointError(
        f"No model.safetensors or model.safetensors.index.json in {checkpoint_dir}."
    )


@contextlib.contextmanager
def skip_init() -> Iterator[None]:
    """Build modules without running weight initialisers (every weight is loaded afterwards)."""
    names = [
        "normal_",
        "uniform_",
        "kaiming_uniform_",
        "kaiming_normal_",
        "trunc_normal_",
        "xavier_uniform_",
        "xavier_normal_",
        "constant_",
        "ones_",
        "zeros_",
    ]
    saved = {n: getattr(nn.init, n) for n in names}
    try:
        for n in names:
            setattr(nn.init, n, lambda tensor, *args, **kwargs: tensor)
        yield
    finally:
        for n, fn in saved.items():
            setattr(nn.init, n, fn)


def load_state(
    model: nn.Module, checkpoint_dir: Path, hf_to_local_name: Any, progress: bool = True
) -> None:
    """Stream every tensor of the checkpoint into ``model``, checking names and shapes."""
    targets = model.state_dict(keep_vars=True)
    loaded_storage: set[int] = set()
    unexpected: list[str] = []
    # Names the model knowingly leaves unused (Gemma 4's KV-shared layers ship k/v projections).
    unused = set(getattr(model, "unused_checkpoint_tensors", ()))
    files = safetensors_files(checkpoint_dir)
    with torch.no_grad():
        for file in files:
            with safe_open(str(file), framework="pt") as f:
                keys = list(f.keys())
                for hf_name in tqdm(
                    keys, desc=f"loading {file.name}", disable=not progress, leave=False
                ):
                    local = hf_to_local_name(hf_name)
                    if local is None:
                        continue
                    if local not in targets:
                        if local not in unused:
                            unexpected.append(f"{hf_name} (in {file.name})")
                        continue
                    tensor = f.get_tensor(hf_name)
                    target = targets[local]
                    if tuple(tensor.shape) != tuple(target.shape):
                        raise CheckpointError(
                            f"Tensor {hf_name} in {file} has shape {tuple(tensor.shape)}, but the "
                            f"model built from config.json expects {tuple(target.shape)} for "
                            f"{local}. The config and the weights do not belong together."
                        )
                    target.copy_(tensor.to(target.dtype))
                    loaded_storage.add(target.data_ptr())
    if unexpected:
        raise CheckpointError(
            f"Checkpoint {checkpoint_dir} has tensors the model does not know: "
            f"{', '.join(unexpected[:10])}{' ...' if len(unexpected) > 10 else ''}. "
            "Is the config's architecture the right one?"
        )
    # Tied weights share storage, so one loaded name satisfies all of its aliases.
    missing = [name for name, t in targets.items() if t.data_ptr() not in loaded_storage]
    if missing:
        raise CheckpointError(
            f"Checkpoint {checkpoint_dir} lacks tensor(s) {', '.join(missing[:10])}"
            f"{' ...' if len(missing) > 10 else ''}; the files are incomplete or from another model."
        )


def load_model(
    checkpoint_dir: Path | str,
    arch: str,
    max_context: int,
    max_chunk: int,
    dtype: torch.dtype = torch.float32,
    progress: bool = True,
) -> tuple[nn.Module, Any]:
    """Build architecture ``arch`` from ``checkpoint_dir`` and load its weights.

    Returns ``(model, args)`` with the model in eval mode, gradients off, in ``dtype``.
    """
    checkpoint_dir = Path(checkpoint_dir)
    module = get_architecture(arch)
    args = module.ModelArgs.from_hf_config(read_config(checkpoint_dir))
    safetensors_files(checkpoint_dir)  # fail on missing files before allocating the model
    with skip_init():
        model = module.Transformer(args, max_context=max_context, max_chunk=max_chunk)
    model.to_dtype(dtype)
    load_state(model, checkpoint_dir, module.hf_to_local_name, progress=progress)
    return model.eval().requires_grad_(False), args


def random_model(
    arch: str,
    config: str | dict[str, Any],
    max_context: int,
    max_chunk: int,
    seed: int = 0,
) -> tuple[nn.Module, Any, dict[str, Any]]:
    """Build architecture ``arch`` with seeded random weights from ``config``: a name of the
    architecture's ``RANDOM_CONFIGS`` or an HF config dict.

    Returns ``(model, args, hf_config)``.
    """
    module = get_architecture(arch)
    if isinstance(config, str):
        if config not in module.RANDOM_CONFIGS:
            raise CheckpointError(
                f"Unknown random config {config!r} for architecture {arch!r}; "
                f"known: {', '.join(sorted(module.RANDOM_CONFIGS))}."
            )
        config = module.RANDOM_CONFIGS[config]
    args = module.ModelArgs.from_hf_config(config)
    with skip_init():
        model = module.Transformer(args, max_context=max_context, max_chunk=max_chunk)
    model.init_random(seed)
    return model.eval().requires_grad_(False), args, dict(config)
