"""The MDF standard functions, and ONNX operators as ``onnx::Op`` functions.

Standard functions take the reference's argument names and formulas (``variable0`` is the input):

====================  =====================================================================
linear                variable0 * slope + intercept
logistic              1 / (1 + exp(-1*gain*(variable0 + bias) + offset))   (offset inside exp)
exponential           scale * exp(rate*variable0 + bias) + offset
sin cos tan           scale * f(variable0)
sinh cosh tanh        scale * f(variable0)
arcsin arccos arctan  scale * f(variable0)
MatMul                A @ B
Relu                  A * (A > 0)
drift_diffusion_...   Euler-Maruyama drift diffusion to +-threshold (vectorized, seedable)
ACT-R                 see :mod:`stdops.mdf.actr`
====================  =====================================================================

A function's ``args`` are evaluated in order (a later arg sees the earlier ones); an argument that
``args`` does not give is read from the node's port/parameter/function of that name, else takes the
function's default. ``onnx::Op`` calls the stdops kernel the ONNX binding table selects
(:func:`stdops.onnx.opset.select`, its public selector; no ONNX schema is read): named arguments are
mapped onto the kernel's inputs (ONNX's names, regardless of case), attributes come from ``args`` or
same-named node parameters, load-time constants reach the kernel's ``prepare`` through the one binder,
several outputs come back as a tuple (``name[0]``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

from .. import limits
from ..errors import StdopsError, UnsupportedOp, ValidationError
from ..ops.bind import bind
from ..ops.cognitive import actr
from ..ops.cognitive.ddm import drift_diffusion_integrator
from ..ops.mdf_standard import SCALED, MatMul, Relu, exponential, linear, logistic
from .expr import EXTRA_FUNCTIONS, Compiled, compile_value


@dataclasses.dataclass(frozen=True)
class StdFunction:
    """One MDF standard function."""

    name: str
    fn: Callable
    args: tuple  # argument names in order
    defaults: dict  # arg -> default
    description: str
    expression: str
    positional: bool = False  # called with args in the order ``args`` lists them (ACT-R)
    needs_rng: bool = False


STANDARD: dict[str, StdFunction] = {}


def _register(
    fn: Callable,
    name: str | None = None,
    description: str = "",
    expression: str = "",
    positional: bool = False,
    needs_rng: bool = False,
) -> None:
    name = name or fn.__name__
    sig = inspect.signature(fn)
    args, defaults = [], {}
    for p in sig.parameters.values():
        if p.name == "rng":
            continue
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            args.append(p.name)
            if p.default is not p.empty:
                defaults[p.name] = p.default
    doc = inspect.cleandoc(fn.__doc__ or "")
    STANDARD[name] = StdFunction(
        name,
        fn,
        tuple(args),
        defaults,
        description or doc.splitlines()[0] if doc else "",
        expression or (doc.splitlines()[0] if doc else name),
        positional,
        needs_rng,
    )


_register(linear, description="A linear function, calculated from a slope and an intercept")
_register(logistic, description="Logistic function")
_register(exponential, description="Exponential function")
for _n, _f in SCALED.items():
    _register(_f, _n, description=f"{_n} scaled: scale * {_n}(variable0)")
_register(MatMul, description="Matrix multiplication")
_register(Relu, description="Rectified linear function")
_register(
    drift_diffusion_integrator,
    needs_rng=True,
    description="Drift diffusion (Euler-Maruyama) to a symmetric threshold; signed response time",
)
for _n in actr.__all__:
    _register(getattr(actr, _n), positional=True, needs_rng=_n == "conflict_resolution_function")

# the standard functions are callable by name inside expressions too
for _n, _s in STANDARD.items():
    if not _s.needs_rng:
        EXTRA_FUNCTIONS.setdefault(_n, _s.fn)


# ---------------------------------------------------------------------------------------------
# Compiling a call (a Function or a Parameter with ``function``)


@dataclasses.dataclass
class CallContext:
    """What compiling a call needs from the engine."""

    path: str | None
    opset: int
    state: Any  # has .rng (numpy Generator), shared by the simulation
    compile_subgraph: Callable | None = None  # Graph -> runner (for onnx::Loop bodies)
    constants: dict = dataclasses.field(default_factory=dict)  # scope key -> value fixed at load time


def compile_args(
    args: Mapping[str, Any] | None, known: Mapping[str, Hashable], owner: str, where: str, path: str | None
) -> tuple[list[tuple[Hashable, Compiled]], dict[str, Hashable], set[str]]:
    """Compile ``args`` in order; each arg is stored in the scope under a private key that later
    args (and the function body) see by the arg's name."""
    steps: list[tuple[Hashable, Compiled]] = []
    local = dict(known)
    names: set[str] = set()
    for a, expr in (args or {}).items():
        c = compile_value(expr, local, where=f"{where}.args.{a}", path=path)
        key = ("arg", owner, a)
        steps.append((key, c))
        names |= {n for n in c.names if n in known and known[n] == local.get(n)}
        local[a] = key
    return steps, local, names


def compile_call(
    name: str,
    args: Mapping[str, Any] | None,
    known: Mapping[str, Hashable],
    owner: str,
    where: str,
    ctx: CallContext,
) -> tuple[Callable, set[str]]:
    """-> (fn(scope) -> value, the node ids it reads)."""
    steps, local, names = compile_args(args, known, owner, where, ctx.path)
    for (k, c), expr in zip(steps, (args or {}).values()):
        if c.const:
            ctx.constants[k] = c.value
        elif isinstance(expr, str) and known.get(expr.strip()) in ctx.constants:
            ctx.constants[k] = ctx.constants[known[expr.strip()]]  # the name of a load-time constant
    if name.startswith("onnx::"):
        impl, more = _compile_onnx(name[6:], args or {}, known, local, owner, where, ctx)
        names |= more
    elif name in STANDARD:
        impl, more = _compile_standard(STANDARD[name], args or {}, known, local, where, ctx)
        names |= more
    else:
        raise ValidationError(
            ctx.path,
            f"{where}.function",
            f"unknown function {name!r} (standard functions: {', '.join(sorted(STANDARD))}, or onnx::<Op>)",
        )
    if not steps:
        return impl, names

    def run(s: dict) -> Any:
        for k, c in steps:
            s[k] = c.fn(s)
        return impl(s)

    return run, names


def _compile_standard(
    std: StdFunction,
    args: Mapping[str, Any],
    known: Mapping[str, Hashable],
    local: Mapping[str, Hashable],
    where: str,
    ctx: CallContext,
) -> tuple[Callable, set[str]]:
    names: set[str] = set()
    if std.positional and args and not set(args) <= set(std.args):
        keys = [local[a] for a in args]  # the reference passes ACT-R args positionally, in order
        kw_names = None
    else:
        keys, kw_names = [], []
        for a in std.args:
            if a in args:
                keys.append(local[a])
            elif a in known:
                keys.append(known[a])
                names.add(a)
            elif a in std.defaults:
                keys.append(("const", std.defaults[a]))
            else:
                raise ValidationError(ctx.path, f"{where}.args", f"{std.name}: missing argument {a!r}")
            kw_names.append(a)
    fn = bind(std.fn).fn  # the kernel through the one binder (MDF's standard functions take no attributes)
    consts = {i: k[1] for i, k in enumerate(keys) if isinstance(k, tuple) and len(k) == 2 and k[0] == "const"}
    if std.needs_rng:
        state = ctx.state

        def run(s: dict) -> Any:
            vals = [consts[i] if i in consts else s[k] for i, k in enumerate(keys)]
            return fn(*vals, rng=state.rng)

        return run, names
    if consts:

        def run(s: dict) -> Any:
            return fn(*[consts[i] if i in consts else s[k] for i, k in enumerate(keys)])

        return run, names
    if len(keys) == 1:
        k0 = keys[0]
        return (lambda s: fn(s[k0])), names
    if len(keys) == 2:
        k0, k1 = keys
        return (lambda s: fn(s[k0], s[k1])), names
    if len(keys) == 3:
        k0, k1, k2 = keys
        return (lambda s: fn(s[k0], s[k1], s[k2])), names
    return (lambda s: fn(*[s[k] for k in keys])), names


# ---------------------------------------------------------------------------------------------
# ONNX operators, through the ONNX front end's public selector (stdops.onnx.opset.select): its
# input and attribute names are the kernel's (ONNX's, matched regardless of case), its bind the one
# binder; no schema is read.


def _find(name: str, table: Mapping[str, Any]) -> str | None:
    """The key of ``table`` that names ``name`` (exactly, else regardless of case)."""
    if name in table:
        return name
    low = name.lower()
    return next((k for k in table if k.lower() == low), None)


def _attr_value(value: Any, default: Any) -> Any:
    """An MDF value as the attribute a kernel takes, typed by the attribute's default (int, float, str,
    tuple), else by the value (a 0-d number a scalar, a vector a tuple, a matrix a tensor)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode()
    a = np.asarray(value)
    if isinstance(default, bool) or isinstance(default, int):
        return int(a.reshape(-1)[0])
    if isinstance(default, float):
        return float(a.reshape(-1)[0])
    if isinstance(default, str):
        return str(value)
    if a.dtype.kind in "OUS":
        return tuple(str(v) for v in a.reshape(-1)) if a.ndim else str(a.reshape(()).item())
    if isinstance(default, tuple) or a.ndim == 1:
        flat = a.reshape(-1)
        ints = flat.dtype.kind in "iub" or (flat.dtype.kind == "f" and np.all(flat == np.round(flat)))
        if isinstance(default, tuple) and default and isinstance(default[0], float):
            ints = False
        return tuple(int(v) for v in flat) if ints else tuple(float(v) for v in flat)
    if a.ndim == 0:
        v = a.item()
        return int(v) if a.dtype.kind in "iub" else v
    return a  # a TENSOR attribute


def _as_input(v: Any, like: np.dtype | None) -> Any:
    if v is None or isinstance(v, (np.ndarray, list, tuple)):
        return v
    if isinstance(v, (bool, np.bool_)):
        return np.asarray(v)
    if isinstance(v, (int, float, np.number)):
        a = np.asarray(v)
        if like is not None and a.dtype != like and a.dtype.kind in "iuf" and like.kind in "iuf":
            a = a.astype(like)
        return a
    return v


def _to_float64(r: Any) -> Any:
    if isinstance(r, np.ndarray) and r.dtype == np.float32:
        return r.astype(np.float64)
    if isinstance(r, tuple):
        return tuple(_to_float64(x) for x in r)
    return r


def _compile_onnx(
    op: str,
    args: Mapping[str, Any],
    known: Mapping[str, Hashable],
    local: Mapping[str, Hashable],
    owner: str,
    where: str,
    ctx: CallContext,
) -> tuple[Callable, set[str]]:
    from ..onnx.opset import select

    names: set[str] = set()

    def source(n: str) -> Hashable | None:
        a = _find(n, args)
        if a is not None:
            return local[a]
        k = _find(n, known)
        if k is not None:
            names.add(k)
            return known[k]
        return None

    if op in ("Loop",) and ctx.compile_subgraph is not None:
        return _compile_loop(args, known, local, where, ctx, source, names)
    try:
        entry = select(op, ctx.opset)
    except UnsupportedOp:
        raise UnsupportedOp("", op, ctx.opset, where, ctx.path) from None
    in_names = list(entry.input_names)
    variadic = entry.variadic
    input_keys = [source(n) for n in in_names]
    while input_keys and input_keys[-1] is None:
        input_keys.pop()
    defaults = entry.attributes
    used = {a for a in (_find(n, args) for n in in_names) if a is not None}
    attr_keys = {a: source(a) for a in defaults}
    attr_keys = {a: k for a, k in attr_keys.items() if k is not None}
    for a in args:  # named in args but neither an input nor an attribute of the kernel: the binder says so
        if a not in used and a not in attr_keys and _find(a, dict.fromkeys(in_names)) is None:
            attr_keys[a] = local[a]

    def bind(attr_values: dict) -> Callable:
        attrs = {a: _attr_value(v, defaults.get(a)) for a, v in attr_values.items() if v is not None}
        consts = [None if k is None else ctx.constants.get(k) for k in input_keys]
        try:
            return entry.bind(attrs, consts, n_inputs=len(input_keys), name=owner, path=ctx.path)
        except StdopsError as e:
            raise ValidationError(ctx.path, f"{where}.function", f"onnx::{op}: {e}") from None

    # attributes fixed at load time are bound once (and the constant inputs prepared); others on each call
    fixed = None
    if all(k in ctx.constants for k in attr_keys.values()):
        fixed = bind({a: ctx.constants[k] for a, k in attr_keys.items()})

    def call(s: dict) -> Any:
        vals = [None if k is None else s[k] for k in input_keys]
        if variadic and len(vals) == len(in_names) and isinstance(vals[-1], (list, tuple)):
            vals = vals[:-1] + list(vals[-1])
        like = next((v.dtype for v in vals if isinstance(v, np.ndarray) and v.dtype.kind == "f"), None)
        vals = [_as_input(v, like) for v in vals]
        fn = fixed if fixed is not None else bind({a: s[k] for a, k in attr_keys.items()})
        try:
            r = fn(*vals)
        except StdopsError:
            raise
        except Exception as e:  # noqa: BLE001 - a kernel refusing its inputs
            raise StdopsError(
                f"{ctx.path + ': ' if ctx.path else ''}{where}: onnx::{op}: {type(e).__name__}: {e}"
            ) from None
        if isinstance(r, tuple) and len(r) == 1:
            r = r[0]
        return _to_float64(r)

    return call, names


def _compile_loop(args, known, local, where, ctx, source, names) -> tuple[Callable, set[str]]:
    """onnx::Loop whose ``body`` is an MDF graph (as the reference's ONNX importer writes it)."""
    from .schema import graph_from_value

    body_key = source("body")
    body_val = None
    if body_key is not None:
        # the body is a constant parameter value: find it in the node's parameters via the scope
        body_val = ctx.constants.get(body_key)
    graph = graph_from_value(body_val)
    if graph is None:
        raise ValidationError(ctx.path, f"{where}", "onnx::Loop needs a 'body' parameter holding an MDF graph")
    runner = ctx.compile_subgraph(graph, f"{where}.body")
    m_key, cond_key = source("M"), source("cond")
    carried_keys = [local[a] for a in args if a not in ("M", "cond", "body")]
    cap = limits.max_loop_iterations()

    def call(s: dict) -> Any:
        m = None if m_key is None else s[m_key]
        trip = None if m is None else int(np.asarray(m).reshape(-1)[0]) if np.size(m) else 0
        cond = True if cond_key is None else bool(np.asarray(s[cond_key]).reshape(-1)[0])
        carried = [s[k] for k in carried_keys]
        i = 0
        while (trip is None or i < trip) and cond:
            if i >= cap:
                raise StdopsError(f"{where}: onnx::Loop ran {cap} iterations without stopping")
            outs = runner(i, cond, carried)
            cond_out, new = _split_loop_outputs(outs, len(carried))
            if cond_out is not None:
                cond = bool(np.asarray(cond_out).reshape(-1)[0])
            carried = new
            i += 1
        return carried[0] if len(carried) == 1 else tuple(carried)

    return call, names


def _split_loop_outputs(outs: list, n_carried: int) -> tuple[Any, list]:
    """Body outputs -> (condition, carried values): the one boolean output is the condition."""
    if len(outs) == n_carried:
        return None, list(outs)
    flags = [isinstance(v, (bool, np.bool_)) or (isinstance(v, np.ndarray) and v.dtype == np.bool_) for v in outs]
    if flags.count(True) == 1:
        i = flags.index(True)
        rest = outs[:i] + outs[i + 1 :]
        return outs[i], rest[:n_carried]
    return outs[0], list(outs[1 : 1 + n_carried])
