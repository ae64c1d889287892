"""MDF's onnx::Op functions go through the ONNX front end's public selector and the one binder: an MDF
constant reaches a kernel's load-time preparation as an ONNX initializer does, and compiling a model
reads no ONNX schema (the onnx package is not even imported)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import stdops.mdf as mdf
from stdops.errors import ValidationError
from stdops.ops import conv as conv_kernels


def _model(params, outputs, ports=None):
    return mdf.model_from_data(
        {
            "m": {
                "graphs": {
                    "g": {
                        "nodes": {
                            "A": {
                                "input_ports": ports or {"x": {"shape": [1, 2, 5, 5]}},
                                "parameters": params,
                                "output_ports": {k: {"value": v} for k, v in outputs.items()},
                            }
                        }
                    }
                }
            }
        }
    )


def test_a_constant_weight_reaches_the_kernels_prepare():
    seen = []
    real = conv_kernels.prepare_conv

    def spy(constants, attrs):
        seen.append((constants, attrs))
        return real(constants, attrs)

    from stdops.ops import OPS

    object.__setattr__(OPS["conv"], "prepare", spy)  # OpDef is frozen: swapped for this test only
    try:
        rng = np.random.default_rng(3)
        w = rng.standard_normal((3, 2, 3, 3))
        m = _model(
            {
                "w": {"value": w.tolist()},
                "y": {"function": "onnx::Conv", "args": {"X": "x", "W": "w", "pads": [1, 1, 1, 1]}},
            },
            {"y": "y"},
        )
        sim = mdf.Simulation(m)
        x = rng.standard_normal((1, 2, 5, 5))
        got = sim.evaluate(inputs={"x": x})["A"]["y"]
    finally:
        object.__setattr__(OPS["conv"], "prepare", real)
    assert seen, "the constant W did not reach Conv's prepare"
    constants, attrs = seen[0]
    # onnx:: calls run in float32, as the reference passes them to onnxruntime (functions.py, _reconcile)
    np.testing.assert_array_equal(constants[1], w.astype(np.float32))
    assert attrs["pads"] == (1, 1, 1, 1) and attrs["group"] == 1
    want = conv_kernels.conv(x.astype(np.float32), w.astype(np.float32), pads=(1, 1, 1, 1))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_arguments_match_the_kernel_names_regardless_of_case():
    m = _model(
        {"y": {"function": "onnx::Add", "args": {"A": "x", "b": 2.0}}},
        {"y": "y"},
        ports={"x": {"shape": [3]}},
    )
    sim = mdf.Simulation(m)
    sim.evaluate(inputs={"x": np.arange(3.0)})
    np.testing.assert_array_equal(sim.outputs["A"]["y"], [2.0, 3.0, 4.0])


def test_an_unknown_argument_is_named():
    m = _model(
        {"y": {"function": "onnx::Relu", "args": {"X": "x", "alpah": 0.1}}},
        {"y": "y"},
        ports={"x": {"shape": [3]}},
    )
    with pytest.raises(ValidationError, match="alpah"):
        mdf.Simulation(m).evaluate(inputs={"x": np.arange(3.0)})


def test_compiling_reads_no_onnx_schema():
    code = (
        "import sys, numpy as np, stdops.mdf as mdf\n"
        "m = mdf.model_from_data({'m': {'graphs': {'g': {'nodes': {'A': {"
        "'input_ports': {'x': {'shape': [2]}},"
        "'parameters': {'s': {'function': 'onnx::Softmax', 'args': {'input': 'x'}},"
        "'t': {'function': 'onnx::TopK', 'args': {'X': 'x', 'K': [1]}}},"
        "'output_ports': {'o': {'value': 's'}, 'k': {'value': 't[0]'}}}}}}}})\n"
        "sim = mdf.Simulation(m); sim.evaluate(inputs={'x': np.array([1.0, 2.0])})\n"
        "print('onnx' in sys.modules, 'onnx.defs' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]
