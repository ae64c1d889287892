"""ncnn -> ONNX against the official ncnn wheel: every single-layer case of ncnn_cases.py is converted, checked
by onnx.checker (full check) and run in onnxruntime, and must agree with the wheel (exact-fp32 options,
forked: tests/ncnn/wheel.py) within 1e-5 relative per value (max |a - b| / max |b|); the pnnx fixtures the same.
ArgMax and SPP are compiled out of the wheel: those run against the front end (a NumPy reference).
The layer coverage (N of the 110 ncnn layers) is printed by test_layer_coverage."""

from __future__ import annotations

import collections
import json
import os

import numpy as np
import pytest

from stdops.convert.ncnn_onnx import EMIT, NO_ONNX_FORM
from stdops.convert.ncnn_to_onnx import convert_net
from stdops.ncnn.modelbin import ModelBinWriter
from stdops.ncnn.net import Net
from stdops.ncnn.param import LAYER_INDEX, LayerDecl, ParamFile, write_binary
from stdops.ncnn.spec import LAYERS, resolve_params

from ..ncnn import wheel
from .ncnn_cases import argmax_cases, kv_cache_cases, spp_cases
from .ncnn_cases_more import all_cases

ort = pytest.importorskip("onnxruntime")
needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")

RTOL = 1e-5
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "ncnn", "fixtures")
#: layers whose int32 / int inputs the wheel reads as the blob's bits
BITS_INPUT = {"Embed", "Dequantize", "Requantize"}
#: layers whose output the wheel leaves packed (Packing itself)
UNPACK = {"Packing"}


def net_of(case) -> Net:
    """A stdops Net holding one Input per bottom and the layer (blobs named by index)."""
    type_name, params, weights, inputs, n_out = case
    spec = LAYERS[type_name]
    p = resolve_params(spec, dict(params), type_name, None, len(inputs), n_out)
    layers, mb = [], ModelBinWriter()
    bi = [str(k) for k in range(len(inputs))]
    bo = [str(len(inputs) + k) for k in range(n_out)]
    for b in bi:
        layers.append(LayerDecl("Input", f"in{b}", [], [b], {}, len(layers)))
    layers.append(LayerDecl(type_name, "op", bi, bo, wheel.typed_params(type_name, params), len(layers)))
    for wd, arr in zip(spec.weights(p), weights):
        a = np.asarray(arr)
        mb.write(a, wd.tagged, "int8" if a.dtype == np.int8 else "fp32")
    return Net.from_bytes(write_binary(ParamFile(layers, len(bi) + len(bo), None, True)), mb.getvalue())


def run_onnx(model, feeds: dict) -> list[np.ndarray]:
    """onnxruntime's outputs (a bfloat16 output, which its Python API cannot hand back, read as float32)."""
    import onnx

    bf16 = [o.name for o in model.graph.output if o.type.tensor_type.elem_type == onnx.TensorProto.BFLOAT16]
    if bf16:
        model = _bf16_outputs_as_float(model, bf16)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    s = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _bf16_outputs_as_float(model, names):
    import onnx
    from onnx import helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    for o in m.graph.output:
        if o.name in names:
            m.graph.node.append(helper.make_node("Cast", [o.name], [o.name + "_f32"], to=onnx.TensorProto.FLOAT))
            o.name += "_f32"
            o.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    return m


def rel_error(ours: np.ndarray, theirs: np.ndarray) -> float:
    """max |a - b| / max |b| over one value (0 when both are exactly equal)."""
    a, b = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    if a.shape != b.shape:
        return float("inf")
    if a.size == 0:
        return 0.0
    both_nan = np.isnan(a) & np.isnan(b)
    a, b = np.where(both_nan, 0, a), np.where(both_nan, 0, b)
    scale = np.abs(b).max()
    diff = np.abs(a - b).max()
    if not np.isfinite(diff):
        return 0.0 if np.array_equal(a, b) else float("inf")
    return float(diff / scale) if scale > 0 else float(diff > 0) * float("inf")


def converted_outputs(case) -> list[np.ndarray]:
    net = net_of(case)
    shapes = {str(k): x.shape for k, x in enumerate(case[3])}
    model = convert_net(net, shapes)
    feeds = {str(k): np.asarray(x, np.float32)[None] for k, x in enumerate(case[3])}
    return [y[0] for y in run_onnx(model, feeds)]


def _wheel_input(case):
    type_name, params, weights, inputs, n_out = case
    if type_name in BITS_INPUT:
        inputs = [np.asarray(x).astype(np.int32).view(np.float32) for x in inputs]
    return (type_name, params, weights, inputs, n_out)


def _as_values(a, bf16_bits: bool = False) -> np.ndarray:
    """float values of an output; ``bf16_bits``: the wheel hands a bfloat16 blob back as 2-byte words."""
    a = np.asarray(a)
    if bf16_bits and a.dtype.itemsize == 2 and a.dtype.name != "bfloat16":
        return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    if a.dtype.name == "bfloat16":
        return a.astype(np.float32)
    return a


CASES = all_cases()
REFERENCE_CASES = (
    argmax_cases(np.random.default_rng(1))
    + spp_cases(np.random.default_rng(2))
    + kv_cache_cases(np.random.default_rng(3))
)


@pytest.fixture(scope="module")
def outcomes():
    """Per case: (type, rel error or an error message)."""
    import stdops.ncnn as sn

    theirs = _wheel_results(CASES)
    out = []
    for case, ref in zip(CASES, theirs):
        out.append((case[0], _compare(case, ref)))
    for case in REFERENCE_CASES:
        ref = sn.run_layer(case[0], case[1], case[2], case[3], case[4])
        out.append((case[0], _compare(case, ref)))
    return out


def _wheel_results(cases) -> list:
    """The wheel's outputs per case, one forked batch per layer type (a case the wheel refuses is run
    alone, so that only it carries the refusal)."""
    results: list = [None] * len(cases)
    by_type = collections.defaultdict(list)
    for k, c in enumerate(cases):
        by_type[c[0]].append(k)
    for ks in by_type.values():
        unpack = cases[ks[0]][0] in UNPACK
        try:
            batch = wheel.wheel_batch([_wheel_input(cases[k]) for k in ks], timeout=300, unpack=unpack)
        except wheel.OracleError:
            batch = []
            for k in ks:
                try:
                    batch += wheel.wheel_batch([_wheel_input(cases[k])], timeout=60, unpack=unpack)
                except wheel.OracleError as e:
                    batch.append([e])
        for k, r in zip(ks, batch):
            results[k] = r
    return results


def _compare(case, ref) -> float | str:
    try:
        ours = converted_outputs(case)
    except Exception as e:  # noqa: BLE001 - reported per case
        return f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    if len(ref) == 1 and isinstance(ref[0], Exception):
        return f"the wheel failed: {' '.join(str(ref[0]).split())[-200:]}"
    if len(ours) != len(ref):
        return f"{len(ours)} outputs vs {len(ref)}"
    worst = 0.0
    for a, b in zip(ours, ref):
        if isinstance(b, tuple):  # unpacked by the wheel helper: (values, elempack)
            b = b[0]
        if isinstance(b, Exception):
            return f"the wheel failed: {' '.join(str(b).split())[-200:]}"
        b = _as_values(b, bf16_bits=case[0] == "Cast" and case[1].get(1) == 4)
        if case[0] == "Packing" and case[1].get(1):  # ncnn leaves the padded entries unset: compare the rest
            n = case[3][0].shape[0]
            a, b = np.asarray(a)[:n], np.asarray(b)[:n]
        if np.asarray(a).shape != np.asarray(b).shape:
            return f"shape {np.asarray(a).shape} vs {np.asarray(b).shape}"
        worst = max(worst, rel_error(_as_values(a), b))
    return worst


def _types():
    return sorted({c[0] for c in CASES + REFERENCE_CASES})


@needs_wheel
@pytest.mark.parametrize("type_name", _types())
def test_layer_converts_and_matches(outcomes, type_name):
    mine = [(k, r) for k, (t, r) in enumerate(outcomes) if t == type_name]
    bad = [(k, r) for k, r in mine if isinstance(r, str) or r > RTOL]
    assert not bad, f"{type_name}: {len(bad)} of {len(mine)} cases fail: " + "; ".join(
        f"{CASES[k][1] if k < len(CASES) else ''} -> {r}" for k, r in bad[:4]
    )


@needs_wheel
def test_layer_coverage(outcomes, capsys):
    passed = collections.defaultdict(list)
    for t, r in outcomes:
        passed[t].append(not isinstance(r, str) and r <= RTOL)
    good = sorted(t for t, v in passed.items() if all(v)) + ["Input"]
    good = sorted(set(good))
    missing = sorted(set(LAYER_INDEX) - set(good))
    with capsys.disabled():
        print(f"\nncnn -> ONNX layer coverage: {len(good)} of {len(LAYER_INDEX)} layers")
        print(
            "  not converted: "
            + ", ".join(f"{t} ({NO_ONNX_FORM.get(t, 'no emitter' if t not in EMIT else 'failing')})" for t in missing)
        )
    assert len(LAYER_INDEX) == 110
    assert len(good) >= 100


@pytest.mark.parametrize(
    "name", sorted(d for d in os.listdir(FIXTURES) if os.path.exists(os.path.join(FIXTURES, d, "blobs.json")))
)
def test_pnnx_fixture_converts_and_matches_the_wheel(name):
    """The wheel's outputs are stored beside each fixture (scripts/make_ncnn_fixtures.py). Token ids are stored
    as int32 (the wheel reads the blob's bits); the ONNX input is float32 like every ncnn blob, ids by value."""
    folder = os.path.join(FIXTURES, name)
    with open(os.path.join(folder, "blobs.json")) as f:
        blobs = json.load(f)
    net = Net.load(os.path.join(folder, "model.param"), os.path.join(folder, "model.bin"))
    feeds = {n: np.load(os.path.join(folder, f"in{k}.npy")) for k, n in enumerate(blobs["inputs"])}
    model = convert_net(net, {n: v.shape for n, v in feeds.items()})
    ys = run_onnx(model, {n: v.astype(np.float32)[None] for n, v in feeds.items()})
    for k, (n, y) in enumerate(zip(blobs["outputs"], ys)):
        expected = np.load(os.path.join(folder, f"out{k}.npy"))
        err = rel_error(y[0], expected)
        print(f"{name}: {n} max relative error {err:.2e}")
        assert err <= RTOL, f"{name}: {n}: relative error {err:.3g}"


# ------------------------------------------------------------------ the generated real networks
NETWORKS = os.path.join(os.path.dirname(__file__), "..", "ncnn", "networks")
MANIFEST = os.path.join(os.path.dirname(__file__), "..", "ncnn", "networks.json")
MAKE = (
    "generate them with: python3 scripts/make_ncnn_fixtures.py setup && .venv-pnnx/bin/python "
    "scripts/make_ncnn_fixtures.py export-networks && .venv/bin/python scripts/make_ncnn_fixtures.py expect --networks"
)


def _network_entries() -> dict:
    if not os.path.exists(MANIFEST):
        return {}
    with open(MANIFEST) as f:
        return json.load(f)


def _sha256(path: str) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@pytest.mark.parametrize("name", sorted(_network_entries()))
def test_network_converts_and_matches_the_wheel(name):
    """The pnnx-converted torchvision networks (generated, checksummed in tests/ncnn/networks.json): ncnn ->
    ONNX in onnxruntime against the wheel's recorded outputs, 1e-5 relative under exact-fp32 options (1e-4
    where the wheel had to run with packing on, which is not exact fp32: DeepLabV3)."""
    entry = _network_entries()[name]
    folder = os.path.join(NETWORKS, name)
    for file, digest in entry["sha256"].items():
        p = os.path.join(folder, file)
        if not os.path.exists(p):
            pytest.skip(f"{name}: {file} is not generated ({MAKE})")
        if _sha256(p) != digest:
            pytest.skip(f"{name}: {file} does not match tests/ncnn/networks.json (regenerate: {MAKE})")
    net = Net.load(os.path.join(folder, "model.param"), os.path.join(folder, "model.bin"))
    feeds = {n: np.load(os.path.join(folder, f"in{k}.npy")) for k, n in enumerate(entry["inputs"])}
    model = convert_net(net, {n: v.shape for n, v in feeds.items()})
    ys = run_onnx(model, {n: v.astype(np.float32)[None] for n, v in feeds.items()})
    bar = RTOL if entry.get("options", "").startswith("exact") else 1e-4
    for k, (n, y) in enumerate(zip(entry["outputs"], ys)):
        err = rel_error(y[0], np.load(os.path.join(folder, f"out{k}.npy")))
        print(f"{name}: {n} max relative error {err:.2e} (bar {bar:g})")
        assert err <= bar, f"{name}: {n}: relative error {err:.3g}"
