"""The static shapes of a graph's values, for the load-time optimizer (stdops/optimize): ONNX's own shape
inference (the spec's shape rules, ``onnx.shape_inference``) run on a copy of the graph that keeps only what
shapes depend on.

The copy has the nodes, the declared graph inputs, the small initializers (shape arguments: at most
``SMALL`` elements) as values and the large ones as typed inputs (their data is never copied), and no
declared intermediate or output shapes (a file's value_info is not trusted). Only fully static shapes (every
dimension a known size) are returned. The optimizer uses them as facts it checks at run time where they
change values (a folded Shape node has a guard), and as hints where they do not (which Winograd transform to
prepare). Inference that fails, or a graph of more than ``MAX_NODES`` nodes, gives no shapes.
"""

from __future__ import annotations

import onnx
from onnx import helper, shape_inference

SMALL = 4096
MAX_NODES = 20000
#: ops whose outputs the optimizer can use a static shape for: graphs without any are not inferred
_USERS = {"Shape", "Size", "Conv", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Gemm"}


def static_shapes(g: onnx.GraphProto, opsets: dict[str, int], functions: dict | None = None) -> dict:
    """value name -> static shape (a tuple of ints) for the values ONNX's shape inference determines."""
    if len(g.node) > MAX_NODES or not any(n.op_type in _USERS for n in g.node):
        return {}
    try:
        inferred = _inferred(g, opsets, functions)
    except Exception:  # noqa: BLE001 - no shapes (the optimizer works without them): a file's names that are
        return {}  # not UTF-8 fail in protobuf's string fields, its unusual graphs in onnx's inference
    shapes: dict = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output):
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None or not tt.HasField("shape"):
            continue
        dims = [int(d.dim_value) if d.HasField("dim_value") else 0 for d in tt.shape.dim]
        if all(d > 0 for d in dims):
            shapes[vi.name] = tuple(dims)
    return shapes


def _inferred(g: onnx.GraphProto, opsets: dict[str, int], functions: dict | None) -> onnx.ModelProto:
    """The skeleton model (module docstring) with its shapes inferred."""
    declared = {vi.name for vi in g.input}
    inputs = list(g.input)
    inits = []
    for t in g.initializer:
        n = 1
        for d in t.dims:
            n *= d
        if n <= SMALL and not t.data_location:
            inits.append(t)
        elif t.name not in declared:
            inputs.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    outputs = [onnx.ValueInfoProto(name=vi.name) for vi in g.output]
    skeleton = helper.make_graph([], g.name or "g", inputs, outputs, inits)
    skeleton.node.extend(g.node)
    model = helper.make_model(
        skeleton, opset_imports=[helper.make_opsetid("" if d == "" else d, v) for d, v in opsets.items()]
    )
    model.ir_version = max(model.ir_version, 7)
    if functions:
        model.functions.extend(functions.values())
    return shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=False)
