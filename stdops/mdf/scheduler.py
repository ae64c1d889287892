"""The scheduler: graph-scheduler's ``run`` semantics over MDF node ids (written anew).

Each call of :meth:`Scheduler.run` is one trial (environment state update): passes over the
consideration queue (the levels of the dependency graph's topological order, each in declaration
order) run every node whose condition holds, until the trial's termination condition holds.
Counts and the clock carry over between trials. See :mod:`stdops.mdf.conditions`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from fractions import Fraction

from ..errors import StdopsError
from .conditions import CSE, ES, ESU, PASS, All, AllHaveRun, Always, Condition, EveryNCalls, Never, TimeScale


class Clock:
    """Counts of each time scale within each coarser one, and the absolute time (ms)."""

    __slots__ = ("rel", "absolute", "interval", "absolute_enabled")

    def __init__(self) -> None:
        self.rel = [[0] * 5 for _ in range(5)]  # rel[q][b]: q ticks in the current b
        self.absolute = Fraction(0)
        self.interval = Fraction(1)
        self.absolute_enabled = False

    def increment(self, scale: int) -> None:
        rel = self.rel
        for b in range(scale + 1, 5):
            rel[scale][b] += 1
        for q in range(scale):
            for b in range(q + 1, scale + 1):
                rel[q][b] = 0
        if self.absolute_enabled and scale == CSE:
            self.absolute += self.interval

    def total(self, query: int, base: int) -> int:
        return self.rel[query][base]


def default_condition(senders: list) -> Condition:
    if not senders:
        return Always()
    if len(senders) == 1:
        return EveryNCalls(senders[0], 1)
    return All(*[EveryNCalls(s, 1) for s in senders])


def toposort(nodes: list, deps: dict) -> list[list]:
    """Levels of a dependency graph ({node: senders}), each in declaration order; raises on a cycle."""
    order = {n: i for i, n in enumerate(nodes)}
    remaining = {n: {d for d in deps.get(n, ()) if d != n} for n in nodes}
    levels: list[list] = []
    while remaining:
        ready = [n for n, d in remaining.items() if not d]
        if not ready:
            cyc = sorted(remaining, key=order.__getitem__)
            raise StdopsError(
                f"the graph has a cycle through {', '.join(map(repr, cyc))} and none of the "
                f"input ports on it has a default_value to start from"
            )
        ready.sort(key=order.__getitem__)
        levels.append(ready)
        rs = set(ready)
        remaining = {n: d - rs for n, d in remaining.items() if n not in rs}
    return levels


_max_passes = [1_000_000]


def max_passes() -> int:
    return _max_passes[0]


def set_max_passes(n: int) -> int:
    """Passes one trial may take before it is declared non-terminating; returns the old cap."""
    old, _max_passes[0] = _max_passes[0], int(n)
    return old


class Scheduler:
    """Yields, per consideration set execution, the nodes to run (graph-scheduler's ``run``)."""

    def __init__(
        self, nodes: list, deps: dict, conditions: dict, termination: dict, value_getter: Callable | None = None
    ):
        self.nodes = list(nodes)
        self.queue = toposort(self.nodes, deps)
        self.queue_index = {n: i for i, level in enumerate(self.queue) for n in level}
        self.conditions = {
            n: conditions.get(n) or default_condition(sorted(deps.get(n, ()), key=self.nodes.index)) for n in self.nodes
        }
        self.termination = {ES: Never(), ESU: AllHaveRun()}
        self.termination.update(termination)
        self.counts_total = {ts: {n: 0 for n in self.nodes} for ts in TimeScale}
        self.counts_useable = {n: {m: 0 for m in self.nodes} for n in self.nodes}
        self.execution_list: list[list] = []
        self.clock = Clock()
        self.value_getter = value_getter or (lambda node, name: 0)
        absolute = [c for c in list(self.conditions.values()) + list(self.termination.values()) if c.is_absolute]
        self.absolute = bool(absolute)
        if self.absolute:
            intervals = [i for c in absolute for i in c.absolute_intervals]
            if intervals:
                g = 0
                for i in intervals:
                    g = math.gcd(g, int(i))
                self.clock.interval = Fraction(g, len(self.queue)) if len(self.queue) > 1 else Fraction(g)
            fixed = [min(c.absolute_fixed_points) if c.absolute_fixed_points else Fraction(0) for c in absolute]
            self.clock.absolute = max(self.clock.absolute, min(fixed))
            self.clock.absolute_enabled = True

    def run(self) -> Iterator[list]:
        term_esu, term_es = self.termination[ESU], self.termination[ES]
        conds, clock, total, useable = self.conditions, self.clock, self.counts_total, self.counts_useable
        nodes = self.nodes
        for row in useable.values():
            for m in row:
                row[m] = 0
        for ts in (CSE, PASS, ESU):
            for n in total[ts]:
                total[ts][n] = 0
        scales = tuple(TimeScale)
        absolute = self.absolute
        cap, passes = max_passes(), 0
        while not term_esu.satisfied(self, None) and not term_es.satisfied(self, None):
            passes += 1
            if passes > cap:
                raise StdopsError(
                    f"the trial did not terminate after {cap} passes (termination condition "
                    f"{self.termination[ESU]!r} never held); raise the cap with "
                    f"stdops.mdf.conditions.set_max_passes"
                )
            for ts in (CSE, PASS):
                for n in total[ts]:
                    total[ts][n] = 0
            changed = False
            idx = 0
            while idx < len(self.queue) and not term_esu.satisfied(self, None) and not term_es.satisfied(self, None):
                ran: list = []
                level = self.queue[idx]
                while True:
                    level_changed = False
                    for n in level:
                        if n not in ran and conds[n].satisfied(self, n):
                            ran.append(n)
                            changed = level_changed = True
                            for ts in scales:
                                total[ts][n] += 1
                            for m in nodes:
                                useable[m][n] = 0
                            row = useable[n]
                            for m in nodes:
                                row[m] += 1
                    if not level_changed:
                        break
                if ran or absolute:
                    self.execution_list.append(ran)
                    yield ran
                    clock.increment(CSE)
                idx += 1
            if not changed and not absolute:
                self.execution_list.append([])
                yield []
                clock.increment(CSE)
            clock.increment(PASS)
        clock.increment(ESU)
