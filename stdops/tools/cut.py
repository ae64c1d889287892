"""Sub-models cut out of an ONNX or ncnn model, in the model's own format, with their inputs frozen.

A cut is a set of nodes (layers) of the model, the values it reads from outside the set (its inputs, fed
with the values a real run of the whole model produced) and the values it reports (its outputs):

- ONNX: an .onnx with the cut's inputs as graph inputs (concrete types from the frozen values), the
  initializers it reads, ``Constant`` nodes folded into initializers, the model's opsets and local functions;
  values a control-flow body reads from the enclosing graph count as the node's inputs.
- ncnn: a .param (text) and .bin written with stdops' writers: an ``Input`` layer per cut input (its
  ``0=w 1=h 11=d 2=c`` set from the frozen blob), then the layers with their params and weights in load
  order (every weight written as fp32, or int8 where it is int8: the values are the ones the model loads).
"""

from __future__ import annotations

import abc
import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import StdopsError


class CutError(StdopsError):
    """A cut that cannot be written (an input that is not a tensor, say)."""


@dataclasses.dataclass
class CutNode:
    index: int
    name: str
    op: str
    inputs: list[str]  # values read from other nodes or the graph inputs (constants excluded)
    outputs: list[str]


def safe_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "_"


def input_file_names(names: Sequence[str]) -> dict[str, str]:
    """A distinct file-name-safe stem per value name."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for n in names:
        stem = safe_name(n)
        k, base = 1, stem
        while stem.lower() in used:
            k += 1
            stem = f"{base}_{k}"
        used.add(stem.lower())
        out[n] = stem
    return out


class Source(abc.ABC):
    """A model to cut: its nodes in execution order and the values of one real stdops run (one subclass per
    format: ``OnnxSource``, ``NcnnSource``)."""

    kind: str
    suffix: str
    nodes: list[CutNode]
    graph_inputs: list[str]
    graph_outputs: list[str]
    values: dict[str, Any]
    #: the error the stdops run raised part way (the values before it are kept), or None
    run_error: StdopsError | None = None

    def producers(self) -> dict[str, int]:
        return {o: n.index for n in self.nodes for o in n.outputs}

    def consumers(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for n in self.nodes:
            for i in n.inputs:
                out.setdefault(i, []).append(n.index)
        return out

    def closure(self, nodes: Iterable[int]) -> list[int]:
        """``nodes`` plus the nodes without inputs (constants, MemoryData) whose values they read."""
        chosen = set(nodes)
        prod = self.producers()
        for k in list(chosen):
            for i in self.nodes[k].inputs:
                p = prod.get(i)
                if p is not None and not self.nodes[p].inputs:
                    chosen.add(p)
        return sorted(chosen)

    def cut_inputs(self, nodes: Sequence[int]) -> list[str]:
        inside = {o for k in nodes for o in self.nodes[k].outputs}
        seen: list[str] = []
        for k in nodes:
            for i in self.nodes[k].inputs:
                if i not in inside and i not in seen:
                    seen.append(i)
        return seen

    @abc.abstractmethod
    def freeze(self, feeds: dict[str, Any]) -> None:
        """Run stdops on the whole model, keeping every value (up to a step that raises) in ``values``."""

    @abc.abstractmethod
    def write(self, nodes: Sequence[int], outputs: Sequence[str], folder: str, stem: str) -> dict[str, Any]:
        """Write the cut into ``folder``; returns {"model", "weights", "inputs": {name: npy path}}."""

    def _save_inputs(self, names: Sequence[str], folder: str, stem: str) -> dict[str, str]:
        paths = {}
        for name, file_stem in input_file_names(names).items():
            v = self.values.get(name)
            if not isinstance(v, np.ndarray) or v.dtype == object:
                raise CutError(f"value {name!r} is not a numeric tensor: it cannot be a frozen input")
            p = os.path.join(folder, f"{stem}.{file_stem}.npy")
            np.save(p, v, allow_pickle=False)
            paths[name] = p
        return paths


# --------------------------------------------------------------------------- ONNX
def _subgraph_reads(g: Any) -> set[str]:
    """Names a (nested) graph reads from its enclosing scopes."""
    defined = {vi.name for vi in g.input} | {t.name for t in g.initializer}
    reads: set[str] = set()
    for n in g.node:
        for i in n.input:
            if i and i not in defined:
                reads.add(i)
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                reads |= {r for r in _subgraph_reads(sub) if r not in defined}
        defined.update(o for o in n.output if o)
    return reads


def _constant_value(n: Any) -> Any:
    """The TensorProto a Constant node holds, or None for a form kept as a node (sparse_value)."""
    from onnx import TensorProto, numpy_helper

    for a in n.attribute:
        if a.name == "value":
            t = TensorProto()
            t.CopyFrom(a.t)
            return t
        if a.name == "value_float":
            return numpy_helper.from_array(np.array(a.f, np.float32))
        if a.name == "value_floats":
            return numpy_helper.from_array(np.array(list(a.floats), np.float32))
        if a.name == "value_int":
            return numpy_helper.from_array(np.array(a.i, np.int64))
        if a.name == "value_ints":
            return numpy_helper.from_array(np.array(list(a.ints), np.int64))
        if a.name == "value_string":
            return numpy_helper.from_array(np.array(a.s.decode("utf-8"), dtype=object))
        if a.name == "value_strings":
            return numpy_helper.from_array(np.array([s.decode("utf-8") for s in a.strings], dtype=object))
    return None


def value_info(name: str, v: Any) -> Any:
    from onnx import TensorProto, helper

    if not isinstance(v, np.ndarray):
        raise CutError(f"value {name!r} is a {type(v).__name__}, not a tensor")
    elem = TensorProto.STRING if v.dtype == object else helper.np_dtype_to_tensor_dtype(v.dtype)
    return helper.make_tensor_value_info(name, elem, list(v.shape))


class OnnxSource(Source):
    kind = "onnx"
    suffix = ".onnx"

    def __init__(self, path: str, model: Any | None = None):
        from .. import onnx as sonnx

        self.path = path
        self.model = model if model is not None else sonnx.load(path)
        proto = self.model.proto
        self.proto = proto
        g = proto.graph
        self.initializers = {t.name: t for t in g.initializer}
        self.constants: dict[str, Any] = {}
        self.nodes = []
        self.proto_nodes: list[Any] = []
        const_names = set(self.initializers)
        for n in g.node:
            if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1:
                t = _constant_value(n)
                if t is not None:
                    t.name = n.output[0]
                    self.constants[n.output[0]] = t
                    const_names.add(n.output[0])
                    continue
            reads = [i for i in n.input if i]
            for a in n.attribute:
                for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    reads += sorted(_subgraph_reads(sub))
            consts = sorted({i for i in reads if i in const_names})
            ins = list(dict.fromkeys(i for i in reads if i not in const_names))
            k = len(self.nodes)
            self.nodes.append(CutNode(k, n.name or f"{n.op_type}_{k}", n.op_type, ins, [o for o in n.output if o]))
            self.proto_nodes.append((n, consts))
        self.graph_inputs = [vi.name for vi in g.input if vi.name not in self.initializers]
        self.graph_outputs = [vi.name for vi in g.output]
        self.values = {}

    def freeze(self, feeds: dict[str, Any]) -> None:
        """Run stdops on the whole model, keeping every value (up to a node that raises)."""
        producer = {o: n.name for n in self.model.plan.nodes for o in n.outputs}
        values: dict[str, Any] = dict(feeds)

        def keep(node: str, name: str, value: Any) -> None:
            if producer.get(name) == node:  # not a same-named value inside a subgraph body
                values[name] = value

        try:
            self.model.run(feeds, outputs=[o for n in self.nodes for o in n.outputs], hook=keep)
        except StdopsError as e:
            self.run_error = e
        self.values = values

    def _output_info(self, name: str) -> Any:
        """An output's type from the run, or (past a node that raised) from ONNX shape inference."""
        if name in self.values:
            return value_info(name, self.values[name])
        if not hasattr(self, "_declared"):
            import onnx

            try:
                g = onnx.shape_inference.infer_shapes(self.proto).graph
                self._declared = {vi.name: vi for vi in [*g.value_info, *g.output]}
            except Exception:  # noqa: BLE001 - inference is best effort
                self._declared = {}
        vi = self._declared.get(name)
        if vi is None or not vi.type.HasField("tensor_type") or not vi.type.tensor_type.elem_type:
            raise CutError(f"value {name!r} has no type: the run did not reach it and shape inference gives none")
        return vi

    def write(self, nodes: Sequence[int], outputs: Sequence[str], folder: str, stem: str) -> dict[str, Any]:
        from onnx import helper

        nodes = sorted(nodes)
        inputs = self.cut_inputs(nodes)
        consts: list[str] = []
        for k in nodes:
            consts += [c for c in self.proto_nodes[k][1] if c not in consts]
        inits = [self.initializers[c] if c in self.initializers else self.constants[c] for c in consts]
        g = helper.make_graph(
            [self.proto_nodes[k][0] for k in nodes],
            f"{self.proto.graph.name or 'graph'}_cut",
            [value_info(i, self.values.get(i)) for i in inputs],
            [self._output_info(o) for o in outputs],
            inits,
        )
        m = helper.make_model(g, opset_imports=list(self.proto.opset_import), producer_name="stdops reduce")
        m.ir_version = self.proto.ir_version
        m.functions.extend(self.proto.functions)
        path = os.path.join(folder, stem + ".onnx")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        return {"model": path, "weights": None, "inputs": self._save_inputs(inputs, folder, stem)}


# --------------------------------------------------------------------------- ncnn
class NcnnSource(Source):
    kind = "ncnn"
    suffix = ".param"

    def __init__(self, path: str, weights: str | None = None, net: Any | None = None):
        from ..ncnn import Net

        self.path = path
        self.net = net if net is not None else Net.load(path, weights)
        self.layers = [L for L in self.net.layers if L.type != "Input"]
        self.nodes = [
            CutNode(k, L.name, L.type, list(L.decl.bottoms), list(L.decl.tops)) for k, L in enumerate(self.layers)
        ]
        self.graph_inputs = list(self.net.input_names)
        self.graph_outputs = list(self.net.output_names)
        self.values = {}

    def freeze(self, feeds: dict[str, Any]) -> None:
        values: dict[str, Any] = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in feeds.items()}
        try:
            self.net.run(
                feeds,
                outputs=[o for n in self.nodes for o in n.outputs],
                hook=lambda node, name, value: values.__setitem__(name, value),
            )
        except StdopsError as e:
            self.run_error = e
        self.values = values

    def write(self, nodes: Sequence[int], outputs: Sequence[str], folder: str, stem: str) -> dict[str, Any]:
        from ..ncnn.modelbin import ModelBinWriter
        from ..ncnn.param import LayerDecl, ParamFile, write_text

        nodes = sorted(nodes)
        inputs = self.cut_inputs(nodes)
        decls: list[LayerDecl] = []
        for name in inputs:
            v = self.values.get(name)
            if not isinstance(v, np.ndarray) or not 1 <= v.ndim <= 4:
                raise CutError(f"blob {name!r} is not a 1-4 dimensional tensor: it cannot be a frozen input")
            dims = dict(zip(("w", "h", "c") if v.ndim < 4 else ("w", "h", "d", "c"), reversed(v.shape)))
            params = {pid: dims[k] for pid, k in ((0, "w"), (1, "h"), (11, "d"), (2, "c")) if k in dims}
            decls.append(LayerDecl("Input", name, [], [name], params, len(decls) + 1))
        bin_writer = ModelBinWriter()
        for k in nodes:
            L = self.layers[k]
            decls.append(
                LayerDecl(L.type, L.name, list(L.decl.bottoms), list(L.decl.tops), self.net.typed_params(L), 0)
            )
            for w in L.spec.weights(L.params):
                arr = L.weights[w.name]
                if w.tagged:
                    bin_writer.write(arr, True, "int8" if arr.dtype == np.int8 else "fp32")
                else:
                    bin_writer.write(arr, False)
        blobs = {b for d in decls for b in (*d.bottoms, *d.tops)}
        text = write_text(ParamFile(decls, len(blobs), None, False))
        param = os.path.join(folder, stem + ".param")
        weights = os.path.join(folder, stem + ".bin")
        with open(param, "w") as f:
            f.write(text)
        with open(weights, "wb") as f:
            f.write(bin_writer.getvalue())
        return {"model": param, "weights": weights, "inputs": self._save_inputs(inputs, folder, stem)}


def open_source(path: str, weights: str | None = None) -> OnnxSource | NcnnSource:
    from .. import model_kind

    kind = model_kind(path)
    if kind == "onnx":
        return OnnxSource(path)
    if kind == "ncnn":
        return NcnnSource(path, weights)
    raise StdopsError(f"{path}: reduce cuts ONNX and ncnn models, not {kind.upper()}")
