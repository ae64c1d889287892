"""The load-time optimizer (stdops/optimize) against the plan as written: every model of the test fixtures
(tests/onnx/fixtures, tests/ncnn/fixtures, the examples) gives the same outputs fused (a run without a hook)
and unfused (a run with one) within 1e-6 of each output's magnitude, with and without the compiled kernels;
and what the optimizer rewrites is really rewritten."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stdops.ncnn as sn
import stdops.onnx as so

ROOT = Path(__file__).resolve().parent.parent.parent
ONNX_FIXTURES = sorted((ROOT / "tests" / "onnx" / "fixtures").glob("*.onnx"))
NCNN_FIXTURES = sorted(p.parent for p in (ROOT / "tests" / "ncnn" / "fixtures").glob("*/model.param"))
EXAMPLES_ONNX = sorted((ROOT / "examples").glob("*.onnx"))
EXAMPLES_NCNN = sorted((ROOT / "examples").glob("*.param"))
RTOL = 1e-6


def _hook(node, name, value):
    pass


def agree(plain: dict, written: dict) -> None:
    assert set(plain) == set(written)
    for k in written:
        a, b = np.asarray(plain[k]), np.asarray(written[k])
        assert a.shape == b.shape and a.dtype == b.dtype, k
        if b.dtype.kind != "f":
            np.testing.assert_array_equal(a, b, err_msg=k)
            continue
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        err = float(np.max(np.abs(a.astype(np.float64) - b))) if b.size else 0.0
        assert err <= RTOL * scale, f"{k}: max |fused - unfused| {err:.3g} > {RTOL} x {scale:.3g}"


def onnx_feeds(m, path: Path) -> dict:
    stored = path.with_name(path.name.replace(".onnx", ".in.npy"))
    if stored.exists():
        return {m.input_names[0]: np.load(stored)}
    rng = np.random.default_rng(0)
    return {
        vi.name: rng.standard_normal([d if isinstance(d, int) and d > 0 else 3 for d in vi.shape]).astype(vi.dtype)
        for vi in m.inputs
    }


@pytest.mark.parametrize("path", ONNX_FIXTURES + EXAMPLES_ONNX, ids=lambda p: p.name)
def test_onnx_model_fused_agrees_with_written(path, kernels):
    m = so.load(path)
    feeds = onnx_feeds(m, path)
    agree(m.run(feeds), m.run(feeds, hook=_hook))


@pytest.mark.parametrize("folder", NCNN_FIXTURES, ids=lambda p: p.name)
def test_ncnn_fixture_fused_agrees_with_written(folder, kernels):
    net = sn.Net.load(folder / "model.param", folder / "model.bin")
    feeds = {"in0": np.load(folder / "in0.npy")}
    agree(net.run(feeds), net.run(feeds, hook=_hook))


@pytest.mark.parametrize("param", EXAMPLES_NCNN, ids=lambda p: p.name)
def test_ncnn_example_fused_agrees_with_written(param, kernels):
    net = sn.Net.load(param, param.with_suffix(".bin"))
    x = np.random.default_rng(1).standard_normal((4, 2)).astype(np.float32)
    agree(net.run({net.input_names[0]: x}), net.run({net.input_names[0]: x}, hook=_hook))


def test_the_resnet_fixture_is_fused():
    """Conv + Relu and Conv + Add + Relu become single steps; every Conv knows its input's size."""
    m = so.load(ROOT / "tests" / "onnx" / "fixtures" / "resnet_small_opset11.onnx")
    fused = m.plan.fused
    assert fused is not None
    ops = [n.op for n in m.plan.nodes]
    assert ops.count("Relu") == 9 and ops.count("Add") == 4
    kernels = [n.kernels[0] for n in fused.nodes]
    assert kernels.count("conv_act") == ops.count("Conv") and "relu" not in kernels and "add" not in kernels
    attrs = [dict(n.bound.attrs) for n in fused.nodes if n.kernels[0] == "conv_act"]
    assert all(a.get("expected_spatial") for a in attrs)
    assert sum(a.get("post_activation") == "relu" for a in attrs) == 4  # the residual blocks: + x, then ReLU


def test_a_hook_sees_every_written_value():
    path = ROOT / "tests" / "onnx" / "fixtures" / "resnet_small_opset11.onnx"
    m = so.load(path)
    seen = []
    m.run(onnx_feeds(m, path), hook=lambda node, name, value: seen.append(name))
    assert seen == [o for n in m.plan.nodes for o in n.outputs if o]


def test_asking_for_a_fused_away_value_runs_the_written_plan():
    path = ROOT / "tests" / "onnx" / "fixtures" / "resnet_small_opset11.onnx"
    m = so.load(path)
    relu = next(n for n in m.plan.nodes if n.op == "Relu")
    conv_out = next(n for n in m.plan.nodes if n.op == "Conv").outputs[0]
    assert conv_out not in m.plan.fused.names()
    feeds = onnx_feeds(m, path)
    got = m.run(feeds, outputs=[conv_out, relu.outputs[0]])
    want = m.run(feeds, outputs=[conv_out, relu.outputs[0]], hook=_hook)
    agree(got, want)
