"""The ONNX node suite (regenerated in memory by the pinned onnx package) and our comparison rule.

The rule follows NOTES-onnx.md: floats within rtol 1e-3 / atol 1e-5 with NaNs in the same places,
floats of 16 bits or fewer (float16, bfloat16, float8, float4) within two units of their precision, integers, bools and
strings exact, shape and dtype exact, sequences and optionals structurally; ops whose output is random
by nature are compared on shape and dtype only.
"""

from __future__ import annotations

import functools
import re
import warnings

import numpy as np

RANDOM_OPS = frozenset(
    {"Bernoulli", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial"}
)
RANDOM_CASES = re.compile(r"^test_training_dropout(_default|_mask|_default_mask)?$")


@functools.lru_cache(maxsize=1)
def node_cases() -> dict:
    """name -> onnx.backend.test case (model + data sets)."""
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in load_model_tests(kind="node")}


def ops_of(graph) -> set[str]:
    """Op types used by a graph and its subgraphs ('domain:Op' outside the default domain)."""
    import onnx

    out = set()
    for n in graph.node:
        out.add(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}")
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out |= ops_of(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for g in a.graphs:
                    out |= ops_of(g)
    return out


def is_random(name: str, ops: set[str]) -> bool:
    return bool(ops & RANDOM_OPS) or bool(RANDOM_CASES.match(name))


def to_numpy(x):
    """In-memory cases hold TensorProtos for some types (float8, int4): make everything numpy/lists."""
    import onnx
    from onnx import numpy_helper

    if isinstance(x, onnx.TensorProto):
        return numpy_helper.to_array(x)
    if isinstance(x, np.generic):
        return np.asarray(x)
    if isinstance(x, list):
        return [to_numpy(e) for e in x]
    return x


def _small_float_kind(dt: np.dtype) -> bool:
    import ml_dtypes

    if dt == np.float16:
        return True
    try:
        ml_dtypes.finfo(dt)
        return dt.itemsize <= 2
    except Exception:  # noqa: BLE001 - not an ml_dtypes float
        return False


def assert_same(expected, actual, where: str, shape_only: bool = False) -> None:
    """Raise AssertionError unless ``actual`` matches ``expected`` under the rule above."""
    if expected is None:
        assert actual is None, f"{where}: expected an empty optional, got {type(actual).__name__}"
        return
    assert actual is not None, f"{where}: got None"
    if isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: expected a sequence, got {type(actual).__name__}"
        assert len(actual) == len(expected), f"{where}: sequence length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, f"{where}[{i}]", shape_only)
        return
    e = np.asarray(expected)
    assert isinstance(actual, np.ndarray) or np.isscalar(actual), (
        f"{where}: expected an array, got {type(actual).__name__}"
    )
    a = np.asarray(actual)
    assert a.shape == e.shape, f"{where}: shape {a.shape} != expected {e.shape}"
    if e.dtype == object or e.dtype.kind in "US":
        assert a.dtype == object or a.dtype.kind in "US", f"{where}: dtype {a.dtype}, expected strings"
        if not shape_only:
            dec = np.vectorize(lambda s: s.decode() if isinstance(s, bytes) else str(s), otypes=[object])
            assert (e.size == 0) or (dec(e) == dec(a)).all(), f"{where}: strings differ"
        return
    assert a.dtype == e.dtype, f"{where}: dtype {a.dtype} != expected {e.dtype}"
    if shape_only:
        return
    if e.dtype.kind in "fc" or _small_float_kind(e.dtype):
        rtol, atol = 1e-3, 1e-5
        if _small_float_kind(e.dtype):
            import ml_dtypes

            rtol = max(rtol, 2 * float(ml_dtypes.finfo(e.dtype).eps))
        ef, af = (
            e.astype(np.complex128 if e.dtype.kind == "c" else np.float64),
            a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
        )
        np.testing.assert_allclose(af, ef, rtol=rtol, atol=atol, equal_nan=True, err_msg=where)
    else:
        np.testing.assert_array_equal(a, e, err_msg=where)


def spec_undefined(ops: set[str], inputs: list, expected) -> np.ndarray | None:
    """Elements whose value the ONNX spec leaves undefined, so that no runtime can be held to the value the
    suite's generator happened to produce: Cast / CastLike from a float to an integer type of a value that is
    NaN, +-Inf or out of the target's range ("Casting from floating point to fixed point: undefined if
    OOR", Cast's doc). The suite makes those expected values with whatever ml_dtypes is installed (0.5 wraps,
    0.7 gives 0); stdops wraps (see stdops/ops/cast.py). Returns a mask over the output, or None."""
    if not ops or not ops <= {"Cast", "CastLike"} or not inputs:
        return None
    from stdops.ops.lowp import is_low_precision, types

    x, e = np.asarray(inputs[0]), np.asarray(expected)
    floats = x.dtype.kind == "f" or (is_low_precision(x.dtype) and x.dtype in types().floats)
    ints = e.dtype.kind in "iu" or (is_low_precision(e.dtype) and e.dtype in types().ints)
    if not (floats and ints) or x.shape != e.shape:
        return None
    lo, hi = types().iinfo(e.dtype)
    f = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return ~np.isfinite(f) | (np.trunc(f) < lo) | (np.trunc(f) > hi)
