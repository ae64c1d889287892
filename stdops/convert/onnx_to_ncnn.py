"""ONNX -> ncnn for the operators both share, written with stdops' own .param / .bin writers.

Steps: (1) the model runs once in stdops on seeded random inputs (static shapes; batch 1), every value
recorded; (2) values that do not depend on the inputs (initializers, Constant, Shape of static shapes and
everything computed from them) are folded into constants; (3) each remaining node becomes ncnn layers
(onnx_ncnn_ops.py). An ONNX value of shape (1, ...) is the ncnn blob without that batch axis (its
"canonical" layout; other shapes as they are, at most 4 axes); a layer that needs another view of the
same elements gets a Reshape in front. (4) Every layer is run by the stdops ncnn front end on the recorded
inputs as it is written and must reproduce the recorded ONNX outputs (1e-4 relative per value): a
converted layer that disagrees is an error, never a silently wrong model. (5) A blob read by several
layers gets a Split layer, as ncnn expects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .common import ConversionError

#: ops whose outputs are not a function of their inputs alone: never folded
_NOT_FOLDED = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


def canonical(shape: Sequence[int]) -> tuple[int, ...]:
    """The ncnn blob shape of an ONNX tensor: without a leading batch axis of 1 (rank >= 2)."""
    s = tuple(int(d) for d in shape)
    if len(s) >= 2 and s[0] == 1:
        s = s[1:]
    return s if s else (1,)


def _safe(name: str) -> str:
    out = "".join(c if c.isalnum() or c in "_.-:/" else "_" for c in name)
    return out or "_"


class NcnnModel:
    """Layers and weights being written; blobs know their ncnn shape and their recorded value."""

    def __init__(self, path: str | None):
        self.path = path
        self.layers: list[tuple[str, str, list[str], list[str], dict]] = []
        self.weights: list[tuple[np.ndarray, bool]] = []
        self.blob_shape: dict[str, tuple[int, ...]] = {}
        self.blob_value: dict[str, np.ndarray] = {}
        self._names: set[str] = set()

    def fresh(self, stem: str) -> str:
        base = _safe(stem)
        name, k = base, 1
        while name in self._names:
            name, k = f"{base}_{k}", k + 1
        self._names.add(name)
        return name

    def add(
        self,
        type_name: str,
        name: str,
        bottoms: Sequence[str],
        params: dict,
        weights: Sequence[np.ndarray] = (),
        tops: Sequence[str] | None = None,
        n_tops: int = 1,
        where: str = "",
    ) -> list[str]:
        """Append a layer; run it on its bottoms' recorded values (the front end's semantics) to learn its
        tops' shapes and values. Returns the top names."""
        from .. import ncnn
        from ..errors import StdopsError
        from ..ncnn.spec import LAYERS, resolve_params

        tops = list(tops) if tops is not None else [self.fresh(f"{name}_out{k}") for k in range(n_tops)]
        spec = LAYERS[type_name]
        p = resolve_params(spec, dict(params), name, None, len(bottoms), len(tops))
        declared = list(spec.weights(p))
        if len(declared) != len(weights):
            raise AssertionError(f"{type_name}: {len(declared)} weights declared, {len(weights)} given")
        ins = [self.blob_value[b] for b in bottoms]
        try:
            outs = ncnn.run_layer(type_name, params, weights, ins, len(tops))
        except StdopsError as e:
            raise ConversionError(self.path, where, "ncnn", f"the ncnn {type_name} layer refuses it: {e}") from None
        for t, v in zip(tops, outs):
            self._names.add(t)
            self.blob_value[t] = v
            self.blob_shape[t] = tuple(v.shape)
        self.layers.append((type_name, self.fresh(name), list(bottoms), list(tops), dict(params)))
        for w, a in zip(declared, weights):
            self.weights.append((np.asarray(a), w.tagged))
        return tops

    def rename(self, old: str, new: str, since: int) -> bool:
        """Give the top ``old`` of a layer appended at index >= ``since`` the name ``new`` (unused so far)."""
        if new in self._names and new in self.blob_value:
            return False
        for k in range(len(self.layers) - 1, since - 1, -1):
            t, n, b, tops, p = self.layers[k]
            if old in tops:
                self.layers[k] = (t, n, b, [new if x == old else x for x in tops], p)
                for j in range(k + 1, len(self.layers)):
                    t2, n2, b2, tops2, p2 = self.layers[j]
                    self.layers[j] = (t2, n2, [new if x == old else x for x in b2], tops2, p2)
                self._names.add(new)
                self.blob_value[new] = self.blob_value.pop(old)
                self.blob_shape[new] = self.blob_shape.pop(old)
                return True
        return False

    def add_input(self, name: str, value: np.ndarray) -> str:
        from .onnx_ncnn_ops import reshape_params

        shape = value.shape
        params = reshape_params(shape)
        self._names.add(name)
        self.layers.append(("Input", self.fresh(name + "_input"), [], [name], params))
        self.blob_value[name] = value
        self.blob_shape[name] = tuple(shape)
        return name

    # ------------------------------------------------------------------ writing
    def with_splits(self) -> list[tuple[str, str, list[str], list[str], dict]]:
        """The layers with a Split after every blob that several layers read."""
        readers: dict[str, int] = {}
        for _t, _n, bottoms, _tops, _p in self.layers:
            for b in bottoms:
                readers[b] = readers.get(b, 0) + 1
        out = []
        pending: dict[str, list[str]] = {}
        for t, n, bottoms, tops, p in self.layers:
            new_bottoms = [pending[b].pop(0) if b in pending else b for b in bottoms]
            out.append((t, n, new_bottoms, tops, p))
            for top in tops:
                k = readers.get(top, 0)
                if k > 1:
                    names = [self.fresh(f"{top}_split{i}") for i in range(k)]
                    out.append(("Split", self.fresh(f"splitncnn_{top}"), [top], names, {}))
                    pending[top] = list(names)
        return out

    def files(self) -> tuple[str, bytes]:
        from ..ncnn.modelbin import ModelBinWriter
        from ..ncnn.param import LayerDecl, ParamFile, write_text

        layers = self.with_splits()
        decls = [LayerDecl(t, n, b, tp, p, k + 3) for k, (t, n, b, tp, p) in enumerate(layers)]
        blobs = len({x for d in decls for x in d.tops})
        text = write_text(ParamFile(decls, blobs, None, False))
        mb = ModelBinWriter()
        for a, tagged in self.weights:
            mb.write(a, tagged, "int8" if a.dtype == np.int8 else "fp32")
        return text, mb.getvalue()


def record(model, input_shapes: Mapping[str, Sequence[int]] | None, path: str | None, seed: int = 0):
    """(values by name, constant names): every value of one run of ``model`` in stdops on seeded inputs."""
    import onnx
    from onnx import helper, numpy_helper

    from .. import onnx as sonnx
    from ..errors import StdopsError
    from ..limits import check_elements

    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in g.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        shape = tuple((input_shapes or {}).get(vi.name, dims))
        if len(shape) == len(dims) - 1:  # given in ncnn's layout, without the batch axis
            shape = (1, *shape)
        static = tuple(d for d in shape if d is not None and d >= 1)
        if len(static) != len(shape):
            raise ConversionError(
                path, f"input {vi.name!r}", "ncnn", f"has no static shape ({dims}): give --input-shape {vi.name}=1,..."
            )
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        check_elements(static, f"{path or 'onnx'}: input {vi.name!r}")  # refused, not allocated
        feeds[vi.name] = rng.standard_normal(static).astype(dtype) if dtype.kind == "f" else np.zeros(static, dtype)
    values: dict[str, np.ndarray] = dict(inits)
    for n in g.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            a = n.attribute[0]
            values[n.output[0]] = (
                numpy_helper.to_array(a.t)
                if a.type == onnx.AttributeProto.TENSOR
                else np.asarray(helper.get_attribute_value(a))
            )
    values.update(feeds)
    try:
        m = sonnx.load(model)
        m.run(feeds, hook=lambda _node, name, v: values.__setitem__(name, np.asarray(v)))
    except StdopsError as e:
        raise ConversionError(path, None, "ncnn", f"the model does not run in stdops: {e}") from None
    constant = set(inits) | {n.output[0] for n in g.node if n.op_type == "Constant"}
    for n in g.node:
        if n.op_type in _NOT_FOLDED:
            continue
        ins = [i for i in n.input if i]
        if n.op_type == "Shape" or (ins and all(i in constant for i in ins)):
            constant.update(o for o in n.output if o)
    return values, feeds, constant


def onnx_to_ncnn(model, path: str | None = None, input_shapes: Mapping[str, Sequence[int]] | None = None):
    """(.param text, .bin bytes) of an ONNX ModelProto."""
    from . import onnx_ncnn_layers  # noqa: F401  (registers the layers with weights)
    from .onnx_ncnn_ops import OPS, NodeCtx

    opsets = {o.domain: o.version for o in model.opset_import}
    if any(d not in ("", "ai.onnx") for d in opsets if opsets[d]) and any(
        n.domain not in ("", "ai.onnx") for n in model.graph.node
    ):
        raise ConversionError(path, None, "ncnn", "ops outside the default ONNX domain have no ncnn form")
    values, feeds, constant = record(model, input_shapes, path)
    needed = {i for n in model.graph.node for i in n.input} | {o.name for o in model.graph.output}
    out = NcnnModel(path)
    blob_of: dict[str, str] = {}
    for name, v in feeds.items():
        if v.dtype != np.float32:
            raise ConversionError(path, f"input {name!r}", "ncnn", f"ncnn feeds float32 blobs, this input is {v.dtype}")
        if len(canonical(v.shape)) > 4:
            raise ConversionError(
                path, f"input {name!r}", "ncnn", f"shape {v.shape} has more than 4 axes besides the batch"
            )
        blob_of[name] = out.add_input(_safe(name), v.reshape(canonical(v.shape)))
    for k, n in enumerate(model.graph.node):
        where = f"node {n.name or k!r} ({n.op_type})"
        outs = [o for o in n.output if o]
        if not outs or all(o in constant for o in outs):
            continue
        if any(o not in values for o in outs[:1]):
            continue  # a node no output needs: stdops did not compute it
        emit = OPS.get(n.op_type)
        if emit is None or n.domain not in ("", "ai.onnx"):
            raise ConversionError(path, where, "ncnn", f"ONNX {n.op_type} has no ncnn counterpart here")
        ctx = NodeCtx(out, n, values, constant, blob_of, where, path, needed)
        emit(ctx)
        for o in outs:
            if o in values and o not in blob_of and o in needed:
                raise ConversionError(path, where, "ncnn", f"output {o!r} was not converted")
    for o in model.graph.output:  # each output a blob of its own name, in its canonical layout
        if o.name in constant:
            raise ConversionError(path, f"output {o.name!r}", "ncnn", "a constant output has no ncnn form")
        b, name = blob_of[o.name], _safe(o.name)
        want = canonical(values[o.name].shape)
        if b == name and out.blob_shape[b] == want:
            continue
        if b == name:
            b = out.fresh(f"{name}_pre")
            out.rename(name, b, 0)
        NodeCtx(out, None, values, constant, blob_of, f"output {o.name!r}", path).reshape_to(b, want, top=name)
    return out.files()
