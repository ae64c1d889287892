"""Signal kernels against explicit DFT matrices, scipy windows and a loop-based mel filterbank."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal

from stdops.errors import KernelError
from stdops.ops import signal as G

RNG = np.random.default_rng(3)


def _dft_matrix(n_out, n_in, inverse=False):
    k = np.arange(n_out)[:, None]
    n = np.arange(n_in)[None, :]
    sign = 1.0 if inverse else -1.0
    return np.exp(sign * 2j * np.pi * k * n / max(n_in, n_out))


def _ref_dft(z, axis, n, inverse=False, keep=None):
    """z complex; pad/truncate to n along axis, then y = M @ x (optionally keep the first bins)."""
    z = np.moveaxis(z, axis, -1)
    zz = np.zeros(z.shape[:-1] + (n,), complex)
    m = min(n, z.shape[-1])
    zz[..., :m] = z[..., :m]
    k = np.arange(n)[:, None] * np.arange(n)[None, :]
    mat = np.exp((1 if inverse else -1) * 2j * np.pi * k / n)
    y = zz @ mat.T
    if inverse:
        y = y / n
    if keep is not None:
        y = y[..., :keep]
    return np.moveaxis(y, -1, axis)


def _pack(z):
    return np.stack([z.real, z.imag], -1)


@pytest.mark.parametrize(
    "shape, axis", [((2, 8), 1), ((2, 8), -2), ((3, 5, 4), 1), ((3, 5, 4), 2), ((3, 5, 4), -3), ((6,), 0)]
)
@pytest.mark.parametrize("complex_in", [False, True])
@pytest.mark.parametrize("inverse", [0, 1])
@pytest.mark.parametrize("length", [None, 3, 10])
def test_dft(shape, axis, complex_in, inverse, length):
    z = RNG.standard_normal(shape) + (1j * RNG.standard_normal(shape) if complex_in else 0)
    x = (_pack(z) if complex_in else z.real[..., None]).astype(np.float32)
    ax_n = axis % (len(shape) + 1)
    n = shape[ax_n] if length is None else length
    got = G.dft(x, None if length is None else np.int64(length), np.int64(axis), inverse=inverse)
    want = _pack(_ref_dft(z, ax_n, n, inverse=bool(inverse)))
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [None, 8, 7, 5])
def test_rfft_irfft(n):
    z = RNG.standard_normal((2, 8, 3))
    x = z[..., None].astype(np.float64)
    got = G.dft(x, None if n is None else np.int32(n), np.int64(1), onesided=1)
    nn = 8 if n is None else n
    want = _pack(_ref_dft(z, 1, nn, keep=nn // 2 + 1))
    assert got.dtype == np.float64 and got.shape == (2, nn // 2 + 1, 3, 2)
    np.testing.assert_allclose(got, want, atol=1e-10)
    # IRFFT of the one-sided spectrum recovers the (truncated/padded) signal
    back = G.dft(got, np.int64(nn), np.int64(1), onesided=1, inverse=1)
    padded = np.zeros((2, nn, 3))
    padded[:, : min(nn, 8)] = z[:, :nn]
    assert back.shape == (2, nn, 3, 1)
    np.testing.assert_allclose(back[..., 0], padded, atol=1e-10)
    if n is None:  # default IRFFT length 2 * (bins - 1)
        assert G.dft(got, None, np.int64(1), onesided=1, inverse=1).shape == (2, 8, 3, 1)


def test_dft_defaults_and_complex_onesided():
    z = RNG.standard_normal((2, 6)) + 1j * RNG.standard_normal((2, 6))
    x = _pack(z).astype(np.float32)
    np.testing.assert_allclose(G.dft(x), _pack(_ref_dft(z, 1, 6)), rtol=1e-4, atol=1e-4)  # axis -2
    got = G.dft(x, onesided=1)
    np.testing.assert_allclose(got, _pack(_ref_dft(z, 1, 6, keep=4)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "x, args, kw",
    [
        (np.zeros((2, 4, 3), np.float32), (), {}),  # last axis 3
        (np.zeros((2, 4, 1), np.float32), (None, np.int64(2)), {}),  # axis = complex axis
        (np.zeros((2, 4, 1), np.float32), (None, np.int64(-1)), {}),
        (np.zeros((2, 4, 1), np.float32), (np.int64(0),), {}),  # dft_length 0
        (np.zeros((2, 4, 1), np.float32), (), {"onesided": 1, "inverse": 1}),  # IRFFT of a real input
        (np.zeros((2, 4, 1), np.int32), (), {}),
    ],
)
def test_dft_errors(x, args, kw):
    with pytest.raises(KernelError):
        G.dft(x, *args, **kw)


@pytest.mark.parametrize("onesided", [0, 1])
@pytest.mark.parametrize("step, fl, use_window", [(4, 8, True), (3, 8, False), (1, 5, True), (5, None, True)])
def test_stft(onesided, step, fl, use_window):
    sig = RNG.standard_normal((2, 32))
    win = scipy.signal.get_window("hann", fl or 10) if use_window else None
    flen = fl if fl is not None else len(win)
    got = G.stft(
        sig[..., None].astype(np.float32),
        np.int64(step),
        None if win is None else win.astype(np.float32),
        None if fl is None else np.int64(fl),
        onesided=onesided,
    )
    frames = (32 - flen) // step + 1
    bins = flen // 2 + 1 if onesided else flen
    want = np.zeros((2, frames, bins), complex)
    w = np.ones(flen) if win is None else win
    mat = _dft_matrix(flen, flen)[:bins]
    for f in range(frames):
        want[:, f] = (sig[:, f * step : f * step + flen] * w) @ mat.T
    assert got.shape == (2, frames, bins, 2) and got.dtype == np.float32
    np.testing.assert_allclose(got, _pack(want), rtol=1e-4, atol=1e-4)


def test_stft_complex_and_default_length():
    z = RNG.standard_normal((1, 16)) + 1j * RNG.standard_normal((1, 16))
    got = G.stft(_pack(z).astype(np.float32), np.int64(4), onesided=0)  # frame_length = signal length
    assert got.shape == (1, 1, 16, 2)
    np.testing.assert_allclose(got[0, 0], _pack(_ref_dft(z[0], 0, 16)), rtol=1e-4, atol=1e-4)
    with pytest.raises(KernelError):
        G.stft(_pack(z).astype(np.float32), np.int64(4), None, np.int64(8), onesided=1)
    with pytest.raises(KernelError):
        G.stft(np.zeros((1, 16, 1), np.float32), np.int64(4), np.ones(5, np.float32), np.int64(8))
    with pytest.raises(KernelError):
        G.stft(np.zeros((1, 16, 1), np.float32), np.int64(0))
    with pytest.raises(KernelError):
        G.stft(np.zeros((16, 1), np.float32), np.int64(1))


@pytest.mark.parametrize(
    "fn, name", [(G.hann_window, "hann"), (G.hamming_window, "hamming"), (G.blackman_window, "blackman")]
)
@pytest.mark.parametrize("size", [1, 2, 10, 33])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_windows(fn, name, size, periodic, dtype):
    got = fn(np.int64(size), periodic=periodic, output_datatype=dtype)
    if size == 1:  # scipy special-cases M=1; ONNX's formula gives w[0] = a0 + a1 + ... when periodic
        want = np.array([{"hann": 0.0, "hamming": 4 / 46, "blackman": 0.0}[name] if periodic else 1.0])
    elif name == "hamming":  # ONNX's Hamming uses alpha = 25/46 (scipy's general_hamming)
        want = scipy.signal.windows.general_hamming(size, 25 / 46, sym=not periodic)
    else:
        want = scipy.signal.get_window(name, size, fftbins=bool(periodic))
    assert got.dtype == dtype and got.shape == (size,)
    np.testing.assert_allclose(got, want.astype(dtype), rtol=1e-6, atol=1e-6)


def test_window_defaults_and_errors():
    assert G.hann_window(np.int32(4)).dtype == np.float32
    assert G.hann_window(np.int64(0)).shape == (0,)
    with pytest.raises(KernelError):
        G.hann_window(np.int64(-1))
    with pytest.raises(KernelError):
        G.hann_window(np.float32(4))


def _ref_mel(nmel, nfft, sr, lo, hi):
    mel = lambda f: 2595 * np.log10(1 + f / 700)  # noqa: E731
    hz = lambda m: 700 * (10 ** (m / 2595) - 1)  # noqa: E731
    step = (mel(hi) - mel(lo)) / (nmel + 2)
    edges = [int(np.floor((nfft + 1) * hz(mel(lo) + i * step) / sr)) for i in range(nmel + 2)]
    out = np.zeros((nfft // 2 + 1, nmel))
    for m in range(nmel):
        a, c, b = edges[m], edges[m + 1], edges[m + 2]
        if c == a:
            out[c, m] = 1
        for k in range(a, c + 1):
            if c > a:
                out[k, m] = (k - a) / (c - a)
        for k in range(c, b):
            out[k, m] = (b - k) / (b - c)
    return out


@pytest.mark.parametrize(
    "nmel, nfft, sr, lo, hi",
    [
        (8, 16, 8192, 0.0, 4096.0),
        (20, 512, 16000, 20.0, 8000.0),
        (40, 400, 16000, 0.0, 7600.0),
        (5, 64, 100, 1.0, 50.0),
    ],
)
def test_mel_weight_matrix(nmel, nfft, sr, lo, hi):
    got = G.mel_weight_matrix(np.int64(nmel), np.int64(nfft), np.int32(sr), np.float32(lo), np.float32(hi))
    want = _ref_mel(nmel, nfft, sr, np.float32(lo), np.float32(hi))
    assert got.dtype == np.float32 and got.shape == (nfft // 2 + 1, nmel)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert (
        G.mel_weight_matrix(
            np.int64(nmel), np.int64(nfft), np.int32(sr), np.float32(lo), np.float32(hi), output_datatype=np.float64
        ).dtype
        == np.float64
    )


def test_mel_errors():
    with pytest.raises(KernelError):
        G.mel_weight_matrix(np.int64(0), np.int64(16), np.int64(8000), np.float32(0), np.float32(100))
    with pytest.raises(KernelError):
        G.mel_weight_matrix(np.int64(4), np.int64(16), np.int64(8000), np.float32(100), np.float32(10))


def test_dft_bfloat16_and_float16():
    import ml_dtypes

    z = RNG.standard_normal((2, 8))
    for dt in (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16)):
        got = G.dft(z[..., None].astype(dt), None, np.int64(1))
        assert got.dtype == dt
        np.testing.assert_allclose(got.astype(np.float32), _pack(_ref_dft(z, 1, 8)), rtol=5e-2, atol=5e-2)


# --------------------------------------------------------------------------- through the ONNX front end (adapters)
def test_onnx_dft17_axis_attribute_and_window_dtype():
    from onnx import TensorProto as TP
    from onnx import helper as h

    import stdops.onnx

    z = RNG.standard_normal((2, 8, 3))
    x = z[..., None].astype(np.float32)
    for opset, kw, inputs, axis in [(17, {}, ["x"], 1), (19, {"axis": 2}, ["x"], 2), (20, {}, ["x", "", "ax"], 1)]:
        g = h.make_graph(
            [h.make_node("DFT", inputs, ["y"], **kw)],
            "g",
            [h.make_tensor_value_info("x", TP.FLOAT, None), h.make_tensor_value_info("ax", TP.INT64, [])],
            [h.make_tensor_value_info("y", TP.FLOAT, None)],
        )
        m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
        (y,) = stdops.onnx.run(m, [x, np.array(axis, np.int64)])
        np.testing.assert_allclose(y, _pack(_ref_dft(z, axis, z.shape[axis])), rtol=1e-4, atol=1e-4)
    g = h.make_graph(
        [h.make_node("HannWindow", ["n"], ["w"], output_datatype=TP.DOUBLE, periodic=0)],
        "g",
        [h.make_tensor_value_info("n", TP.INT64, [])],
        [h.make_tensor_value_info("w", TP.DOUBLE, None)],
    )
    (w,) = stdops.onnx.run(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), [np.array(7, np.int64)])
    assert w.dtype == np.float64
    np.testing.assert_allclose(w, scipy.signal.get_window("hann", 7, fftbins=False), atol=1e-12)
