"""A differential fuzzer over the param space of every ncnn layer, driven by the layer declarations.

For each case of a layer, every param of its table (stdops.ncnn.spec: ``P`` id / name / kind / default /
``Ref``) is either left at its default or drawn from its documented values (the layer's ``Space`` in
tests/ncnn/fuzz_spaces*.py: ranges, edges such as 0 / -233 / -234 / negative axes, every activation_type
with its params, the int8 / dynamic-weight / kv-cache / attn-mask forms); float arrays and float params are
given as ints where their values allow, and about a third of the batches go to the wheel as a text .param
(the rest binary). The input rank is drawn from the ranks the layer accepts, then a Space's ``fix`` makes
shapes and size params agree (weight_data_size, channels). The weights come from the declared ``W``
list (sizes and tags), the output count from the layer's own rule.

Each case runs in stdops and in the official wheel (forked, exact fp32: tests/ncnn/wheel.py). A case is
redrawn only where the wheel itself refuses or crashes (a crashing batch is bisected to the case); where
the wheel answers, stdops must answer the same (a refusal by stdops is a failure), compared where the wheel
is deterministic (tests/ncnn/quirks.py and a Space's ``mask``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import stdops.ncnn as sn
from stdops.ncnn.spec import LAYERS, P, Ref, resolve_params

from . import quirks, wheel

FLT_MAX = float(np.finfo(np.float32).max)


@dataclasses.dataclass
class Space:
    """How to draw one layer's cases. ``choices`` maps a param name to its documented values (a list; an
    item may be a callable of the Ctx, for values that depend on the rank or shape). ``fix(ctx)`` makes
    shapes and derived params agree; ``inputs(ctx)`` / ``weights(ctx, declared)`` build the arrays (default:
    one blob of ``ctx.shape``, declared weights drawn by name); ``mask(ctx, k, theirs)`` limits the
    comparison of output k; ``compare(ctx, ours, theirs)`` replaces it."""

    ranks: tuple[int, ...] = (1, 2, 3, 4)
    choices: dict[str, Sequence[Any]] = dataclasses.field(default_factory=dict)
    fix: Callable[[Ctx], None] | None = None
    inputs: Callable[[Ctx], list[np.ndarray]] | None = None
    weights: Callable[[Ctx, list], list[np.ndarray]] | None = None
    mask: Callable[[Ctx, int, np.ndarray], np.ndarray | None] | None = None
    compare: Callable[[Ctx, list, list], None] | None = None
    omit: float = 0.4  # chance that a param is left at its default
    atol: float = 1e-4
    rtol: float = 1e-4
    n_out: Callable[[Ctx], int] | None = None
    unpack: bool = False  # the wheel may answer a packed blob (Packing)


class Ctx:
    """One case being drawn: the rng, the rank and shape of bottom 0, params by name, anything else."""

    def __init__(self, rng: np.random.Generator, type_name: str, space: Space):
        self.rng, self.type_name, self.space = rng, type_name, space
        self.spec = LAYERS[type_name]
        self.rank = int(rng.choice(space.ranks))
        self.shape = [int(v) for v in rng.integers(1, 7, self.rank)]
        self.params: dict[str, Any] = {}
        self.extra: dict[str, Any] = {}
        self.inputs: list[np.ndarray] = []
        self.weights: list[np.ndarray] = []

    # helpers for spaces
    def has(self, name: str) -> bool:
        return name in self.params

    def get(self, name: str) -> Any:
        """The param's value as the layer will see it (drawn, or its default / Ref)."""
        if name in self.params:
            return self.params[name]
        by_name = {p.name: p for p in self.spec.params}
        d = by_name[name].default
        while isinstance(d, Ref):
            if d.name in self.params:
                return self.params[d.name]
            d = by_name[d.name].default
        return d

    def f32(self, *shape, lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
        return self.rng.uniform(lo, hi, shape).astype(np.float32)

    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def ids(self) -> dict[int, Any]:
        by_name = {p.name: p for p in self.spec.params}
        return {by_name[n].id: v for n, v in self.params.items()}


def _generic(p: P, kind: str) -> list[Any]:
    """Edges for a param no Space documents (kept small: a missing Space entry is visible in coverage)."""
    if kind == "int":
        return [0, 1, 2]
    if kind == "float":
        return [0.0, 0.5, 1.0, -1.0]
    if kind == "str":
        return [""]
    if kind == "ints":
        return [[], [0], [1]]
    return [[], [0.5], [1.0, 2.0]]


def _as_written(rng, value: Any, kind: str) -> Any:
    """A float (array) with whole values is sometimes written as ints: ncnn converts int literals for
    float params, and so must stdops."""
    if (
        kind == "float"
        and isinstance(value, float)
        and value.is_integer()
        and abs(value) < 2**31
        and rng.random() < 0.4
    ):
        return int(value)
    if kind == "floats" and isinstance(value, list) and value and rng.random() < 0.4:
        if all(isinstance(v, float) and v.is_integer() and abs(v) < 2**31 for v in value):
            return [int(v) for v in value]
    return value


def draw_params(ctx: Ctx) -> None:
    space = ctx.space
    by_name = {p.name: p for p in ctx.spec.params}
    for p in ctx.spec.params:
        if ctx.rng.random() < space.omit:
            continue
        kind = p.resolved_kind(by_name)
        options = space.choices.get(p.name)
        if options is None:
            options = _generic(p, kind)
        if not len(options):
            continue
        v = options[int(ctx.rng.integers(len(options)))]
        if callable(v):
            v = v(ctx)
        if v is None:  # "leave at the default"
            continue
        if isinstance(v, tuple):
            v = list(v)
        ctx.params[p.name] = v


def default_weights(ctx: Ctx, declared: list) -> list[np.ndarray]:
    out = []
    for w in declared:
        n = int(w.size)
        name = w.name
        if "scale" in name:
            out.append(ctx.rng.uniform(0.5, 2.0, n).astype(np.float32))
        elif "var" in name:
            out.append(ctx.rng.uniform(0.1, 2.0, n).astype(np.float32))
        else:
            out.append(ctx.rng.uniform(-1.0, 1.0, n).astype(np.float32))
    return out


@dataclasses.dataclass
class Case:
    type_name: str
    params: dict[int, Any]
    weights: list[np.ndarray]
    inputs: list[np.ndarray]
    n_out: int
    ctx: Ctx
    wheel_inputs: list[np.ndarray] | None = None  # what the wheel is fed, where it differs (payloads)

    def as_tuple(self):
        """What the wheel runs: the case, or (ctx.extra["wheel_case"]) an equivalent one where the wheel
        cannot take this form itself (a kv cache in its own packed layout)."""
        if "wheel_case" in self.ctx.extra:
            return (self.type_name, *self.ctx.extra["wheel_case"])
        return (self.type_name, self.params, self.weights, self.wheel_inputs or self.inputs, self.n_out)


def draw_case(type_name: str, space: Space, rng: np.random.Generator) -> Case | None:
    ctx = Ctx(rng, type_name, space)
    draw_params(ctx)
    if space.fix is not None:
        if space.fix(ctx) is False:
            return None
    by_name = {p.name: p for p in ctx.spec.params}
    for name, v in list(ctx.params.items()):
        ctx.params[name] = _as_written(rng, v, by_name[name].resolved_kind(by_name))
    inputs = space.inputs(ctx) if space.inputs is not None else [ctx.f32(*ctx.shape)]
    ctx.inputs = inputs
    n_out = space.n_out(ctx) if space.n_out is not None else sn._own_output_count(type_name, ctx.ids(), len(inputs))
    params = ctx.ids()
    try:
        resolved = resolve_params(ctx.spec, dict(params), type_name, None, len(inputs), n_out)
        declared = list(ctx.spec.weights(resolved))
    except Exception:  # noqa: BLE001 - params that do not define weights: not a case
        return None
    if any(int(w.size) < 0 or int(w.size) > 2_000_000 for w in declared):
        return None
    weights = space.weights(ctx, declared) if space.weights is not None else default_weights(ctx, declared)
    ctx.weights = weights
    n_out = ctx.extra.get("n_out", n_out)  # a weights hook may complete the case (MultiHeadAttention's cache)
    return Case(type_name, params, weights, inputs, n_out, ctx, ctx.extra.get("wheel_inputs"))


# ----------------------------------------------------------------------------- running against the wheel
@dataclasses.dataclass
class Result:
    type_name: str
    compared: int = 0
    redrawn: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)
    #: param ids set (not left at their default) in the compared cases
    ids_seen: set[int] = dataclasses.field(default_factory=set)


def _wheel_answers(cases: list[Case], text: bool) -> list[Any]:
    """The wheel's outputs per case; a case whose batch refused or crashed is isolated by bisection and
    answered with the OracleError."""
    unpack = any(c.ctx.space.unpack for c in cases)
    try:
        return wheel.wheel_batch([c.as_tuple() for c in cases], unpack=unpack, text=text)
    except (wheel.OracleError, ValueError) as e:  # ValueError: a value the text format cannot hold
        if len(cases) == 1:
            if isinstance(e, ValueError) and text:
                return _wheel_answers(cases, False)
            return [e]
        mid = len(cases) // 2
        return _wheel_answers(cases[:mid], text) + _wheel_answers(cases[mid:], text)


def _ours(case: Case) -> list[np.ndarray] | Exception:
    try:
        return sn.run_layer(case.type_name, dict(case.params), case.weights, case.inputs, case.n_out)
    except Exception as e:  # noqa: BLE001 - any refusal (or bug) where the wheel answered is a failure
        return e


#: check_case's answer for a case the wheel did not really answer
REDRAW = "redraw"


def check_case(case: Case, theirs: Any) -> str | None:
    """None when stdops agrees with the wheel; else what differs."""
    what = f"{case.type_name} params {case.params} inputs {[np.shape(x) for x in case.inputs]}"
    ours = _ours(case)
    if isinstance(ours, Exception):
        if any(np.size(t) == 0 for t in theirs):
            return REDRAW  # the wheel "answered" an empty Mat: no blob (a window or crop left nothing)
        return f"{what}: stdops refused ({type(ours).__name__}: {ours}) where the wheel answered"
    space = case.ctx.space
    try:
        if space.compare is not None:
            space.compare(case.ctx, ours, theirs)
            return None
        masks = []
        for k in range(len(theirs)):
            m = quirks.compare_mask(case.type_name, case.params, case.inputs, k)
            if space.mask is not None:
                m2 = space.mask(case.ctx, k, theirs[k])
                m = m2 if m is None else (m if m2 is None else m & m2)
            masks.append(m)
        ours_f = [np.asarray(o).astype(np.float32) if np.asarray(o).dtype != np.float32 else o for o in ours]
        theirs_f = [np.asarray(t).astype(np.float32) for t in theirs]
        atol, rtol = case.ctx.extra.get("tol", (space.atol, space.rtol))
        wheel.assert_close(ours_f, theirs_f, atol=atol, rtol=rtol, what=what, masks=masks)
    except AssertionError as e:
        return str(e)[:2000]
    return None


def fuzz_layer(type_name: str, space: Space, n_cases: int, seed: int, batch: int = 40) -> Result:
    """Draw and compare cases of one layer until ``n_cases`` were compared with the wheel."""
    rng = np.random.default_rng([seed, sum(map(ord, type_name)), len(type_name)])
    res = Result(type_name)
    attempts = 0
    while res.compared < n_cases and attempts < 40 * n_cases:
        want = min(batch, n_cases - res.compared)
        cases = []
        while len(cases) < want and attempts < 40 * n_cases:
            attempts += 1
            c = draw_case(type_name, space, rng)
            if c is None:
                res.redrawn += 1
                continue
            cases.append(c)
        if not cases:
            break
        text = bool(rng.random() < 0.33)
        answers = _wheel_answers(cases, text)
        for case, ans in zip(cases, answers):
            if isinstance(ans, Exception) or any(isinstance(t, Exception) for t in ans):
                res.redrawn += 1  # the wheel itself refused or crashed: not a case
                wheel.COUNTS[type_name] -= 0 if isinstance(ans, Exception) else 1
                continue
            msg = check_case(case, ans)
            if msg == REDRAW:
                res.redrawn += 1
                wheel.COUNTS[type_name] -= 1
                continue
            res.compared += 1
            res.ids_seen.update(case.params)
            if msg is not None:
                res.failures.append(msg)
    return res
