"""ai.onnx.ml tree ensembles: TreeEnsemble-5 and the older TreeEnsembleRegressor /
TreeEnsembleClassifier, all on one level-by-level engine, :class:`Forest`.

The forest is built once from the node attributes by the ``*_prepare`` functions (the ONNX adapters
call them at load time; the kernels, for direct calls, on every call). The post transforms are
shared with the linear models and SVMs in :mod:`stdops.ops.ml`.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import op
from .ml import TRANSFORMS, _as_array, _enum, post_transform_scores

# node comparison modes (TreeEnsemble-5 numbering; the older string modes map onto them)
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
_OLD_MODES = {
    "BRANCH_LEQ": LEQ,
    "BRANCH_LT": LT,
    "BRANCH_GTE": GTE,
    "BRANCH_GT": GT,
    "BRANCH_EQ": EQ,
    "BRANCH_NEQ": NEQ,
    "BRANCH_MEMBER": MEMBER,
}
AGGREGATES = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}


class Forest:
    """A tree ensemble as flat node arrays, evaluated level by level for all (sample, tree) pairs.

    A child code >= 0 is an interior node index; a code c < 0 is the leaf -c - 1. Each leaf
    carries a row of per-target weights and a row of flags saying which targets it feeds.
    """

    def __init__(
        self,
        roots,
        feature,
        mode,
        split,
        true_child,
        false_child,
        missing_true,
        members,
        leaf_weight,
        leaf_has,
        *,
        aggregate=1,
        transform=0,
        base_values=None,
        what="TreeEnsemble",
    ):
        self.what = what
        self.roots = np.asarray(roots, np.int64).reshape(-1)
        self.feature = np.asarray(feature, np.int64).reshape(-1)
        self.mode = np.asarray(mode, np.int64).reshape(-1)
        self.split = np.asarray(split).reshape(-1)
        self.true_child = np.asarray(true_child, np.int64).reshape(-1)
        self.false_child = np.asarray(false_child, np.int64).reshape(-1)
        n = self.feature.size
        for name, a in (
            ("modes", self.mode),
            ("splits", self.split),
            ("true ids", self.true_child),
            ("false ids", self.false_child),
        ):
            if a.size != n:
                raise KernelError(f"{what}: {n} nodes but {a.size} node {name}")
        self.missing_true = (
            np.zeros(n, bool)
            if missing_true is None or len(missing_true) == 0
            else np.asarray(missing_true).reshape(-1).astype(bool)
        )
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
            width = max(1, max(len(s) for s in sets[: mem_nodes.size]))
            m = np.full((mem_nodes.size, width), np.nan)
            for i, s in enumerate(sets[: mem_nodes.size]):  # load time, over attribute values
                m[i, : len(s)] = s
            self.members = m
            self.member_row[mem_nodes] = np.arange(mem_nodes.size)
        self.aggregate = int(aggregate)
        if self.aggregate not in (0, 1, 2, 3):
            raise KernelError(f"{what}: aggregate_function must be 0..3 (AVERAGE, SUM, MIN, MAX), got {aggregate}")
        self.transform = int(transform)
        if self.transform not in (0, 1, 2, 3, 4):
            raise KernelError(f"{what}: post_transform must be 0..4, got {transform}")
        self.base_values = (
            None if base_values is None or len(base_values) == 0 else np.asarray(base_values, np.float64).reshape(-1)
        )
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
            cond = np.select(
                [m == LEQ, m == LT, m == GTE, m == GT, m == EQ, m == NEQ],
                [fv <= s, fv < s, fv >= s, fv > s, fv == s, fv != s],
                False,
            )
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


def tree_ensemble_prepare(
    *,
    aggregate_function=1,
    leaf_targetids,
    leaf_weights,
    membership_values=None,
    n_targets=None,
    nodes_falseleafs,
    nodes_falsenodeids,
    nodes_featureids,
    nodes_hitrates=None,
    nodes_missing_value_tracks_true=None,
    nodes_modes,
    nodes_splits,
    nodes_trueleafs,
    nodes_truenodeids,
    post_transform=0,
    tree_roots,
) -> Forest:
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

    return Forest(
        tree_roots,
        nodes_featureids,
        np.asarray(nodes_modes).astype(np.int64),
        nodes_splits,
        child(nodes_truenodeids, nodes_trueleafs),
        child(nodes_falsenodeids, nodes_falseleafs),
        nodes_missing_value_tracks_true,
        _membership_sets(membership_values),
        lw,
        lh,
        aggregate=aggregate_function,
        transform=post_transform,
        what="TreeEnsemble",
    )


@op("onnx-ml:TreeEnsemble-5")
def tree_ensemble(
    X,
    /,
    *,
    aggregate_function=1,
    leaf_targetids,
    leaf_weights,
    membership_values=None,
    n_targets=None,
    nodes_falseleafs,
    nodes_falsenodeids,
    nodes_featureids,
    nodes_hitrates=None,
    nodes_missing_value_tracks_true=None,
    nodes_modes,
    nodes_splits,
    nodes_trueleafs,
    nodes_truenodeids,
    post_transform=0,
    tree_roots,
):
    """Y[n, t] = post_transform(aggregate over trees of the weights of the leaves that sample n
    reaches and that feed target t) (SUM 1 / AVERAGE 0 = sum / n_trees / MIN 2 / MAX 3; a target
    no reached leaf feeds is 0).

    A node sends a sample to its true branch when X[n, feature] <= / < / >= / > / == / != split
    (modes 0..5) or is in the node's membership set (mode 6), or when the value is NaN and
    nodes_missing_value_tracks_true is 1. post_transform: NONE 0, SOFTMAX 1, LOGISTIC 2,
    SOFTMAX_ZERO 3, PROBIT 4. X (N, F) float16/float/double; Y (N, n_targets), X's dtype.
    """
    return tree_ensemble_prepare(
        aggregate_function=aggregate_function,
        leaf_targetids=leaf_targetids,
        leaf_weights=leaf_weights,
        membership_values=membership_values,
        n_targets=n_targets,
        nodes_falseleafs=nodes_falseleafs,
        nodes_falsenodeids=nodes_falsenodeids,
        nodes_featureids=nodes_featureids,
        nodes_hitrates=nodes_hitrates,
        nodes_missing_value_tracks_true=nodes_missing_value_tracks_true,
        nodes_modes=nodes_modes,
        nodes_splits=nodes_splits,
        nodes_trueleafs=nodes_trueleafs,
        nodes_truenodeids=nodes_truenodeids,
        post_transform=post_transform,
        tree_roots=tree_roots,
    )(X)


# --------------------------------------------------------------------------- TreeEnsembleRegressor / -Classifier


def _opt(*candidates):
    """The first attribute of a FLOATS / *_as_tensor pair that is given."""
    for c in candidates:
        if c is not None and len(c):
            return np.asarray(c, np.float64).reshape(-1)
    return None


def legacy_forest(
    *,
    what,
    nodes_treeids,
    nodes_nodeids,
    nodes_featureids,
    nodes_modes,
    nodes_values,
    nodes_truenodeids,
    nodes_falsenodeids,
    nodes_missing_value_tracks_true,
    leaf_treeids,
    leaf_nodeids,
    leaf_ids,
    leaf_weights,
    n_targets,
    aggregate,
    transform,
    base_values,
) -> Forest:
    """Convert the (tree id, node id) encoding of TreeEnsembleRegressor/-Classifier into a Forest:
    LEAF nodes become leaves carrying the weights listed for them; the root of a tree is its first
    node that no other node points at."""
    if nodes_treeids is None or nodes_nodeids is None or nodes_modes is None:
        raise KernelError(f"{what}: nodes_treeids, nodes_nodeids and nodes_modes are required")
    tree = np.asarray(nodes_treeids, np.int64).reshape(-1)
    nid = np.asarray(nodes_nodeids, np.int64).reshape(-1)
    n = tree.size
    modes = list(nodes_modes)
    lists = {
        "nodes_nodeids": nid,
        "nodes_modes": modes,
        "nodes_featureids": nodes_featureids,
        "nodes_truenodeids": nodes_truenodeids,
        "nodes_falsenodeids": nodes_falsenodeids,
    }
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
    if (
        li.size != w.size
        or leaf_treeids is None
        or leaf_nodeids is None
        or len(leaf_treeids) != li.size
        or len(leaf_nodeids) != li.size
    ):
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
    return Forest(
        roots,
        np.asarray(nodes_featureids, np.int64)[interior],
        mode[interior],
        nodes_values[interior],
        slot[tt],
        slot[ff],
        None if miss is None else miss[interior],
        None,
        lw,
        lh,
        aggregate=aggregate,
        transform=transform,
        base_values=base_values,
        what=what,
    )


def tree_ensemble_regressor_prepare(
    *,
    aggregate_function="SUM",
    base_values=None,
    base_values_as_tensor=None,
    n_targets=None,
    nodes_falsenodeids=None,
    nodes_featureids=None,
    nodes_hitrates=None,
    nodes_hitrates_as_tensor=None,
    nodes_missing_value_tracks_true=None,
    nodes_modes=None,
    nodes_nodeids=None,
    nodes_treeids=None,
    nodes_truenodeids=None,
    nodes_values=None,
    nodes_values_as_tensor=None,
    post_transform="NONE",
    target_ids=None,
    target_nodeids=None,
    target_treeids=None,
    target_weights=None,
    target_weights_as_tensor=None,
) -> Forest:
    what = "TreeEnsembleRegressor"
    ids = np.asarray(target_ids if target_ids is not None else [], np.int64)
    nt = int(n_targets) if n_targets is not None else (int(ids.max()) + 1 if ids.size else 1)
    return legacy_forest(
        what=what,
        nodes_treeids=nodes_treeids,
        nodes_nodeids=nodes_nodeids,
        nodes_featureids=nodes_featureids,
        nodes_modes=nodes_modes,
        nodes_values=_opt(nodes_values_as_tensor, nodes_values),
        nodes_truenodeids=nodes_truenodeids,
        nodes_falsenodeids=nodes_falsenodeids,
        nodes_missing_value_tracks_true=nodes_missing_value_tracks_true,
        leaf_treeids=target_treeids,
        leaf_nodeids=target_nodeids,
        leaf_ids=target_ids,
        leaf_weights=_opt(target_weights_as_tensor, target_weights),
        n_targets=nt,
        aggregate=_enum(aggregate_function, AGGREGATES, what, "aggregate_function"),
        transform=_enum(post_transform, TRANSFORMS, what, "post_transform"),
        base_values=_opt(base_values_as_tensor, base_values),
    )


def _legacy_scores(forest: Forest, X) -> np.ndarray:
    x = _as_array(X)
    if x.dtype.kind not in "fiu":
        raise KernelError(f"{forest.what}: X must be a numeric tensor, got {x.dtype}")
    return post_transform_scores(forest.scores(x).astype(np.float32), forest.transform)


@op("onnx-ml:TreeEnsembleRegressor-1")
def tree_ensemble_regressor(
    X,
    /,
    *,
    aggregate_function="SUM",
    base_values=None,
    base_values_as_tensor=None,
    n_targets=None,
    nodes_falsenodeids=None,
    nodes_featureids=None,
    nodes_hitrates=None,
    nodes_hitrates_as_tensor=None,
    nodes_missing_value_tracks_true=None,
    nodes_modes=None,
    nodes_nodeids=None,
    nodes_treeids=None,
    nodes_truenodeids=None,
    nodes_values=None,
    nodes_values_as_tensor=None,
    post_transform="NONE",
    target_ids=None,
    target_nodeids=None,
    target_treeids=None,
    target_weights=None,
    target_weights_as_tensor=None,
):
    """Y[n, t] = post_transform(base_values[t] + aggregate over trees of the target_weights that the
    LEAF node reached by sample n lists for target t) (SUM, AVERAGE = sum / n_trees, MIN, MAX; a
    target no reached leaf feeds gets 0 before the base value).

    Nodes are (nodes_treeids, nodes_nodeids) with BRANCH_LEQ/LT/GTE/GT/EQ/NEQ or LEAF modes, children
    by node id within the tree; NaN goes to the true branch where nodes_missing_value_tracks_true is
    1. *_as_tensor attributes (TreeEnsembleRegressor-3) replace their float lists. X (N, F) float,
    double, int64 or int32; Y (N, n_targets) float32.
    """
    return _legacy_scores(
        tree_ensemble_regressor_prepare(
            aggregate_function=aggregate_function,
            base_values=base_values,
            base_values_as_tensor=base_values_as_tensor,
            n_targets=n_targets,
            nodes_falsenodeids=nodes_falsenodeids,
            nodes_featureids=nodes_featureids,
            nodes_missing_value_tracks_true=nodes_missing_value_tracks_true,
            nodes_modes=nodes_modes,
            nodes_nodeids=nodes_nodeids,
            nodes_treeids=nodes_treeids,
            nodes_truenodeids=nodes_truenodeids,
            nodes_values=nodes_values,
            nodes_values_as_tensor=nodes_values_as_tensor,
            post_transform=post_transform,
            target_ids=target_ids,
            target_nodeids=target_nodeids,
            target_treeids=target_treeids,
            target_weights=target_weights,
            target_weights_as_tensor=target_weights_as_tensor,
        ),
        X,
    )


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


def tree_ensemble_classifier_prepare(
    *,
    base_values=None,
    base_values_as_tensor=None,
    class_ids=None,
    class_nodeids=None,
    class_treeids=None,
    class_weights=None,
    class_weights_as_tensor=None,
    classlabels_int64s=None,
    classlabels_strings=None,
    nodes_falsenodeids=None,
    nodes_featureids=None,
    nodes_hitrates=None,
    nodes_hitrates_as_tensor=None,
    nodes_missing_value_tracks_true=None,
    nodes_modes=None,
    nodes_nodeids=None,
    nodes_treeids=None,
    nodes_truenodeids=None,
    nodes_values=None,
    nodes_values_as_tensor=None,
    post_transform="NONE",
) -> LegacyClassifier:
    what = "TreeEnsembleClassifier"
    if (classlabels_int64s is None) == (classlabels_strings is None):
        raise KernelError(f"{what}: exactly one of classlabels_int64s and classlabels_strings must be given")
    labels = (
        np.asarray(classlabels_int64s, np.int64)
        if classlabels_int64s is not None
        else np.asarray(list(classlabels_strings), dtype=object)
    )
    E = labels.size
    if E == 0:
        raise KernelError(f"{what}: no class labels")
    forest = legacy_forest(
        what=what,
        nodes_treeids=nodes_treeids,
        nodes_nodeids=nodes_nodeids,
        nodes_featureids=nodes_featureids,
        nodes_modes=nodes_modes,
        nodes_values=_opt(nodes_values_as_tensor, nodes_values),
        nodes_truenodeids=nodes_truenodeids,
        nodes_falsenodeids=nodes_falsenodeids,
        nodes_missing_value_tracks_true=nodes_missing_value_tracks_true,
        leaf_treeids=class_treeids,
        leaf_nodeids=class_nodeids,
        leaf_ids=class_ids,
        leaf_weights=_opt(class_weights_as_tensor, class_weights),
        n_targets=E,
        aggregate=1,
        transform=_enum(post_transform, TRANSFORMS, what, "post_transform"),
        base_values=_opt(base_values_as_tensor, base_values),
    )
    used = set(np.asarray(class_ids if class_ids is not None else [], np.int64).tolist())
    binary = 0
    if E == 2 and len(used) == 1:
        binary = 2 if used == {1} else 1  # which column carries the score
    return LegacyClassifier(forest, labels, binary)


@op("onnx-ml:TreeEnsembleClassifier-1")
def tree_ensemble_classifier(
    X,
    /,
    *,
    base_values=None,
    base_values_as_tensor=None,
    class_ids=None,
    class_nodeids=None,
    class_treeids=None,
    class_weights=None,
    class_weights_as_tensor=None,
    classlabels_int64s=None,
    classlabels_strings=None,
    nodes_falsenodeids=None,
    nodes_featureids=None,
    nodes_hitrates=None,
    nodes_hitrates_as_tensor=None,
    nodes_missing_value_tracks_true=None,
    nodes_modes=None,
    nodes_nodeids=None,
    nodes_treeids=None,
    nodes_truenodeids=None,
    nodes_values=None,
    nodes_values_as_tensor=None,
    post_transform="NONE",
):
    """Z[n, e] = post_transform(base_values[e] + sum over trees of the class_weights the LEAF reached
    by sample n lists for class e); Y[n] = classlabels[argmax of Z[n, e] over the classes some reached
    leaf votes for (every class when base_values are given or no class gets a vote)].

    Nodes as in TreeEnsembleRegressor. With two classes and every weight on one class, that
    score s is the second class's: the scores are (-s, s) before the transform (as onnxruntime).
    X (N, F) float, double, int64 or int32; Y (N,) int64 or string labels; Z (N, E) float32.
    """
    return tree_ensemble_classifier_prepare(
        base_values=base_values,
        base_values_as_tensor=base_values_as_tensor,
        class_ids=class_ids,
        class_nodeids=class_nodeids,
        class_treeids=class_treeids,
        class_weights=class_weights,
        class_weights_as_tensor=class_weights_as_tensor,
        classlabels_int64s=classlabels_int64s,
        classlabels_strings=classlabels_strings,
        nodes_falsenodeids=nodes_falsenodeids,
        nodes_featureids=nodes_featureids,
        nodes_missing_value_tracks_true=nodes_missing_value_tracks_true,
        nodes_modes=nodes_modes,
        nodes_nodeids=nodes_nodeids,
        nodes_treeids=nodes_treeids,
        nodes_truenodeids=nodes_truenodeids,
        nodes_values=nodes_values,
        nodes_values_as_tensor=nodes_values_as_tensor,
        post_transform=post_transform,
    )(X)
