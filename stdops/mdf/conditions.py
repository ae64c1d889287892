"""Scheduling conditions with graph-scheduler's semantics (written anew); the scheduler that runs
them is :mod:`stdops.mdf.scheduler`.

Time: a *consideration set execution* (CSE) runs every node of one consideration set (one level
of the dependency graph's topological order) whose condition holds; a *pass* goes through every
consideration set once; an *environment state update* (ESU, a trial) is one ``Simulation.evaluate``
and lasts passes until its termination condition holds (default: every node has run, AllHaveRun);
an *environment sequence* (ES) spans every evaluate. Counts and the clock carry over between
evaluations.

Default node conditions: ``Always`` for a node without senders, ``EveryNCalls(sender, 1)`` for one
sender, ``All(EveryNCalls(s, 1) for s in senders)`` for several. An edge into an input port that has a
``default_value`` is not a dependency (this is how MDF breaks cycles); a cycle without one is an error.

Deliberate differences from graph-scheduler: the nodes of one consideration set are considered
and run in the graph's declaration order (graph-scheduler iterates a set, so the order depends on
hashing); ``WhenFinished`` (and ``...Any``/``...All``) treat a node as finished once it has run in
the current trial (MDF nodes have no other notion of finishing).
"""

from __future__ import annotations

import abc
import enum
import operator
import re
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the scheduler imports the conditions, not the other way round
    from .scheduler import Scheduler

import numpy as np


class TimeScale(enum.IntEnum):
    CONSIDERATION_SET_EXECUTION = 0
    PASS = 1
    ENVIRONMENT_STATE_UPDATE = 2
    ENVIRONMENT_SEQUENCE = 3
    LIFE = 4


CSE, PASS, ESU, ES, LIFE = (
    TimeScale.CONSIDERATION_SET_EXECUTION,
    TimeScale.PASS,
    TimeScale.ENVIRONMENT_STATE_UPDATE,
    TimeScale.ENVIRONMENT_SEQUENCE,
    TimeScale.LIFE,
)

_TS_ALIASES = {
    "TIME_STEP": CSE,
    "TRIAL": ESU,
    "RUN": ES,
    "CONSIDERATION_SET_EXECUTION": CSE,
    "PASS": PASS,
    "ENVIRONMENT_STATE_UPDATE": ESU,
    "ENVIRONMENT_SEQUENCE": ES,
    "LIFE": LIFE,
}


def parse_time_scale(v: Any) -> TimeScale:
    if isinstance(v, TimeScale):
        return v
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 4:
        return TimeScale(v)
    if isinstance(v, str):
        name = re.sub(r"^(TimeScale)?\.", "", v.strip()).upper()
        if name in _TS_ALIASES:
            return _TS_ALIASES[name]
    raise ValueError(f"unknown time scale {v!r} (expected one of {', '.join(t.name for t in TimeScale)})")


# -- absolute time (milliseconds as Fractions) ---------------------------------------------------

_UNITS = {
    "ms": Fraction(1),
    "millisecond": Fraction(1),
    "milliseconds": Fraction(1),
    "s": Fraction(1000),
    "second": Fraction(1000),
    "seconds": Fraction(1000),
    "us": Fraction(1, 1000),
    "microsecond": Fraction(1, 1000),
    "ns": Fraction(1, 10**6),
    "min": Fraction(60000),
    "minute": Fraction(60000),
}


def _to_ms(v: Any, unit: Any = "ms") -> Fraction | None:
    if v is None:
        return None
    u = _UNITS.get(str(unit).strip(), None) if unit is not None else Fraction(1)
    if u is None:
        raise ValueError(f"unknown time unit {unit!r}")
    if isinstance(v, str):
        m = re.match(r"^\s*([-+0-9.eE]+)\s*([A-Za-z]*)\s*$", v)
        if not m:
            raise ValueError(f"cannot read time {v!r}")
        num, un = m.group(1), m.group(2)
        if un:
            if un not in _UNITS:
                raise ValueError(f"unknown time unit {un!r}")
            u = _UNITS[un]
        v = float(num) if any(c in num for c in ".eE") else int(num)
    return Fraction(v).limit_denominator(10**12) * u


# -- conditions ------------------------------------------------------------------------------------


class Condition(abc.ABC):
    """Base: ``satisfied(scheduler, owner)``."""

    dependencies: tuple = ()

    @property
    def is_absolute(self) -> bool:
        """Whether it reads the clock's absolute time (which then sets the scheduler's time step)."""
        return False

    @property
    def absolute_intervals(self) -> list:
        return []

    @property
    def absolute_fixed_points(self) -> list:
        return []

    @abc.abstractmethod
    def satisfied(self, sch: Scheduler, owner: Any) -> bool:
        """Whether the condition holds for ``owner`` now."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def children(self) -> list[Condition]:
        return []


class Always(Condition):
    def satisfied(self, sch, owner):
        return True


class Never(Condition):
    def satisfied(self, sch, owner):
        return False


class _Composite(Condition):
    def __init__(self, *conditions: Condition, dependencies: Any = None):
        conds = list(conditions)
        if dependencies is not None:
            conds += list(dependencies) if isinstance(dependencies, (list, tuple)) else [dependencies]
        for c in conds:
            if not isinstance(c, Condition):
                raise ValueError(f"{type(self).__name__} takes conditions, got {c!r}")
        self.conds = conds

    def children(self):
        return self.conds

    @property
    def is_absolute(self):
        return any(c.is_absolute for c in self.conds)

    @property
    def absolute_intervals(self):
        return [i for c in self.conds if c.is_absolute for i in c.absolute_intervals]

    @property
    def absolute_fixed_points(self):
        return [i for c in self.conds if c.is_absolute for i in c.absolute_fixed_points]

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(map(repr, self.conds))})"


class All(_Composite):
    def satisfied(self, sch, owner):
        for c in self.conds:
            if not c.satisfied(sch, owner):
                return False
        return True


class Any_(_Composite):
    def satisfied(self, sch, owner):
        for c in self.conds:
            if c.satisfied(sch, owner):
                return True
        return False


class Not(Condition):
    def __init__(self, condition: Condition):
        if not isinstance(condition, Condition):
            raise ValueError(f"Not takes a condition, got {condition!r}")
        self.cond = condition

    def children(self):
        return [self.cond]

    def satisfied(self, sch, owner):
        return not self.cond.satisfied(sch, owner)

    @property
    def is_absolute(self):
        return self.cond.is_absolute


class NWhen(Condition):
    """Satisfied the first n times ``condition`` is."""

    def __init__(self, condition: Condition, n: int = 1):
        self.cond, self.n, self.count = condition, int(n), 0

    def children(self):
        return [self.cond]

    def satisfied(self, sch, owner):
        if self.count < self.n and self.cond.satisfied(sch, owner):
            self.count += 1
            return True
        return False


def _cmp_counter(name: str, op: Callable, query: TimeScale, default_scale: TimeScale, doc: str) -> type:
    def __init__(self, n: int, time_scale: Any = default_scale):
        self.n, self.time_scale = n, parse_time_scale(time_scale)

    def satisfied(self, sch, owner):
        return op(sch.clock.total(query, self.time_scale), self.n)

    def __repr__(self):
        return f"{name}({self.n}, {self.time_scale.name})"

    return type(
        name, (Condition,), {"__init__": __init__, "satisfied": satisfied, "__repr__": __repr__, "__doc__": doc}
    )


def _mod0(a: int, n: int) -> bool:
    return a % n == 0


BeforeConsiderationSetExecution = _cmp_counter("BeforeConsiderationSetExecution", operator.lt, CSE, ESU, "CSEs < n")
AtConsiderationSetExecution = _cmp_counter("AtConsiderationSetExecution", operator.eq, CSE, ESU, "CSEs == n")
AfterConsiderationSetExecution = _cmp_counter("AfterConsiderationSetExecution", operator.gt, CSE, ESU, "CSEs > n")
AfterNConsiderationSetExecutions = _cmp_counter("AfterNConsiderationSetExecutions", operator.ge, CSE, ESU, "CSEs >= n")
BeforePass = _cmp_counter("BeforePass", operator.lt, PASS, ESU, "passes < n")
AtPass = _cmp_counter("AtPass", operator.eq, PASS, ESU, "passes == n")
AfterPass = _cmp_counter("AfterPass", operator.gt, PASS, ESU, "passes > n")
AfterNPasses = _cmp_counter("AfterNPasses", operator.ge, PASS, ESU, "passes >= n")
EveryNPasses = _cmp_counter("EveryNPasses", _mod0, PASS, ESU, "passes % n == 0")
BeforeEnvironmentStateUpdate = _cmp_counter("BeforeEnvironmentStateUpdate", operator.lt, ESU, ES, "ESUs < n")
AtEnvironmentStateUpdate = _cmp_counter("AtEnvironmentStateUpdate", operator.eq, ESU, ES, "ESUs == n")
AfterEnvironmentStateUpdate = _cmp_counter("AfterEnvironmentStateUpdate", operator.gt, ESU, ES, "ESUs > n")
AfterNEnvironmentStateUpdates = _cmp_counter("AfterNEnvironmentStateUpdates", operator.ge, ESU, ES, "ESUs >= n")


def _seq_counter(name: str, op: Callable) -> type:
    def __init__(self, n: int):
        self.n = n

    def satisfied(self, sch, owner):
        return op(sch.clock.total(ES, LIFE), self.n)

    return type(name, (Condition,), {"__init__": __init__, "satisfied": satisfied})


AtEnvironmentSequence = _seq_counter("AtEnvironmentSequence", operator.eq)
AfterEnvironmentSequence = _seq_counter("AfterEnvironmentSequence", operator.gt)
AfterNEnvironmentSequences = _seq_counter("AfterNEnvironmentSequences", operator.ge)


def AtEnvironmentStateUpdateStart() -> Condition:  # noqa: N802
    return AtPass(0)


def AtEnvironmentStateUpdateNStart(n: int, time_scale: Any = ES) -> Condition:  # noqa: N802
    return All(AtPass(0), AtEnvironmentStateUpdate(n, time_scale))


def AtEnvironmentSequenceStart() -> Condition:  # noqa: N802
    return AtEnvironmentStateUpdate(0, ES)


def AtEnvironmentSequenceNStart(n: int) -> Condition:  # noqa: N802
    return All(AtEnvironmentStateUpdate(0), AtEnvironmentSequence(n))


def _calls_counter(name: str, op: Callable) -> type:
    def __init__(self, dependency: str, n: int, time_scale: Any = ESU):
        self.dep, self.n, self.time_scale = dependency, n, parse_time_scale(time_scale)
        self.dependencies = (dependency,)

    def satisfied(self, sch, owner):
        return op(sch.counts_total[self.time_scale][self.dep], self.n)

    def __repr__(self):
        return f"{name}({self.dep!r}, {self.n})"

    return type(name, (Condition,), {"__init__": __init__, "satisfied": satisfied, "__repr__": __repr__})


BeforeNCalls = _calls_counter("BeforeNCalls", operator.lt)
AtNCalls = _calls_counter("AtNCalls", operator.eq)
AfterCall = _calls_counter("AfterCall", operator.gt)
AfterNCalls = _calls_counter("AfterNCalls", operator.ge)


class AfterNCallsCombined(Condition):
    def __init__(self, *dependencies: str, n: Any = None, time_scale: Any = ESU):
        if n is None:
            raise ValueError("AfterNCallsCombined needs n")
        self.dependencies, self.n, self.time_scale = tuple(dependencies), n, parse_time_scale(time_scale)

    def satisfied(self, sch, owner):
        c = sch.counts_total[self.time_scale]
        return sum(c[d] for d in self.dependencies) >= self.n


class EveryNCalls(Condition):
    """The dependency ran at least n times since the owner last ran (in this trial)."""

    def __init__(self, dependency: str, n: int):
        self.dep, self.n = dependency, n
        self.dependencies = (dependency,)

    def satisfied(self, sch, owner):
        return sch.counts_useable[self.dep][owner] >= self.n

    def __repr__(self):
        return f"EveryNCalls({self.dep!r}, {self.n})"


class JustRan(Condition):
    def __init__(self, dependency: str):
        self.dep = dependency
        self.dependencies = (dependency,)

    def satisfied(self, sch, owner):
        el = sch.execution_list
        return bool(el) and self.dep in el[-1]


class AllHaveRun(Condition):
    def __init__(self, *dependencies: str, time_scale: Any = ESU):
        self.dependencies, self.time_scale = tuple(dependencies), parse_time_scale(time_scale)

    def satisfied(self, sch, owner):
        c = sch.counts_total[self.time_scale]
        for d in self.dependencies or sch.nodes:
            if c[d] < 1:
                return False
        return True

    def __repr__(self):
        return f"AllHaveRun({', '.join(map(repr, self.dependencies))})"


class WhenFinished(Condition):
    """The dependency has run in the current trial (MDF nodes finish when they run)."""

    def __init__(self, dependency: str):
        self.dep = dependency
        self.dependencies = (dependency,)

    def satisfied(self, sch, owner):
        return sch.counts_total[ESU][self.dep] >= 1


class WhenFinishedAny(Condition):
    def __init__(self, *dependencies: str):
        self.dependencies = tuple(dependencies)

    def satisfied(self, sch, owner):
        return any(sch.counts_total[ESU][d] >= 1 for d in self.dependencies or sch.nodes)


class WhenFinishedAll(Condition):
    def __init__(self, *dependencies: str):
        self.dependencies = tuple(dependencies)

    def satisfied(self, sch, owner):
        return all(sch.counts_total[ESU][d] >= 1 for d in self.dependencies or sch.nodes)


_ORDERINGS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_COMPARATORS = (*_ORDERINGS, "==", "!=")  # equality within atol / rtol


class Threshold(Condition):
    """A value of the dependency node (parameter, function, input or output port) compared with a
    threshold; ``indices`` pick an element; ``==``/``!=`` use atol/rtol."""

    def __init__(
        self,
        dependency: str,
        parameter: str,
        threshold: Any,
        comparator: str,
        indices: Any = None,
        atol: float = 0,
        rtol: float = 0,
    ):
        if comparator not in _COMPARATORS:
            raise ValueError(f"comparator must be one of {', '.join(_COMPARATORS)}, not {comparator!r}")
        self.dep, self.parameter, self.threshold, self.comparator = dependency, parameter, threshold, comparator
        if isinstance(indices, (TimeScale,)):
            indices = [int(indices)]
        elif indices is not None and not isinstance(indices, (list, tuple)):
            indices = [indices]
        self.indices, self.atol, self.rtol = indices, atol, rtol
        self.dependencies = (dependency,)

    def satisfied(self, sch, owner):
        v = sch.value_getter(self.dep, self.parameter)
        if self.indices is not None:
            # a value not computed yet is a scalar 0 (graph-scheduler reads the node's initial value)
            for i in self.indices:
                if np.ndim(v) == 0:
                    break
                v = v[i]
        v = float(np.asarray(v).reshape(-1)[0]) if np.size(v) == 1 else float(v)
        if self.comparator == "==":
            return bool(np.isclose(v, self.threshold, atol=self.atol, rtol=self.rtol))
        if self.comparator == "!=":
            return not bool(np.isclose(v, self.threshold, atol=self.atol, rtol=self.rtol))
        return _ORDERINGS[self.comparator](v, self.threshold)


class TimeInterval(Condition):
    """Absolute time (ms by default): every ``repeat`` from the owner's offset, within
    [start, end]."""

    @property
    def is_absolute(self) -> bool:
        return True

    def __init__(
        self,
        repeat: Any = None,
        start: Any = None,
        end: Any = None,
        unit: Any = "ms",
        start_inclusive: bool = True,
        end_inclusive: bool = True,
    ):
        if repeat is None and start is None and end is None:
            raise ValueError('at least one of "repeat", "start", "end" must be given')
        self.repeat, self.start, self.end = _to_ms(repeat, unit), _to_ms(start, unit), _to_ms(end, unit)
        if self.start is not None and self.end is not None and self.start > self.end:
            raise ValueError(f"start ({start}) is later than end ({end})")
        self.start_inclusive, self.end_inclusive = bool(start_inclusive), bool(end_inclusive)

    @property
    def absolute_intervals(self):
        return [self.repeat] if self.repeat is not None else []

    @property
    def absolute_fixed_points(self):
        fp = []
        if self.start_inclusive and self.start is not None:
            fp.append(self.start)
        if self.end_inclusive and self.end is not None:
            fp.append(self.end)
        return fp

    def satisfied(self, sch, owner):
        t = sch.clock.absolute
        ok = True
        if self.repeat is not None:
            if len(sch.queue) == 1 and self.start is not None:
                offset = self.start
            else:
                offset = sch.queue_index.get(owner, 0) * sch.clock.interval
            ok &= (t - offset) % self.repeat == 0
        if self.start is not None:
            ok &= t >= self.start if self.start_inclusive else t > self.start
        if self.end is not None:
            ok &= t <= self.end if self.end_inclusive else t < self.end
        return bool(ok)


class TimeTermination(Condition):
    @property
    def is_absolute(self) -> bool:
        return True

    def __init__(self, t: Any, inclusive: bool = True, unit: Any = "ms"):
        self.t, self.inclusive = _to_ms(t, unit), bool(inclusive)

    @property
    def absolute_fixed_points(self):
        return [self.t] if self.inclusive else []

    def satisfied(self, sch, owner):
        return sch.clock.absolute >= self.t if self.inclusive else sch.clock.absolute > self.t
