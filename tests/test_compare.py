"""`stdops compare`: per-value comparison against the peer runtime, and naming the first disagreement."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from stdops import compare as cmp
from stdops.examples import demo_inputs, demo_model_path

TEXT = """7767517
4 5
Input            data   0 1 data 0=4 1=3 2=2
Split            sp     1 2 data a b
ReLU             r1     1 1 a ra 0=0.1
Sigmoid          s1     1 1 b sb
"""


def test_diff_rules():
    d = cmp._diff("n", "Op", "v", np.array([1.0, 2.0], np.float32), np.array([1.0, 2.5]))
    assert d.max_abs == pytest.approx(0.5) and not d.ok(1e-4, 1e-4)
    assert cmp._diff("n", "Op", "v", np.zeros(3), np.zeros(4)).note.startswith("shape")
    same_nan = cmp._diff("n", "Op", "v", np.array([np.nan, 1]), np.array([np.nan, 1]))
    assert same_nan.ok(0, 0)
    assert cmp.first_disagreement([same_nan, d], 1e-4, 1e-4) is d


def test_onnx_against_onnxruntime():
    pytest.importorskip("onnxruntime")
    diffs = cmp.compare_onnx(str(demo_model_path()), demo_inputs())
    assert {d.name for d in diffs} >= {"h", "logits", "probabilities", "label"}
    assert cmp.first_disagreement(diffs, 1e-5, 1e-5) is None


def test_ncnn_against_the_wheel(tmp_path):
    pytest.importorskip("ncnn")
    p = tmp_path / "m.param"
    p.write_text(TEXT)
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(2, 3, 4)
    diffs = cmp.compare_ncnn(str(p), None, {"data": x})
    assert [d.name for d in diffs] == ["a", "b", "ra", "sb"]
    assert cmp.first_disagreement(diffs, 1e-6, 1e-6) is None


def test_cli_compare(tmp_path):
    pytest.importorskip("onnxruntime")
    np.save(tmp_path / "x.npy", demo_inputs()["x"])
    r = subprocess.run(
        [sys.executable, "-m", "stdops.cli", "compare", str(demo_model_path()), "-i", f"x={tmp_path / 'x.npy'}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "values agree" in r.stdout
