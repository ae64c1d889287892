"""Safe MDF expressions: parsed once with :mod:`ast` into closures over a whitelist.

Model text is never given to ``eval``/``exec``/``compile``. An expression may use

- numbers, strings, ``True``/``False``/``None``; list, tuple and dict literals;
- the ids of the node's input ports, parameters and functions (and a function's arguments). Ids that
  are not Python names (``onnx::Conv_1``, ``/A/Add``, ``x.11``) are looked up directly, also inside
  a larger expression (``/A/Split[0]``);
- arithmetic (``+ - * / // % ** @``), comparisons (chained), ``and``/``or``/``not`` (Python's
  semantics; element-wise for arrays of several elements), bit ops, ``a if c else b``,
  indexing and slicing;
- calls to whitelisted functions: ``math.<name>``, ``numpy.<name>``/``np.<name>`` from a fixed
  list, a few builtins (``abs min max round int float bool sum len pow``) and the MDF standard
  functions by name (``logistic(x, gain=2)``).

Everything else (attribute access outside ``math.``/``numpy.``, dunder names, lambdas,
comprehensions, ``:=``, f-strings, starred arguments, unknown names) is refused when the model is
loaded, with an error naming the field. A compiled expression is a closure ``fn(scope)`` where
``scope`` is a dict from the prepared keys to values: evaluating it does no parsing and builds no
strings.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

from ..errors import ResourceLimitError, StdopsError, ValidationError
from .safe_ops import (  # noqa: F401  (re-exported: the whitelist is part of this module's interface)
    BINOPS,
    BUILTIN_WHITELIST,
    COMPARISONS,
    IN_PLACE_KEYWORDS,
    MATH_WHITELIST,
    NUMPY_WHITELIST,
    ExprError,
    _check_result,
    _positional_limit,
    index,
)

Scope = dict
Fn = Callable[[Scope], Any]


# ---------------------------------------------------------------------------------------------
# The whitelist and its guards live in safe_ops; the operators by AST node type

_BINOPS: dict[type, Callable] = {getattr(ast, name): fn for name, fn in BINOPS.items()}
_UNARY: dict[type, Callable] = {  # ``not`` has its own visitor (_not: elementwise on arrays)
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
}
_CMP: dict[type, Callable] = {getattr(ast, name): fn for name, fn in COMPARISONS.items()}

#: modules an expression may take attributes of
MODULES = {"math": MATH_WHITELIST, "numpy": NUMPY_WHITELIST, "np": NUMPY_WHITELIST}

#: extra callables visible by bare name (set by stdops.mdf.functions: the MDF standard functions)
EXTRA_FUNCTIONS: dict[str, Callable] = {}

#: bare names accepted as aliases of numpy functions (the standard functions' own spelling)
NUMPY_ALIASES = (
    "exp",
    "sin",
    "cos",
    "tan",
    "sinh",
    "cosh",
    "tanh",
    "arcsin",
    "arccos",
    "arctan",
    "sqrt",
    "log",
    "maximum",
    "minimum",
)


def _truth(v: Any) -> Any:
    """Python truthiness; for an array of several elements (where Python raises) the element-wise
    truth array, so ``and``/``or``/``not`` work element-wise on vectors."""
    if isinstance(v, np.ndarray) and v.size > 1:
        return None
    return bool(v)


def _and(a: Any, b_fn: Fn, s: Scope) -> Any:
    t = _truth(a)
    if t is None:
        return np.logical_and(a, b_fn(s))
    return b_fn(s) if t else a


def _or(a: Any, b_fn: Fn, s: Scope) -> Any:
    t = _truth(a)
    if t is None:
        return np.logical_or(a, b_fn(s))
    return a if t else b_fn(s)


def _not(a: Any) -> Any:
    t = _truth(a)
    return np.logical_not(a) if t is None else not t


# ---------------------------------------------------------------------------------------------
# Compilation

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Compiled:
    """A compiled value: ``fn(scope)``; ``names`` are the model ids it reads; ``const`` is True
    when it reads none (then ``value`` is its value)."""

    __slots__ = ("fn", "names", "const", "value", "text")

    def __init__(self, fn: Fn, names: frozenset, const: bool, value: Any = None, text: Any = None):
        self.fn, self.names, self.const, self.value, self.text = fn, names, const, value, text

    def __repr__(self) -> str:
        return f"Compiled({self.text!r})"


def constant_value(value: Any) -> Any:
    """A literal model value as the engine uses it: lists become arrays (ragged lists and lists of
    mappings stay as they are read: arrays of objects). Integers beyond 64 bits in a list are refused
    (numpy would keep them as Python ints and compute on them without bound)."""
    if isinstance(value, list):
        try:
            arr = np.array(value)
        except ValueError:
            arr = np.empty(len(value), dtype=object)
            arr[:] = value
        except OverflowError:
            raise ExprError("an integer beyond 64 bits in a list (refused)") from None
        return _check_result(arr, "list") if arr.dtype == object else arr
    if type(value) is int:
        _check_result(value, "integer")
    if isinstance(value, tuple):
        return tuple(value)
    return value


def _number(text: str) -> Any:
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return None


def _substitute_ids(text: str, ids: list[str]) -> tuple[str, dict[str, str]]:
    """Replace ids that are not Python names with placeholder names (once, at compile time)."""
    mapping: dict[str, str] = {}
    odd = sorted((i for i in ids if not _IDENT.match(i) and i and i in text), key=len, reverse=True)
    for n, ident in enumerate(odd):
        ph = f"_mdf_id_{n}_"
        pat = re.compile(r"(?<![A-Za-z0-9_.:/])" + re.escape(ident) + r"(?![A-Za-z0-9_])")
        new = pat.sub(ph, text)
        if new != text:
            mapping[ph] = ident
            text = new
    return text, mapping


def referenced_names(text: str) -> set[str]:
    """The free names of an expression (no validation beyond parsing)."""
    num = _number(text)
    if num is not None:
        return set()
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, MemoryError, RecursionError, ValueError):
        return {text}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def compile_value(
    value: Any, known: Mapping[str, Hashable], *, where: str = "", path: str | None = None, allow_strings: bool = False
) -> Compiled:
    """Compile a model value (number, list, dict, expression string) into a ``Compiled``.

    ``known`` maps every name visible to the expression to its scope key. A string that is
    exactly a visible name reads that entry; a string that parses as a number is that number;
    otherwise it is an expression. Errors raise ``ValidationError(path, where, ...)``.
    """
    if not isinstance(value, str):
        if isinstance(value, dict):
            return Compiled(_constant(value), frozenset(), True, value, value)
        try:
            v = constant_value(value)
        except StdopsError as e:
            raise ValidationError(path, where or "(value)", str(e)) from None
        return Compiled(_constant(v), frozenset(), True, v, value)
    if value in known:
        return Compiled(_reader(known[value]), frozenset([value]), False, None, value)
    num = _number(value)
    if num is not None:
        return Compiled(_constant(num), frozenset(), True, num, value)
    try:
        fn, names = compile_expression(value, known)
    except ExprError as e:
        if allow_strings:
            return Compiled(_constant(value), frozenset(), True, value, value)
        raise ValidationError(path, where or "(expression)", f"{e}: {value!r}") from None
    run = _located(fn, where or "(expression)", path)
    if not names:  # constant folding at load: every operation is bounded by stdops.limits (safe_ops)
        try:
            v = fn({})  # unlocated: the ValidationError names the file and the field
        except StdopsError as e:
            raise ValidationError(path, where or "(expression)", f"{getattr(e, 'detail', e)}: {value!r}") from None
        except Exception:  # noqa: BLE001 - evaluated at run time then, where it will raise again
            return Compiled(run, frozenset(), False, None, value)
        return Compiled(_constant(v), frozenset(), True, v, value)
    return Compiled(run, frozenset(names), False, None, value)


def _constant(v: Any) -> Fn:
    return lambda s: v


def _reader(key: Any) -> Fn:
    return lambda s: s[key]


def _located(fn: Fn, where: str, path: str | None) -> Fn:
    """``fn`` whose refusals (a limit, a refused value) name the file and the field of the expression."""
    loc = f"{path}: {where}" if path else where

    def run(s: Scope) -> Any:
        try:
            return fn(s)
        except (ResourceLimitError, ExprError) as e:
            if e.located:
                raise
            err = type(e)(f"{loc}: {e}")
            err.located = True
            raise err from None

    return run


def compile_expression(text: str, known: Mapping[str, Hashable]) -> tuple[Fn, set[str]]:
    """Parse ``text`` and build its closure; returns (fn, model ids read)."""
    src, mapping = _substitute_ids(text, list(known))
    src = src.strip()
    if len(src) > 100_000:
        raise ExprError("expression longer than 100000 characters")
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError as e:
        raise ExprError(f"not a valid expression ({e.msg})") from None
    except (MemoryError, RecursionError):  # CPython's parser gives up on deep nesting this way
        raise ExprError("expression nested too deeply to parse") from None
    names: set[str] = set()
    c = _Compiler(known, mapping, names)
    return c.visit(tree.body), names


class _Compiler:
    def __init__(self, known: Mapping[str, Hashable], mapping: dict[str, str], names: set[str]):
        self.known, self.mapping, self.names = known, mapping, names
        self.depth = 0

    def visit(self, node: ast.AST) -> Fn:
        self.depth += 1
        if self.depth > 200:
            raise ExprError("expression nested too deeply")
        try:
            meth = getattr(self, "v_" + type(node).__name__, None)
            if meth is None:
                raise ExprError(f"{_describe(node)} is not allowed in an MDF expression")
            return meth(node)
        finally:
            self.depth -= 1

    # leaves
    def v_Constant(self, node: ast.Constant) -> Fn:
        v = node.value
        if not isinstance(v, (int, float, complex, str, bool, type(None))):
            raise ExprError(f"constant {v!r} is not allowed")
        _check_result(v, "literal")
        return lambda s: v

    def _name_value(self, ident: str) -> tuple[bool, Any]:
        """(is_scope_key, key_or_value)"""
        ident = self.mapping.get(ident, ident)
        if ident in self.known:
            self.names.add(ident)
            return True, self.known[ident]
        if ident.startswith("__") or ident.startswith("_mdf_"):
            raise ExprError(f"name {ident!r} is not allowed")
        if ident in BUILTIN_WHITELIST:
            return False, BUILTIN_WHITELIST[ident]
        if ident in EXTRA_FUNCTIONS:
            return False, EXTRA_FUNCTIONS[ident]
        if ident in NUMPY_ALIASES:
            return False, NUMPY_WHITELIST[ident]
        if ident in MODULES:
            return False, MODULES[ident]
        raise ExprError(f"unknown name {ident!r}")

    def v_Name(self, node: ast.Name) -> Fn:
        is_key, v = self._name_value(node.id)
        if is_key:
            return _reader(v)
        if isinstance(v, dict) and v in MODULES.values():
            raise ExprError(f"module {node.id!r} can only be used as {node.id}.<name>")
        return lambda s: v

    def v_Attribute(self, node: ast.Attribute) -> Fn:
        if not isinstance(node.value, ast.Name) or node.value.id not in MODULES:
            raise ExprError(f"attribute access .{node.attr} is not allowed (only math.<name> and numpy.<name>)")
        table = MODULES[node.value.id]
        if node.attr.startswith("_") or node.attr not in table:
            raise ExprError(f"{node.value.id}.{node.attr} is not an allowed function")
        v = table[node.attr]
        return lambda s: v

    # operators
    def v_BinOp(self, node: ast.BinOp) -> Fn:
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise ExprError(f"operator {type(node.op).__name__} is not allowed")
        lf, rf = self.visit(node.left), self.visit(node.right)
        return lambda s: op(lf(s), rf(s))

    def v_UnaryOp(self, node: ast.UnaryOp) -> Fn:
        f = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return lambda s: _not(f(s))
        op = _UNARY[type(node.op)]
        return lambda s: op(f(s))

    def v_BoolOp(self, node: ast.BoolOp) -> Fn:
        fns = [self.visit(v) for v in node.values]
        comb = _and if isinstance(node.op, ast.And) else _or
        first, rest = fns[0], fns[1:]

        def run(s: Scope) -> Any:
            v = first(s)
            for f in rest:
                v = comb(v, f, s)
            return v

        return run

    def v_Compare(self, node: ast.Compare) -> Fn:
        left = self.visit(node.left)
        ops = [_CMP[type(o)] for o in node.ops]
        rights = [self.visit(c) for c in node.comparators]
        if len(ops) == 1:
            op, r = ops[0], rights[0]
            return lambda s: op(left(s), r(s))

        def run(s: Scope) -> Any:
            a = left(s)
            result: Any = None
            for op, rf in zip(ops, rights):
                b = rf(s)
                c = op(a, b)
                if result is None:
                    result = c
                else:
                    t = _truth(result)
                    result = np.logical_and(result, c) if t is None else (c if t else result)
                if _truth(result) is False:
                    return result
                a = b
            return result

        return run

    def v_IfExp(self, node: ast.IfExp) -> Fn:
        t, b, o = self.visit(node.test), self.visit(node.body), self.visit(node.orelse)

        def run(s: Scope) -> Any:
            c = t(s)
            tv = _truth(c)
            if tv is None:
                return np.where(c, b(s), o(s))
            return b(s) if tv else o(s)

        return run

    # containers and indexing
    def v_List(self, node: ast.List) -> Fn:
        fns = [self.visit(e) for e in node.elts]

        def run(s: Scope) -> Any:
            vals = [f(s) for f in fns]
            if all(
                isinstance(v, (int, float, bool, np.number, np.bool_)) or (isinstance(v, np.ndarray) and v.ndim == 0)
                for v in vals
            ):
                return np.array(vals)  # a vector of numbers; a list of arrays stays a list
            return vals

        return run

    def v_Tuple(self, node: ast.Tuple) -> Fn:
        fns = [self.visit(e) for e in node.elts]
        return lambda s: tuple(f(s) for f in fns)

    def v_Dict(self, node: ast.Dict) -> Fn:
        if any(k is None for k in node.keys):
            raise ExprError("dict unpacking (**) is not allowed")
        ks = [self.visit(k) for k in node.keys if k is not None]  # (none is: refused above)
        vs = [self.visit(v) for v in node.values]
        return lambda s: {k(s): v(s) for k, v in zip(ks, vs)}

    def v_Subscript(self, node: ast.Subscript) -> Fn:
        base = self.visit(node.value)
        idx = self.visit(node.slice)
        return lambda s: index(base(s), idx(s))

    def v_Slice(self, node: ast.Slice) -> Fn:
        lo = self.visit(node.lower) if node.lower is not None else (lambda s: None)
        hi = self.visit(node.upper) if node.upper is not None else (lambda s: None)
        st = self.visit(node.step) if node.step is not None else (lambda s: None)
        return lambda s: slice(lo(s), hi(s), st(s))

    def v_Index(self, node: Any) -> Fn:  # Python < 3.9
        return self.visit(node.value)

    # calls
    def v_Call(self, node: ast.Call) -> Fn:
        if isinstance(node.func, ast.Name):
            is_key, target = self._name_value(node.func.id)
            if is_key or not callable(target):
                raise ExprError(f"{node.func.id!r} is not a function")
        elif isinstance(node.func, ast.Attribute):
            target = self.v_Attribute(node.func)({})
            if not callable(target):
                raise ExprError(f"{ast.unparse(node.func)} is not a function")
        else:
            raise ExprError("only calls of named functions are allowed")
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise ExprError("starred arguments are not allowed")
        for k in node.keywords:
            if k.arg is None:
                raise ExprError("** arguments are not allowed")
            if k.arg in IN_PLACE_KEYWORDS:
                raise ExprError(f"{k.arg}= writes into an argument: not allowed in an MDF expression")
        limit = _positional_limit(target)
        if limit is not None and len(node.args) > limit:
            raise ExprError(
                f"{ast.unparse(node.func)} takes at most {limit} positional argument(s) here "
                "(a further one would be an output it writes into)"
            )
        args = [self.visit(a) for a in node.args]
        kws = [(k.arg, self.visit(k.value)) for k in node.keywords if k.arg is not None]  # (** refused above)
        if not kws:
            if len(args) == 1:
                a0 = args[0]
                return lambda s: target(a0(s))
            if len(args) == 2:
                a0, a1 = args
                return lambda s: target(a0(s), a1(s))
            return lambda s: target(*[a(s) for a in args])
        return lambda s: target(*[a(s) for a in args], **{k: f(s) for k, f in kws})


def _describe(node: ast.AST) -> str:
    names = {
        "Lambda": "a lambda",
        "ListComp": "a comprehension",
        "SetComp": "a comprehension",
        "DictComp": "a comprehension",
        "GeneratorExp": "a generator expression",
        "NamedExpr": "an assignment expression (:=)",
        "JoinedStr": "an f-string",
        "Starred": "a starred expression",
        "Await": "await",
        "Yield": "yield",
        "YieldFrom": "yield",
        "Set": "a set literal",
        "FormattedValue": "an f-string",
    }
    return names.get(type(node).__name__, type(node).__name__)
