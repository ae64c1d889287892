"""The param-space fuzzer (fuzz_engine.py) at CI size: every wheel layer, FUZZ_CASES cases each, a fixed seed.
The nightly run is ``make fuzz-ncnn SEED=<n>`` (>= 200 cases per layer, a seed of its own)."""

from __future__ import annotations

import warnings

import pytest

from stdops.ncnn.spec import LAYERS

from . import wheel
from .fuzz_engine import fuzz_layer
from .fuzz_spaces import SPACES

FUZZ_CASES = 20
SEED = 11
needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")


def test_every_wheel_layer_has_a_space_covering_its_params():
    assert set(SPACES) == set(LAYERS) - {"ArgMax", "SPP"}  # the two the wheel was built without


@needs_wheel
@pytest.mark.parametrize("type_name", sorted(SPACES))
def test_param_space_against_the_wheel(type_name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # cases that make inf / NaN on purpose
        r = fuzz_layer(type_name, SPACES[type_name], FUZZ_CASES, SEED)
    assert r.compared >= FUZZ_CASES, f"{type_name}: only {r.compared} cases ({r.redrawn} redrawn)"
    assert not r.failures, f"{type_name}: {len(r.failures)} of {r.compared} differ:\n" + "\n".join(r.failures[:3])
