"""What ``stdops info`` shows of an ONNX model, read from the protobuf alone (no kernels, no onnx package):
it starts in a fraction of a second and describes a model even when stdops cannot run it."""

from __future__ import annotations

import dataclasses
import math
import os

from .._files import read_bounded
from .proto import MAX_MODEL_BYTES, parse_model, pb2


@dataclasses.dataclass(frozen=True)
class DeclaredValue:
    """A graph input or output as the file declares it: element type name and dims (None: unknown)."""

    name: str
    kind: str  # "tensor", "sequence", "optional", "map" or "unknown"
    elem_type: str | None  # "float", "int64", ... (tensors)
    shape: tuple[int | str | None, ...] | None

    def __str__(self) -> str:
        if self.kind != "tensor":
            return f"{self.name}: {self.kind}"
        dims = "?" if self.shape is None else ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.elem_type or '?'} [{dims}]"


@dataclasses.dataclass(frozen=True)
class OnnxSummary:
    path: str
    ir_version: int
    producer: str
    opsets: dict[str, int]
    inputs: list[DeclaredValue]  # what a user feeds (initializers listed as inputs left out)
    outputs: list[DeclaredValue]
    node_count: int  # top-level nodes
    op_histogram: dict[str, int]  # "Conv" or "domain:Op" -> count, most frequent first
    parameter_count: int  # elements of all initializers
    function_count: int


def _declared(vi) -> DeclaredValue:
    tp = vi.type
    which = tp.WhichOneof("value")
    if which != "tensor_type":
        kind = {"sequence_type": "sequence", "optional_type": "optional", "map_type": "map"}.get(which, "unknown")
        return DeclaredValue(vi.name, kind, None, None)
    tt = tp.tensor_type
    names = pb2().TensorProto.DataType
    elem = names.Name(tt.elem_type).lower() if tt.elem_type in names.values() and tt.elem_type else None
    shape = None
    if tt.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return DeclaredValue(vi.name, "tensor", elem, shape)


def summarize(path: str | os.PathLike) -> OnnxSummary:
    p = os.fspath(path)
    m = parse_model(read_bounded(p, MAX_MODEL_BYTES, "protobuf's 2 GiB limit"), p)
    g = m.graph
    init_names = {t.name for t in g.initializer}
    hist: dict[str, int] = {}
    for n in g.node:
        key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}"
        hist[key] = hist.get(key, 0) + 1
    return OnnxSummary(
        path=p,
        ir_version=int(m.ir_version),
        producer=" ".join(s for s in (m.producer_name, m.producer_version) if s),
        opsets={("" if o.domain in ("", "ai.onnx") else o.domain): int(o.version) for o in m.opset_import},
        inputs=[_declared(vi) for vi in g.input if vi.name not in init_names],
        outputs=[_declared(vi) for vi in g.output],
        node_count=len(g.node),
        op_histogram=dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))),
        parameter_count=sum(math.prod(t.dims) for t in g.initializer),
        function_count=len(m.functions),
    )
