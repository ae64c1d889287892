"""Randomly damaged models (deleted fields, values of the wrong kind) must fail with a StdopsError,
never another exception, when loaded, compiled and run."""

from __future__ import annotations

import copy
import json
import random
import warnings
from pathlib import Path

import numpy as np
import pytest

import stdops.mdf as mdf
from stdops.errors import StdopsError

from ._conformance import CONF

EX = Path(__file__).resolve().parents[2] / "examples" / "mdf"
GARBAGE = [
    None,
    1,
    -3,
    2.5,
    "",
    "x",
    "1/0",
    "[1,2",
    {},
    [],
    {"a": 1},
    [1, [2]],
    True,
    "__x__",
    "a.b",
    "nan",
    {"type": "Nope"},
    "-1",
    [-1],
    "numpy.zeros(-1)",
]


def _paths(o, p=()):
    yield p
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, p + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _paths(v, p + (i,))


def _mutate(d, rng):
    d = copy.deepcopy(d)
    ps = list(_paths(d))[1:]
    for _ in range(rng.randint(1, 3)):
        p = rng.choice(ps)
        parent = d
        try:
            for k in p[:-1]:
                parent = parent[k]
            if rng.random() < 0.3 and isinstance(parent, dict):
                del parent[p[-1]]
            else:
                parent[p[-1]] = copy.deepcopy(rng.choice(GARBAGE))
        except (KeyError, IndexError, TypeError):
            pass
    return d


def _sources():
    files = [EX / "network.json"]
    if (CONF / "models").is_dir():
        files += [p for p in sorted((CONF / "models").rglob("*.json")) if "Keras" not in p.parts]
    return [json.loads(p.read_text()) for p in files]


@pytest.mark.parametrize("seed", range(4))
def test_damaged_models_fail_cleanly(seed):
    from stdops.mdf.scheduler import set_max_passes

    rng = random.Random(seed)
    sources = _sources()
    old = set_max_passes(2000)  # a damaged condition may never let a trial end
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            _run_damaged(rng, sources)
        finally:
            set_max_passes(old)


def _run_damaged(rng, sources):
    if True:
        for _ in range(150):
            d = _mutate(rng.choice(sources), rng)
            try:
                m = mdf.model_from_data(d, "fuzz.json")
                mdf.check_model(m)
                for g in m.graphs:
                    sim = mdf.Simulation(m, graph=g, seed=0)
                    sim.evaluate()
                    sim.evaluate(0.01)
            except StdopsError:
                pass
