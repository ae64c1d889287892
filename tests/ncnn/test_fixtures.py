"""Model fixtures made by pnnx from torch modules (scripts/make_ncnn_fixtures.py), with the official ncnn
wheel's outputs under exact-fp32 options recorded beside them: stdops must agree within 1e-4."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import stdops.ncnn as sn

from .test_networks import REL, relative_error

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
NAMES = sorted(d for d in os.listdir(FIXTURES) if os.path.exists(os.path.join(FIXTURES, d, "blobs.json")))


@pytest.mark.parametrize("name", NAMES)
def test_fixture_matches_the_wheel(name):
    folder = os.path.join(FIXTURES, name)
    with open(os.path.join(folder, "blobs.json")) as f:
        blobs = json.load(f)
    net = sn.Net.load(os.path.join(folder, "model.param"), os.path.join(folder, "model.bin"))
    assert net.input_names == blobs["inputs"] and net.output_names == blobs["outputs"]
    feeds = {n: np.load(os.path.join(folder, f"in{k}.npy")) for k, n in enumerate(blobs["inputs"])}
    out = net.run(feeds)
    for k, n in enumerate(blobs["outputs"]):
        expected = np.load(os.path.join(folder, f"out{k}.npy"))
        assert out[n].shape == expected.shape
        np.testing.assert_allclose(out[n], expected, atol=1e-4, rtol=1e-4, err_msg=f"{name}: {n}")
        err = relative_error(out[n], expected)
        print(f"{name} {n}: max relative error vs the wheel {err:.2e}")
        assert err <= REL


@pytest.mark.parametrize("name", NAMES)
def test_fixture_round_trips_byte_identical(name, tmp_path):
    folder = os.path.join(FIXTURES, name)
    net = sn.Net.load(os.path.join(folder, "model.param"), os.path.join(folder, "model.bin"))
    net.save(tmp_path / "m.param", tmp_path / "m.bin")
    with open(os.path.join(folder, "model.bin"), "rb") as f:
        assert (tmp_path / "m.bin").read_bytes() == f.read()
    again = sn.Net.load(tmp_path / "m.param", tmp_path / "m.bin")
    assert [L.params.as_dict() for L in again.layers] == [L.params.as_dict() for L in net.layers]
    for a, b in zip(again.layers, net.layers):
        assert a.weights.keys() == b.weights.keys()
        for k in a.weights:
            np.testing.assert_array_equal(a.weights[k], b.weights[k])
