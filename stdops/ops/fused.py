"""Fused steps, bound by the load-time graph optimizer (stdops/optimize) in place of chains of nodes:

- :func:`conv_act`: Conv (+ its bias) -> activation -> + residual -> activation, one step;
- :func:`matmul_act`: X @ W (+ bias per column) -> activation -> + residual -> activation (MatMul + Add,
  Gemm with a bias row, the MLPs' and transformers' projections);
- :func:`squeeze_excite`: X * act2(Conv1x1(act1(Conv1x1(GlobalAveragePool(X))))), the squeeze-and-excitation
  block of MobileNetV3 and EfficientNet, one step; :func:`squeeze_excite_conv`: that block and the 1 x 1
  convolution reading it (with its activation and residual), the block's product folded into the weights;
- :func:`softmax_rows`, :func:`layer_norm_rows`: Softmax and LayerNormalization (its statistics unread) over
  the last axis, one compiled pass per row.

Each kernel's plain form IS the chain: the Conv / MatMul kernel, then the activation kernels and the Add kernel
(``Activation.reference``), so that a fused node computes what its nodes computed. The step its ``prepare`` builds
(constant weights, float32) computes the same formulas in fewer memory passes: the convolution paths apply the bias
(and a clip, in their last copy) themselves, and the rest runs in one compiled pass over the output (ops/_fast.py
``epilogue``: bias, activation, residual, activation per cache chunk) when the ``fast`` extra is installed, else
through the kernels in place. The compiled pass's Sigmoid and SiLU use a polynomial exp (within ~4 ulp of the exact
sigmoid; the kernels use scipy's expit) and ops/_fast_se.py's gate sums its small products in an order of its own:
float32 rounding apart, the values of the nodes it replaces.

Activations (``activation``/``post_activation`` with their ``*_params``): ``relu``, ``clip`` (lo, hi; NaN
or absent = unbounded), ``leaky_relu`` (alpha), ``sigmoid``, ``silu`` (x * sigmoid(x)), ``hard_sigmoid``
(alpha, beta), ``hard_swish`` (alpha, beta: x * hard_sigmoid(x); ONNX's HardSwish is alpha 1/6, beta 0.5),
``gelu`` (c, divides: x * ((erf(u) + 1) * 0.5), u = x / c when divides else x * c: the erf GELU as
exporters write it, c = sqrt(2) or 1 / sqrt(2)).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import KernelError
from . import _blas, _fast, _fast_epilogue, _fast_gemm, _fast_pointwise, _fast_se
from ._blas import matmul
from ._registry import op
from .activation import hard_sigmoid, leaky_relu, relu, sigmoid, softmax
from .conv import ConvRoutes, conv, prepare_conv_weight
from .elementwise import add, clip, div, erf, mul
from .linalg import mat_mul
from .norm import layer_normalization
from .pool import global_average_pool

_F = _fast_epilogue  # the compiled epilogue and its activation codes


@dataclasses.dataclass(frozen=True)
class Activation:
    """One activation of a fused step: its name, parameters, reference (the kernels) and compiled code."""

    name: str
    params: tuple[float, ...] = ()

    def __post_init__(self):
        if self.name not in _ARITY:
            raise KernelError(f"unknown fused activation {self.name!r} (known: {', '.join(_ARITY)})")
        lo, hi = _ARITY[self.name]
        if not lo <= len(self.params) <= hi:
            raise KernelError(f"activation {self.name!r} takes {lo} to {hi} parameters, got {list(self.params)}")

    def reference(self, y: np.ndarray) -> np.ndarray:
        """The activation through its kernels (what the unfused nodes compute)."""
        n, p = self.name, self.params
        if n == "relu":
            return relu(y)
        if n == "clip":
            t = y.dtype.type
            lo = None if len(p) < 1 or math.isnan(p[0]) else np.array(t(p[0]))
            hi = None if len(p) < 2 or math.isnan(p[1]) else np.array(t(p[1]))
            return clip(y, lo, hi)
        if n == "leaky_relu":
            return leaky_relu(y, alpha=p[0] if p else 0.01)
        if n == "sigmoid":
            return sigmoid(y)
        if n == "silu":
            return mul(y, sigmoid(y))
        if n == "gelu":  # the exported graph's chain: x * ((erf(x / c) + 1) * 0.5), or erf(x * c)
            t = y.dtype.type
            one, half = np.array(t(1)), np.array(t(0.5))
            c, divides = (p + (math.sqrt(2), 1.0)[len(p) :])[:2]
            u = div(y, np.array(t(c))) if divides else mul(y, np.array(t(c)))
            return mul(y, mul(add(erf(u), one), half))
        a, b = (p + (0.2, 0.5)[len(p) :]) if n == "hard_sigmoid" else (p + (1 / 6, 0.5)[len(p) :])
        hs = hard_sigmoid(y, alpha=a, beta=b)
        return hs if n == "hard_sigmoid" else mul(y, hs)

    def code(self) -> tuple[int, float, float]:
        """(ACT_* code, p, q) for the compiled epilogue."""
        n, p = self.name, self.params
        if n == "relu":
            return _F.ACT_CLIP, 0.0, math.inf
        if n == "clip":
            lo = -math.inf if len(p) < 1 or math.isnan(p[0]) else p[0]
            hi = math.inf if len(p) < 2 or math.isnan(p[1]) else p[1]
            return _F.ACT_CLIP, lo, hi
        if n == "leaky_relu":
            return _F.ACT_LEAKY, (p[0] if p else 0.01), 0.0
        if n == "sigmoid":
            return _F.ACT_SIGMOID, 0.0, 0.0
        if n == "silu":
            return _F.ACT_SILU, 0.0, 0.0
        if n == "gelu":
            c, divides = (p + (math.sqrt(2), 1.0)[len(p) :])[:2]
            return _F.ACT_GELU, float(np.float32(c)), float(divides)
        a, b = (p + (0.2, 0.5)[len(p) :]) if n == "hard_sigmoid" else (p + (1 / 6, 0.5)[len(p) :])
        # the kernels compute t(alpha) * x + t(beta) in float32
        a, b = float(np.float32(a)), float(np.float32(b))
        return (_F.ACT_HARD_SIGMOID if n == "hard_sigmoid" else _F.ACT_HARD_SWISH), a, b

    def clip_bounds(self) -> tuple[float | None, float | None] | None:
        """(lo, hi) when the activation is a clip the convolution paths apply in their last copy."""
        if self.name == "relu":
            return (0.0, None)
        if self.name == "clip":
            p = self.params
            lo = None if len(p) < 1 or math.isnan(p[0]) else p[0]
            hi = None if len(p) < 2 or math.isnan(p[1]) else p[1]
            return (lo, hi)
        return None


_ARITY = {
    "relu": (0, 0),
    "clip": (0, 2),
    "leaky_relu": (0, 1),
    "sigmoid": (0, 0),
    "silu": (0, 0),
    "hard_sigmoid": (0, 2),
    "hard_swish": (0, 2),
    "gelu": (0, 2),
}
_NONE = (0, 0.0, 0.0)
_CODES: dict = {}


def _code(act: Activation | None) -> tuple[int, float, float]:
    if act is None:
        return _NONE
    c = _CODES.get(act)
    if c is None:
        c = _CODES[act] = act.code()
    return c


def activation_of(name: str, params: Sequence[float] = ()) -> Activation | None:
    """The Activation for an attribute pair ("" is none)."""
    if not name:
        return None
    return Activation(str(name), tuple(float(v) for v in params))


def _finish_reference(y, act: Activation | None, residual, post: Activation | None):
    if act is not None:
        y = act.reference(y)
    if residual is not None:
        y = add(y, residual)
    if post is not None:
        y = post.reference(y)
    return y


def _compiled_ok(y: np.ndarray, residual) -> bool:
    return (
        _fast.enabled()
        and y.dtype == np.float32
        and y.flags.c_contiguous
        and (residual is None or (residual.shape == y.shape and residual.dtype == np.float32))
    )


def _epilogue(y, bias, act, residual, post, bias_axis):
    """y (a fresh array of the step) -> act(y + bias) + residual -> post: compiled in one pass when it can,
    else through the kernels (y's own memory reused where the kernels allow)."""
    if _compiled_ok(y, residual):
        r = None if residual is None else np.ascontiguousarray(residual)
        return _fast_epilogue.epilogue(y, bias, _code(act), r, _code(post), bias_axis)
    if bias is not None:
        y += bias.reshape((-1,) + (1,) * (y.ndim - 2)) if bias_axis == 1 else bias
    return _finish_reference(y, act, residual, post)


# --------------------------------------------------------------------------- Conv


_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def prepare_conv_act(constants: tuple, attrs: dict) -> Callable | None:
    """Load time, W a constant float tensor: its layouts (and, with ``expected_spatial``, the Winograd
    transform of that size) computed once; a constant B of W's dtype rides in the GEMM or in the epilogue."""
    w = constants[1] if len(constants) > 1 else None
    if not isinstance(w, np.ndarray) or w.dtype.kind != "f" or w.ndim < 3:
        return None
    geo = {a: attrs[a] for a in _CONV_ATTRS if a != "group"}
    spatial = tuple(attrs.get("expected_spatial") or ()) or None
    try:
        cw = prepare_conv_weight(
            w, attrs["group"], geo["strides"], geo["dilations"], spatial, geo["pads"], geo["auto_pad"]
        )
        act = activation_of(attrs["activation"], attrs["activation_params"])
        post = activation_of(attrs["post_activation"], attrs["post_activation_params"])
    except KernelError:
        return None
    b0 = constants[2] if len(constants) > 2 else None
    if isinstance(b0, np.ndarray) and b0.dtype == w.dtype:
        cw.fold_bias(b0)
    wdt = w.dtype
    inline_clip = act.clip_bounds() if act is not None else None
    routes = ConvRoutes(cw, geo, inline_clip)  # the path per input shape, its arguments bound
    act_code, post_code = _code(act), _code(post)  # looked up once (hashing an Activation: ~0.5 us)

    def conv_act_prepared(x, w_, b=None, residual=None):
        if x.dtype != wdt or wdt != np.float32:
            return conv_act(x, w_, b, residual, **attrs)
        # the epilogue takes the bias when it runs anyway and the path would add it in a pass of its own
        defer = _fast.enabled() and (act is not None or residual is not None or post is not None)
        y, done = routes(x, b, defer)
        rest_act = None if inline_clip is not None and done == "bias+clip" else act
        bias = None if done or b is None else np.asarray(b, wdt)
        if bias is None and rest_act is None and residual is None and post is None:
            return y
        if _compiled_ok(y, residual):
            r = None if residual is None else np.ascontiguousarray(residual)
            return _fast_epilogue.epilogue(y, bias, act_code if rest_act is not None else _NONE, r, post_code, 1)
        return _epilogue(y, bias, rest_act, residual, post, 1)

    return conv_act_prepared


@op(kernels=(conv, relu, clip, leaky_relu, sigmoid, hard_sigmoid, mul, add, div, erf), prepare=prepare_conv_act)
def conv_act(
    x,
    w,
    b=None,
    residual=None,
    /,
    *,
    auto_pad="NOTSET",
    dilations=(),
    group=1,
    kernel_shape=(),
    pads=(),
    strides=(),
    activation="",
    activation_params=(),
    post_activation="",
    post_activation_params=(),
    expected_spatial=(),
):
    """Y = post(act(Conv(X, W, B)) + residual): ONNX Conv (attributes and shapes as onnx:Conv), then the
    activation, the residual added (broadcasting as Add), and the post-activation (see the module doc for
    the activation names). ``expected_spatial``: X's spatial size when known at load (a preparation hint; any
    size runs). Y has X's dtype."""
    y = conv(
        x,
        w,
        b,
        auto_pad=auto_pad,
        dilations=dilations,
        group=group,
        kernel_shape=kernel_shape,
        pads=pads,
        strides=strides,
    )
    return _finish_reference(
        y,
        activation_of(activation, activation_params),
        residual,
        activation_of(post_activation, post_activation_params),
    )


# --------------------------------------------------------------------------- MatMul


def prepare_matmul_act(constants: tuple, attrs: dict) -> Callable | None:
    """Load time, W a constant 2-D float32 matrix and the bias (if any) a constant of its columns: W kept
    contiguous; the step is one GEMM on X's rows and the epilogue."""
    w = constants[1] if len(constants) > 1 else None
    if not isinstance(w, np.ndarray) or w.dtype != np.float32 or w.ndim != 2:
        return None
    bias = constants[2] if len(constants) > 2 else None
    if bias is not None and (not isinstance(bias, np.ndarray) or bias.dtype != w.dtype or bias.size != w.shape[1]):
        return None
    try:
        act = activation_of(attrs["activation"], attrs["activation_params"])
        post = activation_of(attrs["post_activation"], attrs["post_activation_params"])
    except KernelError:
        return None
    wc = _blas.prepare_right(w)  # contiguous, or column panels (ops/_blas.py: faster for its shapes)
    wt = w if _fast_gemm.takes(w) else None  # ops/_fast_gemm.py's operand
    bc = None if bias is None else np.ascontiguousarray(bias.reshape(-1))
    K, Nc = wc.shape
    # the compiled epilogue with its arguments converted here, not per call (a step cost ~17 us above its GEMM)
    epi = _fast_epilogue.gemm_epilogue(Nc, bc, _code(act), _code(post))

    def matmul_act_prepared(x, w_, b=None, residual=None):
        x = np.asarray(x)
        if x.dtype != np.float32 or x.ndim < 1 or x.shape[-1] != K:
            return matmul_act(x, w_, b, residual, **attrs)
        x2 = x.reshape(-1, K)
        y = _fast_gemm.gemm(x2, wt) if wt is not None and _fast.enabled() else _blas.matmul_panels(x2, wc)
        out_shape = x.shape[:-1] + (Nc,)
        if (
            epi is not None
            and (b is None) == (bc is None)
            and (residual is None or (type(residual) is np.ndarray and residual.dtype == np.float32))
            and (residual is None or residual.shape == out_shape)
            and _fast.enabled()
        ):
            epi(y, residual)
            return y.reshape(out_shape)
        if residual is not None and np.shape(residual) != out_shape:
            y = y.reshape(out_shape)
            if bc is not None:
                y += bc
            return _finish_reference(y, act, residual, post)
        r = None if residual is None else np.asarray(residual).reshape(y.shape)
        y = _epilogue(y, bc if b is not None else None, act, r, post, -1)
        return y.reshape(out_shape)

    return matmul_act_prepared


@op(kernels=(mat_mul, add, relu, clip, leaky_relu, sigmoid, hard_sigmoid, mul, div, erf), prepare=prepare_matmul_act)
def matmul_act(
    x,
    w,
    bias=None,
    residual=None,
    /,
    *,
    activation="",
    activation_params=(),
    post_activation="",
    post_activation_params=(),
):
    """Y = post(act(X @ W + bias) + residual): ONNX MatMul of X (..., K) and W (K, N), the bias (N,) added
    to every row, then the activation, the residual added (broadcasting as Add) and the post-activation (see
    the module doc). Y (..., N), X's dtype."""
    y = mat_mul(x, w)
    if bias is not None:
        y = add(y, bias)
    return _finish_reference(
        y,
        activation_of(activation, activation_params),
        residual,
        activation_of(post_activation, post_activation_params),
    )


# --------------------------------------------------------------------------- squeeze and excitation


def _se_gate_prepared(
    constants: tuple, attrs: dict, a1: str = "activation", a2: str = "post_activation"
) -> tuple[Callable, int] | None:
    """Load time: (gate, C), gate(x) -> E (N, C) the excitation of a squeeze-and-excitation block, when both
    weights are constant float32 (C1, C, 1, 1) and (C, C1, 1, 1) and the biases constant or absent; else None.
    The pooling kernel's GEMV, then two small GEMMs on the (N, C) means with their activations (ops/_fast_se.py:
    one compiled call, MobileNetV3-small 2.4% faster, EfficientNet-B0 1.2%, ab_flag)."""
    w1, b1, w2, b2 = (constants[k] if len(constants) > k else None for k in range(1, 5))
    if not (isinstance(w1, np.ndarray) and isinstance(w2, np.ndarray)):
        return None
    if not all(w.dtype == np.float32 and w.ndim == 4 for w in (w1, w2)):
        return None
    C1, C = w1.shape[:2]
    if w1.shape[2:] != (1, 1) or w2.shape != (C, C1, 1, 1):
        return None
    for bias, n in ((b1, C1), (b2, C)):
        if bias is not None and not (isinstance(bias, np.ndarray) and bias.dtype == np.float32 and bias.shape == (n,)):
            return None
    try:
        act1, act2 = (activation_of(attrs[a], attrs[a + "_params"]) for a in (a1, a2))
    except KernelError:
        return None
    w1t = np.ascontiguousarray(w1.reshape(C1, C).T)
    w2t = np.ascontiguousarray(w2.reshape(C, C1).T)
    fast = _fast_se.gate_call(w1t, b1, _code(act1), w2t, b2, _code(act2))
    means: dict = {}  # spatial size -> the 1 / P vector of the pooling GEMV (as the GlobalAveragePool kernel's)

    def gate(x):
        N, P = x.shape[0], x.shape[2] * x.shape[3]
        v = means.get(P)
        if v is None:
            v = means[P] = np.full(P, 1.0 / P, np.float32)
        pooled = np.ascontiguousarray(x).reshape(N * C, P) @ v  # the pooling kernel's formula, without its checks
        if fast is not None and _fast.enabled():
            return fast(pooled.reshape(N, C))
        h = _epilogue(matmul(pooled.reshape(N, C), w1t), b1, act1, None, None, -1)
        return _epilogue(matmul(h, w2t), b2, act2, None, None, -1)

    return gate, C


def _se_fits(x, C: int) -> bool:
    return isinstance(x, np.ndarray) and x.dtype == np.float32 and x.ndim == 4 and x.shape[1] == C and 0 not in x.shape


def prepare_squeeze_excite(constants: tuple, attrs: dict) -> Callable | None:
    """Load time, both weights constant (see ``_se_gate_prepared``): the step is the gate and one broadcast
    product with X, where the nodes run a convolution each on 1 x 1 maps (four steps of fixed overhead)."""
    prepared = _se_gate_prepared(constants, attrs)
    if prepared is None:
        return None
    gate, C = prepared

    def squeeze_excite_prepared(x, w1_, b1_=None, w2_=None, b2_=None):
        if not _se_fits(x, C):
            return squeeze_excite(x, w1_, b1_, w2_, b2_, **attrs)
        return np.multiply(x, gate(x).reshape(x.shape[0], C, 1, 1))

    return squeeze_excite_prepared


def _se_reference(x, w1, b1, w2, b2, act1: Activation | None, act2: Activation | None):
    if w2 is None:
        raise KernelError("a squeeze-and-excitation step needs its second weight W2")
    h = _finish_reference(conv(global_average_pool(x), w1, b1), act1, None, None)
    return mul(x, _finish_reference(conv(h, w2, b2), act2, None, None))


@op(
    kernels=(global_average_pool, conv, relu, clip, leaky_relu, sigmoid, hard_sigmoid, mul, add, div, erf),
    prepare=prepare_squeeze_excite,
)
def squeeze_excite(
    x,
    w1,
    b1=None,
    w2=None,
    b2=None,
    /,
    *,
    activation="",
    activation_params=(),
    post_activation="",
    post_activation_params=(),
):
    """Y = X * post(Conv(act(Conv(GlobalAveragePool(X), W1, B1)), W2, B2)): onnx:GlobalAveragePool, two
    onnx:Conv with 1 x 1 kernels (group 1, stride 1, no padding) and their activations (see the module doc), and
    onnx:Mul of X by the result (broadcasting as Mul). Y has X's dtype."""
    act1, act2 = activation_of(activation, activation_params), activation_of(post_activation, post_activation_params)
    return _se_reference(x, w1, b1, w2, b2, act1, act2)


def prepare_squeeze_excite_conv(constants: tuple, attrs: dict) -> Callable | None:
    """Load time, the block's weights constant (see ``_se_gate_prepared``) and W3 a constant float32 (M, C, 1, 1):
    W3 (X * E) is computed as (W3 E) X per image, one GEMM on X itself: the scaled block output is never written
    (one pass over X instead of three), then the compiled epilogue for B3, the activation and the residual. Where
    W3 is larger than X (M > H W) X * E is the cheaper product and is computed instead."""
    prepared = _se_gate_prepared(constants, attrs, "se_activation", "se_gate")
    w3 = constants[5] if len(constants) > 5 else None
    b3 = constants[6] if len(constants) > 6 else None
    if prepared is None or not (isinstance(w3, np.ndarray) and w3.dtype == np.float32 and w3.ndim == 4):
        return None
    gate, C = prepared
    M = w3.shape[0]
    b3_ok = b3 is None or (isinstance(b3, np.ndarray) and b3.dtype == np.float32 and b3.shape == (M,))
    if w3.shape[1:] != (C, 1, 1) or not b3_ok:
        return None
    try:
        act = activation_of(attrs["activation"], attrs["activation_params"])
        post = activation_of(attrs["post_activation"], attrs["post_activation_params"])
    except KernelError:
        return None
    w3m = np.ascontiguousarray(w3.reshape(M, C))
    # where the 1 x 1 convolution's compiled kernel takes the map (ops/_fast_pointwise.py: few input channels, or
    # small maps), W3 (X E) by that kernel, its bias and activation in the tile, as the unfused convolution computes
    # it: faster than either product by OpenBLAS there (MobileNetV3-small, AMD Zen 4, 1 thread: 576 @ 7 x 7 -> 96
    # 0.275 -> 0.204 ms a step; 288 -> 96 0.159 -> 0.109; `stdops profile` medians)
    plain_1x1 = dict(auto_pad="NOTSET", dilations=(1, 1), group=1, kernel_shape=(1, 1), pads=(0,) * 4, strides=(1, 1))
    conv_attrs = {k: attrs[k] for k in ("activation", "activation_params", "post_activation", "post_activation_params")}
    conv_step = prepare_conv_act((None, w3, b3), plain_1x1 | conv_attrs)

    def squeeze_excite_conv_prepared(x, w1_, b1_=None, w2_=None, b2_=None, w3_=None, b3_=None, residual=None):
        if not _se_fits(x, C):
            return squeeze_excite_conv(x, w1_, b1_, w2_, b2_, w3_, b3_, residual, **attrs)
        N, _, H, W = x.shape
        if residual is not None and np.shape(residual) != (N, M, H, W):
            return squeeze_excite_conv(x, w1_, b1_, w2_, b2_, w3_, b3_, residual, **attrs)
        e = gate(x)
        if conv_step is not None and _fast.enabled() and _fast_pointwise.applies(M, C, H * W):
            return conv_step(np.multiply(x, e.reshape(N, C, 1, 1)), w3, b3, residual)
        y = np.empty((N, M, H, W), np.float32)
        if M <= H * W:  # W3 E, the smaller product (the block's output is never written)
            for n in range(N):
                matmul(w3m * e[n], x[n].reshape(C, H * W), out=y[n].reshape(M, H * W))
        else:  # small maps of many channels (EfficientNet's 7 x 7 x 1152 -> 320): X E is the smaller one
            xs = np.multiply(x, e.reshape(N, C, 1, 1))
            for n in range(N):
                matmul(w3m, xs[n].reshape(C, H * W), out=y[n].reshape(M, H * W))
        if b3 is None and act is None and residual is None and post is None:
            return y
        return _epilogue(y, b3, act, residual, post, 1)

    return squeeze_excite_conv_prepared


@op(
    kernels=(global_average_pool, conv, relu, clip, leaky_relu, sigmoid, hard_sigmoid, mul, add, div, erf),
    prepare=prepare_squeeze_excite_conv,
)
def squeeze_excite_conv(
    x,
    w1,
    b1=None,
    w2=None,
    b2=None,
    w3=None,
    b3=None,
    residual=None,
    /,
    *,
    se_activation="",
    se_activation_params=(),
    se_gate="",
    se_gate_params=(),
    activation="",
    activation_params=(),
    post_activation="",
    post_activation_params=(),
):
    """Y = post(act(Conv(S, W3, B3)) + residual), S = X * gate(Conv(se_act(Conv(GlobalAveragePool(X), W1, B1)),
    W2, B2)): the squeeze-and-excitation block (:func:`squeeze_excite`, its activations ``se_activation`` and
    ``se_gate``) and the 1 x 1 convolution reading its output (group 1, stride 1, no padding) with that
    convolution's activation, residual and post-activation (:func:`conv_act`). Y has X's dtype."""
    if w3 is None:
        raise KernelError("squeeze_excite_conv needs the convolution's weight W3")
    se = _se_reference(
        x, w1, b1, w2, b2, activation_of(se_activation, se_activation_params), activation_of(se_gate, se_gate_params)
    )
    y = conv(se, w3, b3)
    act, post = activation_of(activation, activation_params), activation_of(post_activation, post_activation_params)
    return _finish_reference(y, act, residual, post)


# --------------------------------------------------------------------------- row-wise steps


def _last_axis(axis, x) -> bool:
    return int(axis) in (-1, x.ndim - 1)


def prepare_softmax_rows(constants: tuple, attrs: dict) -> Callable:
    axis, scale = attrs["axis"], float(attrs["scale"])
    if not (math.isfinite(scale) and scale > 0.0):
        raise KernelError(f"softmax_rows: scale must be a positive finite number, got {scale}")

    def softmax_rows_prepared(x):
        if not (_fast.enabled() and isinstance(x, np.ndarray) and x.dtype == np.float32 and x.ndim >= 1):
            return softmax_rows(x, axis=axis, scale=scale)
        if not _last_axis(axis, x) or x.shape[-1] == 0:
            return softmax_rows(x, axis=axis, scale=scale)
        return _fast_epilogue.softmax_rows(x, scale)

    return softmax_rows_prepared


@op(kernels=(softmax, mul), prepare=prepare_softmax_rows)
def softmax_rows(x, /, *, axis=-1, scale=1.0):
    """Y = Softmax(scale * X) along ``axis`` (onnx:Softmax-13; scale > 0, the attention scale the optimizer
    moved here from a Mul or Div): the optimizer's step for a Softmax, compiled in one pass per row over the
    last axis (the exp of the epilogue, the scale applied to X - max), the Mul and Softmax kernels otherwise."""
    if scale != 1.0:
        x = mul(x, np.array(scale, np.asarray(x).dtype))
    return softmax(x, axis=axis)


def prepare_layer_norm_rows(constants: tuple, attrs: dict) -> Callable | None:
    scale, bias = (constants[k] if len(constants) > k else None for k in (1, 2))
    axis, eps = attrs["axis"], float(attrs["epsilon"])
    if attrs["stash_type"] != 1 or not isinstance(scale, np.ndarray) or scale.dtype != np.float32:
        return None
    if bias is not None and (not isinstance(bias, np.ndarray) or bias.dtype != np.float32):
        return None
    L = scale.size
    sc = np.ascontiguousarray(scale.reshape(-1))
    bc = None if bias is None else np.ascontiguousarray(bias.reshape(-1))
    shapes_ok = scale.shape[-1:] == (L,) and (bias is None or bias.size == L and bias.shape[-1:] == (L,))

    def layer_norm_rows_prepared(x, s_=None, b_=None):
        if not (_fast.enabled() and shapes_ok and isinstance(x, np.ndarray) and x.dtype == np.float32):
            return layer_norm_rows(x, s_, b_, **attrs)
        if x.ndim < max(1, scale.ndim, 0 if bias is None else bias.ndim) or not _last_axis(axis, x) or x.shape[-1] != L:
            return layer_norm_rows(x, s_, b_, **attrs)
        return _fast_epilogue.layer_norm_rows(x, sc, bc, eps)

    return layer_norm_rows_prepared


@op(kernels=(layer_normalization,), prepare=prepare_layer_norm_rows)
def layer_norm_rows(x, scale, bias=None, /, *, axis=-1, epsilon=1e-5, stash_type=1):
    """Y of LayerNormalization (onnx:LayerNormalization-17) without its Mean and InvStdDev outputs: the
    optimizer's step for a LayerNormalization whose statistics nobody reads, compiled per row over the last
    axis (two-pass statistics) for float32 with constant Scale and B of that axis, the kernel otherwise."""
    return layer_normalization(x, scale, bias, axis=axis, epsilon=epsilon, stash_type=stash_type)[0]
