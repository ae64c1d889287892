"""The runtimes a model can be run in, by name, each returning the values asked for by name.

- ``stdops``: the plan as a user runs it (no hook: the path a load-time optimizer will fuse);
- ``stdops-unfused``: the same plan with a hook attached, which keeps every step as written (DESIGN.md,
  "Execution"); ``stdops`` runs the load-time optimizer's twin (stdops/optimize: folded constants, fused
  Conv / MatMul chains), so the two compare the fused steps against the written ones;
- ``onnxruntime``: ONNX models, graph optimizations off (every value as the file computes it, as in
  ``stdops compare``);
- ``ncnn``: the official ncnn wheel with exact-fp32 options, in a forked child (``stdops.compare``'s runner),
  so that a crash of the wheel (a segfault on a layer it mishandles) is a clear error, not the end of the command.

The peers are optional dependencies: a missing one is a clear StdopsError.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import StdopsError

RUNTIMES = ("stdops", "stdops-unfused", "onnxruntime", "ncnn")
#: the runtimes that can run each model kind
FOR_KIND = {"onnx": ("stdops", "stdops-unfused", "onnxruntime"), "ncnn": ("stdops", "stdops-unfused", "ncnn")}
#: seconds the ncnn wheel's child process may take
WHEEL_TIMEOUT = 600


class PeerError(StdopsError):
    """The peer runtime refused or failed to run a model."""


def _is_ncnn(path: str) -> bool:
    return path.lower().endswith((".param", ".param.bin"))


def run(
    runtime: str,
    path: str,
    feeds: dict[str, Any],
    outputs: Sequence[str] | None = None,
    weights: str | None = None,
) -> dict[str, Any]:
    """Run the model file at ``path`` in ``runtime``; returns ``outputs`` (default the model's outputs)."""
    if runtime in ("stdops", "stdops-unfused"):
        from .. import load
        from ..ncnn import Net

        model = Net.load(path, weights) if _is_ncnn(path) else load(path)
        hook = (lambda node, name, value: None) if runtime == "stdops-unfused" else None
        return model.run(feeds, outputs=list(outputs) if outputs is not None else None, hook=hook)
    if runtime == "onnxruntime":
        return run_onnxruntime(path, feeds, outputs)
    if runtime == "ncnn":
        return run_ncnn_wheel(path, weights, feeds, outputs)
    raise StdopsError(f"unknown runtime {runtime!r} (runtimes: {', '.join(RUNTIMES)})")


def onnxruntime_session(model: Any) -> Any:
    """An onnxruntime session (CPU, optimizations off) on a path or serialized ModelProto."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise StdopsError("running in onnxruntime needs onnxruntime (pip install onnxruntime)") from None
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - onnxruntime's own refusal
        where = model if isinstance(model, str) else "the model"
        raise PeerError(f"{where}: onnxruntime could not load it: {' '.join(str(e).split())}") from None


def run_onnxruntime(path: Any, feeds: dict[str, Any], outputs: Sequence[str] | None = None) -> dict[str, Any]:
    sess = onnxruntime_session(path)
    names = list(outputs) if outputs is not None else [o.name for o in sess.get_outputs()]
    try:
        return dict(zip(names, sess.run(names, dict(feeds))))
    except Exception as e:  # noqa: BLE001
        where = path if isinstance(path, str) else "the model"
        raise PeerError(f"{where}: onnxruntime could not run it: {' '.join(str(e).split())}") from None


def run_ncnn_wheel(
    param: str, weights: str | None, feeds: dict[str, Any], outputs: Sequence[str] | None = None, exact: bool = True
) -> dict[str, Any]:
    """The ncnn wheel on ``param`` (+ ``weights``) in a forked child (``stdops.compare``'s runner: a crash of the
    wheel is an error, not the end of the command); ``outputs`` default: the net's outputs. Inputs may be any
    blob (the Extractor accepts intermediate blobs)."""
    values, why = ncnn_wheel_values(param, weights, feeds, outputs, exact)
    if why:
        raise PeerError(f"{param}: {why}")
    failed = {n: v for n, v in values.items() if isinstance(v, str)}
    if failed:
        name, reason = next(iter(failed.items()))
        raise PeerError(f"{param}: blob {name!r}: {reason}")
    return values


def ncnn_wheel_values(
    param: str, weights: str | None, feeds: dict[str, Any], outputs: Sequence[str] | None = None, exact: bool = True
) -> tuple[dict[str, Any], str | None]:
    """({blob: array, or a string saying why the wheel did not give it}, why the whole run failed or None)."""
    try:
        import ncnn  # noqa: F401
    except ImportError:
        raise StdopsError("running in the ncnn wheel needs it (pip install ncnn)") from None
    from ..compare import EXACT_NCNN_OPTIONS, _forked, _int_input_blobs, _wheel_blobs
    from ..ncnn import Net

    net = Net.load(param, weights)
    names = list(outputs) if outputs is not None else list(net.output_names)
    binary = net.param_file.binary
    int_inputs = _int_input_blobs(net)
    wheel_feeds = [
        (int(k) if binary else k, np.ascontiguousarray(v, dtype=np.int32 if k in int_inputs else np.float32))
        for k, v in feeds.items()
    ]
    options = dict(EXACT_NCNN_OPTIONS) if exact else {}
    theirs, why = _forked(_wheel_blobs, param, net.bin_path, binary, wheel_feeds, names, options, timeout=WHEEL_TIMEOUT)
    if isinstance(theirs, str):
        theirs, why = None, theirs
    return (theirs or {}), why
