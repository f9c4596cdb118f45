"""How a registry problem is worded: one line, ``<file>: <field path>: <what is wrong>``, short
enough to read, naming the model it is about."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# Where a problem line would exceed this, the value it quotes is cut (a line must stay readable).
MAX_PROBLEM = 500


def short(value: Any) -> str:
    """``repr(value)``, cut to a readable length."""
    text = repr(value)
    if len(text) <= 80:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters shown"
    return f"{text[:60]}... ({size})"


def clip(problem: str) -> str:
    return problem if len(problem) <= MAX_PROBLEM else problem[: MAX_PROBLEM - 5] + " ..."


def name_models(problems: Iterable[str], doc: Any, name: str) -> list[str]:
    """Appends the model id to problems located under ``models[i]`` (``(model 'gemma4_e2b')``)."""
    models = doc.get("models") if isinstance(doc, dict) else None
    named = []
    for problem in problems:
        match = re.match(rf"{re.escape(name)}: models\[(\d+)\]", problem)
        if match and isinstance(models, list) and int(match[1]) < len(models):
            model = models[int(match[1])]
            model_id = model.get("id") if isinstance(model, dict) else None
            if isinstance(model_id, str):
                problem += f" (model {model_id!r})"
        named.append(problem)
    return named
