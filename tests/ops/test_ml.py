"""ai.onnx.ml kernels against independent references written here (tree walks per sample, dict look-ups)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
from onnx import TensorProto, helper, numpy_helper

import stdops.onnx
from stdops.errors import KernelError, ModelFormatError
from stdops.ops import ml as K
from stdops.ops import ml_linear as ML
from stdops.ops import ml_trees as T
from stdops.ops import ml_trees_legacy as TL

RNG = np.random.default_rng(5)


# --------------------------------------------------------------------------- ArrayFeatureExtractor


@pytest.mark.parametrize(
    "x,idx,want_shape",
    [
        (np.arange(12, dtype=np.float32).reshape(3, 4), [0, 2], (3, 2)),
        (np.arange(24, dtype=np.int64).reshape(2, 3, 4), [3, 3, 1], (2, 3, 3)),
        (np.arange(5, dtype=np.float64), [4, 0], (1, 2)),  # 1-D: one row
        (np.arange(6, dtype=np.int32).reshape(2, 3), [[1], [2]], (2, 2)),  # indices flattened
        (np.array([["a", "b"], ["c", "d"]], dtype=object), [1], (2, 1)),
    ],
)
def test_array_feature_extractor(x, idx, want_shape):
    got = K.array_feature_extractor(x, np.array(idx, np.int64))
    flat = np.array(idx).reshape(-1)
    want = np.stack([x[..., i] for i in flat], axis=-1).reshape(want_shape)
    assert got.dtype == x.dtype and got.shape == want_shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("idx", [[4], [-1], [0.5]])
def test_array_feature_extractor_errors(idx):
    with pytest.raises(KernelError):
        K.array_feature_extractor(np.zeros((2, 4), np.float32), np.array(idx))


# --------------------------------------------------------------------------- Binarizer


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64], ids=str)
@pytest.mark.parametrize("threshold", [None, 0.0, 1.0, -2.5])
def test_binarizer(dtype, threshold):
    x = RNG.uniform(-4, 4, (3, 4, 5)).astype(dtype)
    got = K.binarizer(x) if threshold is None else K.binarizer(x, threshold=threshold)
    t = 0.0 if threshold is None else threshold
    want = np.array([1 if v > t else 0 for v in x.reshape(-1).tolist()], dtype).reshape(x.shape)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------- LabelEncoder


def ref_lookup(x, keys, values, default):
    table = {}
    nan_val = None
    for k, v in zip(keys, values):  # the last repeated key wins
        if isinstance(k, float) and math.isnan(k):
            nan_val = v
        else:
            table[k] = v
    out = []
    for e in np.asarray(x, dtype=object).reshape(-1).tolist():
        if isinstance(e, float) and math.isnan(e):
            out.append(nan_val if nan_val is not None else default)
        else:
            out.append(table.get(e, default))
    return out


LE_CASES = [  # attrs, input, output dtype
    (
        {"keys_strings": ("a", "b", "c"), "values_int64s": (0, 1, 2), "default_int64": 42},
        np.array(["a", "b", "d", "c", "a"], dtype=object),
        np.int64,
    ),
    (
        {"keys_strings": ("a", "b", "c"), "values_int64s": (0, 1, 2)},
        np.array(["a", "z"], dtype=object),
        np.int64,
    ),  # default -1
    (
        {"keys_int64s": (5, 6, 5), "values_strings": ("x", "y", "z")},
        np.array([[5, 6], [7, 5]], np.int64),
        object,
    ),  # repeated key, _Unused
    (
        {"keys_floats": (0.5, float("nan"), -1.0), "values_floats": (1.0, 2.0, 3.0), "default_float": 9.0},
        np.array([0.5, np.nan, -1.0, 4.0], np.float32),
        np.float32,
    ),  # NaN key
    ({"keys_floats": (0.5,), "values_floats": (1.0,)}, np.array([0.25], np.float32), np.float32),  # -0.0
    (
        {
            "keys_tensor": np.array(["a", "b", "c"], dtype=object),
            "values_tensor": np.array([0, 1, 2], np.int16),
            "default_tensor": np.array([42], np.int16),
        },
        np.array(["a", "b", "d"], dtype=object),
        np.int16,
    ),
    (
        {"keys_strings": ("a", "b"), "values_tensor": np.array([1.5, 2.5], np.float64)},
        np.array(["b", "q"], dtype=object),
        np.float64,
    ),  # default -0.0
    (
        {"keys_tensor": np.array([3, 1], np.int32), "values_tensor": np.array(["p", "q"], dtype=object)},
        np.array([1, 2, 3], np.int32),
        object,
    ),  # default _Unused
    ({"keys_int64s": (), "values_int64s": ()}, np.array([1, 2], np.int64), np.int64),  # empty map
]


@pytest.mark.parametrize("attrs,x,odt", LE_CASES, ids=[str(i) for i in range(len(LE_CASES))])
def test_label_encoder(attrs, x, odt):
    got = K.label_encoder(x, **attrs)
    keys = next(v for k, v in attrs.items() if k.startswith("keys_"))
    vals = next(v for k, v in attrs.items() if k.startswith("values_"))
    keys = [float(k) if isinstance(k, (float, np.floating)) else k for k in np.asarray(keys, dtype=object).tolist()]
    vals = np.asarray(vals, dtype=object).tolist()
    vdt = np.dtype(odt)
    if "default_tensor" in attrs:
        default = attrs["default_tensor"].reshape(-1)[0]
    elif vdt == np.dtype(object):
        default = attrs.get("default_string", "_Unused")
    elif vdt.kind == "f":
        default = attrs.get("default_float", -0.0)
    else:
        default = attrs.get("default_int64", -1)
    want = ref_lookup(x, keys, vals, default)
    assert got.dtype == vdt and got.shape == x.shape
    assert got.reshape(-1).tolist() == want
    if vdt.kind == "f":  # the float default is -0.0 unless given
        np.testing.assert_array_equal(np.signbit(got), np.signbit(np.array(want, np.float64)))


@pytest.mark.parametrize(
    "attrs,x",
    [
        ({"keys_strings": ("a",), "values_int64s": (1, 2)}, np.array(["a"], dtype=object)),  # lengths differ
        ({"keys_strings": ("a",)}, np.array(["a"], dtype=object)),  # no values
        ({"keys_strings": ("a",), "keys_int64s": (1,), "values_int64s": (1,)}, np.array(["a"], dtype=object)),
        ({"keys_strings": ("a",), "values_int64s": (1,)}, np.array([1], np.int64)),  # wrong input type
    ],
)
def test_label_encoder_errors(attrs, x):
    with pytest.raises(KernelError):
        K.label_encoder(x, **attrs)


def _ml_model(node, inputs, outputs, ml_opset, inits=()):
    g = helper.make_graph([node], "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", ml_opset)])
    m.ir_version = 8
    return m


def test_label_encoder_v1_both_directions():
    node = helper.make_node(
        "LabelEncoder", ["X"], ["Y"], domain="ai.onnx.ml", classes_strings=["x", "y", "z"], default_int64=-7
    )
    m = _ml_model(
        node,
        [helper.make_tensor_value_info("X", TensorProto.STRING, [3])],
        [helper.make_tensor_value_info("Y", TensorProto.INT64, [3])],
        1,
    )
    (y,) = stdops.onnx.run(m, [np.array(["z", "w", "x"], dtype=object)])
    assert y.dtype == np.int64 and y.tolist() == [2, -7, 0]
    node = helper.make_node(
        "LabelEncoder", ["X"], ["Y"], domain="ai.onnx.ml", classes_strings=["x", "y", "z"], default_string="?"
    )
    m = _ml_model(
        node,
        [helper.make_tensor_value_info("X", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("Y", TensorProto.STRING, [3])],
        1,
    )
    (y,) = stdops.onnx.run(m, [np.array([1, 5, 0], np.int64)])
    assert y.tolist() == ["y", "?", "x"]


def test_label_encoder_tensor_attributes_need_opset_4():
    t = numpy_helper.from_array(np.array([1, 2], np.int64))
    node = helper.make_node("LabelEncoder", ["X"], ["Y"], domain="ai.onnx.ml", keys_strings=["a", "b"], values_tensor=t)
    vi = (
        [helper.make_tensor_value_info("X", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("Y", TensorProto.INT64, [2])],
    )
    with pytest.raises(ModelFormatError, match="LabelEncoder-4"):
        stdops.onnx.load(_ml_model(node, *vi, 2))
    (y,) = stdops.onnx.run(_ml_model(node, *vi, 4), [np.array(["b", "c"], dtype=object)])
    assert y.tolist() == [2, -1]


# --------------------------------------------------------------------------- TreeEnsemble


def ref_tree_ensemble(X, a):
    """Walk every tree for every sample (recursive, per element) and aggregate as the spec says."""
    sets = []
    if a.get("membership_values") is not None:
        cur = []
        for v in np.asarray(a["membership_values"], np.float64).tolist():
            if math.isnan(v):
                sets.append(cur)
                cur = []
            else:
                cur.append(v)
    member_of = {}
    for i, m in enumerate(np.asarray(a["nodes_modes"]).tolist()):
        if m == 6:
            member_of[i] = sets[len(member_of)]
    splits = np.asarray(a["nodes_splits"]).astype(X.dtype).astype(np.float64)
    miss = a.get("nodes_missing_value_tracks_true") or [0] * len(splits)
    nt = a["n_targets"]
    agg = a.get("aggregate_function", 1)
    out = np.zeros((X.shape[0], nt))
    for n, row in enumerate(X.astype(np.float64)):
        per_target = [[] for _ in range(nt)]
        for root in a["tree_roots"]:
            node, leaf = root, None
            while leaf is None:
                v = row[a["nodes_featureids"][node]]
                m, s = int(a["nodes_modes"][node]), splits[node]
                if math.isnan(v) and miss[node]:
                    go = True
                else:
                    go = [v <= s, v < s, v >= s, v > s, v == s, v != s, v in member_of.get(node, ())][m]
                nxt = a["nodes_truenodeids" if go else "nodes_falsenodeids"][node]
                if a["nodes_trueleafs" if go else "nodes_falseleafs"][node]:
                    leaf = nxt
                else:
                    node = nxt
            per_target[a["leaf_targetids"][leaf]].append(float(np.asarray(a["leaf_weights"])[leaf]))
        for t, ws in enumerate(per_target):
            if not ws:
                continue
            out[n, t] = {0: sum(ws) / len(a["tree_roots"]), 1: sum(ws), 2: min(ws), 3: max(ws)}[agg]
    pt = a.get("post_transform", 0)
    if pt == 1:
        out = scipy.special.softmax(out, axis=1)
    elif pt == 2:
        out = scipy.special.expit(out)
    elif pt == 4:
        out = math.sqrt(2) * scipy.special.erfinv(2 * out - 1)
    return out


SINGLE = dict(
    aggregate_function=1,
    leaf_targetids=[0, 1, 0, 1],
    leaf_weights=np.array([5.23, 12.12, -12.23, 7.21]),
    n_targets=2,
    nodes_falseleafs=[0, 1, 1],
    nodes_falsenodeids=[2, 2, 3],
    nodes_featureids=[0, 0, 0],
    nodes_modes=np.array([0, 0, 0], np.uint8),
    nodes_splits=np.array([3.14, 1.2, 4.2]),
    nodes_trueleafs=[0, 1, 1],
    nodes_truenodeids=[1, 0, 1],
    post_transform=0,
    tree_roots=[0],
)
MEMBER = dict(
    aggregate_function=1,
    leaf_targetids=[0, 1, 2, 3],
    leaf_weights=np.array([1.0, 10.0, 1000.0, 100.0], np.float32),
    membership_values=np.array([1.2, 3.7, 8.0, 9.0, np.nan, 12.0, 7.0, np.nan], np.float32),
    n_targets=4,
    nodes_falseleafs=[1, 0, 1],
    nodes_falsenodeids=[2, 2, 3],
    nodes_featureids=[0, 0, 0],
    nodes_modes=np.array([0, 6, 6], np.uint8),
    nodes_splits=np.array([11.0, 232344.0, np.nan], np.float32),
    nodes_trueleafs=[0, 1, 1],
    nodes_truenodeids=[1, 0, 1],
    post_transform=0,
    tree_roots=[0],
)


def random_forest(n_trees, depth, n_features, n_targets, rng, modes=(0, 1, 2, 3, 4, 5, 6)):
    """Complete binary trees of the given depth, leaves with random targets and weights."""
    a = {
        k: []
        for k in (
            "nodes_featureids",
            "nodes_modes",
            "nodes_splits",
            "nodes_truenodeids",
            "nodes_trueleafs",
            "nodes_falsenodeids",
            "nodes_falseleafs",
            "nodes_missing_value_tracks_true",
            "leaf_targetids",
            "leaf_weights",
            "tree_roots",
        )
    }
    members = []

    def build(d):
        i = len(a["nodes_featureids"])
        m = int(rng.choice(modes))
        a["nodes_featureids"].append(int(rng.integers(n_features)))
        a["nodes_modes"].append(m)
        a["nodes_splits"].append(float(rng.integers(-3, 4)) if m in (4, 5) else float(rng.normal()))
        a["nodes_missing_value_tracks_true"].append(int(rng.integers(2)))
        if m == 6:
            members.extend([float(v) for v in rng.integers(-3, 4, size=3)] + [np.nan])
        for side in ("true", "false"):
            a[f"nodes_{side}nodeids"].append(0)
            a[f"nodes_{side}leafs"].append(0)
        for side in ("true", "false"):
            if d == depth - 1 or rng.random() < 0.2:
                a[f"nodes_{side}leafs"][i] = 1
                a[f"nodes_{side}nodeids"][i] = len(a["leaf_weights"])
                a["leaf_targetids"].append(int(rng.integers(n_targets)))
                a["leaf_weights"].append(float(rng.normal()))
            else:
                a[f"nodes_{side}nodeids"][i] = build(d + 1)
        return i

    for _ in range(n_trees):
        a["tree_roots"].append(build(0))
    a["nodes_modes"] = np.array(a["nodes_modes"], np.uint8)
    a["nodes_splits"] = np.array(a["nodes_splits"])
    a["leaf_weights"] = np.array(a["leaf_weights"])
    a["n_targets"] = n_targets
    if members:
        a["membership_values"] = np.array(members)
    return a


@pytest.mark.parametrize(
    "attrs,x",
    [
        (SINGLE, np.array([[1.2, 3.4], [-0.12, 1.66], [4.14, 1.77]])),
        (MEMBER, np.array([[1.2], [3.4], [-0.12], [np.nan], [12.0], [7.0]], np.float32)),
        (dict(SINGLE, aggregate_function=0), np.array([[1.2, 3.4], [5.0, 0.0]])),
        (dict(SINGLE, nodes_missing_value_tracks_true=[1, 0, 1]), np.array([[np.nan, 0.0], [2.0, 1.0]])),
        (dict(SINGLE, post_transform=2), np.array([[1.2, 3.4], [5.0, 0.0]], np.float32)),
    ],
)
def test_tree_ensemble_examples(attrs, x):
    got = T.tree_ensemble(x, **attrs)
    assert got.dtype == x.dtype and got.shape == (x.shape[0], attrs["n_targets"])
    np.testing.assert_allclose(got, ref_tree_ensemble(x, attrs), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=str)
@pytest.mark.parametrize("agg", [0, 1, 2, 3])
@pytest.mark.parametrize("post", [0, 1, 2])
def test_tree_ensemble_random(dtype, agg, post):
    rng = np.random.default_rng(100 * agg + post)
    attrs = random_forest(n_trees=5, depth=5, n_features=4, n_targets=3, rng=rng)
    attrs.update(aggregate_function=agg, post_transform=post)
    x = np.round(rng.normal(size=(40, 4)) * 2).astype(dtype)  # integers hit the EQ / member splits
    x[rng.random(x.shape) < 0.1] = np.nan
    x[:10] = rng.normal(size=(10, 4)).astype(dtype)
    got = T.tree_ensemble(x, **attrs)
    want = ref_tree_ensemble(x, attrs)
    assert got.dtype == np.dtype(dtype)
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


def test_tree_ensemble_probit_and_softmax_zero():
    leaf = dict(SINGLE, leaf_weights=np.array([0.2, 0.7, 0.0, 0.9]))
    x = np.array([[1.2, 0], [-0.12, 0], [4.14, 0], [10.0, 0]])
    raw = ref_tree_ensemble(x, dict(leaf, post_transform=0))
    got = T.tree_ensemble(x, **dict(leaf, post_transform=4))
    np.testing.assert_allclose(got, scipy.special.ndtri(raw), rtol=1e-9)
    got = T.tree_ensemble(x, **dict(leaf, post_transform=3))
    for g, r in zip(got, raw):
        nz = r != 0
        e = np.where(nz, np.exp(r - r.max()), 0)
        np.testing.assert_allclose(g, e / e.sum() if e.sum() else np.full_like(r, 0.5), rtol=1e-9)


def test_tree_ensemble_single_leaf_tree():
    """A tree that is one leaf: both branches of its only node point at the same leaf."""
    attrs = dict(
        tree_roots=[0],
        nodes_featureids=[0],
        nodes_modes=np.array([0], np.uint8),
        nodes_splits=np.array([0.0]),
        nodes_truenodeids=[0],
        nodes_falsenodeids=[0],
        nodes_trueleafs=[1],
        nodes_falseleafs=[1],
        leaf_targetids=[1],
        leaf_weights=np.array([3.0]),
        n_targets=2,
    )
    got = T.tree_ensemble(np.array([[5.0], [-5.0], [np.nan]]), **attrs)
    np.testing.assert_array_equal(got, [[0, 3], [0, 3], [0, 3]])


@pytest.mark.parametrize(
    "change,x",
    [
        ({"leaf_targetids": [0, 1, 0, 5]}, None),  # target out of range
        ({"nodes_modes": np.array([0, 9, 0], np.uint8)}, None),  # unknown mode
        ({"nodes_truenodeids": [1, 0, 7]}, None),  # leaf index out of range
        ({"nodes_featureids": [0, 0, 3]}, None),  # feature beyond X
        ({"nodes_modes": np.array([0, 6, 0], np.uint8)}, None),  # member node without a set
        ({"aggregate_function": 7}, None),
        ({}, np.zeros((2, 2), np.int64)),  # integer X
        ({"nodes_falseleafs": [0, 0, 1], "nodes_falsenodeids": [1, 0, 3]}, None),  # a cycle 0 -> 1 -> 0
    ],
)
def test_tree_ensemble_errors(change, x):
    attrs = dict(SINGLE, **change)
    if change.get("nodes_falseleafs") == [0, 0, 1]:
        attrs.update(nodes_trueleafs=[0, 0, 1], nodes_truenodeids=[1, 0, 3])
    with pytest.raises(KernelError):
        T.tree_ensemble(np.ones((2, 2)) if x is None else x, **attrs)


def test_tree_ensemble_onnx_attributes_checked_at_load():
    a = {k: v for k, v in SINGLE.items() if k != "leaf_weights"}
    a["leaf_targetids"] = [0, 1, 0, 9]
    tensors = {k: numpy_helper.from_array(np.asarray(v)) for k, v in a.items() if isinstance(v, np.ndarray)}
    node = helper.make_node(
        "TreeEnsemble",
        ["X"],
        ["Y"],
        domain="ai.onnx.ml",
        leaf_weights=numpy_helper.from_array(np.array([1.0, 2, 3, 4])),
        **{k: tensors.get(k, v) for k, v in a.items()},
    )
    m = _ml_model(
        node,
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [None, 2])],
        [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [None, 2])],
        5,
    )
    with pytest.raises(ModelFormatError, match="leaf_targetids"):
        stdops.onnx.load(m)


# --------------------------------------------------------------------------- TreeEnsembleRegressor / -Classifier

LEGACY_MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]


def to_legacy(a, shuffle=True):
    """TreeEnsemble-5 arrays -> the (tree id, node id) encoding; leaves become LEAF nodes numbered
    depth-first, the node list shuffled (shuffle) or in pre-order."""
    nodes = {
        k: []
        for k in (
            "nodes_treeids",
            "nodes_nodeids",
            "nodes_featureids",
            "nodes_modes",
            "nodes_values",
            "nodes_truenodeids",
            "nodes_falsenodeids",
            "nodes_missing_value_tracks_true",
        )
    }
    w = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t, root in enumerate(a["tree_roots"]):
        count = [0]

        def emit(is_leaf, idx):
            my = count[0]
            count[0] += 1
            pos = len(nodes["nodes_treeids"])  # pre-order: a node is listed before its children
            for k in nodes:
                nodes[k].append(0)
            row = {"nodes_treeids": t, "nodes_nodeids": my}
            if is_leaf:
                row.update(
                    nodes_featureids=0,
                    nodes_modes="LEAF",
                    nodes_values=0.0,
                    nodes_truenodeids=0,
                    nodes_falsenodeids=0,
                    nodes_missing_value_tracks_true=0,
                )
                for k, v in (
                    ("treeids", t),
                    ("nodeids", my),
                    ("ids", a["leaf_targetids"][idx]),
                    ("weights", float(a["leaf_weights"][idx])),
                ):
                    w[k].append(v)
            else:
                row.update(
                    nodes_featureids=a["nodes_featureids"][idx],
                    nodes_modes=LEGACY_MODES[int(a["nodes_modes"][idx])],
                    nodes_values=float(a["nodes_splits"][idx]),
                    nodes_missing_value_tracks_true=a["nodes_missing_value_tracks_true"][idx],
                )
                for side in ("true", "false"):
                    row[f"nodes_{side}nodeids"] = emit(a[f"nodes_{side}leafs"][idx], a[f"nodes_{side}nodeids"][idx])
            for k, v in row.items():
                nodes[k][pos] = v
            return my

        emit(False, root)
    if shuffle:
        perm = np.random.default_rng(len(nodes["nodes_treeids"])).permutation(len(nodes["nodes_treeids"]))
        nodes = {k: [v[i] for i in perm] for k, v in nodes.items()}
    return nodes, w


AGG = {0: "AVERAGE", 1: "SUM", 2: "MIN", 3: "MAX"}


@pytest.mark.parametrize("agg", [0, 1, 2, 3])
@pytest.mark.parametrize("post", [0, 1, 2])
@pytest.mark.parametrize("xdtype", [np.float32, np.float64, np.int64], ids=str)
def test_tree_ensemble_regressor(agg, post, xdtype):
    rng = np.random.default_rng(7 * agg + post)
    a = random_forest(n_trees=4, depth=4, n_features=3, n_targets=2, rng=rng, modes=(0, 1, 2, 3, 4, 5))
    nodes, w = to_legacy(a)
    base = [0.5, -1.0]
    x = np.round(rng.normal(size=(30, 3)) * 2)
    if xdtype != np.int64:
        x[:10] = rng.normal(size=(10, 3))
        x[rng.random(x.shape) < 0.1] = np.nan
    x = x.astype(xdtype)
    got = TL.tree_ensemble_regressor(
        x,
        **nodes,
        target_treeids=w["treeids"],
        target_nodeids=w["nodeids"],
        target_ids=w["ids"],
        target_weights=w["weights"],
        n_targets=2,
        aggregate_function=AGG[agg],
        post_transform=["NONE", "SOFTMAX", "LOGISTIC"][post],
        base_values=base,
    )
    raw = ref_tree_ensemble(x.astype(np.float32), dict(a, aggregate_function=agg, post_transform=0)) + base
    want = (
        ref_tree_ensemble.__globals__["scipy"].special.softmax(raw, axis=1)
        if post == 1
        else (scipy.special.expit(raw) if post == 2 else raw)
    )
    assert got.dtype == np.float32 and got.shape == (30, 2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_tree_ensemble_classifier_multiclass_and_votes():
    rng = np.random.default_rng(3)
    a = random_forest(n_trees=3, depth=4, n_features=3, n_targets=4, rng=rng, modes=(0, 1, 2, 3, 4, 5))
    nodes, w = to_legacy(a)
    x = rng.normal(size=(50, 3)).astype(np.float32)
    for labels, post in (
        (dict(classlabels_strings=["a", "b", "c", "d"]), "NONE"),
        (dict(classlabels_int64s=[4, 3, 2, 1]), "LOGISTIC"),
    ):
        y, z = TL.tree_ensemble_classifier(
            x,
            **nodes,
            class_treeids=w["treeids"],
            class_nodeids=w["nodeids"],
            class_ids=w["ids"],
            class_weights=w["weights"],
            post_transform=post,
            **labels,
        )
        raw = ref_tree_ensemble(x, dict(a, aggregate_function=1, post_transform=0))
        want = raw if post == "NONE" else scipy.special.expit(raw)
        np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-6)
        assert z.dtype == np.float32
        # votes: the classes some reached leaf lists (the reference walk again, per sample)
        lab = np.asarray(next(iter(labels.values())), dtype=object)
        for n in range(x.shape[0]):
            voted = set()
            for root in a["tree_roots"]:
                sub = dict(a, tree_roots=[root], aggregate_function=3)
                r = ref_tree_ensemble(x[n : n + 1], dict(sub, leaf_weights=np.ones(len(a["leaf_weights"]))))
                voted |= set(np.nonzero(r[0] != 0)[0].tolist())
            best = max(sorted(voted), key=lambda e: (want[n, e], -e))
            assert y[n] == lab[best]


@pytest.mark.parametrize(
    "post,f", [("NONE", lambda s: np.c_[-s, s]), ("LOGISTIC", lambda s: scipy.special.expit(np.c_[-s, s]))]
)
def test_tree_ensemble_classifier_binary_single_score(post, f):
    """Two classes, every weight on class 0: that score s belongs to the second class, scores (-s, s)."""
    nodes = dict(
        nodes_treeids=[0, 0, 0],
        nodes_nodeids=[0, 1, 2],
        nodes_featureids=[0, 0, 0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_values=[0.0, 0, 0],
        nodes_truenodeids=[1, 0, 0],
        nodes_falsenodeids=[2, 0, 0],
    )
    y, z = TL.tree_ensemble_classifier(
        np.array([[-1.0], [1.0]]),
        **nodes,
        class_treeids=[0, 0],
        class_nodeids=[1, 2],
        class_ids=[0, 0],
        class_weights=[-0.7, 0.4],
        classlabels_int64s=[0, 1],
        post_transform=post,
    )
    np.testing.assert_allclose(z, f(np.array([-0.7, 0.4])), rtol=1e-6)
    assert y.tolist() == [0, 1]


def test_legacy_trees_against_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(9)
    # (onnxruntime merges runs of BRANCH_EQ nodes and then insists on a node order: no EQ here)
    a = random_forest(n_trees=5, depth=5, n_features=3, n_targets=3, rng=rng, modes=(0, 1, 2, 3, 5))
    nodes, w = to_legacy(a, shuffle=False)
    x = np.round(rng.normal(size=(40, 3)) * 2).astype(np.float32)
    x[:15] = rng.normal(size=(15, 3))
    x[rng.random(x.shape) < 0.1] = np.nan
    X = helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])
    for agg in ("SUM", "AVERAGE", "MIN", "MAX"):
        node = helper.make_node(
            "TreeEnsembleRegressor",
            ["X"],
            ["Y"],
            domain="ai.onnx.ml",
            **nodes,
            target_treeids=w["treeids"],
            target_nodeids=w["nodeids"],
            target_ids=w["ids"],
            target_weights=w["weights"],
            n_targets=3,
            aggregate_function=agg,
            post_transform="LOGISTIC",
        )
        # (no base_values: onnxruntime leaves a target that no reached leaf feeds at 0 without its base
        # value, the spec adds the base value to every target, as stdops does)
        m = _ml_model(node, [X], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 3])], 3)
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
        np.testing.assert_allclose(stdops.onnx.run(m, [x])[0], want, rtol=1e-5, atol=1e-6)
    node = helper.make_node(
        "TreeEnsembleClassifier",
        ["X"],
        ["Y", "Z"],
        domain="ai.onnx.ml",
        **nodes,
        class_treeids=w["treeids"],
        class_nodeids=w["nodeids"],
        class_ids=w["ids"],
        class_weights=w["weights"],
        classlabels_strings=["p", "q", "r"],
        post_transform="SOFTMAX",
    )
    m = _ml_model(
        node,
        [X],
        [
            helper.make_tensor_value_info("Y", TensorProto.STRING, [None]),
            helper.make_tensor_value_info("Z", TensorProto.FLOAT, [None, 3]),
        ],
        3,
    )
    wy, wz = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})
    gy, gz = stdops.onnx.run(m, [x])
    np.testing.assert_allclose(gz, wz, rtol=1e-5, atol=1e-6)
    assert gy.tolist() == list(wy)


def test_legacy_tree_attribute_errors():
    nodes = dict(
        nodes_treeids=[0, 0, 0],
        nodes_nodeids=[0, 1, 2],
        nodes_featureids=[0, 0, 0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"],
        nodes_values=[0.0, 0, 0],
        nodes_truenodeids=[1, 0, 0],
        nodes_falsenodeids=[2, 0, 0],
    )
    tw = dict(target_treeids=[0], target_nodeids=[1], target_ids=[0], target_weights=[1.0])
    x = np.zeros((1, 1), np.float32)
    for bad in (
        dict(nodes_modes=["BRANCH_XX", "LEAF", "LEAF"]),
        dict(nodes_truenodeids=[5, 0, 0]),
        dict(nodes_nodeids=[0, 1, 1]),
        dict(target_nodeids=[0]),
        dict(aggregate_function="MEDIAN"),
        dict(post_transform="TANH"),
        dict(nodes_values=[0.0]),
    ):
        with pytest.raises(KernelError):
            TL.tree_ensemble_regressor(x, **{**nodes, **tw, **bad})
    with pytest.raises(KernelError):
        TL.tree_ensemble_classifier(
            x, **nodes, class_treeids=[0], class_nodeids=[1], class_ids=[0], class_weights=[1.0]
        )  # no class labels
    node = helper.make_node(
        "TreeEnsembleRegressor",
        ["X"],
        ["Y"],
        domain="ai.onnx.ml",
        **nodes,
        target_treeids=[0],
        target_nodeids=[1],
        target_ids=[0],
        target_weights_as_tensor=numpy_helper.from_array(np.array([1.0])),
    )
    m = _ml_model(
        node,
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 1])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])],
        1,
    )
    with pytest.raises(ModelFormatError, match="TreeEnsembleRegressor-3"):
        stdops.onnx.load(m)


# --------------------------------------------------------------------------- linear models and preprocessing

X35 = np.array([[0.5, -1.0, 2.0], [0.0, 0.0, 0.0], [-4.0, 1.5, 0.25], [3.0, 3.0, -3.0], [1.0, 2.0, 3.0]])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32], ids=str)
@pytest.mark.parametrize("offset,scale", [([0.5, -1, 2], [2.0, 0.5, 1]), ([0.5], [2.0]), (None, [3.0]), ([1.0], None)])
def test_scaler(dtype, offset, scale):
    x = X35.astype(dtype)
    kw = {k: v for k, v in (("offset", offset), ("scale", scale)) if v is not None}
    got = K.scaler(x, **kw)
    want = (x.astype(np.float64) - np.array(offset or [0.0])) * np.array(scale or [1.0])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64], ids=str)
@pytest.mark.parametrize("norm", ["MAX", "L1", "L2", None])
def test_normalizer(dtype, norm):
    x = X35.astype(dtype)
    got = K.normalizer(x) if norm is None else K.normalizer(x, norm=norm)
    want = []
    for row in x.astype(np.float64):
        d = {"MAX": row.max(), "L1": np.abs(row).sum(), "L2": np.sqrt((row**2).sum()), None: row.max()}[norm]
        want.append(row if d == 0 else row / d)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.array(want), rtol=1e-6)
    np.testing.assert_allclose(K.normalizer(x[2], norm=norm or "MAX"), np.array(want)[2], rtol=1e-6)  # 1-D


def _post(v, t):
    return {"NONE": v, "LOGISTIC": scipy.special.expit(v), "SOFTMAX": scipy.special.softmax(v, axis=1)}[t]


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX"])
@pytest.mark.parametrize("targets,intercepts", [(1, None), (2, [0.1, -0.2]), (3, [0.5])])
def test_linear_regressor(post, targets, intercepts):
    w = RNG.normal(size=3 * targets)
    kw = {"intercepts": intercepts} if intercepts is not None else {}
    got = ML.linear_regressor(X35.astype(np.float32), coefficients=list(w), targets=targets, post_transform=post, **kw)
    want = X35 @ w.reshape(targets, 3).T + np.array(intercepts or [0.0])
    assert got.dtype == np.float32 and got.shape == (5, targets)
    np.testing.assert_allclose(got, _post(want, post), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX"])
@pytest.mark.parametrize("labels", [{"classlabels_ints": [7, 8, 9]}, {"classlabels_strings": ["a", "b", "c"]}])
def test_linear_classifier_multiclass(post, labels):
    w, b = RNG.normal(size=9), RNG.normal(size=3)
    y, z = ML.linear_classifier(X35, coefficients=list(w), intercepts=list(b), post_transform=post, **labels)
    want = _post(X35 @ w.reshape(3, 3).T + b, post)
    np.testing.assert_allclose(z, want, rtol=1e-5, atol=1e-6)
    lab = next(iter(labels.values()))
    assert z.dtype == np.float32 and y.tolist() == [lab[i] for i in np.argmax(want, axis=1)]


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX"])
def test_linear_classifier_binary(post):
    w, b = RNG.normal(size=3), RNG.normal(size=1)
    s = X35 @ w + b
    y, z = ML.linear_classifier(
        X35, coefficients=list(w), intercepts=list(b), post_transform=post, classlabels_strings=["no", "yes"]
    )
    p = scipy.special.expit(s) if post == "LOGISTIC" else s
    np.testing.assert_allclose(z, np.c_[1 - p, p], rtol=1e-5, atol=1e-6)
    assert y.tolist() == ["yes" if v > (0.5 if post == "LOGISTIC" else 0) else "no" for v in p]


@pytest.mark.parametrize(
    "x,attrs,want",
    [
        (
            np.array([[1.0, np.nan], [np.nan, 3.0]], np.float32),
            {"imputed_value_floats": [7.0, 8.0], "replaced_value_float": float("nan")},
            [[1, 8], [7, 3]],
        ),
        (np.array([[0.0, 2.0], [0.0, 0.0]]), {"imputed_value_floats": [5.0]}, [[5, 2], [5, 5]]),
        (
            np.array([[1, -1], [-1, 4]], np.int64),
            {"imputed_value_int64s": [9, 10], "replaced_value_int64": -1},
            [[1, 10], [9, 4]],
        ),
    ],
)
def test_imputer(x, attrs, want):
    x0 = x.copy()
    got = K.imputer(x, **attrs)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, np.array(want, x.dtype))
    np.testing.assert_array_equal(x, x0)


def test_feature_vectorizer():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = np.array([[0.5], [1.5]], np.float32)
    got = K.feature_vectorizer(a, b, inputdimensions=[2, 3])
    np.testing.assert_array_equal(got, [[0, 1, 0.5, 0, 0], [3, 4, 1.5, 0, 0]])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(K.feature_vectorizer(np.array([1.0, 2.0])), [[1, 2]])


def test_category_mapper():
    kw = dict(cats_strings=["a", "b", "c"], cats_int64s=[10, 20, 30])
    y = K.category_mapper(np.array([["a", "x"], ["c", "b"]], dtype=object), **kw, default_int64=-5)
    assert y.dtype == np.int64 and y.tolist() == [[10, -5], [30, 20]]
    y = K.category_mapper(np.array([30, 5, 10], np.int64), **kw)
    assert y.tolist() == ["c", "_Unused", "a"]


@pytest.mark.parametrize(
    "x,attrs",
    [
        (np.array([[0, 2, 5], [1, 1, -1]], np.int64), {"cats_int64s": [0, 1, 2, -1]}),
        (np.array([0.0, 1.7, 2.2]), {"cats_int64s": [2, 1, 0]}),  # floats truncate
        (np.array([["u", "w"], ["v", "u"]], dtype=object), {"cats_strings": ["u", "v"]}),
    ],
)
def test_one_hot_encoder(x, attrs):
    got = K.one_hot_encoder(x, **attrs)
    cats = next(iter(attrs.values()))
    keys = [int(v) if x.dtype.kind == "f" else v for v in x.reshape(-1).tolist()]
    want = np.array([[1.0 if k == c else 0.0 for c in cats] for k in keys]).reshape(x.shape + (len(cats),))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    if not want.sum(-1).all():
        with pytest.raises(KernelError):
            K.one_hot_encoder(x, zeros=0, **attrs)


def test_zip_map():
    x = np.array([[0.25, 0.75], [1.0, 0.0]], np.float32)
    assert K.zip_map(x, classlabels_strings=["a", "b"]) == [{"a": 0.25, "b": 0.75}, {"a": 1.0, "b": 0.0}]
    assert K.zip_map(x, classlabels_int64s=[3, 4]) == [{3: 0.25, 4: 0.75}, {3: 1.0, 4: 0.0}]
    with pytest.raises(KernelError):
        K.zip_map(x, classlabels_int64s=[1, 2, 3])


@pytest.mark.parametrize(
    "kernel,args,attrs",
    [
        (K.scaler, (np.zeros((2, 3)),), {"offset": [1.0, 2.0]}),
        (K.normalizer, (np.zeros((2, 3)),), {"norm": "L3"}),
        (ML.linear_regressor, (np.zeros((2, 3)),), {"coefficients": [1.0, 2.0], "targets": 1}),
        (ML.linear_classifier, (np.zeros((2, 3)),), {"coefficients": [1.0] * 6, "classlabels_ints": [1, 2, 3]}),
        (K.imputer, (np.zeros((2, 3)),), {"imputed_value_int64s": [1]}),
        (K.one_hot_encoder, (np.zeros(2),), {"cats_strings": ["a"]}),
        (K.category_mapper, (np.zeros(2),), {"cats_strings": ["a"], "cats_int64s": [1]}),
    ],
)
def test_linear_and_preprocessing_errors(kernel, args, attrs):
    with pytest.raises(KernelError):
        kernel(*args, **attrs)


# --------------------------------------------------------------------------- SVMRegressor, maps


def ref_kernel(a, b, kt, gamma, coef0, degree):
    if kt == "LINEAR":
        return float(a @ b)
    if kt == "POLY":
        return (gamma * float(a @ b) + coef0) ** degree
    if kt == "SIGMOID":
        return math.tanh(gamma * float(a @ b) + coef0)
    return math.exp(-gamma * float(((a - b) ** 2).sum()))


@pytest.mark.parametrize(
    "kt,kp", [("LINEAR", None), ("POLY", [0.5, 1.0, 3]), ("RBF", [0.3, 0, 0]), ("SIGMOID", [0.2, 0.1, 0])]
)
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor(kt, kp, one_class):
    x = RNG.normal(size=(6, 3)).astype(np.float32)
    sv, coef = RNG.normal(size=(4, 3)), RNG.normal(size=4)
    kw = {"kernel_params": kp} if kp else {}
    got = ML.svm_regressor(
        x,
        coefficients=list(coef),
        support_vectors=list(sv.reshape(-1)),
        n_supports=4,
        rho=[0.25],
        kernel_type=kt,
        one_class=one_class,
        **kw,
    )
    g, c0, d = kp or (0, 0, 0)
    s = np.array(
        [sum(coef[j] * ref_kernel(xr.astype(np.float64), sv[j], kt, g, c0, d) for j in range(4)) + 0.25 for xr in x]
    )
    want = np.where(s > 0, 1.0, -1.0) if one_class else s
    assert got.dtype == np.float32 and got.shape == (6, 1)
    np.testing.assert_allclose(got[:, 0], want, rtol=1e-5, atol=1e-6)


def test_svm_regressor_linear_mode():
    x = RNG.normal(size=(4, 3))
    got = ML.svm_regressor(x, coefficients=[1.0, -2.0, 0.5], rho=[0.1], post_transform="LOGISTIC")
    np.testing.assert_allclose(got[:, 0], scipy.special.expit(x @ [1.0, -2.0, 0.5] + 0.1), rtol=1e-6)
    with pytest.raises(KernelError):
        ML.svm_regressor(x, coefficients=[1.0, 2.0])
    with pytest.raises(KernelError):
        ML.svm_regressor(x, coefficients=[1.0], support_vectors=[0.0] * 3, n_supports=1, kernel_type="CUBIC")


@pytest.mark.parametrize(
    "cast_to,form,want",
    [
        ("TO_FLOAT", "DENSE", np.array([[-2.0, 1.5, 7.25]], np.float32)),
        ("TO_INT64", "SPARSE", np.array([[-2, 0, 0, 1, 0, 7, 0]], np.int64)),
        ("TO_STRING", "DENSE", np.array([["-2.000000", "1.500000", "7.250000"]], dtype=object)),
    ],
)
def test_cast_map(cast_to, form, want):
    got = K.cast_map({3: 1.5, 0: -2.0, 5: 7.25}, cast_to=cast_to, map_form=form, max_map=7)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()
    with pytest.raises(KernelError):
        K.cast_map({9: 1.0}, map_form="SPARSE", max_map=3)


def test_dict_vectorizer():
    got = K.dict_vectorizer({"a": 4.0, "c": 8.0}, string_vocabulary=["a", "c", "b", "z"])
    assert got.dtype == np.float32 and got.tolist() == [[4, 8, 0, 0]]
    got = K.dict_vectorizer([{1: "x"}, {3: "y", 5: "z"}], int64_vocabulary=[5, 1, 3])
    assert got.tolist() == [["", "x", ""], ["z", "", "y"]]
    with pytest.raises(KernelError):
        K.dict_vectorizer({"a": 1.0})


# --------------------------------------------------------------------------- SVMClassifier


def ref_svc(x, E, vpc, sv, coef, rho, kt, kp, prob_a=None, prob_b=None):
    """libsvm's one-vs-one decision values and votes, per sample; probabilities by solving the
    coupling problem min p^T Q p, sum p = 1 exactly (a linear system)."""
    start = np.concatenate([[0], np.cumsum(vpc)])
    dec, votes, probs = [], [], []
    for xr in x.astype(np.float64):
        k = np.array([ref_kernel(xr, s, kt, *kp) for s in sv])
        d, v, p = [], np.zeros(E, int), 0
        for i in range(E):
            for j in range(i + 1, E):
                si, sj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
                val = rho[p] + k[si] @ coef[j - 1, si] + k[sj] @ coef[i, sj]
                d.append(val)
                v[i if val > 0 else j] += 1
                p += 1
        dec.append(d)
        votes.append(v)
        if prob_a is not None:
            r = np.zeros((E, E))
            p = 0
            for i in range(E):
                for j in range(i + 1, E):
                    q = min(max(1 - scipy.special.expit(d[p] * prob_a[p] + prob_b[p]), 1e-7), 1 - 1e-7)
                    r[i, j], r[j, i] = q, 1 - q
                    p += 1
            Q = np.array(
                [
                    [sum(r[m, t] ** 2 for m in range(E) if m != t) if t == u else -r[u, t] * r[t, u] for u in range(E)]
                    for t in range(E)
                ]
            )
            A = np.block([[Q, np.ones((E, 1))], [np.ones((1, E)), np.zeros((1, 1))]])
            probs.append(np.linalg.solve(A, np.r_[np.zeros(E), 1.0])[:E])
    return np.array(dec), np.array(votes), (np.array(probs) if probs else None)


@pytest.mark.parametrize(
    "E,proba,kt", [(3, False, "RBF"), (3, True, "RBF"), (4, True, "POLY"), (2, False, "LINEAR"), (2, True, "SIGMOID")]
)
def test_svm_classifier(E, proba, kt):
    rng = np.random.default_rng(E * 10 + proba)
    vpc = [2, 3, 1, 2][:E]
    V, F = sum(vpc), 3
    sv, coef = rng.normal(size=(V, F)), rng.normal(size=(E - 1, V))
    P = E * (E - 1) // 2
    rho = rng.normal(size=P)
    kp = [0.4, 0.2, 2]
    pa, pb = (rng.normal(size=P) - 1, rng.normal(size=P) * 0.1) if proba else (None, None)
    x = rng.normal(size=(10, F)).astype(np.float32)
    kw = dict(
        vectors_per_class=vpc,
        support_vectors=list(sv.reshape(-1)),
        coefficients=list(coef.reshape(-1)),
        rho=list(rho),
        kernel_type=kt,
        kernel_params=kp,
        classlabels_ints=list(range(10, 10 + E)),
    )
    if proba:
        kw.update(prob_a=list(pa), prob_b=list(pb))
    y, z = ML.svm_classifier(x, **kw)
    dec, votes, probs = ref_svc(x, E, vpc, sv, coef, rho, kt, kp, pa, pb)
    want = probs if proba else (np.c_[-dec, dec] if E == 2 else dec)
    assert z.dtype == np.float32 and y.dtype == np.int64
    np.testing.assert_allclose(z, want, rtol=2e-3 if proba else 1e-5, atol=2e-3 if proba else 1e-5)
    assert y.tolist() == [10 + int(np.argmax(v)) for v in votes]


def test_svm_classifier_linear():
    x = RNG.normal(size=(5, 3))
    c = RNG.normal(size=(3, 3))
    y, z = ML.svm_classifier(
        x, coefficients=list(c.reshape(-1)), rho=[0.5], classlabels_strings=["a", "b", "c"], post_transform="SOFTMAX"
    )
    want = scipy.special.softmax(x @ c.T + 0.5, axis=1)
    np.testing.assert_allclose(z, want, rtol=1e-5)
    assert y.tolist() == [["a", "b", "c"][i] for i in np.argmax(want, axis=1)]
    with pytest.raises(KernelError):
        ML.svm_classifier(x, coefficients=[1.0, 2.0], classlabels_ints=[0, 1])


def test_svm_classifier_against_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(4)
    E, F, vpc = 3, 3, [2, 1, 2]
    V, P = sum(vpc), 3
    x = rng.normal(size=(12, F)).astype(np.float32)
    for proba in (False, True):
        kw = dict(
            vectors_per_class=vpc,
            support_vectors=list(rng.normal(size=V * F)),
            coefficients=list(rng.normal(size=(E - 1) * V)),
            rho=list(rng.normal(size=P)),
            kernel_type="RBF",
            kernel_params=[0.4, 0.0, 0],
            classlabels_strings=["p", "q", "r"],
            post_transform="NONE",
        )
        if proba:
            kw.update(prob_a=list(rng.normal(size=P) - 1), prob_b=list(rng.normal(size=P) * 0.1))
        node = helper.make_node("SVMClassifier", ["X"], ["Y", "Z"], domain="ai.onnx.ml", **kw)
        m = _ml_model(
            node,
            [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, F])],
            [
                helper.make_tensor_value_info("Y", TensorProto.STRING, [None]),
                helper.make_tensor_value_info("Z", TensorProto.FLOAT, None),
            ],
            3,
        )
        wy, wz = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})
        gy, gz = stdops.onnx.run(m, [x])
        np.testing.assert_allclose(gz, wz, rtol=1e-4, atol=1e-5)
        assert gy.tolist() == list(wy)
