"""Fusions of the ncnn plan's twin that the shared optimizer (stdops/optimize) cannot see.

The optimizer reads a node through its ``bound`` kernel on the node's own inputs; an ncnn convolution step is
an adapter (a 3-D blob in, a batch axis of 1 added for the shared ``conv_act`` kernel, weights inside the
step), so it has none. The one pattern done here: a 1 x 1 Convolution (stride 1, unpadded) whose top only a
ConvolutionDepthWise reads (one channel per group) - the expansion and depthwise steps of an inverted-residual
block (MobileNetV2/V3, EfficientNet) - becomes one ``expand_depthwise`` step (stdops/ops/fused_blocks.py: the
expanded blob stays in cache), as stdops/optimize/fuse.py does for ONNX Conv nodes.

Only the twin (``plan.fused``) changes: a run with a hook, an Extractor or a request for the expanded blob runs
the layers as written. The fused step takes the blob shapes the layers' own checks would pass (C, H, W) with
the 1 x 1's input channels; anything else falls back to the plan as written (PlanFallback).
"""

from __future__ import annotations

import numpy as np

from ..graph import Node, PlanFallback
from ..ops import fused_blocks
from ..ops.bind import bind


def _form(node: Node):
    return getattr(node.fn, "conv_form", None) if node.bound is None else None


def _is_pointwise(f) -> bool:
    a = f.attrs
    return (
        f.w.shape[2:] == (1, 1)
        and a["group"] == 1
        and tuple(a["strides"]) == (1, 1)
        and tuple(a["dilations"]) == (1, 1)
        and not any(a["pads"])
    )


def _fused_step(n1: Node, f1, n2: Node, f2) -> Node:
    a1, a2 = f1.attrs, f2.attrs
    attrs = {
        "activation": a1["activation"],
        "activation_params": a1["activation_params"],
        "dw_group": a2["group"],
        "dw_kernel_shape": a2["kernel_shape"],
        "dw_strides": a2["strides"],
        "dw_pads": a2["pads"],
        "dw_dilations": a2["dilations"],
        "dw_activation": a2["activation"],
        "dw_activation_params": a2["activation_params"],
    }
    w1, w2, b1, b2 = f1.w, f2.w, f1.b, f2.b
    step = bind(fused_blocks.expand_depthwise, attrs, (None, w1, w2, b1, b2))
    channels = w1.shape[1]

    def expand_depthwise_blob(x):
        if not isinstance(x, np.ndarray) or x.ndim != 3 or x.shape[0] != channels or x.dtype != np.float32:
            raise PlanFallback(f"{n1.name}: blob of shape {np.shape(x)} is not the fused block's (C, H, W) input")
        return step(x[None], w1, w2, b1, b2)[0]

    return Node(
        n1.name, n1.op, expand_depthwise_blob, list(n1.inputs), list(n2.outputs), n2.where, None, ("expand_depthwise",)
    )


def twin_nodes(nodes: list[Node], outputs: list[str]) -> list[Node] | None:
    """The plan's nodes with every expansion + depthwise pair as one step, or None when there is no pair."""
    readers: dict[str, list[int]] = {}
    for k, n in enumerate(nodes):
        for i in dict.fromkeys(n.inputs):
            readers.setdefault(i, []).append(k)
    kept = set(outputs)
    out: list[Node | None] = list(nodes)
    changed = False
    for h, n1 in enumerate(nodes):
        f1 = _form(n1)
        if f1 is None or len(n1.inputs) != 1 or len(n1.outputs) != 1 or not _is_pointwise(f1):
            continue
        top = n1.outputs[0]
        rs = readers.get(top, [])
        if top in kept or len(rs) != 1 or out[h] is None:
            continue
        k = rs[0]
        n2 = nodes[k]
        f2 = _form(n2)
        if f2 is None or out[k] is not n2 or n2.inputs != [top] or len(n2.outputs) != 1:
            continue
        M = f1.w.shape[0]
        if f2.w.shape[:2] != (M, 1) or f2.attrs["group"] != M:
            continue
        out[h] = None
        out[k] = _fused_step(n1, f1, n2, f2)
        changed = True
    return [n for n in out if n is not None] if changed else None
