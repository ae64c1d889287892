"""Fusions of the ncnn plan's twin that the shared optimizer (stdops/optimize) cannot see.

The optimizer reads a node through its ``bound`` kernel on the node's own inputs; an ncnn convolution step is
an adapter (a 3-D blob in, a batch axis of 1 added for the shared ``conv_act`` kernel, weights inside the
step), so it has none. The layers describe themselves instead (``conv_form`` of a float32 2-D convolution,
``dense_form`` of an InnerProduct, ``binary_form`` of a two-bottom BinaryOp, ``pool_form`` of a global Pooling,
``act_form`` of HardSwish / Clip; ReLU, Sigmoid, HardSigmoid and Swish are bound kernels), and the patterns of
stdops/optimize/fuse.py are matched on them, in order:

1. a Convolution (or ConvolutionDepthWise) whose top only the next layer reads, then [an activation layer the
   export did not fold into ``activation_type``: ReLU, Clip, Sigmoid, HardSigmoid, HardSwish, Swish, or
   Sigmoid + BinaryOp mul of the same blob (SiLU)] [a BinaryOp add of another blob] [an activation], as one
   ``conv_act`` step with the residual and the post-activation (ResNet, MobileNetV2, EfficientNet blocks). Where
   both operands of the add are convolutions read only by it, the later one takes the residual (the other is
   done by then; after a squeeze-and-excitation block that convolution is part of the block's step, 3.);
2. a 1 x 1 convolution (stride 1, unpadded, no residual) whose top only a depthwise convolution reads (one
   channel per group), each with its activation: one ``expand_depthwise`` step (stdops/ops/fused_blocks.py);
   with the 1 x 1 convolution that alone reads its top (the block's projection, with what 1. gave it: activation,
   residual, post-activation), one ``expand_depthwise_project`` step (MobileNetV2's whole block);
3. squeeze-and-excitation, X -> global average Pooling -> InnerProduct (+ act) -> InnerProduct (+ act) ->
   BinaryOp mul of the gate and X (the same blob or another top of its Split; X stays): one ``squeeze_excite``
   step; with the 1 x 1 convolution (+ residual + activations, from 1.) that alone reads the product, one
   ``squeeze_excite_conv`` step (stdops/ops/fused.py);
4. an InnerProduct and the activation layer that alone reads it: one ``matmul_act`` step.

Splits are then dropped (their readers read the bottom). Only the twin (``plan.fused``) changes: a run with a
hook, an Extractor, or a request for a blob fused away runs the layers as written. Every fused step checks the
blobs it is given: a rank, channel count or dtype the layers treat otherwise (ncnn reads a 1-D blob into a 1 x 1
Convolution as an InnerProduct's, a 2-D one as one channel), or a residual not of the convolution output's own
shape (ncnn's BinaryOp broadcasts by rules of its own), is computed by the step's layers as written, in the step
(a layer's error raises PlanFallback: the plan as written reports it). A blob read by more than the pattern's
next layer, or a graph output, is never fused away.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..graph import Node, PlanFallback
from ..ops import fused, fused_blocks
from ..ops.bind import bind
from .layers.conv import ConvForm

Act = tuple[str, tuple[float, ...]]


class _Graph:
    """The twin's nodes being rewritten: a removed node becomes None (positions keep the plan's order), and who
    reads and produces each blob."""

    def __init__(self, nodes: list[Node], outputs: list[str]):
        self.nodes: list[Node | None] = list(nodes)
        self.kept = set(outputs)
        self.readers: dict[str, dict[int, None]] = {}
        self.producer: dict[str, int] = {}
        self.made: set[int] = set()  # positions holding a fused step
        for k, n in enumerate(self.nodes):
            self._index(k, n, True)

    def _index(self, k: int, n: Node | None, add: bool) -> None:
        if n is None:
            return
        for i in dict.fromkeys(n.inputs):
            if add:
                self.readers.setdefault(i, {})[k] = None
            else:
                del self.readers[i][k]
        for o in n.outputs:
            if add:
                self.producer[o] = k
            elif self.producer.get(o) == k:
                del self.producer[o]

    def only_reader(self, name: str) -> int | None:
        """The position of the one layer reading ``name`` when exactly one does and it is no graph output."""
        r = self.readers.get(name, {})
        return next(iter(r)) if len(r) == 1 and name not in self.kept else None

    def written(self, removed: list[int], inputs: list[str], out: str, same: dict[str, str] | None = None) -> Callable:
        """The layers at the positions ``removed`` as written, run in order on the fused step's ``inputs`` (``same``:
        blobs they read that hold an input's value, a Split's other top): the step's answer for blobs its kernel
        does not take (a 1-D blob into a Convolution, a residual ncnn broadcasts), without running the plan again.
        A layer's error makes the plan as written run, so that it names the layer."""
        nodes = [n for n in (self.nodes[k] for k in sorted(removed)) if n is not None]
        aliases = list((same or {}).items())

        def layers_as_written(*values):
            blobs = dict(zip(inputs, values))
            for a, b in aliases:
                blobs[a] = blobs[b]
            for n in nodes:
                try:
                    res = n.fn(*[blobs[i] for i in n.inputs])
                except Exception as e:  # noqa: BLE001 - reported by the plan as written, at the layer
                    raise PlanFallback(f"{n.name}: {e}") from e
                blobs.update(zip(n.outputs, res) if type(res) is tuple else ((n.outputs[0], res),))
            return blobs[out]

        return layers_as_written

    def place(self, removed: list[int], node: Node) -> None:
        """``node`` at the last of the positions ``removed`` (every blob it reads is computed by then)."""
        last = max(removed)
        for k in removed:
            self._index(k, self.nodes[k], False)
            self.nodes[k] = None
        self.nodes[last] = node
        self._index(last, node, True)
        self.made.add(last)

    def result(self) -> list[Node] | None:
        if not self.made:
            return None
        # a Split passes its bottom on as every top: the twin's layers read the bottom itself (a Split top asked
        # for, or a graph output, keeps its Split)
        alias: dict[str, str] = {}
        for k, n in enumerate(self.nodes):
            if n is not None and n.op == "Split" and len(n.inputs) == 1 and not self.kept & set(n.outputs):
                bottom = alias.get(n.inputs[0], n.inputs[0])
                alias.update((t, bottom) for t in n.outputs)
                self.nodes[k] = None
        return [
            dataclasses.replace(n, inputs=[alias.get(i, i) for i in n.inputs]) if alias.keys() & set(n.inputs) else n
            for n in self.nodes
            if n is not None
        ]


# --------------------------------------------------------------------------- what the layers are


def _form(node: Node | None) -> ConvForm | None:
    return getattr(node.fn, "conv_form", None) if node is not None and node.bound is None else None


def _activation(node: Node | None, cur: str) -> Act | None:
    """The activation layer ``node`` of the blob ``cur`` as a fused step's (name, params), or None."""
    if node is None or node.inputs != [cur] or len(node.outputs) != 1:
        return None
    form = getattr(node.fn, "act_form", None)  # HardSwish, Clip
    if form is not None:
        return form
    b = node.bound
    if b is None or node.fn is not b.fn:
        return None
    k, a = b.kernel.name, b.attrs
    if k in ("relu", "sigmoid"):
        return k, ()
    if k == "leaky_relu":
        return k, (float(a.get("alpha", 0.01)),)
    if k == "hard_sigmoid":
        return k, (float(a.get("alpha", 0.2)), float(a.get("beta", 0.5)))
    if k == "swish" and float(a.get("alpha", 1.0)) == 1.0:  # x * sigmoid(x): the Swish layer
        return "silu", ()
    if k == "gelu" and a.get("approximate", "none") == "none":  # x (erf(x c) + 1) 0.5, c = 1 / sqrt 2 as the layer
        return "gelu", (_RSQRT2, 0.0)
    return None


_RSQRT2 = float(np.float32(1 / np.sqrt(2)))


def _binary(node: Node | None, op: str) -> bool:
    return node is not None and getattr(node.fn, "binary_form", None) == op and len(node.inputs) == 2


def _two_uses(g: _Graph, name: str) -> tuple[list[tuple[int, str]], list[int]] | None:
    """([(position, blob read)] of the two layers that read ``name``, the Split between (its position, or
    none)): directly, or through one Split of ``name`` into two tops, each read by one of them."""
    if name in g.kept:
        return None
    rs = list(g.readers.get(name, {}))
    if len(rs) == 2:
        return [(k, name) for k in rs], []
    split = g.nodes[rs[0]] if len(rs) == 1 else None
    if split is None or split.op != "Split" or split.inputs != [name] or len(set(split.outputs)) != 2:
        return None
    uses = [(g.only_reader(t), t) for t in split.outputs]
    if any(k is None for k, _ in uses) or uses[0][0] == uses[1][0]:
        return None
    return [(k, t) for k, t in uses if k is not None], rs


def _silu(g: _Graph, cur: str) -> tuple[list[int], str] | None:
    """(positions, output) when ``cur`` is read by exactly a Sigmoid of it and a BinaryOp mul of it and that
    sigmoid (either order; through a Split or not): x * sigmoid(x) as one activation."""
    two = _two_uses(g, cur)
    if two is None:
        return None
    uses, split = two
    for (s, xs), (m, xm) in (uses, uses[::-1]):
        sn, mn = g.nodes[s], g.nodes[m]
        if _activation(sn, xs) != ("sigmoid", ()) or not _binary(mn, "mul") or sn is None or mn is None:
            continue
        sig = sn.outputs[0]
        if sorted(mn.inputs) != sorted([xm, sig]) or g.only_reader(sig) != m:
            continue
        return split + [s, m], mn.outputs[0]
    return None


# --------------------------------------------------------------------------- 1. convolution chains


def _out_size(n: int, k: int, s: int, d: int, pads: int) -> int:
    return (n + pads - d * (k - 1) - 1) // s + 1


def _conv_node(head: Node, where: str, f: ConvForm, attrs: dict, inputs: list[str], out: str, written) -> Node:
    """One ``conv_act`` step on ncnn blobs: x (C, H, W) [and the residual, of the output's shape]; any other
    blobs through the layers as written."""
    w, b = f.w, f.b
    step = bind(fused.conv_act, attrs, (None, w, b)).fn  # the bound step itself (Bound.__call__: a frame more)
    M, C = w.shape[0], w.shape[1] * int(attrs["group"])
    (kh, kw), (sh, sw), (dh, dw) = w.shape[2:], attrs["strides"], attrs["dilations"]
    pt, pl, pb, pr = attrs["pads"]
    f32 = np.dtype(np.float32)
    #: input shape -> the output's (the residual must have it), computed once per shape
    out_shapes: dict = {}

    if len(inputs) == 1:

        def conv_act_blob(x):
            if type(x) is np.ndarray and x.ndim == 3 and x.shape[0] == C and x.dtype == f32:
                return step(x[None], w, b)[0]
            return written(x)

        fn: Callable = conv_act_blob
    else:

        def conv_act_residual_blob(x, r):
            if (
                type(x) is np.ndarray
                and x.ndim == 3
                and x.shape[0] == C
                and x.dtype == f32
                and type(r) is np.ndarray
                and r.dtype == f32
            ):
                shape = out_shapes.get(x.shape)
                if shape is None:
                    if len(out_shapes) > 64:
                        out_shapes.clear()
                    shape = out_shapes[x.shape] = (
                        M,
                        _out_size(x.shape[1], kh, sh, dh, pt + pb),
                        _out_size(x.shape[2], kw, sw, dw, pl + pr),
                    )
                if r.shape == shape:  # else ncnn's BinaryOp broadcasts by its own rules: the layers decide
                    return step(x[None], w, b, r[None])[0]
            return written(x, r)

        fn = conv_act_residual_blob
    fn.conv_form = ConvForm(w, b, attrs)  # type: ignore[attr-defined]  # the chain, for the block fusions below
    return Node(head.name, head.op, fn, inputs, [out], where, None, ("conv_act",))


def _next_activation(g: _Graph, cur: str) -> tuple[list[int], str, Act] | None:
    """(positions, output, activation) of the activation that alone reads ``cur``."""
    s = _silu(g, cur)
    if s is not None:
        return s[0], s[1], ("silu", ())
    k = g.only_reader(cur)
    act = _activation(g.nodes[k], cur) if k is not None else None
    if k is None or act is None:
        return None
    node = g.nodes[k]
    assert node is not None
    return [k], node.outputs[0], act


def _residual(g: _Graph, h: int, cur: str) -> tuple[int, str, str] | None:
    """(position, output, other operand) of the BinaryOp add that alone reads ``cur``, unless the other operand
    is the top of a convolution still to come that only the add reads (that one takes the residual)."""
    k = g.only_reader(cur)
    node = g.nodes[k] if k is not None else None
    if k is None or node is None or not _binary(node, "add") or node.inputs.count(cur) != 1:
        return None
    other = node.inputs[1] if node.inputs[0] == cur else node.inputs[0]
    p = g.producer.get(other, -1)
    if p > h and p not in g.made and _form(g.nodes[p]) is not None and g.only_reader(other) == k:
        return None
    return k, node.outputs[0], other


def _fuse_conv_chain(g: _Graph, h: int, n: Node, f: ConvForm) -> None:
    cur, links = n.outputs[0], []
    attrs = dict(f.attrs)
    residual = ""
    if not attrs["activation"] and (a := _next_activation(g, cur)) is not None:
        links += a[0]
        cur, (attrs["activation"], attrs["activation_params"]) = a[1], a[2]
    r = _residual(g, h, cur)
    if r is not None:
        links.append(r[0])
        cur, residual = r[1], r[2]
        if (a := _next_activation(g, cur)) is not None:
            links += a[0]
            cur, (attrs["post_activation"], attrs["post_activation_params"]) = a[1], a[2]
    if links:
        inputs = [n.inputs[0]] + ([residual] if residual else [])
        where = g.nodes[max(links)].where  # type: ignore[union-attr]
        written = g.written([h] + links, inputs, cur)
        g.place([h] + links, _conv_node(n, where, f, attrs, inputs, cur, written))


# --------------------------------------------------------------------------- 2. expansion + depthwise


def _plain(n: Node | None) -> ConvForm | None:
    """The form of a convolution step of one input with neither residual nor post-activation."""
    f = _form(n)
    if f is None or n is None or len(n.inputs) != 1 or len(n.outputs) != 1 or f.attrs.get("post_activation"):
        return None
    return f


def _is_pointwise(f: ConvForm) -> bool:
    a = f.attrs
    return (
        f.w.shape[2:] == (1, 1)
        and a["group"] == 1
        and tuple(a["strides"]) == (1, 1)
        and tuple(a["dilations"]) == (1, 1)
        and not any(a["pads"])
    )


def _expand_depthwise_node(n1: Node, f1: ConvForm, n2: Node, f2: ConvForm, written) -> Node:
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
        if isinstance(x, np.ndarray) and x.ndim == 3 and x.shape[0] == channels and x.dtype == np.float32:
            return step(x[None], w1, w2, b1, b2)[0]
        return written(x)  # ncnn reads a 2-D blob as one channel: the layers as written

    expand_depthwise_blob.block_forms = (f1, f2, attrs)  # type: ignore[attr-defined]  # for the projection (2b.)
    return Node(
        n1.name, n1.op, expand_depthwise_blob, list(n1.inputs), list(n2.outputs), n2.where, None, ("expand_depthwise",)
    )


def _fuse_expand_depthwise(g: _Graph, h: int) -> None:
    n1 = g.nodes[h]
    f1 = _plain(n1)
    if n1 is None or f1 is None or not _is_pointwise(f1):
        return
    k = g.only_reader(n1.outputs[0])
    n2 = g.nodes[k] if k is not None else None
    f2 = _plain(n2)
    if k is None or n2 is None or f2 is None or n2.inputs != n1.outputs:
        return
    M = f1.w.shape[0]
    if f2.w.shape[:2] == (M, 1) and f2.attrs["group"] == M:
        written = g.written([h, k], list(n1.inputs), n2.outputs[0])
        g.place([h, k], _expand_depthwise_node(n1, f1, n2, f2, written))


def _fuse_project(g: _Graph, h: int) -> None:
    """2b. An ``expand_depthwise`` step whose top only a 1 x 1 convolution reads (the block's projection, with its
    activation, a residual and a post-activation, from 1.): one ``expand_depthwise_project`` step."""
    n = g.nodes[h]
    forms = getattr(n.fn, "block_forms", None) if n is not None and h in g.made else None
    if n is None or forms is None:
        return
    f1, f2, attrs = forms
    k = g.only_reader(n.outputs[0])
    n3 = g.nodes[k] if k is not None else None
    f3 = _form(n3)
    if k is None or n3 is None or f3 is None or not _is_pointwise(f3) or len(n3.inputs) > 2 or len(n3.outputs) != 1:
        return
    M = f1.w.shape[0]
    if n3.inputs[0] != n.outputs[0] or n.outputs[0] in n3.inputs[1:] or f3.w.shape[1] != M:
        return
    a3 = f3.attrs
    attrs = dict(
        attrs,
        pw_activation=a3["activation"],
        pw_activation_params=a3["activation_params"],
        post_activation=a3.get("post_activation", ""),
        post_activation_params=a3.get("post_activation_params", ()),
    )
    ws = (f1.w, f2.w, f3.w, f1.b, f2.b, f3.b)
    step = bind(fused_blocks.expand_depthwise_project, attrs, (None, *ws))
    inputs = list(n.inputs) + list(n3.inputs[1:])
    written = g.written([h, k], inputs, n3.outputs[0])
    C, M3 = f1.w.shape[1], f3.w.shape[0]
    a2 = f2.attrs
    (kh, kw), (sh, sw), (dh, dw) = f2.w.shape[2:], a2["strides"], a2["dilations"]
    pt, pl, pb, pr = a2["pads"]

    def taken(x) -> bool:
        return isinstance(x, np.ndarray) and x.ndim == 3 and x.shape[0] == C and x.dtype == np.float32

    if len(inputs) == 1:

        def inverted_residual_blob(x):
            return step(x[None], *ws)[0] if taken(x) else written(x)

        fn: Callable = inverted_residual_blob
    else:

        def inverted_residual_add_blob(x, r):
            if taken(x) and isinstance(r, np.ndarray) and r.dtype == np.float32:
                shape = (M3, _out_size(x.shape[1], kh, sh, dh, pt + pb), _out_size(x.shape[2], kw, sw, dw, pl + pr))
                if r.shape == shape:  # else ncnn's BinaryOp broadcasts by its own rules: the layers decide
                    return step(x[None], *ws, r[None])[0]
            return written(x, r)

        fn = inverted_residual_add_blob
    node = Node(n.name, n.op, fn, inputs, list(n3.outputs), n3.where, None, ("expand_depthwise_project",))
    g.place([h, k], node)


# --------------------------------------------------------------------------- 3. squeeze and excitation


def _dense(g: _Graph, cur: str) -> tuple[list[int], str, np.ndarray, np.ndarray | None, Act] | None:
    """(positions, output, W, B, activation) of the InnerProduct that alone reads ``cur``, with its own activation
    or the activation layer that alone reads its top (not both)."""
    k = g.only_reader(cur)
    node = g.nodes[k] if k is not None else None
    d = getattr(node.fn, "dense_form", None) if node is not None else None
    if k is None or node is None or d is None or not d.flat or node.inputs != [cur] or len(node.outputs) != 1:
        return None
    links, out, act = [k], node.outputs[0], d.activation
    if not act[0] and (a := _next_activation(g, out)) is not None:
        links += a[0]
        out, act = a[1], a[2]
    return links, out, d.w, d.b, act


def _same_value(g: _Graph, a: str, b: str) -> bool:
    """Whether two blobs hold one value: the same blob, or two tops of one Split."""
    if a == b:
        return True
    p = g.producer.get(a, -1)
    split = g.nodes[p] if p >= 0 else None
    return split is not None and split.op == "Split" and p == g.producer.get(b) and len(split.inputs) == 1


def _fuse_squeeze_excite(g: _Graph, h: int) -> None:
    pool = g.nodes[h]
    if pool is None or getattr(pool.fn, "pool_form", None) != "global_average" or len(pool.inputs) != 1:
        return
    x = pool.inputs[0]  # X, the block's input (it stays: only the blobs after the pooling are fused away)
    d1 = _dense(g, pool.outputs[0])
    d2 = _dense(g, d1[1]) if d1 is not None else None
    k_mul = g.only_reader(d2[1]) if d2 is not None else None
    mul = g.nodes[k_mul] if k_mul is not None else None
    if d1 is None or d2 is None or k_mul is None or mul is None or not _binary(mul, "mul"):
        return
    gate = d2[1]
    if mul.inputs.count(gate) != 1:
        return
    x_mul = mul.inputs[1] if mul.inputs[0] == gate else mul.inputs[0]
    if not _same_value(g, x, x_mul):
        return
    (l1, _, w1, b1, act1), (l2, _, w2, b2, act2) = d1, d2
    C1, C = w1.shape
    if w2.shape != (C, C1):
        return
    consts = (None, w1.reshape(C1, C, 1, 1), b1, w2.reshape(C, C1, 1, 1), b2)
    block = [h, *l1, *l2, k_mul]
    k3 = g.only_reader(mul.outputs[0])
    n3 = g.nodes[k3] if k3 is not None else None
    f3 = _form(n3)
    if k3 is not None and n3 is not None and f3 is not None and _is_pointwise(f3) and f3.w.shape[1] == C:
        if n3.inputs[0] == mul.outputs[0] and mul.outputs[0] not in n3.inputs[1:]:
            a3 = f3.attrs
            attrs = {
                "se_activation": act1[0],
                "se_activation_params": act1[1],
                "se_gate": act2[0],
                "se_gate_params": act2[1],
                "activation": a3["activation"],
                "activation_params": a3["activation_params"],
                "post_activation": a3.get("post_activation", ""),
                "post_activation_params": a3.get("post_activation_params", ()),
            }
            step = bind(fused.squeeze_excite_conv, attrs, consts + (f3.w, f3.b))
            written = g.written(block + [k3], [x, *n3.inputs[1:]], n3.outputs[0], {x_mul: x})
            node = _se_node(pool, n3, x, C, f3.w.shape[0], step, consts + (f3.w, f3.b), n3.inputs[1:], written)
            g.place(block + [k3], node)
            return
    attrs = {"activation": act1[0], "activation_params": act1[1], "post_activation": act2[0]}
    attrs["post_activation_params"] = act2[1]
    step = bind(fused.squeeze_excite, attrs, consts)
    written = g.written(block, [x], mul.outputs[0], {x_mul: x})
    g.place(block, _se_node(pool, mul, x, C, 0, step, consts, [], written))


def _se_node(pool: Node, last: Node, x: str, C: int, M: int, step, consts: tuple, residual: list[str], written) -> Node:
    """The block's step on ncnn blobs: X (C, H, W) [and the residual (M, H, W) of its convolution]; any other
    blobs through the layers as written."""
    ws = consts[1:]
    kernel = "squeeze_excite_conv" if M else "squeeze_excite"

    def taken(v) -> bool:
        return isinstance(v, np.ndarray) and v.ndim == 3 and v.shape[0] == C and v.dtype == np.float32 and v.size > 0

    if not residual:

        def squeeze_excite_blob(v):
            return step(v[None], *ws)[0] if taken(v) else written(v)

        fn: Callable = squeeze_excite_blob
    else:

        def squeeze_excite_residual_blob(v, r):
            if taken(v) and isinstance(r, np.ndarray) and r.shape == (M,) + v.shape[1:] and r.dtype == np.float32:
                return step(v[None], *ws, r[None])[0]
            return written(v, r)

        fn = squeeze_excite_residual_blob
    return Node(pool.name, pool.op, fn, [x, *residual], list(last.outputs), last.where, None, (kernel,))


# --------------------------------------------------------------------------- 4. InnerProduct + activation


def _fuse_dense_activation(g: _Graph, h: int) -> None:
    """An InnerProduct without its own activation whose top only an activation layer reads (a classifier's
    hidden layer: MobileNetV3's HardSwish): one ``matmul_act`` step, the activation in the GEMM's epilogue."""
    n = g.nodes[h]
    d = getattr(n.fn, "dense_form", None) if n is not None and h not in g.made else None
    if n is None or d is None or d.activation[0] or len(n.inputs) != 1 or len(n.outputs) != 1:
        return
    a = _next_activation(g, n.outputs[0])
    if a is None:
        return
    wt, b, K = np.ascontiguousarray(d.w.T), d.b, d.w.shape[1]
    step = bind(fused.matmul_act, {"activation": a[2][0], "activation_params": a[2][1]}, (None, wt, b))

    written = g.written([h, *a[0]], list(n.inputs), a[1])

    def inner_product_act_blob(x):
        if isinstance(x, np.ndarray) and x.dtype == np.float32:
            if x.ndim == 2 and x.shape[1] == K:  # a batch of rows (the layer's rule), else the blob flattened
                return step(x, wt, b)
            if x.size == K and d.flat:
                return step(x.reshape(1, K), wt, b)[0]
        return written(x)

    where = g.nodes[max(a[0])].where  # type: ignore[union-attr]
    g.place(
        [h, *a[0]], Node(n.name, n.op, inner_product_act_blob, list(n.inputs), [a[1]], where, None, ("matmul_act",))
    )


# --------------------------------------------------------------------------- the twin


def twin_nodes(nodes: list[Node], outputs: list[str]) -> list[Node] | None:
    """The plan's nodes with the chains and blocks above each as one step, or None when there is none."""
    g = _Graph(nodes, outputs)
    for h in range(len(g.nodes)):
        n = g.nodes[h]
        f = _form(n)
        if n is not None and f is not None and h not in g.made and len(n.inputs) == 1 and len(n.outputs) == 1:
            _fuse_conv_chain(g, h, n, f)
    for h in range(len(g.nodes)):
        _fuse_expand_depthwise(g, h)
    for h in range(len(g.nodes)):
        _fuse_project(g, h)
    for h in range(len(g.nodes)):
        _fuse_squeeze_excite(g, h)
    for h in range(len(g.nodes)):
        _fuse_dense_activation(g, h)
    return g.result()
