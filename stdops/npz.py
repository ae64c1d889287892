"""Named arrays to an ``.npz`` archive, whatever the names, at exactly the path given.

``np.savez(file, **arrays)`` takes the names as keyword arguments, so a value named ``file`` collides with
its first parameter (TypeError) and one named ``allow_pickle`` is taken for the flag and never written; it
also appends ``.npz`` to a path that ends otherwise (``out.NPZ`` became ``out.NPZ.npz``). Model outputs and
MDF ports are named by the model's author, so they go through this function instead: the same archive (one
``<name>.npy`` member per array, numpy's .npy format), read back by ``np.load``.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping
from typing import IO, Any

import numpy as np


def save_npz(path: str | os.PathLike[str] | IO[bytes], arrays: Mapping[str, Any]) -> None:
    """Write ``arrays`` to ``path`` (a file name, used as given, or a binary file). Pickling is refused (an
    object array raises ValueError): callers pass numeric arrays only."""
    target = os.fspath(path) if isinstance(path, (str, os.PathLike)) else path
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
