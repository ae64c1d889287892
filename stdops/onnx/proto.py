"""The ONNX protobuf classes, without importing the ``onnx`` package.

``import onnx`` costs 0.5-2 s (it imports ml_dtypes and its C++ extension); reading a model's header for
``stdops info`` needs only the generated protobuf module, which depends on ``google.protobuf`` alone. We
load ``onnx/onnx_ml_pb2.py`` from the installed package under its own module name, so that a later
``import onnx`` reuses the same classes (no second registration in protobuf's descriptor pool, and
``isinstance(m, onnx.ModelProto)`` holds).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from types import ModuleType

from ..errors import ModelFormatError

_PB2 = "onnx.onnx_ml_pb2"
#: the largest .onnx file read into memory (protobuf's own limit is 2 GiB)
MAX_MODEL_BYTES = 2**31 - 1


def pb2() -> ModuleType:
    """The module defining ModelProto, GraphProto, TensorProto, ... (onnx's own when onnx is imported)."""
    mod = sys.modules.get(_PB2)
    if mod is not None:
        return mod
    spec = importlib.util.find_spec("onnx")
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = os.path.join(locations[0], "onnx_ml_pb2.py") if locations else ""
    if not os.path.isfile(path):  # an unusual layout: let the package load it
        import onnx  # noqa: F401

        return sys.modules[_PB2]
    file_spec = importlib.util.spec_from_file_location(_PB2, path)
    assert file_spec is not None and file_spec.loader is not None
    mod = importlib.util.module_from_spec(file_spec)
    sys.modules[_PB2] = mod
    try:
        file_spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[_PB2]
        raise
    return mod


def parse_model(data: bytes, path: str | None):
    """bytes -> ModelProto, or a ModelFormatError naming the file."""
    m = pb2().ModelProto()
    try:
        m.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise ModelFormatError(path, None, f"not a valid ONNX model (truncated or corrupt protobuf: {e})") from None
    if not m.HasField("graph") or not m.opset_import:
        raise ModelFormatError(
            path, None, "not a valid ONNX model (no graph or no opset_import; truncated or not an .onnx file)"
        )
    return m
