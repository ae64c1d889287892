"""Loading an ONNX model into a compiled :class:`~stdops.graph.Plan`.

Everything that can be decided at load time is: node binding (opset.resolve), attribute conversion,
Constant nodes, adapters' precomputation. A run validates the feeds and calls the plan.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from .. import limits
from ..errors import InputError, ModelFormatError, ResourceLimitError, StdopsError, UnsupportedOp
from ..graph import Hook, Node, Plan
from ..ops.bind import Bound
from . import adapters, control, gradient  # noqa: F401  (version adapters, If/Loop/Scan, Gradient)
from .functions import MAX_DEPTH, function_opsets, inline, schema_function
from .opset import BindContext, onnx_dtype, resolve

_A = onnx.AttributeProto

#: the largest .onnx file we read into memory (protobuf's own limit is 2 GiB)
MAX_MODEL_BYTES = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class ValueInfo:
    """A graph input or output as declared in the model."""

    name: str
    kind: str  # "tensor", "sequence", "optional", "map" or "unknown"
    dtype: np.dtype | None  # element type of a tensor (or of a sequence's tensors)
    shape: tuple[int | str | None, ...] | None  # None: rank unknown; a str: a symbolic dim

    def __str__(self) -> str:
        if self.kind != "tensor":
            return f"{self.name}: {self.kind}"
        dims = "?" if self.shape is None else "x".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype} [{dims}]"


def _value_info(vi: onnx.ValueInfoProto, path: str | None = None, where: str = "graph value") -> ValueInfo:
    tp = vi.type
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        tt = tp.tensor_type
        try:
            dtype = onnx_dtype(tt.elem_type) if tt.elem_type else None
        except ModelFormatError as e:
            raise ModelFormatError(path, f"{where} {vi.name!r}", e.detail) from None
        shape = None
        if tt.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
        return ValueInfo(vi.name, "tensor", dtype, shape)
    kind = {"sequence_type": "sequence", "optional_type": "optional", "map_type": "map"}.get(which, "unknown")
    return ValueInfo(vi.name, kind, None, None)


def convert_attribute(a: onnx.AttributeProto, where: str, path: str | None) -> Any:
    """AttributeProto -> a Python value (see docs/kernels.md for the mapping)."""
    t = a.type
    try:
        if t == _A.FLOAT:
            return float(a.f)
        if t == _A.INT:
            return int(a.i)
        if t == _A.STRING:
            return a.s.decode("utf-8")
        if t == _A.TENSOR:
            return numpy_helper.to_array(a.t)
        if t == _A.GRAPH:
            return a.g
        if t == _A.FLOATS:
            return tuple(float(v) for v in a.floats)
        if t == _A.INTS:
            return tuple(int(v) for v in a.ints)
        if t == _A.STRINGS:
            return tuple(s.decode("utf-8") for s in a.strings)
        if t == _A.TENSORS:
            return tuple(numpy_helper.to_array(x) for x in a.tensors)
        if t == _A.GRAPHS:
            return tuple(a.graphs)
        if t == _A.TYPE_PROTO:
            return a.tp
        if t == _A.TYPE_PROTOS:
            return tuple(a.type_protos)
        if t == _A.SPARSE_TENSOR:
            return a.sparse_tensor
    except StdopsError:
        raise
    except Exception as e:  # noqa: BLE001 - corrupt tensor data, bad utf-8, ...
        raise ModelFormatError(path, where, f"attribute {a.name!r} cannot be read: {e}") from None
    raise ModelFormatError(path, where, f"attribute {a.name!r} has unsupported type {t}")


def _held_elements(t: onnx.TensorProto) -> int:
    """An upper bound on the elements a tensor's data can hold (4 per raw byte covers 2-bit packing)."""
    return max(
        4 * len(t.raw_data),
        len(t.float_data),
        len(t.int32_data),
        len(t.string_data),
        len(t.int64_data),
        len(t.double_data),
        len(t.uint64_data),
    )


def _tensor(t: onnx.TensorProto, where: str, path: str | None, base_dir: str | None) -> np.ndarray:
    dims = [int(d) for d in t.dims]
    if any(d < 0 for d in dims):
        raise ModelFormatError(path, where, f"negative dimension in dims {tuple(dims)}")
    n = math.prod(dims)
    if n > limits.max_elements() and t.data_location != onnx.TensorProto.EXTERNAL and n > _held_elements(t):
        raise ModelFormatError(
            path,
            where,
            f"dims {tuple(dims)} need {n} elements, the tensor's data holds "
            f"at most {_held_elements(t)} (corrupt dims or truncated data)",
        )
    try:
        limits.check_elements(dims, where)
    except ResourceLimitError as e:
        raise ResourceLimitError(f"{path}: {e}" if path else str(e)) from None
    try:
        return numpy_helper.to_array(t, base_dir or "")
    except StdopsError:
        raise
    except Exception as e:  # noqa: BLE001 - size mismatch, missing external file, ...
        raise ModelFormatError(path, where, f"cannot read tensor data: {e}") from None


class GraphBuilder:
    """Compiles one GraphProto (the main graph or a subgraph) into a Plan."""

    def __init__(
        self,
        opsets: dict[str, int],
        path: str | None,
        base_dir: str | None,
        functions: dict[tuple[str, str], onnx.FunctionProto] | None = None,
    ):
        self.opsets = opsets
        self.path = path
        self.base_dir = base_dir
        self.functions = functions or {}

    def compile(self, g: onnx.GraphProto, outer: Sequence[str] = (), graph_where: str = "graph") -> Plan:
        constants: dict[str, Any] = {}
        for t in g.initializer:
            constants[t.name] = _tensor(t, f"initializer {t.name!r}", self.path, self.base_dir)
        for st in g.sparse_initializer:
            raise ModelFormatError(
                self.path, f"sparse initializer {st.values.name!r}", "sparse initializers are not supported"
            )
        input_names = [vi.name for vi in g.input]
        known = set(constants) | set(input_names) | set(outer)
        nodes: list[Node] = []
        used_names: set[str] = set()
        earlier: list[onnx.NodeProto] = []
        for n, opsets, where, _depth in self._expanded(g.node, self.opsets, graph_where):
            name = n.name or f"{n.op_type}_{len(used_names)}"
            if name in used_names:
                name = f"{name}_{len(used_names)}"
            used_names.add(name)
            node = self._node(n, name, where, constants, known, opsets, earlier)
            earlier.append(n)
            known.update(o for o in n.output if o)
            if node is not None:  # None: a Constant, folded into the constants
                nodes.append(node)
        graph_outputs = {vi.name for vi in g.output}
        free = [nm for nm in outer if nm in graph_outputs or any(nm in nd.inputs for nd in nodes)]
        return Plan(nodes, input_names, [vi.name for vi in g.output], constants, self.path, outer=free)

    def _expanded(self, nodes, opsets: dict[str, int], graph_where: str, depth: int = 0):
        """Yield (node, its opsets, where, depth) with function calls replaced by their bodies: a
        model-local function, or the schema's function body of an op no kernel binds."""
        for idx, n in enumerate(nodes):
            where = f"{graph_where} node {idx} {n.name or n.op_type!r} ({n.op_type})"
            dkey = "" if n.domain in ("", "ai.onnx") else n.domain
            body, body_opsets = None, None
            local = self.functions.get((n.domain, n.op_type))
            if local is not None:
                body, body_opsets = local, function_opsets(local, opsets)
            elif dkey in opsets:
                try:
                    resolve(dkey, n.op_type, opsets[dkey])
                except UnsupportedOp:
                    body = schema_function(dkey, n.op_type, opsets[dkey])
                    body_opsets = function_opsets(body, opsets) if body is not None else None
            if body is None:
                yield n, opsets, where, depth
                continue
            if depth >= MAX_DEPTH:
                raise ModelFormatError(
                    self.path, where, f"functions nested deeper than {MAX_DEPTH} (a recursive function?)"
                )
            self._n_inlined = getattr(self, "_n_inlined", 0) + 1
            prefix = f"{n.name or n.op_type}#{self._n_inlined}"
            yield from self._expanded(
                list(inline(n, body, prefix, where, self.path)),
                body_opsets or opsets,
                f"{where} function {body.name!r}",
                depth + 1,
            )

    def _node(
        self,
        n: onnx.NodeProto,
        name: str,
        where: str,
        constants: dict[str, Any],
        known: set[str],
        opsets: dict[str, int],
        earlier: list | None = None,
    ) -> Node | None:
        domain = n.domain
        dkey = "" if domain in ("", "ai.onnx") else domain
        if dkey not in opsets:
            raise ModelFormatError(
                self.path, where, f"domain {domain or 'ai.onnx'!r} is not in the model's opset_import"
            )
        opset = opsets[dkey]
        try:
            since, kernel, adapt = resolve(dkey, n.op_type, opset)
        except UnsupportedOp as e:
            raise UnsupportedOp(e.domain, e.op_type, e.version, where, self.path) from None
        attrs: dict[str, Any] = {}
        for a in n.attribute:
            if a.ref_attr_name:
                raise ModelFormatError(
                    self.path, where, f"attribute {a.name!r} refers to a function attribute outside a function body"
                )
            attrs[a.name] = convert_attribute(a, where, self.path)
        for i in n.input:
            if i and i not in known:
                raise ModelFormatError(
                    self.path, where, f"input {i!r} is not produced by any earlier node, graph input or initializer"
                )
        ctx = BindContext(
            op_type=n.op_type,
            domain=dkey,
            opset=opset,
            since=since,
            node_name=name,
            path=self.path,
            attrs=attrs,
            n_inputs=len(n.input),
            input_present=[bool(i) for i in n.input],
            n_outputs=len(n.output),
            kernel=kernel,
            constants=[constants.get(i) if i else None for i in n.input],
            compile_graph=lambda g, _known=frozenset(known): self.compile(  # type: ignore[misc]
                g, outer=sorted(_known), graph_where=f"{where} subgraph"
            ),
            opsets=opsets,
            output_present=[bool(o) for o in n.output],
            earlier_nodes=list(earlier or ()),
        )
        try:
            fn: Callable = adapt(ctx) if adapt is not None else ctx.bind()
        except ModelFormatError as e:
            if e.path is None and self.path is not None:  # raised by a helper that knows no file
                raise ModelFormatError(self.path, where + (f" {e.where}" if e.where else ""), e.detail) from None
            raise
        except StdopsError:
            raise
        except Exception as e:  # noqa: BLE001 - an adapter refusing the node's attributes
            raise ModelFormatError(self.path, where, f"{type(e).__name__}: {e}") from None
        inputs = list(n.input)
        implicit = getattr(fn, "outer_inputs", None)  # control flow: values its subgraphs read
        if implicit:
            inputs += list(implicit)
        if n.op_type == "Constant" and dkey == "" and not n.input:
            try:
                value = fn()
            except Exception as e:  # noqa: BLE001
                raise ModelFormatError(self.path, where, f"{type(e).__name__}: {e}") from None
            constants[n.output[0]] = value
            return None
        if isinstance(fn, Bound) and not implicit:  # one kernel on the node's inputs in order
            return Node(name, n.op_type, fn.fn, inputs, list(n.output), where, fn, (fn.kernel.name,))
        kernels = (kernel.name,) if kernel is not None else ()
        return Node(name, n.op_type, fn, inputs, list(n.output), where, kernels=kernels)


def _read_model(source: Any) -> tuple[onnx.ModelProto, str | None]:
    """Path, bytes or ModelProto -> (ModelProto, path for messages)."""
    if isinstance(source, onnx.ModelProto):
        return source, None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, path = bytes(source), None
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            size = os.path.getsize(path)
            if size > MAX_MODEL_BYTES:
                raise ModelFormatError(path, None, f"file of {size} bytes is larger than protobuf's 2 GiB limit")
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ModelFormatError(path, None, f"cannot read: {e.strerror or e}") from None
    else:
        raise TypeError(f"expected a path, bytes or onnx.ModelProto, got {type(source).__name__}")
    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise ModelFormatError(path, None, f"not a valid ONNX model (truncated or corrupt protobuf: {e})") from None
    if not m.HasField("graph") or not m.opset_import:
        raise ModelFormatError(
            path, None, "not a valid ONNX model (no graph or no opset_import; truncated or not an .onnx file)"
        )
    if path is not None and any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
        try:
            from onnx.external_data_helper import load_external_data_for_model

            load_external_data_for_model(m, os.path.dirname(os.path.abspath(path)))
        except Exception as e:  # noqa: BLE001
            raise ModelFormatError(path, "external data", str(e)) from None
    return m, path


class Model:
    """A loaded ONNX model: ``run(feeds, outputs)`` -> {name: value}."""

    def __init__(self, source: Any):
        proto, path = _read_model(source)
        self.proto = proto
        self.path = path
        self.opsets: dict[str, int] = {}
        for o in proto.opset_import:
            self.opsets["" if o.domain in ("", "ai.onnx") else o.domain] = int(o.version)
        g = proto.graph
        init_names = {t.name for t in g.initializer}
        self._input_info = {vi.name: _value_info(vi, path, "graph input") for vi in g.input}
        #: the graph inputs a user feeds (initializers listed as inputs are optional overrides)
        self.inputs: list[ValueInfo] = [self._input_info[vi.name] for vi in g.input if vi.name not in init_names]
        self.outputs: list[ValueInfo] = [_value_info(vi, path, "graph output") for vi in g.output]
        functions = {(f.domain, f.name): f for f in proto.functions}
        base_dir = os.path.dirname(os.path.abspath(path)) if path else None
        self.plan = GraphBuilder(self.opsets, path, base_dir, functions).compile(g)

    # ------------------------------------------------------------------ info
    @property
    def input_names(self) -> list[str]:
        return [v.name for v in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [v.name for v in self.outputs]

    def op_histogram(self) -> dict[str, int]:
        hist: dict[str, int] = {}
        for n in self.proto.graph.node:
            key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}"
            hist[key] = hist.get(key, 0) + 1
        return dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))

    def parameter_count(self) -> int:
        return int(sum(int(np.prod(t.dims)) for t in self.proto.graph.initializer))

    # ------------------------------------------------------------------ run
    def _check_feed(self, name: str, value: Any) -> Any:
        where = self.path or "model"
        info = self._input_info.get(name)
        if info is None:
            raise InputError(f"{where}: no input named {name!r} (inputs: {', '.join(self.input_names)})")
        if info.kind != "tensor":
            return value
        if value is None:
            raise InputError(f"{where}: input {name!r} is a tensor, got None")
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
        if info.dtype is not None and arr.dtype != info.dtype:
            if not (info.dtype == object and arr.dtype.kind in "US"):
                raise InputError(f"{where}: input {name!r} expects dtype {info.dtype}, got {arr.dtype}")
            arr = arr.astype(object)  # ONNX strings are object arrays of str
        if info.shape is not None:
            if arr.ndim != len(info.shape):
                raise InputError(
                    f"{where}: input {name!r} expects rank {len(info.shape)} "
                    f"(shape {_dims(info.shape)}), got shape {arr.shape}"
                )
            for d, (want, got) in enumerate(zip(info.shape, arr.shape)):
                if isinstance(want, int) and want > 0 and want != got:
                    raise InputError(
                        f"{where}: input {name!r} expects shape {_dims(info.shape)}, got {arr.shape} (dimension {d})"
                    )
        return arr

    def run(
        self, feeds: dict[str, Any] | None = None, outputs: Sequence[str] | None = None, hook: Hook | None = None
    ) -> dict[str, Any]:
        """Run the model. ``feeds``: input name -> array (a list for a sequence, None for an empty
        optional). ``outputs``: names to return (any value of the graph; default the graph outputs)."""
        feeds = dict(feeds or {})
        checked = {name: self._check_feed(name, v) for name, v in feeds.items()}
        missing = [n for n in self.input_names if n not in checked]
        if missing:
            raise InputError(f"{self.path or 'model'}: missing input(s) {', '.join(map(repr, missing))}")
        return self.plan.run(checked, outputs, hook)


def _dims(shape: tuple) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
