"""Differential checking of ncnn layers against the wheel, many cases per call (shared by the shape,
resample and expression tests)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import stdops.ncnn as sn

from . import wheel

Case = tuple  # (params, inputs[, n_out])


def f32(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.standard_normal(tuple(shape)).astype(np.float32)


def compare(type_name: str, cases: Sequence[Case], atol: float = 1e-4, rtol: float = 1e-4) -> int:
    """Run every case through stdops and the wheel; fail listing every mismatch. Returns the count."""
    failures: list[str] = []
    for k, case in enumerate(cases):
        params, inputs = case[0], [np.ascontiguousarray(x, np.float32) for x in case[1]]
        n_out = case[2] if len(case) > 2 else 1
        what = f"{type_name} case {k} params={params} inputs={[x.shape for x in inputs]}"
        try:
            theirs = wheel.wheel_run(type_name, params, [], inputs, n_out=n_out)
        except wheel.OracleError as e:
            failures.append(f"{what}: the wheel failed: {str(e)[-300:]}")
            continue
        try:
            ours = sn.run_layer(type_name, params, [], inputs, num_outputs=n_out)
            wheel.assert_close(ours, theirs, atol=atol, rtol=rtol, what=what)
        except Exception as e:  # noqa: BLE001 - collected, reported together
            failures.append(f"{what}: {type(e).__name__}: {str(e)[:600]}")
    assert not failures, f"{len(failures)} of {len(cases)} cases differ:\n" + "\n".join(failures)
    return len(cases)


def run_only(type_name: str, params: dict[int, Any], inputs, n_out: int | None = None):
    return sn.run_layer(type_name, params, [], [np.ascontiguousarray(x, np.float32) for x in inputs], n_out)
