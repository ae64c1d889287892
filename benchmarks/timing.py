"""Timing shared by the benchmarks: callables measured alternately, so that all see the same machine load."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence


def alternating(fa, fb, repeat: int, budget: float = 2.0) -> tuple[list[float], list[float]]:
    """Seconds per call of ``fa`` and ``fb`` (after two warm-up calls each), alternating, ``repeat`` rounds
    or until ``budget`` seconds have passed (at least 5 rounds)."""
    ta, tb = alternating_many([fa, fb], repeat, budget)
    return ta, tb


def alternating_many(
    fns: Sequence[Callable[[], object]],
    repeat: int,
    budget: float = 2.0,
    before: Sequence[Callable[[], object] | None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    calls: int = 1,
) -> list[list[float]]:
    """Seconds per call of each of ``fns``, one call of each per round in turn (after two warm-up rounds),
    ``repeat`` rounds or until ``budget`` seconds have passed (at least 5 rounds). ``before[i]``, when given,
    runs untimed just before each call of ``fns[i]`` (e.g. to set a thread count). ``clock``: wall time by
    default; ``time.thread_time`` counts only the calling thread's CPU time (for single-threaded calls on a
    shared machine: the time the scheduler gives other processes is not counted). ``calls`` > 1: each turn makes
    that many calls in a row and times all but the first, which follows the other callables' turns (a runtime's
    pool threads keep spinning for a while after its call, on the cores the next runtime's threads need)."""
    before = list(before) if before is not None else [None] * len(fns)
    for _ in range(2):
        for f, b in zip(fns, before):
            if b is not None:
                b()
            f()
    times: list[list[float]] = [[] for _ in fns]
    t_end = time.perf_counter() + budget
    for _ in range(repeat):
        for f, b, ts in zip(fns, before, times):
            if b is not None:
                b()
            for c in range(calls):
                t0 = clock()
                f()
                if c or calls == 1:
                    ts.append(clock() - t0)
        if time.perf_counter() > t_end and len(times[0]) >= 5:
            break
    return times
