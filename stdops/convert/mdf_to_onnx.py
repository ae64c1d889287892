"""MDF -> ONNX: a stateless MDF graph as an ONNX graph.

Each MDF node's values (input ports, parameters, functions, output ports) become ONNX nodes (mdf_values.py):
``onnx::Op`` functions with their named arguments mapped back onto the op's input order and attributes taken
from ``args`` or same-named node parameters (the engine's rule, stdops/mdf/functions.py), the standard
functions with an ONNX form, expressions. An edge is its sender's value times its ``weight``; several edges
into a port combine by the port's ``reduce`` (add / multiply; overwrite would depend on edge order and is
refused). Input ports no edge feeds are the graph inputs; output ports no edge reads are its outputs (in the
order ONNX -> MDF recorded, when it did).

Refused, with the reason: stateful parameters (time derivatives, initial values, values that read
themselves), parameter conditions, scheduling conditions other than dataflow ones, cycles of edges, nested
graphs, functions with no ONNX form (ACT-R, drift diffusion).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .common import ConversionError
from .mdf_values import STANDARD_ONNX, Const, Multi, Refused, Tensor, ValueBuilder
from .onnx_build import DEFAULT_OPSET, GraphBuilder, check

#: scheduling conditions that only restate the dataflow (a node runs once its senders have)
_DATAFLOW_CONDITIONS = {"Always", "AllHaveRun", "All", "EveryNCalls", "JustRan"}


def _np_dtype(name: str | None, default: np.dtype) -> np.dtype:
    """The element type of a graph input: its recorded ``dtype`` or its port ``type`` (MDF's names)."""
    if not name:
        return default
    table = {"float": np.float32, "double": np.float64, "int": np.int64, "bool": np.bool_}
    return _onnx_element_type(table.get(name, name)) or default


def _onnx_element_type(name: Any) -> np.dtype | None:
    """The numpy dtype ``name`` names, if an ONNX tensor can hold it."""
    from onnx import helper

    try:
        dtype = np.dtype(name)
        helper.np_dtype_to_tensor_dtype(dtype)
    except (TypeError, ValueError, KeyError):
        return None
    return dtype


# What ONNX -> MDF recorded in ``metadata`` (the ONNX names, element types and shapes, the output counts) is
# a hint: a file edited by hand or written to harm can hold anything there, and a hint of the wrong form is
# no hint (the value gets the name and type it would have without metadata), never a crash.
def _hint_str(meta: Any, key: str) -> str | None:
    v = meta.get(key) if isinstance(meta, dict) else None
    return v if isinstance(v, str) and v else None


def _hint_records(meta: Any, key: str) -> list[dict[str, Any]]:
    """The graph's ``onnx_inputs`` / ``onnx_outputs``: records that name their port."""
    v = meta.get(key) if isinstance(meta, dict) else None
    return [d for d in v if isinstance(d, dict) and _hint_str(d, "port")] if isinstance(v, list) else []


def _hint_dtype(meta: Any) -> np.dtype | None:
    name = _hint_str(meta, "dtype")
    return _onnx_element_type(name) if name is not None and name != "string" else None


def _hint_shape(meta: Any) -> list[int] | None:
    v = meta.get("shape") if isinstance(meta, dict) else None
    ok = isinstance(v, list) and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in v)
    return v if ok else None


def mdf_file_to_onnx(
    path: str,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    opset: int | None = None,
    graph: str | None = None,
):
    from .. import mdf

    with warnings.catch_warnings():  # unknown fields are kept and do not matter here
        warnings.simplefilter("ignore", mdf.MdfWarning)
        model = mdf.load(path, check=False)  # the engine's checks are for running it; conversion checks its own
    return mdf_to_onnx(model, path, input_shapes, opset, graph)


def _check_conditions(cond: Any, fail) -> None:
    if cond is None:
        return
    for node, c in (cond.node_specific or {}).items():
        _check_condition(c, f"conditions.node_specific.{node}", fail)
    for scale, c in (cond.termination or {}).items():
        if c.type not in ("AllHaveRun", "Always"):
            raise fail(
                f"conditions.termination.{scale}", f"the {c.type} termination condition needs repeated evaluation"
            )


def _check_condition(c: Any, where: str, fail) -> None:
    if c.type not in _DATAFLOW_CONDITIONS:
        raise fail(where, f"the {c.type} condition needs time or call counts, which ONNX graphs do not have")
    if c.type == "EveryNCalls" and int(c.kwargs.get("n", 1)) != 1:
        raise fail(where, "EveryNCalls with n != 1 needs call counts, which ONNX graphs do not have")
    for v in c.kwargs.values():
        for sub in v if isinstance(v, list) else [v]:
            if hasattr(sub, "type") and hasattr(sub, "kwargs"):
                _check_condition(sub, where, fail)


def mdf_to_onnx(
    model: Any,
    path: str | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    opset: int | None = None,
    graph_id: str | None = None,
    float_dtype: Any = np.float64,
):
    """The ONNX ModelProto of one graph of an MDF Model (stdops.mdf.schema). Values with no element type
    (no port ``type``, no ``dtype`` metadata) are ``float_dtype``: float64 by default, since MDF's own
    arithmetic is on Python floats; ports typed ``float`` (as modeci-mdf's ONNX exports write) are float32."""

    def fail(where: str | None, reason: str) -> ConversionError:
        return ConversionError(path, where, "ONNX", reason)

    if graph_id is None and len(model.graphs) > 1:
        raise fail(
            "graphs", f"the model has {len(model.graphs)} graphs ({', '.join(model.graphs)}): pick one (--graph)"
        )
    graph = model.graph(graph_id)
    gw = f"graphs.{graph.id}"
    _check_conditions(graph.conditions, lambda w, r: fail(f"{gw}.{w}", r))
    version = opset or _int(model.onnx_opset_version) or DEFAULT_OPSET
    g = GraphBuilder(version)
    float_dtype = np.dtype(float_dtype)
    gmeta = graph.metadata or {}

    # ---------------------------------------------------------------- order, edges
    incoming: dict[str, list] = {n: [] for n in graph.nodes}
    outgoing: dict[str, list] = {n: [] for n in graph.nodes}
    for eid, e in graph.edges.items():
        for end in (e.sender, e.receiver):
            if end not in graph.nodes:
                raise fail(f"{gw}.edges.{eid}", f"names a node {end!r} the graph does not have")
        incoming[e.receiver].append(e)
        outgoing[e.sender].append(e)
    # dependency order, the file's order where it allows (a model written from ONNX keeps its node order)
    position = {n: k for k, n in enumerate(graph.nodes)}
    order, indeg = [], {n: len({e.sender for e in incoming[n]}) for n in graph.nodes}
    ready = sorted((n for n in graph.nodes if indeg[n] == 0), key=position.__getitem__)
    while ready:
        n = ready.pop(0)
        order.append(n)
        for s in {e.receiver for e in outgoing[n]}:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
        ready.sort(key=position.__getitem__)
    if len(order) != len(graph.nodes):
        cyc = [n for n in graph.nodes if n not in order]
        raise fail(
            f"{gw}.edges", f"edges form a cycle through {', '.join(cyc[:4])}: recurrence needs state across evaluations"
        )

    # ---------------------------------------------------------------- names of graph inputs / outputs
    recorded_in = {d["port"]: d for d in _hint_records(gmeta, "onnx_inputs")}
    recorded_out = _hint_records(gmeta, "onnx_outputs")
    port_names: dict[str, int] = {}
    for n in graph.nodes.values():
        for pid in n.output_ports:
            port_names[pid] = port_names.get(pid, 0) + 1
    inputs: dict[str, tuple[str, np.dtype, Any]] = {}
    port_values: dict[tuple[str, str], Tensor] = {}
    graph_outputs: list[tuple[str, Tensor]] = []

    for nid in order:
        node = graph.nodes[nid]
        nw = f"{gw}.nodes.{nid}"
        if getattr(node, "graphs", None):
            raise fail(nw, "a node holding nested graphs is not converted")
        for pid, prm in node.parameters.items():
            if prm.is_stateful():
                what = (
                    "a time derivative"
                    if prm.time_derivative is not None
                    else "an initial value"
                    if prm.default_initial_value is not None
                    else "a value that reads the parameter itself"
                )
                raise fail(
                    f"{nw}.parameters.{pid}",
                    f"a stateful parameter ({what}) needs state across evaluations, which ONNX graphs do not have",
                )
            if prm.conditions:
                raise fail(f"{nw}.parameters.{pid}", "parameter conditions change state between evaluations")
        g.prefix = f"{nid}/"
        values: dict[str, Any] = {}
        # input ports: edges, or graph inputs
        for pid, port in node.input_ports.items():
            es = [e for e in incoming[nid] if e.receiver_port == pid]
            if not es:
                name = _hint_str(port.metadata, "onnx_name") or _hint_str(recorded_in.get(pid), "name") or pid
                dtype = _np_dtype(_hint_str(recorded_in.get(pid), "dtype") or port.type, float_dtype)
                shape = (input_shapes or {}).get(pid, (input_shapes or {}).get(name, port.shape))
                inputs.setdefault(name, (name, dtype, None if shape is None else tuple(shape)))
                g.reserve([name])
                values[pid] = Tensor(name, inputs[name][1])
                continue
            parts = []
            for e in es:
                src = port_values.get((e.sender, e.sender_port))
                if src is None:
                    raise fail(f"{gw}.edges.{e.id}", f"the sender port {e.sender}.{e.sender_port} does not exist")
                w = (e.parameters or {}).get("weight", 1)
                if isinstance(w, str):
                    raise fail(f"{gw}.edges.{e.id}.parameters.weight", "an edge weight must be a number or an array")
                if not (np.ndim(w) == 0 and float(w) == 1.0):
                    c = g.const(np.asarray(w, src.dtype), dtype=src.dtype, stem="weight")
                    src = Tensor(g.op("Mul", [src.name, c]), src.dtype)
                parts.append(src)
            if len(parts) > 1:
                mode = port.reduce or "overwrite"
                if mode == "overwrite":
                    raise fail(
                        f"{nw}.input_ports.{pid}",
                        f"{len(parts)} edges overwrite one port: the result depends on their order",
                    )
                op = "Sum" if mode == "add" else "Mul"
                acc = parts[0]
                for p in parts[1:]:
                    acc = Tensor(g.op("Sum" if op == "Sum" else "Mul", [acc.name, p.name]), acc.dtype)
                parts = [acc]
            values[pid] = parts[0]
        start = len(g.nodes)
        for pid, t in _NodeTranslator(g, node, values, nw, fail, version, float_dtype).outputs():
            # the value keeps the name ONNX -> MDF recorded, or the port id when it is unique
            port = node.output_ports[pid]
            want = _hint_str(port.metadata, "onnx_name") or (pid if port_names[pid] == 1 else f"{nid}_{pid}")
            if t.name != want and want not in g.used and g.rename_output(t.name, want, since=start):
                t = Tensor(want, t.dtype)
            port_values[(nid, pid)] = t
        for pid, port in node.output_ports.items():
            if outgoing[nid] and any(e.sender_port == pid for e in outgoing[nid]):
                continue
            graph_outputs.append((pid, port_values[(nid, pid)]))
            # the name written: what ONNX -> MDF recorded, the port id, or node_port if ids repeat
            meta_name = _hint_str(port.metadata, "onnx_name")
            graph_outputs[-1] = (
                meta_name or (pid if port_names[pid] == 1 else f"{nid}_{pid}"),
                port_values[(nid, pid)],
            )
    g.prefix = ""
    if recorded_out:
        by_name = dict(graph_outputs)
        wanted = [_hint_str(d, "name") for d in recorded_out]
        named = [n for n in wanted if n is not None]
        if len(named) == len(wanted) and set(named) <= set(by_name):  # (unread optional outputs are not among them)
            graph_outputs = [(n, by_name[n]) for n in named]
    outs = []
    for name, t in graph_outputs:
        if t.name != name and not g.rename_output(t.name, name):
            g.op("Identity", [t.name], [name])
        outs.append((name, t.dtype, None))
    m = g.model(
        list(inputs.values()),
        outs,
        graph_name=graph.id,
        producer="stdops convert (from MDF)",
        doc=f"converted from MDF graph {graph.id!r} by stdops",
    )
    _output_types_from_inference(m, {name: d for d in recorded_out if (name := _hint_str(d, "name")) is not None})
    return check(m, path, f"{gw} converted to ONNX")


def _output_types_from_inference(m, recorded: dict[str, dict[str, Any]]) -> None:
    """Graph outputs get the element type and shape ONNX -> MDF recorded, else what shape inference says."""
    import onnx
    from onnx import helper

    try:
        inferred = onnx.shape_inference.infer_shapes(m)
    except Exception:  # noqa: BLE001 - the checker reports the model's problem
        return
    known = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for o in m.graph.output:
        rec = recorded.get(o.name)
        dtype, shape = _hint_dtype(rec), _hint_shape(rec)
        if dtype is not None and shape is not None:
            o.CopyFrom(helper.make_tensor_value_info(o.name, helper.np_dtype_to_tensor_dtype(dtype), shape))
        elif o.name in known:
            o.CopyFrom(known[o.name])


def _int(v: Any) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


class _NodeTranslator:
    """The values of one MDF node, resolved lazily by name (which also orders them by dependency)."""

    def __init__(self, g, node, values, where, fail, opset, float_dtype):
        self.g, self.node, self.where, self.fail, self.opset = g, node, where, fail, opset
        self.values = dict(values)
        self.pending: set[str] = set()
        self.known = set(node.input_ports) | set(node.parameters) | set(node.functions)
        self.vb = ValueBuilder(g, self.lookup, float_dtype)

    def lookup(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        if name in self.pending:
            raise Refused(f"{name!r} depends on itself")
        self.pending.add(name)
        try:
            if name in self.node.parameters:
                prm = self.node.parameters[name]
                v = self.call(prm.function, prm.args, f"parameters.{name}") if prm.function else self.constant(prm)
            elif name in self.node.functions:
                f = self.node.functions[name]
                if f.function:
                    v = self.call(f.function, f.args, f"functions.{name}")
                else:
                    v = self.vb.expression(f.value, self.known)
            else:
                raise Refused(f"unknown name {name!r}")
        finally:
            self.pending.discard(name)
        self.values[name] = v
        return v

    def constant(self, prm) -> Any:
        v = prm.value
        meta = prm.metadata or {}
        if isinstance(v, str):
            return self.vb.expression(v, self.known)
        dtype = _hint_dtype(meta)
        if dtype is not None:
            return Const(v, dtype, _hint_str(meta, "onnx_name"))
        return Const(v)

    def outputs(self) -> list[tuple[str, Tensor]]:
        """(port id, tensor) of every output port."""
        out = []
        for pid, port in self.node.output_ports.items():
            try:
                out.append((pid, self.vb.tensor(self.vb.expression(port.value, self.known))))
            except Refused as e:
                raise self.fail(f"{self.where}.output_ports.{pid}", str(e)) from None
        return out

    # ------------------------------------------------------------------ function calls
    def call(self, fname: Any, args: Mapping[str, Any] | None, where: str) -> Any:
        args = dict(args or {})
        try:
            local = dict(self.values)
            for a, expr in args.items():  # an arg sees the earlier ones by name
                local[a] = self.vb.expression(expr, self.known | set(local))
            if isinstance(fname, str) and fname.startswith("onnx::"):
                return self.onnx_call(fname[6:], args, local)
            if fname in STANDARD_ONNX:
                vals = []
                for a in STANDARD_ONNX[fname]:
                    if a in local and a in args:
                        vals.append(local[a])
                    elif a in self.known:
                        vals.append(self.lookup(a))
                    else:
                        raise Refused(f"{fname}: missing argument {a!r}")
                return self.vb.standard(fname, vals)
            raise Refused(f"the function {fname!r} has no ONNX form (ONNX has no such op and it is not a formula here)")
        except Refused as e:
            raise self.fail(f"{self.where}.{where}", str(e)) from None

    def onnx_call(self, op: str, args: dict, local: dict) -> Any:
        import onnx
        from onnx import helper, numpy_helper

        try:
            schema = onnx.defs.get_schema(op, self.opset, "")
        except Exception:  # noqa: BLE001
            raise Refused(f"onnx has no op {op} at opset {self.opset}") from None

        def source(name: str) -> Any:
            if name in args:
                return local[name]
            if name in self.known and name not in self.pending:
                return self.lookup(name)
            return None

        formal = schema.inputs
        vals: list[Any] = []
        for k, f in enumerate(formal):
            v = source(f.name)
            variadic = f.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
            if variadic and k == len(formal) - 1:
                items = v.items if isinstance(v, Multi) else ([] if v is None else [v])
                extra = sorted((a for a in args if a.startswith("arg_")), key=list(args).index)  # modeci-mdf's spelling
                items += [local[a] for a in extra]
                vals += [(f, it) for it in items]
            else:
                vals.append((f, v))
        while vals and vals[-1][1] is None:
            vals.pop()
        # element types: an input sharing a type variable with a tensor input takes its type
        var_dtype: dict[str, np.dtype] = {}
        for f, v in vals:
            if isinstance(v, Tensor):
                var_dtype.setdefault(f.type_str, v.dtype)
        names = []
        for f, v in vals:
            if v is None:
                names.append("")
                continue
            if isinstance(v, Const) and v.dtype is None:
                ts = f.type_str
                fixed = ts.startswith("tensor(") and ts.endswith(")")
                dtype = helper.tensor_dtype_to_np_dtype(_onnx_type(ts)) if fixed else var_dtype.get(ts)
                v = Const(v.value, dtype)
            names.append(self.vb.tensor(v).name)
        attrs = {}
        for aname, aschema in schema.attributes.items():
            if aschema.type == onnx.defs.OpSchema.AttrType.STRING:
                text = _string_attribute(aname, args, self.node)
                if text is not None:
                    attrs[aname] = text
                    continue
            v = source(aname)
            if v is None:
                continue
            if aschema.type in (onnx.defs.OpSchema.AttrType.GRAPH, onnx.defs.OpSchema.AttrType.GRAPHS):
                raise Refused(
                    f"attribute {aname!r} of onnx::{op} holds a subgraph; If / Loop / Scan bodies are not converted"
                )
            if not isinstance(v, Const):
                raise Refused(f"attribute {aname!r} of onnx::{op} must be a constant")
            attrs[aname] = _attribute(v, aschema.type, helper, numpy_helper)
        recorded = _int((self.node.metadata or {}).get("onnx_n_outputs"))  # a hint, as the names are
        n_out = recorded if recorded and 0 < recorded <= schema.max_output else max(1, _outputs_used(self.node, op))
        outs = self.g.op(op, names, n_out, name=self.node.id, **attrs)
        outs = [outs] if isinstance(outs, str) else outs
        dtypes = [self._out_dtype(schema, k, var_dtype) for k in range(len(outs))]
        ts_ = [Tensor(o, d) for o, d in zip(outs, dtypes)]
        return ts_[0] if len(ts_) == 1 else Multi(ts_)

    def _out_dtype(self, schema, k: int, var_dtype: dict) -> np.dtype:
        from onnx import helper

        outs = schema.outputs
        ts = outs[min(k, len(outs) - 1)].type_str if outs else "T"
        if ts.startswith("tensor("):
            return helper.tensor_dtype_to_np_dtype(_onnx_type(ts))
        return var_dtype.get(ts, self.vb.float_dtype)


def _string_attribute(name: str, args: dict, node) -> str | None:
    """A string attribute: a quoted literal, or (as modeci-mdf writes them) the bare word."""
    if name in args:
        v = args[name]
    elif name in node.parameters and node.parameters[name].value is not None:
        v = node.parameters[name].value
    else:
        return None
    if not isinstance(v, str):
        return None
    t = v.strip()
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    return t


def _outputs_used(node, op: str) -> int:
    """How many outputs of the node's function its output ports read (``f[k]``)."""
    import re

    n = 0
    for port in node.output_ports.values():
        for m in re.finditer(r"\[(\d+)\]\s*$", str(port.value)):
            n = max(n, int(m.group(1)) + 1)
    return n


def _onnx_type(type_str: str) -> int:
    from onnx import TensorProto

    name = type_str[len("tensor(") : -1].upper()
    return getattr(TensorProto, {"BOOL": "BOOL", "FLOAT": "FLOAT", "DOUBLE": "DOUBLE"}.get(name, name))


def _attribute(v: Const, atype, helper, numpy_helper) -> Any:
    """A constant as the attribute type the schema declares."""
    import onnx

    T = onnx.defs.OpSchema.AttrType
    x = v.value
    if atype == T.INT:
        return int(np.asarray(x).reshape(-1)[0])
    if atype == T.FLOAT:
        return float(np.asarray(x).reshape(-1)[0])
    if atype == T.STRING:
        return str(x)
    if atype == T.INTS:
        return [int(a) for a in np.asarray(x).reshape(-1)]
    if atype == T.FLOATS:
        return [float(a) for a in np.asarray(x).reshape(-1)]
    if atype == T.STRINGS:
        return [str(a) for a in np.asarray(x).reshape(-1)]
    if atype == T.TENSOR:
        dtype = v.dtype or (np.dtype(np.int64) if np.asarray(x).dtype.kind in "iu" else np.dtype(np.float32))
        return numpy_helper.from_array(np.asarray(x, dtype=dtype))
    raise Refused(f"attribute type {atype} is not converted")
