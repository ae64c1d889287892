"""The ncnn front end: ``Net.load(param, bin)``, ``Extractor``, and ``run_layer`` for one layer at a time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ModelFormatError, UnsupportedOp
from .net import Extractor, Layer, Net  # noqa: F401
from .spec import LAYERS, resolve_params


def load(param_path, bin_path=None) -> Net:
    return Net.load(param_path, bin_path)


def run_layer(
    type_name: str,
    params: dict[int, Any],
    weights: Sequence[np.ndarray],
    inputs: Sequence[np.ndarray],
    num_outputs: int | None = None,
) -> list[np.ndarray]:
    """Run one ncnn layer: ``params`` as ``{id: int | float | list}`` (an int for a float param is
    accepted, a float for an int param is not), ``weights`` as arrays in the layer's load order,
    ``inputs`` as blobs in ncnn layout. Returns the output blobs."""
    spec = LAYERS.get(type_name)
    if spec is None:
        raise UnsupportedOp("ncnn", type_name, None)
    n_tops = num_outputs if num_outputs is not None else (spec.n_outputs or 1)
    where = f"layer {type_name}"
    p = resolve_params(spec, dict(params), where, None, len(inputs), n_tops)
    declared = list(spec.weights(p))
    if len(weights) != len(declared):
        raise ModelFormatError(
            None,
            where,
            f"{type_name} with these params loads {len(declared)} weights "
            f"({', '.join(w.name for w in declared) or 'none'}), got {len(weights)}",
        )
    wd = {}
    for w, arr in zip(declared, weights):
        a = np.asarray(arr)
        a = a.ravel() if a.dtype == np.int8 else np.ascontiguousarray(a, dtype=np.float32).ravel()
        if a.size != int(w.size):
            raise ModelFormatError(None, where, f"weight {w.name!r} has {a.size} elements, the params say {w.size}")
        wd[w.name] = a
    fn = spec.build(p, wd)
    out = fn(*[np.ascontiguousarray(x) for x in inputs])
    if isinstance(out, tuple):
        return list(out[:n_tops])
    return [out]
