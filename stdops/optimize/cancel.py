"""Moves of data that cancel: Identity nodes, a Transpose of a Transpose, a Reshape of a Reshape, reshapes
to the shape a value already has, and a Transpose that moves only axes of size 1 (a Reshape: no copy).

A rewrite keeps the written plan's errors: a Transpose pair is composed only when both permutations are valid
for the input's rank, and a Reshape pair merged only when the first reshape is valid for the input's static
shape (otherwise both nodes stay, and the written error is raised at run time).
"""

from __future__ import annotations

import numpy as np

from ..ops.bind import bind
from ..ops.shape import reshape as reshape_kernel
from ._work import Work, kernel_name

#: kernels that only change the shape of their input (a view, or a copy for Transpose)
_RESHAPES = ("reshape", "flatten", "squeeze", "unsqueeze")


def _perm(node, rank: int | None) -> list[int] | None:
    p = node.bound.attrs.get("perm")
    if p is None:
        return None if rank is None else list(range(rank))[::-1]
    p = [int(v) for v in p]
    return p if sorted(p) == list(range(len(p))) else None


def _drop(work: Work, k: int, src: str, dst: str) -> bool:
    """Node k's output ``dst`` is its input ``src``: readers read ``src``, the node goes."""
    if dst in work.kept or dst in work.overridable:
        return False
    work.rename_uses(dst, src)
    work.replace(k, None)
    return True


def run(work: Work) -> None:
    for k in range(len(work.nodes)):
        node = work.nodes[k]
        kname = kernel_name(node)
        if kname is None or node is None:
            continue
        ins = [i for i in node.inputs if i]
        if not ins or len([o for o in node.outputs if o]) != 1:
            continue
        x, y = node.inputs[0], node.outputs[0]
        if kname == "identity" and x and work.nodes[k] is not None:
            _drop(work, k, x, y)
            continue
        sx, sy = work.shapes.get(x), work.shapes.get(y)
        if kname in _RESHAPES + ("transpose",) and sx is not None and sx == sy:
            if kname != "transpose" or _perm(node, len(sx)) == list(range(len(sx))):
                _drop(work, k, x, y)
                continue
        if kname == "transpose" and sx is not None and sy is not None and y not in work.kept:
            p = _perm(node, len(sx))
            moved = None if p is None or len(p) != len(sx) else [a for a in p if sx[a] != 1]
            if moved is not None and moved == sorted(moved) and len(ins) == 1:
                # only axes of size 1 move: the elements keep their order, the Transpose is a Reshape (a view; the
                # static shapes hold: the front end checks every feed against the declared dimensions); a graph
                # output stays a copy of its own
                target = work.new_const(f"{node.name}.shape", np.array(sy, np.int64))
                rs = bind(reshape_kernel, {"allowzero": 1}, (None, work.consts[target]))
                work.replace(k, node.rebound(rs, [x, target]))
                continue
        j = work.producer_index().get(x, -1)
        first = work.nodes[j] if j >= 0 else None
        if first is None or work.only_reader(x) != k:
            continue
        fname = kernel_name(first)
        if kname == "transpose" and fname == "transpose":
            rank = len(sx) if sx is not None else None
            p1, p2 = _perm(first, rank), _perm(node, rank)
            if p1 is None or p2 is None or len(p1) != len(p2) or (rank is not None and rank != len(p1)):
                continue
            p = [p1[i] for i in p2]
            src = first.inputs[0]
            if p == list(range(len(p))):
                if work.shapes.get(src) is None or len(work.shapes[src]) != len(p):
                    continue  # the written pair would check the rank
                work.replace(j, None)
                _drop(work, k, src, y)
            else:
                work.replace(k, node.rebound(bind(node.bound.kernel, {"perm": tuple(p)}), [src]))
                work.replace(j, None)
            continue
        if kname == "reshape" and fname in _RESHAPES and len(node.inputs) == 2:
            target = work.const(node.inputs[1])
            src = first.inputs[0]
            s0 = work.shapes.get(src)
            if target is None or s0 is None or node.bound.attrs.get("allowzero", 0):
                continue
            if 0 in np.asarray(target).reshape(-1).tolist():
                continue  # a 0 copies a dimension of the intermediate
            try:  # the first reshape must be valid for the input, as its node would check
                first.fn(
                    *[np.broadcast_to(np.zeros((), np.float32), s0)] + [work.consts.get(i) for i in first.inputs[1:]]
                )
            except Exception:  # noqa: BLE001
                continue
            work.replace(k, node.rebound(node.bound, [src, node.inputs[1]]))
            work.replace(j, None)
