"""The bundled examples are what stdops.examples builds, and the XOR network gives XOR in every form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stdops
import stdops.ncnn
from stdops import examples

REPO_EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_committed_examples_are_reproducible(tmp_path):
    for built in examples.write_all(tmp_path):
        committed = REPO_EXAMPLES / built.name
        assert committed.read_bytes() == built.read_bytes(), f"{committed} differs from what examples.py builds"


def test_xor_in_onnx_and_ncnn():
    x = examples.demo_inputs()["x"]
    xor = (x[:, 0] != x[:, 1]).astype(np.int64)
    onnx_out = stdops.load(examples.demo_model_path()).run({"x": x})
    np.testing.assert_array_equal(onnx_out["label"], xor)
    param, weights = examples.demo_ncnn_paths()
    ncnn_probs = stdops.ncnn.Net.load(param, weights).run({"x": x})["probabilities"]
    np.testing.assert_allclose(ncnn_probs, onnx_out["probabilities"], rtol=1e-6)
    assert (ncnn_probs.argmax(axis=1) == xor).all()


def test_ncnn_xor_matches_the_wheel():
    pytest.importorskip("ncnn")
    from stdops import compare

    param, weights = examples.demo_ncnn_paths()
    diffs = compare.compare_ncnn(str(param), str(weights), {"x": examples.demo_inputs()["x"]})
    assert len(diffs) == 3 and compare.first_disagreement(diffs, 1e-6, 1e-6) is None
