"""Fused steps over two convolutions, bound by the load-time graph optimizer (stdops/optimize/fuse.py):

- :func:`expand_depthwise`: the 1 x 1 expansion of an inverted-residual block (MobileNetV2/V3, EfficientNet,
  MnasNet) and the depthwise convolution that alone reads it, each with its activation (ops/fused.py's names).

The plain form IS the chain: two ``conv_act`` steps (ops/fused.py). The prepared step (constant float32 weights,
the compiled extra on AVX-512) computes the same values, bit for bit, a block of expanded channels at a time so that
the expanded tensor never leaves the cache (ops/_fast_pointwise.py ``pointwise_depthwise``); any shape or machine
those kernels do not take runs the two prepared ``conv_act`` steps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import KernelError
from . import _fast, _fast_dwtiles, _fast_pointwise
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
        _fast_pointwise.PACKED_OK
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
        plan = known.get(x.shape, False)
        if plan is False:
            plan = None
            if x.ndim == 4 and x.shape[1] == K and _fast_pointwise.applies(M, K, x.shape[2] * x.shape[3]):
                try:
                    geo = geometry(x.shape[2:], kernel, strides, dilations, a2["pads"], a2["auto_pad"])
                    plan = (tuple(geo.begin), tuple(geo.out))
                except KernelError:
                    plan = None
            if len(known) > 16:
                known.clear()
            known[x.shape] = plan
        if plan is None:
            return chain(x, w1_, w2_, b1_, b2_)
        xc = np.ascontiguousarray(x)
        return _fast_pointwise.pointwise_depthwise(
            xc, wp, M, b1, clip1, wd, b2, strides, plan[0], plan[1], clip2, act1, act2
        )

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
