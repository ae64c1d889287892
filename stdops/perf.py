"""Process-level performance settings, applied only when asked (the CLI and the benchmarks ask;
importing stdops changes nothing global).

glibc returns every freed block above its mmap threshold (about 4 MB after warm-up) to the kernel, so
every large temporary of a model run is page-faulted in again: elementwise chains over 1M elements
run 3-4x slower than with the memory kept. Raising the mmap and trim thresholds keeps it.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def tune_allocator(threshold: int = 1 << 30) -> bool:
    """Keep freed blocks up to ``threshold`` bytes in the process (glibc only). Returns True if applied."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(mallopt(_M_TRIM_THRESHOLD, threshold))
