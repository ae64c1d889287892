"""Declaring an ncnn layer once: its params (ids, names, types, defaults) in ncnn's load order, its
weights in load order, and the adapter that builds a step from them (DESIGN.md, "ncnn binding").

    @layer("Convolution",
           params=[P(0, "num_output", 0), P(1, "kernel_w", 0), P(11, "kernel_h", Ref("kernel_w")), ...],
           weights=lambda p: [W("weight", p.weight_data_size, tagged=True),
                              *([W("bias", p.num_output)] if p.bias_term else [])])
    def convolution(p, w):
        ...                       # precompute from p (params) and w (weights, by name)
        return lambda x: ...      # one step: bottoms in, top (or a tuple of tops) out

A param's type comes from its default (int, float, str) or is given: ``kind="ints"`` / ``"floats"`` for
arrays. ``Ref("kernel_w")`` makes a default follow another param's resolved value.

A layer declares the kernels it runs on, ``@layer("InnerProduct", kernels=(gemm, *FUSED), ...)``: the
registry records them (``stdops ops`` prints, per kernel, the ncnn layers bound to it, and ``stdops ops
-f ncnn`` the kernels of each layer), and tests/ncnn/test_declarations.py checks the declaration against
the code. Math that no kernel implements (ncnn's own int8 rounding, its detection decoders) is written in
the layer, which then says why with ``ncnn_only="..."``.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from ..ops._registry import kernel_of, record_use

KINDS = ("int", "float", "str", "ints", "floats")


@dataclasses.dataclass(frozen=True)
class Ref:
    """A default that is another param's resolved value (kernel_h := kernel_w)."""

    name: str


@dataclasses.dataclass(frozen=True)
class P:
    """One param: id, name, default (a value or Ref), kind."""

    id: int
    name: str
    default: Any
    kind: str | None = None

    def resolved_kind(self, by_name: dict[str, P]) -> str:
        if self.kind:
            return self.kind
        d = self.default
        if isinstance(d, Ref):
            return by_name[d.name].resolved_kind(by_name)
        if isinstance(d, bool) or isinstance(d, int):
            return "int"
        if isinstance(d, float):
            return "float"
        if isinstance(d, str):
            return "str"
        raise TypeError(f"param {self.name}: give kind= for default {d!r}")


@dataclasses.dataclass(frozen=True)
class W:
    """One weight blob in load order: element count and whether it is stored with a 4-byte type tag."""

    name: str
    size: int
    tagged: bool = False


@dataclasses.dataclass(frozen=True)
class RawScalar:
    """A .param.bin scalar: 4 bytes whose type the layer's declaration decides."""

    bits: bytes


@dataclasses.dataclass(frozen=True)
class RawArray:
    """A .param.bin array: 4-byte elements whose type the layer's declaration decides."""

    bits: bytes


@dataclasses.dataclass(frozen=True)
class LayerSpec:
    type_name: str
    params: tuple[P, ...]
    weights: Callable[[Any], Sequence[W]]
    build: Callable[[Any, dict[str, np.ndarray]], Callable]
    n_inputs: int | None  # None: any number
    n_outputs: int | None
    doc: str
    kernels: tuple[str, ...] = ()  # the kernels the layer runs on (names in stdops.ops.OPS)
    ncnn_only: str | None = None  # why part of the layer's math is its own (no kernel computes it)


#: ncnn layer type name -> declaration
LAYERS: dict[str, LayerSpec] = {}


def layer(
    type_name: str,
    params: Sequence[P] = (),
    weights: Callable[[Any], Sequence[W]] | None = None,
    inputs: int | None = 1,
    outputs: int | None = 1,
    kernels: Sequence[Callable] = (),
    ncnn_only: str | None = None,
) -> Callable:
    """Register an ncnn layer adapter (see the module docstring): its params, weights, bottom/top counts,
    the kernels it runs on, and ``ncnn_only``, the reason for the math it computes itself."""

    def register(build: Callable) -> Callable:
        if type_name in LAYERS:
            raise ValueError(f"ncnn layer {type_name} declared twice")
        ids = [p.id for p in params]
        if len(set(ids)) != len(ids):
            raise ValueError(f"ncnn layer {type_name}: duplicate param ids")
        by_name = {p.name: p for p in params}
        for p in params:
            k = p.resolved_kind(by_name)
            if k not in KINDS:
                raise ValueError(f"ncnn layer {type_name}: param {p.name} has unknown kind {k}")
        names = tuple(dict.fromkeys(kernel_of(k).name for k in kernels))
        LAYERS[type_name] = LayerSpec(
            type_name,
            tuple(params),
            weights or (lambda p: ()),
            build,
            inputs,
            outputs,
            (build.__doc__ or "").strip(),
            names,
            ncnn_only,
        )
        for k in names:
            record_use(k, "ncnn", type_name)
        return build

    return register


class Params:
    """Resolved params of one layer: attribute access by name, ``ids`` the raw values seen, and
    ``n_bottoms`` / ``n_tops``: how many blobs the layer reads and writes."""

    def __init__(self, values: dict[str, Any], ids: dict[int, Any], n_bottoms: int = 1, n_tops: int = 1):
        self.__dict__.update(values)
        self._values = values
        self.ids = ids
        self.n_bottoms = n_bottoms
        self.n_tops = n_tops

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def __repr__(self) -> str:
        return "Params(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ")"


def _convert(value: Any, kind: str, where: str, path: str | None, pid: int, name: str) -> Any:
    def bad(msg: str) -> ModelFormatError:
        return ModelFormatError(path, where, f"param {pid} ({name}): {msg}")

    if isinstance(value, RawScalar):
        if kind == "int":
            return struct.unpack("<i", value.bits)[0]
        if kind == "float":
            return struct.unpack("<f", value.bits)[0]
        raise bad(f"a scalar was given for a {kind} param")
    if isinstance(value, RawArray):
        if kind == "ints":
            return [int(v) for v in np.frombuffer(value.bits, "<i4")]
        if kind == "floats":
            return [float(v) for v in np.frombuffer(value.bits, "<f4")]
        raise bad(f"an array was given for a {kind} param")
    if kind == "int":
        if isinstance(value, (bool, np.bool_)):
            return int(value)
        if isinstance(value, (int, np.integer)):
            return _int32(int(value), bad)
        if isinstance(value, (float, np.floating)):
            raise bad(f"a float literal {value!r} was given for an int param")
        raise bad(f"expected an int, got {type(value).__name__}")
    if kind == "float":
        if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
            return _float32(value, bad)
        raise bad(f"expected a float, got {type(value).__name__}")
    if kind == "str":
        if isinstance(value, str):
            return value
        raise bad(f"expected a string, got {type(value).__name__}")
    # arrays
    if isinstance(value, np.ndarray):
        if value.dtype in (np.float32, np.int32) and kind in ("ints", "floats"):
            # a float32 / int32 array is 4-byte words, as a .param.bin holds them: the declaration types
            # them (ncnn reads an int array's words as ints whatever was written)
            return _convert(RawArray(np.ascontiguousarray(value).ravel().tobytes()), kind, where, path, pid, name)
        value = value.ravel().tolist()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]  # a one-element array written as a scalar
    if not isinstance(value, (list, tuple)):
        raise bad(f"expected an array, got {type(value).__name__}")
    if kind == "ints":
        if any(isinstance(v, (float, np.floating)) for v in value):
            # ncnn's text parser stores a float literal as float bits and the layer then refuses the array
            raise bad("a float element was given for an int array")
        return [_int32(int(v), bad) for v in value]
    return [_float32(v, bad) for v in value]


def _int32(v: int, bad: Callable[[str], ModelFormatError]) -> int:
    """ncnn keeps int params in an int32: a text literal outside its range is refused, not passed on."""
    if not -(2**31) <= v < 2**31:
        raise bad(
            f"{v if abs(v) < 10**30 else 'a ' + str(len(str(abs(v)))) + '-digit number'} is outside the int32 range"
        )
    return v


def _float32(v: Any, bad: Callable[[str], ModelFormatError]) -> float:
    try:
        with np.errstate(over="ignore"):
            return float(np.float32(float(v)))  # beyond float32's range: inf, as ncnn's strtof gives
    except OverflowError:  # an int literal beyond any float
        raise bad(f"a {len(str(abs(int(v))))}-digit number is outside the float range") from None


def resolve_params(
    spec: LayerSpec, raw: dict[int, Any], where: str, path: str | None, n_bottoms: int = 1, n_tops: int = 1
) -> Params:
    """Apply a layer's declaration to the raw ``id -> value`` map of a file or a caller: type checks,
    defaults, Refs. Ids the declaration does not know (30 and 31 included) are kept in ``ids`` only."""
    by_name = {p.name: p for p in spec.params}
    by_id = {p.id: p for p in spec.params}
    values: dict[str, Any] = {}
    for pid, value in raw.items():
        p = by_id.get(pid)
        if p is not None:
            values[p.name] = _convert(value, p.resolved_kind(by_name), where, path, pid, p.name)
    # defaults in declaration order; a Ref reads a param declared (and resolved) before it
    for p in spec.params:
        if p.name in values:
            continue
        d = p.default
        while isinstance(d, Ref):
            if d.name in values:
                d = values[d.name]
                break
            d = by_name[d.name].default
        values[p.name] = list(d) if isinstance(d, tuple) else d
    return Params(values, dict(raw), n_bottoms, n_tops)
