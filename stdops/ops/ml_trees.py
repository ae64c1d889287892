"""ai.onnx.ml TreeEnsemble-5 on a level-by-level engine, :class:`Forest`, which the older
TreeEnsembleRegressor / TreeEnsembleClassifier (:mod:`stdops.ops.ml_trees_legacy`) run on too.

The forest is built once from the node attributes at load time (the kernel's ``prepare``; for direct
calls, on every call). The post transforms are shared with the linear models and SVMs
(:mod:`stdops.ops.ml_linear`).
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import from_attributes, op
from .dtypes import compute_dtype
from .ml import _as_array
from .ml_linear import post_transform_scores

# node comparison modes (TreeEnsemble-5 numbering; the older string modes map onto them)
LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
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
        wt = compute_dtype(x.dtype)
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


@op("onnx-ml:TreeEnsemble-5", prepare=from_attributes(tree_ensemble_prepare))
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
