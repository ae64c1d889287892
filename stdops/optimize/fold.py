"""Constant folding: a node whose inputs are all constants is evaluated once, at load, and its outputs become
constants; ``Shape`` and ``Size`` of a value whose static shape is known become constants too, with a guard.

Only deterministic kernels fold (never the random ones), only to tensors (not sequences or optionals), and
only to results of at most ``FOLD_MAX_ELEMENTS`` elements or no larger than their inputs: folding must not
turn a ConstantOfShape or an Expand into a large resident constant. A kernel that raises is left to raise
at run time, where the error names the node.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Node, PlanFallback
from ._work import Work, kernel_name

FOLD_MAX_ELEMENTS = 1 << 16

#: kernels whose results change from call to call
_NOT_DETERMINISTIC_MODULES = ("stdops.ops.random",)

#: kernels reading only their input's shape
_SHAPE_ONLY = ("shape", "size")


def _deterministic(node: Node) -> bool:
    return node.bound.kernel.module not in _NOT_DETERMINISTIC_MODULES


def _small(values: list, inputs: list) -> bool:
    biggest_in = max((np.size(v) for v in inputs if isinstance(v, np.ndarray)), default=0)
    return all(isinstance(v, np.ndarray) and v.size <= max(FOLD_MAX_ELEMENTS, biggest_in) for v in values)


def _evaluate(node: Node, values: list) -> list | None:
    try:
        res = node.fn(*values)
    except Exception:  # noqa: BLE001 - left to fail at run time, with the node's name
        return None
    outs = list(res) if type(res) is tuple else [res]
    if len(outs) < len([o for o in node.outputs if o]):
        return None
    return outs


def _guard(name: str, shape: tuple[int, ...]):
    """A step checking at run time that a value has the shape a folded Shape node took as static."""

    def check_shape(x: Any) -> None:
        if np.shape(x) != shape:
            raise PlanFallback(f"{name}: shape {np.shape(x)} is not the static {shape}")

    return check_shape


def run(work: Work) -> None:
    for k, node in enumerate(work.nodes):
        kname = kernel_name(node)
        if kname is None or node is None or not _deterministic(node):
            continue
        if any(o in work.overridable or o in work.kept for o in node.outputs):
            continue
        present = [i for i in node.inputs if i]
        if kname in _SHAPE_ONLY and len(present) == 1 and not work.is_const(present[0]):
            shape = work.shapes.get(present[0])
            if shape is None:
                continue
            dummy = np.broadcast_to(np.zeros((), np.float32), shape)  # reads no memory
            outs = _evaluate(node, [dummy])
            if outs is None:
                continue
            _set_outputs(work, node, outs)
            guard = Node(
                f"{node.name}#static_shape",
                "ShapeGuard",
                _guard(node.name, shape),
                [present[0]],
                [],
                node.where,
                check=True,
            )
            work.replace(k, guard)
            continue
        if not all(i == "" or work.is_const(i) for i in node.inputs):
            continue
        values = [work.consts[i] if i else None for i in node.inputs]
        outs = _evaluate(node, values)
        if outs is None or not _small(outs[: len(node.outputs)], values):
            continue
        _set_outputs(work, node, outs)
        work.replace(k, None)


def _set_outputs(work: Work, node: Node, outs: list) -> None:
    for name, value in zip(node.outputs, outs):
        if name:
            work.consts[name] = value
