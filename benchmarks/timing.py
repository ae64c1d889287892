"""Timing shared by the benchmarks: two callables measured alternately, so both see the same machine load."""

from __future__ import annotations

import time


def alternating(fa, fb, repeat: int, budget: float = 2.0) -> tuple[list[float], list[float]]:
    """Seconds per call of ``fa`` and ``fb`` (after two warm-up calls each), alternating, ``repeat`` rounds
    or until ``budget`` seconds have passed (at least 5 rounds)."""
    for f in (fa, fb, fa, fb):
        f()
    ta: list[float] = []
    tb: list[float] = []
    t_end = time.perf_counter() + budget
    for _ in range(repeat):
        for f, ts in ((fa, ta), (fb, tb)):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
        if time.perf_counter() > t_end and len(ta) >= 5:
            break
    return ta, tb
