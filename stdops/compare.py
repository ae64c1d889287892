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
    #: the peer runtime failed on this value (refused the model, crashed): the note says how
    peer_failed: bool = False

    def ok(self, atol: float, rtol: float) -> bool:
        return not self.note and self.max_abs <= atol + rtol * self._scale

    @property
    def rel_err(self) -> float:
        """One relative error for the whole value: max|ours - theirs| / max|theirs| (nan when not comparable)."""
        if self.note:
            return float("nan")
        if self._scale > 0:
            return self.max_abs / self._scale
        return 0.0 if self.max_abs == 0 else float("inf")

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


#: the wheel's options for an exact fp32 run (packing, fp16/bf16, Winograd, sgemm off; one thread)
EXACT_NCNN_OPTIONS = dict(
    num_threads=1,
    use_vulkan_compute=False,
    use_packing_layout=False,
    use_fp16_packed=False,
    use_fp16_storage=False,
    use_fp16_arithmetic=False,
    use_bf16_packed=False,
    use_bf16_storage=False,
    use_winograd_convolution=False,
    use_sgemm_convolution=False,
)


def _int_input_blobs(net) -> set[str]:
    """Input blobs that reach an Embed layer (through Split / Noop): the wheel reads those blobs' bits as
    int32 token ids, so they are fed as int32 Mats."""
    source = {t: t for t in net.input_names}
    for L in net.layers:
        if L.type in ("Split", "Noop"):
            for b, t in zip(L.decl.bottoms * len(L.decl.tops), L.decl.tops):
                if b in source:
                    source[t] = source[b]
    return {source[L.decl.bottoms[0]] for L in net.layers if L.type == "Embed" and L.decl.bottoms[0] in source}


def _wheel_blobs(param, bin_path, binary, feeds, names, options):
    """(in a forked child) every named blob from the wheel: an array, or a string saying why not."""
    import ncnn

    net = ncnn.Net()
    net.opt.lightmode = False  # keep every blob for extraction
    for k, v in options.items():
        setattr(net.opt, k, v)
    if (net.load_param_bin(param) if binary else net.load_param(param)) != 0:
        return "the wheel refused the .param"
    if bin_path and net.load_model(bin_path) != 0:
        return "the wheel refused the .bin"
    ex = net.create_extractor()
    keep = []
    for key, x in feeds:
        keep.append(x)  # ncnn.Mat(ndarray) is a view
        if ex.input(key, ncnn.Mat(x).clone()) != 0:
            return f"the wheel refused input {key!r}"
    out: dict[str, Any] = {}
    for name in names:
        ret, m = ex.extract(int(name) if binary else name)
        if ret != 0:
            out[name] = f"the wheel failed (extract returned {ret})"
            continue
        if m.elempack != 1:
            flat = ncnn.Mat()
            ncnn.convert_packing(m, flat, 1)
            m = flat
        out[name] = np.array(m.numpy(), copy=True) if m.dims else np.zeros((0,), np.float32)
    return out


def _forked(fn, *args, timeout: float = 600.0):
    """fn(*args) in a forked child: (result, None), or (None, why) when the child crashed or hung."""
    import multiprocessing as mp
    import traceback

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)

    def run():
        import faulthandler

        faulthandler.disable()  # a segfault in the wheel is reported by the parent, not dumped here
        try:
            child.send(("ok", fn(*args)))
        except BaseException:  # noqa: BLE001 - reported to the parent
            child.send(("error", traceback.format_exc(limit=2)))
        finally:
            child.close()

    proc = ctx.Process(target=run)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            proc.kill()
            return None, f"the wheel did not answer in {timeout:g}s"
        status, payload = parent.recv()
    except EOFError:
        proc.join(5)
        code = proc.exitcode
        sig = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return None, f"the wheel crashed ({sig})"
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
    if status != "ok":
        return None, f"the wheel raised: {payload.strip().splitlines()[-1]}"
    return payload, None


def compare_ncnn(
    param: str,
    bin_path: str | None,
    feeds: dict[str, np.ndarray],
    exact: bool = True,
    notes: list[str] | None = None,
) -> list[ValueDiff]:
    """Every blob of the ncnn model: stdops vs the ncnn wheel (exact-fp32 options unless ``exact`` is False).

    The wheel runs in a forked process: where it refuses the model, fails a blob or crashes, those values
    carry the wheel's failure as their note (``peer_failed``) instead of ending the comparison. A crash with
    packing off (the exact options) is retried once with packing on; ``notes`` receives that and any other
    remark on how the wheel ran. Inputs that feed an Embed layer go to the wheel as int32 (it reads token ids
    as int32 bits)."""
    try:
        import ncnn  # noqa: F401
    except ImportError:
        raise StdopsError("comparing ncnn models needs the ncnn wheel (pip install ncnn)") from None
    from . import ncnn as sncnn

    notes = notes if notes is not None else []
    net = sncnn.Net.load(param, bin_path)
    ours: dict[str, Any] = {}
    net.run(
        feeds,
        outputs=list(net.blob_names[len(net.input_names) :]) or None,
        hook=lambda node, name, v: ours.__setitem__(name, v),
    )
    binary = net.param_file.binary
    int_inputs = _int_input_blobs(net)
    wheel_feeds = []
    for k, x in feeds.items():
        a = np.asarray(x)
        a = np.ascontiguousarray(a, dtype=np.int32 if k in int_inputs else np.float32)
        wheel_feeds.append((int(k) if binary else k, a))
    names = [n for n in net.blob_names if n in ours]  # file order is a topological order
    options = dict(EXACT_NCNN_OPTIONS) if exact else {}
    theirs, why = _forked(_wheel_blobs, param, net.bin_path, binary, wheel_feeds, names, options)
    if theirs is None and exact and why and "crashed" in why:
        notes.append(f"{why} with packing off; the values below are the wheel's with packing on")
        theirs, why = _forked(
            _wheel_blobs, param, net.bin_path, binary, wheel_feeds, names, {**options, "use_packing_layout": True}
        )
    if isinstance(theirs, str):
        theirs, why = None, theirs
    if why:
        notes.append(why)
    producer = {t: (L.name, L.type) for L in net.layers for t in L.decl.tops}
    out = []
    for name in names:
        v = ours[name]
        node, op = producer.get(name, ("?", "?"))
        t = theirs.get(name) if theirs is not None else why
        if isinstance(t, str) or t is None:
            d = ValueDiff(node, op, name, np.shape(v), float("nan"), float("nan"), t or "the wheel failed")
            d.peer_failed = True
            out.append(d)
            continue
        out.append(_diff(node, op, name, v, t))
    return out


def first_disagreement(diffs: list[ValueDiff], atol: float, rtol: float) -> ValueDiff | None:
    """The first value outside tolerance; a value the peer failed to produce (``peer_failed``) is the
    peer's failure, not a disagreement, and is skipped."""
    for d in diffs:
        if not d.peer_failed and not d.ok(atol, rtol):
            return d
    return None
