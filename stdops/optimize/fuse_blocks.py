"""The inverted-residual block fusions of the load-time optimizer (stdops/optimize/fuse.py runs them after its
chains): a 1 x 1 ``conv_act`` whose only reader is a depthwise ``conv_act`` of it, one ``expand_depthwise`` step
[with the 1 x 1 ``conv_act`` that alone reads that (its activation, residual and post-activation), one
``expand_depthwise_project`` step] (stdops/ops/fused_blocks.py)."""

from __future__ import annotations

import numpy as np

from ..graph import Node
from ..ops import fused_blocks
from ..ops._registry import record_use
from ..ops.bind import bind
from ._work import Work, kernel_name

record_use(fused_blocks.expand_depthwise, "optimize", "1x1 conv_act + the depthwise conv_act that alone reads it")
record_use(fused_blocks.expand_depthwise_project, "optimize", "expand_depthwise + the 1x1 conv_act that alone reads it")


def _plain_conv_act(work: Work, node: Node) -> tuple[np.ndarray, dict] | None:
    """(weight, attrs) of a ``conv_act`` with a constant float32 weight and bias (or none) and neither residual
    nor post-activation."""
    ins = list(node.inputs) + [""] * (4 - len(node.inputs))
    a = node.bound.attrs
    w = work.const(ins[1])
    if ins[3] or a.get("post_activation") or len(node.outputs) != 1:
        return None
    if ins[2] and not isinstance(work.const(ins[2]), np.ndarray):
        return None
    if not (isinstance(w, np.ndarray) and w.dtype == np.float32 and w.ndim == 4):
        return None
    return w, a


def fuse_expand_depthwise(work: Work, h: int) -> None:
    """A 1 x 1 ``conv_act`` (group 1, stride 1, unpadded) whose only reader is a depthwise ``conv_act`` of it
    (one input channel per group, group = channels): one ``expand_depthwise`` step at the depthwise's place."""
    n1 = work.nodes[h]
    assert n1 is not None
    c1 = _plain_conv_act(work, n1)
    k = work.only_reader(n1.outputs[0]) if c1 is not None else None
    n2 = None if k is None else work.nodes[k]
    if c1 is None or n2 is None or kernel_name(n2) != "conv_act" or n2.inputs[:1] != n1.outputs[:1]:
        return
    c2 = _plain_conv_act(work, n2)
    (w1, a1) = c1
    if c2 is None or n1.outputs[0] in n2.inputs[1:] or w1.shape[2:] != (1, 1) or a1.get("group", 1) != 1:
        return
    if a1.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or any(v != 0 for v in a1.get("pads") or ()):
        return
    if any(v != 1 for v in tuple(a1.get("strides") or ()) + tuple(a1.get("dilations") or ())):
        return
    w2, a2 = c2
    if w2.shape[:2] != (w1.shape[0], 1) or a2.get("group", 1) != w1.shape[0]:
        return
    attrs = {"activation": a1.get("activation", ""), "activation_params": tuple(a1.get("activation_params", ()))}
    for a in ("group", "kernel_shape", "strides", "pads", "dilations", "auto_pad", "activation", "activation_params"):
        if a in a2:
            attrs["dw_" + a] = a2[a]
    i1, i2 = list(n1.inputs) + [""] * (3 - len(n1.inputs)), list(n2.inputs) + [""] * (3 - len(n2.inputs))
    inputs = [i1[0], i1[1], i2[1], i1[2], i2[2]]
    bound = bind(fused_blocks.expand_depthwise, attrs, tuple(work.const(i) if i else None for i in inputs))
    new = Node(n1.name, n1.op, bound.fn, inputs, list(n2.outputs), n2.where, bound, ("expand_depthwise",))
    assert k is not None  # n2 is its node
    work.replace(h, None)
    work.replace(k, new)
    _fuse_project(work, k, new, attrs)


def _fuse_project(work: Work, k: int, ed: Node, attrs: dict) -> None:
    """The ``expand_depthwise`` step at ``k`` and the 1 x 1 ``conv_act`` (group 1, stride 1, unpadded, a constant
    weight; with its activation, residual and post-activation) that alone reads it: one ``expand_depthwise_project``
    step at the convolution's place (an inverted-residual block)."""
    j = work.only_reader(ed.outputs[0])
    n3 = None if j is None else work.nodes[j]
    if n3 is None or kernel_name(n3) != "conv_act" or n3.inputs[:1] != ed.outputs or len(n3.outputs) != 1:
        return
    ins = list(n3.inputs) + [""] * (4 - len(n3.inputs))
    w3, a3 = work.const(ins[1]), n3.bound.attrs
    if ed.outputs[0] in ins[1:] or not (isinstance(w3, np.ndarray) and w3.dtype == np.float32 and w3.ndim == 4):
        return
    if ins[2] and not isinstance(work.const(ins[2]), np.ndarray):
        return
    w1 = work.const(ed.inputs[1])
    if not isinstance(w1, np.ndarray) or w3.shape[1:] != (w1.shape[0], 1, 1) or a3.get("group", 1) != 1:
        return
    if a3.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or any(v != 0 for v in a3.get("pads") or ()):
        return
    if any(v != 1 for v in tuple(a3.get("strides") or ()) + tuple(a3.get("dilations") or ())):
        return
    attrs = dict(
        attrs,
        pw_activation=a3.get("activation", ""),
        pw_activation_params=tuple(a3.get("activation_params", ())),
        post_activation=a3.get("post_activation", ""),
        post_activation_params=tuple(a3.get("post_activation_params", ())),
    )
    x, w1, w2, b1, b2 = ed.inputs
    inputs = [x, w1, w2, ins[1], b1, b2, ins[2], ins[3]]
    bound = bind(fused_blocks.expand_depthwise_project, attrs, tuple(work.const(i) if i else None for i in inputs))
    new = Node(ed.name, ed.op, bound.fn, inputs, list(n3.outputs), n3.where, bound, ("expand_depthwise_project",))
    assert j is not None  # n3 is its node
    work.replace(k, None)
    work.replace(j, new)
