"""Spectrogram and InverseSpectrogram against the ncnn wheel."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import ModelFormatError

from . import wheel

N = 24
needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")


def _check(type_name, params, inputs, atol=1e-4, rtol=1e-4):
    ours = sn.run_layer(type_name, params, [], inputs)
    theirs = wheel.wheel_run(type_name, params, [], inputs)
    wheel.assert_close(ours, theirs, atol=atol, rtol=rtol, what=f"{type_name} {params}")


def _params(rng, i, n_fft):
    params = {0: n_fft}
    if i % 3 or n_fft < 4:  # the default hop n_fft / 4 must not be 0 (ncnn divides by it)
        params[2] = int(rng.integers(1, n_fft + 1))
    if i % 4 == 1:
        params[3] = int(rng.integers(1, n_fft + 1))
    params[4] = i % 3
    params[5] = (i // 3) % 2
    params[7] = (i // 2) % 3
    return params


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_spectrogram(i):
    rng = np.random.default_rng(19000 + i)
    n_fft = int(rng.integers(2, 17)) if i else 8
    params = _params(rng, i, n_fft)
    params[1] = i % 3
    params[6] = (i // 4) % 3
    params[8] = int(i % 5 != 2)
    x = rng.standard_normal(int(rng.integers(n_fft + 1, 4 * n_fft + 8))).astype(np.float32)
    if i == 0:
        params = {0: 8}
    _check("Spectrogram", params, [x], atol=2e-4)


@needs_wheel
@pytest.mark.parametrize("i", range(N))
def test_inversespectrogram(i):
    rng = np.random.default_rng(20000 + i)
    n_fft = int(rng.integers(2, 17)) if i else 8
    params = _params(rng, i, n_fft)
    params[1] = i % 3
    if i == 0:
        params = {0: 8}  # every default
    freqs = n_fft // 2 + 1 if i % 5 != 2 else n_fft
    frames = int(rng.integers(2, 8))
    x = rng.standard_normal((freqs, frames, 2)).astype(np.float32)
    _check("InverseSpectrogram", params, [x], atol=2e-4)


@needs_wheel
@pytest.mark.parametrize("i", range(4))
def test_round_trip_with_the_wheel(i):
    """Spectrogram (power 0, onesided) then InverseSpectrogram gives the signal back, ours and the wheel's."""
    rng = np.random.default_rng(21000 + i)
    n_fft = [8, 16, 12, 10][i]
    params = {0: n_fft, 2: n_fft // 4, 4: 1, 5: 1, 7: i % 3}
    x = rng.standard_normal(64).astype(np.float32)
    spec = sn.run_layer("Spectrogram", {**params, 1: 0}, [], [x])[0]
    back = sn.run_layer("InverseSpectrogram", {**params, 1: 1}, [], [spec])[0]
    np.testing.assert_allclose(back[:60], x[:60], atol=1e-4)
    _check("InverseSpectrogram", {**params, 1: 1}, [spec])


def test_bad_params():
    x = np.zeros(32, np.float32)
    with pytest.raises(ModelFormatError, match="float literal"):
        sn.run_layer("Spectrogram", {0: 8.0}, [], [x])
    with pytest.raises(ValueError, match="window_type"):
        sn.run_layer("Spectrogram", {0: 8, 4: 5}, [], [x])
    with pytest.raises(ValueError, match="winlen"):
        sn.run_layer("InverseSpectrogram", {0: 8, 3: 9}, [], [np.zeros((5, 3, 2), np.float32)])
    with pytest.raises(ValueError, match="frequencies"):
        sn.run_layer("InverseSpectrogram", {0: 8}, [], [np.zeros((6, 3, 2), np.float32)])
