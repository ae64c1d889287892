"""MDF values as ONNX: the expressions, standard functions and ``onnx::`` calls of one MDF node, translated into
ONNX nodes (used by mdf_to_onnx.py).

A value is a :class:`Const` (a number or list from the model, kept in Python until an ONNX op needs it as a
tensor, when its element type follows the op: the same type variable as the op's tensor inputs, the
schema's fixed type, or the ``dtype`` metadata ONNX -> MDF wrote), a :class:`Tensor` (an ONNX value) or a
:class:`Multi` (several: a multi-output op, a list literal). Expressions are parsed with :mod:`ast` and
only a whitelist is translated: numbers, names, arithmetic, comparisons, ``name[k]``, list literals, the
math functions the MDF standard functions use, and the standard functions with an ONNX form.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from .onnx_build import GraphBuilder


@dataclasses.dataclass
class Const:
    value: Any
    dtype: np.dtype | None = None  # from metadata; None: decided by the consumer
    name: str | None = None  # the initializer's name, when ONNX -> MDF recorded it


@dataclasses.dataclass
class Tensor:
    name: str
    dtype: np.dtype


@dataclasses.dataclass
class Multi:
    items: list


class Refused(Exception):
    """A construct with no ONNX form (the caller adds the file and the place)."""


_UNARY_CALLS = {
    "exp": "Exp",
    "sin": "Sin",
    "cos": "Cos",
    "tan": "Tan",
    "sinh": "Sinh",
    "cosh": "Cosh",
    "tanh": "Tanh",
    "arcsin": "Asin",
    "arccos": "Acos",
    "arctan": "Atan",
    "sqrt": "Sqrt",
    "log": "Log",
    "abs": "Abs",
    "absolute": "Abs",
    "fabs": "Abs",
    "floor": "Floor",
    "ceil": "Ceil",
    "negative": "Neg",
    "sign": "Sign",
    "reciprocal": "Reciprocal",
    "asin": "Asin",
    "acos": "Acos",
    "atan": "Atan",
}
_BINARY_CALLS = {
    "maximum": "Max",
    "minimum": "Min",
    "fmax": "Max",
    "fmin": "Min",
    "power": "Pow",
    "pow": "Pow",
    "add": "Add",
    "subtract": "Sub",
    "multiply": "Mul",
    "divide": "Div",
    "matmul": "MatMul",
    "dot": "MatMul",
}
_BINOPS = {ast.Add: "Add", ast.Sub: "Sub", ast.Mult: "Mul", ast.Div: "Div", ast.Pow: "Pow", ast.MatMult: "MatMul"}
_CMPS = {ast.Gt: "Greater", ast.Lt: "Less", ast.GtE: "GreaterOrEqual", ast.LtE: "LessOrEqual", ast.Eq: "Equal"}
_PY_BINOPS: dict[type, Callable] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def default_dtype(value: Any) -> np.dtype:
    """The element type of a model constant with no other hint: integers int64, else float32."""
    a = np.asarray(value)
    if a.dtype.kind in "iu":
        return np.dtype(np.int64)
    if a.dtype.kind == "b":
        return np.dtype(bool)
    return np.dtype(np.float32)


class ValueBuilder:
    """Translates values of one node; ``lookup(name)`` resolves a name visible in the node (a port,
    parameter, function or argument) to a value."""

    def __init__(self, g: GraphBuilder, lookup: Callable[[str], Any], float_dtype: np.dtype):
        self.g = g
        self.lookup = lookup
        self.float_dtype = np.dtype(float_dtype)

    # ------------------------------------------------------------------ tensors
    def tensor(self, v: Any, like: np.dtype | None = None) -> Tensor:
        if isinstance(v, Tensor):
            return v
        if isinstance(v, Multi):
            raise Refused("a list of several values where one tensor is needed")
        dtype = v.dtype or (like if like is not None else None)
        if dtype is None:
            dtype = default_dtype(v.value)
            if dtype.kind == "f":
                dtype = self.float_dtype
        arr = np.asarray(v.value, dtype=dtype)
        if v.name:
            hit = self.g.initializer_named(v.name)
            if hit is not None and hit[0] == arr.dtype and np.array_equal(hit[1], arr):
                return Tensor(v.name, np.dtype(dtype))
            if hit is None and v.name not in self.g.used:
                return Tensor(self.g.const(arr, dtype=dtype, name=v.name), np.dtype(dtype))
        return Tensor(self.g.const(arr, dtype=dtype, stem="const"), np.dtype(dtype))

    def op(self, op_type: str, args: list, **attrs: Any) -> Tensor:
        """An elementwise-typed op: constants take the type of the first tensor operand."""
        like = next((a.dtype for a in args if isinstance(a, Tensor)), self.float_dtype)
        ts = [self.tensor(a, like) for a in args]
        out = self.g.op(op_type, [t.name for t in ts], **attrs)
        return Tensor(out, ts[0].dtype if ts else self.float_dtype)

    # ------------------------------------------------------------------ expressions
    def expression(self, text: Any, known: set[str]) -> Any:
        """A model value: a number, list, the id of a visible name, or an expression over them."""
        if not isinstance(text, str):
            return Const(text)
        t = text.strip()
        if t in known:
            return self.lookup(t)
        try:
            return Const(int(t))
        except ValueError:
            pass
        try:
            return Const(float(t))
        except ValueError:
            pass
        src, mapping = _substitute_ids(t, known)
        try:
            tree = ast.parse(src, mode="eval")
        except SyntaxError as e:
            raise Refused(f"not a valid expression ({e.msg}): {text!r}") from None
        return self._visit(tree.body, mapping, known)

    def _visit(self, node: ast.AST, mapping: dict[str, str], known: set[str]) -> Any:
        def visit(n: ast.AST) -> Any:
            return self._visit(n, mapping, known)

        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return Const(node.value)
        if isinstance(node, ast.Name):
            name = mapping.get(node.id, node.id)
            if name in known:
                return self.lookup(name)
            if name in ("pi", "e"):
                return Const(float(np.pi if name == "pi" else np.e))
            raise Refused(f"unknown name {name!r}")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("math", "np", "numpy")
        ):
            if node.attr in ("pi", "e"):
                return Const(float(np.pi if node.attr == "pi" else np.e))
            raise Refused(f"{node.value.id}.{node.attr} is not a value")
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = visit(node.left), visit(node.right)
            if isinstance(a, Const) and isinstance(b, Const) and type(node.op) in _PY_BINOPS:
                return Const(
                    _PY_BINOPS[type(node.op)](np.asarray(a.value, np.float64), np.asarray(b.value, np.float64))
                )
            return self.op(_BINOPS[type(node.op)], [a, b])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = visit(node.operand)
            if isinstance(node.op, ast.UAdd):
                return v
            if isinstance(v, Const):
                return Const(-np.asarray(v.value, np.float64), v.dtype)
            return self.op("Neg", [v])
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPS:
            a, b = visit(node.left), visit(node.comparators[0])
            t = self.op(_CMPS[type(node.ops[0])], [a, b])
            return Tensor(self.g.cast(t.name, self.float_dtype), self.float_dtype)
        if isinstance(node, (ast.List, ast.Tuple)):
            return Multi([visit(e) for e in node.elts])
        if isinstance(node, ast.Subscript):
            base = visit(node.value)
            idx = node.slice
            if isinstance(idx, ast.Constant) and isinstance(idx.value, int):
                k = idx.value
                if isinstance(base, Multi):
                    return base.items[k]
                if isinstance(base, Const):
                    return Const(np.asarray(base.value)[k], base.dtype)
                g = self.g
                return Tensor(g.op("Gather", [base.name, g.const(np.asarray(k, np.int64))], axis=0), base.dtype)
            raise Refused("only a constant integer index name[k] is translated")
        if isinstance(node, ast.Call) and not node.keywords:
            fname = _call_name(node.func)
            args = [visit(a) for a in node.args]
            if fname in _UNARY_CALLS and len(args) == 1:
                return self.op(_UNARY_CALLS[fname], args)
            if fname in _BINARY_CALLS and len(args) == 2:
                return self.op(_BINARY_CALLS[fname], args)
            if fname in STANDARD_ONNX:
                return self.standard(fname, args)
            raise Refused(f"the function {fname or '?'}() has no ONNX translation")
        raise Refused(f"{type(node).__name__} has no ONNX translation")

    # ------------------------------------------------------------------ standard functions
    def standard(self, name: str, args: list) -> Tensor:
        """An MDF standard function (stdops.ops.mdf_standard) in the reference's operation order."""
        if len(args) != len(STANDARD_ONNX[name]):
            raise Refused(f"{name} takes {len(STANDARD_ONNX[name])} arguments ({', '.join(STANDARD_ONNX[name])})")
        op = self.op
        if name == "linear":
            v, slope, intercept = args
            return op("Add", [op("Mul", [v, slope]), intercept])
        if name == "logistic":
            v, gain, bias, offset = args
            inner = op("Add", [op("Mul", [op("Mul", [Const(-1), gain]), op("Add", [v, bias])]), offset])
            return op("Div", [Const(1), op("Add", [Const(1), op("Exp", [inner])])])
        if name == "exponential":
            v, scale, rate, bias, offset = args
            return op("Add", [op("Mul", [scale, op("Exp", [op("Add", [op("Mul", [rate, v]), bias])])]), offset])
        if name in _SCALED:
            v, scale = args
            return op("Mul", [scale, op(_SCALED[name], [v])])
        if name == "MatMul":
            return op("MatMul", args)
        if name == "Relu":
            (a,) = args
            t = self.tensor(a)
            return op("Mul", [t, Tensor(self.g.cast(op("Greater", [t, Const(0)]).name, t.dtype), t.dtype)])
        raise Refused(f"{name} has no ONNX form")


_SCALED = {
    "sin": "Sin",
    "cos": "Cos",
    "tan": "Tan",
    "sinh": "Sinh",
    "cosh": "Cosh",
    "tanh": "Tanh",
    "arcsin": "Asin",
    "arccos": "Acos",
    "arctan": "Atan",
}
#: standard functions with an ONNX form -> their argument names, in order
STANDARD_ONNX: dict[str, tuple[str, ...]] = {
    "linear": ("variable0", "slope", "intercept"),
    "logistic": ("variable0", "gain", "bias", "offset"),
    "exponential": ("variable0", "scale", "rate", "bias", "offset"),
    **{n: ("variable0", "scale") for n in _SCALED},
    "MatMul": ("A", "B"),
    "Relu": ("A",),
}


def _call_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in ("math", "np", "numpy")
    ):
        return func.attr
    return None


def _substitute_ids(text: str, known: set[str]) -> tuple[str, dict[str, str]]:
    """Ids that are not Python names (``/A/Add``, ``onnx::Conv_1``) replaced by placeholders."""
    mapping: dict[str, str] = {}
    odd = sorted((i for i in known if i and not _IDENT.match(i) and i in text), key=len, reverse=True)
    for n, ident in enumerate(odd):
        ph = f"_mdf_id_{n}_"
        new = re.sub(r"(?<![A-Za-z0-9_.:/])" + re.escape(ident) + r"(?![A-Za-z0-9_])", ph, text)
        if new != text:
            mapping[ph] = ident
            text = new
    return text, mapping
