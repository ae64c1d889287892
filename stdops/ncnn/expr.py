"""ncnn's shape expressions (the ``*_expr`` string params of Reshape, Crop and Interp).

Syntax (ncnn docs/developer-guide/expression.md): a comma-separated list of items; an item is a
prefix call ``op(arg, ...)``, a blob dimension ``<i><w|h|d|c|n>`` (``0w`` = width of bottom 0, i in
0..9) or a number literal. Example: ``-1,*(0h,2),+(1c,2)``.

Values are typed as in ncnn: int or float32. ``+ - * // max min`` and ``abs neg sign square`` keep
ints when all operands are ints (``//`` on ints truncates toward zero, as C does; on floats it is
``floor(a / b)``); ``/`` and the transcendental functions always give float32; ``trunc ceil floor
round`` turn a float into an int (``round``: half away from zero); ``and or xor lshift rshift`` take
ints. Every item of the result is converted to int by truncation.

The text is parsed once into a tree of closures; evaluating it reads only the bottoms' shapes. Nothing
is ever passed to ``eval``. A malformed expression is a ``ValueError`` naming the problem.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["Expr", "blob_dims", "count_blobs", "parse", "shape_dims"]

_F = np.float32


def _wrap(i: int) -> int:
    """int32 two's-complement wrap (ncnn computes in C ints)."""
    return ((int(i) + 2**31) % 2**32) - 2**31


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _as_f(v) -> np.float32:
    return _F(v)


def _round_half_away(f: float) -> float:
    return math.floor(f + 0.5) if f >= 0 else -math.floor(-f + 0.5)


def _to_int(v) -> int:
    """A value as an int: ints unchanged, floats truncated toward zero."""
    if isinstance(v, int):
        return v
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"expression value {f} is not a finite number")
    return _wrap(math.trunc(f))


def _floatfn(f: Callable) -> Callable:
    def g(a):
        with np.errstate(all="ignore"):
            return _F(f(_as_f(a)))

    return g


def _float2(f: Callable) -> Callable:
    def g(a, b):
        with np.errstate(all="ignore"):
            return _F(f(_as_f(a), _as_f(b)))

    return g


def _int_or_float2(iop: Callable, fop: Callable) -> Callable:
    def g(a, b):
        if isinstance(a, int) and isinstance(b, int):
            return _wrap(iop(a, b))
        with np.errstate(all="ignore"):
            return _F(fop(_as_f(a), _as_f(b)))

    return g


def _int_or_float1(iop: Callable, fop: Callable) -> Callable:
    def g(a):
        if isinstance(a, int):
            return _wrap(iop(a))
        with np.errstate(all="ignore"):
            return _F(fop(_as_f(a)))

    return g


def _to_int_fn(fop: Callable) -> Callable:
    def g(a):
        if isinstance(a, int):
            return a
        if not math.isfinite(a):  # math.ceil(inf) is an OverflowError: keep to the documented ValueError
            raise ValueError(f"expression value {a} is not a finite number")
        return _to_int(fop(float(a)))

    return g


def _int_only(name: str, iop: Callable) -> Callable:
    def g(a, b):
        if not (isinstance(a, int) and isinstance(b, int)):
            raise ValueError(f"expression operator {name!r} takes integers")
        return _wrap(iop(a, b))

    return g


def _idiv(a: int, b: int) -> int:
    if b == 0:
        raise ValueError("expression divides by zero")
    return _tdiv(a, b)


def _remainder(a, b):
    r = np.fmod(a, b)
    if a * b < 0:
        r = r + b
    return r


def _sign(a):
    return _F(1) if a > 0 else (_F(0) if a == 0 else _F(-1))


def _lshift(a, b):
    # a << b for b >= 32 is a multiple of 2**32: 0 after the int32 wrap, without building a b-bit int
    # (lshift(1, 2147483647) would otherwise allocate 256 MiB and take seconds)
    return a << b if 0 <= b < 32 else 0


#: name -> (arity, function of typed values)
OPS: dict[str, tuple[int, Callable]] = {
    "+": (2, _int_or_float2(lambda a, b: a + b, lambda a, b: a + b)),
    "-": (2, _int_or_float2(lambda a, b: a - b, lambda a, b: a - b)),
    "*": (2, _int_or_float2(lambda a, b: a * b, lambda a, b: a * b)),
    "//": (2, _int_or_float2(_idiv, lambda a, b: np.floor(a / b))),
    "max": (2, _int_or_float2(max, lambda a, b: max(a, b))),
    "min": (2, _int_or_float2(min, lambda a, b: min(a, b))),
    "/": (2, _float2(lambda a, b: a / b)),
    "atan2": (2, _float2(np.arctan2)),
    "fmod": (2, _float2(np.fmod)),
    "pow": (2, _float2(np.power)),
    "remainder": (2, _float2(_remainder)),
    "logaddexp": (2, _float2(lambda a, b: np.log(np.exp(a) + np.exp(b)))),
    "and": (2, _int_only("and", lambda a, b: a & b)),
    "or": (2, _int_only("or", lambda a, b: a | b)),
    "xor": (2, _int_only("xor", lambda a, b: a ^ b)),
    "lshift": (2, _int_only("lshift", _lshift)),
    "rshift": (2, _int_only("rshift", lambda a, b: a >> b if b >= 0 else 0)),
    "abs": (1, _int_or_float1(abs, np.abs)),
    "neg": (1, _int_or_float1(lambda a: -a, lambda a: -a)),
    "sign": (1, _int_or_float1(lambda a: (a > 0) - (a < 0), _sign)),
    "square": (1, _int_or_float1(lambda a: a * a, lambda a: a * a)),
    "trunc": (1, _to_int_fn(math.trunc)),
    "ceil": (1, _to_int_fn(math.ceil)),
    "floor": (1, _to_int_fn(math.floor)),
    "round": (1, _to_int_fn(_round_half_away)),
    "acos": (1, _floatfn(np.arccos)),
    "acosh": (1, _floatfn(np.arccosh)),
    "asin": (1, _floatfn(np.arcsin)),
    "asinh": (1, _floatfn(np.arcsinh)),
    "atan": (1, _floatfn(np.arctan)),
    "atanh": (1, _floatfn(np.arctanh)),
    "cos": (1, _floatfn(np.cos)),
    "cosh": (1, _floatfn(np.cosh)),
    "erf": (1, _floatfn(lambda x: math.erf(float(x)))),
    "exp": (1, _floatfn(np.exp)),
    "log": (1, _floatfn(np.log)),
    "log10": (1, _floatfn(np.log10)),
    "reciprocal": (1, _floatfn(lambda x: _F(1) / x)),
    "rsqrt": (1, _floatfn(lambda x: _F(1) / np.sqrt(x))),
    "sin": (1, _floatfn(np.sin)),
    "sinh": (1, _floatfn(np.sinh)),
    "sqrt": (1, _floatfn(np.sqrt)),
    "tan": (1, _floatfn(np.tan)),
    "tanh": (1, _floatfn(np.tanh)),
}

_REF = re.compile(r"^([0-9])([whdcn])$")
_NUM = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_TOKEN = re.compile(r"\s*([(),]|[^(),\s]+)\s*")


def blob_dims(a: np.ndarray) -> dict[str, int]:
    """ncnn's w/h/d/c (and batch n = 1) of a blob in ncnn numpy layout (missing dims are 1)."""
    return shape_dims(np.shape(a))


def shape_dims(s: Sequence[int]) -> dict[str, int]:
    """ncnn's w/h/d/c (and n = 1) of a blob shape (c, d, h, w) / (c, h, w) / (h, w) / (w,)."""
    s = tuple(int(v) for v in s)
    nd = len(s)
    if nd == 0:
        return dict(w=0, h=0, d=0, c=0, n=0)
    w = s[-1]
    h = s[-2] if nd >= 2 else 1
    d = s[1] if nd == 4 else 1
    c = s[0] if nd >= 3 else 1
    return dict(w=int(w), h=int(h), d=int(d), c=int(c), n=1)


def _literal(tok: str):
    """ncnn reads a literal both as %d and %f: an int when the two agree, else a float32."""
    if not _NUM.match(tok):
        raise ValueError(f"malformed token {tok!r}")
    vf = _F(float(tok))
    m = re.match(r"[+-]?\d+", tok)
    if m is not None:
        vi = int(m.group())
        if -(2**31) <= vi < 2**31 and _F(vi) == vf:
            return vi
    return vf


#: how deep operators may nest in one expression (real ones nest a few levels; ncnn's own evaluator uses a
#: stack, ours recursion: bounded here so a hostile .param cannot exhaust the interpreter's stack)
MAX_DEPTH = 100


class Expr:
    """A parsed ncnn list expression: ``n_blobs`` bottoms referenced, ``n_items`` values produced."""

    def __init__(self, text: str):
        self.text = text
        toks = [t for t in _TOKEN.findall(text)]
        if "".join(toks) != re.sub(r"\s+", "", text):
            raise ValueError(f"expression {text!r}: cannot tokenize")
        self._toks = toks
        self._pos = 0
        self._depth = 0
        self.n_blobs = 0
        if not toks:
            self.items: list[Callable] = []
        else:
            self.items = self._list()
            if self._pos != len(toks):
                raise ValueError(f"expression {text!r}: unexpected {toks[self._pos]!r}")
        del self._toks
        self.n_items = len(self.items)

    # -- parser: list := item (',' item)* ; item := NAME '(' list ')' | ref | number
    def _peek(self) -> str | None:
        return self._toks[self._pos] if self._pos < len(self._toks) else None

    def _take(self) -> str:
        t = self._peek()
        if t is None:
            raise ValueError(f"expression {self.text!r} ends early")
        self._pos += 1
        return t

    def _list(self) -> list[Callable]:
        items = [self._item()]
        while self._peek() == ",":
            self._take()
            items.append(self._item())
        return items

    def _item(self) -> Callable:
        t = self._take()
        if t in "(),":
            raise ValueError(f"expression {self.text!r}: unexpected {t!r}")
        if self._peek() == "(":
            self._take()
            if t not in OPS:
                raise ValueError(f"expression {self.text!r}: unknown operator {t!r}")
            arity, fn = OPS[t]
            self._depth += 1
            if self._depth > MAX_DEPTH:  # the parser and the closures it builds recurse once per level
                raise ValueError(f"expression {self.text[:60]!r}...: operators nested deeper than {MAX_DEPTH}")
            args = self._list()
            self._depth -= 1
            if self._take() != ")":
                raise ValueError(f"expression {self.text!r}: missing ')'")
            if len(args) != arity:
                raise ValueError(f"expression {self.text!r}: {t!r} takes {arity} argument(s), got {len(args)}")
            if arity == 1:
                a0 = args[0]
                return lambda dims: fn(a0(dims))
            a0, a1 = args
            return lambda dims: fn(a0(dims), a1(dims))
        m = _REF.match(t)
        if m:
            i, k = int(m.group(1)), m.group(2)
            self.n_blobs = max(self.n_blobs, i + 1)

            def ref(dims, i=i, k=k):
                if i >= len(dims):
                    raise ValueError(f"expression {self.text!r} reads bottom {i}, the layer has {len(dims)}")
                return dims[i][k]

            return ref
        if t in OPS:
            raise ValueError(f"expression {self.text!r}: operator {t!r} without arguments")
        try:
            v = _literal(t)
        except ValueError:
            raise ValueError(f"expression {self.text!r}: malformed token {t!r}") from None
        return lambda dims: v

    def eval(self, blobs: Sequence[np.ndarray]) -> list[int]:
        """The list's values (ints) for these bottoms (arrays in ncnn layout, or shapes as tuples)."""
        dims = [blob_dims(b) if isinstance(b, np.ndarray) else shape_dims(b) for b in blobs]
        return [_to_int(f(dims)) for f in self.items]

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"


def parse(text: str) -> Expr:
    return Expr(text)


def count_blobs(text: str) -> int:
    """How many bottoms the expression references (highest index + 1; 0 for none or empty)."""
    return Expr(text).n_blobs if text else 0
