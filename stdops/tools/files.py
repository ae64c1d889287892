"""Writing results whole or not at all: into a temporary file beside the target, renamed into place."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    write_with(path, lambda tmp: Path(tmp).write_bytes(data))


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_with(path: str | os.PathLike, writer: Callable[[str], object]) -> None:
    """``writer(tmp_path)`` fills a temporary file in the target's folder; it replaces ``path`` only when the
    writer returns (an exception leaves the old file, or none, and no temporary behind)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=".part", dir=target.parent if str(target.parent) else "."
    )
    os.close(fd)
    try:
        writer(tmp)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def move_into_place(files: dict[str, str | os.PathLike]) -> None:
    """Move finished files (temporary path -> final path) into place, after every one of them was written."""
    for src, dst in files.items():
        shutil.move(os.fspath(src), os.fspath(dst))
