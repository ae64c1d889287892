"""The ONNX node suite, case by case, through ``stdops.onnx.load(...).run(...)``.

Every case must pass unless EXPECTED_FAILURES (expected_failures.py) names it with the reason; those run
as strict xfails, so a case that starts passing fails the run until it is taken off the list (the
ratchet: the number passing can only grow). ``test_pass_count_ratchet`` states the floor explicitly.
"""

from __future__ import annotations

import numpy as np
import pytest

from .expected_failures import EXPECTED_FAILURES, MIN_PASSING
from .onnx_cases import assert_same, is_random, node_cases, ops_of, spec_undefined, to_numpy

onnx = pytest.importorskip("onnx")

CASES = sorted(node_cases())


def _params() -> list:
    params = []
    for name in CASES:
        reason = EXPECTED_FAILURES.get(name)
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.conformance
@pytest.mark.parametrize("name", _params())
def test_node_case(name):
    import stdops.onnx

    case = node_cases()[name]
    model = stdops.onnx.load(case.model)
    ops = ops_of(case.model.graph)
    shape_only = is_random(name, ops)
    in_names = [vi.name for vi in case.model.graph.input]
    for k, (inputs, expected) in enumerate(case.data_sets):
        feeds = dict(zip(in_names, [to_numpy(x) for x in inputs]))
        out = model.run(feeds)
        actual = [out[n] for n in model.output_names]
        assert len(actual) == len(expected)
        for i, (e, a) in enumerate(zip(expected, actual)):
            e = to_numpy(e)
            undefined = spec_undefined(ops, [to_numpy(x) for x in inputs], e) if i == 0 else None
            if undefined is not None and undefined.any() and np.shape(a) == e.shape:
                a = np.where(undefined, e, a).astype(e.dtype)  # not compared: the spec leaves them undefined
            assert_same(e, a, f"data set {k} output {i}", shape_only)


def test_pass_count_ratchet():
    """The floor on passing cases: every case not listed as an expected failure is expected to pass."""
    passing = len(CASES) - sum(1 for n in CASES if n in EXPECTED_FAILURES)
    assert passing >= MIN_PASSING, (passing, MIN_PASSING)
    unknown = sorted(set(EXPECTED_FAILURES) - set(CASES))
    assert not unknown, f"EXPECTED_FAILURES names cases the suite does not have: {unknown[:5]}"
