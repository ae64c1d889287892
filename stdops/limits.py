"""Resource limits: a model must not make us allocate memory or spend time its inputs don't justify.

One set of limits, read at import from the environment and settable from Python, bounds everything a
model file can ask for. Defaults are far above what a real model needs and far below what would take
this machine down:

=====================  ==========================  =====================================================
setting                environment variable        what it bounds
=====================  ==========================  =====================================================
max_elements           STDOPS_MAX_ELEMENTS         elements of one value whose size comes from the model
max_bytes              STDOPS_MAX_BYTES            bytes of one such value (strings and objects counted
                                                   by their size, not by pointer)
max_loop_iterations    STDOPS_MAX_LOOP_ITERATIONS  Loop / Scan body runs in one run, added up across
                                                   nesting (and the steps of one MDF integration)
max_function_depth     STDOPS_MAX_FUNCTION_DEPTH   how deep ONNX functions may call functions
max_graph_nodes        STDOPS_MAX_GRAPH_NODES      nodes one ONNX load compiles, function bodies and
                                                   subgraphs included (exponential inlining stops here)
max_int_bits           STDOPS_MAX_INT_BITS         bits of an integer an MDF expression computes
max_sequence           STDOPS_MAX_SEQUENCE         characters of a string / items of a list or tuple an
                                                   MDF expression builds
max_work               STDOPS_MAX_WORK             elements an MDF expression's sized operations may
                                                   touch in one load or one evaluation
max_yaml_nodes         STDOPS_MAX_YAML_NODES       values an MDF YAML file holds once aliases expand
=====================  ==========================  =====================================================

``stdops.limits.configure(max_bytes=2**32, ...)`` changes them for the process (returns the old
values); ``with stdops.limits.override(...):`` changes them for the current thread / context only.

Counted quantities (Loop iterations, compiled nodes, expression work) are charged to **one budget per
run and per load**: ``with budget("run"):`` opens one (a nested ``budget`` joins the open one), and
``charge_*`` adds to it. A budget lives in a context variable, so threads never share one.

Kernels whose output size comes from tensor *values* (ConstantOfShape, Expand, Tile, Range, OneHot,
Pad, Resize, ...) call :func:`check_elements` before allocating.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import os
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

from .errors import ResourceLimitError


@dataclasses.dataclass(frozen=True)
class Limits:
    """The limits in force (see the module docstring for each field)."""

    max_elements: int = 2**31
    max_bytes: int = 2**31
    max_loop_iterations: int = 1_000_000
    max_function_depth: int = 32
    max_graph_nodes: int = 1_000_000
    max_int_bits: int = 4096
    max_sequence: int = 1_000_000
    max_work: int = 2**30
    max_yaml_nodes: int = 1_000_000


#: field -> environment variable
ENV = {f.name: "STDOPS_" + f.name.upper() for f in dataclasses.fields(Limits)}


def _from_env() -> Limits:
    vals: dict[str, int] = {}
    for name, var in ENV.items():
        raw = os.environ.get(var)
        if raw is None:
            continue
        try:
            v = int(raw.replace("_", ""))
            if v < 0:
                raise ValueError
            vals[name] = v
        except ValueError:
            warnings.warn(f"{var}={raw!r} is not a non-negative integer; using the default", stacklevel=2)
    return Limits(**vals)


_settings: Limits = _from_env()
_override: contextvars.ContextVar[Limits | None] = contextvars.ContextVar("stdops_limits", default=None)


def get() -> Limits:
    """The limits in force here (a context's override, else the process-wide settings)."""
    o = _override.get()
    return o if o is not None else _settings


def _validated(kw: dict[str, Any]) -> dict[str, int]:
    names = {f.name for f in dataclasses.fields(Limits)}
    out = {}
    for k, v in kw.items():
        if k not in names:
            raise TypeError(f"unknown limit {k!r} (known: {', '.join(sorted(names))})")
        if v is None:
            continue
        v = int(v)
        if v < 0:
            raise ValueError(f"limit {k} must be >= 0, got {v}")
        out[k] = v
    return out


def configure(**kw: int | None) -> dict[str, int]:
    """Set limits for the whole process (``None`` leaves one unchanged); returns the previous values of
    the ones changed, so ``configure(**old)`` restores them. The CLI's --max-* flags call this."""
    global _settings
    vals = _validated(kw)
    old = {k: getattr(_settings, k) for k in vals}
    _settings = dataclasses.replace(_settings, **vals)
    return old


@contextlib.contextmanager
def override(**kw: int | None) -> Iterator[Limits]:
    """Limits changed for this thread / context only, for the ``with`` block."""
    new = dataclasses.replace(get(), **_validated(kw))
    tok = _override.set(new)
    try:
        yield new
    finally:
        _override.reset(tok)


# ------------------------------------------------------------------ the older single-limit API
def max_elements() -> int:
    return get().max_elements


def set_max_elements(n: int) -> int:
    """Set the element limit (process-wide); returns the previous one."""
    return configure(max_elements=n)["max_elements"]


def max_loop_iterations() -> int:
    return get().max_loop_iterations


def set_max_loop_iterations(n: int) -> int:
    """Set the Loop iteration cap (process-wide); returns the previous one."""
    return configure(max_loop_iterations=n)["max_loop_iterations"]


# ------------------------------------------------------------------ sizes
def _hint(name: str) -> str:
    return f"raise it with stdops.limits.configure({name}=...) or {ENV[name]}"


def _dim(d: Any, what: str) -> int:
    """One dimension as an int; a NaN, an infinity or a fraction is refused (never cast to INT_MIN)."""
    if isinstance(d, (int, np.integer)):
        return int(d)
    try:
        f = float(d)
    except (TypeError, ValueError):
        raise ResourceLimitError(f"{what}: dimension {d!r} is not a number") from None
    if not math.isfinite(f) or f != int(f):
        raise ResourceLimitError(f"{what}: dimension {d!r} is not a whole number")
    return int(f)


def check_elements(shape, what: str = "output", itemsize: int | None = None) -> None:
    """Refuse a tensor of ``shape`` (any iterable of ints) above the element limit, above the byte limit
    (``itemsize`` bytes per element; 1 when not given), or with a negative or non-integer dimension."""
    dims = [_dim(d, what) for d in shape]
    if any(d < 0 for d in dims):
        raise ResourceLimitError(f"{what}: negative dimension in shape {tuple(dims)}")
    n = math.prod(dims)
    lim = get()
    if n > lim.max_elements:
        raise ResourceLimitError(
            f"{what}: shape {tuple(dims)} has {n} elements, above the limit of {lim.max_elements} "
            f"({_hint('max_elements')})"
        )
    if itemsize is not None and n * itemsize > lim.max_bytes:
        raise ResourceLimitError(
            f"{what}: shape {tuple(dims)} of {itemsize}-byte elements needs {n * itemsize} bytes, above the "
            f"limit of {lim.max_bytes} ({_hint('max_bytes')})"
        )


def check_array(shape, dtype: Any, what: str = "output") -> None:
    """``check_elements`` with the bytes of ``dtype`` (an object element counted as a pointer; the
    strings it holds are checked by :func:`check_bytes` where they are made)."""
    check_elements(shape, what, np.dtype(dtype).itemsize or 1)


def check_bytes(n: int, what: str = "output") -> None:
    """Refuse a value of ``n`` bytes (e.g. the characters of the strings a string op would build)."""
    lim = get().max_bytes
    if n > lim:
        raise ResourceLimitError(f"{what}: {n} bytes, above the limit of {lim} ({_hint('max_bytes')})")


# ------------------------------------------------------------------ one budget per run / load
class Budget:
    """What one run or one load has spent of the counted limits."""

    __slots__ = ("limits", "what", "loop_iterations", "graph_nodes", "work")

    def __init__(self, what: str = "run", limits: Limits | None = None):
        self.limits = limits if limits is not None else get()
        self.what = what
        self.loop_iterations = 0
        self.graph_nodes = 0
        self.work = 0

    def charge_loop(self, n: int = 1, what: str = "Loop") -> None:
        self.loop_iterations += n
        if self.loop_iterations > self.limits.max_loop_iterations:
            raise ResourceLimitError(
                f"{what}: more than {self.limits.max_loop_iterations} loop iterations in one {self.what} "
                f"(counted across nested loops; {_hint('max_loop_iterations')})"
            )

    def charge_nodes(self, n: int = 1, what: str = "graph") -> None:
        self.graph_nodes += n
        if self.graph_nodes > self.limits.max_graph_nodes:
            raise ResourceLimitError(
                f"{what}: more than {self.limits.max_graph_nodes} nodes in one {self.what}, function bodies "
                f"and subgraphs included ({_hint('max_graph_nodes')})"
            )

    def charge_work(self, n: int, what: str = "expression") -> None:
        self.work += n
        if self.work > self.limits.max_work:
            raise ResourceLimitError(
                f"{what}: expressions touched more than {self.limits.max_work} elements in one {self.what} "
                f"({_hint('max_work')})"
            )


_budget: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("stdops_budget", default=None)


@contextlib.contextmanager
def budget(what: str = "run") -> Iterator[Budget]:
    """Open the budget of one run or load (``what`` names it in messages); inside an open budget, join it."""
    b = _budget.get()
    if b is not None:
        yield b
        return
    b = Budget(what)
    tok = _budget.set(b)
    try:
        yield b
    finally:
        _budget.reset(tok)


def current() -> Budget:
    """The open budget, or a fresh one that counts only the caller's own charges."""
    b = _budget.get()
    return b if b is not None else Budget("call")
