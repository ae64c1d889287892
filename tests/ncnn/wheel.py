"""The official ncnn wheel as a test oracle, one layer at a time, in a forked subprocess.

The layer is written with OUR writers (binary .param with raw 4-byte params typed by our declaration,
.bin with our declared load order and tags), loaded by ncnn.Net with exact-fp32 options, and every top is
extracted. A crash or a refusal in the wheel comes back as an OracleError instead of killing pytest.
The weights written are also a check of our declarations: wrong sizes or tags make ncnn refuse the model.
"""

from __future__ import annotations

import collections
import multiprocessing as mp
import os
import tempfile
import traceback
from collections.abc import Sequence
from typing import Any

import numpy as np

from stdops.ncnn.modelbin import ModelBinWriter
from stdops.ncnn.param import LayerDecl, ParamFile, write_binary, write_text
from stdops.ncnn.spec import LAYERS, RawArray, resolve_params

EXACT_OPTIONS = dict(
    num_threads=1,
    lightmode=False,
    use_vulkan_compute=False,
    use_packing_layout=False,
    use_fp16_packed=False,
    use_fp16_storage=False,
    use_fp16_arithmetic=False,
    use_bf16_packed=False,
    use_bf16_storage=False,
    use_winograd_convolution=False,
    use_winograd23_convolution=False,
    use_winograd43_convolution=False,
    use_winograd63_convolution=False,
    use_sgemm_convolution=False,
)


#: silence the wheel's own log lines (stderr of the forked child): the fuzzer provokes many refusals
QUIET = False

#: layer type -> cases run through the wheel in this process (the differential suite's count)
COUNTS: collections.Counter = collections.Counter()


class OracleError(RuntimeError):
    """The wheel refused or crashed on this case."""


def available() -> bool:
    try:
        import ncnn  # noqa: F401
    except ImportError:
        return False
    return True


def typed_params(type_name: str, params: dict[int, Any]) -> dict[int, Any]:
    """Values typed by our declaration (a float param written as float bits even if given as int)."""
    spec = LAYERS[type_name]
    kinds = {p.id: p.resolved_kind({q.name: q for q in spec.params}) for p in spec.params}
    out: dict[int, Any] = {}
    for pid, v in params.items():
        k = kinds.get(pid)
        if k == "float":
            v = float(v)
        elif k in ("floats", "ints") and isinstance(v, np.ndarray) and v.dtype in (np.float32, np.int32):
            v = RawArray(np.ascontiguousarray(v).ravel().tobytes())  # words, as our reader takes them
        elif k == "floats":
            v = [float(x) for x in np.asarray(v).ravel()]
        elif k == "ints":
            v = [int(x) for x in np.asarray(v).ravel()]
        elif k == "int":
            v = int(v)
        out[pid] = v
    return out


#: one case: (type_name, params, weights, inputs[, n_out])
Case = tuple


def _batch_files(cases: Sequence[Case], text: bool = False) -> tuple[bytes, bytes, list[list[int]], list[list[int]]]:
    layers, mb = [], ModelBinWriter()
    ins, outs = [], []
    nblob = 0
    for k, case in enumerate(cases):
        type_name, params, weights, inputs = case[:4]
        n_out = case[4] if len(case) > 4 else 1
        spec = LAYERS[type_name]
        p = resolve_params(spec, dict(params), type_name, None, len(inputs), n_out)
        declared = list(spec.weights(p))
        assert len(declared) == len(weights), f"case {k} {type_name}: {len(declared)} weights declared"
        bi = list(range(nblob, nblob + len(inputs)))
        nblob += len(inputs)
        bo = list(range(nblob, nblob + n_out))
        nblob += n_out
        if type_name == "Input":  # the Input layers themselves, with these params, feed and give the blobs
            for b in bi:
                layers.append(
                    LayerDecl("Input", f"op{k}_{b}", [], [str(b)], typed_params(type_name, params), len(layers))
                )
            nblob -= n_out
            ins.append(bi)
            outs.append(bi)
            continue
        for b in bi:
            layers.append(LayerDecl("Input", f"in{b}", [], [str(b)], {}, len(layers)))
        layers.append(
            LayerDecl(
                type_name,
                f"op{k}",
                [str(b) for b in bi],
                [str(b) for b in bo],
                typed_params(type_name, params),
                len(layers),
            )
        )
        for wd, arr in zip(declared, weights):
            a = np.asarray(arr)
            mb.write(a, wd.tagged, "int8" if a.dtype == np.int8 else "fp32")
        ins.append(bi)
        outs.append(bo)
    if text:  # the wheel parses the literals itself (int for float, arrays): our writer's text
        pf = ParamFile(layers, nblob, None, False)
        return write_text(pf).encode(), mb.getvalue(), ins, outs
    return write_binary(ParamFile(layers, nblob, None, True)), mb.getvalue(), ins, outs


def _batch_child(conn, pbin, mbin, inputs, ins, outs, unpack, options) -> None:
    import faulthandler

    faulthandler.disable()  # a crash is reported by the parent as an OracleError
    if QUIET:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
    try:
        import ncnn

        text = not pbin.startswith(b"\xdd\x85\x76\x00")  # binary magic 7767517, little-endian
        with tempfile.TemporaryDirectory() as d:
            pp, mp_ = os.path.join(d, "m.param" if text else "m.param.bin"), os.path.join(d, "m.bin")
            with open(pp, "wb") as f:
                f.write(pbin)
            with open(mp_, "wb") as f:
                f.write(mbin)
            net = ncnn.Net()
            for k, v in options.items():
                setattr(net.opt, k, v)
            if (net.load_param(pp) if text else net.load_param_bin(pp)) != 0:
                raise RuntimeError("ncnn refused the .param")
            if net.load_model(mp_) != 0:
                raise RuntimeError("ncnn refused the .bin")
            results = []
            for xs, bi, bo in zip(inputs, ins, outs):
                ex = net.create_extractor()
                mats = [ncnn.Mat(np.ascontiguousarray(x, dtype=np.float32)).clone() for x in xs]
                for b, m in zip(bi, mats):
                    if ex.input(str(b) if text else b, m) != 0:
                        raise RuntimeError(f"input {b} refused")
                res = []
                for b in bo:
                    ret, m = ex.extract(str(b) if text else b)
                    if ret != 0:
                        res.append(RuntimeError(f"extract returned {ret}"))
                        continue
                    if unpack and m.elempack != 1:
                        u = ncnn.Mat()
                        ncnn.convert_packing(m, u, 1)
                        res.append((np.array(u.numpy(), copy=True), int(m.elempack)))
                        continue
                    res.append(np.array(m.numpy(), copy=True) if m.dims else np.zeros((0,), np.float32))
                results.append(res)
        conn.send(("ok", results))
    except BaseException:  # noqa: BLE001
        conn.send(("error", traceback.format_exc(limit=3)))
    finally:
        conn.close()


def _run_in_child(
    pbin: bytes, mbin: bytes, inputs: list, ins: list, outs: list, unpack: bool, options: dict | None, timeout: float
) -> list[list[Any]]:
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_batch_child, args=(child, pbin, mbin, inputs, ins, outs, unpack, {**EXACT_OPTIONS, **(options or {})})
    )
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            proc.kill()
            raise OracleError(f"the wheel did not answer in {timeout}s")
        status, payload = parent.recv()
    except EOFError:
        proc.join(5)
        raise OracleError(f"the wheel crashed (exit code {proc.exitcode})") from None
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
    if status != "ok":
        raise OracleError(payload)
    return payload


def wheel_batch(
    cases: Sequence[Case],
    timeout: float = 120.0,
    unpack: bool = False,
    options: dict | None = None,
    text: bool = False,
) -> list[list[Any]]:
    """The wheel's outputs for every case (a list per case; an Exception where an extract failed), from one
    forked process; ``text``: the layers go to the wheel as a text .param (else binary). Every case is
    counted in COUNTS under its layer type."""
    pbin, mbin, ins, outs = _batch_files(cases, text)
    payload = _run_in_child(
        pbin, mbin, [[np.asarray(x) for x in c[3]] for c in cases], ins, outs, unpack, options, timeout
    )
    for c in cases:
        COUNTS[c[0]] += 1
        COUNTS["Input"] += 1  # every case feeds its blobs through Input layers
    return payload


def wheel_net(
    pbin: bytes,
    mbin: bytes,
    inputs: Sequence[np.ndarray],
    input_blobs: Sequence[int],
    output_blobs: Sequence[int],
    timeout: float = 120.0,
    options: dict | None = None,
) -> list[Any]:
    """A whole model (.param.bin bytes and .bin bytes) in the wheel: feed blobs by index, extract blobs by index."""
    (res,) = _run_in_child(
        pbin,
        mbin,
        [[np.asarray(x) for x in inputs]],
        [list(input_blobs)],
        [list(output_blobs)],
        False,
        options,
        timeout,
    )
    return res


def wheel_run(
    type_name: str,
    params: dict[int, Any],
    weights: Sequence[np.ndarray],
    inputs: Sequence[np.ndarray],
    n_out: int = 1,
    timeout: float = 60.0,
    options: dict | None = None,
) -> list[np.ndarray]:
    """Outputs of the wheel's ``type_name`` layer (exact-fp32 options unless ``options`` overrides)."""
    (res,) = wheel_batch([(type_name, params, weights, inputs, n_out)], timeout, options=options)
    for k, r in enumerate(res):
        if isinstance(r, Exception):
            raise OracleError(f"{type_name}: output {k}: {r}")
    return res


def assert_close(
    ours: Sequence[np.ndarray],
    theirs: Sequence[np.ndarray],
    atol: float = 1e-4,
    rtol: float = 1e-4,
    what: str = "",
    masks: Sequence[np.ndarray | None] | None = None,
) -> None:
    """Shapes equal (ncnn layout) and values within atol + rtol*|theirs| (a relative bound for large values).
    ``masks[k]``: compare output k only where True (where the wheel is deterministic, tests/ncnn/quirks.py)."""
    assert len(ours) == len(theirs), f"{what}: {len(ours)} outputs vs the wheel's {len(theirs)}"
    for k, (a, b) in enumerate(zip(ours, theirs)):
        a = np.asarray(a)
        b = np.asarray(b)
        assert a.shape == b.shape, f"{what} output {k}: shape {a.shape} vs the wheel's {b.shape}"
        m = masks[k] if masks is not None and k < len(masks) else None
        if m is not None:
            m = np.broadcast_to(m, a.shape)
            a, b = a[m], b[m]
        np.testing.assert_allclose(
            a.astype(np.float64),
            b.astype(np.float64),
            atol=atol,
            rtol=rtol,
            equal_nan=True,
            err_msg=f"{what} output {k}",
        )
