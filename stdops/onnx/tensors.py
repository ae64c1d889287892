"""ONNX tensors and attributes as NumPy values, read once at load time: raw and typed data, packed
sub-byte types, sparse tensors, and external data, which is read only from the model's own folder (or
the ``base_dir`` a caller names) with offsets and lengths checked against the file before reading."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from .. import limits
from ..errors import ModelFormatError, ResourceLimitError, StdopsError

_A = onnx.AttributeProto


def convert_attribute(a: onnx.AttributeProto, where: str, path: str | None, base_dir: str | None = None) -> Any:
    """AttributeProto -> a Python value (see docs/kernels.md for the mapping). A tensor's external data is
    read from ``base_dir`` (the model's folder) only."""
    t = a.type
    try:
        if t == _A.FLOAT:
            return float(a.f)
        if t == _A.INT:
            return int(a.i)
        if t == _A.STRING:
            return a.s.decode("utf-8")
        if t == _A.TENSOR:
            return _tensor(a.t, f"{where} attribute {a.name!r}", path, base_dir)
        if t == _A.GRAPH:
            return a.g
        if t == _A.FLOATS:
            return tuple(float(v) for v in a.floats)
        if t == _A.INTS:
            return tuple(int(v) for v in a.ints)
        if t == _A.STRINGS:
            return tuple(s.decode("utf-8") for s in a.strings)
        if t == _A.TENSORS:
            return tuple(_tensor(x, f"{where} attribute {a.name!r}", path, base_dir) for x in a.tensors)
        if t == _A.GRAPHS:
            return tuple(a.graphs)
        if t == _A.TYPE_PROTO:
            return a.tp
        if t == _A.TYPE_PROTOS:
            return tuple(a.type_protos)
        if t == _A.SPARSE_TENSOR:
            return _inline_sparse(a.sparse_tensor, f"{where} attribute {a.name!r}", path, base_dir)
    except StdopsError:
        raise
    except Exception as e:  # noqa: BLE001 - corrupt tensor data, bad utf-8, ...
        raise ModelFormatError(path, where, f"attribute {a.name!r} cannot be read: {e}") from None
    raise ModelFormatError(path, where, f"attribute {a.name!r} has unsupported type {t}")


def _held_elements(t: onnx.TensorProto) -> int:
    """An upper bound on the elements a tensor's data can hold (4 per raw byte covers 2-bit packing)."""
    return max(
        4 * len(t.raw_data),
        len(t.float_data),
        len(t.int32_data),
        len(t.string_data),
        len(t.int64_data),
        len(t.double_data),
        len(t.uint64_data),
    )


def _tensor(t: onnx.TensorProto, where: str, path: str | None, base_dir: str | None) -> np.ndarray:
    dims = [int(d) for d in t.dims]
    if any(d < 0 for d in dims):
        raise ModelFormatError(path, where, f"negative dimension in dims {tuple(dims)}")
    n = math.prod(dims)
    external = t.data_location == onnx.TensorProto.EXTERNAL
    if n > limits.max_elements() and not external and n > _held_elements(t):
        raise ModelFormatError(
            path,
            where,
            f"dims {tuple(dims)} need {n} elements, the tensor's data holds "
            f"at most {_held_elements(t)} (corrupt dims or truncated data)",
        )
    try:
        limits.check_elements(dims, where, _itemsize(t.data_type))
    except ResourceLimitError as e:
        raise ResourceLimitError(f"{path}: {e}" if path else str(e)) from None
    if external:
        t = _with_external_data(t, where, path, base_dir)
    try:
        return numpy_helper.to_array(t)
    except StdopsError:
        raise
    except Exception as e:  # noqa: BLE001 - size mismatch, bad data type, ...
        raise ModelFormatError(path, where, f"cannot read tensor data: {e}") from None


#: bits per element of the packed (sub-byte) element types
_PACKED_BITS = {
    getattr(onnx.TensorProto, n): b
    for n, b in (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2))
    if hasattr(onnx.TensorProto, n)
}


def _itemsize(data_type: int) -> int | None:
    """Bytes per element of a TensorProto data type (1 for packed types; None when unknown)."""
    if data_type in _PACKED_BITS:
        return 1
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(data_type).itemsize
    except Exception:  # noqa: BLE001 - an unknown type: numpy_helper will refuse it
        return None


def _data_bytes(t: onnx.TensorProto, n: int) -> int | None:
    """The bytes of raw data a tensor of ``n`` elements holds (None: a type that has no raw form)."""
    if t.data_type == onnx.TensorProto.STRING:
        return None
    bits = _PACKED_BITS.get(t.data_type)
    if bits is not None:
        return (n * bits + 7) // 8
    size = _itemsize(t.data_type)
    return None if size is None else n * size


def _external_file(location: str, base_dir: str, where: str, path: str | None) -> str:
    """The file an external-data ``location`` names, refused unless it is inside ``base_dir`` (the model's
    folder): no absolute path, no '..', no symbolic link that leads out (ONNX IR, "External tensor data":
    the location is relative to the model file)."""
    if not location or "\0" in location:
        raise ModelFormatError(path, where, f"external data location {location!r} is not a file name")
    parts = location.replace("\\", "/").split("/")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or os.path.splitdrive(location)[0]:
        raise ModelFormatError(path, where, f"external data location {location!r} is absolute: refused")
    if ".." in parts:
        raise ModelFormatError(path, where, f"external data location {location!r} leaves the model's folder: refused")
    root = os.path.realpath(base_dir)
    full = os.path.realpath(os.path.join(root, *[p for p in parts if p]))
    if os.path.commonpath([full, root]) != root:
        raise ModelFormatError(
            path, where, f"external data location {location!r} leads outside the model's folder (a link?): refused"
        )
    if not os.path.isfile(full):
        raise ModelFormatError(path, where, f"external data file {location!r} does not exist in {base_dir}")
    return full


def _with_external_data(t: onnx.TensorProto, where: str, path: str | None, base_dir: str | None) -> onnx.TensorProto:
    """A copy of ``t`` holding its external data as raw bytes, read from the model's folder only, after
    checking offset and length against the file's size and the tensor's dims."""
    if base_dir is None:
        raise ModelFormatError(
            path,
            where,
            "the tensor's data is in an external file, and the model was given as bytes or a ModelProto: "
            "pass base_dir= (the folder that holds the model's data files)",
        )
    info = {e.key: e.value for e in t.external_data}
    try:
        offset = int(info.get("offset", "0") or 0)
        length = int(info["length"]) if info.get("length") not in (None, "") else None
    except ValueError:
        raise ModelFormatError(path, where, f"external data offset/length {info} are not integers") from None
    if offset < 0 or (length is not None and length < 0):
        raise ModelFormatError(path, where, f"external data offset {offset} / length {length} is negative")
    n = math.prod(int(d) for d in t.dims)
    need = _data_bytes(t, n)
    if need is None:
        raise ModelFormatError(path, where, f"a tensor of data type {t.data_type} cannot have external data")
    if length is not None and length != need:
        raise ModelFormatError(
            path, where, f"external data length {length} does not match dims {tuple(t.dims)} ({need} bytes)"
        )
    full = _external_file(info.get("location", ""), base_dir, where, path)
    size = os.path.getsize(full)
    if offset + need > size:
        raise ModelFormatError(
            path,
            where,
            f"external data needs bytes {offset}..{offset + need} of {info.get('location')!r}, "
            f"which holds {size} bytes",
        )
    try:
        with open(full, "rb") as f:
            f.seek(offset)
            data = f.read(need)
    except OSError as e:
        raise ModelFormatError(path, where, f"cannot read external data: {e.strerror or e}") from None
    if len(data) != need:
        raise ModelFormatError(path, where, f"external data file {info.get('location')!r} ended early")
    out = onnx.TensorProto()
    out.CopyFrom(t)
    del out.external_data[:]
    out.data_location = onnx.TensorProto.DEFAULT
    out.raw_data = data
    return out


def _inline_sparse(sp: onnx.SparseTensorProto, where: str, path: str | None, base_dir: str | None):
    """A sparse tensor whose values / indices in external files are read (safely) into a copy."""
    if sp.values.data_location != onnx.TensorProto.EXTERNAL and sp.indices.data_location != onnx.TensorProto.EXTERNAL:
        return sp
    out = onnx.SparseTensorProto()
    out.CopyFrom(sp)
    for part in (out.values, out.indices):
        if part.data_location == onnx.TensorProto.EXTERNAL:
            part.CopyFrom(_with_external_data(part, where, path, base_dir))
    return out
