"""BatchNormalization folding and the Conv / MatMul / Gemm chains fused into one step (stdops/ops/fused.py).

A chain starts at a Conv with a constant weight, a MatMul with a constant 2-D right operand, or a Gemm with a
constant B (transA = 0, a bias of one value per column, a 2-D A); then, each link being the only reader of
the value before it (and that value no graph output):

    [BatchNormalization (Conv only)] [Add of a constant bias (MatMul)] [activation] [Add residual] [activation]

An activation is Relu, Clip (constant bounds), LeakyRelu, Sigmoid, Sigmoid + Mul (SiLU: the value read by
exactly a Sigmoid and the Mul of the value and that Sigmoid), HardSigmoid, HardSwish, or the erf GELU as
exporters write it (Div by sqrt(2), Erf, Add 1, Mul 0.5, Mul by the value). The fused node takes
the first node's name and place in messages, the last node's output and position (every input it reads is
computed by then). A Conv that starts no chain still becomes a ``conv_act`` when its input's spatial size is
known: its Winograd transform is then prepared at load. Softmax, and LayerNormalization whose statistics no
node reads, become the row-wise compiled steps ``softmax_rows`` / ``layer_norm_rows``; a positive constant
scalar scale before the Softmax (Mul / Div of its input, or Mul of the MatMul operands that make it: the
attention scale) moves into the softmax step's exponent.

Then a squeeze-and-excitation block, GlobalAveragePool(X) -> 1 x 1 ``conv_act`` -> 1 x 1 ``conv_act`` -> Mul by X
(each value read only by the next; the convolutions group 1, stride 1, unpadded, constant weights, one activation
each and no residual), becomes one ``squeeze_excite`` step at the Mul's position; with the 1 x 1 ``conv_act``
that alone reads its result (group 1, stride 1, unpadded, constant weights), one ``squeeze_excite_conv`` step at the
convolution's position. And an inverted-residual block, a 1 x 1 ``conv_act`` -> the depthwise ``conv_act`` that
alone reads it (one ``expand_depthwise`` step) [-> the 1 x 1 ``conv_act`` that alone reads that, with its
activation, residual and post-activation: one ``expand_depthwise_project`` step].
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..errors import StdopsError
from ..graph import Node
from ..ops import fused
from ..ops._registry import record_use
from ..ops.bind import bind
from . import fuse_blocks
from ._work import Work, float_const, kernel_name

record_use(fused.conv_act, "optimize", "Conv + bias + activation + residual + activation")
record_use(fused.matmul_act, "optimize", "MatMul / Gemm + bias + activation + residual + activation")
record_use(fused.squeeze_excite, "optimize", "GlobalAveragePool + 1x1 Conv + act + 1x1 Conv + act + Mul")
record_use(fused.squeeze_excite_conv, "optimize", "squeeze_excite + the 1x1 Conv (+ act + residual) reading it")
record_use(fused.softmax_rows, "optimize", "Softmax")
record_use(fused.layer_norm_rows, "optimize", "LayerNormalization without its statistics")

_ACTIVATIONS = ("relu", "clip", "leaky_relu", "sigmoid", "hard_sigmoid", "hard_swish")


def _scalar(work: Work, name: str) -> float | None:
    """A constant scalar input as a float; NaN for an absent one; None when not a constant scalar."""
    if not name:
        return math.nan
    v = work.const(name)
    if not isinstance(v, np.ndarray) or v.size != 1 or v.dtype.kind != "f":
        return None
    return float(v.reshape(()))


def _activation(work: Work, node: Node, cur: str) -> tuple[str, tuple[float, ...]] | None:
    """(name, params) when ``node`` is an activation of ``cur`` a fused step can apply."""
    k = kernel_name(node)
    if k not in _ACTIVATIONS or not node.inputs or node.inputs[0] != cur or cur in node.inputs[1:]:
        return None
    if len([o for o in node.outputs if o]) != 1:
        return None
    a = node.bound.attrs
    if k == "clip":
        lo = _scalar(work, node.inputs[1] if len(node.inputs) > 1 else "")
        hi = _scalar(work, node.inputs[2] if len(node.inputs) > 2 else "")
        if lo is None or hi is None:
            return None
        return "clip", (lo, hi)
    if k == "leaky_relu":
        return "leaky_relu", (float(a.get("alpha", 0.01)),)
    if k == "hard_sigmoid":
        return "hard_sigmoid", (float(a.get("alpha", 0.2)), float(a.get("beta", 0.5)))
    return k, ()


def _silu(work: Work, cur: str) -> tuple[int, int, str] | None:
    """(sigmoid position, mul position, mul output) when ``cur`` is read by exactly Sigmoid(cur) and
    Mul(cur, that sigmoid) (either order)."""
    if cur in work.kept:
        return None
    rs = work.readers(cur)
    if len(rs) != 2:
        return None
    for s, m in (rs, rs[::-1]):
        sn, mn = work.nodes[s], work.nodes[m]
        if kernel_name(sn) != "sigmoid" or kernel_name(mn) != "mul" or sn is None or mn is None:
            continue
        sig = sn.outputs[0] if sn.outputs else ""
        if sn.inputs != [cur] or not sig or sorted(mn.inputs) != sorted([cur, sig]) or work.only_reader(sig) != m:
            continue
        return s, m, mn.outputs[0]
    return None


def _const_is(work: Work, name: str, value: float, tol: float = 0.0) -> bool:
    v = _scalar(work, name)
    return v is not None and not math.isnan(v) and abs(v - value) <= tol


def _other(node: Node, name: str) -> str | None:
    """The other input of a two-input node that reads ``name`` once."""
    if len(node.inputs) != 2 or node.inputs.count(name) != 1:
        return None
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


def _one(work: Work, name: str, kernel: str) -> tuple[int, Node] | None:
    """(position, node) of the only reader of ``name`` when it runs ``kernel``."""
    k = work.only_reader(name)
    if k is None:
        return None
    node = work.nodes[k]
    if node is None or kernel_name(node) != kernel:
        return None
    return k, node


def _gelu(work: Work, cur: str) -> tuple[list[int], str, tuple[float, float]] | None:
    """(positions, output, (c, divides)) when ``cur`` feeds the erf GELU as exporters write it: u = cur / c
    (c = sqrt 2) or cur * c (c = 1 / sqrt 2), then ((erf(u) + 1) * 0.5) * cur in any association of the
    two products (Mul operands in either order)."""
    if cur in work.kept:
        return None
    rs = work.readers(cur)
    if len(rs) != 2:
        return None
    for s_, other in (rs, rs[::-1]):
        sn, on = work.nodes[s_], work.nodes[other]
        if sn is None or on is None:
            continue
        k = kernel_name(sn)
        if k == "div" and sn.inputs[:1] == [cur] and len(sn.inputs) == 2:
            c, divides = _scalar(work, sn.inputs[1]), 1.0
            if c is None or not abs(c - math.sqrt(2)) < 1e-6:
                continue
        elif k == "mul" and (o := _other(sn, cur)) is not None:
            c, divides = _scalar(work, o), 0.0
            if c is None or not abs(c - math.sqrt(0.5)) < 1e-7:
                continue
        else:
            continue
        erf_ = _one(work, sn.outputs[0], "erf")
        if erf_ is None:
            continue
        add_ = _one(work, erf_[1].outputs[0], "add")
        if add_ is None or not _const_is(work, _other(add_[1], erf_[1].outputs[0]) or "", 1.0):
            continue
        a = add_[1].outputs[0]
        chain = [s_, erf_[0], add_[0]]
        m1 = _one(work, a, "mul")
        if m1 is None:
            continue
        o1 = _other(m1[1], a)
        if o1 is None:
            continue
        if on.outputs and o1 == on.outputs[0]:  # (cur * 0.5, the other reader) times (erf + 1)
            if kernel_name(on) != "mul" or not _const_is(work, _other(on, cur) or "", 0.5):
                continue
            if work.only_reader(on.outputs[0]) != m1[0]:
                continue
            return chain + [other, m1[0]], m1[1].outputs[0], (c, divides)
        m2 = _one(work, m1[1].outputs[0], "mul")
        if m2 is None:
            continue
        o2 = _other(m2[1], m1[1].outputs[0])
        if _const_is(work, o1, 0.5) and o2 == cur and m2[0] == other:  # cur * ((erf + 1) * 0.5)
            return chain + [m1[0], m2[0]], m2[1].outputs[0], (c, divides)
        if o1 == cur and m1[0] == other and _const_is(work, o2 or "", 0.5):  # (cur * (erf + 1)) * 0.5
            return chain + [m1[0], m2[0]], m2[1].outputs[0], (c, divides)
    return None


@dataclasses.dataclass
class _Chain:
    links: list[int]  # positions of the nodes the fused step replaces (after the head)
    out: str
    act: tuple[str, tuple[float, ...]] | None = None
    residual: str = ""
    post: tuple[str, tuple[float, ...]] | None = None


def _chain(work: Work, start: str) -> _Chain:
    ch = _Chain([], start)
    stage = 0  # 0: after the head, 1: after the activation, 2: after the residual, 3: done
    while stage < 3 and ch.out not in work.kept:
        if stage in (0, 2) and (s := _silu(work, ch.out)) is not None:
            act = ("silu", ())
            ch.links += [s[0], s[1]]
            ch.out = s[2]
        elif stage in (0, 2) and (gl := _gelu(work, ch.out)) is not None:
            act = ("gelu", gl[2])
            ch.links += gl[0]
            ch.out = gl[1]
        else:
            k = work.only_reader(ch.out)
            if k is None:
                break
            node = work.nodes[k]
            assert node is not None
            act = _activation(work, node, ch.out) if stage in (0, 2) else None
            if act is None:
                if stage < 2 and kernel_name(node) == "add" and len(node.inputs) == 2 and ch.out in node.inputs:
                    other = node.inputs[1] if node.inputs[0] == ch.out else node.inputs[0]
                    if not other or other == ch.out:
                        break
                    ch.residual = other
                    ch.links.append(k)
                    ch.out = node.outputs[0]
                    stage = 2
                    continue
                break
            ch.links.append(k)
            ch.out = node.outputs[0]
        if stage == 0:
            ch.act = act
            stage = 1
        else:
            ch.post = act
            stage = 3
    return ch


def _act_attrs(ch: _Chain) -> dict:
    attrs: dict = {}
    if ch.act is not None:
        attrs["activation"], attrs["activation_params"] = ch.act[0], ch.act[1]
    if ch.post is not None:
        attrs["post_activation"], attrs["post_activation_params"] = ch.post[0], ch.post[1]
    return attrs


def _place(work: Work, head: int, ch: _Chain, node: Node) -> None:
    """The fused node at the chain's last position; the head and the links removed."""
    last = max([head] + ch.links)
    for k in [head] + ch.links:
        work.replace(k, None)
    work.replace(last, node)


def _outputs(work: Work, k: int) -> list[str]:
    node = work.nodes[k]
    assert node is not None
    return node.outputs


def _fold_batchnorm(work: Work, conv: Node, w: np.ndarray, b) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(W', B', BN position) when the Conv's only reader is an inference BatchNormalization with constant
    parameters: W' = W * s / sqrt(var + eps), B' = (B - mean) * s / sqrt(var + eps) + bias, in float64."""
    k = work.only_reader(conv.outputs[0])
    if k is None:
        return None
    bn = work.nodes[k]
    if kernel_name(bn) != "batch_normalization" or bn is None or bn.inputs[0] != conv.outputs[0]:
        return None
    if bn.bound.attrs.get("training_mode", 0) or len([o for o in bn.outputs if o]) != 1 or len(bn.inputs) != 5:
        return None
    ps = [work.const(i) for i in bn.inputs[1:]]
    M = w.shape[0]
    if not all(float_const(p) and p.size == M for p in ps):
        return None
    scale, bias, mean, var = (p.astype(np.float64).reshape(M) for p in ps)
    inv = scale / np.sqrt(var + np.float64(np.float32(bn.bound.attrs.get("epsilon", 1e-5))))
    w2 = (w.astype(np.float64) * inv.reshape((M,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    b0 = np.zeros(M) if b is None else b.astype(np.float64)
    b2 = ((b0 - mean) * inv + bias).astype(w.dtype)
    return w2, b2, k


def _fuse_conv(work: Work, h: int, node: Node) -> None:
    w = work.const(node.inputs[1]) if len(node.inputs) > 1 else None
    if not isinstance(w, np.ndarray) or w.dtype.kind != "f" or w.ndim < 3:
        return
    bname = node.inputs[2] if len(node.inputs) > 2 else ""
    b = work.const(bname) if bname else None
    if bname and b is None:
        return  # a bias known only at run time: leave the Conv alone
    inputs = list(node.inputs[:3]) + [""] * (3 - len(node.inputs[:3]))
    links: list[int] = []
    out = node.outputs[0]
    bn = _fold_batchnorm(work, node, w, b)
    if bn is not None:
        w2, b2, k = bn
        inputs[1], inputs[2] = work.new_const(node.inputs[1], w2), work.new_const(f"{node.name}.bias", b2)
        links.append(k)
        out = _outputs(work, k)[0]
    ch = _chain(work, out)
    ch.links = links + ch.links
    attrs = {a: v for a, v in node.bound.attrs.items()}
    attrs.update(_act_attrs(ch))
    sx = work.shapes.get(node.inputs[0])
    if sx is not None and len(sx) == w.ndim:
        attrs["expected_spatial"] = tuple(sx[2:])
    if not ch.links and "expected_spatial" not in attrs:
        return  # nothing to fuse, nothing to prepare
    consts = (None, work.consts.get(inputs[1]), work.consts.get(inputs[2]) if inputs[2] else None)
    bound = bind(fused.conv_act, attrs, consts)
    new = dataclasses.replace(node.rebound(bound, inputs + [ch.residual]), outputs=[ch.out])
    _place(work, h, ch, new)


def _fuse_matmul(work: Work, h: int, node: Node, kname: str) -> None:
    a = node.bound.attrs
    w = work.const(node.inputs[1]) if len(node.inputs) > 1 else None
    if not isinstance(w, np.ndarray) or w.dtype != np.float32 or w.ndim != 2:
        return
    x = node.inputs[0]
    bias = None
    bias_name = ""
    if kname == "gemm":
        if a.get("transA", 0) or not (len(work.shapes.get(x, ())) == 2 or kernel_name(work.producer(x)) == "flatten"):
            return  # Gemm's A is 2-D (a fused step would not check it): known so, or a Flatten's result
        alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
        wt = w.T if a.get("transB", 0) else w
        if alpha != 1.0:
            wt = (wt.astype(np.float64) * alpha).astype(w.dtype)
        c = node.inputs[2] if len(node.inputs) > 2 else ""
        if c:
            cv = work.const(c)
            if (
                not isinstance(cv, np.ndarray)
                or cv.dtype != w.dtype
                or cv.shape not in ((wt.shape[1],), (1, wt.shape[1]))
            ):
                return
            bias = cv.reshape(-1) if beta == 1.0 else (cv.reshape(-1).astype(np.float64) * beta).astype(w.dtype)
        wname = work.new_const(node.inputs[1], np.ascontiguousarray(wt)) if wt is not w else node.inputs[1]
        if bias is not None:
            bias_name = work.new_const(f"{node.name}.bias", np.ascontiguousarray(bias))
    else:
        wname = node.inputs[1]
    ch = _chain(work, node.outputs[0])
    if kname == "mat_mul" and ch.links and ch.residual:
        # MatMul -> Add: a constant of one value per column is the bias, the chain restarts after it
        rv = work.const(ch.residual)
        first = work.nodes[ch.links[0]]
        if ch.act is None and kernel_name(first) == "add" and isinstance(rv, np.ndarray):
            if rv.dtype != w.dtype or rv.ndim != 1 or rv.size != w.shape[1]:
                return
            bias, bias_name = rv, ch.residual
            rest = _chain(work, _outputs(work, ch.links[0])[0])
            ch = _Chain([ch.links[0]] + rest.links, rest.out, rest.act, rest.residual, rest.post)
    if kname == "mat_mul" and not ch.links:
        return
    if ch.residual and work.is_const(ch.residual):
        return  # a constant added that is no per-column bias (a broadcast the kernels' Add must decide)
    bound = bind(fused.matmul_act, _act_attrs(ch), (None, work.consts[wname], bias))
    new = Node(
        node.name,
        node.op,
        bound.fn,
        [x, wname, bias_name, ch.residual],
        [ch.out],
        node.where,
        bound,
        ("matmul_act",),
    )
    _place(work, h, ch, new)


def run(work: Work) -> None:
    for h in range(len(work.nodes)):
        node = work.nodes[h]
        k = kernel_name(node)
        if node is None or not node.outputs or not node.outputs[0]:
            continue
        if any(i in work.overridable for i in node.inputs[1:]):
            continue
        if k == "conv":
            _fuse_conv(work, h, node)
        elif k in ("mat_mul", "gemm"):
            _fuse_matmul(work, h, node, k)
        elif k == "softmax" and len(node.outputs) == 1:
            x, scale = _softmax_scale(work, node.inputs[0])
            attrs = dict(node.bound.attrs, scale=scale) if scale != 1.0 else node.bound.attrs
            work.replace(h, node.rebound(bind(fused.softmax_rows, attrs), [x]))
        elif k == "layer_normalization" and not any(o in work.kept or work.readers(o) for o in node.outputs[1:] if o):
            # the constants as the passes left them (a scale that reached the node through a folded Identity
            # is known only here, not to the front end's binding)
            consts = tuple(work.const(i) for i in node.inputs)
            ln = bind(fused.layer_norm_rows, node.bound.attrs, consts)
            work.replace(h, dataclasses.replace(node.rebound(ln), outputs=node.outputs[:1]))
    for h in range(len(work.nodes)):
        if kernel_name(work.nodes[h]) == "global_average_pool":
            _fuse_squeeze_excite(work, h)
    for h in range(len(work.nodes)):
        if kernel_name(work.nodes[h]) == "conv_act":
            fuse_blocks.fuse_expand_depthwise(work, h)
    _prepare_known_constants(work)


def _scaled(work: Work, node: Node | None) -> tuple[str, float] | None:
    """(X, s) when ``node`` is Mul(X, s), Mul(s, X) or Div(X, 1 / s) for a constant float32 scalar s > 0 (finite)
    that does not broadcast the product to a higher rank than X's."""
    k = kernel_name(node)
    if node is None or k not in ("mul", "div") or len(node.inputs) != 2 or len([o for o in node.outputs if o]) != 1:
        return None
    for x, c in (node.inputs, node.inputs[::-1]) if k == "mul" else (node.inputs,):
        v = work.const(c)
        if not x or x == c or work.is_const(x) or not isinstance(v, np.ndarray) or v.size != 1 or v.ndim > 1:
            continue
        if v.dtype != np.float32 or (v.ndim == 1 and len(work.shapes.get(x, ())) < 1):
            continue
        f = float(v.reshape(()))
        s = f if k == "mul" else (1.0 / f if f != 0.0 else math.inf)
        if math.isfinite(s) and s > 0.0:
            return x, s
    return None


def _softmax_scale(work: Work, x: str) -> tuple[str, float]:
    """Softmax(s X) with s a positive constant is softmax_rows(X, scale=s): the attention scale as exporters
    write it, Softmax(MatMul(Q, K) * s) or Softmax(MatMul(Q * s1, K * s2)) (each product read only by the next
    node), leaves the graph and rides in the softmax's exponent. Returns (the softmax's new input, s), the
    Mul / Div nodes removed."""
    j = work.producer_index().get(x, -1)
    node = work.nodes[j] if j >= 0 and work.only_reader(x) is not None else None
    sc = _scaled(work, node)
    if sc is not None:  # Softmax(X * s)
        work.replace(j, None)
        return sc
    if node is None or kernel_name(node) != "mat_mul" or len(node.inputs) != 2 or node.inputs[0] == node.inputs[1]:
        return x, 1.0
    scale, inputs = 1.0, list(node.inputs)
    for i, a in enumerate(node.inputs):  # Softmax(MatMul(A * s1, B * s2))
        p = work.producer_index().get(a, -1)
        sc = _scaled(work, work.nodes[p]) if p >= 0 and work.only_reader(a) == j else None
        if sc is not None:
            scale *= sc[1]
            inputs[i] = sc[0]
            work.replace(p, None)
    if scale != 1.0:
        work.replace(j, node.rebound(node.bound, inputs))
    return x, scale


def _pointwise(work: Work, src: str, chain: bool = False) -> tuple[int, Node, str, dict] | None:
    """(position, node, output, attrs) when the only reader of ``src`` is a ``conv_act`` of it fit for a
    squeeze-excite step: a 1 x 1
    group-1 convolution, stride 1, unpadded, constant float32 weight and (if any) bias, no residual or post act
    (unless ``chain``: the convolution after the block keeps its whole chain)."""
    k = work.only_reader(src)
    node = None if k is None else work.nodes[k]
    if k is None or kernel_name(node) != "conv_act" or node is None or node.inputs[:1] != [src]:
        return None
    if len(node.outputs) != 1:
        return None
    a = node.bound.attrs
    ins = list(node.inputs) + [""] * (4 - len(node.inputs))
    w, b = work.const(ins[1]), work.const(ins[2]) if ins[2] else None
    if ((ins[3] or a.get("post_activation")) and not chain) or (ins[2] and b is None) or ins[3] == src:
        return None
    if not (isinstance(w, np.ndarray) and w.dtype == np.float32 and w.ndim == 4 and w.shape[2:] == (1, 1)):
        return None
    if a.get("group", 1) != 1 or a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        return None
    if any(v != 1 for v in tuple(a.get("strides") or ()) + tuple(a.get("dilations") or ())):
        return None
    if any(v != 0 for v in a.get("pads") or ()):
        return None
    return k, node, node.outputs[0], a


def _fuse_squeeze_excite(work: Work, h: int) -> None:
    gap = work.nodes[h]
    assert gap is not None
    x, pooled = gap.inputs[0], gap.outputs[0]
    c1 = _pointwise(work, pooled)
    c2 = None if c1 is None else _pointwise(work, c1[2])
    if c1 is None or c2 is None:
        return
    (k1, n1, _, a1), (k2, n2, e, a2) = c1, c2
    km = work.only_reader(e)
    mul = None if km is None else work.nodes[km]
    if km is None or mul is None or kernel_name(mul) != "mul" or sorted(mul.inputs) != sorted([x, e]) or x == e:
        return
    w1, w2 = work.const(n1.inputs[1]), work.const(n2.inputs[1])
    if w2.shape != (w1.shape[1], w1.shape[0], 1, 1):
        return  # the product would broadcast otherwise than by channel
    attrs = {
        "activation": a1.get("activation", ""),
        "activation_params": tuple(a1.get("activation_params", ())),
        "post_activation": a2.get("activation", ""),
        "post_activation_params": tuple(a2.get("activation_params", ())),
    }
    b1 = n1.inputs[2] if len(n1.inputs) > 2 else ""
    b2 = n2.inputs[2] if len(n2.inputs) > 2 else ""
    inputs = [x, n1.inputs[1], b1, n2.inputs[1], b2]
    c3 = _pointwise(work, mul.outputs[0], chain=True)
    if c3 is not None and work.const(c3[1].inputs[1]).shape[1] == w1.shape[1]:
        kc, n3, y, a3 = c3
        se = {
            "se_activation": attrs["activation"],
            "se_activation_params": attrs["activation_params"],
            "se_gate": attrs["post_activation"],
            "se_gate_params": attrs["post_activation_params"],
        }
        for a in ("activation", "post_activation"):
            se[a], se[a + "_params"] = a3.get(a, ""), tuple(a3.get(a + "_params", ()))
        ins3 = list(n3.inputs) + [""] * (4 - len(n3.inputs))
        inputs += [ins3[1], ins3[2], ins3[3]]
        bound = bind(fused.squeeze_excite_conv, se, tuple(work.const(i) if i else None for i in inputs))
        new = Node(gap.name, gap.op, bound.fn, inputs, [y], gap.where, bound, ("squeeze_excite_conv",))
        for k in (h, k1, k2, km):
            work.replace(k, None)
        work.replace(kc, new)
        return
    bound = bind(fused.squeeze_excite, attrs, tuple(work.const(i) if i else None for i in inputs))
    new = Node(gap.name, gap.op, bound.fn, inputs, [mul.outputs[0]], gap.where, bound, ("squeeze_excite",))
    for k in (h, k1, k2):
        work.replace(k, None)
    work.replace(km, new)


def _prepare_known_constants(work: Work) -> None:
    """Nodes whose kernel prepares constant inputs, rebound where a pass made an input constant that the front
    end's binding did not know (a weight read through an Identity the cancel pass removed, a folded value):
    the weights of exported graphs that share one initializer between layers."""
    for k, node in enumerate(work.nodes):
        if kernel_name(node) is None or node is None or node.bound.kernel.prepare is None:
            continue
        old = tuple(node.bound.constants) + (None,) * (len(node.inputs) - len(node.bound.constants))
        consts = tuple(work.const(i) if c is None else c for i, c in zip(node.inputs, old))
        if all((c is None) == (o is None) for c, o in zip(consts, old)):
            continue
        try:
            bound = node.bound.rebind(constants=consts)
        except StdopsError:
            continue  # the written node raises its error at run time
        work.replace(k, node.rebound(bound))
