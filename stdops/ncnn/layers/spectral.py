"""Spectral layers (ncnn-operators.txt: Spectrogram, InverseSpectrogram) on the shared STFT/DFT/Pad kernels.

The window is winlen long (0 ones, 1 periodic hann, 2 hamming 0.54 - 0.46 cos, ncnn's constants, not
ONNX's 25/46), centred in n_fft with zeros. Spectrogram takes a 1d signal and gives [freqs, frames]
(power 1: magnitude, 2: power) or [freqs, frames, 2] (power 0: real and imaginary parts);
InverseSpectrogram takes [freqs, frames, 2] (onesided when freqs == n_fft / 2 + 1) and overlap-adds
windowed inverse DFTs divided by the summed squared window.
"""

from __future__ import annotations

import math

import numpy as np

from ...limits import check_elements
from ...ops import elementwise, shape_pad, signal
from ..spec import P, Ref, layer

_F32 = np.float32


def _window(n_fft: int, winlen: int, window_type: int) -> np.ndarray:
    if n_fft <= 0:
        raise ValueError(f"n_fft must be positive, got {n_fft}")
    if not 0 < winlen <= n_fft:
        raise ValueError(f"winlen must be in 1..n_fft ({n_fft}), got {winlen}")
    check_elements((n_fft,), "Spectrogram window")
    if window_type == 0:
        win = np.ones(winlen, _F32)
    elif window_type == 1:
        win = signal.hann_window(np.int64(winlen), periodic=1).astype(_F32)
    elif window_type == 2:
        ang = (2 * math.pi * np.arange(winlen, dtype=np.float64) / winlen).astype(_F32)
        win = (_F32(0.54) - _F32(0.46) * elementwise.cos(ang)).astype(_F32)  # ncnn's, not ONNX's, coefficients
    else:
        raise ValueError(f"window_type must be 0 (ones), 1 (hann) or 2 (hamming), got {window_type}")
    left = (n_fft - winlen) // 2
    return np.concatenate([np.zeros(left, _F32), win, np.zeros(n_fft - winlen - left, _F32)])


_COMMON = [
    P(0, "n_fft", 0),
    P(2, "hoplen", None, kind="int"),
    P(3, "winlen", Ref("n_fft")),
    P(4, "window_type", 0),
    P(5, "center", 1),
]


def _hop(p) -> int:
    hop = p.hoplen if p.hoplen is not None else p.n_fft // 4
    if hop <= 0:
        raise ValueError(f"hoplen must be positive, got {hop} (default n_fft / 4)")
    return hop


@layer(
    "Spectrogram",
    params=_COMMON[:1]
    + [P(1, "power", 0)]
    + _COMMON[1:]
    + [P(6, "pad_type", 2), P(7, "normalized", 0), P(8, "onesided", 1)],
    kernels=(signal.hann_window, shape_pad.pad, signal.stft, elementwise.cos, elementwise.sqrt),
)
def spectrogram(p, w):
    """y = STFT(pad(x, n_fft/2) if center) of n_fft-point frames every hoplen samples, scaled by
    1/sqrt(n_fft) (normalized 1) or 1/sqrt(sum window^2) (normalized 2); power 0: [freqs, frames, 2],
    1: |y|, 2: |y|^2 as [freqs, frames]."""
    n = p.n_fft
    hop = _hop(p)
    win = _window(n, p.winlen, p.window_type)
    if p.power not in (0, 1, 2):
        raise ValueError(f"power must be 0, 1 or 2, got {p.power}")
    if p.pad_type not in (0, 1, 2):
        raise ValueError(f"pad_type must be 0 (constant), 1 (replicate) or 2 (reflect), got {p.pad_type}")
    mode = ("constant", "edge", "reflect")[p.pad_type]
    if p.normalized not in (0, 1, 2):
        raise ValueError(f"normalized must be 0, 1 or 2, got {p.normalized}")
    with np.errstate(divide="ignore"):
        scale = [None, _F32(1.0 / math.sqrt(n)), _F32(1) / elementwise.sqrt((win * win).sum(dtype=_F32))][p.normalized]
    stft, pad = signal.stft, shape_pad.pad
    onesided = int(bool(p.onesided))

    def step(x):
        if x.ndim != 1:
            raise ValueError(f"Spectrogram takes a 1d signal, got shape {x.shape}")
        if p.center:
            x = pad(x, np.array([n // 2, n // 2], np.int64), mode=mode)
        if x.size < n:
            raise ValueError(f"Spectrogram: the signal ({x.size} samples after padding) is shorter than n_fft {n}")
        y = stft(x[None, :, None], np.int64(hop), win, np.int64(n), onesided=onesided)[0]  # [frames, bins, 2]
        if scale is not None:
            y = y * scale
        y = y.transpose(1, 0, 2)
        if p.power == 0:
            return np.ascontiguousarray(y, dtype=_F32)
        sq = y[..., 0] * y[..., 0] + y[..., 1] * y[..., 1]
        return (elementwise.sqrt(sq) if p.power == 1 else sq).astype(_F32)

    return step


@layer(
    "InverseSpectrogram",
    params=_COMMON[:1] + [P(1, "returns", 0)] + _COMMON[1:] + [P(7, "normalized", 0)],
    kernels=(signal.dft, signal.hann_window, elementwise.cos, elementwise.sqrt),
)
def inverse_spectrogram(p, w):
    """Per frame: the full spectrum (mirrored conjugate when onesided), times sqrt(n_fft) (normalized 1)
    or sqrt(sum window^2) (normalized 2), inverse DFT, times the window, overlap-added every hoplen and
    divided by the overlap-added squared window where that is nonzero; trimmed by n_fft/2 each side when
    center. returns 0: complex [len, 2], 1: real part [len], 2: imaginary part [len]."""
    n = p.n_fft
    hop = _hop(p)
    win = _window(n, p.winlen, p.window_type)
    if p.returns not in (0, 1, 2):
        raise ValueError(f"returns must be 0, 1 or 2, got {p.returns}")
    if p.normalized not in (0, 1, 2):
        raise ValueError(f"normalized must be 0, 1 or 2, got {p.normalized}")
    scale = [None, _F32(math.sqrt(n)), elementwise.sqrt((win * win).sum(dtype=_F32))][p.normalized]
    dft = signal.dft
    wsq = win * win

    def step(x):
        if x.ndim != 3 or x.shape[2] != 2:
            raise ValueError(f"InverseSpectrogram takes [freqs, frames, 2], got shape {x.shape}")
        freqs, frames = x.shape[0], x.shape[1]
        spec = x.transpose(1, 0, 2)  # [frames, freqs, 2]
        if freqs == n // 2 + 1:
            k = np.arange(n // 2 + 1, n)
            mirror = spec[:, n - k] * np.array([1, -1], _F32)
            spec = np.concatenate([spec, mirror], axis=1)
        elif freqs != n:
            raise ValueError(f"InverseSpectrogram: {freqs} frequencies fit neither n_fft {n} nor n_fft/2+1")
        spec = np.ascontiguousarray(spec, dtype=_F32)
        if scale is not None:
            spec = spec * scale
        frames_t = dft(spec, None, np.int64(-2), inverse=1) * win[None, :, None]  # [frames, n, 2]
        outsize = (frames - 1) * hop + (n % 2 if p.center else n)
        idx = (np.arange(frames)[:, None] * hop + np.arange(n)[None, :] - (n // 2 if p.center else 0)).ravel()
        ok = (idx >= 0) & (idx < outsize)
        acc = np.zeros((outsize, 2), _F32)
        np.add.at(acc, idx[ok], frames_t.reshape(-1, 2)[ok])
        wss = np.zeros(outsize, _F32)
        np.add.at(wss, idx[ok], np.broadcast_to(wsq, (frames, n)).ravel()[ok])
        nz = wss != 0
        acc[nz] /= wss[nz, None]
        if p.returns == 0:
            return acc
        return np.ascontiguousarray(acc[:, p.returns - 1])

    return step
