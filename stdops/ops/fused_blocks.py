"""Fused steps over two or three convolutions, bound by the load-time graph optimizers (stdops/optimize/fuse.py,
stdops/ncnn/fuse.py):

- :func:`expand_depthwise`: the 1 x 1 expansion of an inverted-residual block (MobileNetV2/V3, EfficientNet,
  MnasNet) and the depthwise convolution that alone reads it, each with its activation (ops/fused.py's names);
- :func:`expand_depthwise_project`: that, and the 1 x 1 projection that alone reads it, with its activation, the
  residual and the post-activation (MobileNetV2's whole block; ops/_fast_blocks.py).

The plain form IS the chain: two (three) ``conv_act`` steps (ops/fused.py). The prepared step (constant float32 weights,
the compiled extra on AVX-512) computes the same values, bit for bit, a block of expanded channels at a time so that
the expanded tensor never leaves the cache (ops/_fast_pointwise.py ``pointwise_depthwise``); any shape or machine
those kernels do not take runs the two prepared ``conv_act`` steps. Each expanded value is summed in the order of
the kernel conv.py picks for the expansion alone (on small maps ops/_fast_conv.py's direct kernel: bias last), and
the projection likewise, so that a block gives its steps' bits. On maps of 28 x 28 and below with a 3 x 3 depthwise and
clip-like activations the whole block runs in channels-last order instead (ops/_fast_blockcl.py: 4% of MobileNetV2's
time): its sums are its own kernels', the steps' values within float32 rounding (tests/ops/test_fast_blockcl.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import KernelError
from . import _fast, _fast_blockcl, _fast_blocks, _fast_dwtiles, _fast_pointwise, conv
from ._fast_epilogue import ACT_NONE
from ._registry import op
from ._window import geometry, ints
from .fused import activation_of, conv_act, prepare_conv_act


def _expand_attrs(attrs: dict) -> dict:
    return {"activation": attrs["activation"], "activation_params": tuple(attrs["activation_params"])}


def _depthwise_attrs(attrs: dict) -> dict:
    return {
        "group": attrs["dw_group"],
        "kernel_shape": tuple(attrs["dw_kernel_shape"]),
        "strides": tuple(attrs["dw_strides"]),
        "pads": tuple(attrs["dw_pads"]),
        "dilations": tuple(attrs["dw_dilations"]),
        "auto_pad": attrs["dw_auto_pad"],
        "activation": attrs["dw_activation"],
        "activation_params": tuple(attrs["dw_activation_params"]),
    }


def _kernel_act(name: str, params) -> tuple[tuple[bool, float, float], tuple[int, float, float]]:
    """(clip, activation) of an activation as the compiled kernels take them from conv.py (ops/fused.py's
    conv_act): a clip-like one as their clip, any other as its epilogue code."""
    act = activation_of(name, params)
    bounds = None if act is None else act.clip_bounds()
    none = (0, 0.0, 0.0)
    if act is not None and bounds is None:
        return (False, 0.0, 0.0), act.code()
    if bounds is None or bounds == (None, None):
        return (False, 0.0, 0.0), none
    f = np.float32
    lo, hi = bounds
    return (True, float(f(-np.inf if lo is None else lo)), float(f(np.inf if hi is None else hi))), none


def prepare_expand_depthwise(constants: tuple, attrs: dict) -> Callable | None:
    """Load time, both weights constant float tensors: the two ``conv_act`` steps prepared, and for float32 on
    AVX-512 the weights packed for the compiled block."""
    consts = tuple(constants) + (None,) * (5 - len(constants))
    _, w1, w2, b1, b2 = consts
    try:
        a1, a2 = _expand_attrs(attrs), _depthwise_attrs(attrs)
        expand = prepare_conv_act((None, w1, b1), _conv_act_defaults() | a1)
        dw = prepare_conv_act((None, w2, b2), _conv_act_defaults() | a2)
    except (KernelError, KeyError):
        return None
    if expand is None or dw is None:
        return None

    def chain(x, w1_, w2_, b1_=None, b2_=None):
        return dw(expand(x, w1_, b1_), w2_, b2_)

    compiled = (
        _fast_pointwise.TILES_OK
        and _fast_dwtiles.TILES_OK  # the depthwise tiles (AVX-512 or AVX2)
        and isinstance(w1, np.ndarray)
        and w1.dtype == np.float32
        and w1.ndim == 4
        and w1.shape[2:] == (1, 1)
        and isinstance(w2, np.ndarray)
        and w2.dtype == np.float32
        and w2.ndim == 4
        and w2.shape[:2] == (w1.shape[0], 1)
        and int(a2["group"]) == w1.shape[0]
        and all(b is None or (isinstance(b, np.ndarray) and b.dtype == np.float32) for b in (b1, b2))
    )
    if not compiled:
        return chain
    M, K = w1.shape[:2]
    kernel = tuple(int(k) for k in w2.shape[2:])
    strides, dilations = ints(a2["strides"], 2, 1, "strides"), ints(a2["dilations"], 2, 1, "dilations")
    if not _fast_dwtiles.tiles_apply(np.dtype(np.float32), 1, kernel, strides, dilations):
        return chain
    wp = _fast_pointwise.pack_weight(np.ascontiguousarray(w1.reshape(M, K)))
    wd = np.ascontiguousarray(w2.reshape((M,) + kernel))
    (clip1, act1), (clip2, act2) = (
        _kernel_act(a1["activation"], a1["activation_params"]),
        _kernel_act(a2["activation"], a2["activation_params"]),
    )
    block = _fast_pointwise.PointwiseDepthwise(wp, M, b1, clip1, wd, b2, strides, clip2, act1, act2)
    known: dict = {}  # input shape -> (begin, out) of the depthwise, or None (the chain decides)

    def expand_depthwise_prepared(x, w1_, w2_, b1_=None, b2_=None):
        if (
            not _fast.enabled()
            or w1_ is not w1
            or w2_ is not w2
            or b1_ is not b1
            or b2_ is not b2
            or not isinstance(x, np.ndarray)
            or x.dtype != np.float32
        ):
            return chain(x, w1_, w2_, b1_, b2_)
        plan = plan_of(x.shape)
        if plan is None:
            return chain(x, w1_, w2_, b1_, b2_)
        return block(x if x.flags.c_contiguous else np.ascontiguousarray(x), *plan)

    def plan_of(shape: tuple) -> tuple | None:
        plan = known.get(shape, False)
        if plan is False:
            plan = _plan(shape)
            if len(known) > 16:
                known.clear()
            known[shape] = plan
        return plan

    def _plan(shape: tuple) -> tuple | None:
        """(begin, out, bias_last) of the depthwise on this input, the expansion summed in the order of the kernel
        conv.py picks for it alone (ops/_fast_pointwise.py's, or on small maps ops/_fast_conv.py's direct one);
        None: neither (the chain runs)."""
        if len(shape) != 4 or shape[1] != K:
            return None
        P = shape[2] * shape[3]
        if _fast_pointwise.applies(M, K, P):
            bias_last = False
        elif conv.direct_packed(_expansion_weight(), 2, tuple(shape[2:]), (1, 1), (1, 1)):
            bias_last = True
        else:
            return None
        try:
            geo = geometry(shape[2:], kernel, strides, dilations, a2["pads"], a2["auto_pad"])
        except KernelError:
            return None
        return tuple(geo.begin), tuple(geo.out), bias_last

    cw1: list = []

    def _expansion_weight():
        if not cw1:
            cw1.append(conv.prepare_conv_weight(w1))
        return cw1[0]

    # what a step over the block and the convolution after it (prepare_expand_depthwise_project) builds on
    kernel_acts = ((clip1, act1), (clip2, act2), strides, dilations)  # for the channels-last block
    expand_depthwise_prepared.compiled = (block, plan_of, (w1, w2, b1, b2), kernel_acts)  # type: ignore[attr-defined]
    return expand_depthwise_prepared


def _conv_act_defaults() -> dict:
    return {
        "auto_pad": "NOTSET",
        "dilations": (),
        "group": 1,
        "kernel_shape": (),
        "pads": (),
        "strides": (),
        "activation": "",
        "activation_params": (),
        "post_activation": "",
        "post_activation_params": (),
        "expected_spatial": (),
    }


@op(kernels=(conv_act,), prepare=prepare_expand_depthwise)
def expand_depthwise(
    x,
    w1,
    w2,
    b1=None,
    b2=None,
    /,
    *,
    activation="",
    activation_params=(),
    dw_group=1,
    dw_kernel_shape=(),
    dw_strides=(),
    dw_pads=(),
    dw_dilations=(),
    dw_auto_pad="NOTSET",
    dw_activation="",
    dw_activation_params=(),
):
    """Y = conv_act(conv_act(X, W1, B1, activation), W2, B2, group=dw_group, ..., dw_activation): a 1 x 1
    convolution (group 1, stride 1, unpadded) with its activation, then the convolution (attributes ``dw_*`` as
    onnx:Conv's) of its result with its activation (activations as ops/fused.py's). Y has X's dtype."""
    e = conv_act(x, w1, b1, activation=activation, activation_params=activation_params)
    return conv_act(
        e,
        w2,
        b2,
        group=dw_group,
        kernel_shape=dw_kernel_shape,
        strides=dw_strides,
        pads=dw_pads,
        dilations=dw_dilations,
        auto_pad=dw_auto_pad,
        activation=dw_activation,
        activation_params=dw_activation_params,
    )


# --------------------------------------------------------------------------- + the 1 x 1 projection


_PROJECT_ATTRS = ("pw_activation", "pw_activation_params", "post_activation", "post_activation_params")


def prepare_expand_depthwise_project(constants: tuple, attrs: dict) -> Callable | None:
    """Load time, the three weights constant float tensors: the ``expand_depthwise`` step and the projection's
    ``conv_act`` step prepared, and for float32 on AVX-512 the projection packed for the compiled block
    (ops/_fast_blocks.py), which then runs where both steps would take the compiled kernels it reproduces."""
    consts = tuple(constants) + (None,) * (8 - len(constants))
    _, w1, w2, w3, b1, b2, b3, _ = consts
    ed_attrs = {k: v for k, v in attrs.items() if k not in _PROJECT_ATTRS}
    p_attrs = {
        "activation": attrs["pw_activation"],
        "activation_params": tuple(attrs["pw_activation_params"]),
        "post_activation": attrs["post_activation"],
        "post_activation_params": tuple(attrs["post_activation_params"]),
    }
    try:
        ed = prepare_expand_depthwise((None, w1, w2, b1, b2), ed_attrs)
        proj = prepare_conv_act((None, w3, b3), _conv_act_defaults() | p_attrs)
    except (KernelError, KeyError):
        return None
    if ed is None or proj is None:
        return None

    def chain(x, w1_, w2_, w3_, b1_=None, b2_=None, b3_=None, residual=None):
        return proj(ed(x, w1_, w2_, b1_, b2_), w3_, b3_, residual)

    compiled = getattr(ed, "compiled", None)
    if (
        compiled is None
        or not isinstance(w3, np.ndarray)
        or w3.dtype != np.float32
        or w3.ndim != 4
        or w3.shape[1:] != (w1.shape[0], 1, 1)
        or not (b3 is None or (isinstance(b3, np.ndarray) and b3.dtype == np.float32 and b3.shape == w3.shape[:1]))
    ):
        return chain
    expand, plan_of, (w1c, w2c, b1c, b2c), kernel_acts = compiled
    M3, C = w3.shape[:2]
    clip3, act3 = _kernel_act(p_attrs["activation"], p_attrs["activation_params"])
    post = activation_of(p_attrs["post_activation"], p_attrs["post_activation_params"])
    run = _fast_blocks.InvertedResidual(
        expand,
        _fast_pointwise.pack_weight(np.ascontiguousarray(w3.reshape(M3, C))),
        M3,
        b3,
        clip3,
        act3,
        None if post is None else post.code(),
    )
    cl = _channels_last(w1, w2, w3, b1c, b2c, b3, kernel_acts, clip3, act3, post)
    cw3 = conv.prepare_conv_weight(w3)
    orders: dict = {}  # the depthwise's output map -> whether the projection sums bias last, or None (the chain)

    def order_of(out: tuple) -> bool | None:
        if out not in orders:
            Q = out[0] * out[1]
            if len(orders) > 16:
                orders.clear()
            if conv.pointwise_compiled(cw3, 2, Q):
                orders[out] = False
            elif conv.direct_packed(cw3, 2, out, (1, 1), (1, 1)):
                orders[out] = True
            else:
                orders[out] = None
        return orders[out]

    def expand_depthwise_project_prepared(x, w1_, w2_, w3_, b1_=None, b2_=None, b3_=None, residual=None):
        if (
            not _fast.enabled()
            or w1_ is not w1c
            or w2_ is not w2c
            or w3_ is not w3
            or b1_ is not b1c
            or b2_ is not b2c
            or b3_ is not b3
            or not isinstance(x, np.ndarray)
            or x.dtype != np.float32
        ):
            return chain(x, w1_, w2_, w3_, b1_, b2_, b3_, residual)
        plan = plan_of(x.shape)
        last3 = None if plan is None else order_of(plan[1])
        if plan is None or last3 is None:
            return chain(x, w1_, w2_, w3_, b1_, b2_, b3_, residual)
        begin, out, last1 = plan
        if residual is not None:
            if (
                type(residual) is not np.ndarray
                or residual.dtype != np.float32
                or residual.shape != (x.shape[0], M3) + tuple(out)
            ):
                return chain(x, w1_, w2_, w3_, b1_, b2_, b3_, residual)  # broadcasting: the steps decide
            residual = np.ascontiguousarray(residual)
        xc = x if x.flags.c_contiguous else np.ascontiguousarray(x)
        if cl is not None and cl.takes(x.shape, out):
            return cl(xc, begin, out, residual)
        return run(xc, begin, out, last1, last3, residual)

    return expand_depthwise_project_prepared


def _channels_last(w1, w2, w3, b1, b2, b3, kernel_acts, clip3, act3, post) -> _fast_blockcl.ChannelsLastBlock | None:
    """The block in channels-last order (ops/_fast_blockcl.py) where it applies: a 3 x 3 undilated depthwise at
    stride 1 or 2, clip-like activations (or none) and no post-activation (``kernel_acts``: the expansion's and the
    depthwise's (clip, activation) and the depthwise's strides and dilations, as prepare_expand_depthwise made
    them)."""
    (clip1, act1), (clip2, act2), strides, dilations = kernel_acts
    if (
        not _fast_blockcl.USE
        or _fast_blockcl.numba is None
        or w2.shape[2:] != (3, 3)
        or strides not in ((1, 1), (2, 2))
        or dilations != (1, 1)
        or post is not None
        or any(a[0] != ACT_NONE for a in (act1, act2, act3))
    ):
        return None
    E, M = w1.shape[0], w3.shape[0]
    return _fast_blockcl.ChannelsLastBlock(
        w1.reshape(E, -1), b1, clip1, w2.reshape(E, 3, 3), b2, clip2, strides[0], w3.reshape(M, E), b3, clip3
    )


@op(kernels=(expand_depthwise, conv_act), prepare=prepare_expand_depthwise_project)
def expand_depthwise_project(
    x,
    w1,
    w2,
    w3,
    b1=None,
    b2=None,
    b3=None,
    residual=None,
    /,
    *,
    activation="",
    activation_params=(),
    dw_group=1,
    dw_kernel_shape=(),
    dw_strides=(),
    dw_pads=(),
    dw_dilations=(),
    dw_auto_pad="NOTSET",
    dw_activation="",
    dw_activation_params=(),
    pw_activation="",
    pw_activation_params=(),
    post_activation="",
    post_activation_params=(),
):
    """Y = conv_act(expand_depthwise(X, W1, W2, B1, B2, ...), W3, B3, residual, activation=pw_activation,
    post_activation=post_activation): an inverted-residual block, its expansion and depthwise convolution as
    :func:`expand_depthwise` takes them, then the 1 x 1 convolution (group 1, stride 1, unpadded) of their result
    by W3 (+ B3) with its activation, + the residual (broadcasting as Add), then the post-activation. Y has X's
    dtype."""
    e = expand_depthwise(
        x,
        w1,
        w2,
        b1,
        b2,
        activation=activation,
        activation_params=activation_params,
        dw_group=dw_group,
        dw_kernel_shape=dw_kernel_shape,
        dw_strides=dw_strides,
        dw_pads=dw_pads,
        dw_dilations=dw_dilations,
        dw_auto_pad=dw_auto_pad,
        dw_activation=dw_activation,
        dw_activation_params=dw_activation_params,
    )
    return conv_act(
        e,
        w3,
        b3,
        residual,
        activation=pw_activation,
        activation_params=pw_activation_params,
        post_activation=post_activation,
        post_activation_params=post_activation_params,
    )
