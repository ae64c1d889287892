"""Plan.run and the optimized twin's refusals (stdops/graph.py): a feed signature the twin refused once
(PlanFallback) runs the plan as written directly afterwards; other signatures still get the twin."""

from __future__ import annotations

import numpy as np

from stdops.graph import Node, Plan, PlanFallback


def _plans():
    twin_calls: list[tuple] = []

    def double(x):
        return x * 2

    def twin_double(x):
        twin_calls.append(x.shape)
        if x.shape[0] != 4:  # the twin's guard: it assumed 4 rows
            raise PlanFallback("not the static shape")
        return x + x

    plan = Plan([Node("d", "Double", double, ["x"], ["y"])], ["x"], ["y"])
    plan.fused = Plan([Node("d", "Double", twin_double, ["x"], ["y"])], ["x"], ["y"])
    return plan, twin_calls


def test_a_refused_signature_skips_the_twin_afterwards():
    plan, twin_calls = _plans()
    x3 = np.arange(3.0)
    for _ in range(3):
        np.testing.assert_array_equal(plan.run({"x": x3})["y"], 2 * x3)
    assert twin_calls == [(3,)]  # tried once, refused, not tried again
    x4 = np.arange(4.0)
    for _ in range(2):
        np.testing.assert_array_equal(plan.run({"x": x4})["y"], 2 * x4)
    assert twin_calls == [(3,), (4,), (4,)]  # the signature it takes keeps running on the twin
    assert plan.run({"x": x3.astype(np.float32)})["y"].dtype == np.float32  # another dtype: tried again
    assert twin_calls[-1] == (3,)
