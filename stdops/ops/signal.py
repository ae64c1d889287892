"""Signal kernels: DFT, STFT, Hann/Hamming/Blackman windows, MelWeightMatrix.

Complex values use ONNX's layout: a trailing axis of size 2 (real, imaginary); a real signal has a
trailing axis of size 1. Transforms run through numpy.fft; results are returned in the input's float
dtype (float16/bfloat16 are computed in float32).
"""

from __future__ import annotations

import numpy as np

from .. import limits
from ..errors import KernelError
from ._registry import op
from .dtypes import compute_dtype, is_float


def _scalar(x, what: str, kind: str = "iu"):
    a = np.asarray(x)
    if a.size != 1 or a.dtype.kind not in kind:
        raise KernelError(
            f"{what} must be a scalar ({'integer' if kind == 'iu' else 'number'}), got shape {a.shape} dtype {a.dtype}"
        )
    v = a.reshape(-1)[0]
    return int(v) if kind == "iu" else float(v)


def _as_complex(x: np.ndarray, what: str) -> tuple[np.ndarray, bool, np.dtype]:
    """[..., 1] real or [..., 2] complex -> (complex or real ndarray without the last axis, is_complex, dtype)."""
    if not is_float(x.dtype):
        raise KernelError(f"{what}: input must be a float tensor, got {x.dtype}")
    if x.ndim < 2 or x.shape[-1] not in (1, 2):
        raise KernelError(f"{what}: the last axis must have size 1 (real) or 2 (complex), got shape {x.shape}")
    work = compute_dtype(x.dtype)
    xs = x.astype(work, copy=False)
    if x.shape[-1] == 1:
        return xs[..., 0], False, x.dtype
    return xs[..., 0] + 1j * xs[..., 1], True, x.dtype


def _pack(z: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """complex ndarray -> [..., 2] in dtype."""
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


@op("onnx:DFT-20")
def dft(input, dft_length=None, axis=None, /, *, inverse=0, onesided=0):
    """y[..., k, ...] = sum_n x[..., n, ...] exp(-2 pi j k n / N) along ``axis`` (inverse: the
    conjugate kernel divided by N).

    input [..., 1] (real) or [..., 2] (complex); axis (scalar input, default -2, negative counts from
    the back including the complex axis, so -2 is the last signal axis); dft_length pads/truncates
    the signal (default: its length, or 2*(len-1) for IRFFT). onesided=1: forward = RFFT of a real
    signal (floor(N/2)+1 bins), inverse = IRFFT (real output [..., N, 1]). Output dtype = input dtype.
    """
    x = np.asarray(input)
    z, is_complex, dtype = _as_complex(x, "DFT")
    r = x.ndim
    ax = -2 if axis is None else _scalar(axis, "DFT axis")
    if not (-r <= ax <= -2 or 0 <= ax <= r - 2):
        raise KernelError(f"DFT axis {ax} out of range [-{r}, -2] U [0, {r - 2}] for input rank {r}")
    ax = ax + r if ax < 0 else ax  # an axis of x; z has the same leading axes
    dim = z.shape[ax]
    irfft = bool(onesided) and bool(inverse)
    if dft_length is None:
        n = 2 * (dim - 1) if irfft else dim
    else:
        n = _scalar(dft_length, "DFT dft_length")
    if n < 1:
        raise KernelError(f"DFT length must be >= 1, got {n}")
    limits.check_elements(z.shape[:ax] + (n,) + z.shape[ax + 1 :] + (2,), "DFT output")
    if irfft:
        if not is_complex:
            raise KernelError("DFT with onesided=1 and inverse=1 (IRFFT) needs a complex input [..., 2]")
        y = np.fft.irfft(z, n=n, axis=ax)
        return y[..., None].astype(dtype)
    if inverse:
        y = np.fft.ifft(z, n=n, axis=ax)
    elif onesided and not is_complex:
        y = np.fft.rfft(z, n=n, axis=ax)
    else:
        y = np.fft.fft(z, n=n, axis=ax)
        if onesided:
            y = np.take(y, np.arange(n // 2 + 1), axis=ax)
    return _pack(y, dtype)


@op("onnx:STFT-17")
def stft(signal, frame_step, window=None, frame_length=None, /, *, onesided=1):
    """output[b, f, k] = sum_n signal[b, f*frame_step + n] * window[n] * exp(-2 pi j k n / frame_length).

    signal [batch, length, 1 or 2]; frame_step scalar; window [frame_length] (default all ones);
    frame_length scalar (default len(window), else the signal length). frames =
    floor((length - frame_length) / frame_step) + 1. Output [batch, frames, bins, 2] with bins =
    frame_length//2 + 1 when onesided (real inputs only), else frame_length; dtype of signal.
    """
    x = np.asarray(signal)
    if x.ndim != 3:
        raise KernelError(f"STFT signal must have shape [batch, length, 1 or 2], got {x.shape}")
    z, is_complex, dtype = _as_complex(x, "STFT")
    length = z.shape[1]
    step = _scalar(frame_step, "STFT frame_step")
    w = None if window is None else np.asarray(window)
    if w is not None and w.ndim != 1:
        raise KernelError(f"STFT window must be 1-D, got shape {w.shape}")
    if frame_length is not None:
        fl = _scalar(frame_length, "STFT frame_length")
        if w is not None and w.shape[0] != fl:
            raise KernelError(f"STFT window length {w.shape[0]} differs from frame_length {fl}")
    else:
        fl = length if w is None else w.shape[0]
    if step < 1 or not 1 <= fl <= length:
        raise KernelError(f"STFT: frame_step {step} must be >= 1 and frame_length {fl} in [1, {length}]")
    frames = (length - fl) // step + 1
    idx = np.arange(frames)[:, None] * step + np.arange(fl)[None, :]
    fr = z[:, idx]  # [batch, frames, fl]
    if w is not None:
        if w.dtype.kind == "c":
            raise KernelError("STFT window must be real")
        fr = fr * w.astype(fr.real.dtype)
    if onesided and is_complex:
        raise KernelError("STFT with onesided=1 needs a real signal")
    y = np.fft.rfft(fr, axis=-1) if onesided else np.fft.fft(fr, axis=-1)
    return _pack(y, dtype)


def _window(size, periodic: int, coeffs: tuple[float, ...], dtype) -> np.ndarray:
    n = _scalar(size, "window size")
    if n < 0:
        raise KernelError(f"window size must be >= 0, got {n}")
    limits.check_elements((n,), "window")
    denom = n if periodic else n - 1
    k = np.arange(n, dtype=np.float64)
    if denom <= 0:
        w = np.ones(n)
    else:
        w = sum(c * np.cos(2.0 * np.pi * i * k / denom) for i, c in enumerate(coeffs))
    return np.asarray(w).astype(np.dtype(dtype))


@op("onnx:HannWindow-17")
def hann_window(size, /, *, output_datatype=np.float32, periodic=1):
    """w[n] = 0.5 - 0.5 cos(2 pi n / N), N = size (periodic) or size - 1 (symmetric).

    Output [size], dtype output_datatype (a numpy dtype; default float32).
    """
    return _window(size, periodic, (0.5, -0.5), output_datatype)


@op("onnx:HammingWindow-17")
def hamming_window(size, /, *, output_datatype=np.float32, periodic=1):
    """w[n] = 25/46 - 21/46 cos(2 pi n / N), N = size (periodic) or size - 1 (symmetric).

    Output [size], dtype output_datatype (a numpy dtype; default float32).
    """
    return _window(size, periodic, (25.0 / 46.0, -21.0 / 46.0), output_datatype)


@op("onnx:BlackmanWindow-17")
def blackman_window(size, /, *, output_datatype=np.float32, periodic=1):
    """w[n] = 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N), N = size (periodic) or size - 1.

    Output [size], dtype output_datatype (a numpy dtype; default float32).
    """
    return _window(size, periodic, (0.42, -0.5, 0.08), output_datatype)


def _hz_to_mel(f):
    return 2595.0 * np.log10(1.0 + f / 700.0)


def _mel_to_hz(m):
    return 700.0 * (10.0 ** (m / 2595.0) - 1.0)


@op("onnx:MelWeightMatrix-17")
def mel_weight_matrix(
    num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz, /, *, output_datatype=np.float32
):
    """W[k, m] = triangular filter m (peak 1) evaluated at spectrogram bin k, mel(f) = 2595 log10(1 + f/700).

    The num_mel_bins + 2 filter edges are lower_edge_hertz + i * step in mel, step = (mel(upper) -
    mel(lower)) / (num_mel_bins + 2) (ONNX's definition, checked against its test data: the top edge
    stays below upper_edge_hertz), mapped to bins floor((dft_length + 1) * f / sample_rate); filter m rises
    linearly from edge m to edge m+1 and falls to edge m+2. Output [dft_length//2 + 1, num_mel_bins],
    dtype output_datatype (default float32).
    """
    nmel = _scalar(num_mel_bins, "num_mel_bins")
    nfft = _scalar(dft_length, "dft_length")
    sr = _scalar(sample_rate, "sample_rate")
    lo = _scalar(lower_edge_hertz, "lower_edge_hertz", "iuf")
    hi = _scalar(upper_edge_hertz, "upper_edge_hertz", "iuf")
    if nmel < 1 or nfft < 1 or sr <= 0 or not 0 <= lo < hi:
        raise KernelError(
            f"MelWeightMatrix: bad arguments num_mel_bins={nmel} dft_length={nfft} sample_rate={sr} edges=[{lo}, {hi}]"
        )
    nbins = nfft // 2 + 1
    limits.check_elements((nbins, nmel), "MelWeightMatrix")
    mel_lo, mel_hi = _hz_to_mel(lo), _hz_to_mel(hi)
    edges_mel = mel_lo + np.arange(nmel + 2) * ((mel_hi - mel_lo) / (nmel + 2))
    edges = np.floor((nfft + 1) * _mel_to_hz(edges_mel) / sr).astype(np.int64)
    left, center, right = edges[:-2], edges[1:-1], edges[2:]  # [nmel] each
    k = np.arange(nbins)[:, None]
    rise_w = np.maximum(center - left, 1)
    fall_w = np.maximum(right - center, 1)
    rise = np.where((k >= left) & (k <= center), (k - left) / rise_w, 0.0)
    rise = np.where((center == left) & (k == center), 1.0, rise)
    fall = np.where((k >= center) & (k < right), (right - k) / fall_w, 0.0)
    w = np.where((k >= center) & (k < right), fall, rise)
    return w.astype(np.dtype(output_datatype))
