"""Loading an ONNX model into a compiled :class:`~stdops.graph.Plan`.

Everything that can be decided at load time is: node binding (opset.resolve), attribute conversion,
Constant nodes, adapters' precomputation. A run validates the feeds and calls the plan.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx

from .. import limits
from .._files import read_bounded
from ..errors import InputError, ModelFormatError, StdopsError, UnsupportedOp
from ..graph import Hook, Node, Plan
from ..ops.bind import Bound
from ..optimize import optimize
from . import adapters, control, gradient  # noqa: F401  (version adapters, If/Loop/Scan, Gradient)
from .functions import function_opsets, inline, schema_function
from .opset import BindContext, onnx_dtype, resolve
from .proto import MAX_MODEL_BYTES, parse_model
from .static_shapes import static_shapes
from .tensors import _tensor, convert_attribute

_A = onnx.AttributeProto


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

    def compile(self, g: onnx.GraphProto, outer: Any = frozenset(), graph_where: str = "graph") -> Plan:
        """``outer``: the names visible from the enclosing graphs (a container; membership is all it needs)."""
        constants: dict[str, Any] = {}
        for t in g.initializer:
            constants[t.name] = _tensor(t, f"initializer {t.name!r}", self.path, self.base_dir)
        for st in g.sparse_initializer:
            raise ModelFormatError(
                self.path, f"sparse initializer {st.values.name!r}", "sparse initializers are not supported"
            )
        input_names = [vi.name for vi in g.input]
        local = set(constants) | set(input_names)
        known = _Scope(local, outer)
        nodes: list[Node] = []
        used_names: set[str] = set()
        earlier: list[onnx.NodeProto] = []
        budget = limits.current()
        for n, opsets, where, _depth in self._expanded(g.node, self.opsets, graph_where):
            budget.charge_nodes(1, f"{self.path or 'model'}: {where}")
            name = n.name or f"{n.op_type}_{len(used_names)}"
            if name in used_names:
                name = f"{name}_{len(used_names)}"
            used_names.add(name)
            node = self._node(n, name, where, constants, known, opsets, _Prefix(earlier))
            earlier.append(n)
            known.update(o for o in n.output if o)
            if node is not None:  # None: a Constant, folded into the constants
                nodes.append(node)
        # the enclosing graphs' values this graph reads (its nodes' inputs, implicit ones included, and its
        # outputs): found from this graph's own names, never by scanning the enclosing scope
        read = {i for nd in nodes for i in nd.inputs if i} | {vi.name for vi in g.output}
        free = sorted(nm for nm in read if nm not in local and nm in outer)
        plan = Plan(nodes, input_names, [vi.name for vi in g.output], constants, self.path, outer=free)
        main = graph_where == "graph"  # subgraphs: no static shapes (their inputs are what the loop feeds)
        return optimize(plan, static_shapes(g, self.opsets, self.functions) if main else None)  # stdops/optimize

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
            max_depth = limits.get().max_function_depth
            if depth >= max_depth:
                raise ModelFormatError(
                    self.path,
                    where,
                    f"functions nested deeper than {max_depth} (a recursive function? raise the limit with "
                    f"stdops.limits.configure(max_function_depth=...) or {limits.ENV['max_function_depth']})",
                )
            if local is not None:  # refuse a call whose expansion cannot fit before creating any of it
                size = self._function_size((n.domain, n.op_type), where, depth)
                budget = limits.current()
                if budget.graph_nodes + size > budget.limits.max_graph_nodes:
                    budget.charge_nodes(
                        size, f"{self.path or 'model'}: {where} (function {body.name!r} expands to {size} nodes)"
                    )
            self._n_inlined = getattr(self, "_n_inlined", 0) + 1
            prefix = f"{n.name or n.op_type}#{self._n_inlined}"
            yield from self._expanded(
                list(inline(n, body, prefix, where, self.path)),
                body_opsets or opsets,
                f"{where} function {body.name!r}",
                depth + 1,
            )

    def _function_size(self, key: tuple[str, str], where: str, depth: int) -> int:
        """How many nodes a call of the model-local function ``key`` expands to (calls of other local functions
        expanded, memoized: linear in the functions' size even when the expansion is exponential)."""
        memo = self.__dict__.setdefault("_sizes", {})
        if key in memo:
            if memo[key] is None:  # on the stack: a recursive function
                raise ModelFormatError(self.path, where, f"function {key[1]!r} is recursive (it calls itself)")
            return memo[key]
        max_depth = limits.get().max_function_depth
        if depth >= max_depth:
            raise ModelFormatError(
                self.path,
                where,
                f"functions nested deeper than {max_depth} (a recursive function? raise the "
                f"limit with stdops.limits.configure(max_function_depth=...) or {limits.ENV['max_function_depth']})",
            )
        memo[key] = None
        total = 0
        for m in self.functions[key].node:
            sub = (m.domain, m.op_type)
            total += self._function_size(sub, where, depth + 1) if sub in self.functions else 1
        memo[key] = total
        return total

    def _node(
        self,
        n: onnx.NodeProto,
        name: str,
        where: str,
        constants: dict[str, Any],
        known: _Scope,
        opsets: dict[str, int],
        earlier: Sequence[onnx.NodeProto] = (),
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
            attrs[a.name] = convert_attribute(a, where, self.path, self.base_dir)
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
            # the subgraph sees the names known now: adapters compile subgraphs while binding, before
            # ``known`` grows (copying it per node instead made a load quadratic in the node count)
            compile_graph=lambda g: self.compile(g, outer=known, graph_where=f"{where} subgraph"),
            opsets=opsets,
            output_present=[bool(o) for o in n.output],
            earlier_nodes=earlier,  # type: ignore[arg-type]  # a read-only prefix view, not a copy
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
            if len(n.output) != 1 or not n.output[0]:
                raise ModelFormatError(self.path, where, f"a Constant has one output, this one has {len(n.output)}")
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


_gc_lock = threading.Lock()
_gc_state = {"depth": 0, "was_enabled": False}


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic collector paused while a graph compiles: a load allocates O(nodes) objects that all
    stay alive, and the collector's full passes over them made a 100k-node load superlinear. Nested and
    concurrent loads share one pause (the collector resumes when the last one ends)."""
    with _gc_lock:
        if _gc_state["depth"] == 0:
            _gc_state["was_enabled"] = gc.isenabled()
            gc.disable()
        _gc_state["depth"] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_state["depth"] -= 1
            if _gc_state["depth"] == 0 and _gc_state["was_enabled"]:
                gc.enable()


class _Scope:
    """The names visible in a graph: its own (``local``, growing as nodes are added) and its enclosing
    graphs' (``outer``), without copying the enclosing scope for each subgraph."""

    __slots__ = ("local", "outer")

    def __init__(self, local: set, outer: Any):
        self.local, self.outer = local, outer

    def __contains__(self, name: object) -> bool:
        return name in self.local or name in self.outer

    def update(self, names) -> None:
        self.local.update(names)


class _Prefix(Sequence):
    """The first ``len(items)`` nodes of a growing list, as they are now: what BindContext.earlier_nodes holds
    (a view, so binding node k costs O(1), not O(k))."""

    __slots__ = ("_items", "_n")

    def __init__(self, items: list):
        self._items, self._n = items, len(items)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self._items[: self._n][i]
        if not -self._n <= i < self._n:
            raise IndexError(i)
        return self._items[i % self._n]

    def __iter__(self):
        return iter(self._items[: self._n])


def _read_model(source: Any) -> tuple[onnx.ModelProto, str | None]:
    """Path, bytes or ModelProto -> (ModelProto, path for messages)."""
    if isinstance(source, onnx.ModelProto):
        return source, None
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, path = bytes(source), None
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        data = read_bounded(path, MAX_MODEL_BYTES, "protobuf's 2 GiB limit")
    else:
        raise TypeError(f"expected a path, bytes or onnx.ModelProto, got {type(source).__name__}")
    return parse_model(data, path), path


class Model:
    """A loaded ONNX model: ``run(feeds, outputs)`` -> {name: value}.

    ``base_dir``: the folder external tensor data is read from. A model loaded from a file reads it from
    the file's own folder (never from elsewhere); a model given as bytes or a ModelProto has no folder,
    so one with external data needs ``base_dir``.

    A loaded model may be run from several threads at once: ``run`` keeps its values per call.
    """

    def __init__(self, source: Any, base_dir: str | os.PathLike | None = None):
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
        if base_dir is not None:
            base_dir = os.fspath(base_dir)
            if not os.path.isdir(base_dir):
                raise ModelFormatError(path, None, f"base_dir {base_dir!r} is not a folder")
        elif path:
            base_dir = os.path.dirname(os.path.abspath(path))
        with limits.budget("load"), _collector_paused():
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
        with limits.budget("run"):
            return self.plan.run(checked, outputs, hook)


def _dims(shape: tuple) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
