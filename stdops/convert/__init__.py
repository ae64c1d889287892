"""Converters between the three formats stdops runs: ``convert(src, dst)`` picks the direction by file type.

=====================  =================================================================================
ncnn -> ONNX           every ncnn layer with an ONNX expression as standard ONNX ops (opset 20, default
                       domain), weights as initializers, a batch axis of 1 added (ncnn_to_onnx.py)
ONNX -> MDF            one MDF node per ONNX node with an ``onnx::Op`` function, as modeci-mdf writes them
MDF -> ONNX            MDF graphs of ``onnx::`` functions, standard functions with an ONNX form and
                       expressions; stateful / time-stepped MDF is refused with the reason
ONNX -> ncnn           the ops both share, written with stdops' .param / .bin writers
ncnn <-> MDF           through ONNX
=====================  =================================================================================

Nothing is written half: each file goes to a temporary file in the destination's folder first and is
renamed into place once complete.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Mapping, Sequence
from typing import Any

from .common import ConversionError

__all__ = ["convert", "kind_of", "ConversionError", "to_onnx_model"]

_KINDS = {".onnx": "onnx", ".json": "mdf", ".yaml": "mdf", ".yml": "mdf", ".param": "ncnn"}


def kind_of(path: Any) -> str | None:
    """ "onnx", "mdf" or "ncnn" by the file name (.param.bin is ncnn), else None."""
    low = os.fspath(path).lower()
    if low.endswith(".param.bin"):
        return "ncnn"
    return _KINDS.get(os.path.splitext(low)[1])


def _ncnn_paths(param: str) -> tuple[str, str]:
    """(.param, .bin) beside each other: m.param -> m.bin, m.param.bin -> m.bin."""
    base = param[: -len(".param.bin")] if param.lower().endswith(".param.bin") else os.path.splitext(param)[0]
    return param, base + ".bin"


def to_onnx_model(
    src: Any,
    weights: Any = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    opset: int | None = None,
    graph: str | None = None,
):
    """The ONNX ModelProto of any model file (an .onnx file as it is)."""
    from .onnx_build import DEFAULT_OPSET

    src = os.fspath(src)
    kind = kind_of(src)
    if kind == "onnx":
        from .common import load_onnx

        return load_onnx(src)
    if kind == "ncnn":
        from .. import ncnn
        from .ncnn_to_onnx import convert_net

        net = ncnn.Net.load(src, weights)
        return convert_net(net, input_shapes, opset or DEFAULT_OPSET, src)
    if kind == "mdf":
        from .mdf_to_onnx import mdf_file_to_onnx

        return mdf_file_to_onnx(src, input_shapes=input_shapes, opset=opset, graph=graph)
    raise ConversionError(src, None, "ONNX", "unknown model type: expected .onnx, .param, .param.bin, .json or .yaml")


def convert(
    src: Any,
    dst: Any,
    *,
    weights: Any = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    opset: int | None = None,
    graph: str | None = None,
) -> list[str]:
    """Convert the model ``src`` into ``dst``, the direction by the two file types (see the module
    docstring); returns the files written. ``weights``: the ncnn .bin when it is not beside the .param;
    ``input_shapes``: {input: shape}: ncnn sources without the batch axis (Input layers that declare no
    shape), MDF input ports without a shape, ONNX inputs with dynamic sizes (ONNX -> ncnn; with the batch
    axis); ``opset``: of the ONNX written (20 or newer from ncnn); ``graph``: the MDF graph."""
    src, dst = os.fspath(src), os.fspath(dst)
    sk, dk = kind_of(src), kind_of(dst)
    if sk is None:
        raise ConversionError(
            src, None, dk or "?", "unknown source type: expected .onnx, .param, .param.bin, .json or .yaml"
        )
    if dk is None:
        raise ConversionError(dst, None, "?", "unknown destination type: expected .onnx, .param, .json or .yaml")
    if sk == dk:
        raise ConversionError(src, None, dk.upper(), f"the source and destination are both {sk.upper()}")
    if not os.path.exists(src):
        raise ConversionError(src, None, dk.upper(), "no such file")
    if dk == "onnx":
        model = to_onnx_model(src, weights, input_shapes, opset, graph)
        return [_write_bytes(dst, model.SerializeToString())]
    if dk == "mdf":
        from .onnx_to_mdf import onnx_to_mdf

        model = to_onnx_model(src, weights, input_shapes, opset, graph)
        doc = onnx_to_mdf(model, src)
        from ..mdf import io as mdf_io

        text = mdf_io.dumps(doc, "yaml" if dst.lower().endswith((".yaml", ".yml")) else "json")
        return [_write_bytes(dst, text.encode())]
    # ncnn
    from .onnx_to_ncnn import onnx_to_ncnn

    if sk == "onnx":  # an ONNX source's shapes are ONNX shapes (with the batch axis)
        model, shapes = to_onnx_model(src), input_shapes
    else:
        model, shapes = to_onnx_model(src, weights, input_shapes, opset, graph), None
    param_text, bin_bytes = onnx_to_ncnn(model, src, shapes)
    param_path, bin_path = _ncnn_paths(dst)
    if dst.lower().endswith(".param.bin"):
        raise ConversionError(dst, None, "ncnn", "write a text .param (the .bin goes beside it)")
    return _write_many([(bin_path, bin_bytes), (param_path, param_text.encode())])


def _temp_beside(path: str) -> str:
    import tempfile

    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".part", dir=folder)
    os.close(fd)
    return tmp


def _write_bytes(path: str, data: bytes) -> str:
    return _write_many([(path, data)])[0]


def _write_many(items: Sequence[tuple[str, bytes]]) -> list[str]:
    """Every file written to a temporary file beside it first; renamed into place only once all are
    complete (a failure leaves the destinations as they were)."""
    temps: list[tuple[str, str]] = []
    try:
        for path, data in items:
            tmp = _temp_beside(path)
            temps.append((tmp, path))
            with open(tmp, "wb") as f:
                f.write(data)
        for tmp, path in temps:
            os.replace(tmp, path)
    except OSError as e:
        for tmp, _ in temps:
            if os.path.exists(tmp):
                os.remove(tmp)
        raise ConversionError(items[0][0], None, "file", f"cannot write: {e.strerror or e}") from None
    return [p for _, p in temps]


class _CallablePackage(types.ModuleType):
    """``stdops.convert(src, dst)`` works whether ``stdops.convert`` is reached as the package (once any
    of its modules is imported, Python binds that name to it) or through ``stdops.__getattr__``."""

    def __call__(self, *args: Any, **kwargs: Any) -> list[str]:
        return convert(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
