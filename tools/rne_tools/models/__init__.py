"""Model definitions, one module per architecture.

Every architecture module exports ``ModelArgs`` (with ``from_hf_config``), ``RANDOM_CONFIGS``,
``Transformer(args, max_context, max_chunk)`` and ``hf_to_local_name``; see ``docs/design.md``.
Modules import lazily so that using one architecture never imports the others.

Architectures compose the building blocks of ``layers`` (RMSNorm, RoPE, KV caches, the declared
SDPA step with its ``AttentionSpec``), which the backends' transform tables replace, and their
``Transformer`` gives ``cache_for(layer)``, the cache a layer attends over.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from rne_tools.errors import CheckpointError

ARCHITECTURES: dict[str, str] = {
    "llama": "rne_tools.models.llama",
    "gemma4": "rne_tools.models.gemma4",
}


def get_architecture(name: str) -> ModuleType:
    """Return the module implementing architecture ``name`` (e.g. ``"llama"``)."""
    if name not in ARCHITECTURES:
        raise CheckpointError(
            f"Unknown architecture {name!r}; known architectures: {', '.join(sorted(ARCHITECTURES))}."
        )
    return importlib.import_module(ARCHITECTURES[name])
