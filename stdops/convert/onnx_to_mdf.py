"""ONNX -> MDF: one MDF node per ONNX node, in the form modeci-mdf's ONNX interface writes.

A node ``/A/Mul`` becomes an MDF node with
- a parameter per attribute (its value; a string as a quoted literal, ``"'constant'"``) and per constant
  input (an initializer: its values as a nested list), named by the attribute / the schema's input name;
- a parameter ``/A/Mul`` with ``function: onnx::Mul`` and ``args`` mapping each schema input name to the
  input port or parameter that feeds it (a variadic input: a list expression ``[p0, p1, ...]``);
- an input port per other input (id: the value name with ``.``, ``/`` and ``::`` made ``_``; its shape and
  type), an output port per output whose value is the function parameter (``name[k]`` for output k of
  a multi-output op);
- an edge from the producing node's output port to each consumer's input port.

What MDF has no field for is kept in ``metadata`` so that MDF -> ONNX gives the same model back: the
element type and shape of every constant, the ONNX names of renamed values, the graph's inputs and
outputs in order, the opset. Subgraph attributes (If / Loop / Scan bodies) and ops outside the default
domain are refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .common import ConversionError


def port_id(name: str) -> str:
    """An ONNX value name as an MDF port id (modeci-mdf's rule: ``.``, ``/``, ``::`` -> ``_``, a leading
    digit gets ``_`` in front)."""
    new = name.replace(".", "_").replace("/", "_").replace("::", "_")
    if not new or new[0].isdigit():
        new = "_" + new
    return new


def _plain_array(a: np.ndarray) -> tuple[Any, dict]:
    """A tensor as JSON data (nested lists; float values exact as float64 text) and its metadata."""
    meta = {"dtype": a.dtype.name if a.dtype.name != "bool" else "bool", "shape": list(a.shape)}
    if a.dtype.kind == "f":
        data = a.astype(np.float64).tolist()
    elif a.dtype.kind in "iub":
        data = a.tolist()
    elif a.dtype.kind in "OSU":
        data = [x.decode() if isinstance(x, bytes) else str(x) for x in a.reshape(-1)]
        meta["dtype"] = "string"
    else:
        raise ValueError(f"element type {a.dtype} has no MDF form")
    return data, meta


def onnx_to_mdf(model, path: str | None = None):
    """The MDF Model (stdops.mdf.schema) of an ONNX ModelProto."""
    import onnx
    from onnx import helper, numpy_helper

    from ..mdf.schema import MDF_FORMAT, Edge, Graph, InputPort, Model, Node, OutputPort, Parameter

    def fail(where: str | None, reason: str) -> ConversionError:
        return ConversionError(path, where, "MDF", reason)

    opsets = {o.domain: o.version for o in model.opset_import}
    opset = opsets.get("", opsets.get("ai.onnx"))
    if opset is None:
        raise fail(None, "the model imports no default-domain opset")
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - shapes are optional information
        inferred = model
    g = model.graph
    types: dict[str, tuple[str, list]] = {}
    for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        tt = vi.type.tensor_type
        if tt.elem_type:
            declared = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim]
            types[vi.name] = (helper.tensor_dtype_to_np_dtype(tt.elem_type).name, declared)
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    graph_inputs = [i.name for i in g.input if i.name not in inits]

    # port ids, unique per value
    ports: dict[str, str] = {}
    taken: set[str] = set()

    def port_of(value: str) -> str:
        if value not in ports:
            pid, k = port_id(value), 1
            base = pid
            while pid in taken:
                pid, k = f"{base}_{k}", k + 1
            taken.add(pid)
            ports[value] = pid
        return ports[value]

    node_ids: set[str] = set()
    producer: dict[str, tuple[str, str]] = {}  # value -> (node id, port id)
    mdf_nodes: dict[str, Any] = {}
    consumers: list[tuple[str, str, str]] = []  # (value, node id, port id)
    for k, n in enumerate(g.node):
        where = f"node {n.name or k!r} ({n.op_type})"
        if n.domain not in ("", "ai.onnx"):
            raise fail(where, f"op {n.domain}:{n.op_type} is outside the default ONNX domain")
        try:
            schema = onnx.defs.get_schema(n.op_type, opset, "")
        except Exception:  # noqa: BLE001 - onnx raises SchemaError
            raise fail(where, f"onnx has no schema for {n.op_type} at opset {opset}") from None
        nid, j = n.name or f"{n.op_type}_{k}", 1
        base = nid
        while nid in node_ids:
            nid, j = f"{base}_{j}", j + 1
        node_ids.add(nid)
        params: dict[str, Parameter] = {}
        for a in n.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                raise fail(
                    where, f"attribute {a.name!r} holds a subgraph; subgraphs (If / Loop / Scan) are not converted"
                )
            v = helper.get_attribute_value(a)
            meta = {"onnx_attribute": onnx.AttributeProto.AttributeType.Name(a.type)}
            if a.type == onnx.AttributeProto.TENSOR:
                v, tmeta = _plain_array(numpy_helper.to_array(v))
                meta.update(tmeta)
            elif a.type == onnx.AttributeProto.STRING:
                v = repr(v.decode())  # a string literal: an MDF value that is a bare word reads as a name
            elif a.type == onnx.AttributeProto.STRINGS:
                v = [s.decode() for s in v]
            elif a.type in (onnx.AttributeProto.SPARSE_TENSOR, onnx.AttributeProto.TYPE_PROTO):
                raise fail(where, f"attribute {a.name!r} of type {meta['onnx_attribute']} has no MDF form")
            elif isinstance(v, tuple):
                v = list(v)
            params[a.name] = Parameter(id=a.name, value=v, metadata=meta)
        args: dict[str, Any] = {}
        in_ports: dict[str, InputPort] = {}
        formal = [i.name for i in schema.inputs]
        variadic = bool(schema.inputs) and schema.inputs[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic
        var_items: list[str] = []
        for i, value in enumerate(n.input):
            if i >= len(formal) and not variadic:
                raise fail(where, f"input {i} is beyond the schema's {len(formal)} inputs")
            arg = formal[min(i, len(formal) - 1)]
            if value == "":
                continue
            if value in inits:
                pname, q = arg if i < len(formal) else f"{arg}_{i}", 1
                basep = pname
                while pname in params or pname == nid:
                    pname, q = f"{basep}_{q}", q + 1
                data, meta = _plain_array(inits[value])
                meta["onnx_name"] = value
                params[pname] = Parameter(id=pname, value=data, metadata=meta)
                ref = pname
            else:
                pid = port_of(value)
                dtype, dims = types.get(value, (None, None))
                port_meta = {"onnx_name": value} if pid != value else None
                shape = tuple(dims) if dims is not None and all(isinstance(d, int) for d in dims) else None
                in_ports[pid] = InputPort(id=pid, shape=shape, type=_type_name(dtype), metadata=port_meta)
                consumers.append((value, nid, pid))
                ref = pid
            if variadic and i >= len(formal) - 1:
                var_items.append(ref)
            else:
                args[arg] = ref
        if var_items:
            args[formal[-1]] = "[" + ", ".join(var_items) + "]"
        fid = nid if nid not in params else nid + "_function"
        params[fid] = Parameter(id=fid, function=f"onnx::{n.op_type}", args=args)
        outs: dict[str, OutputPort] = {}
        real = [o for o in n.output]
        for i, value in enumerate(real):
            if value == "":
                continue
            pid = port_of(value)
            dtype, dims = types.get(value, (None, None))
            meta = {"onnx_name": value, "onnx_output_index": i} if pid != value else {"onnx_output_index": i}
            expr = fid if len(real) == 1 else f"{fid}[{i}]"
            outs[pid] = OutputPort(id=pid, value=expr, type=_type_name(dtype), metadata=meta)
            producer[value] = (nid, pid)
        mdf_nodes[nid] = Node(
            id=nid,
            input_ports=in_ports,
            parameters=params,
            output_ports=outs,
            metadata={"onnx_op_type": n.op_type, "onnx_n_outputs": len(real)},
        )
    edges: dict[str, Edge] = {}
    for value, nid, pid in consumers:
        if value in producer:
            src, sport = producer[value]
            eid = f"{src}.{sport}_{nid}.{pid}"
            edges[eid] = Edge(id=eid, sender=src, receiver=nid, sender_port=sport, receiver_port=pid)
        elif value not in graph_inputs:
            raise fail(f"value {value!r}", "is read but neither produced, a graph input nor an initializer")
    for o in g.output:
        if o.name not in producer:
            raise fail(f"output {o.name!r}", "is not produced by a node (an input or initializer as output)")

    def io(values):
        return [
            {
                "name": v,
                "port": ports.get(v, port_id(v)),
                "dtype": types.get(v, (None,))[0],
                "shape": types.get(v, (None, None))[1],
            }
            for v in values
        ]

    graph = Graph(
        id=g.name or "main_graph",
        nodes=mdf_nodes,
        edges=edges,
        metadata={"onnx_inputs": io(graph_inputs), "onnx_outputs": io([o.name for o in g.output])},
    )
    return Model(
        id="ONNX Model",
        format=MDF_FORMAT,
        generating_application="stdops convert",
        onnx_opset_version=int(opset),
        graphs={graph.id: graph},
        metadata={"onnx_ir_version": int(model.ir_version), "onnx_producer": model.producer_name or None},
    )


def _type_name(dtype: str | None) -> str | None:
    """The MDF port type of an ONNX element type (modeci-mdf writes ``float``)."""
    if dtype is None:
        return None
    return {"float32": "float", "float64": "double"}.get(dtype, dtype)
