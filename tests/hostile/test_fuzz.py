"""The seeded fuzzing runs of `make test`: a few thousand damaged files across the six formats, each loaded
and run in a forked child (see harness.py). `make fuzz` runs the same generators for as long as asked."""

from __future__ import annotations

import random

import numpy as np
import pytest

import stdops.ncnn as sn
import stdops.onnx as so

from . import harness
from .harness import EXAMPLES, FIXTURES, Case, _onnx_feeds, report, run_cases
from .mutate import (
    _onnx_ops,
    mdf_cases,
    mdf_seeds,
    ncnn_cases,
    ncnn_seeds,
    onnx_cases,
    onnx_seeds,
    random_layer_case,
    random_node_case,
)


def _seeds_untouched():
    paths = [
        EXAMPLES / "xor_mlp.onnx",
        EXAMPLES / "xor_mlp.param",
        EXAMPLES / "xor_mlp.bin",
        *sorted(FIXTURES.glob("*/model.*")),
        *sorted((EXAMPLES / "mdf").iterdir()),
    ]
    return {p: p.read_bytes() for p in paths}


def _run(label: str, cases: list[Case], tmp_path, min_ran: float = 0.1) -> dict:
    tally: dict[str, int] = {}
    failures = run_cases(cases, tmp_path, tally)
    print(f"{label}: {len(cases)} cases", dict(sorted(tally.items(), key=lambda kv: -kv[1])))
    assert not failures, report(failures, len(cases))
    assert tally.get("ran", 0) >= len(cases) * min_ran  # the mutations reach the kernels, not only the parser
    return tally


def test_seeds_load_and_run(tmp_path):
    """The unmutated seeds pass through the same harness (so the harness itself is sound)."""
    cases = [Case(n, "onnx", {"model.onnx": m.SerializeToString()}, "model.onnx", None, f) for n, m, f in onnx_seeds()]
    for s in ncnn_seeds():
        cases.append(
            Case(s.name, "ncnn", {"model.param": s.param_text, "model.bin": s.bin}, "model.param", "model.bin", s.feeds)
        )
    for p in sorted((EXAMPLES / "mdf").glob("*.*")):
        if p.suffix in (".json", ".yaml"):
            cases.append(Case(p.name, "mdf", {p.name: p.read_bytes()}, p.name))
    # the children run under RLIMIT_AS: numba compiling a kernel there for the first time (a fresh clone's empty
    # cache) can exceed it (the ncnn text LSTM seed, an OpError at run, when no earlier test had compiled its
    # kernels): run the seeds here first, so that the children load the compiled code from numba's cache
    for _, m, f in onnx_seeds():
        so.load(m).run(f)
    warm = tmp_path / "warm"
    warm.mkdir()
    for s in ncnn_seeds():
        text = s.param_text if isinstance(s.param_text, bytes) else s.param_text.encode()
        (warm / "model.param").write_bytes(text)
        (warm / "model.bin").write_bytes(s.bin)
        sn.Net.load(warm / "model.param", warm / "model.bin").run(s.feeds)
    tally: dict[str, int] = {}
    failures = run_cases(cases, tmp_path, tally)
    assert not failures, report(failures, len(cases))
    assert tally == {"ran": len(cases)}, tally
    for c in cases[:8]:  # and they did load and run here too
        folder = tmp_path / f"case{cases.index(c):05d}"
        if c.kind == "onnx":
            m = so.load(folder / c.main)
            assert m.run(_onnx_feeds(m, c.feeds))
        elif c.kind == "ncnn":
            net = sn.Net.load(folder / c.main, folder / c.bin)
            assert net.run(c.feeds)


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_onnx(seed, tmp_path):
    before = _seeds_untouched()
    _run(f"onnx seed {seed}", onnx_cases(random.Random(1000 + seed), n_bytes=130, n_proto=120), tmp_path)
    assert _seeds_untouched() == before


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_ncnn(seed, tmp_path):
    before = _seeds_untouched()
    _run(f"ncnn seed {seed}", ncnn_cases(random.Random(2000 + seed), n_text=110, n_binary=60, n_bin=50), tmp_path)
    assert _seeds_untouched() == before


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_ncnn_random_layers(seed, tmp_path):
    rng = random.Random(3000 + seed)
    _run(f"ncnn layers seed {seed}", [random_layer_case(rng, 1000 * seed + k) for k in range(600)], tmp_path)


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_onnx_random_nodes(seed, tmp_path):
    rng, ops = random.Random(4000 + seed), _onnx_ops()
    _run(f"onnx nodes seed {seed}", [random_node_case(rng, 1000 * seed + k, ops) for k in range(500)], tmp_path)


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_mdf_json_and_yaml(seed, tmp_path):
    """Damaged MDF documents (fields deleted, wrong kinds, hostile expressions) and damaged text (bytes,
    4301-digit integers, YAML tags, alias bombs and cycles), as JSON and as YAML."""
    before = _seeds_untouched()
    cases = mdf_cases(random.Random(5000 + seed), 300, mdf_seeds())
    assert {c.main for c in cases} == {"model.json", "model.yaml"}
    _run(f"mdf seed {seed}", cases, tmp_path, min_ran=0.05)
    assert _seeds_untouched() == before


def test_harness_catches_what_it_should(tmp_path, monkeypatch):
    """The runner reports a foreign exception, a hang and a giant allocation (it is not vacuous)."""
    real = harness._check

    def fake(case, folder):
        if case.label == "raise":
            raise KeyError("missing")
        if case.label == "hang":
            while True:
                pass
        if case.label == "alloc":
            try:
                np.ones(2**40, np.uint8)
            except MemoryError:
                return "giant allocation", "x"
        return real(case, folder)

    monkeypatch.setattr(harness, "_check", fake)
    cases = [Case(lbl, "onnx", {"m.onnx": b""}, "m.onnx") for lbl in ("raise", "hang", "alloc")]
    stats: dict = {}
    got = {c.label: f for c, f in run_cases(cases, tmp_path, stats=stats)}
    assert set(got) == {"hang", "alloc", "raise"}, got
    assert "hang" in got["hang"] and "giant" in got["alloc"] and "crash" in got["raise"]
    assert stats["children"] >= 2 and stats["peak_rss_mb"] > 0
