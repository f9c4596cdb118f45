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
import pkgutil
from types import ModuleType

from rne_tools.errors import CheckpointError

# Modules of this package that are building blocks, not architectures (gemma4_assistant: the
# drafter a Gemma 4 program may carry beside its decoder).
SHARED_MODULES = ("layers", "gemma4_assistant")

# Every other module of this package is an architecture, named by its file: adding one is
# adding its file (and the registry entries that use it), nothing else.
ARCHITECTURES: dict[str, str] = {
    info.name: f"{__name__}.{info.name}"
    for info in pkgutil.iter_modules(__path__)
    if info.name not in SHARED_MODULES
}


def get_architecture(name: str) -> ModuleType:
    """Return the module implementing architecture ``name`` (e.g. ``"llama"``)."""
    if name not in ARCHITECTURES:
        raise CheckpointError(
            f"Unknown architecture {name!r}; known architectures: {', '.join(sorted(ARCHITECTURES))}."
        )
    return importlib.import_module(ARCHITECTURES[name])
