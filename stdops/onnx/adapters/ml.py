"""ONNX adapters for the ai.onnx.ml kernels: the attributes older versions refuse, and LabelEncoder-1
(classes_strings) mapped onto the LabelEncoder-2 table. (The look-up tables and tree ensembles are built
once, at load time, by the kernels' own ``prepare``.)"""

from __future__ import annotations

import numpy as np

from ...ops import ml
from ..opset import adapter

ML = "ai.onnx.ml"


@adapter("LabelEncoder", 2, domain=ML)
def _label_encoder(ctx):
    """LabelEncoder-2 and -4 (-4 adds the *_tensor attributes and NaN keys)."""
    if ctx.opset < 4:
        for a in ("keys_tensor", "values_tensor", "default_tensor"):
            if a in ctx.attrs:
                raise ctx.error(f"attribute {a} needs LabelEncoder-4 (model opset {ctx.opset})")
    return ctx.bind()  # the kernel's prepare builds the table


@adapter("LabelEncoder", 1, domain=ML)
def _label_encoder_v1(ctx):
    """LabelEncoder-1: strings -> their index in classes_strings (default_int64 when absent),
    integers -> classes_strings[i] (default_string when out of range)."""
    classes = tuple(ctx.attrs.pop("classes_strings", ()))
    d_int = int(ctx.attrs.pop("default_int64", -1))
    d_str = str(ctx.attrs.pop("default_string", "_Unused"))
    if ctx.attrs:
        raise ctx.error(
            f"unknown attribute(s) {', '.join(sorted(ctx.attrs))} (accepted: classes_strings, "
            f"default_int64, default_string)"
        )
    idx = tuple(range(len(classes)))
    to_int = ml.label_encoder_prepare(keys_strings=classes, values_int64s=idx, default_int64=d_int)
    to_str = ml.label_encoder_prepare(keys_int64s=idx, values_strings=classes, default_string=d_str)

    def label_encoder_v1(x):
        x = np.asarray(x)
        return to_int(x) if x.dtype.kind in "OUS" else to_str(x)

    return label_encoder_v1


_AS_TENSOR = (
    "base_values_as_tensor",
    "nodes_hitrates_as_tensor",
    "nodes_values_as_tensor",
    "target_weights_as_tensor",
    "class_weights_as_tensor",
)


def _no_tensor_attrs_before_3(ctx):
    if ctx.opset < 3:
        for a in _AS_TENSOR:
            if a in ctx.attrs:
                raise ctx.error(f"attribute {a} needs {ctx.op_type}-3 (model opset {ctx.opset})")


@adapter("TreeEnsembleRegressor", 1, domain=ML)
def _tree_ensemble_regressor(ctx):
    """TreeEnsembleRegressor-1 and -3 (-3 adds the *_as_tensor attributes); the forest is built here."""
    _no_tensor_attrs_before_3(ctx)
    return ctx.bind()


@adapter("TreeEnsembleClassifier", 1, domain=ML)
def _tree_ensemble_classifier(ctx):
    """TreeEnsembleClassifier-1 and -3 (-3 adds the *_as_tensor attributes); outputs (labels, scores)."""
    _no_tensor_attrs_before_3(ctx)
    return ctx.bind()
