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
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from ..errors import StdopsError, UnsupportedOp, ValidationError
from ..ops.bind import bind
from ..ops.cognitive import actr
from ..ops.cognitive import psyneulink as pnl
from ..ops.cognitive.ddm import drift_diffusion_integrator
from ..ops.cognitive.ddm import replicated as replicated_ddm
from ..ops.mdf_standard import SCALED, MatMul, Relu, exponential, linear, logistic
from . import replicas
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

#: PsyNeuLink's functions, by the names its exports write (``type(function).__name__.lower()``) and by
#: class name (older exports); see :mod:`stdops.ops.cognitive.psyneulink`
PSYNEULINK_FUNCTIONS = {
    "relu": pnl.relu,
    "ReLU": pnl.relu,
    "driftdiffusionanalytical": pnl.drift_diffusion_analytical,
    "DriftDiffusionAnalytical": pnl.drift_diffusion_analytical,
    "SimpleIntegrator": pnl.simple_integrator,
    "AdaptiveIntegrator": pnl.adaptive_integrator,
    "AccumulatorIntegrator": pnl.accumulator_integrator,
}
for _n, _f in PSYNEULINK_FUNCTIONS.items():
    _register(_f, _n, description=f"PsyNeuLink's {_n}")

# the standard functions are callable by name inside expressions too (once per replica when an argument
# differs between the replicas of a replicated run)
for _n, _s in STANDARD.items():
    if not _s.needs_rng:
        EXTRA_FUNCTIONS.setdefault(_n, replicas.per_replica_function(_s.fn))


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
    producer: str | None = None  # the model's generating_application (for messages)
    output_counts: dict = dataclasses.field(default_factory=dict)  # call id -> outputs its node reads ([i])


def string_constant(value: str) -> Compiled:
    """A string value that is not an expression (an ONNX STRING attribute: ``mode: constant``)."""
    return Compiled(lambda s: value, frozenset(), True, value, value)


def compile_args(
    args: Mapping[str, Any] | None,
    known: Mapping[str, Hashable],
    owner: str,
    where: str,
    path: str | None,
    strings: AbstractSet[str] = frozenset(),
    maybe_strings: AbstractSet[str] = frozenset(),
) -> tuple[list[tuple[Hashable, Compiled]], dict[str, Hashable], set[str]]:
    """Compile ``args`` in order; each arg is stored in the scope under a private key that later
    args (and the function body) see by the arg's name. An arg named in ``strings`` whose value is a
    string that names nothing is that string; one in ``maybe_strings``, when it does not compile either."""
    steps: list[tuple[Hashable, Compiled]] = []
    local = dict(known)
    names: set[str] = set()
    for a, expr in (args or {}).items():
        if a in strings and isinstance(expr, str) and expr not in local:
            c = string_constant(expr)
        elif a in maybe_strings and isinstance(expr, str) and expr not in local:
            try:
                c = compile_value(expr, local, where=f"{where}.args.{a}", path=path)
            except StdopsError:  # not an expression: the string itself (Einsum's "ij,jk->ik")
                c = string_constant(expr)
        else:
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
    if name.startswith("onnx:") and not name.startswith("onnx::"):
        name = "onnx::" + name[5:]  # modeci-mdf's Keras interface writes "onnx:Transpose"
    strings: set[str] = set()
    maybe_strings: set[str] = set()
    if name.startswith("onnx::") and args:
        args = {a: _quoted_ids(v, known) for a, v in args.items()}
        strings, maybe_strings = onnx_string_attributes(name, ctx.opset)
    steps, local, names = compile_args(args, known, owner, where, ctx.path, strings, maybe_strings)
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
    elif ctx.producer and ctx.producer.startswith("PsyNeuLink"):
        raise ValidationError(
            ctx.path,
            f"{where}.function",
            f"function {name!r} of PsyNeuLink is not implemented (PsyNeuLink functions stdops runs: "
            f"{', '.join(sorted(PSYNEULINK_FUNCTIONS))}; and every function PsyNeuLink writes as an expression)",
        )
    else:
        raise ValidationError(
            ctx.path,
            f"{where}.function",
            f"unknown function {name!r} (standard functions: {', '.join(sorted(STANDARD))}, or onnx::<Op>)",
        )
    fn = impl
    if steps:

        def fn(s: dict) -> Any:
            for k, c in steps:
                s[k] = c.fn(s)
            return impl(s)

    if isinstance(ctx.state, replicas.ReplicaState) and name != _LIFTED_RANDOM:
        # a replicated run: the call runs once per replica where the replicas' values differ (or it draws
        # random numbers); the drift-diffusion integrator is lifted whole instead (_compile_standard)
        std = STANDARD.get(name)
        fn = replicas.per_replica_call(
            fn, ctx.state, random=std is not None and std.needs_rng, stateful=name in ("onnx::Loop", "onnx::If")
        )
    return fn, names


#: the random function a replicated run computes for all replicas in one call (stdops.ops.cognitive.ddm)
_LIFTED_RANDOM = "drift_diffusion_integrator"


def _quoted_ids(value: Any, known: Mapping[str, Hashable]) -> Any:
    """modeci-mdf's PyTorch/ONNX importers write a variadic input as a string holding a list of quoted ids
    (``"['_14', '_20']"``): the list of those values (``[_14, _20]``). A literal, never code."""
    import ast

    if not isinstance(value, str) or not value.lstrip().startswith(("[", "(")):
        return value
    try:
        items = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value
    if isinstance(items, (list, tuple)) and items and all(isinstance(i, str) and i in known for i in items):
        return "[" + ", ".join(items) + "]"
    return value


def onnx_string_attributes(name: str, opset: int) -> tuple[set[str], set[str]]:
    """The attributes of ``onnx::Op`` whose value may be a plain string rather than an expression: those
    whose default is a string (``mode`` of Pad, ``auto_pad``: a written value that names nothing is that
    string), and the required ones with no default to tell (Einsum's ``equation``: a string when it does
    not compile as an expression). Read from the kernel the ONNX binding table selects, not a schema."""
    from ..onnx.opset import select
    from ..ops._registry import REQUIRED

    if not name.startswith("onnx::"):
        return set(), set()
    try:
        entry = select(name[6:], opset)
    except UnsupportedOp:  # reported when the call is compiled
        return set(), set()
    attrs = entry.attributes
    definite = {
        a for a, d in attrs.items() if isinstance(d, str) or (isinstance(d, tuple) and d and isinstance(d[0], str))
    }
    return definite, {a for a, d in attrs.items() if d is REQUIRED}


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
        if std.name == _LIFTED_RANDOM and isinstance(state, replicas.ReplicaState):

            def run(s: dict) -> Any:  # every replica's call in one walk, each on its own generator
                vals = [consts[i] if i in consts else s[k] for i, k in enumerate(keys)]
                per_call = [[replicas.per_replica_value(v, k) for v in vals] for k in range(state.n)]
                out = replicated_ddm(state.rngs, per_call)
                return replicas.Replicas(out, "array" if out.ndim > 1 else "float")

            return run, names

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
# ONNX operators

#: element-wise ops used only when no stdops kernel binds them yet (numpy formulas)
_FALLBACK_UNARY = {
    "Sin": np.sin,
    "Cos": np.cos,
    "Tan": np.tan,
    "Asin": np.arcsin,
    "Acos": np.arccos,
    "Atan": np.arctan,
    "Sinh": np.sinh,
    "Cosh": np.cosh,
    "Asinh": np.arcsinh,
    "Acosh": np.arccosh,
    "Atanh": np.arctanh,
}


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


def _reconcile(v: Any) -> Any:
    """An onnx:: argument as the reference passes it to onnxruntime: JSON numbers and lists become arrays,
    float64 becomes float32 (MDF parameters arrive as float64, weights as float32; ONNX kernels want one
    float type, and the reference computes every onnx:: op in float32). The kernels' own dtype rules stay."""
    if v is None or isinstance(v, (bool, np.bool_)):
        return v if v is None else np.asarray(v)
    if isinstance(v, float):
        return np.asarray(v, dtype=np.float32)
    if isinstance(v, list):
        try:
            v = np.asarray(v)
        except ValueError:
            return v
    if isinstance(v, np.ndarray) and v.dtype == np.float64:
        return v.astype(np.float32)
    return v


def _as_input(v: Any, like: np.dtype | None) -> Any:
    """A Python integer beside float tensors takes their type (``Mul(x, 2)``)."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        a = np.asarray(v)
        if like is not None and like.kind == "f":
            a = a.astype(like)
        return a
    return v


def _to_float64(r: Any) -> Any:
    if isinstance(r, np.ndarray) and r.dtype == np.float32:
        return r.astype(np.float64)
    if isinstance(r, tuple):
        return tuple(_to_float64(x) for x in r)
    return r


#: ONNX inputs whose type constraint is an integer tensor (axes, shapes, indices, counts): a Python integer
#: written for one stays an integer instead of taking the float type of the call's other inputs
_INTEGER_INPUTS = frozenset(
    {"axes", "shape", "indices", "repeats", "pads", "split", "k", "starts", "ends", "steps", "sizes", "M", "depth"}
)


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

    if op in ("Loop", "If") and ctx.compile_subgraph is not None:
        from .control import compile_if, compile_loop

        return (compile_loop if op == "Loop" else compile_if)(args, local, where, ctx, source, names)
    try:
        entry = select(op, ctx.opset)
    except UnsupportedOp:
        if op in _FALLBACK_UNARY and len(args) == 1:
            f, k0 = _FALLBACK_UNARY[op], local[next(iter(args))]
            return (lambda s: _to_float64(f(np.asarray(s[k0])))), names
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

    # outputs: as many as the node reads (``fid[i]``), else one (MaxPool's Indices and Dropout's mask are not
    # computed when nothing reads them); a kernel that splits into the node's output count (it takes
    # ``n_outputs``: Split) gets the count its split sizes give
    indexed = owner in ctx.output_counts  # the node reads ``owner[i]``: the call gives a tuple (as the reference)
    n_out = max(ctx.output_counts.get(owner, 0), 1)
    if "n_outputs" in defaults and not indexed:
        split_key = attr_keys.get("split")
        if split_key is None and "split" in in_names and in_names.index("split") < len(input_keys):
            split_key = input_keys[in_names.index("split")]
        split = ctx.constants.get(split_key) if split_key is not None else None
        n_out = len(np.atleast_1d(split)) if split is not None else 1
    int_positions = {i for i, n in enumerate(in_names) if n in _INTEGER_INPUTS}

    # load-time constant inputs, reconciled once: the same objects reach ``prepare`` and every call (the
    # binder's prepared step runs while its inputs are the objects it was prepared for)
    const_inputs = {
        i: _reconcile(ctx.constants[k])
        for i, k in enumerate(input_keys)
        if k in ctx.constants and not (variadic and i == len(in_names) - 1)  # a list may stand for the variadic rest
    }

    def bind_call(attr_values: dict) -> Callable:
        attrs = {a: _attr_value(v, defaults.get(a)) for a, v in attr_values.items() if v is not None}
        consts = [const_inputs.get(i) for i in range(len(input_keys))]
        try:
            return entry.bind(attrs, consts, n_inputs=len(input_keys), n_outputs=n_out, name=owner, path=ctx.path)
        except StdopsError as e:
            raise ValidationError(ctx.path, f"{where}.function", f"onnx::{op}: {e}") from None

    # attributes fixed at load time are bound once (and the constant inputs prepared); others on each call
    fixed = None
    if all(k in ctx.constants for k in attr_keys.values()):
        fixed = bind_call({a: ctx.constants[k] for a, k in attr_keys.items()})

    def call(s: dict) -> Any:
        vals = [None if k is None else s[k] for k in input_keys]
        if variadic and len(vals) == len(in_names) and isinstance(vals[-1], (list, tuple)):
            vals = vals[:-1] + list(vals[-1])  # a variadic input written as one list
        vals = [const_inputs[i] if i in const_inputs else _reconcile(v) for i, v in enumerate(vals)]
        # a Python integer takes the float type of the call's float inputs (Mul(x, 2)); an integer input
        # (ReduceSum's axes) stays an integer
        like = next((v.dtype for v in vals if isinstance(v, np.ndarray) and v.dtype.kind == "f"), None)
        if like is not None:
            vals = [v if i in int_positions else _as_input(v, like) for i, v in enumerate(vals)]
        for i, v in enumerate(vals):
            if isinstance(v, tuple):
                name = in_names[min(i, len(in_names) - 1)]
                raise StdopsError(
                    f"{ctx.path + ': ' if ctx.path else ''}{where}: onnx::{op}: input {name!r} "
                    f"is a tuple of {len(v)} values (an output port that reads a multi-output call without [i]?)"
                )
        fn = fixed if fixed is not None else bind_call({a: s[k] for a, k in attr_keys.items()})
        try:
            r = fn(*vals)
        except StdopsError:
            raise
        except Exception as e:  # noqa: BLE001 - a kernel refusing its inputs
            raise StdopsError(
                f"{ctx.path + ': ' if ctx.path else ''}{where}: onnx::{op}: {type(e).__name__}: {e}"
            ) from None
        if indexed:
            if not isinstance(r, tuple):
                r = (r,)
        elif isinstance(r, tuple) and len(r) == 1:
            r = r[0]
        return _to_float64(r)

    return call, names
