"""ncnn shape expressions (stdops.ncnn.expr): parsing, typed evaluation, errors, and a randomized
differential test against the wheel through Crop's ends_expr (the output length reveals the value)."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.ncnn.expr import Expr, blob_dims, count_blobs

from . import wheel
from .test_shape import needs_wheel

A = np.zeros((3, 4, 5), np.float32)  # c=3 h=4 w=5
B = np.zeros((6, 7), np.float32)  # h=6 w=7


@pytest.mark.parametrize(
    "text,value",
    [
        ("-1,*(0h,2),+(1c,2)", [-1, 8, 3]),
        ("/(0w,2),*(0h,2),0c", [2, 8, 3]),
        ("max(2,3)", [3]),
        ("floor(sin(3.14))", [0]),
        ("+(*(-2,1),10)", [8]),
        ("1,2,+(3,2)", [1, 2, 5]),
        ("-(0w,1w)", [-2]),
        ("//(-7,2)", [-3]),  # ints: C division truncates
        ("//(-7.5,2)", [-4]),  # floats: floor(a / b)
        ("/(7,2)", [3]),  # 3.5 truncated
        ("/(-7,2)", [-3]),
        ("round(2.5),round(-2.5),ceil(0.2),floor(-0.2),trunc(-1.7)", [3, -3, 1, -1, -1]),
        ("remainder(-7,3),fmod(-7,3)", [2, -1]),
        ("remainder(-4,2)", [2]),  # as ncnn: fmod is -0, a * b < 0 adds b
        ("abs(-3),neg(4),sign(-9),square(-3)", [3, -4, -1, 9]),
        ("and(12,10),or(12,10),xor(12,10),lshift(1,4),rshift(32,2)", [8, 14, 6, 16, 8]),
        ("pow(2,10),sqrt(16),exp(0),log(1),rsqrt(4)", [1024, 4, 1, 0, 0]),
        ("*(1.5,0w)", [7]),
        ("2.0,1e1,-0.5,.5", [2, 10, 0, 0]),
        ("0d,0n,1d,1c", [1, 1, 1, 1]),
        (" +( 0w , 1 ) ", [6]),
    ],
)
def test_values(text, value):
    assert Expr(text).eval([A, B]) == value


def test_counts_and_dims():
    assert count_blobs("0w,1h") == 2 and count_blobs("+(2,3)") == 0 and count_blobs("") == 0
    assert Expr("3c").n_blobs == 4 and Expr("1,2,3").n_items == 3
    assert blob_dims(np.zeros((2, 3, 4, 5))) == dict(w=5, h=4, d=3, c=2, n=1)
    assert blob_dims(np.zeros((9,))) == dict(w=9, h=1, d=1, c=1, n=1)
    assert Expr("0w,0h").eval([(4, 6)]) == [6, 4]  # shapes work too


def test_typing():
    assert isinstance(Expr("+(1,2)").items[0]([]), int)
    assert isinstance(Expr("+(1,2.5)").items[0]([]), np.float32)
    assert isinstance(Expr("/(4,2)").items[0]([]), np.float32)
    assert isinstance(Expr("floor(2.5)").items[0]([]), int)


@pytest.mark.parametrize(
    "text,match",
    [
        ("+(1,2,3)", "takes 2 argument"),
        ("abs(1,2)", "takes 1 argument"),
        ("foo(1)", "unknown operator"),
        ("+(1", "ends early"),
        ("1,,2", "unexpected ','"),
        ("abc", "malformed token"),
        ("0x", "malformed token"),
        ("+", "without arguments"),
        (")", "unexpected"),
        ("1)", "unexpected"),
        ("+(1,2)3", "unexpected"),
    ],
)
def test_parse_errors(text, match):
    with pytest.raises(ValueError, match=match):
        Expr(text)


@pytest.mark.parametrize(
    "text,match",
    [
        ("//(1,0)", "divides by zero"),
        ("2w", "reads bottom 2"),
        ("log(0)", "not a finite"),
        ("and(1.5,2)", "takes integers"),
    ],
)
def test_eval_errors(text, match):
    with pytest.raises(ValueError, match=match):
        Expr(text).eval([A, B])


# ----------------------------------------------------------------------------- differential vs ncnn
def _leaf(rng):
    k = rng.integers(0, 4)
    if k == 0:
        return str(int(rng.integers(-9, 21)))
    if k == 1:
        return str(rng.choice(["2.5", "0.75", "-1.25", "3.0", "0.5", "7.9"]))
    return str(rng.choice(["0w", "0h", "0c", "1c", "1h", "1w", "1d"]))


def _pos(rng):
    return str(rng.choice(["1", "2", "3", "5", "1c", "1h", "1w", "2.5", "0.75"]))


def _gen(rng, depth):
    if depth == 0 or rng.random() < 0.25:
        return _leaf(rng)
    e = lambda: _gen(rng, depth - 1)  # noqa: E731
    k = int(rng.integers(0, 16))
    if k <= 3:
        return f"{rng.choice(['+', '-', '*', 'max', 'min'])}({e()},{e()})"
    if k == 4:
        return f"{rng.choice(['//', '/', 'fmod', 'remainder'])}({e()},{_pos(rng)})"
    if k == 5:
        return f"pow(abs({e()}),{rng.integers(0, 3)})"
    if k == 6:
        return f"atan2({e()},{e()})"
    if k <= 8:
        return f"{rng.choice(['abs', 'neg', 'sign', 'square', 'trunc', 'ceil', 'floor', 'round'])}({e()})"
    if k <= 10:
        return f"{rng.choice(['sin', 'cos', 'tanh', 'atan', 'asinh', 'erf'])}({e()})"
    if k == 11:
        return f"{rng.choice(['sqrt', 'rsqrt', 'reciprocal', 'log', 'log10'])}(+(abs({e()}),1))"
    if k == 12:
        return f"exp(min({e()},5))"
    if k == 13:
        return f"{rng.choice(['and', 'or', 'xor'])}(trunc({e()}),trunc({e()}))"
    if k == 14:
        return f"{rng.choice(['lshift', 'rshift'])}(trunc(abs({e()})),{rng.integers(0, 4)})"
    return f"*({e()},{_pos(rng)})"


@needs_wheel
def test_random_expressions_match_the_wheel():
    rng = np.random.default_rng(20261020)
    x = np.arange(2000, dtype=np.float32)
    ref = np.zeros((5, 7, 11), np.float32)  # 1c=5 1h=7 1w=11 1d=1
    failures = []
    for _ in range(60):
        e = _gen(rng, 3)
        # -(1d,1) is 0 and makes the layer read bottom 1 (else ncnn refuses the second bottom)
        params = {19: "0", 20: f"+(1000,max(-999,min(999,+({e},-(1d,1)))))", 21: "0"}
        want = wheel.wheel_run("Crop", params, [], [x, ref])[0]
        got = sn.run_layer("Crop", params, [], [x, ref])[0]
        if got.shape != want.shape:
            failures.append(f"{e}: ours {got.shape[0] - 1000}, ncnn {want.shape[0] - 1000}")
    assert not failures, "\n".join(failures)
