"""ncnn .bin weights: read and written.

Weights are concatenated in layer order, within a layer in load order, with no headers. A *raw* load
reads n float32. A *tagged* load first reads a 4-byte flag: 0 -> n float32; 0x01306B47 -> n float16
(padded to 4 bytes); 0x000D4B38 -> n int8 (padded to 4); 0x0002C056 -> n float32 (legacy); any other
flag whose bytes do not sum to 0 -> a 256-entry float32 table then n uint8 indices (padded to 4).
"""

from __future__ import annotations

import struct

import numpy as np

from ..errors import ModelFormatError

FLAG_FP32 = 0x00000000
FLAG_FP16 = 0x01306B47
FLAG_INT8 = 0x000D4B38
FLAG_FP32_LEGACY = 0x0002C056


def _pad4(n: int) -> int:
    return (n + 3) // 4 * 4


class ModelBinReader:
    """Sequential reader over a .bin (bytes); every read names the layer and byte offset on failure."""

    def __init__(self, data: bytes | None, path: str | None = None):
        self.data = data if data is not None else b""
        self.path = path
        self.pos = 0
        self.storage: dict[str, int] = {}  # storage type -> bytes read, for `stdops info`
        #: (where, what, tagged, storage, start, end) per load: enough to write the file back byte for byte
        self.records: list[tuple[str, str, bool, str, int, int]] = []

    def _take(self, n: int, where: str, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ModelFormatError(
                self.path,
                where,
                f"weight file ends early at byte {len(self.data)} reading {what} ({n} bytes from byte {self.pos})",
            )
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def _count(self, kind: str, n: int) -> None:
        self.storage[kind] = self.storage.get(kind, 0) + n

    def load(self, n: int, tagged: bool, where: str, what: str) -> np.ndarray:
        """n elements: float32 for fp32/fp16/table storage (exactly widened), int8 for int8 storage."""
        start = self.pos
        before = dict(self.storage)
        arr = self._load(n, tagged, where, what)
        kind = next((k for k in self.storage if self.storage[k] != before.get(k, 0)), "fp32")
        self.records.append((where, what, tagged, kind, start, self.pos))
        return arr

    def _load(self, n: int, tagged: bool, where: str, what: str) -> np.ndarray:
        if n < 0:
            raise ModelFormatError(self.path, where, f"{what}: negative size {n} (bad params)")
        if n > len(self.data):  # cheap guard before any allocation the file cannot back
            raise ModelFormatError(self.path, where, f"{what}: {n} elements is more than the weight file holds")
        if not tagged:
            raw = self._take(4 * n, where, what)
            self._count("fp32", 4 * n)
            return np.frombuffer(raw, "<f4").astype(np.float32)
        at = self.pos
        flag_bytes = self._take(4, where, f"{what} type tag")
        flag = struct.unpack("<I", flag_bytes)[0]
        if flag in (FLAG_FP32, FLAG_FP32_LEGACY):
            self._count("fp32", 4 * n)
            return np.frombuffer(self._take(4 * n, where, what), "<f4").astype(np.float32)
        if flag == FLAG_FP16:
            raw = self._take(_pad4(2 * n), where, what)
            self._count("fp16", 2 * n)
            return np.frombuffer(raw[: 2 * n], "<f2").astype(np.float32)
        if flag == FLAG_INT8:
            raw = self._take(_pad4(n), where, what)
            self._count("int8", n)
            return np.frombuffer(raw[:n], np.int8).copy()
        if sum(flag_bytes) != 0:
            table = np.frombuffer(self._take(256 * 4, where, f"{what} quantization table"), "<f4")
            idx = np.frombuffer(self._take(_pad4(n), where, what)[:n], np.uint8)
            self._count("table8", n + 1024)
            return table[idx].astype(np.float32)
        raise ModelFormatError(self.path, f"{where} byte {at}", f"{what}: unknown weight type tag 0x{flag:08x}")

    def finish(self) -> None:
        if self.pos != len(self.data):
            raise ModelFormatError(
                self.path,
                f"byte {self.pos}",
                f"{len(self.data) - self.pos} bytes left over after the last layer's weights "
                f"(weights that do not match the params?)",
            )


class ModelBinWriter:
    """Builds a .bin in load order."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, array: np.ndarray, tagged: bool, storage: str = "fp32") -> None:
        a = np.ascontiguousarray(array).ravel()
        if not tagged:
            self.parts.append(a.astype("<f4").tobytes())
            return
        if storage == "fp32":
            self.parts.append(struct.pack("<I", FLAG_FP32) + a.astype("<f4").tobytes())
        elif storage == "fp16":
            raw = a.astype("<f2").tobytes()
            self.parts.append(struct.pack("<I", FLAG_FP16) + raw + b"\0" * (-len(raw) % 4))
        elif storage == "int8":
            raw = a.astype(np.int8).tobytes()
            self.parts.append(struct.pack("<I", FLAG_INT8) + raw + b"\0" * (-len(raw) % 4))
        else:
            raise ValueError(f"unknown storage {storage!r}")

    def write_raw_bytes(self, data: bytes) -> None:
        self.parts.append(data)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)
