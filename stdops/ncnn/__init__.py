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


def _own_output_count(type_name: str, params: dict[int, Any], n_inputs: int) -> int:
    """How many tops the layer has when the caller does not say: its own count (ncnn-operators.txt), as
    a converter writes it: Slice one per slice (or per cut point + 1), Split two, LSTM the output plus
    h and c when given the initial states, GRU / RNN the output plus h, MultiHeadAttention / SDPA with a
    kv cache the output plus the cached k and v."""

    def length(v) -> int:
        if v is None or isinstance(v, (str, bytes)):
            return 0
        return 1 if np.isscalar(v) else len(np.asarray(v).ravel())

    if type_name == "Slice":
        n = length(params.get(0))
        return n if n else (length(params.get(2)) + 1 if length(params.get(2)) else 1)
    if type_name == "Split":
        return 2
    if type_name == "LSTM":
        return 3 if n_inputs == 3 else 1
    if type_name in ("GRU", "RNN"):
        return 2 if n_inputs == 2 else 1
    if type_name in ("MultiHeadAttention", "SDPA") and params.get(7, 0):
        return 3
    spec = LAYERS[type_name]
    return spec.n_outputs or 1


def run_layer(
    type_name: str,
    params: dict[int, Any],
    weights: Sequence[np.ndarray],
    inputs: Sequence[np.ndarray],
    num_outputs: int | None = None,
) -> list[np.ndarray]:
    """Run one ncnn layer: ``params`` as ``{id: int | float | list}`` (an int for a float param is
    accepted, a float for an int param is not), ``weights`` as arrays in the layer's load order,
    ``inputs`` as blobs in ncnn layout. Returns the output blobs: ``num_outputs`` of them, by default
    the layer's own count (see _own_output_count)."""
    spec = LAYERS.get(type_name)
    if spec is None:
        raise UnsupportedOp("ncnn", type_name, None)
    n_tops = num_outputs if num_outputs is not None else _own_output_count(type_name, params, len(inputs))
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
