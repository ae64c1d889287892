"""Every ncnn layer declares the kernels it runs on, and the declaration is checked against its code.

The code a layer runs is its adapter and the ncnn helpers it calls (found by walking the names its source
uses, through closures and module tables, within stdops.ncnn). From that code:

- the kernels it references must be exactly the ones ``@layer(..., kernels=...)`` declares;
- it must not compute, with NumPy or SciPy, math that a kernel implements (``np.exp``, ``np.tanh``,
  ``np.matmul``, ``@``, ...) unless the layer says why it is ncnn's own math (``ncnn_only="..."``);
- it reaches kernels by name (imported functions), never through string look-ups in ``OPS``;
- a layer that declares no kernel gives the reason.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import types

import pytest

import stdops.ncnn.net  # noqa: F401  (registers every layer)
from stdops.ncnn.spec import LAYERS
from stdops.ops import OPS, _registry

#: NumPy / SciPy functions whose math a kernel implements -> that kernel
MATH_KERNELS = {
    "exp": "exp",
    "log": "log",
    "tanh": "tanh",
    "sqrt": "sqrt",
    "power": "pow_",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "sinh": "sinh",
    "cosh": "cosh",
    "erf": "erf",
    "expit": "sigmoid",
    "softmax": "softmax",
    "matmul": "mat_mul",
    "dot": "mat_mul",
    "einsum": "einsum",
    "tensordot": "mat_mul",
    "@": "mat_mul",
}
_ARRAY_MODULES = ("numpy", "scipy")


def _source_tree(fn: types.FunctionType) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None


def _namespace(fn: types.FunctionType) -> dict:
    ns = dict(fn.__globals__)
    if fn.__closure__:
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                ns[name] = cell.cell_contents
            except ValueError:  # an empty cell
                pass
    return ns


def _values(v):
    if isinstance(v, dict):
        yield from v.values()
    elif isinstance(v, (list, tuple, frozenset, set)):
        yield from v
    else:
        yield v


def layer_code(spec) -> dict:
    """What a layer's code reaches: {'kernels': set, 'math': set, 'ops_lookup': bool, 'functions': list}."""
    out = {"kernels": set(), "math": set(), "ops_lookup": False, "functions": []}
    seen: set[int] = set()
    stack = [spec.build]
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        out["functions"].append(fn)
        tree = _source_tree(fn)
        if tree is None:
            continue
        ns = _namespace(fn)
        found = []
        for node in ast.walk(tree):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                out["math"].add("@")
            if isinstance(node, ast.Name) and node.id in ns:
                found.append(ns[node.id])
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ns:
                base = ns[node.value.id]
                if isinstance(base, types.ModuleType):
                    if base.__name__.split(".")[0] in _ARRAY_MODULES and node.attr in MATH_KERNELS:
                        out["math"].add(f"{node.value.id}.{node.attr}")
                    found.append(getattr(base, node.attr, None))
        for v in found:
            if v is OPS:
                out["ops_lookup"] = True
                continue
            for x in _values(v):
                if isinstance(x, types.FunctionType):
                    d = _registry._BY_FN.get(id(x))
                    if d is not None and d.fn is x:
                        out["kernels"].add(d.name)
                    elif x.__module__.startswith("stdops.ncnn"):
                        stack.append(x)
    return out


CODE = {name: layer_code(spec) for name, spec in LAYERS.items()}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_declares_the_kernels_its_code_runs_on(name):
    spec, code = LAYERS[name], CODE[name]
    assert not code["ops_lookup"], f"{name}: reaches kernels through OPS[...] look-ups; import them"
    declared = set(spec.kernels)
    assert code["kernels"] == declared, (
        f"{name}: declares {sorted(declared)}, its code runs on {sorted(code['kernels'])} "
        f"(undeclared: {sorted(code['kernels'] - declared)}, unused: {sorted(declared - code['kernels'])})"
    )


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_computes_no_kernel_math_unless_ncnn_only(name):
    spec, code = LAYERS[name], CODE[name]
    if spec.ncnn_only:
        assert len(spec.ncnn_only) > 20, f"{name}: ncnn_only needs a reason, got {spec.ncnn_only!r}"
        return
    assert spec.kernels, f"{name}: declares no kernel and gives no reason (ncnn_only)"
    owned = {m: MATH_KERNELS[m.rsplit(".", 1)[-1]] for m in code["math"]}
    assert not owned, (
        f"{name}: computes {', '.join(f'{m} (kernel {k})' for m, k in sorted(owned.items()))} itself; "
        "call the kernel, or mark the layer ncnn_only with the reason ncnn's math differs"
    )


def test_the_check_sees_math_and_kernels():
    """The walk finds what it must: a kernel behind a module alias, np.exp in a nested helper."""
    import numpy as np

    from stdops.ops import activation as activations

    def helper(x):
        return np.exp(x)

    def build(p, w):
        def run(x):
            return activations.relu(helper(x)) @ x

        return run

    helper.__module__ = build.__module__ = "stdops.ncnn.layers.fake"
    code = layer_code(types.SimpleNamespace(build=build))
    assert code["kernels"] == {"relu"} and code["math"] == {"np.exp", "@"}


def test_registry_records_the_ncnn_layers():
    from stdops.ops._registry import uses

    assert "InnerProduct" in uses("gemm")["ncnn"]
    assert "LSTM" in uses("lstm_cell")["ncnn"]
    n = sum(1 for d in OPS.values() if "ncnn" in uses(d))
    assert n >= len({k for s in LAYERS.values() for k in s.kernels})
