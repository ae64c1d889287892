"""ncnn .param files: the text format (magic 7767517) and the binary .param.bin, read and written.

Text: line 1 the magic, line 2 ``layer_count blob_count``, then one layer per line:
``type name nbottom ntop bottom... top... id=value ...``. A value is a string if it starts with a letter
or ``"``, a float if it contains ``.``, ``e`` or ``E``, else an int; an array is ``-23300-id=len,v1,...``
(old style) or ``id=v1,v2,...``. Binary: int32 little-endian records, layer types by ncnn's type index,
blobs by index, params as raw 4-byte values (their type is the layer's to decide).
"""

from __future__ import annotations

import dataclasses
import re
import struct
from typing import Any

import numpy as np

from ..errors import ModelFormatError
from .spec import RawArray, RawScalar

MAGIC = 7767517
#: refuse counts above these: a file cannot make us allocate more than its size justifies
MAX_LAYERS = 1_000_000
MAX_PARAM_ID = 31  # ncnn's NCNN_MAX_PARAM_COUNT is 32

#: ncnn's layer registry order (the .param.bin type index), as the official wheel reports it
LAYER_INDEX: dict[str, int] = {
    "AbsVal": 0,
    "ArgMax": 1,
    "BatchNorm": 2,
    "Bias": 3,
    "BNLL": 4,
    "Concat": 5,
    "Convolution": 6,
    "Crop": 7,
    "Deconvolution": 8,
    "Dropout": 9,
    "Eltwise": 10,
    "ELU": 11,
    "Embed": 12,
    "Exp": 13,
    "Flatten": 14,
    "InnerProduct": 15,
    "Input": 16,
    "Log": 17,
    "LRN": 18,
    "MemoryData": 19,
    "MVN": 20,
    "Pooling": 21,
    "Power": 22,
    "PReLU": 23,
    "Proposal": 24,
    "Reduction": 25,
    "ReLU": 26,
    "Reshape": 27,
    "ROIPooling": 28,
    "Scale": 29,
    "Sigmoid": 30,
    "Slice": 31,
    "Softmax": 32,
    "Split": 33,
    "SPP": 34,
    "TanH": 35,
    "Threshold": 36,
    "Tile": 37,
    "RNN": 38,
    "LSTM": 39,
    "BinaryOp": 40,
    "UnaryOp": 41,
    "ConvolutionDepthWise": 42,
    "Padding": 43,
    "Squeeze": 44,
    "ExpandDims": 45,
    "Normalize": 46,
    "Permute": 47,
    "PriorBox": 48,
    "DetectionOutput": 49,
    "Interp": 50,
    "DeconvolutionDepthWise": 51,
    "ShuffleChannel": 52,
    "InstanceNorm": 53,
    "Clip": 54,
    "Reorg": 55,
    "YoloDetectionOutput": 56,
    "Quantize": 57,
    "Dequantize": 58,
    "Yolov3DetectionOutput": 59,
    "PSROIPooling": 60,
    "ROIAlign": 61,
    "Packing": 62,
    "Requantize": 63,
    "Cast": 64,
    "HardSigmoid": 65,
    "SELU": 66,
    "HardSwish": 67,
    "Noop": 68,
    "PixelShuffle": 69,
    "DeepCopy": 70,
    "Mish": 71,
    "StatisticsPooling": 72,
    "Swish": 73,
    "Gemm": 74,
    "GroupNorm": 75,
    "LayerNorm": 76,
    "Softplus": 77,
    "GRU": 78,
    "MultiHeadAttention": 79,
    "GELU": 80,
    "Convolution1D": 81,
    "Pooling1D": 82,
    "ConvolutionDepthWise1D": 83,
    "Convolution3D": 84,
    "ConvolutionDepthWise3D": 85,
    "Pooling3D": 86,
    "MatMul": 87,
    "Deconvolution1D": 88,
    "DeconvolutionDepthWise1D": 89,
    "Deconvolution3D": 90,
    "DeconvolutionDepthWise3D": 91,
    "Einsum": 92,
    "DeformableConv2D": 93,
    "GLU": 94,
    "Fold": 95,
    "Unfold": 96,
    "GridSample": 97,
    "CumulativeSum": 98,
    "CopyTo": 99,
    "Erf": 100,
    "Diag": 101,
    "CELU": 102,
    "Shrink": 103,
    "RMSNorm": 104,
    "Spectrogram": 105,
    "InverseSpectrogram": 106,
    "Flip": 107,
    "SDPA": 108,
    "RotaryEmbed": 109,
}
LAYER_NAME = {v: k for k, v in LAYER_INDEX.items()}


@dataclasses.dataclass
class LayerDecl:
    """One layer line of a .param (or record of a .param.bin)."""

    type: str
    name: str
    bottoms: list[str]
    tops: list[str]
    params: dict[int, Any]  # id -> int | float | str | list | RawScalar | RawArray
    line: int  # 1-based line (text) or layer index (binary)

    @property
    def where(self) -> str:
        return f"line {self.line} layer {self.name!r} ({self.type})"


@dataclasses.dataclass
class ParamFile:
    layers: list[LayerDecl]
    blob_count: int
    path: str | None
    binary: bool


# ---------------------------------------------------------------------- text
_INT = re.compile(r"[+-]?\d+\Z")


def parse_value(tok: str) -> Any:
    """One text value token -> str, float or int (ncnn's rules); raises ValueError if malformed."""
    if tok[:1] == '"':
        if len(tok) < 2 or tok[-1] != '"':
            raise ValueError(f"unterminated string {tok!r}")
        return tok[1:-1]
    if tok[:1].isalpha():
        return tok
    if "." in tok or "e" in tok or "E" in tok:
        return float(tok)
    if not _INT.match(tok):
        raise ValueError(f"not a number: {tok!r}")
    return int(tok)


def _split_tokens(line: str) -> list[str]:
    """Whitespace split that keeps quoted strings (which may hold spaces) together."""
    out, cur, quoted = [], [], False
    for ch in line:
        if ch == '"':
            quoted = not quoted
            cur.append(ch)
        elif ch.isspace() and not quoted:
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        out.append("".join(cur))
    return out


def parse_text(text: str, path: str | None = None) -> ParamFile:
    lines = text.splitlines()

    def err(line: int | None, msg: str) -> ModelFormatError:
        return ModelFormatError(path, f"line {line}" if line else None, msg)

    if not lines or lines[0].strip() != str(MAGIC):
        got = lines[0].strip()[:20] if lines else "(empty file)"
        raise err(1, f"unsupported param magic {got!r} (expected {MAGIC})")
    if len(lines) < 2:
        raise err(2, "missing 'layer_count blob_count' line")
    counts = lines[1].split()
    try:
        layer_count, blob_count = int(counts[0]), int(counts[1])
    except (ValueError, IndexError):
        raise err(2, f"expected 'layer_count blob_count', got {lines[1].strip()[:40]!r}") from None
    if not (0 <= layer_count <= MAX_LAYERS and 0 <= blob_count <= 16 * MAX_LAYERS):
        raise err(2, f"implausible counts {layer_count} layers, {blob_count} blobs")
    layers: list[LayerDecl] = []
    for ln in range(3, len(lines) + 1):
        raw = lines[ln - 1].strip()
        if not raw:
            continue
        if len(layers) == layer_count:
            raise err(ln, f"more layer lines than the declared layer_count {layer_count}")
        tok = _split_tokens(raw)
        if len(tok) < 4:
            raise err(ln, "a layer line needs 'type name nbottom ntop'")
        ltype, name = tok[0], tok[1]
        try:
            nb, nt = int(tok[2]), int(tok[3])
        except ValueError:
            raise err(ln, f"layer {name!r}: bad bottom/top counts {tok[2]!r} {tok[3]!r}") from None
        if nb < 0 or nt < 0 or 4 + nb + nt > len(tok):
            raise err(
                ln, f"layer {name!r}: declares {nb} bottoms and {nt} tops, the line has {max(len(tok) - 4, 0)} names"
            )
        bottoms, tops = tok[4 : 4 + nb], tok[4 + nb : 4 + nb + nt]
        params: dict[int, Any] = {}
        for kv in tok[4 + nb + nt :]:
            key, sep, val = kv.partition("=")
            where = f"line {ln} layer {name!r} ({ltype})"
            if not sep:
                raise ModelFormatError(path, where, f"expected id=value, got {kv!r}")
            try:
                kid = int(key)
            except ValueError:
                raise ModelFormatError(path, where, f"bad param id {key!r}") from None
            try:
                if kid <= -23300:
                    kid = -kid - 23300
                    parts = val.split(",")
                    n = int(parts[0])
                    if n != len(parts) - 1:
                        raise ValueError(f"array declares {n} elements, has {len(parts) - 1}")
                    value: Any = [parse_value(p) for p in parts[1:]]
                elif val[:1] == '"' or val[:1].isalpha():
                    value = parse_value(val)  # a string runs to its closing quote / the next space
                elif "," in val:
                    value = [parse_value(p) for p in val.split(",") if p != ""]
                else:
                    value = parse_value(val)
            except ValueError as e:
                raise ModelFormatError(path, where, f"param {key}: {e}") from None
            if isinstance(value, list) and any(isinstance(v, str) for v in value):
                raise ModelFormatError(path, where, f"param {kid}: strings inside an array")
            if not 0 <= kid <= MAX_PARAM_ID:
                raise ModelFormatError(path, where, f"param id {kid} outside 0..{MAX_PARAM_ID}")
            if kid in params:
                raise ModelFormatError(path, where, f"param id {kid} given twice")
            params[kid] = value
        layers.append(LayerDecl(ltype, name, bottoms, tops, params, ln))
    if len(layers) != layer_count:
        raise err(len(lines), f"declares {layer_count} layers, the file has {len(layers)} (truncated?)")
    n_blobs = len({t for L in layers for t in L.tops})
    if n_blobs != blob_count:
        raise err(2, f"declares {blob_count} blobs, the layers produce {n_blobs}")
    return ParamFile(layers, blob_count, path, binary=False)


def format_value(v: Any) -> str:
    """A value as a text token ncnn reads back exactly (floats: shortest float32 text, at most 15
    characters, since ncnn scans values with %15s)."""
    if isinstance(v, str):
        return f'"{v}"' if (not v[:1].isalpha() or any(c.isspace() or c in ',="' for c in v)) else v
    if isinstance(v, (float, np.floating)):
        f = np.float32(v)
        if not np.isfinite(f):
            raise ValueError(f"{v} cannot be written in a text .param (use .param.bin)")
        s = np.format_float_positional(f, unique=True, trim="0")
        if len(s) > 15:
            s = np.format_float_scientific(f, unique=True, trim="0")
        return s
    return str(int(v))


def write_text(pf: ParamFile) -> str:
    """A .param text the parser reads back to the same layers and params (old-style arrays)."""
    out = [str(MAGIC), f"{len(pf.layers)} {pf.blob_count}"]
    for L in pf.layers:
        parts = [f"{L.type:<24}", f"{L.name:<24}", str(len(L.bottoms)), str(len(L.tops)), *L.bottoms, *L.tops]
        for pid, v in sorted(L.params.items()):
            if isinstance(v, (RawScalar, RawArray)):
                raise ValueError("raw binary params cannot be written as text; resolve them first")
            if isinstance(v, (list, tuple, np.ndarray)):
                vals = list(np.asarray(v).ravel()) if isinstance(v, np.ndarray) else list(v)
                parts.append(f"{-23300 - pid}={len(vals)}" + "".join("," + format_value(x) for x in vals))
            else:
                parts.append(f"{pid}={format_value(v)}")
        out.append(" ".join(parts))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------- binary
def parse_binary(data: bytes, path: str | None = None) -> ParamFile:
    pos = 0

    def take(n: int, what: str) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise ModelFormatError(path, f"byte {pos}", f"file ends early reading {what}")
        b = data[pos : pos + n]
        pos += n
        return b

    def i32(what: str) -> int:
        return struct.unpack("<i", take(4, what))[0]

    if i32("magic") != MAGIC:
        raise ModelFormatError(path, "byte 0", f"unsupported param magic (expected {MAGIC})")
    layer_count, blob_count = i32("layer_count"), i32("blob_count")
    if not (0 <= layer_count <= min(MAX_LAYERS, len(data) // 12) and 0 <= blob_count <= len(data)):
        raise ModelFormatError(path, "byte 4", f"implausible counts {layer_count} layers, {blob_count} blobs")
    layers = []
    for k in range(layer_count):
        at = pos
        tindex = i32("layer type")
        ltype = LAYER_NAME.get(tindex)
        if ltype is None:
            raise ModelFormatError(
                path,
                f"byte {at} layer {k}",
                f"unknown layer type index {tindex}" + (" (custom layer)" if tindex & 256 else ""),
            )
        nb, nt = i32("bottom count"), i32("top count")
        if not (0 <= nb <= blob_count and 0 <= nt <= blob_count):
            raise ModelFormatError(path, f"byte {at} layer {k} ({ltype})", f"bad bottom/top counts {nb}, {nt}")
        bottoms = [i32("bottom index") for _ in range(nb)]
        tops = [i32("top index") for _ in range(nt)]
        for b in (*bottoms, *tops):
            if not 0 <= b < blob_count:
                raise ModelFormatError(
                    path, f"byte {at} layer {k} ({ltype})", f"blob index {b} outside 0..{blob_count - 1}"
                )
        params: dict[int, Any] = {}
        while True:
            pat = pos
            pid = i32("param id")
            if pid == -233:
                break
            if pid <= -23400:  # string
                sid = -pid - 23400
                n = i32("string length")
                if n < 0 or n > len(data):
                    raise ModelFormatError(path, f"byte {pat} layer {k} ({ltype})", f"bad string length {n}")
                raw = take((n + 3) // 4 * 4, "string")[:n]
                params[sid] = raw.decode("utf-8", errors="replace")
                pid = sid
            elif pid <= -23300:
                aid = -pid - 23300
                n = i32("array length")
                if n < 0 or 4 * n > len(data) - pos:
                    raise ModelFormatError(path, f"byte {pat} layer {k} ({ltype})", f"bad array length {n}")
                params[aid] = RawArray(take(4 * n, "array"))
                pid = aid
            else:
                params[pid] = RawScalar(take(4, "param value"))
            if not 0 <= pid <= MAX_PARAM_ID:
                raise ModelFormatError(
                    path, f"byte {pat} layer {k} ({ltype})", f"param id {pid} outside 0..{MAX_PARAM_ID}"
                )
        layers.append(LayerDecl(ltype, f"{ltype}_{k}", [str(b) for b in bottoms], [str(t) for t in tops], params, k))
    if pos != len(data):
        raise ModelFormatError(path, f"byte {pos}", f"{len(data) - pos} bytes left over after the last layer")
    return ParamFile(layers, blob_count, path, binary=True)


def _raw4(v: Any, kind_hint: str | None = None) -> bytes:
    if isinstance(v, RawScalar):
        return v.bits
    if isinstance(v, (float, np.floating)):
        return struct.pack("<f", float(v))
    return struct.pack("<i", int(v))


def write_binary(pf: ParamFile) -> bytes:
    """A .param.bin for ``pf`` (blob names are replaced by indices in order of first appearance)."""
    index: dict[str, int] = {}

    def blob(name: str) -> int:
        return index.setdefault(name, len(index))

    out = [struct.pack("<iii", MAGIC, len(pf.layers), pf.blob_count)]
    for L in pf.layers:
        if L.type not in LAYER_INDEX:
            raise ValueError(f"layer type {L.type} has no ncnn type index")
        out.append(struct.pack("<iii", LAYER_INDEX[L.type], len(L.bottoms), len(L.tops)))
        out.append(b"".join(struct.pack("<i", blob(b)) for b in L.bottoms))
        out.append(b"".join(struct.pack("<i", blob(t)) for t in L.tops))
        for pid, v in sorted(L.params.items()):
            if isinstance(v, str):
                raw = v.encode()
                out.append(struct.pack("<ii", -23400 - pid, len(raw)) + raw + b"\0" * (-len(raw) % 4))
            elif isinstance(v, RawArray):
                out.append(struct.pack("<ii", -23300 - pid, len(v.bits) // 4) + v.bits)
            elif isinstance(v, (list, tuple, np.ndarray)):
                vals = list(np.asarray(v).ravel()) if isinstance(v, np.ndarray) else list(v)
                out.append(struct.pack("<ii", -23300 - pid, len(vals)) + b"".join(_raw4(x) for x in vals))
            else:
                out.append(struct.pack("<i", pid) + _raw4(v))
        out.append(struct.pack("<i", -233))
    return b"".join(out)


def read(path: str) -> ParamFile:
    """Read a .param (text) or .param.bin (binary, recognized by its leading magic int)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelFormatError(path, None, f"cannot read: {e.strerror or e}") from None
    if data[:4] == struct.pack("<i", MAGIC):
        return parse_binary(data, path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelFormatError(
            path, f"byte {e.start}", "not a text .param (invalid UTF-8) and not a .param.bin (wrong magic)"
        ) from None
    return parse_text(text, path)
