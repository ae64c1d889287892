"""Reading a user's file whole, bounded: the size is checked before anything is read, and every failure is
a ModelFormatError naming the file (the ONNX and MDF loaders and `stdops info` read through here)."""

from __future__ import annotations

import os

from .errors import ModelFormatError


def read_bounded(path: str, max_bytes: int, limit_name: str) -> bytes:
    """The bytes of ``path``; a file over ``max_bytes`` is refused (``limit_name`` says whose limit)."""
    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            raise ModelFormatError(path, None, f"file of {size} bytes is larger than {limit_name}")
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise ModelFormatError(path, None, f"cannot read: {e.strerror or e}") from None
