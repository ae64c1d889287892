"""One minimal case per failure class the param-space fuzzer found (issue 11), against the wheel: each was
refused or computed differently by stdops before its fix (the fuzzer, test_paramspace.py, covers the
classes at large)."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn

from . import wheel

needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")


def _f(seed: int, *shape) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


def _cases():
    x3 = _f(1, 3, 4, 5)
    return [
        # dynamic_weight=1 with num_output=0 / weight_data_size=0: sizes from the weight blob
        ("Convolution", {19: 1, 5: 1}, [], [_f(2, 4, 6, 7), _f(3, 3, 4, 3, 2), _f(4, 3)]),
        ("ConvolutionDepthWise1D", {19: 1, 7: 2}, [], [_f(5, 4, 9), _f(6, 6, 2, 3)]),
        ("DeconvolutionDepthWise", {28: 1, 7: 2}, [], [_f(7, 4, 3, 3), _f(8, 4, 3, 2, 2)]),
        # Crop: an out size past the input is clamped; numpy-style ends past the dim clamp too
        ("Crop", {0: 1, 3: 9, 1: 2, 4: 9, 2: 0, 5: -233}, [], [x3]),
        ("Crop", {9: [1, 2], 10: [100, 7], 11: [1, -1]}, [], [x3]),
        ("Crop", {9: [0], 10: np.asarray([3.0], np.float32), 11: [2]}, [], [x3]),  # ends as float words
        # BinaryOp: a 2d blob against a 3d one (its (h, w) become (c, h)), and a shorter outer axis
        ("BinaryOp", {0: 0}, [], [_f(9, 3, 4), x3]),
        ("BinaryOp", {0: 2}, [], [x3, _f(10, 2, 4, 5)]),
        # Scale data covering more than axis 0 (the whole blob): its first entries
        ("Scale", {0: 60, 1: 1}, [_f(11, 60), _f(12, 60)], [x3]),
        ("Scale", {0: -233}, [], [x3, _f(13, 4, 5)]),
        # Cast fp32 -> fp16 beyond the fp16 range (and at its edge)
        ("Cast", {0: 1, 1: 2}, [], [np.float32([1e5, -1e5, 65504, 65519, 65520, 7e4, 3.5, 0.1] * 2)]),
        # Reshape with batch axes (pnnx after global pooling)
        ("Reshape", {12: 0, 13: 0, 6: "1,1,//(12,0n),0n"}, [], [_f(14, 12, 1, 1)]),
        ("Reshape", {12: -4, 13: 1, 6: "-1,0n,3"}, [], [_f(15, 3, 2, 4)]),
        # LayerNorm: affine_size c*h*w of a 3d blob normalizes each (h, w) with the first gamma entries
        ("LayerNorm", {0: 60, 1: 1e-5}, [_f(16, 60), _f(17, 60)], [x3]),
        # Tile: 4 repeats of a 3d blob (ncnn's c, d, h, w)
        ("Tile", {2: [2, 3, 1, 2]}, [], [x3]),
        # Unfold SAME_LOWER where one axis' total is negative (kernel < stride): ncnn crops it
        (
            "Unfold",
            {1: 1, 11: 2, 12: 2, 3: 2, 13: 2, 4: -234, 15: -234, 14: -234, 16: -234, 18: 0.5},
            [],
            [x3[:, :, :2]],
        ),
        # average pooling in a SAME mode whose pad params cover the input: 0 / 0
        ("Pooling", {0: 1, 1: 3, 3: 1, 5: 2, 11: 1, 15: 0}, [], [_f(18, 2, 1, 9)]),
        # adaptive pooling to the input's own size: Pooling passes a 2d blob through, Pooling1D writes 2d
        ("Pooling", {0: 0, 7: 1, 8: 3, 18: 7}, [], [_f(19, 7, 3)]),
        ("Pooling1D", {0: 1, 7: 1, 8: 4}, [], [_f(20, 4)]),
    ]


@needs_wheel
def test_minimal_cases_match_the_wheel():
    cases = _cases()
    theirs = wheel.wheel_batch(cases)
    for case, th in zip(cases, theirs):
        what = f"{case[0]} {case[1]}"
        assert not any(isinstance(t, Exception) for t in th), f"{what}: the wheel failed: {th}"
        ours = sn.run_layer(*case)
        ours = [np.asarray(o, np.float32) for o in ours]
        wheel.assert_close(ours, [np.asarray(t, np.float32) for t in th], what=what)


def test_run_layer_gives_the_layers_own_output_count():
    x = _f(21, 6, 4)
    assert len(sn.run_layer("Slice", {0: [2, -233, 1]}, [], [x])) == 3
    assert len(sn.run_layer("Slice", {2: [1, 3]}, [], [x])) == 3
    assert len(sn.run_layer("Split", {}, [], [x])) == 2
    lstm = {0: 3, 1: 3 * 4 * 4}
    w = [_f(22, 48), _f(23, 12), _f(24, 36)]
    assert len(sn.run_layer("LSTM", lstm, w, [x])) == 1
    assert len(sn.run_layer("LSTM", lstm, w, [x, _f(25, 1, 3), _f(26, 1, 3)])) == 3
    gru = {0: 3, 1: 3 * 4 * 3}
    assert len(sn.run_layer("GRU", gru, [_f(27, 36), _f(28, 12), _f(29, 27)], [x, _f(30, 1, 3)])) == 2
    rnn = {0: 3, 1: 3 * 4}
    assert len(sn.run_layer("RNN", rnn, [_f(31, 12), _f(32, 3), _f(33, 9)], [x, _f(34, 1, 3)])) == 2
    assert len(sn.run_layer("RNN", rnn, [_f(31, 12), _f(32, 3), _f(33, 9)], [x, _f(34, 1, 3)], 1)) == 1
    (y,) = sn.run_layer("Input", {0: 4, 1: 6}, [], [x])  # an Input layer run alone passes its blob
    assert y is x


@needs_wheel
def test_the_own_output_counts_are_the_wheels():
    x = _f(35, 6, 4)
    for case in [("Slice", {0: [2, -233, 1]}, [], [x]), ("Slice", {2: [1, 3], 1: 1}, [], [x[:, :4]])]:
        n = len(sn.run_layer(*case))
        th = wheel.wheel_batch([(*case, n)])[0]
        wheel.assert_close(sn.run_layer(*case), th, what=str(case[1]))
