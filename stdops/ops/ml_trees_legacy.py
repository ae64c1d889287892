"""ai.onnx.ml TreeEnsembleRegressor and TreeEnsembleClassifier (opsets 1 and 3) on the level-by-level
engine of :mod:`stdops.ops.ml_trees`: their node attributes are translated into a :class:`Forest`.
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ._registry import from_attributes, op
from .ml import _as_array
from .ml_linear import TRANSFORMS, _enum, post_transform_scores
from .ml_trees import AGGREGATES, EQ, GT, GTE, LEQ, LT, MEMBER, NEQ, Forest

# --------------------------------------------------------------------------- TreeEnsembleRegressor / -Classifier

# the string modes of the older ensembles, onto TreeEnsemble-5's numbering
_OLD_MODES = {
    "BRANCH_LEQ": LEQ,
    "BRANCH_LT": LT,
    "BRANCH_GTE": GTE,
    "BRANCH_GT": GT,
    "BRANCH_EQ": EQ,
    "BRANCH_NEQ": NEQ,
    "BRANCH_MEMBER": MEMBER,
}


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


def _regressor_step(**attrs):
    """The TreeEnsembleRegressor step on the forest built once from the attributes."""
    forest = tree_ensemble_regressor_prepare(**attrs)
    return lambda X: _legacy_scores(forest, X)


@op("onnx-ml:TreeEnsembleRegressor-1", prepare=from_attributes(_regressor_step))
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
    return LegacyClassifier(forest, labels, binary)  # type: ignore[arg-type]  # 0, 1 or 2: which column


@op("onnx-ml:TreeEnsembleClassifier-1", prepare=from_attributes(tree_ensemble_classifier_prepare))
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
