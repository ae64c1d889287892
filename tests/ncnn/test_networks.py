"""Real networks converted by pnnx (torchvision architectures, random weights): each loads in stdops and
matches the official wheel's outputs within 1e-4 relative to the output's magnitude.

The models are tens of MB, so they are generated, not committed: ``scripts/make_ncnn_fixtures.py``
(``setup``, ``export-networks``, ``expect --networks``) writes them to tests/ncnn/networks/ and their
checksums to tests/ncnn/networks.json (committed). A test checks the generated files against the manifest
before trusting them and skips, saying how to make them, when they are absent. The small real networks
(a ViT, a text LSTM with Embed, a transformer encoder) are committed fixtures (test_fixtures.py).
"""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import pytest

import stdops.ncnn as sn

HERE = os.path.dirname(__file__)
NETWORKS = os.path.join(HERE, "networks")
MANIFEST = os.path.join(HERE, "networks.json")
#: the issue's bar: max |stdops - wheel| <= REL * max |wheel| for every output
REL = 1e-4
MAKE = (
    "generate them with: python3 scripts/make_ncnn_fixtures.py setup && .venv-pnnx/bin/python "
    "scripts/make_ncnn_fixtures.py export-networks && .venv/bin/python scripts/make_ncnn_fixtures.py expect --networks"
)


def _manifest() -> dict:
    if not os.path.exists(MANIFEST):
        return {}
    with open(MANIFEST) as f:
        return json.load(f)


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def relative_error(ours: np.ndarray, theirs: np.ndarray) -> float:
    """max |ours - theirs| / max |theirs| (the output's own scale)."""
    a, b = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


ENTRIES = _manifest()


def test_the_manifest_lists_the_issue_networks():
    want = {
        "resnet18",
        "mobilenet_v2",
        "mobilenet_v3_large",
        "shufflenet_v2_x1_0",
        "efficientnet_b0",
        "convnext_tiny",
        "deeplabv3_mobilenet_v3_large",
        "lraspp_mobilenet_v3_large",
    }
    assert want <= set(ENTRIES)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_network_matches_the_wheel(name):
    entry = ENTRIES[name]
    folder = os.path.join(NETWORKS, name)
    if not os.path.isdir(folder):
        pytest.skip(f"{name}: the generated network is absent; {MAKE}")
    for fname, digest in entry["sha256"].items():
        path = os.path.join(folder, fname)
        assert os.path.exists(path), f"{name}: {fname} is missing; {MAKE}"
        assert _sha256(path) == digest, f"{name}: {fname} differs from the manifest; regenerate ({MAKE})"
    net = sn.Net.load(os.path.join(folder, "model.param"), os.path.join(folder, "model.bin"))
    assert net.input_names == entry["inputs"] and net.output_names == entry["outputs"]
    feeds = {n: np.load(os.path.join(folder, f"in{k}.npy")) for k, n in enumerate(entry["inputs"])}
    out = net.run(feeds)
    for k, n in enumerate(entry["outputs"]):
        expected = np.load(os.path.join(folder, f"out{k}.npy"))
        assert out[n].shape == expected.shape
        err = relative_error(out[n], expected)
        print(f"{name} {n}: max relative error vs the wheel {err:.2e} ({entry['options']})")
        assert err <= REL, f"{name} {n}: relative error {err:.3g} > {REL}"
