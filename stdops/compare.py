"""Compare stdops with another runtime value by value, to find the first node (layer) that disagrees.

- ONNX models against onnxruntime: every intermediate value is exposed as an extra graph output of a
  copy of the model (types from ONNX shape inference), so both runtimes report every value.
- ncnn models against the official ncnn wheel: every blob is extracted, with exact-fp32 options
  (or the wheel's defaults, to see what fp16 storage and Winograd cost).

The peers are optional dependencies: a missing one is a clear StdopsError.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from .errors import StdopsError


@dataclasses.dataclass
class ValueDiff:
    node: str  # producing node / layer
    op: str
    name: str  # value (blob) name
    shape: tuple
    max_abs: float  # nan when shapes or dtypes differ
    max_rel: float
    note: str = ""

    def ok(self, atol: float, rtol: float) -> bool:
        return not self.note and self.max_abs <= atol + rtol * self._scale

    _scale: float = 0.0


def _diff(node: str, op: str, name: str, ours: Any, theirs: Any) -> ValueDiff:
    a, b = np.asarray(ours), np.asarray(theirs)
    if a.shape != b.shape:
        return ValueDiff(node, op, name, a.shape, float("nan"), float("nan"), f"shape {a.shape} vs {b.shape}")
    if a.dtype.kind not in "fiucb" or b.dtype.kind not in "fiucb":
        same = bool(np.array_equal(a.astype(str), b.astype(str)))
        return ValueDiff(node, op, name, a.shape, 0.0 if same else float("inf"), 0.0, "" if same else "values differ")
    if a.size == 0:
        return ValueDiff(node, op, name, a.shape, 0.0, 0.0)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(b64)
    d = np.where(both_nan, 0.0, np.abs(a64 - b64))
    d = np.where(np.isnan(d), np.inf, d)
    scale = float(np.max(np.abs(b64[np.isfinite(b64)]))) if np.isfinite(b64).any() else 0.0
    rel = d / np.maximum(np.abs(b64), 1e-30)
    v = ValueDiff(node, op, name, a.shape, float(d.max()), float(np.nanmax(np.where(d == 0, 0.0, rel))))
    v._scale = scale
    return v


def compare_onnx(path: str, feeds: dict[str, np.ndarray]) -> list[ValueDiff]:
    """Every node output of the ONNX model at ``path``: stdops vs onnxruntime."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise StdopsError("comparing ONNX models needs onnxruntime (pip install onnxruntime)") from None
    import onnx

    from . import onnx as sonnx

    model = sonnx.load(path)
    ours: dict[str, Any] = {}
    producer: dict[str, tuple[str, str]] = {}
    model.run(feeds, hook=lambda node, name, v: ours.__setitem__(name, v))
    for n in model.plan.nodes:
        for o in n.outputs:
            producer[o] = (n.name, n.op)
    proto = onnx.ModelProto()
    proto.CopyFrom(model.proto)
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - inference is best effort
        inferred = proto
    typed = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    existing = {o.name for o in proto.graph.output}
    wanted = [name for name in ours if name in typed and name not in existing]
    for name in wanted:
        proto.graph.output.append(typed[name])
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        theirs = dict(zip(names, sess.run(names, {k: v for k, v in feeds.items()})))
    except Exception as e:  # noqa: BLE001 - onnxruntime's own refusal
        raise StdopsError(f"{path}: onnxruntime could not run the model: {e}") from None
    out = []
    for name, v in ours.items():
        if name in theirs:
            node, op = producer.get(name, ("?", "?"))
            out.append(_diff(node, op, name, v, theirs[name]))
    return out


def compare_ncnn(param: str, bin_path: str | None, feeds: dict[str, np.ndarray], exact: bool = True) -> list[ValueDiff]:
    """Every blob of the ncnn model: stdops vs the ncnn wheel (exact-fp32 options unless ``exact`` is False)."""
    try:
        import ncnn
    except ImportError:
        raise StdopsError("comparing ncnn models needs the ncnn wheel (pip install ncnn)") from None
    from . import ncnn as sncnn

    net = sncnn.Net.load(param, bin_path)
    ours: dict[str, Any] = {}
    net.run(
        feeds,
        outputs=list(net.blob_names[len(net.input_names) :]) or None,
        hook=lambda node, name, v: ours.__setitem__(name, v),
    )
    theirs_net = ncnn.Net()
    theirs_net.opt.lightmode = False  # keep every blob for extraction
    if exact:
        for k, v in dict(
            num_threads=1,
            use_vulkan_compute=False,
            use_packing_layout=False,
            use_fp16_packed=False,
            use_fp16_storage=False,
            use_fp16_arithmetic=False,
            use_bf16_storage=False,
            use_winograd_convolution=False,
            use_sgemm_convolution=False,
        ).items():
            setattr(theirs_net.opt, k, v)
    loaded = theirs_net.load_param_bin(param) if net.param_file.binary else theirs_net.load_param(param)
    if loaded != 0:
        raise StdopsError(f"{param}: the ncnn wheel refused the .param")
    if net.bin_path and theirs_net.load_model(net.bin_path) != 0:
        raise StdopsError(f"{net.bin_path}: the ncnn wheel refused the .bin")
    producer = {t: (L.name, L.type) for L in net.layers for t in L.decl.tops}
    ex = theirs_net.create_extractor()
    for k, x in feeds.items():
        ex.input(int(k) if net.param_file.binary else k, ncnn.Mat(np.ascontiguousarray(x, dtype=np.float32)).clone())
    out = []
    for name in net.blob_names:  # file order is a topological order
        if name not in ours:
            continue
        v = ours[name]
        ret, m = ex.extract(int(name) if net.param_file.binary else name)
        node, op = producer.get(name, ("?", "?"))
        if ret != 0:
            out.append(ValueDiff(node, op, name, np.shape(v), float("nan"), float("nan"), "the wheel failed"))
            continue
        out.append(_diff(node, op, name, v, np.array(m.numpy(), copy=True)))
    return out


def first_disagreement(diffs: list[ValueDiff], atol: float, rtol: float) -> ValueDiff | None:
    for d in diffs:
        if not d.ok(atol, rtol):
            return d
    return None
