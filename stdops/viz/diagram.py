"""Boxes and links of a model's picture, independent of the layout and the output format.

- ONNX: a box per node (op type, name, initializers as ``W 16x3x7x7``, a few attributes, output shapes from
  ONNX shape inference), a box per graph input and output; ``Constant`` nodes fold into their consumers.
- ncnn: a box per layer (type, name, the params that differ from their defaults, weight sizes, and blob
  shapes when the net can be run on declared or given input shapes).
- MDF: a box per node with rows for its input ports, parameters (values, expressions, time derivatives),
  functions, conditions and output ports; links go from an output-port row to an input-port row.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from ..errors import StdopsError

#: above this many nodes, repeated blocks are folded (unless told otherwise)
FOLD_ABOVE = 120
#: the most boxes a picture holds (after folding): beyond it the layout is unreadable and slow
MAX_BOXES = 1500
#: the longest text a box row shows (the full text is in the box's tooltip)
MAX_ROW = 48


class TooLargeToPicture(StdopsError):
    """A model whose picture would have more boxes than MAX_BOXES."""


@dataclasses.dataclass
class Row:
    text: str
    style: str = "line"  # "title", "name", "line", "section", "port"
    port: str | None = None  # MDF: the port this row is
    side: str | None = None  # "in" or "out"


@dataclasses.dataclass
class Box:
    id: str
    kind: str  # "op", "input", "output", "mdf", "fold"
    op: str  # type shown in the title (colour family)
    rows: list[Row]
    tooltip: str = ""
    signature: str = ""  # what must match for two boxes to be "the same" when folding
    group: str | None = None  # id of the repeat frame it belongs to


@dataclasses.dataclass
class Link:
    src: int
    dst: int
    src_port: str | None = None
    dst_port: str | None = None
    label: str = ""
    value: str = ""  # the value (blob) name it carries


@dataclasses.dataclass
class Frame:
    """A repeated block drawn once: its boxes and how many times it repeats."""

    id: str
    boxes: list[int]
    label: str


@dataclasses.dataclass
class Diagram:
    title: str
    direction: str  # "TB" (ONNX, ncnn) or "LR" (MDF: ports on the left and right sides)
    boxes: list[Box]
    links: list[Link]
    frames: list[Frame] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)

    def node_count(self) -> int:
        return sum(1 for b in self.boxes if b.kind in ("op", "mdf"))


def clip(text: str, n: int = MAX_ROW) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def dims(shape: Any) -> str:
    if shape is None:
        return "?"
    return "x".join("?" if d is None or d == "" else str(d) for d in shape) or "scalar"


def _attr_text(v: Any) -> str:
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, (int, np.integer)) for x in v):
            return "x".join(str(x) for x in v) if v else "[]"
        return "[" + ",".join(_attr_text(x) for x in v[:6]) + (",…" if len(v) > 6 else "") + "]"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, np.ndarray):
        return f"tensor {dims(v.shape)}" if v.size > 4 else np.array2string(v.ravel(), precision=4)
    return str(v)


def check_size(d: Diagram, path: str) -> None:
    if len(d.boxes) > MAX_BOXES:
        raise TooLargeToPicture(
            f"{path}: too large to picture: {len(d.boxes)} boxes after folding repeated blocks "
            f"(the limit is {MAX_BOXES}); stdops reduce or onnx.utils.extract_model can cut out a part"
        )


def build(
    path: str, feeds: dict[str, Any] | None = None, shapes: dict | None = None, seed: int = 0, lenient: bool = False
) -> Diagram:
    from .. import model_kind

    kind = model_kind(path)
    if kind == "onnx":
        return from_onnx(path)
    if kind == "ncnn":
        return from_ncnn(path, feeds, shapes, seed)
    from .mdf import from_mdf

    return from_mdf(path, lenient=lenient)


# --------------------------------------------------------------------------- ONNX
def from_onnx(path: str) -> Diagram:
    import onnx
    from onnx import helper, numpy_helper

    from ..onnx.model import _read_model

    proto, _ = _read_model(path)
    g = proto.graph
    try:
        inferred = onnx.shape_inference.infer_shapes(proto).graph
    except Exception:  # noqa: BLE001 - a model inference cannot type is still drawn, without shapes
        inferred = g
    shape_of: dict[str, str] = {}
    for vi in [*inferred.input, *inferred.value_info, *inferred.output]:
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is not None and tt.HasField("shape"):
            shape_of[vi.name] = dims(
                [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
            )
    inits = {t.name: tuple(t.dims) for t in g.initializer}
    consts: dict[str, str] = {}
    boxes: list[Box] = []
    links: list[Link] = []
    producer: dict[str, int] = {}
    for vi in g.input:
        if vi.name in inits:
            continue
        producer[vi.name] = len(boxes)
        boxes.append(
            Box(
                f"input:{vi.name}",
                "input",
                "input",
                [Row("input", "title"), Row(clip(vi.name), "name"), Row(shape_of.get(vi.name, "?"))],
                f"graph input {vi.name}: {shape_of.get(vi.name, '?')}",
                "input",
            )
        )
    for k, n in enumerate(g.node):
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1 and not n.input:
            try:
                v = numpy_helper.to_array(next(a.t for a in n.attribute if a.name == "value"))
                consts[n.output[0]] = _attr_text(v)
            except (StopIteration, Exception):  # noqa: BLE001 - value_float etc.: shown by value
                consts[n.output[0]] = _attr_text(helper.get_attribute_value(n.attribute[0])) if n.attribute else "?"
            continue
        op = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}"
        name = n.name or f"{n.op_type}_{k}"
        rows = [Row(op, "title"), Row(clip(name), "name")]
        schema = _schema(n, proto)
        weights = []
        for slot, i in enumerate(n.input):
            label = _input_label(schema, slot)
            if i in inits:
                weights.append(f"{label} {dims(inits[i])}")
            elif i in consts:
                weights.append(f"{label}={consts[i]}")
        if weights:
            rows.append(Row(clip("  ".join(weights))))
        attrs = []
        for a in n.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                attrs.append(f"{a.name}=<graph>")
                continue
            try:
                value = helper.get_attribute_value(a)
            except Exception:  # noqa: BLE001
                attrs.append(f"{a.name}=?")
                continue
            if not _is_default(schema, a.name, value):
                attrs.append(f"{a.name}={_attr_text(value)}")
        for text in _pack(attrs, 3):
            rows.append(Row(text))
        outs = [shape_of.get(o, "?") for o in n.output if o]
        rows.append(Row(clip("→ " + "  ".join(outs))))
        tip = "\n".join(
            [
                f"{op} {name}",
                *[f"in  {i}: {shape_of.get(i, dims(inits.get(i)))}" for i in n.input if i],
                *[f"out {o}: {shape_of.get(o, '?')}" for o in n.output if o],
                *attrs,
            ]
        )
        box_id = len(boxes)
        boxes.append(Box(f"node:{k}", "op", op, rows, tip, f"{op}|{'|'.join(weights)}|{'|'.join(attrs)}"))
        for slot, i in enumerate(n.input):
            if i in producer:
                links.append(Link(producer[i], box_id, value=i, label=str(slot)))
        for sub in _subgraph_reads(n):
            if sub in producer:
                links.append(Link(producer[sub], box_id, value=sub))
        for o in n.output:
            if o:
                producer[o] = box_id
    for vi in g.output:
        box_id = len(boxes)
        boxes.append(
            Box(
                f"output:{vi.name}",
                "output",
                "output",
                [Row("output", "title"), Row(clip(vi.name), "name"), Row(shape_of.get(vi.name, "?"))],
                f"graph output {vi.name}: {shape_of.get(vi.name, '?')}",
                "output",
            )
        )
        if vi.name in producer:
            links.append(Link(producer[vi.name], box_id, value=vi.name))
    return Diagram(f"{path} ({len(g.node)} nodes)", "TB", boxes, links)


def _schema(n: Any, proto: Any) -> Any:
    from onnx import defs

    version = next((o.version for o in proto.opset_import if o.domain == n.domain), None)
    try:
        return defs.get_schema(n.op_type, int(version or defs.onnx_opset_version()), n.domain)
    except Exception:  # noqa: BLE001 - a custom op: no schema
        return None


def _input_label(schema: Any, slot: int) -> str:
    if schema is None or not schema.inputs:
        return f"in{slot}"
    formal = schema.inputs[min(slot, len(schema.inputs) - 1)]
    return formal.name


def _is_default(schema: Any, name: str, value: Any) -> bool:
    """An attribute set to the value the op's schema defaults it to (``group=1``, ``dilations`` of ones)."""
    from onnx import helper

    if name == "dilations" and isinstance(value, (list, tuple)) and all(v == 1 for v in value):
        return True
    if name == "strides" and isinstance(value, (list, tuple)) and all(v == 1 for v in value):
        return True
    if name == "pads" and isinstance(value, (list, tuple)) and all(v == 0 for v in value):
        return True
    if schema is None or name not in schema.attributes:
        return False
    default = schema.attributes[name].default_value
    if default is None or not default.name:
        return False
    try:
        return helper.get_attribute_value(default) == value
    except Exception:  # noqa: BLE001
        return False


def _pack(items: list[str], max_rows: int) -> list[str]:
    """Short items share a row (up to MAX_ROW characters); at most ``max_rows`` rows, then a count."""
    rows: list[str] = []
    for k, item in enumerate(items):
        if rows and len(rows[-1]) + 2 + len(item) <= MAX_ROW:
            rows[-1] += "  " + item
        elif len(rows) < max_rows:
            rows.append(clip(item))
        else:
            rows.append(f"+{len(items) - k} more")
            break
    return rows


def _subgraph_reads(n: Any) -> list[str]:
    from ..tools.cut import _subgraph_reads as reads

    out: set[str] = set()
    for a in n.attribute:
        for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
            out |= reads(sub)
    return sorted(out)


# --------------------------------------------------------------------------- ncnn
def from_ncnn(path: str, feeds: dict | None = None, shapes: dict | None = None, seed: int = 0) -> Diagram:
    from ..ncnn import Net
    from ..ncnn.spec import Ref

    net = Net.load(path)
    notes: list[str] = []
    blob_shape: dict[str, str] = {}
    try:
        from ..tools.autoinputs import make_inputs

        made, _ = make_inputs(net, feeds, seed=seed, shapes=shapes)
        for k, v in made.items():
            blob_shape[k] = dims(np.shape(v))
        tops = [t for L in net.layers if L.type != "Input" for t in L.decl.tops]
        net.run(made, outputs=tops, hook=lambda node, name, v: blob_shape.__setitem__(name, dims(np.shape(v))))
    except StdopsError as e:
        notes.append(f"blob shapes not shown: {e}")
    boxes: list[Box] = []
    links: list[Link] = []
    producer: dict[str, int] = {}
    for L in net.layers:
        box_id = len(boxes)
        if L.type == "Input":
            rows = [
                Row("Input", "title"),
                Row(clip(L.name), "name"),
                Row("  ".join(blob_shape.get(t, "?") for t in L.decl.tops)),
            ]
            boxes.append(Box(f"layer:{L.name}", "input", "input", rows, f"Input {L.name}", "input"))
        else:
            rows = [Row(L.type, "title"), Row(clip(L.name), "name")]
            params = []
            spec = L.spec
            for p in spec.params if spec else ():
                v = getattr(L.params, p.name, None)
                default = p.default
                if isinstance(default, Ref):
                    default = getattr(L.params, default.name, None)
                same = v == default if not isinstance(v, np.ndarray) else False
                if isinstance(same, np.ndarray):
                    same = bool(same.all())
                if not same:
                    params.append(f"{p.name}={_attr_text(v)}")
            w = [f"{n} {a.size}" for n, a in L.weights.items()]
            if w:
                rows.append(Row(clip("W " + "  ".join(w))))
            for text in _pack(params, 3):
                rows.append(Row(text))
            if blob_shape:
                rows.append(Row(clip("→ " + "  ".join(blob_shape.get(t, "?") for t in L.decl.tops))))
            tip = "\n".join(
                [
                    f"{L.type} {L.name}",
                    *[f"bottom {b}: {blob_shape.get(b, '?')}" for b in L.decl.bottoms],
                    *[f"top {t}: {blob_shape.get(t, '?')}" for t in L.decl.tops],
                    *params,
                    *w,
                ]
            )
            boxes.append(Box(f"layer:{L.name}", "op", L.type, rows, tip, f"{L.type}|{'|'.join(params)}|{'|'.join(w)}"))
        for slot, b in enumerate(L.decl.bottoms):
            if b in producer:
                links.append(Link(producer[b], box_id, value=b, label=str(slot)))
        for t in L.decl.tops:
            producer[t] = box_id
    return Diagram(f"{path} ({len(net.layers)} layers)", "TB", boxes, links, notes=notes)


def text_size(rows: list[Row]) -> tuple[float, float]:
    """Width and height of a box, in pixels, for the monospace font the writers use."""
    width = max(len(r.text) * (CHAR_W_TITLE if r.style == "title" else CHAR_W) for r in rows)
    return math.ceil(width + 2 * PAD_X), math.ceil(len(rows) * LINE_H + 2 * PAD_Y)


#: font metrics of the writers (monospace: 0.6 em advance)
FONT_PX = 12
CHAR_W = 0.6 * FONT_PX
CHAR_W_TITLE = 0.6 * 13
LINE_H = 16
PAD_X = 8
PAD_Y = 5
