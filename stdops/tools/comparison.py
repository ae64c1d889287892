"""Comparing any two runs value by value: stdops, stdops-unfused, onnxruntime or the ncnn wheel, on a model or
on its conversion to the other format (``stdops.convert``), matched by value (blob) name.

Each side reports every value it can: stdops through the plan's hook, onnxruntime through every node output
added as a graph output (typed by ONNX shape inference), the wheel by extracting every blob. An ONNX value
and an ncnn blob of the same name are compared across the batch axis ncnn does not have (the shapes must be
equal once leading axes of length 1 are dropped). Each value gets one relative error, max|a - b| / max|b|.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any

import numpy as np

from ..compare import ValueDiff, _diff, first_disagreement
from ..errors import StdopsError
from . import runtimes


@dataclasses.dataclass
class Side:
    runtime: str
    path: str
    weights: str | None = None
    converted_from: str | None = None

    @property
    def kind(self) -> str:
        from .. import model_kind

        return model_kind(self.path)

    def label(self) -> str:
        via = f" (converted from {self.converted_from})" if self.converted_from else ""
        return f"{self.runtime} on {self.path}{via}"


@dataclasses.dataclass
class Report:
    a: Side
    b: Side
    diffs: list[ValueDiff]
    atol: float
    rtol: float
    notes: list[str]
    stopped: bool = False  # --first-divergence cut the list at the first value outside tolerance

    @property
    def first(self) -> ValueDiff | None:
        return first_disagreement(self.diffs, self.atol, self.rtol)

    def to_json(self, inputs: dict[str, Any], made_up: list[str]) -> dict:
        def num(v: float) -> float | str | None:
            return None if v != v else (v if np.isfinite(v) else ("inf" if v > 0 else "-inf"))

        first = self.first
        return {
            "a": self.a.label(),
            "b": self.b.label(),
            "rule": "a value agrees when max|a - b| <= atol + rtol * max|b|; rel_err = max|a - b| / max|b|",
            "atol": self.atol,
            "rtol": self.rtol,
            "inputs": {
                k: {"shape": list(np.shape(v)), "dtype": str(np.asarray(v).dtype), "made_up": k in made_up}
                for k, v in inputs.items()
            },
            "agree": first is None,
            "first_divergence": None if first is None else {"node": first.node, "op": first.op, "value": first.name},
            "stopped_at_first_divergence": self.stopped,
            "notes": self.notes,
            "values": [
                {
                    "node": d.node,
                    "op": d.op,
                    "value": d.name,
                    "shape": list(d.shape),
                    "max_abs": num(d.max_abs),
                    "rel_err": num(d.rel_err),
                    "ok": d.ok(self.atol, self.rtol),
                    "note": d.note,
                }
                for d in self.diffs
            ],
        }


def parse_side(text: str, model: str, weights: str | None) -> Side:
    """``RUNTIME`` (on MODEL, or its conversion), ``PATH`` (stdops on another model) or ``RUNTIME:PATH``."""
    runtime, sep, rest = text.partition(":")
    if sep and runtime in runtimes.RUNTIMES and rest:
        return Side(runtime, rest)
    if text in runtimes.RUNTIMES:
        return Side(text, model, weights)
    if os.path.exists(text):
        return Side("stdops", text)
    raise StdopsError(
        f"--against {text!r}: expected a runtime ({', '.join(runtimes.RUNTIMES)}), a model file, or RUNTIME:FILE"
    )


def _strip(shape: tuple) -> tuple:
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return tuple(shape[k:])


def adapt_feeds(feeds: dict[str, Any], from_kind: str, to_kind: str) -> dict[str, Any]:
    """ONNX feeds carry the batch axis ncnn blobs do not have (and back)."""
    if from_kind == to_kind:
        return dict(feeds)
    out = {}
    for k, v in feeds.items():
        a = np.asarray(v)
        if to_kind == "ncnn":
            out[k] = a.reshape(a.shape[1:]) if a.ndim > 1 and a.shape[0] == 1 else a
        else:
            out[k] = a[np.newaxis]
    return out


def values(side: Side, feeds: dict[str, Any], hooked: bool = True, exact: bool = True) -> tuple[list, dict]:
    """([(name, node, op)] in the side's execution order, {name: value or a string saying why it is missing})."""
    kind = side.kind
    if side.runtime in ("stdops", "stdops-unfused"):
        from .. import load
        from ..ncnn import Net

        model = Net.load(side.path, side.weights) if kind == "ncnn" else load(side.path)
        if kind == "ncnn":
            producer = {t: (L.name, L.type) for L in model.layers for t in L.decl.tops}
            wanted = [t for L in model.layers if L.type != "Input" for t in L.decl.tops]
        else:
            producer = {o: (n.name, n.op) for n in model.plan.nodes for o in n.outputs}
            wanted = None
        got: dict[str, Any] = {}
        order: list = []
        if not hooked and side.runtime == "stdops":  # the plain path: only what it returns is observable
            got = model.run(feeds, outputs=wanted)
            return [(n, *producer.get(n, ("?", "?"))) for n in got], got

        def keep(node: str, name: str, v: Any) -> None:
            if producer.get(name, ("",))[0] == node:  # not a same-named value inside a subgraph body
                got[name] = v
                order.append((name, node, producer[name][1]))

        model.run(feeds, outputs=wanted, hook=keep)
        return order, got
    if side.runtime == "onnxruntime":
        return _onnxruntime_values(side.path, feeds)
    if side.runtime == "ncnn":
        from ..ncnn import Net

        net = Net.load(side.path, side.weights)
        producer = {t: (L.name, L.type) for L in net.layers for t in L.decl.tops}
        names = [t for L in net.layers if L.type != "Input" for t in L.decl.tops]
        got, why = runtimes.ncnn_wheel_values(side.path, side.weights, feeds, names, exact)
        if why:
            got = {n: why for n in names}
        return [(n, *producer[n]) for n in names], got
    raise StdopsError(f"unknown runtime {side.runtime!r}")


def _onnxruntime_values(path: str, feeds: dict[str, Any]) -> tuple[list, dict]:
    import onnx

    proto = onnx.load(path)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - inference is best effort
        inferred = proto
    typed = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    existing = {o.name for o in proto.graph.output}
    order = []
    for k, n in enumerate(proto.graph.node):
        for o in n.output:
            if o and o in typed:
                order.append((o, n.name or f"{n.op_type}_{k}", n.op_type))
                if o not in existing:
                    proto.graph.output.append(typed[o])
    got = runtimes.run_onnxruntime(proto.SerializeToString(), feeds)
    return [t for t in order if t[0] in got], got


def convert_for(side: Side, work: str, input_shapes: dict | None) -> Side:
    """The side itself, or (a runtime of the other format on this model) the model converted with
    stdops.convert into ``work``."""
    want = {"ncnn": "ncnn", "onnxruntime": "onnx"}.get(side.runtime)
    if want is None or want == side.kind:
        return side
    try:
        from ..convert import convert
    except ImportError:
        raise StdopsError(
            f"{side.runtime} does not run {side.kind.upper()} models, and this stdops has no converter "
            f"(stdops.convert): convert the model and give --against {side.runtime}:FILE"
        ) from None
    stem = os.path.splitext(os.path.basename(side.path))[0]
    dst = os.path.join(work, stem + (".param" if want == "ncnn" else ".onnx"))
    convert(side.path, dst, weights=side.weights, input_shapes=input_shapes)
    return Side(side.runtime, dst, None, converted_from=side.path)


def compare(
    a: Side,
    b: Side,
    feeds: dict[str, Any],
    atol: float,
    rtol: float,
    exact: bool = True,
    first_divergence: bool = False,
) -> Report:
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="stdops-compare-") as work:
        shapes = {k: tuple(np.shape(v))[1:] if a.kind == "onnx" else tuple(np.shape(v)) for k, v in feeds.items()}
        a2, b2 = convert_for(a, work, shapes), convert_for(b, work, shapes)
        for s in (a2, b2):
            if s.converted_from:
                notes.append(f"{s.runtime} runs the conversion of {s.converted_from} to {s.kind.upper()}")
        # stdops vs stdops-unfused: the stdops side runs the plain (fusable) path, the other keeps every step
        plain = {a2.runtime, b2.runtime} == {"stdops", "stdops-unfused"}
        a_in, a_out = declared(a2)
        b_in, b_out = declared(b2)
        b_feeds = adapt_feeds(feeds, a.kind, b2.kind)
        if set(b_feeds) != set(b_in) and len(b_feeds) == len(b_in):  # a converter that renamed the inputs
            b_feeds = {bn: b_feeds[an] for an, bn in zip(a_in, b_in)}
            notes.append("inputs matched by position: " + ", ".join(f"{x} = {y}" for x, y in zip(a_in, b_in)))
        order, ours = values(a2, adapt_feeds(feeds, a.kind, a2.kind), hooked=not plain, exact=exact)
        _, theirs = values(b2, b_feeds, hooked=not plain, exact=exact)
    pairs = [(name, name, node, op) for name, node, op in order if name in theirs and name in ours]
    if not pairs and len(a_out) == len(b_out):  # no common names: the outputs, in order
        producer = {name: (node, op) for name, node, op in order}
        pairs = [(x, y, *producer.get(x, ("?", "?"))) for x, y in zip(a_out, b_out) if x in ours and y in theirs]
        notes.append(
            "no value names in common: outputs matched by position: " + ", ".join(f"{x} = {y}" for x, y, _, _ in pairs)
        )
    diffs: list[ValueDiff] = []
    stopped = False
    for name, their_name, node, op in pairs:
        t = theirs[their_name]
        if isinstance(t, str):
            d = ValueDiff(node, op, name, np.shape(ours[name]), float("nan"), float("nan"), t)
            d.peer_failed = True
        else:
            x, y = np.asarray(ours[name]), np.asarray(t)
            if a2.kind != b2.kind and x.shape != y.shape and x.size == y.size and _strip(x.shape) == _strip(y.shape):
                x = x.reshape(y.shape)  # the batch axis of one side
            d = _diff(node, op, name if name == their_name else f"{name} = {their_name}", x, y)
        diffs.append(d)
        if first_divergence and not d.ok(atol, rtol):
            stopped = True
            break
    if not diffs:
        raise StdopsError(f"{a2.label()} and {b2.label()} have no value in common to compare (names or outputs)")
    return Report(a2, b2, diffs, atol, rtol, notes, stopped)


def declared(side: Side) -> tuple[list[str], list[str]]:
    """The model's input and output names, as stdops reads them."""
    from .. import load
    from ..ncnn import Net

    m = Net.load(side.path, side.weights) if side.kind == "ncnn" else load(side.path)
    return list(m.input_names), list(m.output_names)
