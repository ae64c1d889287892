"""Models exported by torch.onnx at opsets 11, 14 and 17 (scripts/make_onnx_fixtures.py), against the
outputs onnxruntime gave for them: the exporter's real patterns (Shape/Gather/Concat chains, LSTM/GRU
with initial states, attention reshapes) and the old-version adapters, end to end."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import stdops.onnx

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
MODELS = sorted(os.path.basename(p)[: -len(".onnx")] for p in glob.glob(os.path.join(FIXTURES, "*.onnx")))


@pytest.mark.parametrize("stem", MODELS)
def test_exported_model_matches_onnxruntime(stem):
    base = os.path.join(FIXTURES, stem)
    model = stdops.onnx.load(base + ".onnx")
    x = np.load(base + ".in.npy")
    expected = np.load(base + ".out.npy")
    out = model.run({model.input_names[0]: x})[model.output_names[0]]
    assert out.dtype == expected.dtype and out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5)


def test_fixtures_present():
    assert len(MODELS) == 3, MODELS
