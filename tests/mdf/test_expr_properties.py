"""Property test: compiled expressions compute what the same arithmetic computes directly."""

from __future__ import annotations

import math
import operator

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from stdops.mdf.expr import compile_value  # noqa: E402

VARS = {"a": 1.5, "b": -2.0, "c": 3.0, "onnx::X_1": 0.25}
OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul}

leaf = st.one_of(
    st.sampled_from(sorted(VARS)).map(lambda v: ("var", v)),
    st.floats(-10, 10, allow_nan=False).map(lambda x: ("num", round(x, 3))),
)


def _tree(children):
    return st.one_of(
        st.tuples(st.just("bin"), st.sampled_from(sorted(OPS)), children, children),
        st.tuples(st.just("div"), children, children),
        st.tuples(st.just("neg"), children),
        st.tuples(st.just("if"), children, children, children),
        st.tuples(st.just("call"), st.sampled_from(["numpy.tanh", "math.atan", "abs"]), children),
    )


trees = st.recursive(leaf, _tree, max_leaves=12)


def text(t):
    k = t[0]
    if k == "var":
        return t[1]
    if k == "num":
        return repr(t[1])
    if k == "bin":
        return f"({text(t[2])} {t[1]} {text(t[3])})"
    if k == "div":
        return f"({text(t[1])} / (abs({text(t[2])}) + 1))"
    if k == "neg":
        return f"(-{text(t[1])})"
    if k == "if":
        return f"({text(t[1])} if {text(t[2])} > 0 else {text(t[3])})"
    return f"{t[1]}({text(t[2])})"


def value(t):
    k = t[0]
    if k == "var":
        return VARS[t[1]]
    if k == "num":
        return t[1]
    if k == "bin":
        return OPS[t[1]](value(t[2]), value(t[3]))
    if k == "div":
        return value(t[1]) / (abs(value(t[2])) + 1)
    if k == "neg":
        return -value(t[1])
    if k == "if":
        return value(t[1]) if value(t[2]) > 0 else value(t[3])
    f = {"numpy.tanh": math.tanh, "math.atan": math.atan, "abs": abs}[t[1]]
    return f(value(t[2]))


@settings(max_examples=200, deadline=None)
@given(trees)
def test_compiled_expressions_compute_like_python(t):
    c = compile_value(text(t), {k: k for k in VARS})
    got = c.fn(dict(VARS))
    assert float(got) == pytest.approx(value(t), rel=1e-12, abs=1e-12)
