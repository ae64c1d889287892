"""ncnn Net and Extractor on the shared compiled plan.

``Net.load(param, bin)`` reads the files, checks every layer against its declaration (stdops.ncnn.spec),
loads its weights in order, builds its step and compiles the graph once. Blobs are numpy arrays in ncnn's
layout without a batch axis: 1d (w,), 2d (h, w), 3d (c, h, w), 4d (c, d, h, w).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InputError, ModelFormatError, ResourceLimitError, StdopsError, UnsupportedOp
from ..graph import Hook, Node, Plan
from ..ops.bind import Bound
from ..optimize import optimize
from . import layers as _layers  # noqa: F401  (registers every layer declaration)
from . import param as _param
from .fuse import twin_nodes
from .modelbin import ModelBinReader
from .spec import LAYERS, LayerSpec, Params, RawArray, RawScalar, resolve_params


class Layer:
    """One loaded layer: its declaration, resolved params, weights and compiled step."""

    def __init__(
        self,
        decl: _param.LayerDecl,
        spec: LayerSpec,
        params: Params,
        weights: dict[str, np.ndarray],
        fn: Callable,
    ):
        self.decl, self.spec, self.params, self.weights, self.fn = decl, spec, params, weights, fn

    @property
    def type(self) -> str:
        return self.decl.type

    @property
    def name(self) -> str:
        return self.decl.name


def build_layer(decl: _param.LayerDecl, reader: ModelBinReader, path: str | None) -> Layer:
    where = decl.where
    spec = LAYERS.get(decl.type)
    if spec is None:
        raise UnsupportedOp("ncnn", decl.type, None, where, path)
    for what, n, want in (("bottoms", len(decl.bottoms), spec.n_inputs), ("tops", len(decl.tops), spec.n_outputs)):
        if want is not None and n != want:
            raise ModelFormatError(path, where, f"{decl.type} takes {want} {what}, the layer has {n}")
    try:
        params = resolve_params(spec, decl.params, where, path, len(decl.bottoms), len(decl.tops))
    except StdopsError:
        raise
    except Exception as e:  # noqa: BLE001 - a value the declaration cannot take
        raise ModelFormatError(path, where, f"bad params: {type(e).__name__}: {e}") from None
    weights: dict[str, np.ndarray] = {}
    try:
        declared = [(w, int(w.size)) for w in spec.weights(params)]
    except (ResourceLimitError, ModelFormatError) as e:
        raise _located(e, path, where) from None
    except StdopsError:
        raise
    except Exception as e:  # noqa: BLE001 - params that make no sense for the weight sizes
        raise ModelFormatError(path, where, f"params do not define the weights: {e}") from None
    for w, size in declared:
        weights[w.name] = reader.load(size, w.tagged, where, f"weight {w.name!r}")
    try:
        fn = spec.build(params, weights)
    except (ResourceLimitError, ModelFormatError) as e:
        raise _located(e, path, where) from None
    except StdopsError:
        raise
    except Exception as e:  # noqa: BLE001 - an adapter refusing its params or weights
        raise ModelFormatError(path, where, f"{type(e).__name__}: {e}") from None
    return Layer(decl, spec, params, weights, fn)


def _node(decl: _param.LayerDecl, lay: Layer) -> Node:
    """The plan node of a layer: its step, and the Bound behind it when the step is one kernel on the
    layer's blobs (an activation layer), so that graph passes see ncnn nodes as ONNX ones."""
    kernels = lay.spec.kernels if lay.spec is not None else ()
    bottoms, tops = list(decl.bottoms), list(decl.tops)
    if isinstance(lay.fn, Bound):
        return Node(decl.name, decl.type, lay.fn.fn, bottoms, tops, decl.where, lay.fn, kernels)
    assert lay.fn is not None  # built above
    return Node(decl.name, decl.type, lay.fn, bottoms, tops, decl.where, kernels=kernels)


def _located(e: StdopsError, path: str | None, where: str) -> StdopsError:
    """An error an adapter raised (a limit, a helper's format complaint) with the file and layer added
    unless it already names the file."""
    if isinstance(e, ModelFormatError):
        if e.path is not None or path is None:
            return e
        return ModelFormatError(path, where + (f" {e.where}" if e.where else ""), e.detail)
    if path is not None and path in str(e):
        return e
    return ResourceLimitError(f"{path + ': ' if path else ''}{where}: {e}")


class Net:
    """A loaded ncnn model: ``run(feeds)``, ``create_extractor()``, ``input_names``, ``output_names``."""

    def __init__(self, pf: _param.ParamFile, bin_data: bytes | None, bin_path: str | None = None):
        self.param_file = pf
        self.path = pf.path
        self.bin_path = bin_path
        reader = ModelBinReader(bin_data, bin_path or (pf.path and pf.path + " weights"))
        self.layers: list[Layer] = []
        inputs: list[str] = []
        nodes: list[Node] = []
        produced: set[str] = set()
        consumed: set[str] = set()
        for decl in pf.layers:
            for b in decl.bottoms:
                if b not in produced:
                    raise ModelFormatError(
                        self.path, decl.where, f"bottom blob {b!r} is not produced by any earlier layer"
                    )
                consumed.add(b)
            for t in decl.tops:
                if t in produced:
                    raise ModelFormatError(self.path, decl.where, f"top blob {t!r} is produced twice")
                produced.add(t)
            if decl.type == "Input":
                lay = build_layer(decl, reader, self.path)
                self.layers.append(lay)
                inputs += decl.tops
                continue
            lay = build_layer(decl, reader, self.path)
            self.layers.append(lay)
            nodes.append(_node(decl, lay))
        if bin_data is not None:
            reader.finish()
        self.weight_storage = dict(reader.storage)
        self._records = reader.records
        self._bin_data = bin_data
        self.input_names = inputs
        self.output_names = [t for d in pf.layers for t in d.tops if t not in consumed and t not in inputs]
        self.plan = optimize(Plan(nodes, inputs, self.output_names, path=self.path))  # stdops/optimize
        twin = twin_nodes(nodes, self.output_names)  # fusions the optimizer cannot see (stdops/ncnn/fuse.py)
        if twin is not None:
            fused = optimize(Plan(twin, inputs, self.output_names, path=self.path))
            self.plan.fused = fused.fused or fused
        self.blob_names = [t for d in pf.layers for t in d.tops]

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, param_path: str | os.PathLike, bin_path: str | os.PathLike | None = None) -> Net:
        """Read a .param or .param.bin and its .bin (default: the param path with .bin; no .bin file is
        fine for a model without weights)."""
        param_path = os.fspath(param_path)
        pf = _param.read(param_path)
        if bin_path is None:
            base = (
                param_path[: -len(".param.bin")]
                if param_path.endswith(".param.bin")
                else os.path.splitext(param_path)[0]
            )
            guess = base + ".bin"
            bin_path = guess if os.path.exists(guess) else None
        data = None
        if bin_path is not None:
            bin_path = os.fspath(bin_path)
            try:
                with open(bin_path, "rb") as f:
                    data = f.read()
            except OSError as e:
                raise ModelFormatError(bin_path, None, f"cannot read: {e.strerror or e}") from None
        return cls(pf, data, bin_path)

    @classmethod
    def from_bytes(cls, param: str | bytes, bin_data: bytes | None = None) -> Net:
        if isinstance(param, bytes) and param[:4] == (_param.MAGIC).to_bytes(4, "little", signed=True):
            return cls(_param.parse_binary(param), bin_data)
        text = param.decode() if isinstance(param, bytes) else param
        return cls(_param.parse_text(text), bin_data)

    # ------------------------------------------------------------------ running
    def _feed(self, name: str, value: Any) -> np.ndarray:
        if name not in self.input_names:
            raise InputError(
                f"{self.path or 'net'}: no input blob named {name!r} (inputs: {', '.join(self.input_names)})"
            )
        a = np.asarray(value)
        if a.dtype.kind not in "fiub":
            raise InputError(f"{self.path or 'net'}: input {name!r} must be numeric, got {a.dtype}")
        if a.ndim < 1 or a.ndim > 4:
            raise InputError(
                f"{self.path or 'net'}: input {name!r} must have 1 to 4 dims (w / h,w / c,h,w / "
                f"c,d,h,w; no batch axis), got shape {a.shape}"
            )
        return np.ascontiguousarray(a, dtype=np.float32)

    def run(
        self, feeds: dict[str, Any], outputs: list[str] | None = None, hook: Hook | None = None
    ) -> dict[str, np.ndarray]:
        """Feed the input blobs, return the requested blobs (default: the outputs)."""
        checked = {n: self._feed(n, v) for n, v in feeds.items()}
        return self.plan.run(checked, outputs, hook)

    def create_extractor(self) -> Extractor:
        return Extractor(self)

    # ------------------------------------------------------------------ writing
    def typed_params(self, layer: Layer) -> dict[int, Any]:
        """The layer's params with binary raw values given their declared types (for the text writer)."""
        out: dict[int, Any] = {}
        declared = {p.id: p for p in (layer.spec.params if layer.spec else ())}
        for pid, v in layer.decl.params.items():
            if isinstance(v, (RawScalar, RawArray)):
                p = declared.get(pid)
                if p is not None:
                    v = getattr(layer.params, p.name)
                elif isinstance(v, RawScalar):
                    v = int.from_bytes(v.bits, "little", signed=True)
                else:
                    v = [int(x) for x in np.frombuffer(v.bits, "<i4")]
            out[pid] = v
        return out

    def save(
        self, param_path: str | os.PathLike, bin_path: str | os.PathLike | None = None, binary: bool = False
    ) -> None:
        """Write the model back: the .bin byte for byte as read, the .param as text or binary."""
        layers = [
            _param.LayerDecl(
                L.decl.type,
                L.decl.name,
                L.decl.bottoms,
                L.decl.tops,
                L.decl.params if binary else self.typed_params(L),
                L.decl.line,
            )
            for L in self.layers
        ]
        pf = _param.ParamFile(layers, self.param_file.blob_count, None, binary)
        data = _param.write_binary(pf) if binary else _param.write_text(pf).encode()
        with open(param_path, "wb") as f:
            f.write(data)
        if bin_path is not None:
            with open(bin_path, "wb") as f:
                f.write(self.weights_bytes())

    def weights_bytes(self) -> bytes:
        src = self._bin_data or b""
        return b"".join(src[s:e] for (_w, _n, _t, _k, s, e) in self._records)


class Extractor:
    """ncnn's Extractor: set input blobs, extract any blob; computes only what that blob needs and keeps
    every blob it computed for later extracts."""

    def __init__(self, net: Net):
        self.net = net
        self._feeds: dict[str, np.ndarray] = {}
        self._blobs: dict[str, Any] = {}

    def input(self, name: str, array: Any) -> Extractor:
        self._feeds[name] = self.net._feed(name, array)
        self._blobs.clear()
        return self

    def extract(self, name: str) -> np.ndarray:
        if name in self._feeds:
            return self._feeds[name]
        if name not in self._blobs:
            if name not in self.net.blob_names:
                raise InputError(f"{self.net.path or 'net'}: no blob named {name!r}")

            def keep(_node: str, blob: str, value: Any) -> None:
                self._blobs[blob] = value

            self._blobs.update(self.net.plan.run(self._feeds, [name], keep))
        return self._blobs[name]
