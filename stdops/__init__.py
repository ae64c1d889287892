"""stdops: one exact NumPy runtime for the MDF standard functions, the ONNX operators and the ncnn layers.

``stdops.load(path)`` picks the front end by file type; ``stdops.onnx`` is the ONNX front end.
"""

from __future__ import annotations

import os
from typing import Any

from .errors import ModelFormatError, StdopsError  # noqa: F401

__version__ = "0.1.0"


def model_kind(path: Any) -> str:
    """ "onnx", "ncnn" or "mdf" by the file name (and, for .onnx without the extension, its first byte)."""
    p = os.fspath(path)
    low = p.lower()
    if low.endswith((".param", ".param.bin")):
        return "ncnn"
    if low.endswith((".json", ".yaml", ".yml")):
        return "mdf"
    return "onnx"


def __getattr__(name: str) -> Any:
    """``stdops.convert(src, dst, ...)``: the converters, imported on first use (the package is callable)."""
    if name == "convert":
        from . import convert

        return convert
    raise AttributeError(f"module 'stdops' has no attribute {name!r}")


def load(path: Any):
    """Load a model file, choosing the front end by its type: .onnx (ONNX), .param / .param.bin (ncnn,
    with the .bin beside it), .json / .yaml (MDF)."""
    p = os.fspath(path)
    ext = os.path.splitext(p)[1].lower()
    if ext == ".onnx" or ext == ".pb":
        from . import onnx as _onnx

        return _onnx.load(p)
    if ext in (".json", ".yaml", ".yml"):
        from . import mdf as _mdf

        return _mdf.load(p)
    if p.endswith(".param") or p.endswith(".param.bin"):
        from . import ncnn as _ncnn

        return _ncnn.Net.load(p)
    if not os.path.exists(p):
        raise ModelFormatError(p, None, "no such file")
    with open(p, "rb") as f:
        head = f.read(16)
    if head[:1] == b"\x08":  # an ONNX ModelProto starts with field 1 (ir_version), varint
        from . import onnx as _onnx

        return _onnx.load(p)
    raise ModelFormatError(
        p, None, f"unknown model type {ext or '(no extension)'!r}: expected .onnx, .param, .param.bin, .json or .yaml"
    )
