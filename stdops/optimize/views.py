"""Copies an attention step does not need, made views (stdops/ops/attention.py: ``transpose_view``, ``gather_view``,
``split_view``).

Exporters split the heads of a fused QKV projection by chains of Reshape, Unsqueeze, Transpose, Squeeze, Split
and Gather (torch: Unsqueeze -> Transpose -> Squeeze -> Gather per projection -> Reshape -> Transpose; timm:
Reshape -> Transpose -> Split -> Squeeze). The Transpose, Gather and Split kernels copy; when every path from a
value leads, through such nodes only, to ``attention_heads`` steps (which hand strided operands to BLAS as they
are), the copies are dropped: the Transposes, the Gathers of one constant index and the Splits of constant
sizes become view steps. A value that is a graph output (a caller could write into it) or read by any other
node keeps its copy. Runs after ``attention``; a run with a hook runs the plan as written.
"""

from __future__ import annotations

import numpy as np

from ..ops import attention as attention_ops
from ..ops._registry import record_use
from ..ops.bind import bind
from ._work import Work, kernel_name

record_use(attention_ops.transpose_view, "optimize", "Transpose read only by views and attention_heads")
record_use(attention_ops.gather_view, "optimize", "Gather of one index read only by views and attention_heads")
record_use(attention_ops.split_view, "optimize", "Split read only by views and attention_heads")

#: nodes that pass a view on (numpy's reshape is a view where the strides allow it, else a copy)
_PASSING = {"reshape", "squeeze", "unsqueeze", "transpose", "gather", "split"}
_VIEWS = {"transpose": attention_ops.transpose_view, "gather": attention_ops.gather_view}
_VIEWS["split"] = attention_ops.split_view


def _leads_to_attention(work: Work, name: str, memo: dict[str, bool]) -> bool:
    """Every reader of ``name`` is an attention_heads step, a guard, or a passing node (reading it as its first
    input only) whose outputs all lead to attention steps; ``name`` no graph output and no overridable input."""
    if name in memo:
        return memo[name]
    memo[name] = False  # a cycle cannot happen in a plan, but no value is trusted before it is checked
    readers = work.readers(name)
    ok = bool(readers) and name not in work.kept and name not in work.overridable
    for r in readers:
        node = work.nodes[r]
        k = kernel_name(node)
        if not ok or node is None:
            break
        if k == "attention_heads" or (node.check and not any(node.outputs)):
            continue  # an attention step, or a guard (fold's ShapeGuard: it reads the shape only)
        outs = [o for o in node.outputs if o]
        ok = (
            k in _PASSING
            and node.inputs[:1] == [name]
            and name not in node.inputs[1:]
            and len(outs) == len(node.outputs)
            and all(_leads_to_attention(work, o, memo) for o in outs)
        )
    memo[name] = ok
    return ok


def _fits(work: Work, node, k: str) -> bool:
    """Gather of one constant integer index; Split with constant sizes or none; any Transpose."""
    if k == "gather":
        idx = work.const(node.inputs[1]) if len(node.inputs) == 2 else None
        return isinstance(idx, np.ndarray) and idx.ndim == 0 and idx.dtype.kind in "iu"
    if k == "split":
        return len(node.inputs) == 1 or not node.inputs[1] or work.is_const(node.inputs[1])
    return len(node.inputs) == 1


def run(work: Work) -> None:
    if not any(kernel_name(n) == "attention_heads" for n in work.nodes):
        return
    memo: dict[str, bool] = {}
    for k, node in enumerate(work.nodes):
        kn = kernel_name(node)
        if kn not in _VIEWS or node is None or not _fits(work, node, kn):
            continue
        outs = node.outputs
        if not outs or not all(o and _leads_to_attention(work, o, memo) for o in outs):
            continue
        consts = tuple(work.const(i) if i else None for i in node.inputs)
        work.replace(k, node.rebound(bind(_VIEWS[kn], node.bound.attrs, consts)))
