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
function's default. ``onnx::Op`` calls the stdops kernel bound by :mod:`stdops.onnx.opset`:
named arguments are mapped onto the ONNX input order, attributes come from ``args`` or same-named
node parameters, several outputs come back as a tuple (``name[0]``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

from ..errors import StdopsError, UnsupportedOp, ValidationError
from ..ops.cognitive import actr
from ..ops.cognitive import psyneulink as pnl
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
    strings: set[str] = frozenset(),
) -> tuple[list[tuple[Hashable, Compiled]], dict[str, Hashable], set[str]]:
    """Compile ``args`` in order; each arg is stored in the scope under a private key that later
    args (and the function body) see by the arg's name. An arg named in ``strings`` whose value is a
    string that names nothing is that string."""
    steps: list[tuple[Hashable, Compiled]] = []
    local = dict(known)
    names: set[str] = set()
    for a, expr in (args or {}).items():
        if a in strings and isinstance(expr, str) and expr not in local:
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
    if name.startswith("onnx::") and args:
        args = {a: _quoted_ids(v, known) for a, v in args.items()}
        strings = onnx_string_attributes(name, ctx.opset)
    steps, local, names = compile_args(args, known, owner, where, ctx.path, strings)
    for k, c in steps:
        if c.const:
            ctx.constants[k] = c.value
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
    if not steps:
        return impl, names

    def run(s: dict) -> Any:
        for k, c in steps:
            s[k] = c.fn(s)
        return impl(s)

    return run, names


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


def onnx_string_attributes(name: str, opset: int) -> set[str]:
    """The STRING / STRINGS attributes of ``onnx::Op`` (``mode`` of Pad, ``auto_pad``, ...): a value
    written for one of them is a string, not a name."""
    import onnx.defs

    if not name.startswith("onnx::"):
        return set()
    try:
        schema = onnx.defs.get_schema(name[6:], opset, "")
    except Exception:  # noqa: BLE001 - an unknown op is reported when the call is compiled
        return set()
    T = onnx.defs.OpSchema.AttrType
    return {k for k, a in schema.attributes.items() if a.type in (T.STRING, T.STRINGS)}


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
    fn = std.fn
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


def _onnx_schema(op: str, opset: int, where: str, path: str | None):
    import onnx.defs

    try:
        return onnx.defs.get_schema(op, opset, "")
    except Exception:  # noqa: BLE001 - onnx raises SchemaError
        raise UnsupportedOp("", op, opset, where, path) from None


def _convert_attr(value: Any, atype: Any) -> Any:
    import onnx.defs

    T = onnx.defs.OpSchema.AttrType
    if value is None:
        return None
    if atype == T.INT:
        return int(np.asarray(value).reshape(-1)[0]) if not isinstance(value, (int, np.integer)) else int(value)
    if atype == T.FLOAT:
        return float(np.asarray(value).reshape(-1)[0])
    if atype == T.STRING:
        return value.decode() if isinstance(value, bytes) else str(value)
    if atype == T.INTS:
        return tuple(int(v) for v in np.asarray(value).reshape(-1))
    if atype == T.FLOATS:
        return tuple(float(v) for v in np.asarray(value).reshape(-1))
    if atype == T.STRINGS:
        return tuple(str(v) for v in np.asarray(value).reshape(-1))
    if atype == T.TENSOR:
        return np.asarray(value)
    return value


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


def _compile_onnx(
    op: str,
    args: Mapping[str, Any],
    known: Mapping[str, Hashable],
    local: Mapping[str, Hashable],
    owner: str,
    where: str,
    ctx: CallContext,
) -> tuple[Callable, set[str]]:
    from ..onnx import adapters  # noqa: F401 - registers the version adapters (Cast's `to`, ...) with resolve
    from ..onnx.opset import BindContext, resolve

    schema = _onnx_schema(op, ctx.opset, where, ctx.path)
    in_names = [i.name for i in schema.inputs]
    type_strs = [i.type_str for i in schema.inputs]
    variadic = bool(schema.inputs) and schema.inputs[-1].option.name == "Variadic"
    attr_types = {k: a.type for k, a in schema.attributes.items()}
    names: set[str] = set()

    def source(n: str) -> Hashable | None:
        if n in args:
            return local[n]
        if n in known:
            names.add(n)
            return known[n]
        return None

    if op in ("Loop", "If") and ctx.compile_subgraph is not None:
        from .control import compile_if, compile_loop

        return (compile_loop if op == "Loop" else compile_if)(args, local, where, ctx, source, names)

    input_keys = [source(n) for n in in_names]
    while input_keys and input_keys[-1] is None:
        input_keys.pop()
    attr_keys = {a: source(a) for a in attr_types}
    attr_keys = {a: k for a, k in attr_keys.items() if k is not None}

    try:
        since, kernel, adapt = resolve("", op, ctx.opset)
    except UnsupportedOp:
        if op in _FALLBACK_UNARY and len(input_keys) == 1:
            f, k0 = _FALLBACK_UNARY[op], input_keys[0]
            return (lambda s: _to_float64(f(np.asarray(s[k0])))), names
        raise UnsupportedOp("", op, ctx.opset, where, ctx.path) from None

    # outputs the node reads: ``fid[i]`` in its expressions, else the ones the schema requires (MaxPool's
    # Indices, Dropout's mask are not computed when nothing reads them)
    required = sum(1 for o in schema.outputs if o.option.name != "Optional")
    indexed = owner in ctx.output_counts  # the node reads ``owner[i]``: the call gives a tuple (as the reference)
    n_out = max(ctx.output_counts.get(owner, 0), required, 1)
    if schema.outputs and schema.outputs[-1].option.name == "Variadic" and not indexed:
        split_key = attr_keys.get("split")
        if split_key is None and "split" in in_names and in_names.index("split") < len(input_keys):
            split_key = input_keys[in_names.index("split")]
        split = ctx.constants.get(split_key) if split_key is not None else None
        n_out = len(np.atleast_1d(split)) if split is not None else len(schema.outputs)
    output_present = [True] * n_out

    def bind(attr_values: dict) -> Callable:
        attrs = {a: _convert_attr(v, attr_types[a]) for a, v in attr_values.items() if v is not None}
        bctx = BindContext(
            op_type=op,
            domain="",
            opset=ctx.opset,
            since=since,
            node_name=owner,
            path=ctx.path,
            attrs=attrs,
            n_inputs=len(input_keys),
            input_present=[k is not None for k in input_keys],
            n_outputs=n_out,
            output_present=output_present,
            kernel=kernel,
            constants=[None] * len(input_keys),
            opsets={"": ctx.opset},
        )
        return adapt(bctx) if adapt is not None else bctx.bind()

    # attributes fixed at load time are bound once; others on each call
    fixed = None
    if all(k in ctx.constants for k in attr_keys.values()):
        fixed = bind({a: ctx.constants[k] for a, k in attr_keys.items()})

    def call(s: dict) -> Any:
        vals = [None if k is None else s[k] for k in input_keys]
        if variadic and len(vals) == len(in_names) and isinstance(vals[-1], (list, tuple)):
            vals = vals[:-1] + list(vals[-1])
        vals = [_reconcile(v) for v in vals]
        # a Python integer takes the float type of the inputs that share its type constraint (Mul(x, 2));
        # an input of another constraint (ReduceSum's int64 axes) stays an integer
        tss = [type_strs[min(i, len(type_strs) - 1)] for i in range(len(vals))] if type_strs else []
        like = next(
            ((v.dtype, t) for v, t in zip(vals, tss) if isinstance(v, np.ndarray) and v.dtype.kind == "f"), None
        )
        if like is not None:
            vals = [_as_input(v, like[0]) if t == like[1] else v for v, t in zip(vals, tss)]
        for i, v in enumerate(vals):
            if isinstance(v, tuple):
                name = in_names[min(i, len(in_names) - 1)]
                raise StdopsError(
                    f"{ctx.path + ': ' if ctx.path else ''}{where}: onnx::{op}: input {name!r} "
                    f"is a tuple of {len(v)} values (an output port that reads a multi-output call without [i]?)"
                )
        fn = fixed if fixed is not None else bind({a: s[k] for a, k in attr_keys.items()})
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
