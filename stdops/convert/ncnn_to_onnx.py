"""ncnn -> ONNX: a loaded ncnn Net (stdops.ncnn) as a standard ONNX model.

Steps: (1) the input shapes come from the caller or the Input layers' w/h/d/c params; (2) the model runs
once on zeros with a hook that records every blob's shape and dtype (ncnn layers decide their behaviour
by blob rank and size, so the ONNX graph is written for these static shapes); (3) each layer becomes ONNX
ops (stdops.convert.ncnn_onnx), its tops keeping their blob names; (4) the model is checked with
``onnx.checker`` (full check) and strict shape inference.

Layout: a blob (w,) / (h, w) / (c, h, w) / (c, d, h, w) is the ONNX tensor (1, ...): a batch axis of 1 is
added in front. Inputs are float32, as ncnn feeds them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import StdopsError
from ..limits import check_elements
from .common import ConversionError
from .ncnn_onnx import EMIT, NO_ONNX_FORM, LayerCtx
from .onnx_build import DEFAULT_OPSET, GraphBuilder, check, onnx_dtype


def input_shape_of(layer: Any) -> tuple[int, ...] | None:
    """The shape an Input layer declares (w, h, d, c params), or None when it declares none."""
    p = layer.params
    w, h, d, c = (int(getattr(p, n, 0) or 0) for n in ("w", "h", "d", "c"))
    if d:
        return (c, d, h, w)
    if c:
        return (c, h, w)
    if h:
        return (h, w)
    if w:
        return (w,)
    return None


def measure(net: Any, shapes: Mapping[str, Sequence[int]]) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """(shape, dtype) of every blob, from one run of the model on zeros."""
    feeds = {n: np.zeros(tuple(shapes[n]), np.float32) for n in net.input_names}
    seen: dict[str, tuple[tuple[int, ...], np.dtype]] = {n: (v.shape, v.dtype) for n, v in feeds.items()}

    def hook(_node: str, name: str, value: Any) -> None:
        a = np.asarray(value)
        seen[name] = (tuple(a.shape), a.dtype)

    # every blob is measured, also those of layers no output depends on
    done = {n for step in net.plan.schedule(list(net.output_names)) for n in step.node.outputs}
    want = list(net.output_names) + [b for b in net.blob_names if b not in done and b not in feeds]
    with np.errstate(all="ignore"):
        net.plan.run(feeds, want, hook)
    return seen


def resolve_input_shapes(net: Any, given: Mapping[str, Sequence[int]] | None, path: str | None) -> dict:
    given = dict(given or {})
    unknown = [n for n in given if n not in net.input_names]
    if unknown:
        raise ConversionError(
            path, None, "ONNX", f"no input blob named {unknown[0]!r} (inputs: {', '.join(net.input_names)})"
        )
    shapes = {}
    for L in net.layers:
        if L.type != "Input":
            continue
        for top in L.decl.tops:
            s = given.get(top) or input_shape_of(L)
            if s is None:
                raise ConversionError(
                    path,
                    L.decl.where,
                    "ONNX",
                    f"input blob {top!r} declares no shape: give it (--input-shape {top}=C,H,W or "
                    f"input_shapes={{{top!r}: (c, h, w)}}; ncnn shapes have no batch axis)",
                )
            s = tuple(int(v) for v in s)
            if not 1 <= len(s) <= 4 or min(s) < 1:
                raise ConversionError(
                    path, L.decl.where, "ONNX", f"input shape {s} of {top!r} is not 1 to 4 sizes >= 1"
                )
            check_elements(s, f"{path or 'ncnn'}: input {top!r}")  # a shape this large is refused, not allocated
            shapes[top] = s
    return shapes


def convert_net(
    net: Any,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    opset: int = DEFAULT_OPSET,
    path: str | None = None,
):
    """The ONNX ModelProto of ``net`` (a stdops.ncnn.Net) for the given input shapes (ncnn layout, no batch)."""
    path = path or net.path
    if opset < DEFAULT_OPSET:
        raise ConversionError(
            path, None, "ONNX", f"opset {opset}: ncnn -> ONNX writes opset {DEFAULT_OPSET} or newer (Gelu, DeformConv)"
        )
    for L in net.layers:  # refuse before anything else
        if L.type != "Input" and L.type not in EMIT:
            reason = NO_ONNX_FORM.get(L.type, "no ONNX expression is written for this layer")
            raise ConversionError(path, L.decl.where, "ONNX", reason)
    shapes = resolve_input_shapes(net, input_shapes, path)
    try:
        seen = measure(net, shapes)
    except StdopsError as e:
        raise ConversionError(path, None, "ONNX", f"the model does not run on inputs of shapes {shapes}: {e}") from None
    g = GraphBuilder(opset)
    g.reserve(net.blob_names)
    alias: dict[str, str] = {}
    inputs = []
    for L in net.layers:
        if L.type == "Input":
            for top in L.decl.tops:
                alias[top] = top
                inputs.append((top, np.float32, (1, *shapes[top])))
            continue
        tops = L.decl.tops
        ctx = LayerCtx(
            g,
            L,
            [alias[b] for b in L.decl.bottoms],
            [seen[b][0] for b in L.decl.bottoms],
            [seen[b][1] for b in L.decl.bottoms],
            [seen.get(t, ((0,), np.dtype(np.float32)))[0] for t in tops],
            [seen.get(t, ((0,), np.dtype(np.float32)))[1] for t in tops],
            path,
        )
        start = len(g.nodes)
        g.prefix = f"{L.name}/"
        try:
            EMIT[L.type](ctx)
        except ConversionError:
            raise
        except (ValueError, KeyError, IndexError) as e:
            raise ConversionError(path, L.decl.where, "ONNX", f"{type(e).__name__}: {e}") from None
        renamed: dict[str, str] = {}
        for k, top in enumerate(tops):
            v = ctx.results[k]
            if v is None:
                continue  # a top the model never computes (an unused state output)
            if v in renamed:
                alias[top] = renamed[v]
            elif v != top and g.rename_output(v, top, since=start):
                renamed[v] = top
                alias[top] = top
            else:
                alias[top] = v
            if top in seen:
                g.value_info[alias[top]] = (onnx_dtype(seen[top][1]), (1, *seen[top][0]))
    g.prefix = ""
    outputs = []
    for name in net.output_names:
        v = alias[name]
        if v != name:
            g.op("Identity", [v], [name])
        outputs.append((name, seen[name][1], (1, *seen[name][0])))
    for name, _, _ in inputs + outputs:
        g.value_info.pop(name, None)
    model = g.model(
        inputs,
        outputs,
        graph_name=_graph_name(path),
        doc=f"converted from ncnn by stdops for input shapes {shapes} (ncnn layout; ONNX adds a batch axis of 1)",
        metadata={"source": "ncnn", "ncnn_input_shapes": str(shapes)},
    )
    return check(model, path, "converted to ONNX")


def _graph_name(path: str | None) -> str:
    import os

    if not path:
        return "ncnn"
    base = os.path.basename(path)
    for ext in (".param.bin", ".param"):
        if base.endswith(ext):
            return base[: -len(ext)]
    return base
