"""`stdops compare` on ncnn models, the wheel-facing cases: token ids fed as int32, a model the wheel refuses,
and a wheel that segfaults (reported as the wheel's failure, never ending the comparison)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from stdops import compare as cmp

from . import wheel

needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


@needs_wheel
def test_embed_model_gets_int_ids():
    """text_lstm (pnnx: Embed -> LSTM -> Gemm): the wheel reads the Embed input's bits as int32, so compare
    must feed int32 ids; fed as floats it would look up garbage rows and report a false disagreement."""
    folder = os.path.join(FIXTURES, "text_lstm")
    ids = np.load(os.path.join(folder, "in0.npy"))
    assert ids.dtype == np.int32
    for feed in (ids, ids.astype(np.float32)):  # the user may give either
        diffs = cmp.compare_ncnn(os.path.join(folder, "model.param"), None, {"in0": feed})
        assert len(diffs) == 3 and not any(d.peer_failed for d in diffs)
        assert cmp.first_disagreement(diffs, 1e-4, 1e-4) is None, [(d.name, d.max_abs) for d in diffs]


@needs_wheel
def test_a_wheel_crash_is_the_wheels(tmp_path):
    """With packing off the wheel segfaults on a 3x3 convolution with dilation 24 and pad 24 on a 14x14 blob
    (DeepLabV3's ASPP); compare survives, says so, and compares against the wheel with packing on."""
    rng = np.random.default_rng(0)
    c = 4
    (tmp_path / "m.param").write_text(
        "7767517\n3 3\nInput in0 0 1 in0\n"
        f"Convolution conv 1 1 in0 c1 0={c} 1=3 2=24 4=24 5=1 6={c * c * 9} 9=1\n"
        "Sigmoid sig 1 1 c1 out\n"
    )
    w = np.concatenate([np.zeros(1, np.float32), rng.standard_normal(c * c * 9).astype(np.float32)])
    w = np.concatenate([w, rng.standard_normal(c).astype(np.float32)])  # fp32 tag, weights, bias
    w.tofile(tmp_path / "m.bin")
    x = rng.standard_normal((c, 14, 14)).astype(np.float32)
    notes: list[str] = []
    diffs = cmp.compare_ncnn(str(tmp_path / "m.param"), str(tmp_path / "m.bin"), {"in0": x}, notes=notes)
    assert any("crashed" in n and "packing on" in n for n in notes), notes
    assert [d.name for d in diffs] == ["c1", "out"]
    assert cmp.first_disagreement(diffs, 1e-4, 1e-4) is None


@needs_wheel
def test_a_model_the_wheel_refuses(tmp_path):
    """ArgMax is compiled out of the wheel: it refuses the .param; stdops' values come back marked."""
    (tmp_path / "m.param").write_text("7767517\n2 2\nInput in0 0 1 in0\nArgMax am 1 1 in0 out 0=0 1=1\n")
    notes: list[str] = []
    diffs = cmp.compare_ncnn(str(tmp_path / "m.param"), None, {"in0": np.arange(5, dtype=np.float32)}, notes=notes)
    assert notes == ["the wheel refused the .param"]
    assert len(diffs) == 1 and diffs[0].peer_failed and not diffs[0].ok(1, 1)
    assert diffs[0].note == "the wheel refused the .param"
