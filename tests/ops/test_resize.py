"""Resize / Upsample / GridSample / AffineGrid kernels against scalar formulas written here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stdops.errors import KernelError, ResourceLimitError
from stdops.limits import set_max_elements
from stdops.ops.grid_sample import affine_grid, grid_sample
from stdops.ops.resize import resize

RNG = np.random.default_rng(0)


# --------------------------------------------------------------------------- scalar references


def x_original(mode, y, in_len, out_len, scale, length, roi=(0.0, 1.0)):
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        off = in_len / 2 * (1 - out_len / length)
        return off + (y + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (y + 0.5) / scale - 0.5 if out_len > 1 else 0.0
    if mode == "align_corners":
        return 0.0 if length == 1 else y * (in_len - 1) / (length - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        s, e = roi
        if length > 1:
            return s * (in_len - 1) + y * (e - s) * (in_len - 1) / (length - 1)
        return 0.5 * (s + e) * (in_len - 1)
    raise AssertionError(mode)


def keys(d, a):
    d = abs(d)
    if d <= 1:
        return (a + 2) * d**3 - (a + 3) * d**2 + 1
    if d < 2:
        return a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a
    return 0.0


def resample_1d(
    v,
    out_len,
    scale,
    length,
    *,
    mode,
    ctm,
    nearest_mode="round_prefer_floor",
    a=-0.75,
    exclude=False,
    antialias=False,
    roi=(0.0, 1.0),
    extrap=0.0,
):
    n = len(v)
    out = np.empty(out_len)
    for y in range(out_len):
        x = x_original(ctm, y, n, out_len, scale, length, roi)
        if ctm == "tf_crop_and_resize" and (x < 0 or x > n - 1):
            out[y] = extrap
            continue
        if mode == "nearest":
            f = math.floor(x)
            frac = x - f
            i = {
                "round_prefer_floor": f + (frac > 0.5),
                "round_prefer_ceil": f + (frac >= 0.5),
                "floor": f,
                "ceil": math.ceil(x),
            }[nearest_mode]
            out[y] = v[min(max(int(i), 0), n - 1)]
            continue
        s = min(scale, 1.0) if antialias else 1.0
        radius = 1 if mode == "linear" else 2
        taps = range(math.floor(x) - 8 * radius, math.floor(x) + 8 * radius + 2)
        taps = [t for t in taps if abs(t - x) * s < radius]
        w = [max(0.0, 1 - abs(t - x) * s) if mode == "linear" else keys((t - x) * s, a) for t in taps]
        if antialias:
            tot = sum(w)
            w = [wi / tot for wi in w]
        if exclude:
            w = [wi if 0 <= t < n else 0.0 for wi, t in zip(w, taps)]
            tot = sum(w)
            w = [wi / tot for wi in w]
        out[y] = sum(wi * v[min(max(t, 0), n - 1)] for wi, t in zip(w, taps))
    return out


def resize_ref(x, out_shape, scales, lengths, **kw):
    y = x.astype(np.float64)
    rois = kw.pop("rois", None)
    for d in range(x.ndim):
        if out_shape[d] == x.shape[d] and scales[d] == 1 and rois is None:
            continue
        roi = rois[d] if rois is not None else (0.0, 1.0)
        y = np.apply_along_axis(resample_1d, d, y, out_shape[d], scales[d], lengths[d], roi=roi, **kw)
    return y


# --------------------------------------------------------------------------- Resize

CTMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]
SCALES = [(1, 1, 2.0, 0.5), (1, 1, 0.6, 1.7), (1, 1, 3.0, 1.3)]


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("sc", SCALES)
def test_resize_scales(ctm, mode, sc):
    x = RNG.standard_normal((1, 2, 5, 7)).astype(np.float32)
    got = resize(x, None, np.array(sc, np.float32), mode=mode, coordinate_transformation_mode=ctm)
    s64 = [float(np.float32(v)) for v in sc]
    lengths = [n * s for n, s in zip(x.shape, s64)]
    out_shape = [int(math.floor(v)) for v in lengths]
    want = resize_ref(x, out_shape, s64, lengths, mode=mode, ctm=ctm)
    assert got.dtype == np.float32 and got.shape == tuple(out_shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("ctm", ["half_pixel", "asymmetric", "align_corners"])
def test_resize_sizes_nearest_modes(nearest_mode, ctm):
    x = np.arange(2 * 4 * 6, dtype=np.float32).reshape(2, 4, 6)
    sizes = np.array([2, 7, 9], np.int64)
    got = resize(x, None, None, sizes, mode="nearest", nearest_mode=nearest_mode, coordinate_transformation_mode=ctm)
    out = [2, 7, 9]
    scales = [o / i for o, i in zip(out, x.shape)]
    want = resize_ref(x, out, scales, [float(o) for o in out], mode="nearest", ctm=ctm, nearest_mode=nearest_mode)
    np.testing.assert_array_equal(got, want)


def test_resize_nearest_upsample_is_repeat():
    x = RNG.standard_normal((1, 3, 4, 5)).astype(np.float32)
    got = resize(
        x,
        None,
        np.array([1, 1, 2, 3], np.float32),
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    np.testing.assert_array_equal(got, x.repeat(2, axis=2).repeat(3, axis=3))


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("sc", [(1, 1, 0.5, 0.34), (1, 1, 0.8, 1.5)])
def test_resize_antialias(mode, sc):
    x = RNG.standard_normal((1, 1, 12, 9)).astype(np.float32)
    got = resize(x, None, np.array(sc, np.float32), mode=mode, antialias=1)
    s64 = [float(np.float32(v)) for v in sc]
    lengths = [n * s for n, s in zip(x.shape, s64)]
    out = [int(math.floor(v)) for v in lengths]
    want = resize_ref(x, out, s64, lengths, mode=mode, ctm="half_pixel", antialias=True)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("a", [-0.5, -0.75])
@pytest.mark.parametrize("exclude", [0, 1])
def test_resize_cubic_coeff_and_exclude_outside(a, exclude):
    x = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    got = resize(x, None, np.array([1, 1, 2, 0.75], np.float32), mode="cubic", cubic_coeff_a=a, exclude_outside=exclude)
    want = resize_ref(
        x, [1, 1, 8, 3], [1, 1, 2.0, 0.75], [1, 1, 8.0, 3.0], mode="cubic", ctm="half_pixel", a=a, exclude=bool(exclude)
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize(mode):
    x = RNG.standard_normal((1, 1, 6, 5)).astype(np.float32)
    roi = np.array([0, 0, 0.1, -0.2, 1, 1, 0.9, 1.3], np.float32)
    got = resize(
        x,
        roi,
        None,
        np.array([1, 1, 4, 7], np.int64),
        mode=mode,
        coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=9.5,
    )
    r64 = roi.astype(np.float64)
    rois = [(r64[d], r64[4 + d]) for d in range(4)]
    want = resize_ref(
        x,
        [1, 1, 4, 7],
        [1, 1, 4 / 6, 7 / 5],
        [1.0, 1.0, 4.0, 7.0],
        mode=mode,
        ctm="tf_crop_and_resize",
        rois=rois,
        extrap=9.5,
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert (got == np.float32(9.5)).any()


def test_resize_axes_negative_and_order():
    x = RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)
    a = resize(x, None, np.array([2.0, 0.5], np.float32), axes=(2, 3), mode="linear")
    b = resize(x, None, np.array([0.5, 2.0], np.float32), axes=[-1, -2], mode="linear")
    c = resize(x, None, np.array([1, 1, 2.0, 0.5], np.float32), mode="linear")
    # the axes are resampled in another order for b: float32 rounding differs by a few ulps of the inputs
    np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(b, c, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("policy,want_hw", [("stretch", (3, 14)), ("not_larger", (3, 4)), ("not_smaller", (10, 14))])
def test_resize_keep_aspect_ratio(policy, want_hw):
    x = RNG.standard_normal((1, 1, 5, 7)).astype(np.float32)
    got = resize(
        x, None, None, np.array([3, 14], np.int64), axes=(2, 3), mode="linear", keep_aspect_ratio_policy=policy
    )
    assert got.shape == (1, 1, *want_hw)
    if policy != "stretch":
        s = {"not_larger": 3 / 5, "not_smaller": 2.0}[policy]
        want = resize_ref(x, [1, 1, *want_hw], [1, 1, s, s], [1, 1, 5 * s, 7 * s], mode="linear", ctm="half_pixel")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.float16, np.float64, np.int32])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_dtypes(dtype, mode):
    x = (RNG.standard_normal((1, 1, 4, 4)) * 60).astype(dtype)
    got = resize(x, None, np.array([1, 1, 1.5, 2], np.float32), mode=mode)
    assert got.dtype == dtype and got.shape == (1, 1, 6, 8)
    want = resize_ref(x, [1, 1, 6, 8], [1, 1, 1.5, 2.0], [1, 1, 6.0, 8.0], mode=mode, ctm="half_pixel")
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        want = np.clip(np.rint(want), info.min, info.max)
        np.testing.assert_allclose(got.astype(np.float64), want, atol=1)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_resize_identity_copies_and_keeps_input():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    keep = x.copy()
    y = resize(x, None, np.array([1, 1], np.float32), mode="linear")
    np.testing.assert_array_equal(y, x)
    y[...] = 0
    np.testing.assert_array_equal(x, keep)


def test_resize_empty_scales_count_as_absent():
    x = RNG.standard_normal((1, 1, 2, 2)).astype(np.float32)
    y = resize(x, np.array([], np.float32), np.array([], np.float32), np.array([1, 1, 4, 4], np.int64))
    assert y.shape == (1, 1, 4, 4)


@pytest.mark.parametrize(
    "kwargs,inputs",
    [
        ({}, (None, np.array([1, 1, 2, 2], np.float32), np.array([1, 1, 4, 4], np.int64))),
        ({}, (None, None, None)),
        ({"mode": "bogus"}, (None, np.array([1, 1, 2, 2], np.float32), None)),
        ({"coordinate_transformation_mode": "bogus"}, (None, np.array([1, 1, 2, 2], np.float32), None)),
        ({"nearest_mode": "bogus"}, (None, np.array([1, 1, 2, 2], np.float32), None)),
        ({"keep_aspect_ratio_policy": "bogus"}, (None, None, np.array([1, 1, 4, 4], np.int64))),
        ({}, (None, np.array([2, 2], np.float32), None)),
        ({"axes": (2, 2)}, (None, np.array([2, 2], np.float32), None)),
        ({"axes": (4,)}, (None, np.array([2], np.float32), None)),
        ({}, (None, np.array([1, 1, -2, 2], np.float32), None)),
        ({}, (None, None, np.array([1, 1, -4, 4], np.int64))),
        ({"coordinate_transformation_mode": "tf_crop_and_resize"}, (None, np.array([1, 1, 2, 2], np.float32), None)),
        (
            {"coordinate_transformation_mode": "tf_crop_and_resize"},
            (np.array([0, 1], np.float32), np.array([1, 1, 2, 2], np.float32), None),
        ),
    ],
)
def test_resize_bad_inputs(kwargs, inputs):
    x = np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(KernelError):
        resize(x, *inputs, **kwargs)


def test_resize_output_limit():
    old = set_max_elements(1000)
    try:
        with pytest.raises(ResourceLimitError):
            resize(np.zeros((1, 1, 2, 2), np.float32), None, None, np.array([1, 1, 100, 100], np.int64))
    finally:
        set_max_elements(old)


# --------------------------------------------------------------------------- ONNX adapters


def _run_onnx(op, opset, attrs, feeds, out_dtype):
    import onnx
    from onnx import helper

    import stdops.onnx

    names = [n for n, _ in feeds]
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in feeds]
    node = helper.make_node(op, names, ["y"], **attrs)
    out = helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(out_dtype)), None)
    model = helper.make_model(
        helper.make_graph([node], "g", ins, [out]), opset_imports=[helper.make_opsetid("", opset)]
    )
    model.ir_version = 8
    assert isinstance(model, onnx.ModelProto)
    return stdops.onnx.run(model, [a for _, a in feeds])[0]


def test_upsample7_scales_attribute():
    x = RNG.standard_normal((1, 1, 2, 3)).astype(np.float32)
    y = _run_onnx("Upsample", 7, {"mode": "nearest", "scales": [1.0, 1.0, 2.0, 3.0]}, [("x", x)], np.float32)
    np.testing.assert_array_equal(y, x.repeat(2, 2).repeat(3, 3))


@pytest.mark.parametrize("op,opset", [("Upsample", 9), ("Resize", 10)])
def test_upsample9_resize10_asymmetric(op, opset):
    x = RNG.standard_normal((1, 1, 3, 4)).astype(np.float32)
    sc = np.array([1, 1, 2, 1.5], np.float32)
    y = _run_onnx(op, opset, {"mode": "linear"}, [("x", x), ("scales", sc)], np.float32)
    want = resize_ref(x, [1, 1, 6, 6], [1, 1, 2.0, 1.5], [1, 1, 6.0, 6.0], mode="linear", ctm="asymmetric")
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    y = _run_onnx(op, opset, {"mode": "nearest"}, [("x", x), ("scales", sc)], np.float32)
    want = resize_ref(
        x, [1, 1, 6, 6], [1, 1, 2.0, 1.5], [1, 1, 6.0, 6.0], mode="nearest", ctm="asymmetric", nearest_mode="floor"
    )
    np.testing.assert_array_equal(y, want)


def test_resize10_downsample_nearest_ceil():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    sc = np.array([1, 1, 0.6, 0.6], np.float32)
    y = _run_onnx("Resize", 10, {"mode": "nearest"}, [("x", x), ("scales", sc)], np.float32)
    idx = np.minimum(np.ceil(np.arange(2) / np.float64(np.float32(0.6))), 3).astype(int)
    np.testing.assert_array_equal(y[0, 0], x[0, 0][np.ix_(idx, idx)])


# --------------------------------------------------------------------------- GridSample


def _denorm(g, L, ac):
    return (g + 1) / 2 * (L - 1) if ac else ((g + 1) * L - 1) / 2


def _reflect(v, lo, hi):
    rng = hi - lo
    while v < lo or v > hi:
        v = 2 * lo - v if v < lo else 2 * hi - v
    return v if rng > 0 else lo


def _pixel(img, idx, pad, ac):
    H, W = img.shape
    i, j = idx
    if pad == "zeros":
        return img[i, j] if 0 <= i < H and 0 <= j < W else 0.0
    if pad == "border":
        return img[min(max(i, 0), H - 1), min(max(j, 0), W - 1)]
    lo_h, hi_h = (0, H - 1) if ac else (-0.5, H - 0.5)
    lo_w, hi_w = (0, W - 1) if ac else (-0.5, W - 0.5)
    i2 = int(_reflect(i, lo_h, hi_h))
    j2 = int(_reflect(j, lo_w, hi_w))
    return img[min(max(i2, 0), H - 1), min(max(j2, 0), W - 1)]


def grid_sample_ref(x, grid, mode, pad, ac):
    N, C, H, W = x.shape
    _, Ho, Wo, _ = grid.shape
    out = np.zeros((N, C, Ho, Wo))
    for n in range(N):
        for c in range(C):
            img = x[n, c].astype(np.float64)
            for a in range(Ho):
                for b in range(Wo):
                    gx, gy = grid[n, a, b].astype(np.float64)
                    px, py = _denorm(gx, W, ac), _denorm(gy, H, ac)
                    lo = (0.0, 0.0) if ac else (-0.5, -0.5)
                    hi = (H - 1.0, W - 1.0) if ac else (H - 0.5, W - 0.5)
                    if mode == "nearest":
                        py, px = np.rint(py), np.rint(px)
                    if pad == "border" and mode != "cubic":
                        py = min(max(py, 0), H - 1) if not lo[0] <= py <= hi[0] else py
                        px = min(max(px, 0), W - 1) if not lo[1] <= px <= hi[1] else px
                    elif pad == "reflection":
                        py, px = _reflect(py, lo[0], hi[0]), _reflect(px, lo[1], hi[1])
                    if mode == "nearest":
                        out[n, c, a, b] = _pixel(img, (int(py), int(px)), pad, ac)
                        continue
                    y0, x0 = math.floor(py), math.floor(px)
                    ty, tx = py - y0, px - x0
                    if mode == "linear":
                        wy = {y0: 1 - ty, y0 + 1: ty}
                        wx = {x0: 1 - tx, x0 + 1: tx}
                    else:
                        wy = {y0 + k: keys(ty - k, -0.75) for k in (-1, 0, 1, 2)}
                        wx = {x0 + k: keys(tx - k, -0.75) for k in (-1, 0, 1, 2)}
                    out[n, c, a, b] = sum(wy[i] * wx[j] * _pixel(img, (i, j), pad, ac) for i in wy for j in wx)
    return out


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic", "bilinear", "bicubic"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("ac", [0, 1])
def test_grid_sample_2d(mode, pad, ac):
    x = RNG.standard_normal((1, 2, 4, 5)).astype(np.float32)
    grid = RNG.uniform(-1.7, 1.7, (1, 3, 4, 2)).astype(np.float32)
    grid[0, 0, :, 0] = [-1, 1, 0.25, -0.5]
    got = grid_sample(x, grid, mode=mode, padding_mode=pad, align_corners=ac)
    kind = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
    want = grid_sample_ref(x, grid, kind, pad, ac)
    assert got.dtype == np.float32 and got.shape == (1, 2, 3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_identity_grid(mode):
    x = (
        RNG.standard_normal((2, 3, 4, 5, 6)).astype(np.float32)
        if mode != "cubic"
        else RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    )
    r = x.ndim - 2
    theta = np.zeros((2, r, r + 1), np.float32)
    theta[:, :, :r] = np.eye(r)
    grid = affine_grid(theta, np.array(x.shape, np.int64), align_corners=1)
    y = grid_sample(x, grid, mode=mode, align_corners=1)
    np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-5)


def test_grid_sample_1d_and_float64():
    x = RNG.standard_normal((1, 1, 5))
    g = np.array([[[-1.0], [0.0], [0.5], [1.0]]])
    y = grid_sample(x, g, align_corners=1)
    want = np.interp(_denorm(g[0, :, 0], 5, 1), np.arange(5), x[0, 0])
    assert y.dtype == np.float64
    np.testing.assert_allclose(y[0, 0], want, rtol=1e-12)


@pytest.mark.parametrize(
    "x_shape,g_shape,kw",
    [
        ((1, 1, 4, 4), (1, 2, 2, 3), {}),
        ((1, 1, 4, 4), (2, 2, 2, 2), {}),
        ((1, 4), (1, 2, 2), {}),
        ((1, 1, 4, 4), (1, 2, 2, 2), {"mode": "area"}),
        ((1, 1, 4, 4), (1, 2, 2, 2), {"padding_mode": "wrap"}),
    ],
)
def test_grid_sample_bad_inputs(x_shape, g_shape, kw):
    with pytest.raises(KernelError):
        grid_sample(np.zeros(x_shape, np.float32), np.zeros(g_shape, np.float32), **kw)


# --------------------------------------------------------------------------- AffineGrid


@pytest.mark.parametrize("ac", [0, 1])
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 3, 4, 2)])
def test_affine_grid(ac, size):
    r = len(size) - 2
    theta = RNG.standard_normal((2, r, r + 1)).astype(np.float32)
    got = affine_grid(theta, np.array(size, np.int64), align_corners=ac)
    sp = size[2:]

    def base(L):
        if ac:
            return np.linspace(-1, 1, L) if L > 1 else np.array([-1.0])
        return (np.arange(L) * 2 + 1) / L - 1

    axes = [base(L) for L in sp]
    want = np.zeros((2, *sp, r))
    for n in range(2):
        for idx in np.ndindex(*sp):
            p = [axes[d][idx[d]] for d in reversed(range(r))] + [1.0]
            want[(n, *idx)] = theta[n].astype(np.float64) @ np.array(p)
    assert got.dtype == np.float32 and got.shape == (2, *sp, r)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_affine_grid_bad():
    with pytest.raises(KernelError):
        affine_grid(np.zeros((1, 2, 3), np.float32), np.array([1, 1, 2], np.int64))
    with pytest.raises(KernelError):
        affine_grid(np.zeros((1, 3, 4), np.float32), np.array([1, 1, 2, 2], np.int64))


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_tap_path_matches_matrix_path(mode, monkeypatch):
    import stdops.ops.resize as R

    x = RNG.standard_normal((2, 9, 11)).astype(np.float32)
    sc = np.array([1, 0.4, 1.7], np.float32)
    a = resize(x, None, sc, mode=mode, antialias=1)
    monkeypatch.setattr(R, "_MATRIX_LIMIT", 0)
    b = resize(x, None, sc, mode=mode, antialias=1)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_resize_nan_stays_local():
    x = np.zeros((1, 1, 8, 8), np.float32)
    x[0, 0, 4, 4] = np.nan
    y = resize(x, None, np.array([1, 1, 2, 2], np.float32), mode="linear")
    assert np.isnan(y).sum() == 16  # only the 4x4 outputs whose taps read the NaN
