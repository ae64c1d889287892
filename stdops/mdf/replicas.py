"""Replicas: one run of an MDF model carried for K seeds at once, each replica bit-identical to the run
``Simulation(model, seed=seeds[k])`` would make alone (``Simulation(model, seeds=[...])``).

A value that is the same in every replica stays one plain value, computed once. A value that differs -- what
a random function returns, and everything computed from it -- is a :class:`Replicas`: K per-replica values,
held as one array with a leading replica axis when they stack. Every operation on a Replicas is one of

- **lifted**: one array operation over the replica axis, for the element-wise ufuncs that are correctly
  rounded IEEE operations (+ - * / sqrt, comparisons, abs, floor, ...; not exp, log or powers, whose SIMD
  and scalar code paths may round differently) and the whole-array sums, means, any and all, on NumPy
  values (not Python floats, whose errors and promotions differ). Each one is checked against the same
  operation on replica 0's own value (type, dtype, shape, bits), and computed the next way when they differ;
- **mapped**: the operation run once per replica on the replica's own values (any numpy function or
  ufunc, indexing, Python operators on Python values, a standard or ONNX function call, a random draw:
  replica k draws from generator k) -- exact by construction;
- **refused**, raising :class:`NotReplicable`: where a value that differs between replicas would decide
  control flow (a truth test, a condition) or leave for code that does not know replicas (``float()``,
  ``numpy.asarray``, ``math.*``, attributes, an ONNX Loop/If body). When every replica has the same value
  there, it is that value, and the run goes on.

This is the condition under which a model runs with the replica axis: no operation mixes replicas, because
none can (an operation either keeps them apart or is refused). A refused run is repeated one replica at a
time by :class:`~stdops.mdf.api.Simulation`, from the start, with fresh generators.

The drift-diffusion integrator is lifted whole: the K calls' trials are walked in one kernel call, each
trial on the normals of its own call's key (:func:`stdops.ops.cognitive.ddm.replicated`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .control import SimState


class NotReplicable(Exception):
    """An operation the replica axis cannot carry (see the module docstring): the replicas run one by one."""


#: element-wise ufuncs whose every element is a correctly rounded IEEE operation (or exact), so that an
#: element's result does not depend on where it sits in the array (not maximum / minimum: which zero of
#: max(0.0, -0.0) they give may differ between their SIMD and scalar code paths)
EXACT_UFUNCS = frozenset(
    {
        np.add,
        np.subtract,
        np.multiply,
        np.true_divide,
        np.floor_divide,
        np.remainder,
        np.fmod,
        np.negative,
        np.positive,
        np.absolute,
        np.fabs,
        np.sign,
        np.sqrt,
        np.square,
        np.reciprocal,
        np.greater,
        np.greater_equal,
        np.less,
        np.less_equal,
        np.equal,
        np.not_equal,
        np.logical_and,
        np.logical_or,
        np.logical_xor,
        np.logical_not,
        np.isnan,
        np.isfinite,
        np.isinf,
        np.signbit,
        np.floor,
        np.ceil,
        np.trunc,
        np.rint,
        np.copysign,
        np.bitwise_and,
        np.bitwise_or,
        np.bitwise_xor,
        np.invert,
    }
)
#: whole-array reductions lifted as one reduction per replica row: sums by NumPy's pairwise summation, which
#: splits a row the same way wherever it starts, and the order-free any / all
REDUCTIONS = frozenset({np.sum, np.mean, np.any, np.all})
_NUMPY_KINDS = ("array", "numpy")


class Replicas:
    """K per-replica values of one model value. ``kind`` says how ``value(k)`` gives replica k's value back
    exactly as a lone run holds it: "array" (``data[k]``, an ndarray view), "numpy" (a NumPy scalar),
    "float" / "bool" (a Python float / bool), "items" (any objects, kept in a list)."""

    __slots__ = ("data", "kind", "items", "n")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, data: Any, kind: str):
        self.data: Any
        self.items: Any
        self.kind = kind
        if kind == "items":
            self.items, self.data, self.n = list(data), None, len(data)
        else:
            self.items, self.data, self.n = None, data, data.shape[0]

    # ------------------------------------------------------------------ building and reading
    @classmethod
    def of(cls, values: Sequence[Any]) -> Any:
        """The K values of an operation's replicas: one plain value when they are all the same, else a
        Replicas stacking them when they have one type, dtype and shape."""
        first = values[0]
        if all(_identical(first, v) for v in values[1:]):
            return first
        t = type(first)
        if not all(type(v) is t for v in values):
            return cls(values, "items")
        if t is np.ndarray and first.dtype.kind in "biufc":
            if all(v.dtype == first.dtype and v.shape == first.shape for v in values):
                return cls(np.stack(values), "array")
        elif isinstance(first, np.generic) and first.dtype.kind in "biufc":
            if all(v.dtype == first.dtype for v in values):
                return cls(np.array(values, dtype=first.dtype), "numpy")
        elif t is float:
            return cls(np.array(values, dtype=np.float64), "float")
        elif t is bool:
            return cls(np.array(values, dtype=bool), "bool")
        return cls(values, "items")

    def value(self, k: int) -> Any:
        """Replica k's value, of the type a lone run gives."""
        kind = self.kind
        if kind == "items":
            return self.items[k]
        if kind == "array":
            return self.data[k, ...]
        if kind == "numpy":
            return self.data[k]
        if kind == "float":
            return float(self.data[k])
        return bool(self.data[k])

    def values(self) -> list:
        return [self.value(k) for k in range(self.n)]

    def common(self, what: str) -> Any:
        """The value when every replica holds the same one; else NotReplicable."""
        vals = self.values()
        if all(_identical(vals[0], v) for v in vals[1:]):
            return vals[0]
        raise NotReplicable(f"{what} of a value that differs between replicas")

    def __repr__(self) -> str:
        shape = "" if self.data is None else f" {self.data.shape[1:]} {self.data.dtype}"
        return f"<Replicas: {self.n} {self.kind}{shape}>"

    # ------------------------------------------------------------------ escapes: the same value or refused
    def __bool__(self) -> bool:
        if self.kind == "array" and self.data[0].size > 1:
            # a lone run's expression takes the element-wise path for such an array, never bool()
            raise NotReplicable("the truth of an array that differs between replicas")
        truths = {bool(v) for v in self.values()}
        if len(truths) == 1:
            return truths.pop()
        raise NotReplicable("a truth test (condition, if, and/or) that differs between replicas")

    def __float__(self) -> float:
        return float(self.common("float()"))

    def __int__(self) -> int:
        return int(self.common("int()"))

    def __index__(self) -> int:
        return operator.index(self.common("an index"))

    def __complex__(self) -> complex:
        return complex(self.common("complex()"))

    def __str__(self) -> str:
        return str(self.common("str()"))

    def __format__(self, spec: str) -> str:
        return format(self.common("formatting"), spec)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.common("numpy.asarray"), dtype=dtype)

    def __len__(self) -> int:
        lens = {len(v) for v in self.values()}
        if len(lens) == 1:
            return lens.pop()
        raise NotReplicable("len() that differs between replicas")

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotReplicable(f"attribute {name!r} of a value that differs between replicas")

    # ------------------------------------------------------------------ NumPy's protocols
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if "out" in kwargs or method == "at":
            raise NotReplicable(f"numpy.{ufunc.__name__} writing into a value that differs between replicas")
        if method == "__call__" and ufunc in EXACT_UFUNCS and ufunc.nout == 1 and not kwargs and _liftable(inputs):
            got = _lift_elementwise(ufunc, inputs, ufunc)
            if got is not None:
                return got
        fn = ufunc if method == "__call__" else getattr(ufunc, method)
        return map_call(fn, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        if func in REDUCTIONS and len(args) == 1 and not kwargs and _liftable(args):
            got = _lift_reduction(func, args[0])
            if got is not None:
                return got
        if func is np.where and len(args) == 3 and not kwargs and _liftable(args):
            got = _lift_elementwise(np.where, args, np.where)
            if got is not None:
                return got
        return map_call(func, args, kwargs)

    # ------------------------------------------------------------------ Python's operators
    def __getitem__(self, idx: Any) -> Any:
        return map_call(operator.getitem, (self, idx), {})

    def __contains__(self, item: Any) -> bool:
        return bool(map_call(operator.contains, (self, item), {}))

    def __round__(self, ndigits: Any = None) -> Any:
        return map_call(round, (self,) if ndigits is None else (self, ndigits), {})

    def __neg__(self) -> Any:
        return _apply(operator.neg, np.negative, (self,))

    def __pos__(self) -> Any:
        return _apply(operator.pos, np.positive, (self,))

    def __abs__(self) -> Any:
        return _apply(abs, np.absolute, (self,))

    def __invert__(self) -> Any:
        return _apply(operator.invert, np.invert, (self,))


def _binary(pyop: Callable, ufunc: np.ufunc | None) -> tuple[Callable, Callable]:
    def forward(self: Replicas, other: Any) -> Any:
        return _apply(pyop, ufunc, (self, other))

    def reflected(self: Replicas, other: Any) -> Any:
        return _apply(pyop, ufunc, (other, self))

    return forward, reflected


_OPERATORS: list[tuple[str, Callable, Any]] = [
    ("add", operator.add, np.add),
    ("sub", operator.sub, np.subtract),
    ("mul", operator.mul, np.multiply),
    ("truediv", operator.truediv, np.true_divide),
    ("floordiv", operator.floordiv, np.floor_divide),
    ("mod", operator.mod, np.remainder),
    ("pow", operator.pow, None),
    ("matmul", operator.matmul, None),
    ("and", operator.and_, np.bitwise_and),
    ("or", operator.or_, np.bitwise_or),
    ("xor", operator.xor, np.bitwise_xor),
    ("lshift", operator.lshift, None),
    ("rshift", operator.rshift, None),
]
_COMPARISONS: list[tuple[str, Callable, Any]] = [
    ("eq", operator.eq, np.equal),
    ("ne", operator.ne, np.not_equal),
    ("lt", operator.lt, np.less),
    ("le", operator.le, np.less_equal),
    ("gt", operator.gt, np.greater),
    ("ge", operator.ge, np.greater_equal),
]
for _name, _op, _uf in _OPERATORS:
    _f, _r = _binary(_op, _uf)
    setattr(Replicas, f"__{_name}__", _f)
    setattr(Replicas, f"__r{_name}__", _r)
for _name, _op, _uf in _COMPARISONS:
    setattr(Replicas, f"__{_name}__", _binary(_op, _uf)[0])  # Python reflects comparisons itself


# ---------------------------------------------------------------------------------------------- helpers
def _identical(a: Any, b: Any) -> bool:
    """Whether two per-replica values are the same value: same type and bits (arrays: dtype, shape, bytes)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape or a.dtype.kind not in "biufcUS":
            return a is b
        return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if type(a) is float:
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    if type(a) in (int, bool, str, bytes) or a is None:
        return bool(a == b)
    return a is b


def per_replica_value(v: Any, k: int) -> Any:
    """Replica k's value of ``v`` (a Replicas, or a list / tuple / dict holding some); anything else is
    every replica's."""
    return _substitute(v, k)


def _substitute(v: Any, k: int) -> Any:
    if type(v) is Replicas:
        return v.value(k)
    if type(v) in (list, tuple) and any(type(x) is Replicas for x in v):
        return type(v)(_substitute(x, k) for x in v)
    if type(v) is dict and any(type(x) is Replicas for x in v.values()):
        return {a: _substitute(x, k) for a, x in v.items()}
    return v


def _count(args: Sequence[Any], kwargs: dict) -> int:
    for v in (*args, *kwargs.values()):
        if type(v) is Replicas:
            return v.n
        if type(v) in (list, tuple):
            for x in v:
                if type(x) is Replicas:
                    return x.n
    raise AssertionError("no Replicas among the arguments")


def map_call(fn: Callable, args: Sequence[Any], kwargs: dict) -> Any:
    """``fn`` once per replica on that replica's values."""
    n = _count(args, kwargs)
    return Replicas.of(
        [
            fn(*[_substitute(a, k) for a in args], **{key: _substitute(v, k) for key, v in kwargs.items()})
            for k in range(n)
        ]
    )


def has_replicas(args: Sequence[Any], kwargs: dict | None = None) -> bool:
    for v in (*args, *(kwargs or {}).values()):
        if type(v) is Replicas or (type(v) in (list, tuple) and any(type(x) is Replicas for x in v)):
            return True
    return False


def _liftable(operands: Sequence[Any]) -> bool:
    """Replicas held as NumPy arrays or scalars, beside NumPy values or Python numbers."""
    seen = False
    for v in operands:
        if type(v) is Replicas:
            if v.kind not in _NUMPY_KINDS:
                return False
            seen = True
        elif not isinstance(v, (np.ndarray, np.generic, int, float, bool)):
            return False
    return seen


def _verified(out: Any, witness: Any, n: int) -> Replicas | None:
    """The lifted result, if its replica 0 is the witness (the operation on replica 0's own values)."""
    if not isinstance(out, np.ndarray) or out.ndim == 0 or out.shape[0] != n:
        return None
    row = out[0, ...]
    if type(witness) is np.ndarray:
        kind = "array"
    elif isinstance(witness, np.generic) and out.ndim == 1:
        kind = "numpy"
    else:
        return None
    w = np.asarray(witness)
    if row.dtype != w.dtype or row.shape != w.shape or row.dtype.kind not in "biufc":
        return None
    if np.ascontiguousarray(row).tobytes() != np.ascontiguousarray(w).tobytes():
        return None
    return Replicas(out, kind)


def _lift_elementwise(fn: Callable, operands: Sequence[Any], witness_fn: Callable) -> Replicas | None:
    nd = max(v.data.ndim - 1 if type(v) is Replicas else np.ndim(v) for v in operands)
    n = 0
    args = []
    for v in operands:
        if type(v) is Replicas:
            n = v.n
            d = v.data
            pad = nd - (d.ndim - 1)
            args.append(d.reshape(d.shape[:1] + (1,) * pad + d.shape[1:]) if pad else d)
        else:
            args.append(v)  # NumPy broadcasting aligns it with the per-replica axes, on the right
    try:
        out = fn(*args)
        witness = witness_fn(*[v.value(0) if type(v) is Replicas else v for v in operands])
    except Exception:  # noqa: BLE001 - mapped instead, where the lone runs' own error (if any) appears
        return None
    return _verified(out, witness, n)


def _lift_reduction(func: Callable, r: Replicas) -> Replicas | None:
    try:
        out = func(r.data.reshape(r.n, -1), axis=1)
        witness = func(r.value(0))
    except Exception:  # noqa: BLE001 - mapped instead
        return None
    return _verified(out, witness, r.n)


def _apply(pyop: Callable, ufunc: np.ufunc | None, operands: tuple) -> Any:
    if ufunc is not None and _liftable(operands):
        got = _lift_elementwise(ufunc, operands, pyop)
        if got is not None:
            return got
    return map_call(pyop, operands, {})


# ---------------------------------------------------------------------------------------------- the state
class ReplicaState(SimState):
    """The simulation state of a replicated run: one generator per replica. A random draw happens inside a
    per-replica call (``current`` is then the replica) or in a lifted random function; any other draw
    would be one draw for all replicas, and is refused."""

    def __init__(self, seeds: Sequence[Any]):
        self.rngs = [np.random.default_rng(s) for s in seeds]
        self.n = len(self.rngs)
        self.current: int | None = None
        self.graphs = []
        self.inputs = {}

    @property
    def rng(self) -> np.random.Generator:
        if self.current is None:
            raise NotReplicable("a random draw outside a per-replica call")
        return self.rngs[self.current]

    @rng.setter
    def rng(self, value: np.random.Generator) -> None:
        raise NotReplicable("the generator of a replicated run is one per replica")


def per_replica_call(fn: Callable[[dict], Any], state: ReplicaState, random: bool, stateful: bool) -> Callable:
    """A compiled call ``fn(scope)`` for a replicated run: run once per replica (each on its own values, with
    its own generator) when the scope holds Replicas or the call draws random numbers; once otherwise (every
    replica would compute the same). ``stateful``: the call runs a Loop/If body, whose engine keeps its
    values between runs -- refused when its inputs differ between replicas."""

    def run(s: dict) -> Any:
        reps = [key for key, v in s.items() if type(v) is Replicas]
        if not reps and not random:
            return fn(s)
        if stateful:
            raise NotReplicable("an ONNX Loop/If body fed values that differ between replicas")
        outs = []
        for k in range(state.n):
            sk = dict(s)
            for key in reps:
                sk[key] = s[key].value(k)
            state.current = k
            try:
                outs.append(fn(sk))
            finally:
                state.current = None
        return Replicas.of(outs)

    return run


def per_replica_function(fn: Callable) -> Callable:
    """A function called by name inside an expression: once per replica when an argument is a Replicas."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if has_replicas(args, kwargs):
            return map_call(fn, args, kwargs)
        return fn(*args, **kwargs)

    call.__name__ = getattr(fn, "__name__", "function")
    call.__doc__ = fn.__doc__
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def split(value: Any, n: int) -> list:
    """The K per-replica values of an output (a plain value is every replica's)."""
    if type(value) is Replicas:
        return value.values()
    return [value] * n
