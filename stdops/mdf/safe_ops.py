"""What an MDF expression may call, each call guarded so that its time and memory stay bounded.

A model file is hostile until proven otherwise: a few hundred bytes of expression must not hang us or
allocate gigabytes (``round(1, -10**9)``, ``pow(3, 10**16000, m)``, ``'%999999999d' % 1``,
``sum(((0,),)*200000, ())``, ``numpy.full(10**6, 'a'*1000)``, ``numpy.ones((10**5, 1)) + numpy.ones((1, 10**5))``).
So, with the limits of :mod:`stdops.limits`:

- every integer an operator or call makes stays within ``max_int_bits`` (checked *before* the
  multiplication, power or shift that would make it); arrays of Python ints are refused (numpy would run
  Python arithmetic on each element, unbounded);
- every string, list or tuple stays within ``max_sequence`` items (checked before repeating, adding,
  formatting or summing);
- every array an operation would make is checked against ``max_elements`` / ``max_bytes`` before numpy
  allocates it (shapes from arguments, broadcasting, concatenation, products, fancy indexing), and its
  elements are charged to the load's / evaluation's ``max_work`` budget;
- nothing writes into its arguments: ``out=`` (keyword or positional) and ``overwrite_input`` are refused
  when the expression is compiled, so the caller's arrays and the model's values are never modified.
"""

from __future__ import annotations

import collections
import functools
import inspect
import math
import operator
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import limits
from ..errors import ResourceLimitError, StdopsError


class ExprError(StdopsError):
    """An expression that is refused or cannot be compiled (message only; the caller adds where)."""


_SEQ = (str, bytes, list, tuple)


def _hint(name: str) -> str:
    return f"stdops.limits.configure({name}=...) or {limits.ENV[name]}"


# ------------------------------------------------------------------ integers and sequences
def _bits(v: Any) -> int:
    return v.bit_length() if type(v) is int else 0


def _check_int_bits(bits: int, what: str) -> None:
    cap = limits.get().max_int_bits
    if bits > cap:
        raise ResourceLimitError(
            f"{what}: an integer of about {bits} bits, above the limit of {cap} ({_hint('max_int_bits')})"
        )


def _check_len(n: int, what: str) -> None:
    cap = limits.get().max_sequence
    if n > cap:
        raise ResourceLimitError(f"{what}: {n} items / characters, above the limit of {cap} ({_hint('max_sequence')})")


def _check_result(v: Any, what: str) -> Any:
    """After a call: ints within max_int_bits, no array of Python ints, strings and sequences within
    max_sequence (what could not be checked before, e.g. int('9' * 4000))."""
    if type(v) is int:
        _check_int_bits(v.bit_length(), what)
    elif isinstance(v, np.ndarray) and v.dtype == object and v.size:
        if any(type(x) is int for x in v.reshape(-1).tolist()):
            raise ExprError(f"{what}: an array of integers beyond 64 bits (numpy cannot hold them; refused)")
    elif isinstance(v, _SEQ):
        _check_len(len(v), what)
    return v


# ------------------------------------------------------------------ array sizes
def _estimate(obj: Any, memo: dict, depth: int = 0) -> tuple[int, int]:
    """(elements, bytes per element at most) of the array ``numpy.array(obj)`` would make; a list that
    appears many times (``[x] * n``) is measured once."""
    if isinstance(obj, np.ndarray):
        return obj.size, obj.dtype.itemsize
    if isinstance(obj, str):
        return 1, 4 * len(obj)
    if isinstance(obj, bytes):
        return 1, len(obj)
    if isinstance(obj, (list, tuple)):
        if depth > 64:  # numpy refuses more dimensions than this itself
            return 1, 8
        k = id(obj)
        if k in memo:
            return memo[k]
        n, item = 0, 1
        # each distinct item measured once, times how often it appears ([x] * n holds one object n times)
        counts = collections.Counter(map(id, obj))
        if len(counts) < len(obj):
            for key, x in dict(zip(map(id, obj), obj)).items():
                e, i = _estimate(x, memo, depth + 1)
                n += e * counts[key]
                item = max(item, i)
        else:
            for x in obj:
                e, i = _estimate(x, memo, depth + 1)
                n += e
                item = max(item, i)
        memo[k] = (n, item)
        return n, item
    return 1, 8


def _check_elements(n: int, itemsize: int, what: str) -> None:
    limits.check_elements((n,), what, max(int(itemsize), 1))
    limits.current().charge_work(n, what)


def _check_shape(shape: Any, itemsize: int, what: str) -> None:
    limits.check_elements(_dims(shape, what), what, max(int(itemsize), 1))
    limits.current().charge_work(math.prod(_dims(shape, what)), what)


def _dims(shape: Any, what: str) -> list[int]:
    if isinstance(shape, np.ndarray):
        shape = shape.reshape(-1).tolist() if shape.ndim else [shape.item()]
    elif not isinstance(shape, (list, tuple)):
        shape = [shape]
    return [limits._dim(d, what) for d in shape]


def _itemsize(dtype: Any, default: int = 8) -> int:
    if dtype is None:
        return default
    try:
        return np.dtype(dtype).itemsize or default
    except TypeError:
        return default


def _shape_of(v: Any) -> tuple | None:
    if isinstance(v, np.ndarray):
        return v.shape
    if isinstance(v, (list, tuple)):
        try:
            return np.shape(v)
        except ValueError:
            return None
    return ()


def _check_broadcast(args: tuple, what: str) -> None:
    """Before an element-wise operation: the broadcast result of the array arguments fits the limits."""
    shapes, item = [], 1
    for a in args:
        if isinstance(a, (np.ndarray, list, tuple)):
            s = _shape_of(a)
            if s is None:
                return
            shapes.append(s)
            item = max(item, a.dtype.itemsize if isinstance(a, np.ndarray) else 8)
    if not shapes:
        return
    try:
        out = np.broadcast_shapes(*shapes)
    except ValueError:
        return  # numpy refuses the shapes itself
    _check_shape(out, item, what)


# ------------------------------------------------------------------ operators
def _add(a: Any, b: Any) -> Any:
    if isinstance(a, _SEQ) and isinstance(b, _SEQ):
        _check_len(len(a) + len(b), "+")
    else:
        _check_broadcast((a, b), "+")
    return a + b


def _mul(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int:
        _check_int_bits(_bits(a) + _bits(b), f"{a} * {b}"[:60])
    elif isinstance(a, _SEQ) and isinstance(b, (int, np.integer)):
        _check_len(len(a) * max(int(b), 0), "sequence repetition")
    elif isinstance(b, _SEQ) and isinstance(a, (int, np.integer)):
        _check_len(len(b) * max(int(a), 0), "sequence repetition")
    else:
        _check_broadcast((a, b), "*")
    return a * b


def _pow(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int and b > 0 and a not in (0, 1, -1):
        _check_int_bits(b * a.bit_length(), f"{a} ** {b}"[:60])
    else:
        _check_broadcast((a, b), "**")
    return a**b


def _lshift(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int and a:
        _check_int_bits(a.bit_length() + max(b, 0), f"{a} << {b}"[:60])
    else:
        _check_broadcast((a, b), "<<")
    return a << b


#: a %-format directive: flags, width, precision, conversion (printf-style formatting)
_FORMAT = re.compile(r"%(\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?(.)")


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, (str, bytes)):
        text = a if isinstance(a, str) else a.decode("latin-1")
        size = len(text)
        for m in _FORMAT.finditer(text):
            width, prec = m.group(2), m.group(3)
            if "*" in (width, prec):
                raise ExprError("'*' widths in string formatting are not allowed")
            size += int(width or 0) + int(prec or 0)
        args = b if isinstance(b, tuple) else (b,)
        size += sum(len(x) if isinstance(x, _SEQ) else 24 for x in args)
        _check_len(size, "string formatting")
        return _check_result(a % b, "string formatting")
    _check_broadcast((a, b), "%")
    return a % b


def _elementwise(op: Callable, sym: str) -> Callable:
    def run(a: Any, b: Any) -> Any:
        _check_broadcast((a, b), sym)
        return op(a, b)

    return run


def _contains(a: Any, b: Any) -> bool:
    if isinstance(b, (list, tuple)):
        limits.current().charge_work(len(b) * (a.size if isinstance(a, np.ndarray) else 1), "in")
    return a in b


def _checked_product(fn: Callable, kind: str) -> Callable:
    def wrapper(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        axes = args[0] if args else kwargs.get("axes", 2)
        item = max(np.asarray(a).dtype.itemsize, np.asarray(b).dtype.itemsize)
        _check_shape(_product_shape(kind, a, b, axes), item, f"numpy.{getattr(fn, '__name__', kind)}")
        return fn(a, b, *args, **kwargs)

    wrapper.__name__ = getattr(fn, "__name__", kind)
    functools.update_wrapper(wrapper, fn, assigned=(), updated=())  # __wrapped__: signature() reads fn's
    return wrapper


BINOPS: dict[str, Callable] = {
    "Add": _add,
    "Sub": _elementwise(operator.sub, "-"),
    "Mult": _mul,
    "Div": _elementwise(operator.truediv, "/"),
    "FloorDiv": _elementwise(operator.floordiv, "//"),
    "Mod": _mod,
    "Pow": _pow,
    "MatMult": _checked_product(operator.matmul, "matmul"),
    "BitAnd": _elementwise(operator.and_, "&"),
    "BitOr": _elementwise(operator.or_, "|"),
    "BitXor": _elementwise(operator.xor, "^"),
    "LShift": _lshift,
    "RShift": _elementwise(operator.rshift, ">>"),
}

_CMP_NAMES = ("Eq", "NotEq", "Lt", "LtE", "Gt", "GtE")
COMPARISONS: dict[str, Callable] = {
    **{
        n: _elementwise(f, n)
        for n, f in zip(_CMP_NAMES, (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge))
    },
    "Is": operator.is_,
    "IsNot": operator.is_not,
    "In": _contains,
    "NotIn": lambda a, b: not _contains(a, b),
}


def index(base: Any, idx: Any) -> Any:
    """``base[idx]``, after checking that fancy indexing with several index arrays (which broadcast) stays
    within the limits."""
    if isinstance(base, np.ndarray) and isinstance(idx, tuple):
        arrays = [i for i in idx if isinstance(i, (np.ndarray, list))]
        if len(arrays) >= 2 and not any(i is Ellipsis for i in idx):
            try:
                n = math.prod(np.broadcast_shapes(*[np.shape(i) for i in arrays]))
            except ValueError:
                return base[idx]
            for k, i in enumerate(idx):
                if isinstance(i, slice) and k < base.ndim:
                    n *= base.shape[k]
            n *= math.prod(base.shape[len([i for i in idx if i is not None]) :])
            _check_elements(n, base.dtype.itemsize, "indexing")
    return base[idx]


# ------------------------------------------------------------------ numpy
def _alloc(fn: Callable, dtype_pos: int) -> Callable:
    """zeros / ones / empty (shape, dtype): the shape checked with the dtype's bytes."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        shape = args[0] if args else kwargs.get("shape")
        dtype = args[dtype_pos] if len(args) > dtype_pos else kwargs.get("dtype")
        _check_shape(shape, _itemsize(dtype), f"numpy.{fn.__name__}")
        return fn(*args, **kwargs)

    return wrapper


def _full(shape: Any, fill_value: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
    item = _itemsize(dtype, 0) or _estimate(fill_value, {})[1]
    _check_shape(shape, item, "numpy.full")
    return np.full(shape, fill_value, dtype, *args, **kwargs)


def _like(fn: Callable, fill: bool) -> Callable:
    """zeros_like / ones_like / full_like: their result has the prototype's shape, or the ``shape`` given."""

    def wrapper(a: Any, *args: Any, **kwargs: Any) -> Any:
        pos = list(args)
        fill_value = pos.pop(0) if fill and pos else kwargs.get("fill_value")
        dtype = pos[0] if pos else kwargs.get("dtype")
        shape = pos[3] if len(pos) > 3 else kwargs.get("shape")
        proto = np.asarray(a) if not isinstance(a, np.ndarray) else a
        item = _itemsize(dtype, 0) or max(proto.dtype.itemsize, _estimate(fill_value, {})[1] if fill else 1)
        _check_shape(proto.shape if shape is None else shape, item, f"numpy.{fn.__name__}")
        return fn(a, *args, **kwargs)

    return wrapper


def _array(fn: Callable) -> Callable:
    """array / asarray: the array the (nested) object would make, checked before numpy makes it."""

    def wrapper(obj: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
        n, item = _estimate(obj, {})
        _check_elements(n, _itemsize(dtype, 0) or item, f"numpy.{fn.__name__}")
        return fn(obj, dtype, *args, **kwargs)

    return wrapper


def _joined(fn: Callable) -> Callable:
    """concatenate / stack / vstack / hstack: as many elements as their inputs hold together."""

    def wrapper(arrays: Any, *args: Any, **kwargs: Any) -> Any:
        n, item = _estimate(arrays if isinstance(arrays, (list, tuple)) else [arrays], {})
        _check_elements(n, item, f"numpy.{fn.__name__}")
        return fn(arrays, *args, **kwargs)

    return wrapper


def _eye(N: Any, M: Any = None, k: Any = 0, dtype: Any = float, *args: Any, **kwargs: Any) -> Any:
    _check_shape((N, N if M is None else M), _itemsize(dtype), "numpy.eye")
    return np.eye(N, M, k, dtype, *args, **kwargs)


def _identity(n: Any, dtype: Any = None, *args: Any, **kwargs: Any) -> Any:
    _check_shape((n, n), _itemsize(dtype), "numpy.identity")
    return np.identity(n, dtype, *args, **kwargs)


def _take(a: Any, indices: Any, axis: Any = None, *args: Any, **kwargs: Any) -> Any:
    arr = np.asarray(a)
    n_idx = math.prod(_shape_of(indices) or (1,))
    rest = 1 if axis is None or arr.ndim == 0 else arr.size // max(arr.shape[int(axis) % arr.ndim], 1)
    _check_elements(n_idx * rest, arr.dtype.itemsize, "numpy.take")
    return np.take(a, indices, axis, *args, **kwargs)


def _product_shape(kind: str, a: Any, b: Any, axes: Any = 2) -> tuple:
    """Output shape of a product of ``a`` and ``b`` (outer / matmul / dot / tensordot), computed before
    numpy allocates it, so an expression cannot request more than the allocation limit."""
    a, b = np.asarray(a), np.asarray(b)
    if kind == "outer":
        return (a.size, b.size)
    if a.ndim == 0 or b.ndim == 0:
        return a.shape if b.ndim == 0 else b.shape
    if kind == "matmul":
        ash = a.shape if a.ndim > 1 else (1,) + a.shape
        bsh = b.shape if b.ndim > 1 else b.shape + (1,)
        try:
            batch = np.broadcast_shapes(ash[:-2], bsh[:-2])
        except ValueError:
            return ()  # numpy itself will refuse the shapes
        return tuple(batch) + (ash[-2], bsh[-1])
    if kind == "dot":
        return a.shape[:-1] + (b.shape[:-2] + b.shape[-1:] if b.ndim > 1 else ())
    if isinstance(axes, int):
        return a.shape[: a.ndim - axes] + b.shape[axes:]
    ax_a, ax_b = (np.atleast_1d(x).tolist() for x in axes)
    ax_a = {x % a.ndim for x in ax_a}
    ax_b = {x % b.ndim for x in ax_b}
    return tuple(d for i, d in enumerate(a.shape) if i not in ax_a) + tuple(
        d for i, d in enumerate(b.shape) if i not in ax_b
    )


def _checked_diag(v: Any, k: int = 0) -> Any:
    a = np.asarray(v)
    k = int(k)
    if a.ndim == 1:
        n = a.size + abs(k)
        _check_shape((n, n), a.dtype.itemsize, "numpy.diag")
    elif a.ndim == 2:  # an offset beyond the matrix gives an empty diagonal (numpy crashes on INT_MIN)
        k = min(max(k, -a.shape[0]), a.shape[1])
    return np.diag(a, k)


_NUMPY_NAMES = """
abs absolute add all allclose any arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin
around atleast_1d atleast_2d bool_ cbrt ceil clip copysign cos cosh cumprod
cumsum deg2rad degrees divide e equal exp exp2 expm1 fabs float32 float64 floor floor_divide
fmax fmin fmod greater greater_equal heaviside hypot inf int32 int64 isclose isfinite isinf isnan
less less_equal log log10 log1p log2 logaddexp logical_and logical_not logical_or logical_xor
max maximum mean median min minimum mod multiply nan nanmax nanmin negative not_equal
pi positive power prod rad2deg radians reciprocal remainder reshape rint round sign sin sinc sinh size
shape sort sqrt square squeeze std subtract sum tan tanh trace transpose
true_divide trunc var where float16 uint8 int8 int16 uint16 uint32 uint64 ndim copy
""".split()

#: keyword arguments that write into an argument: never allowed in a model's expression
IN_PLACE_KEYWORDS = frozenset({"out", "overwrite_input"})


def _positional_limit(fn: Any) -> int | None:
    """How many positional arguments ``fn`` takes before the first one that writes in place (``out``):
    a ufunc's inputs; for a function, the position of its ``out`` / ``overwrite_input`` parameter."""
    fn = inspect.unwrap(fn)
    if isinstance(fn, np.ufunc):
        return fn.nin
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    hits = [params.index(p) for p in IN_PLACE_KEYWORDS if p in params]
    return min(hits) if hits else None


def _numpy_call(name: str, fn: Callable) -> Callable:
    """A whitelisted numpy function: element-wise ones checked for their broadcast size first; every
    result checked (arrays of Python ints refused) and charged to the work budget."""
    elementwise = isinstance(fn, np.ufunc) or name in ("where", "clip", "isclose", "allclose", "heaviside")
    what = f"numpy.{name}"

    def call(*args: Any, **kwargs: Any) -> Any:
        if elementwise:
            _check_broadcast(args, what)
        return _check_result(fn(*args, **kwargs), what)

    call.__name__ = name
    functools.update_wrapper(call, fn, assigned=(), updated=())  # __wrapped__: signature() reads fn's
    return call


NUMPY_WHITELIST: dict[str, Any] = {}
for _n in _NUMPY_NAMES:
    _f = getattr(np, _n, None)
    if _f is None:
        continue
    NUMPY_WHITELIST[_n] = _f if isinstance(_f, (type, float)) else _numpy_call(_n, _f)
for _n, _dp in (("zeros", 1), ("ones", 1), ("empty", 1)):
    NUMPY_WHITELIST[_n] = functools.update_wrapper(_alloc(getattr(np, _n), _dp), getattr(np, _n))
for _n in ("array", "asarray"):
    NUMPY_WHITELIST[_n] = _numpy_call(_n, functools.update_wrapper(_array(getattr(np, _n)), getattr(np, _n)))
for _n in ("concatenate", "stack", "vstack", "hstack"):
    NUMPY_WHITELIST[_n] = _numpy_call(_n, functools.update_wrapper(_joined(getattr(np, _n)), getattr(np, _n)))
for _n, _fill in (("zeros_like", False), ("ones_like", False), ("full_like", True)):
    NUMPY_WHITELIST[_n] = _numpy_call(_n, functools.update_wrapper(_like(getattr(np, _n), _fill), getattr(np, _n)))
for _n, _kind in (("outer", "outer"), ("matmul", "matmul"), ("dot", "dot"), ("tensordot", "tensordot")):
    NUMPY_WHITELIST[_n] = _checked_product(getattr(np, _n), _kind)
NUMPY_WHITELIST["full"] = _numpy_call("full", functools.update_wrapper(_full, np.full))
NUMPY_WHITELIST["eye"] = functools.update_wrapper(_eye, np.eye)
NUMPY_WHITELIST["identity"] = functools.update_wrapper(_identity, np.identity)
NUMPY_WHITELIST["take"] = _numpy_call("take", functools.update_wrapper(_take, np.take))
NUMPY_WHITELIST["diag"] = _checked_diag


# ------------------------------------------------------------------ math and builtins
def _prod(iterable: Any, *, start: Any = 1) -> Any:
    """math.prod with every partial product checked like ``*``."""
    return functools.reduce(_mul, iterable, start)


def _sum(iterable: Any, start: Any = 0) -> Any:
    """sum(); tuples and lists are joined in one pass (the builtin copies the growing result each time:
    quadratic), and every partial sum is checked like ``+``."""
    items = list(iterable)
    if isinstance(start, (str, bytes)):
        raise TypeError("sum() can't sum strings [use ''.join(seq) instead]")
    if isinstance(start, (list, tuple)) and all(type(x) is type(start) for x in items):
        _check_len(len(start) + sum(len(x) for x in items), "sum")
        out = list(start)
        for x in items:
            out.extend(x)
        return type(start)(out)
    return functools.reduce(_add, items, start)


def _round(number: Any, ndigits: Any = None) -> Any:
    """round(); an integer rounded to -n digits with 10**n far beyond it is 0 (the builtin computes 10**n)."""
    if ndigits is not None and type(number) is int and type(ndigits) is int and ndigits < 0:
        # |number| < 10**(digits + 1) <= 10**-ndigits / 2 when -ndigits > digits + 1: it rounds to 0
        if -ndigits > int(number.bit_length() * 0.30103) + 2:
            return 0
    return round(number, ndigits) if ndigits is not None else round(number)


def _pow3(a: Any, b: Any, m: Any = None) -> Any:
    if m is None:
        return _pow(a, b)
    for v in (a, b, m):
        _check_int_bits(_bits(v), "pow")
    return pow(a, b, m)


BUILTIN_WHITELIST: dict[str, Any] = {
    "abs": abs,
    "min": min,
    "max": max,
    "round": _round,
    "int": int,  # a type (numpy takes it as a dtype); big results are refused by the operators using them
    "float": float,
    "bool": bool,
    "sum": _sum,
    "len": len,
    "pow": _pow3,
    "True": True,
    "False": False,
    "None": None,
}

# math's integer combinatorics run for as long as their arguments ask (math.factorial(10**8) takes
# minutes; lcm of many numbers grows without bound): a model file must not be able to hang us, and no
# standard function needs them.
_MATH_REFUSED = {"factorial", "comb", "perm", "lcm"}
MATH_WHITELIST: dict[str, Any] = {
    n: getattr(math, n) for n in dir(math) if not n.startswith("_") and n not in _MATH_REFUSED
}
MATH_WHITELIST["prod"] = _prod
