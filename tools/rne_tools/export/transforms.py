"""Backend source transforms as tables: building block (a class of ``models.layers``, or any
``nn.Module`` class) -> factory of its replacement, applied by ``apply_replacements``.

Each backend's ``*_ops.py`` states its table; the models declare the facts a factory needs
(``layers.AttentionSpec`` on every attention step, the window of every cache), so no transform
names an architecture.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from torch import nn

from rne_tools.models.layers import KVCache

# Returns the module's replacement, or the module itself to keep it.
Factory = Callable[[nn.Module], nn.Module]


class Decoder(Protocol):
    """What replacement factories may ask of a model besides its building blocks."""

    max_context: int
    max_chunk: int

    def cache_for(self, layer: int) -> KVCache: ...


def apply_replacements(model: nn.Module, table: Mapping[type, Factory]) -> list[str]:
    """Replace, in place, every submodule of ``model`` that is an instance of a key of ``table``
    by what that key's factory returns for it; returns the replaced modules' qualified names.

    Entries apply in order, each over the whole model, so a factory sees what the entries
    before it put in (an attention step can find its replaced cache); modules an entry puts
    in are not visited by that entry again.
    """
    replaced: list[str] = []
    for cls, factory in table.items():
        for parent_name, parent in list(model.named_modules()):
            for name, child in list(parent.named_children()):
                if not isinstance(child, cls):
                    continue
                new = factory(child)
                if new is not child:
                    setattr(parent, name, new)
                    replaced.append(f"{parent_name}.{name}".lstrip("."))
    return replaced
