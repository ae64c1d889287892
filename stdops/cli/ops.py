"""stdops ops: the operator library, and the ncnn layer reference (param ids, names, defaults)."""

from __future__ import annotations

import argparse
from typing import Any

from ._base import UsageError, did_you_mean, print_table

LOADS_MODELS = False  # no --max-* limits
HELP = "every kernel and the front ends that bind it; the ncnn layer reference"
FRONT_ENDS = ("onnx", "onnx-ml", "onnx-training", "onnx-preview", "ncnn", "mdf")


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "ops",
        help=HELP,
        description="Every registered kernel, what it implements and which front ends bind it; with -f ncnn "
        "the ncnn layers with their param ids, names and defaults; --layer X: one layer in ncnn's load order.",
    )
    p.add_argument("-f", "--front-end", choices=FRONT_ENDS, help="only what this front end binds")
    p.add_argument("--layer", metavar="NAME", help="ncnn: one layer's params and weights")
    p.set_defaults(func=main)
    return p


def main(a: argparse.Namespace) -> int:
    from ..ncnn.spec import LAYERS
    from ..onnx import opset
    from ..ops import OPS

    if a.layer:
        if a.front_end not in (None, "ncnn"):
            raise UsageError(f"--layer describes an ncnn layer; it does not go with --front-end {a.front_end}")
        _ncnn_layer(LAYERS, a.layer)
        return 0
    if a.front_end == "ncnn":
        _ncnn_layers(LAYERS)
        return 0
    from ..ops._registry import uses

    opset.bound_ops()  # the ONNX tables complete (the adapters record their kernels' uses)
    rows = []
    shared = 0
    for name, d in sorted(OPS.items()):
        u = uses(d)
        if a.front_end and not _binds(a.front_end, d, u):
            continue
        shared += len(u) >= 2
        rows.append((name, _versions(u.get("onnx", ())), " ".join(u.get("ncnn", ())), " ".join(u.get("mdf", ()))))
    print_table("stdops kernels and what binds them", ("kernel", "ONNX ops", "ncnn layers", "MDF functions"), rows)
    bound = opset.bound_ops()
    print(
        f"{len(rows)} kernels, {shared} of them bound by two or more front ends; ONNX binds {len(bound)} op types "
        f"({sum(len(v) for v in bound.values())} versioned entries incl. adapters); ncnn declares {len(LAYERS)} "
        "layers (stdops ops -f ncnn); MDF also calls every ONNX kernel as onnx::<Op>"
    )
    return 0


def _binds(front_end: str, d: Any, u: dict) -> bool:
    """Whether ``front_end`` (onnx, onnx-ml, ..., ncnn, mdf) reaches the kernel."""
    if front_end.startswith("onnx-"):
        return any(s.startswith(front_end + ":") for s in d.specs)
    return front_end in u


def _versions(ops: Any) -> str:
    """["ReduceSum-1", "ReduceSum-13"] -> "ReduceSum-1,13"."""
    by_op: dict[str, list[str]] = {}
    for o in ops:
        name, _, v = o.rpartition("-")
        if not v.isdigit():
            name, v = o, ""
        by_op.setdefault(name, []).append(v)
    return " ".join(
        name + ("-" + ",".join(sorted((v for v in vs if v), key=int)) if any(vs) else "") for name, vs in by_op.items()
    )


def _default(p: Any) -> str:
    from ..ncnn.spec import Ref

    return f"= {p.default.name}" if isinstance(p.default, Ref) else repr(p.default)


def _ncnn_layer(layers: dict, name: str) -> None:
    from ..ncnn.spec import resolve_params

    spec = layers.get(name)
    if spec is None:
        raise UsageError(f"no ncnn layer named {name!r}{did_you_mean(name, sorted(layers))}")
    print(f"{name}: {spec.doc}")
    print(f"kernels: {' '.join(spec.kernels) or 'none'}")
    if spec.ncnn_only:
        print(f"ncnn's own math: {spec.ncnn_only}")
    by_name = {p.name: p for p in spec.params}
    rows = [(p.id, p.name, p.resolved_kind(by_name), _default(p)) for p in spec.params]
    print_table("params, in ncnn's load order", ("id", "name", "type", "default"), rows)
    try:
        ws = list(spec.weights(resolve_params(spec, {}, name, None)))
        listed = ", ".join(f"{w.name} ({w.size}, {'tagged' if w.tagged else 'raw'})" for w in ws)
        print("weights with default params: " + (listed or "none"))
    except Exception:  # noqa: BLE001 - some layers need params to size their weights
        print("weights: sized by the params")


def _ncnn_layers(layers: dict) -> None:
    rows = []
    for name, spec in sorted(layers.items()):
        params = " ".join(f"{p.id}={p.name}" for p in spec.params)
        arity = f"{'*' if spec.n_inputs is None else spec.n_inputs}/{'*' if spec.n_outputs is None else spec.n_outputs}"
        kernels = " ".join(spec.kernels) + (" (+ ncnn's own math)" if spec.ncnn_only and spec.kernels else "")
        rows.append((name, arity, kernels or "(ncnn's own: see --layer)", params or "-"))
    print_table(
        "ncnn layers and the kernels they run on", ("layer", "bottoms/tops", "kernels", "params (id=name)"), rows
    )
    own = sum(1 for s in layers.values() if s.ncnn_only)
    print(f"{len(layers)} layers; {own} compute some of their math themselves (ncnn-only, with the reason in --layer)")
