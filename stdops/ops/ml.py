"""ai.onnx.ml kernels: ArrayFeatureExtractor, Binarizer, LabelEncoder, TreeEnsemble (and the older
TreeEnsembleRegressor / TreeEnsembleClassifier on the same engine, in ml_trees).

Tables built from attributes (LabelEncoder's key -> value map, a tree ensemble's node arrays)
are prepared once by ``*_prepare`` functions; the ONNX adapters call them at load time and the
kernels (for direct calls) on every call.
"""
from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..limits import check_elements
from ._registry import op


def _as_array(x) -> np.ndarray:
    return x if isinstance(x, np.ndarray) else np.asarray(x)


# --------------------------------------------------------------------------- ArrayFeatureExtractor


@op("onnx-ml:ArrayFeatureExtractor-1")
def array_feature_extractor(X, Y, /):
    """Z[..., j] = X[..., Y[j]]: selects entries of the last axis of X by the indices Y.

    X (..., F) of float, double, int32, int64 or string; Y int64 indices in [0, F) (any shape,
    flattened). Z has shape (..., len(Y)) with X's dtype; a 1-D X gives shape (1, len(Y)).
    """
    x, y = _as_array(X), _as_array(Y)
    if y.dtype.kind not in "iu":
        raise KernelError(f"ArrayFeatureExtractor: Y must be an integer tensor, got {y.dtype}")
    if x.ndim == 0:
        raise KernelError("ArrayFeatureExtractor: X must have rank >= 1")
    idx = y.reshape(-1).astype(np.int64, copy=False)
    f = x.shape[-1]
    if idx.size and (idx.min() < 0 or idx.max() >= f):
        raise KernelError(f"ArrayFeatureExtractor: indices must be in [0, {f}), got {idx.min()}..{idx.max()}")
    z = np.take(x, idx, axis=-1)
    return z.reshape(1, -1) if x.ndim == 1 else z


# --------------------------------------------------------------------------- Binarizer


@op("onnx-ml:Binarizer-1")
def binarizer(X, /, *, threshold=0.0):
    """Y = 1 where X > threshold, else 0. Shape and dtype of X (float, double, int32, int64)."""
    x = _as_array(X)
    if x.dtype.kind not in "fiu":
        raise KernelError(f"Binarizer: X must be a numeric tensor, got {x.dtype}")
    return (x > threshold).astype(x.dtype)


# --------------------------------------------------------------------------- LabelEncoder


def _str_array(x: np.ndarray) -> np.ndarray:
    """An object/bytes/str array as a NumPy unicode array (for sorted look-ups)."""
    if x.dtype.kind == "U":
        return x
    if x.dtype.kind == "S":
        return np.char.decode(x, "utf-8")
    if x.size == 0:
        return x.astype("U1")
    flat = x.reshape(-1)
    if any(isinstance(v, bytes) for v in flat[:1]):
        flat = np.array([v.decode("utf-8") if isinstance(v, bytes) else v for v in flat], dtype=object)
    return flat.astype(str).reshape(x.shape)


class LabelTable:
    """A key -> value map prepared for vectorized look-ups: sorted unique keys (the last of a
    repeated key wins), their values, the default, and for float keys the value of NaN."""

    def __init__(self, keys: np.ndarray, values: np.ndarray, default, out_dtype: np.dtype):
        if keys.shape[0] != values.shape[0]:
            raise KernelError(f"LabelEncoder: {keys.shape[0]} keys but {values.shape[0]} values")
        self.out_dtype = np.dtype(out_dtype)
        self.string_keys = keys.dtype.kind in "OUS"
        self.nan_value = None
        if self.string_keys:
            keys = _str_array(keys)
        elif keys.dtype.kind == "f":
            nan = np.isnan(keys)
            if nan.any():
                self.nan_value = values[np.nonzero(nan)[0][-1]]
            keys, values = keys[~nan], values[~nan]
        # last occurrence of each key wins: unique over the reversed keys keeps the first (= last)
        rk = keys[::-1]
        uk, first = np.unique(rk, return_index=True)
        self.keys = uk
        self.values = values[::-1][first]
        self.default = default

    def __call__(self, x) -> np.ndarray:
        x = _as_array(x)
        if self.string_keys:
            if x.dtype.kind not in "OUS":
                raise KernelError(f"LabelEncoder: the keys are strings, the input is {x.dtype}")
            xs = _str_array(x)
        else:
            if x.dtype.kind not in "fiu":
                raise KernelError(f"LabelEncoder: the keys are numbers, the input is {x.dtype}")
            xs = x
        out = np.empty(x.shape, self.out_dtype)
        out[...] = self.default
        if self.keys.size:
            pos = np.searchsorted(self.keys, xs)
            pos = np.minimum(pos, self.keys.size - 1)
            hit = self.keys[pos] == xs
            out[hit] = self.values[pos[hit]]
        if self.nan_value is not None and x.dtype.kind == "f":
            out[np.isnan(x)] = self.nan_value
        return out


def _value_kind(dtype: np.dtype) -> str:
    return "s" if dtype.kind in "OUS" else ("f" if dtype.kind == "f" else "i")


def label_encoder_prepare(*, default_float=-0.0, default_int64=-1, default_string="_Unused", default_tensor=None,
                          keys_floats=None, keys_int64s=None, keys_strings=None, keys_tensor=None,
                          values_floats=None, values_int64s=None, values_strings=None,
                          values_tensor=None) -> LabelTable:
    """Build the LabelEncoder look-up table from its attributes (one keys_* and one values_*)."""
    keys = [(k, v) for k, v in (("keys_floats", keys_floats), ("keys_int64s", keys_int64s),
                                ("keys_strings", keys_strings), ("keys_tensor", keys_tensor)) if v is not None]
    vals = [(k, v) for k, v in (("values_floats", values_floats), ("values_int64s", values_int64s),
                                ("values_strings", values_strings), ("values_tensor", values_tensor))
            if v is not None]
    if len(keys) != 1 or len(vals) != 1:
        raise KernelError(f"LabelEncoder needs exactly one keys_* and one values_* attribute, got "
                          f"{[k for k, _ in keys] or 'none'} and {[k for k, _ in vals] or 'none'}")
    kname, kv = keys[0]
    vname, vv = vals[0]
    if kname == "keys_floats":
        karr = np.asarray(kv, np.float32)
    elif kname == "keys_int64s":
        karr = np.asarray(kv, np.int64)
    elif kname == "keys_strings":
        karr = np.asarray(list(kv), dtype=object)
    else:
        karr = np.asarray(kv).reshape(-1)
    if vname == "values_floats":
        varr, dflt = np.asarray(vv, np.float32), np.float32(default_float)
    elif vname == "values_int64s":
        varr, dflt = np.asarray(vv, np.int64), np.int64(default_int64)
    elif vname == "values_strings":
        varr, dflt = np.asarray(list(vv), dtype=object), str(default_string)
    else:
        varr = np.asarray(vv).reshape(-1)
        if default_tensor is not None:
            d = np.asarray(default_tensor).reshape(-1)
            if d.size != 1:
                raise KernelError(f"LabelEncoder: default_tensor must hold one value, got shape {d.shape}")
            dflt = d[0]
        else:
            dflt = {"s": "_Unused", "f": -0.0, "i": -1}[_value_kind(varr.dtype)]
    out_dtype = np.dtype(object) if varr.dtype.kind in "OUS" else varr.dtype
    if out_dtype == object:
        varr = np.asarray([v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in varr.tolist()],
                          dtype=object)
        if isinstance(dflt, bytes):
            dflt = dflt.decode("utf-8")
    return LabelTable(karr, varr, dflt, out_dtype)


@op("onnx-ml:LabelEncoder-2")
def label_encoder(X, /, *, default_float=-0.0, default_int64=-1, default_string="_Unused", default_tensor=None,
                  keys_floats=None, keys_int64s=None, keys_strings=None, keys_tensor=None,
                  values_floats=None, values_int64s=None, values_strings=None, values_tensor=None):
    """Y[i] = values[j] where keys[j] == X[i] (the last such j), else the default.

    Exactly one keys_* and one values_* attribute (lists or 1-D tensors; *_tensor attributes from
    LabelEncoder-4 on). NaN keys match any NaN input. Y has X's shape and the values' dtype
    (float32 for values_floats, int64 for values_int64s, strings for values_strings, the tensor's
    dtype for values_tensor). Defaults: default_float -0.0, default_int64 -1, default_string
    "_Unused"; with values_tensor, default_tensor (else "_Unused" / -1 / -0.0 by value type).
    """
    return label_encoder_prepare(
        default_float=default_float, default_int64=default_int64, default_string=default_string,
        default_tensor=default_tensor, keys_floats=keys_floats, keys_int64s=keys_int64s,
        keys_strings=keys_strings, keys_tensor=keys_tensor, values_floats=values_floats,
        values_int64s=values_int64s, values_strings=values_strings, values_tensor=values_tensor)(X)


# --------------------------------------------------------------------------- tree ensembles

# node comparison modes (TreeEnsemble-5 numbering; the older string modes map onto them)
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
_OLD_MODES = {"BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE, "BRANCH_GT": GT, "BRANCH_EQ": EQ,
              "BRANCH_NEQ": NEQ, "BRANCH_MEMBER": MEMBER}
AGGREGATES = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
TRANSFORMS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}


def _logistic(v: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(v))
    return np.where(v >= 0, 1 / (1 + e), e / (1 + e))


def _softmax_rows(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _softmax_zero_rows(v: np.ndarray) -> np.ndarray:
    """Softmax over the non-zero scores of a row; zero scores stay 0; an all-zero row gives 0.5."""
    nz = np.abs(v) > 1e-7
    mx = v.max(axis=-1, keepdims=True)
    e = np.where(nz, np.exp(np.where(nz, v - mx, 0)), 0)
    s = e.sum(axis=-1, keepdims=True)
    return np.where(s == 0, v.dtype.type(0.5), e / np.where(s == 0, 1, s))


def post_transform_scores(v: np.ndarray, transform: int) -> np.ndarray:
    """NONE 0, SOFTMAX 1, LOGISTIC 2, SOFTMAX_ZERO 3, PROBIT 4 applied to scores (N, T)."""
    t = int(transform)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        if t == 0:
            return v
        if t == 1:
            return _softmax_rows(v)
        if t == 2:
            return _logistic(v)
        if t == 3:
            return _softmax_zero_rows(v)
        if t == 4:
            import scipy.special

            return scipy.special.ndtri(v).astype(v.dtype, copy=False)
    raise KernelError(f"post_transform must be 0..4 (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT), got {transform}")


class Forest:
    """A tree ensemble as flat node arrays, evaluated level by level for all (sample, tree) pairs.

    A child code >= 0 is an interior node index; a code c < 0 is the leaf -c - 1. Each leaf
    carries a row of per-target weights and a row of flags saying which targets it feeds.
    """

    def __init__(self, roots, feature, mode, split, true_child, false_child, missing_true, members,
                 leaf_weight, leaf_has, *, aggregate=1, transform=0, base_values=None, what="TreeEnsemble"):
        self.what = what
        self.roots = np.asarray(roots, np.int64).reshape(-1)
        self.feature = np.asarray(feature, np.int64).reshape(-1)
        self.mode = np.asarray(mode, np.int64).reshape(-1)
        self.split = np.asarray(split).reshape(-1)
        self.true_child = np.asarray(true_child, np.int64).reshape(-1)
        self.false_child = np.asarray(false_child, np.int64).reshape(-1)
        n = self.feature.size
        for name, a in (("modes", self.mode), ("splits", self.split), ("true ids", self.true_child),
                        ("false ids", self.false_child)):
            if a.size != n:
                raise KernelError(f"{what}: {n} nodes but {a.size} node {name}")
        self.missing_true = (np.zeros(n, bool) if missing_true is None or len(missing_true) == 0
                             else np.asarray(missing_true).reshape(-1).astype(bool))
        if self.missing_true.size != n:
            raise KernelError(f"{what}: {n} nodes but {self.missing_true.size} missing-value flags")
        self.leaf_weight = np.asarray(leaf_weight, np.float64)
        self.leaf_has = np.asarray(leaf_has, bool)
        n_leaves, self.n_targets = self.leaf_weight.shape
        if self.mode.size and (self.mode.min() < 0 or self.mode.max() > MEMBER):
            raise KernelError(f"{what}: node modes must be in 0..6, got {sorted(set(self.mode.tolist()))}")
        if self.feature.size and self.feature.min() < 0:
            raise KernelError(f"{what}: negative feature id")
        for name, c in (("roots", self.roots), ("true ids", self.true_child), ("false ids", self.false_child)):
            if c.size and (c.max() >= n or c.min() < -n_leaves):
                raise KernelError(f"{what}: {name} point outside the {n} nodes / {n_leaves} leaves")
        # membership sets: one NaN-padded row per MEMBER node
        mem_nodes = np.nonzero(self.mode == MEMBER)[0]
        self.member_row = np.full(n, -1, np.int64)
        self.members = None
        if mem_nodes.size:
            sets = list(members or [])
            if len(sets) < mem_nodes.size:
                raise KernelError(f"{what}: {mem_nodes.size} BRANCH_MEMBER nodes but {len(sets)} membership sets")
            width = max(1, max(len(s) for s in sets[:mem_nodes.size]))
            m = np.full((mem_nodes.size, width), np.nan)
            for i, s in enumerate(sets[:mem_nodes.size]):  # load time, over attribute values
                m[i, :len(s)] = s
            self.members = m
            self.member_row[mem_nodes] = np.arange(mem_nodes.size)
        self.aggregate = int(aggregate)
        if self.aggregate not in (0, 1, 2, 3):
            raise KernelError(f"{what}: aggregate_function must be 0..3 (AVERAGE, SUM, MIN, MAX), got {aggregate}")
        self.transform = int(transform)
        if self.transform not in (0, 1, 2, 3, 4):
            raise KernelError(f"{what}: post_transform must be 0..4, got {transform}")
        self.base_values = None if base_values is None or len(base_values) == 0 else \
            np.asarray(base_values, np.float64).reshape(-1)
        if self.base_values is not None and self.base_values.size != self.n_targets:
            raise KernelError(f"{what}: {self.base_values.size} base values for {self.n_targets} targets")
        self._split_cache: dict = {}

    def _splits(self, dtype: np.dtype) -> np.ndarray:
        """Thresholds rounded to the input's precision (so that comparisons are exact), as float64."""
        s = self._split_cache.get(dtype)
        if s is None:
            s = self.split.astype(dtype).astype(np.float64) if dtype.kind == "f" else self.split.astype(np.float64)
            self._split_cache[dtype] = s
        return s

    def leaves(self, x: np.ndarray) -> np.ndarray:
        """The leaf reached by each (sample, tree): shape (N, n_trees)."""
        N = x.shape[0]
        if self.feature.size and self.feature.max() >= x.shape[1]:
            raise KernelError(f"{self.what}: a node reads feature {self.feature.max()}, X has {x.shape[1]} features")
        xf = x.astype(np.float64)
        split = self._splits(x.dtype)
        cur = np.repeat(self.roots[None, :], N, axis=0)
        for _ in range(self.feature.size + 1):  # one pass per tree level
            r, c = np.nonzero(cur >= 0)
            if r.size == 0:
                break
            nd = cur[r, c]
            fv = xf[r, self.feature[nd]]
            m, s = self.mode[nd], split[nd]
            cond = np.select([m == LEQ, m == LT, m == GTE, m == GT, m == EQ, m == NEQ],
                             [fv <= s, fv < s, fv >= s, fv > s, fv == s, fv != s], False)
            if self.members is not None:
                sel = m == MEMBER
                if sel.any():
                    cond[sel] = (fv[sel, None] == self.members[self.member_row[nd[sel]]]).any(axis=1)
            cond |= self.missing_true[nd] & np.isnan(fv)
            cur[r, c] = np.where(cond, self.true_child[nd], self.false_child[nd])
        else:
            if (cur >= 0).any():
                raise KernelError(f"{self.what}: the trees contain a cycle")
        return -cur - 1

    def scores(self, x: np.ndarray, with_votes: bool = False):
        """Aggregated scores (N, n_targets) in float64, base values added, before post_transform
        (with_votes: also the (N, n_targets) mask of targets some reached leaf feeds)."""
        if x.ndim == 1:
            x = x.reshape(1, -1)
        if x.ndim != 2:
            raise KernelError(f"{self.what}: X must have shape (N, F), got {x.shape}")
        leaves = self.leaves(x)
        N, T = x.shape[0], self.n_targets
        agg = self.aggregate
        seen = np.zeros((N, T), bool)
        if agg in (0, 1):
            acc = np.zeros((N, T))
            for j in range(leaves.shape[1]):  # one pass per tree
                acc += self.leaf_weight[leaves[:, j]]
                if with_votes:
                    seen |= self.leaf_has[leaves[:, j]]
            if agg == 0 and leaves.shape[1]:
                acc /= leaves.shape[1]
        else:
            acc = np.full((N, T), np.inf if agg == 2 else -np.inf)
            pick = np.minimum if agg == 2 else np.maximum
            for j in range(leaves.shape[1]):
                h = self.leaf_has[leaves[:, j]]
                acc = np.where(h, pick(acc, self.leaf_weight[leaves[:, j]]), acc)
                seen |= h
            acc = np.where(seen, acc, 0.0)
        if self.base_values is not None:
            acc = acc + self.base_values
        return (acc, seen) if with_votes else acc

    def __call__(self, X) -> np.ndarray:
        x = _as_array(X)
        if not (x.dtype.kind == "f"):
            raise KernelError(f"{self.what}: X must be a float tensor, got {x.dtype}")
        wt = np.float64 if x.dtype == np.float64 else np.float32
        return post_transform_scores(self.scores(x).astype(wt), self.transform).astype(x.dtype, copy=False)


def _membership_sets(values) -> list[list[float]]:
    """membership_values: the sets of the BRANCH_MEMBER nodes, each ended by a NaN."""
    if values is None:
        return []
    v = np.asarray(values, np.float64).reshape(-1)
    ends = np.nonzero(np.isnan(v))[0].tolist()
    sets, start = [], 0
    for e in ends + ([v.size] if (not ends or ends[-1] != v.size - 1) and v.size else []):
        sets.append(v[start:e].tolist())
        start = e + 1
    return sets


def tree_ensemble_prepare(*, aggregate_function=1, leaf_targetids, leaf_weights, membership_values=None,
                          n_targets=None, nodes_falseleafs, nodes_falsenodeids, nodes_featureids,
                          nodes_hitrates=None, nodes_missing_value_tracks_true=None, nodes_modes, nodes_splits,
                          nodes_trueleafs, nodes_truenodeids, post_transform=0, tree_roots) -> Forest:
    """Build the Forest of a TreeEnsemble-5 node from its attributes."""
    tids = np.asarray(leaf_targetids, np.int64).reshape(-1)
    w = np.asarray(leaf_weights).reshape(-1)
    if tids.size != w.size:
        raise KernelError(f"TreeEnsemble: {tids.size} leaf_targetids but {w.size} leaf_weights")
    nt = int(n_targets) if n_targets is not None else (int(tids.max()) + 1 if tids.size else 1)
    if tids.size and (tids.min() < 0 or tids.max() >= nt):
        raise KernelError(f"TreeEnsemble: leaf_targetids must be in [0, {nt})")
    lw = np.zeros((w.size, nt))
    lh = np.zeros((w.size, nt), bool)
    lw[np.arange(w.size), tids] = w
    lh[np.arange(w.size), tids] = True

    def child(ids, leafs):
        ids = np.asarray(ids, np.int64).reshape(-1)
        leafs = np.asarray(leafs).reshape(-1).astype(bool)
        if ids.size != leafs.size:
            raise KernelError("TreeEnsemble: nodes_*nodeids and nodes_*leafs differ in length")
        return np.where(leafs, -ids - 1, ids)

    return Forest(tree_roots, nodes_featureids, np.asarray(nodes_modes).astype(np.int64), nodes_splits,
                  child(nodes_truenodeids, nodes_trueleafs), child(nodes_falsenodeids, nodes_falseleafs),
                  nodes_missing_value_tracks_true, _membership_sets(membership_values), lw, lh,
                  aggregate=aggregate_function, transform=post_transform, what="TreeEnsemble")


@op("onnx-ml:TreeEnsemble-5")
def tree_ensemble(X, /, *, aggregate_function=1, leaf_targetids, leaf_weights, membership_values=None,
                  n_targets=None, nodes_falseleafs, nodes_falsenodeids, nodes_featureids, nodes_hitrates=None,
                  nodes_missing_value_tracks_true=None, nodes_modes, nodes_splits, nodes_trueleafs,
                  nodes_truenodeids, post_transform=0, tree_roots):
    """Y[n, t] = post_transform(aggregate over trees of the weights of the leaves that sample n
    reaches and that feed target t) (SUM 1 / AVERAGE 0 = sum / n_trees / MIN 2 / MAX 3; a target
    no reached leaf feeds is 0).

    A node sends a sample to its true branch when X[n, feature] <= / < / >= / > / == / != split
    (modes 0..5) or is in the node's membership set (mode 6), or when the value is NaN and
    nodes_missing_value_tracks_true is 1. post_transform: NONE 0, SOFTMAX 1, LOGISTIC 2,
    SOFTMAX_ZERO 3, PROBIT 4. X (N, F) float16/float/double; Y (N, n_targets), X's dtype.
    """
    return tree_ensemble_prepare(
        aggregate_function=aggregate_function, leaf_targetids=leaf_targetids, leaf_weights=leaf_weights,
        membership_values=membership_values, n_targets=n_targets, nodes_falseleafs=nodes_falseleafs,
        nodes_falsenodeids=nodes_falsenodeids, nodes_featureids=nodes_featureids, nodes_hitrates=nodes_hitrates,
        nodes_missing_value_tracks_true=nodes_missing_value_tracks_true, nodes_modes=nodes_modes,
        nodes_splits=nodes_splits, nodes_trueleafs=nodes_trueleafs, nodes_truenodeids=nodes_truenodeids,
        post_transform=post_transform, tree_roots=tree_roots)(X)


# --------------------------------------------------------------------------- TreeEnsembleRegressor / -Classifier


def _opt(*candidates):
    """The first attribute of a FLOATS / *_as_tensor pair that is given."""
    for c in candidates:
        if c is not None and len(c):
            return np.asarray(c, np.float64).reshape(-1)
    return None


def _enum(value, table: dict, what: str, name: str) -> int:
    v = str(value).upper()
    if v not in table:
        raise KernelError(f"{what}: {name} must be one of {', '.join(table)}, got {value!r}")
    return table[v]


def legacy_forest(*, what, nodes_treeids, nodes_nodeids, nodes_featureids, nodes_modes, nodes_values,
                  nodes_truenodeids, nodes_falsenodeids, nodes_missing_value_tracks_true, leaf_treeids, leaf_nodeids,
                  leaf_ids, leaf_weights, n_targets, aggregate, transform, base_values) -> Forest:
    """Convert the (tree id, node id) encoding of TreeEnsembleRegressor/-Classifier into a Forest:
    LEAF nodes become leaves carrying the weights listed for them; the root of a tree is its first
    node that no other node points at."""
    if nodes_treeids is None or nodes_nodeids is None or nodes_modes is None:
        raise KernelError(f"{what}: nodes_treeids, nodes_nodeids and nodes_modes are required")
    tree = np.asarray(nodes_treeids, np.int64).reshape(-1)
    nid = np.asarray(nodes_nodeids, np.int64).reshape(-1)
    n = tree.size
    modes = list(nodes_modes)
    lists = {"nodes_nodeids": nid, "nodes_modes": modes, "nodes_featureids": nodes_featureids,
             "nodes_truenodeids": nodes_truenodeids, "nodes_falsenodeids": nodes_falsenodeids}
    for name, a in lists.items():
        if a is None or len(a) != n:
            raise KernelError(f"{what}: {name} must have one entry per node ({n})")
    if nodes_values is None or nodes_values.size != n:
        raise KernelError(f"{what}: nodes_values (or nodes_values_as_tensor) must have one entry per node ({n})")
    unknown = sorted(set(modes) - set(_OLD_MODES) - {"LEAF"})
    if unknown or "BRANCH_MEMBER" in modes:
        raise KernelError(f"{what}: unknown node modes {unknown or ['BRANCH_MEMBER']}")
    is_leaf = np.array([m == "LEAF" for m in modes], bool)
    mode = np.array([_OLD_MODES.get(m, 0) for m in modes], np.int64)
    if n == 0:
        raise KernelError(f"{what}: the ensemble has no nodes")
    if tree.min() < 0 or nid.min() < 0:
        raise KernelError(f"{what}: tree and node ids must be >= 0")
    span = int(nid.max()) + 1
    keys = tree * span + nid
    order = np.argsort(keys, kind="stable")
    skeys = keys[order]
    if (np.diff(skeys) == 0).any():
        raise KernelError(f"{what}: a (tree id, node id) pair appears twice")

    def lookup(t, ids, name):
        t, ids = np.asarray(t, np.int64).reshape(-1), np.asarray(ids, np.int64).reshape(-1)
        k = t * span + ids
        pos = np.minimum(np.searchsorted(skeys, k), n - 1)
        if ((ids < 0) | (ids >= span) | (skeys[pos] != k)).any():
            raise KernelError(f"{what}: {name} refer to nodes that do not exist")
        return order[pos]

    interior = np.nonzero(~is_leaf)[0]
    leaves = np.nonzero(is_leaf)[0]
    slot = np.zeros(n, np.int64)
    slot[interior] = np.arange(interior.size)
    slot[leaves] = -np.arange(leaves.size) - 1  # leaf code
    tt = lookup(tree[interior], np.asarray(nodes_truenodeids)[interior], "nodes_truenodeids")
    ff = lookup(tree[interior], np.asarray(nodes_falsenodeids)[interior], "nodes_falsenodeids")
    referenced = np.zeros(n, bool)
    referenced[tt] = referenced[ff] = True
    cand = np.nonzero(~referenced)[0]
    tids, first = np.unique(tree[cand], return_index=True)
    if tids.size != np.unique(tree).size:
        raise KernelError(f"{what}: a tree has no root (its nodes form a cycle)")
    roots = slot[cand[first]]
    lw = np.zeros((leaves.size, n_targets))
    lh = np.zeros((leaves.size, n_targets), bool)
    li = np.asarray(leaf_ids if leaf_ids is not None else [], np.int64).reshape(-1)
    w = np.asarray(leaf_weights if leaf_weights is not None else [], np.float64).reshape(-1)
    if li.size != w.size or leaf_treeids is None or leaf_nodeids is None or len(leaf_treeids) != li.size \
            or len(leaf_nodeids) != li.size:
        raise KernelError(f"{what}: the leaf weight attributes (tree ids, node ids, ids, weights) differ in length")
    if li.size:
        if li.min() < 0 or li.max() >= n_targets:
            raise KernelError(f"{what}: target / class ids must be in [0, {n_targets})")
        g = lookup(leaf_treeids, leaf_nodeids, "the weights' node ids")
        if not is_leaf[g].all():
            raise KernelError(f"{what}: a weight is attached to a node that is not a LEAF")
        np.add.at(lw, (-slot[g] - 1, li), w)
        lh[-slot[g] - 1, li] = True
    miss = nodes_missing_value_tracks_true
    miss = None if miss is None or len(miss) == 0 else np.asarray(miss).reshape(-1)
    if miss is not None and miss.size != n:
        raise KernelError(f"{what}: nodes_missing_value_tracks_true must have one entry per node ({n})")
    return Forest(roots, np.asarray(nodes_featureids, np.int64)[interior], mode[interior], nodes_values[interior],
                  slot[tt], slot[ff], None if miss is None else miss[interior], None, lw, lh,
                  aggregate=aggregate, transform=transform, base_values=base_values, what=what)


def tree_ensemble_regressor_prepare(*, aggregate_function="SUM", base_values=None, base_values_as_tensor=None,
                                    n_targets=None, nodes_falsenodeids=None, nodes_featureids=None,
                                    nodes_hitrates=None, nodes_hitrates_as_tensor=None,
                                    nodes_missing_value_tracks_true=None, nodes_modes=None, nodes_nodeids=None,
                                    nodes_treeids=None, nodes_truenodeids=None, nodes_values=None,
                                    nodes_values_as_tensor=None, post_transform="NONE", target_ids=None,
                                    target_nodeids=None, target_treeids=None, target_weights=None,
                                    target_weights_as_tensor=None) -> Forest:
    what = "TreeEnsembleRegressor"
    ids = np.asarray(target_ids if target_ids is not None else [], np.int64)
    nt = int(n_targets) if n_targets is not None else (int(ids.max()) + 1 if ids.size else 1)
    return legacy_forest(
        what=what, nodes_treeids=nodes_treeids, nodes_nodeids=nodes_nodeids, nodes_featureids=nodes_featureids,
        nodes_modes=nodes_modes, nodes_values=_opt(nodes_values_as_tensor, nodes_values),
        nodes_truenodeids=nodes_truenodeids, nodes_falsenodeids=nodes_falsenodeids,
        nodes_missing_value_tracks_true=nodes_missing_value_tracks_true, leaf_treeids=target_treeids,
        leaf_nodeids=target_nodeids, leaf_ids=target_ids, leaf_weights=_opt(target_weights_as_tensor, target_weights),
        n_targets=nt, aggregate=_enum(aggregate_function, AGGREGATES, what, "aggregate_function"),
        transform=_enum(post_transform, TRANSFORMS, what, "post_transform"),
        base_values=_opt(base_values_as_tensor, base_values))


def _legacy_scores(forest: Forest, X) -> np.ndarray:
    x = _as_array(X)
    if x.dtype.kind not in "fiu":
        raise KernelError(f"{forest.what}: X must be a numeric tensor, got {x.dtype}")
    return post_transform_scores(forest.scores(x).astype(np.float32), forest.transform)


@op("onnx-ml:TreeEnsembleRegressor-1")
def tree_ensemble_regressor(X, /, *, aggregate_function="SUM", base_values=None, base_values_as_tensor=None,
                            n_targets=None, nodes_falsenodeids=None, nodes_featureids=None, nodes_hitrates=None,
                            nodes_hitrates_as_tensor=None, nodes_missing_value_tracks_true=None, nodes_modes=None,
                            nodes_nodeids=None, nodes_treeids=None, nodes_truenodeids=None, nodes_values=None,
                            nodes_values_as_tensor=None, post_transform="NONE", target_ids=None,
                            target_nodeids=None, target_treeids=None, target_weights=None,
                            target_weights_as_tensor=None):
    """Y[n, t] = post_transform(base_values[t] + aggregate over trees of the target_weights that the
    LEAF node reached by sample n lists for target t) (SUM, AVERAGE = sum / n_trees, MIN, MAX; a
    target no reached leaf feeds gets 0 before the base value).

    Nodes are (nodes_treeids, nodes_nodeids) with BRANCH_LEQ/LT/GTE/GT/EQ/NEQ or LEAF modes, children
    by node id within the tree; NaN goes to the true branch where nodes_missing_value_tracks_true is
    1. *_as_tensor attributes (TreeEnsembleRegressor-3) replace their float lists. X (N, F) float,
    double, int64 or int32; Y (N, n_targets) float32.
    """
    return _legacy_scores(tree_ensemble_regressor_prepare(
        aggregate_function=aggregate_function, base_values=base_values, base_values_as_tensor=base_values_as_tensor,
        n_targets=n_targets, nodes_falsenodeids=nodes_falsenodeids, nodes_featureids=nodes_featureids,
        nodes_missing_value_tracks_true=nodes_missing_value_tracks_true, nodes_modes=nodes_modes,
        nodes_nodeids=nodes_nodeids, nodes_treeids=nodes_treeids, nodes_truenodeids=nodes_truenodeids,
        nodes_values=nodes_values, nodes_values_as_tensor=nodes_values_as_tensor, post_transform=post_transform,
        target_ids=target_ids, target_nodeids=target_nodeids, target_treeids=target_treeids,
        target_weights=target_weights, target_weights_as_tensor=target_weights_as_tensor), X)


class LegacyClassifier:
    """A TreeEnsembleClassifier: the forest of class scores plus the label rule."""

    def __init__(self, forest: Forest, labels: np.ndarray, binary: bool):
        self.forest, self.labels, self.binary = forest, labels, binary

    def __call__(self, X):
        x = _as_array(X)
        if x.dtype.kind not in "fiu":
            raise KernelError(f"TreeEnsembleClassifier: X must be a numeric tensor, got {x.dtype}")
        s, votes = self.forest.scores(x, with_votes=True)
        s = s.astype(np.float32)
        if self.binary:  # one class column holds the score s of the second class: scores (-s, s)
            c = s[:, 1:2] if self.binary == 2 else s[:, 0:1]
            s = np.concatenate([-c, c], axis=1)
            votes = np.ones_like(s, bool)
        elif self.forest.base_values is not None:
            votes = np.ones_like(votes)
        z = post_transform_scores(s, self.forest.transform).astype(np.float32, copy=False)
        # the top class among the classes some reached leaf votes for (all classes if none does)
        votes = votes | ~votes.any(axis=1, keepdims=True)
        idx = np.argmax(np.where(votes, z, -np.inf), axis=1) if z.shape[0] else np.zeros(0, np.int64)
        return self.labels[idx], z


def tree_ensemble_classifier_prepare(*, base_values=None, base_values_as_tensor=None, class_ids=None,
                                     class_nodeids=None, class_treeids=None, class_weights=None,
                                     class_weights_as_tensor=None, classlabels_int64s=None, classlabels_strings=None,
                                     nodes_falsenodeids=None, nodes_featureids=None, nodes_hitrates=None,
                                     nodes_hitrates_as_tensor=None, nodes_missing_value_tracks_true=None,
                                     nodes_modes=None, nodes_nodeids=None, nodes_treeids=None,
                                     nodes_truenodeids=None, nodes_values=None, nodes_values_as_tensor=None,
                                     post_transform="NONE") -> LegacyClassifier:
    what = "TreeEnsembleClassifier"
    if (classlabels_int64s is None) == (classlabels_strings is None):
        raise KernelError(f"{what}: exactly one of classlabels_int64s and classlabels_strings must be given")
    labels = (np.asarray(classlabels_int64s, np.int64) if classlabels_int64s is not None
              else np.asarray(list(classlabels_strings), dtype=object))
    E = labels.size
    if E == 0:
        raise KernelError(f"{what}: no class labels")
    forest = legacy_forest(
        what=what, nodes_treeids=nodes_treeids, nodes_nodeids=nodes_nodeids, nodes_featureids=nodes_featureids,
        nodes_modes=nodes_modes, nodes_values=_opt(nodes_values_as_tensor, nodes_values),
        nodes_truenodeids=nodes_truenodeids, nodes_falsenodeids=nodes_falsenodeids,
        nodes_missing_value_tracks_true=nodes_missing_value_tracks_true, leaf_treeids=class_treeids,
        leaf_nodeids=class_nodeids, leaf_ids=class_ids, leaf_weights=_opt(class_weights_as_tensor, class_weights),
        n_targets=E, aggregate=1, transform=_enum(post_transform, TRANSFORMS, what, "post_transform"),
        base_values=_opt(base_values_as_tensor, base_values))
    used = set(np.asarray(class_ids if class_ids is not None else [], np.int64).tolist())
    binary = 0
    if E == 2 and len(used) == 1:
        binary = 2 if used == {1} else 1  # which column carries the score
    return LegacyClassifier(forest, labels, binary)


@op("onnx-ml:TreeEnsembleClassifier-1")
def tree_ensemble_classifier(X, /, *, base_values=None, base_values_as_tensor=None, class_ids=None,
                             class_nodeids=None, class_treeids=None, class_weights=None, class_weights_as_tensor=None,
                             classlabels_int64s=None, classlabels_strings=None, nodes_falsenodeids=None,
                             nodes_featureids=None, nodes_hitrates=None, nodes_hitrates_as_tensor=None,
                             nodes_missing_value_tracks_true=None, nodes_modes=None, nodes_nodeids=None,
                             nodes_treeids=None, nodes_truenodeids=None, nodes_values=None,
                             nodes_values_as_tensor=None, post_transform="NONE"):
    """Z[n, e] = post_transform(base_values[e] + sum over trees of the class_weights the LEAF reached
    by sample n lists for class e); Y[n] = classlabels[argmax of Z[n, e] over the classes some reached
    leaf votes for (every class when base_values are given or no class gets a vote)].

    Nodes as in TreeEnsembleRegressor. With two classes and every weight on one class, that
    score s is the second class's: the scores are (-s, s) before the transform (as onnxruntime). X (N, F) float, double, int64 or int32; Y (N,) int64 or string labels; Z (N, E) float32.
    """
    return tree_ensemble_classifier_prepare(
        base_values=base_values, base_values_as_tensor=base_values_as_tensor, class_ids=class_ids,
        class_nodeids=class_nodeids, class_treeids=class_treeids, class_weights=class_weights,
        class_weights_as_tensor=class_weights_as_tensor, classlabels_int64s=classlabels_int64s,
        classlabels_strings=classlabels_strings, nodes_falsenodeids=nodes_falsenodeids,
        nodes_featureids=nodes_featureids, nodes_missing_value_tracks_true=nodes_missing_value_tracks_true,
        nodes_modes=nodes_modes, nodes_nodeids=nodes_nodeids, nodes_treeids=nodes_treeids,
        nodes_truenodeids=nodes_truenodeids, nodes_values=nodes_values, nodes_values_as_tensor=nodes_values_as_tensor,
        post_transform=post_transform)(X)


# --------------------------------------------------------------------------- linear models and preprocessing


def _numeric_2d(x, opname: str) -> np.ndarray:
    x = _as_array(x)
    if x.dtype.kind not in "fiu":
        raise KernelError(f"{opname}: X must be a numeric tensor, got {x.dtype}")
    if x.ndim == 1:
        x = x.reshape(1, -1)
    if x.ndim != 2:
        raise KernelError(f"{opname}: X must have shape (N, F) or (F,), got {x.shape}")
    return x


def _floats(x: np.ndarray) -> np.ndarray:
    """Arithmetic type of the ML ops: float64 stays float64, everything else computes in float32."""
    return x if x.dtype == np.float64 else x.astype(np.float32)


def _per_feature(v, f: int, opname: str, name: str, dtype) -> np.ndarray:
    a = np.asarray(v if v is not None and len(v) else [0.0], dtype).reshape(-1)
    if a.size not in (1, f):
        raise KernelError(f"{opname}: {name} has {a.size} values for {f} features (need 1 or {f})")
    return a


@op("onnx-ml:Scaler-1")
def scaler(X, /, *, offset=None, scale=None):
    """Y = (X - offset) * scale, offset and scale of length 1 or F (last axis; absent: 0 and 1).

    X float, double, int64 or int32; Y float32 of X's shape.
    """
    x = _as_array(X)
    if x.dtype.kind not in "fiu":
        raise KernelError(f"Scaler: X must be a numeric tensor, got {x.dtype}")
    f = x.shape[-1] if x.ndim else 1
    off = _per_feature(offset, f, "Scaler", "offset", np.float32)
    sc = _per_feature(scale if scale is not None and len(scale) else [1.0], f, "Scaler", "scale", np.float32)
    return ((_floats(x) - off) * sc).astype(np.float32)


@op("onnx-ml:Normalizer-1")
def normalizer(X, /, *, norm="MAX"):
    """Per row of X (N, C) or of X (C,): Y = X / max(X) (MAX), X / sum|X| (L1), X / sqrt(sum X^2)
    (L2); a row whose divisor is 0 is returned unchanged. Y float32 of X's shape."""
    x = _as_array(X)
    if x.dtype.kind not in "fiu" or x.ndim not in (1, 2):
        raise KernelError(f"Normalizer: X must be a numeric (N, C) or (C,) tensor, got {x.dtype} {x.shape}")
    xf = _floats(x)
    mode = str(norm).upper()
    if mode == "MAX":
        d = xf.max(axis=-1, keepdims=True) if x.shape[-1] else np.ones(x.shape[:-1] + (1,), xf.dtype)
    elif mode == "L1":
        d = np.abs(xf).sum(axis=-1, keepdims=True)
    elif mode == "L2":
        d = np.sqrt((xf * xf).sum(axis=-1, keepdims=True))
    else:
        raise KernelError(f"Normalizer: norm must be MAX, L1 or L2, got {norm!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(d == 0, xf, xf / np.where(d == 0, 1, d))
    return y.astype(np.float32)


def _linear_scores(x: np.ndarray, coefficients, intercepts, rows: int | None, opname: str) -> np.ndarray:
    """X (N, F) @ W^T + b with W the coefficients as (rows, F) (rows inferred when None)."""
    w = np.asarray(coefficients if coefficients is not None else [], np.float64).reshape(-1)
    f = x.shape[1]
    if rows is None:
        if f == 0 or w.size % f:
            raise KernelError(f"{opname}: {w.size} coefficients do not split into rows of {f} features")
        rows = w.size // f
    if w.size != rows * f:
        raise KernelError(f"{opname}: expected {rows} x {f} coefficients, got {w.size}")
    xf = _floats(x)
    s = xf @ w.reshape(rows, f).T.astype(xf.dtype)
    if intercepts is not None and len(intercepts):
        b = np.asarray(intercepts, xf.dtype).reshape(-1)
        if b.size not in (1, rows):
            raise KernelError(f"{opname}: {b.size} intercepts for {rows} outputs")
        s = s + b
    return s


@op("onnx-ml:LinearRegressor-1")
def linear_regressor(X, /, *, coefficients=None, intercepts=None, post_transform="NONE", targets=1):
    """Y = post_transform(X W^T + intercepts), W = coefficients as (targets, F).

    X (N, F) or (F,) numeric; Y (N, targets) float32.
    """
    x = _numeric_2d(X, "LinearRegressor")
    t = _enum(post_transform, TRANSFORMS, "LinearRegressor", "post_transform")
    s = _linear_scores(x, coefficients, intercepts, int(targets), "LinearRegressor").astype(np.float32)
    return post_transform_scores(s, t).astype(np.float32, copy=False)


@op("onnx-ml:LinearClassifier-1")
def linear_classifier(X, /, *, classlabels_ints=None, classlabels_strings=None, coefficients, intercepts=None,
                      multi_class=0, post_transform="NONE"):
    """Z = post_transform(X W^T + intercepts), W = coefficients as (E, F); Y = labels[argmax Z].

    With two labels and one row of coefficients the score s is the second class's: p = s
    (LOGISTIC: sigmoid(s), PROBIT: probit(s); a softmax of one score is skipped), Z = (1 - p, p),
    Y = the second label where p > 0 (LOGISTIC: p > 0.5). With one row and one label (or none),
    Y = label (1) where the score is >= 0 (NONE) / 0.5 (other transforms), else 0 (the empty
    string). multi_class is not used (as in onnxruntime).
    X (N, F) or (F,) numeric; Y (N,) int64 or strings; Z (N, E) float32.
    """
    x = _numeric_2d(X, "LinearClassifier")
    t = _enum(post_transform, TRANSFORMS, "LinearClassifier", "post_transform")
    if classlabels_ints is not None and classlabels_strings is not None:
        raise KernelError("LinearClassifier: only one of classlabels_ints and classlabels_strings may be given")
    labels = (np.asarray(classlabels_strings, dtype=object) if classlabels_strings is not None
              else np.asarray(classlabels_ints if classlabels_ints is not None else [], np.int64))
    s = _linear_scores(x, coefficients, intercepts, None, "LinearClassifier").astype(np.float32)
    if s.shape[1] == 1 and labels.size == 2:  # binary: one score, the second class's
        p = post_transform_scores(s, t) if t in (2, 4) else s  # softmax of one score is skipped
        hit = p[:, 0] > (0.5 if t == 2 else 0.0)
        return labels[hit.astype(np.int64)], np.concatenate([1 - p, p], axis=1).astype(np.float32)
    z = post_transform_scores(s, t).astype(np.float32, copy=False)
    if z.shape[1] > 1:
        if labels.size != z.shape[1]:
            raise KernelError(f"LinearClassifier: {labels.size} class labels for {z.shape[1]} score columns")
        return labels[np.argmax(z, axis=1)] if z.shape[0] else labels[:0], z
    hit = z[:, 0] >= (0.0 if t == 0 else 0.5)
    if labels.dtype == object:
        lab = labels[0] if labels.size else ""
        return np.where(hit, lab, "").astype(object), z
    return np.where(hit, labels[0] if labels.size else 1, 0).astype(np.int64), z


@op("onnx-ml:Imputer-1")
def imputer(X, /, *, imputed_value_floats=None, imputed_value_int64s=None, replaced_value_float=0.0,
            replaced_value_int64=0):
    """Y = X with every element equal to the replaced value (NaN matches NaN) set to the imputed
    value of its feature (one value, or one per feature of the last axis). Shape and dtype of X."""
    x = _as_array(X)
    if x.dtype.kind == "f":
        vals, rep = imputed_value_floats, float(replaced_value_float)
    elif x.dtype.kind in "iu":
        vals, rep = imputed_value_int64s, int(replaced_value_int64)
    else:
        raise KernelError(f"Imputer: X must be a numeric tensor, got {x.dtype}")
    if vals is None or len(vals) == 0:
        raise KernelError(f"Imputer: imputed_value_{'floats' if x.dtype.kind == 'f' else 'int64s'} is needed for "
                          f"{x.dtype} input")
    f = x.shape[-1] if x.ndim else 1
    v = _per_feature(vals, f, "Imputer", "the imputed values", x.dtype)
    hit = np.isnan(x) if (x.dtype.kind == "f" and np.isnan(rep)) else (x == rep)
    return np.where(hit, v, x).astype(x.dtype, copy=False)


@op("onnx-ml:FeatureVectorizer-1")
def feature_vectorizer(*X, inputdimensions=None):
    """Y = the inputs side by side: each (N, C_i) (a 1-D input is (1, C)) cut or zero-padded to
    inputdimensions[i] columns, concatenated along axis 1. Y float32."""
    if not X:
        raise KernelError("FeatureVectorizer needs at least one input")
    dims = list(inputdimensions) if inputdimensions is not None else [None] * len(X)
    if len(dims) != len(X):
        raise KernelError(f"FeatureVectorizer: {len(dims)} inputdimensions for {len(X)} inputs")
    parts = []
    for a, d in zip(X, dims):
        a = _as_array(a)
        if a.dtype.kind not in "fiu" or a.ndim not in (1, 2):
            raise KernelError(f"FeatureVectorizer: inputs must be numeric (N, C) or (C,), got {a.dtype} {a.shape}")
        a = a.reshape(1, -1) if a.ndim == 1 else a
        d = a.shape[1] if d is None else int(d)
        b = np.zeros((a.shape[0], d), np.float32)
        b[:, :min(d, a.shape[1])] = a[:, :d]
        parts.append(b)
    n = {p.shape[0] for p in parts}
    if len(n) != 1:
        raise KernelError(f"FeatureVectorizer: inputs have different batch sizes {sorted(n)}")
    return np.concatenate(parts, axis=1)


@op("onnx-ml:CategoryMapper-1")
def category_mapper(X, /, *, cats_int64s=None, cats_strings=None, default_int64=-1, default_string="_Unused"):
    """Strings -> the integer paired with them in (cats_strings, cats_int64s) (default_int64 when
    absent); integers -> the paired string (default_string). Y has X's shape."""
    ints, strs = tuple(cats_int64s or ()), tuple(cats_strings or ())
    if len(ints) != len(strs):
        raise KernelError(f"CategoryMapper: {len(ints)} cats_int64s but {len(strs)} cats_strings")
    x = _as_array(X)
    if x.dtype.kind in "OUS":
        return label_encoder_prepare(keys_strings=strs, values_int64s=ints, default_int64=default_int64)(x)
    if x.dtype.kind in "iu":
        return label_encoder_prepare(keys_int64s=ints, values_strings=strs, default_string=default_string)(x)
    raise KernelError(f"CategoryMapper: X must be strings or int64, got {x.dtype}")


@op("onnx-ml:OneHotEncoder-1")
def one_hot_encoder(X, /, *, cats_int64s=None, cats_strings=None, zeros=1):
    """Y[..., j] = 1 where X equals category j, else 0 (numbers are truncated to int64 and looked up
    in cats_int64s, strings in cats_strings); with zeros=0 a value in no category is an error.
    Y float32 of shape X.shape + (number of categories,)."""
    x = _as_array(X)
    if (cats_int64s is None) == (cats_strings is None):
        raise KernelError("OneHotEncoder: exactly one of cats_int64s and cats_strings must be given")
    if x.dtype.kind in "OUS":
        if cats_strings is None:
            raise KernelError("OneHotEncoder: string input needs cats_strings")
        cats = np.asarray([str(c) for c in cats_strings], dtype=object)
        xs = _str_array(x)
        key = _str_array(cats)
    elif x.dtype.kind in "fiu":
        if cats_int64s is None:
            raise KernelError("OneHotEncoder: numeric input needs cats_int64s")
        key = np.asarray(cats_int64s, np.int64)
        xs = x.astype(np.int64) if x.dtype.kind != "f" else np.where(np.isfinite(x), x, -2**62).astype(np.int64)
    else:
        raise KernelError(f"OneHotEncoder: unsupported input dtype {x.dtype}")
    y = (xs[..., None] == key.reshape((1,) * xs.ndim + (-1,))).astype(np.float32)
    if not int(zeros) and x.size and not y.any(axis=-1).all():
        raise KernelError("OneHotEncoder: an input value is in no category (zeros=0)")
    return y


@op("onnx-ml:ZipMap-1")
def zip_map(X, /, *, classlabels_int64s=None, classlabels_strings=None):
    """Z = [{label_j: X[n, j]} for each row n]: a sequence of maps (Python dicts) from the class
    labels to the row's float32 values. X (N, E) float32, E = number of labels."""
    if (classlabels_int64s is None) == (classlabels_strings is None):
        raise KernelError("ZipMap: exactly one of classlabels_int64s and classlabels_strings must be given")
    labels = list(classlabels_strings) if classlabels_strings is not None else [int(v) for v in classlabels_int64s]
    x = _as_array(X)
    x = x.reshape(1, -1) if x.ndim == 1 else x
    if x.ndim != 2 or x.shape[1] != len(labels):
        raise KernelError(f"ZipMap: X must have shape (N, {len(labels)}), got {x.shape}")
    rows = x.astype(np.float32).tolist()  # one dict per row: the output type is a sequence of maps
    return [dict(zip(labels, r)) for r in rows]


# --------------------------------------------------------------------------- SVMRegressor, maps


def svm_kernel(x: np.ndarray, sv: np.ndarray, kernel_type: str, kernel_params) -> np.ndarray:
    """K[n, j] = k(x_n, sv_j): LINEAR x.sv, POLY (gamma x.sv + coef0)^degree, RBF exp(-gamma |x-sv|^2),
    SIGMOID tanh(gamma x.sv + coef0); kernel_params = (gamma, coef0, degree)."""
    gamma, coef0, degree = (list(kernel_params) + [0.0, 0.0, 0.0])[:3] if kernel_params else (0.0, 0.0, 0.0)
    k = str(kernel_type).upper()
    dot = x @ sv.T
    if k == "LINEAR":
        return dot
    if k == "POLY":
        return (gamma * dot + coef0) ** int(degree)
    if k == "SIGMOID":
        return np.tanh(gamma * dot + coef0)
    if k == "RBF":
        d2 = (x * x).sum(1)[:, None] - 2 * dot + (sv * sv).sum(1)[None, :]
        return np.exp(-gamma * np.maximum(d2, 0))
    raise KernelError(f"SVM: kernel_type must be LINEAR, POLY, RBF or SIGMOID, got {kernel_type!r}")


@op("onnx-ml:SVMRegressor-1")
def svm_regressor(X, /, *, coefficients=None, kernel_params=None, kernel_type="LINEAR", n_supports=0, one_class=0,
                  post_transform="NONE", rho=None, support_vectors=None):
    """s = sum_j coefficients[j] k(x, support_vectors[j]) + rho[0] (with n_supports = 0: the linear
    s = x . coefficients + rho[0]); Y = post_transform(s), or sign(s) in {1, -1} when one_class.

    X (N, F) or (F,) numeric; Y (N, 1) float32. Computed in float64.
    """
    x = _numeric_2d(X, "SVMRegressor").astype(np.float64)
    t = _enum(post_transform, TRANSFORMS, "SVMRegressor", "post_transform")
    c = np.asarray(coefficients if coefficients is not None else [], np.float64).reshape(-1)
    r = float(rho[0]) if rho is not None and len(rho) else 0.0
    f = x.shape[1]
    ns = int(n_supports)
    if ns > 0:
        sv = np.asarray(support_vectors if support_vectors is not None else [], np.float64).reshape(-1)
        if sv.size != ns * f or c.size != ns:
            raise KernelError(f"SVMRegressor: {ns} support vectors need {ns * f} support_vectors values and {ns} "
                              f"coefficients, got {sv.size} and {c.size}")
        s = svm_kernel(x, sv.reshape(ns, f), kernel_type, kernel_params) @ c + r
    else:
        if c.size != f:
            raise KernelError(f"SVMRegressor: a linear SVM needs {f} coefficients, got {c.size}")
        s = x @ c + r
    s = s.reshape(-1, 1)
    if int(one_class):
        return np.where(s > 0, 1.0, -1.0).astype(np.float32)
    return post_transform_scores(s.astype(np.float32), t).astype(np.float32, copy=False)


@op("onnx-ml:CastMap-1")
def cast_map(X, /, *, cast_to="TO_FLOAT", map_form="DENSE", max_map=1):
    """Y = the values of the map X (int64 keys) in ascending key order (DENSE), or a vector of length
    max_map with Y[key] = value and 0 elsewhere (SPARSE); cast to float32, int64 or strings
    (cast_to TO_FLOAT / TO_INT64 / TO_STRING; numbers print as "%f"). Y has shape (1, n)."""
    if not isinstance(X, dict):
        raise KernelError(f"CastMap: X must be a map (dict), got {type(X).__name__}")
    to = {"TO_FLOAT": np.float32, "TO_INT64": np.int64, "TO_STRING": object}.get(str(cast_to).upper())
    if to is None:
        raise KernelError(f"CastMap: cast_to must be TO_FLOAT, TO_INT64 or TO_STRING, got {cast_to!r}")
    keys = np.asarray(sorted(int(k) for k in X), np.int64)
    vals = [X[k] for k in keys.tolist()]
    if to is object:
        conv = np.asarray([v if isinstance(v, str) else f"{float(v):f}" for v in vals], dtype=object)
    else:
        conv = np.asarray([float(v) for v in vals]).astype(to) if vals else np.zeros(0, to)
    form = str(map_form).upper()
    if form == "DENSE":
        return conv.reshape(1, -1)
    if form != "SPARSE":
        raise KernelError(f"CastMap: map_form must be DENSE or SPARSE, got {map_form!r}")
    n = int(max_map)
    check_elements((n,), "CastMap output")
    if keys.size and (keys.min() < 0 or keys.max() >= n):
        raise KernelError(f"CastMap: keys must be in [0, max_map={n}) for SPARSE")
    out = np.full(n, f"{0.0:f}", dtype=object) if to is object else np.zeros(n, to)
    out[keys] = conv
    return out.reshape(1, -1)


@op("onnx-ml:DictVectorizer-1")
def dict_vectorizer(X, /, *, int64_vocabulary=None, string_vocabulary=None):
    """Y[i] = X[vocabulary[i]] (0 / "" for a word the map lacks): a map (or a sequence of maps, one
    row each) turned into a (1, V) (or (N, V)) tensor of the map's value type."""
    if (int64_vocabulary is None) == (string_vocabulary is None):
        raise KernelError("DictVectorizer: exactly one of int64_vocabulary and string_vocabulary must be given")
    vocab = list(string_vocabulary) if string_vocabulary is not None else [int(v) for v in int64_vocabulary]
    maps = X if isinstance(X, list) else [X]
    if not all(isinstance(m, dict) for m in maps):
        raise KernelError("DictVectorizer: X must be a map (dict) or a sequence of maps")
    sample = next((v for m in maps for v in m.values()), 0.0)
    dtype = (object if isinstance(sample, str) else np.int64 if isinstance(sample, (int, np.integer))
             else np.asarray(sample).dtype if isinstance(sample, np.generic) else np.float32)
    rows = [[m.get(w, "" if dtype is object else 0) for w in vocab] for m in maps]  # per map entry
    return np.asarray(rows, dtype=dtype).reshape(len(maps), len(vocab))
