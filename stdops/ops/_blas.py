"""BLAS threads: a model run keeps BLAS on one thread and hands the caller's thread count only to the
GEMMs that gain from it.

OpenBLAS splits every GEMM above ~64^3 multiply-adds (and every GEMV above ~100^2) between its threads,
whose hand-off costs tens of microseconds on a quiet machine and a scheduler time slice (milliseconds)
when the other core is busy: measured on 2 cores shared with other work, a 256x256x128 GEMM took 88x
longer on 2 threads than on 1, an LSTM step's GEMVs 13x. So, inside :func:`serial` (``Plan.run`` enters
it), BLAS runs on one thread and :func:`matmul` decides per call:

- below ``_PAR_MIN_FLOPS`` a GEMM stays on one thread (the split never pays there);
- above, per size class (a power of two of flops), it measures one thread and the caller's count in turn
  (twice each), and runs the faster (the caller's count only when 25% faster), re-measuring the slower
  one at intervals that grow while it keeps losing, with its loss (so a loaded machine, where two
  threads can be 1000x slower, pays the exploration rarely, and a machine that becomes quiet is noticed).

OpenBLAS's results may differ in the last bits between thread counts (its one-thread small-matrix
kernels), so a GEMM of a size class being re-measured can round differently from the run before; with
one thread (``threadpoolctl.threadpool_limits(1)``, OPENBLAS_NUM_THREADS=1) runs repeat bit for bit. Without a
BLAS whose thread count can be read and set (``threadpoolctl``-style symbols in the loaded OpenBLAS),
everything here is a plain call. The setting is process-wide: runs in several Python threads at once
share it (their results are unaffected).
"""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import time
from typing import Any

import numpy as np

_PAR_MIN_FLOPS = 1 << 23  # 8.4 MFLOP: below, one thread always
_RETRY_MIN, _RETRY_MAX = 8, 1 << 20  # calls before re-measuring the slower thread count (growing)
_MARGIN = 0.75  # the caller's thread count must be this much faster per flop to be chosen
_FIRST = 4  # calls of a size class that measure both counts in turn before choosing

_SET_NAMES = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads")
_GET_NAMES = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads")


def _find_openblas():
    """(get, set) of the OpenBLAS numpy loaded (numpy.libs or the system's), or None."""
    roots = [os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs"), os.path.dirname(np.__file__)]
    candidates = [p for r in roots for p in glob.glob(os.path.join(r, "**", "*openblas*.so*"), recursive=True)]
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for gname, sname in zip(_GET_NAMES, _SET_NAMES):
            get, put = getattr(lib, gname, None), getattr(lib, sname, None)
            if get is not None and put is not None:
                get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
                return get, put
    return None


_API: Any = None  # resolved on first use: (get, set) or False
_limit = 0  # the caller's thread count while inside serial(); 0 outside
_depth = 0
# size class -> [seconds per flop on 1 thread, on the limit, calls, call of the next re-measurement, interval]
_classes: dict[int, list] = {}


def _api():
    global _API
    if _API is None:
        _API = _find_openblas() or False
    return _API


@contextlib.contextmanager
def serial():
    """BLAS on one thread for the block; :func:`matmul` may still give big GEMMs the caller's count."""
    global _limit, _depth
    api = _api()
    if not api or _depth:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    get, put = api
    n = int(get())
    _depth, _limit = 1, n
    if n > 1:
        put(1)
    try:
        yield
    finally:
        if n > 1:
            put(n)
        _depth, _limit = 0, 0


def _flops(sa: tuple, sb: tuple) -> float:
    """2 x the multiply-adds of np.matmul on these shapes (batch axes broadcast)."""
    k = sa[-1] if sa else 1
    m = sa[-2] if len(sa) > 1 else 1
    n = sb[-1] if len(sb) > 1 else 1
    batch = max(int(np.prod(sa[:-2], dtype=np.int64)), int(np.prod(sb[:-2], dtype=np.int64)))
    return 2.0 * batch * m * n * k


def matmul(a: np.ndarray, b: np.ndarray, out=None) -> np.ndarray:
    """np.matmul(a, b[, out]) on the thread count that is faster for its size (see the module doc)."""
    if _limit <= 1 or a.dtype.kind != "f":
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    flops = _flops(a.shape, b.shape)
    if flops < _PAR_MIN_FLOPS:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    key = int(flops).bit_length()
    st = _classes.get(key)
    if st is None:
        st = _classes[key] = [0.0, 0.0, 0, 0, _RETRY_MIN]
    rate1, rate2, calls, nxt, interval = st
    explore = calls < _FIRST or calls >= nxt
    if calls < _FIRST:
        par = bool(calls & 1)  # one thread and the caller's count in turn, twice each
    else:
        par = rate2 < _MARGIN * rate1
        if calls >= nxt:  # time to re-measure the slower one
            par = not par
    put = _API[1]
    if par:
        put(_limit)
    t0 = time.perf_counter()
    try:
        y = np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    finally:
        dt = (time.perf_counter() - t0) / flops
        if par:
            put(1)
    i = 1 if par else 0
    st[i] = dt if not st[i] else 0.7 * st[i] + 0.3 * dt
    if explore and calls >= _FIRST - 1:
        # the count just measured lost: re-measure it after twice the interval, and at least 20 x its loss
        # (a loaded machine can make two threads 1000x slower: exploring then costs under 5% of the calls)
        lost = (st[1] < _MARGIN * st[0]) != par
        if lost:
            loss = (st[1] / st[0]) if par else (st[0] / st[1])
            interval = min(_RETRY_MAX, max(2 * interval, int(20 * loss)))
        else:
            interval = _RETRY_MIN
        st[3], st[4] = calls + interval, interval
    st[2] = calls + 1
    return y
