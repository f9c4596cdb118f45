"""What a lowered program leaves outside its delegates: the report's ``delegation`` section and
the per-op placement the GPU backends' ``inspect`` judges."""

from __future__ import annotations

from typing import Any

# Output unpacking, shape queries and memory planning are bookkeeping, not ops that compute.
_BOOKKEEPING = {"getitem", "sym_size", "alloc"}


def _delegation_info(program: Any) -> Any:
    from executorch.devtools.backend_debug import get_delegation_info

    return get_delegation_info(program.exported_program().graph_module)


def _by_op(info: Any) -> dict[str, dict[str, int]]:
    return {
        op: {"delegated": b.delegated, "cpu": b.non_delegated}
        for op, b in sorted(info.delegation_by_operator.items())
        if op not in _BOOKKEEPING
    }


def delegation_by_op(program: Any) -> dict[str, dict[str, int]]:
    """{op: {"delegated": n, "cpu": m}} of the ExecuTorch ``program``'s compute ops."""
    return _by_op(_delegation_info(program))


def delegation_summary(program: Any) -> dict[str, Any]:
    """Share of the program's compute nodes inside delegates; ops left to portable CPU kernels."""
    info = _delegation_info(program)
    by_op = _by_op(info)
    delegated = sum(c["delegated"] for c in by_op.values())
    cpu = sum(c["cpu"] for c in by_op.values())
    return {
        "delegated_subgraphs": info.num_delegated_subgraphs,
        "delegated_nodes": delegated,
        "non_delegated_nodes": cpu,
        "delegated_share": round(delegated / (delegated + cpu), 4) if delegated + cpu else 0.0,
        "cpu_ops": {op: c["cpu"] for op, c in by_op.items() if c["cpu"]},
    }
