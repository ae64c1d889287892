"""Sequence and optional kernels against plain-Python list semantics."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops import sequence as S

A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.ones((1, 3), np.float32)
C = np.full((3, 3), 7.0, np.float32)


def _same_list(a, b):
    assert isinstance(a, list)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(x, y)


def test_construct_length_empty():
    seq = S.sequence_construct(A, B, C)
    _same_list(seq, [A, B, C])
    n = S.sequence_length(seq)
    assert n.dtype == np.int64 and n.shape == () and int(n) == 3
    assert S.sequence_empty() == []
    assert int(S.sequence_length(S.sequence_empty(dtype=np.int64))) == 0
    with pytest.raises(KernelError):
        S.sequence_construct(A, np.ones(2, np.int64))


@pytest.mark.parametrize("pos, want", [(0, 0), (2, 2), (-1, 2), (-3, 0), (np.array([1]), 1)])
def test_at(pos, want):
    seq = [A, B, C]
    np.testing.assert_array_equal(S.sequence_at(seq, np.asarray(pos, np.int64)), seq[want])


@pytest.mark.parametrize("pos", [3, -4])
def test_at_out_of_range(pos):
    with pytest.raises(KernelError):
        S.sequence_at([A, B, C], np.int64(pos))


@pytest.mark.parametrize("pos", [None, 0, 1, -1, -3])
def test_erase(pos):
    seq = [A, B, C]
    out = S.sequence_erase(seq, None if pos is None else np.int32(pos))
    want = list(seq)
    del want[-1 if pos is None else pos]
    _same_list(out, want)
    assert len(seq) == 3  # input untouched


def test_erase_errors():
    with pytest.raises(KernelError):
        S.sequence_erase([], None)
    with pytest.raises(KernelError):
        S.sequence_erase([A], np.int64(1))


@pytest.mark.parametrize("pos", [None, 0, 1, 3, -1, -3])
def test_insert(pos):
    seq = [A, B, C]
    t = np.zeros((4, 3), np.float32)
    out = S.sequence_insert(seq, t, None if pos is None else np.int64(pos))
    want = list(seq)
    want.insert(len(seq) if pos is None else pos, t)
    _same_list(out, want)
    assert len(seq) == 3


def test_insert_errors():
    with pytest.raises(KernelError):
        S.sequence_insert([A], B, np.int64(2))
    with pytest.raises(KernelError):
        S.sequence_insert([A], B.astype(np.int32))
    with pytest.raises(KernelError):
        S.sequence_insert(A, B)  # not a sequence


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_split_default(axis):
    out = S.split_to_sequence(X, axis=axis)
    n = X.shape[axis]
    _same_list(out, [np.take(X, [i], axis=axis) for i in range(n)])
    out = S.split_to_sequence(X, axis=axis, keepdims=0)
    _same_list(out, [np.take(X, i, axis=axis) for i in range(n)])


def test_split_scalar_and_list():
    out = S.split_to_sequence(X, np.int64(3), axis=2)  # 4 -> 3 + 1
    _same_list(out, [X[:, :, :3], X[:, :, 3:]])
    out = S.split_to_sequence(X, np.array([1, 3], np.int32), axis=-1, keepdims=0)  # keepdims ignored
    _same_list(out, [X[:, :, :1], X[:, :, 1:]])
    out = S.split_to_sequence(X, np.int64(2), axis=1)
    _same_list(out, [X[:, :2], X[:, 2:]])


@pytest.mark.parametrize(
    "split, axis", [(np.array([1, 1], np.int64), 2), (np.int64(0), 0), (np.array([2.0]), 0), (None, 3)]
)
def test_split_errors(split, axis):
    with pytest.raises(KernelError):
        S.split_to_sequence(X, split, axis=axis)


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_concat(axis):
    seq = [X, X + 1, X * 2]
    np.testing.assert_array_equal(S.concat_from_sequence(seq, axis=axis), np.concatenate(seq, axis=axis))


@pytest.mark.parametrize("axis", [0, 1, 3, -1, -4])
def test_concat_new_axis(axis):
    seq = [X, X + 1]
    out = S.concat_from_sequence(seq, axis=axis, new_axis=1)
    np.testing.assert_array_equal(out, np.stack(seq, axis=axis))
    assert out.dtype == np.float32


@pytest.mark.parametrize(
    "seq, kw",
    [
        ([], {"axis": 0}),
        ([X], {"axis": 3}),
        ([X], {"axis": 4, "new_axis": 1}),
        ([X, X[0]], {"axis": 0}),
        ([X, X[:, :1, :1]], {"axis": 0}),
    ],
)
def test_concat_errors(seq, kw):
    with pytest.raises(KernelError):
        S.concat_from_sequence(seq, **kw)


def test_optional():
    assert S.optional(None) is None
    assert S.optional(A) is A
    seq = [A, B]
    assert S.optional(seq) is seq
    for v, has in [(None, False), (A, True), ([], True), (seq, True)]:
        out = S.optional_has_element(v)
        assert out.dtype == np.bool_ and out.shape == () and bool(out) is has
    assert S.optional_has_element().shape == ()
    assert S.optional_get_element(A) is A
    assert S.optional_get_element(seq) is seq
    with pytest.raises(KernelError):
        S.optional_get_element(None)


# --------------------------------------------------------------------------- through the ONNX front end (adapters)
def test_onnx_sequence_graph():
    """SequenceEmpty(dtype) -> SequenceInsert x2 -> SequenceErase -> ConcatFromSequence, and Optional(type)."""
    from onnx import TensorProto as TP
    from onnx import helper as h

    import stdops.onnx

    seq_t = h.make_sequence_type_proto(h.make_tensor_type_proto(TP.INT64, None))
    nodes = [
        h.make_node("SequenceEmpty", [], ["s0"], dtype=TP.INT64),
        h.make_node("SequenceInsert", ["s0", "x"], ["s1"]),
        h.make_node("SequenceInsert", ["s1", "x2"], ["s2"]),
        h.make_node("SequenceInsert", ["s2", "x"], ["s3"]),
        h.make_node("SequenceErase", ["s3", "p"], ["s4"]),
        h.make_node("ConcatFromSequence", ["s4"], ["c"], axis=-1, new_axis=1),
        h.make_node("SequenceLength", ["s4"], ["n"]),
        h.make_node("Optional", [], ["o"], type=seq_t),
        h.make_node("OptionalHasElement", ["o"], ["has"]),
    ]
    g = h.make_graph(
        nodes,
        "g",
        [
            h.make_tensor_value_info("x", TP.INT64, [2]),
            h.make_tensor_value_info("x2", TP.INT64, [2]),
            h.make_tensor_value_info("p", TP.INT64, []),
        ],
        [
            h.make_tensor_value_info("c", TP.INT64, None),
            h.make_tensor_value_info("n", TP.INT64, None),
            h.make_value_info("s4", seq_t),
            h.make_tensor_value_info("has", TP.BOOL, None),
        ],
    )
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    x, x2 = np.array([1, 2], np.int64), np.array([3, 4], np.int64)
    c, n, s4, has = stdops.onnx.run(m, [x, x2, np.array(0, np.int64)])
    np.testing.assert_array_equal(c, np.stack([x2, x], axis=-1))
    assert int(n) == 2 and isinstance(s4, list) and len(s4) == 2 and not bool(has)
