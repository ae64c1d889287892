"""The load-time graph optimizer, shared by the ONNX and ncnn plans (docs/architecture.md, "The compiled graph").

    plan = optimize(Plan(nodes, inputs, outputs, constants), shapes)   # plan.fused: the optimized twin

It reads nodes through their ``bound`` (kernel, attributes, constant inputs) and never knows the front end.
The plan as written is kept: a run with a hook (``stdops compare``, ``--dump``, an ncnn Extractor) or asking
for a value the twin no longer has runs every node as written; any other run runs ``plan.fused``. The
passes, in order (each in its module):

- ``fold``: nodes whose inputs are all constants are evaluated once (deterministic kernels, small
  results); ``Shape``/``Size`` of a value whose static shape the front end knows becomes a constant (a
  guard in the twin checks that shape at run time and falls back to the plan as written when it differs),
  so that the Shape -> Gather -> Unsqueeze -> Concat arithmetic of exported graphs folds away;
- ``cancel``: Identity nodes removed, Transpose after Transpose composed (dropped when the composition is
  the identity), Reshape after Reshape merged, Reshapes/Flattens/Squeezes to the shape a value already
  has dropped, a Transpose that moves only axes of size 1 made a Reshape (a view);
- ``fuse``: BatchNormalization folded into the Conv / Gemm / MatMul before it (weights and bias
  rescaled in float64); Conv (+ bias) and MatMul / Gemm (+ bias) chains fused with a following
  activation (Relu, Clip, LeakyRelu, Sigmoid, SiLU as Sigmoid + Mul, HardSigmoid, HardSwish), a residual
  Add and an activation after it, into one ``conv_act`` / ``matmul_act`` step (stdops/ops/fused.py); every
  Conv with a constant weight becomes a ``conv_act`` that knows its input's spatial size when the front end
  gave it (the Winograd transform is then prepared at load); the squeeze-and-excitation block (with the 1x1
  Conv reading it) as one step; a 1x1 ``conv_act`` whose only reader is a depthwise ``conv_act`` (the
  inverted-residual block's expansion) and that depthwise as one ``expand_depthwise`` step (ops/fused_blocks.py);
  a constant positive scale before a Softmax moved into the Softmax step; kernels
  whose inputs a pass made constant prepared again;
- ``attention``: MatMul -> (scaled) Softmax -> MatMul, with the Transposes that feed it and the one after it,
  as one ``attention_heads`` step (per head, the scores stay in cache; the transposes are views);
- ``views``: the Transposes, Gathers and Splits that split a QKV projection into heads, when they feed only
  attention steps (through reshapes), as views instead of copies.

A value that is a graph output, is read by more than one node, or is an input overridable at run time (an
ONNX initializer listed as a graph input) is never folded away. The fused and the written plan agree within
the kernels' rounding (tests/optimize: every fixture model, 1e-6 relative).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..graph import Plan
from . import attention, cancel, fold, fuse, views
from ._work import Work

#: ``STDOPS_NO_OPTIMIZE=1`` keeps every plan as written (for bisecting an optimizer problem)
_DISABLED = os.environ.get("STDOPS_NO_OPTIMIZE", "") not in ("", "0")


def optimize(plan: Plan, shapes: Mapping[str, tuple[int, ...]] | None = None) -> Plan:
    """Attach the optimized twin to ``plan`` (``plan.fused``; None when no pass changed anything) and return
    ``plan``. ``shapes``: static shapes of values the front end knows (from declared input shapes)."""
    if _DISABLED or not plan.nodes:
        return plan
    work = Work(plan, dict(shapes or {}))
    fold.run(work)
    cancel.run(work)
    fuse.run(work)
    attention.run(work)
    views.run(work)
    if work.changed:
        plan.fused = work.plan()
    return plan


__all__ = ["optimize"]
