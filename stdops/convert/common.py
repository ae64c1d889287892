"""What every converter shares: the error for a construct with no counterpart in the target format."""

from __future__ import annotations

from ..errors import StdopsError


class ConversionError(StdopsError):
    """A layer, op or construct the target format cannot express (or that needs an option), naming the
    source file and the place in it."""

    def __init__(self, path: str | None, where: str | None, target: str, reason: str):
        self.path, self.where, self.target, self.reason = path, where, target, reason
        loc = ": ".join(p for p in (path, where) if p)
        super().__init__(f"{loc + ': ' if loc else ''}cannot convert to {target}: {reason}")


def load_onnx(path: str):
    """An .onnx file as a ModelProto (external data loaded from beside it); a bad file is a
    ModelFormatError naming it."""
    import os

    import onnx

    from ..errors import ModelFormatError

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelFormatError(path, None, f"cannot read: {e.strerror or e}") from None
    m = onnx.ModelProto()
    try:
        m.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise ModelFormatError(path, None, f"not a valid ONNX model (truncated or corrupt protobuf: {e})") from None
    if not m.HasField("graph") or not m.opset_import:
        raise ModelFormatError(path, None, "not a valid ONNX model (no graph or no opset_import)")
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
        try:
            from onnx.external_data_helper import load_external_data_for_model

            load_external_data_for_model(m, os.path.dirname(os.path.abspath(path)))
        except Exception as e:  # noqa: BLE001
            raise ModelFormatError(path, "external data", str(e)) from None
    return m
