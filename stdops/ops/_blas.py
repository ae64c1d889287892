"""BLAS threads: inside a model run OpenBLAS stays on one thread, and the big GEMMs are split into parts
by a fixed rule on their shape; the parts run on the caller's thread and on helper threads.

Why not OpenBLAS's own threads: its thread count is one process-wide number, so runs in several Python
threads would change it under each other's GEMMs, and OpenBLAS's results differ in the last bits between
thread counts for many shapes (its one-thread kernels for small and skinny matrices, its K blocking);
and its hand-off costs a scheduler time slice when the other core is busy (measured on 2 shared cores: a
256x256x128 GEMM 88x slower on 2 threads than on 1). Here instead:

- :func:`serial` (``Plan.run`` enters it) sets OpenBLAS to one thread while any run is active (a count
  of active runs under a lock: the first sets it, the last restores the caller's count);
- :func:`matmul` splits a GEMM of at least ``_SPLIT_FLOPS`` into 2 parts (4 from ``_SPLIT4_FLOPS``)
  along N (columns), else M (rows), else the batch axis, by a rule on the shape alone
  (:func:`split_plan`). Each part is an ordinary one-thread GEMM written into its slice of the result,
  so the result's bits depend on the shape only: the same with 1 or 2 threads, from run to run and from
  any number of Python threads at once. With one thread the GEMM runs whole where OpenBLAS's kernel is one of
  :data:`_WHOLE_SAME_BITS`: its SkylakeX kernel computes every output of a column, row or batch part with the
  same code and the same order over K as in the whole product (its K blocking depends on K alone, the cuts fall
  on multiples of 16), so the whole call gives the parts' bits, 8-12% sooner than the parts one after another
  (the repeated packing of the uncut operand); tests/ops/test_blas.py checks those bits over a grid of shapes.
  Its Haswell kernel (the one it picks on AVX2 machines, AMD Zen 3 among them) does not: the outputs of a tail
  block are summed in another order, so a part's edge moves bits (64 x 147 x 12544 cut at column 6272: 17676
  outputs differ in the last bit, measured with the OpenBLAS constraints.txt pins); there, and on any kernel not
  checked, one thread runs the parts one after another;
- :func:`run_parts` runs the parts: the caller takes the first, helpers (the caller's thread count minus
  one, started on first use, spinning between parts: see :data:`bell`) the others, and the caller runs itself any
  part no helper has started yet when it is done with its own. On a busy machine a second thread therefore
  costs at most a hand-off, never a wait for a descheduled thread that has not started.

A constant right operand can be prepared once as :class:`Panels`: contiguous blocks of its columns, each an
ordinary GEMM into its slice of the result (:func:`matmul_panels`; the same products, so bits that depend on
the shapes only, and parts for the helpers made of whole panels). For the shapes of :func:`panel_width`
(an inner dimension of 257 to 384, at least 768 columns: a ViT-small's QKV and first MLP projections)
that is faster than one GEMM on the whole matrix even on one thread, measured with the weights out of
cache as a model runs them: OpenBLAS re-packs the weight at every call and packs contiguous panels faster.

Without a BLAS whose thread count can be read and set (``threadpoolctl``-style symbols in the loaded
OpenBLAS) the splitting still runs, with as many helpers as ``os.cpu_count()`` allows (at most 1).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import math
import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_SPLIT_FLOPS = 1 << 25  # 33.5 MFLOP (~0.25 ms on one core): a hand-off (tens of us) is paid back above
_SPLIT4_FLOPS = 1 << 28  # 268 MFLOP: four parts (each still >= 67 MFLOP)
#: the compiled convolution kernels' parts (_fast_conv.py's direct kernel and Winograd products, _fast_winochan.py,
#: _fast_gemm.py) from twice as much: on a 2-vCPU AMD Zen 4 guest a hand-off measured 24 us median (6 min, 39 p90;
#: two empty parts, 200 us of work between calls), and a part on the other core reads what this one wrote from
#: outside its L2; measured, 2 threads against 1, alternating whole-model runs (medians): ShuffleNetV2 1.08/1.09 ->
#: 1.01/1.01, MobileNetV2 1.07/1.04 -> 1.01/0.99, ResNet-18 0.86/0.92 -> 0.91/0.75 (its Winograd rows and GEMMs
#: keep _SPLIT_FLOPS). Since the helpers spin (hand-off ~5-15 us) the stem (_fast_stem.py), the 1 x 1 kernel
#: (_fast_pointwise.py) and the channels-last block (_fast_blockcl.py) have thresholds of their own at 2^23, from
#: their steps measured alone at 1 and 2 threads (whole networks at 2 threads stayed within the host's noise, 0.97-1.02
#: A/B medians); _SPLIT_FLOPS at 2^24 measured the same (0.96-1.00)
_KERNEL_SPLIT_FLOPS = 1 << 26
# A part re-packs the operand the split does not cut (along N: A's rows, along M: all of B), so a split costs
# time even on one thread, the more the narrower its parts (measured alternating on one core, 2 parts: 128 rows
# x 1024 x 256 cut along M +10%, 197 x 1536 x 384 cut into 192-column parts +7%, 128 x 256 x 1024 into
# 512-column parts +4%): parts keep at least this many columns (N) or rows (M)
_MIN_COLS = 256
_MIN_ROWS = 128
_ALIGN = 16  # part boundaries on multiples of 16 (one AVX-512 register of float32)

_SET_NAMES = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads")
_GET_NAMES = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads")
_CORE_NAMES = ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename")


def _openblas_libs():
    """The OpenBLAS libraries numpy may have loaded (numpy.libs or the system's), opened."""
    roots = [os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs"), os.path.dirname(np.__file__)]
    for path in (p for r in roots for p in glob.glob(os.path.join(r, "**", "*openblas*.so*"), recursive=True)):
        try:
            yield ctypes.CDLL(path)
        except OSError:
            continue


def _find_openblas():
    """(get, set) of the OpenBLAS numpy loaded, or None."""
    for lib in _openblas_libs():
        for gname, sname in zip(_GET_NAMES, _SET_NAMES):
            get, put = getattr(lib, gname, None), getattr(lib, sname, None)
            if get is not None and put is not None:
                get.restype, put.argtypes = ctypes.c_int, [ctypes.c_int]
                return get, put
    return None


_API: Any = None  # resolved on first use: (get, set) or False
_state_lock = threading.Lock()
_active = 0  # runs inside serial(), all threads together
_saved = 1  # the BLAS thread count when the first active run began (restored when the last ends)


def _api():
    global _API
    if _API is None:
        _API = _find_openblas() or False
    return _API


#: the OpenBLAS kernels (``openblas_get_corename``) whose whole GEMM has the bits of its parts: checked by
#: tests/ops/test_blas.py on an Intel Skylake-X and an AMD Zen 4, both on this kernel (see the module doc)
_WHOLE_SAME_BITS = frozenset({"SkylakeX"})


@functools.cache
def core_name() -> str:
    """The loaded OpenBLAS's kernel name ("Haswell", "SkylakeX", ...), or "" where it cannot be read."""
    for lib in _openblas_libs():
        for name in _CORE_NAMES:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return (fn() or b"").decode("ascii", "replace").strip()
    return ""


@functools.cache
def whole_keeps_bits() -> bool:
    """Whether one GEMM call gives the bits of :func:`split_plan`'s parts with this OpenBLAS (see the module doc)."""
    return core_name() in _WHOLE_SAME_BITS


def threads() -> int:
    """The thread count the caller asked for: the BLAS count set when the active runs began (outside a run,
    the current one)."""
    with _state_lock:
        if _active:
            return _saved
    api = _api()
    if api:
        return max(1, int(api[0]()))
    return min(2, os.cpu_count() or 1)


@contextlib.contextmanager
def serial():
    """OpenBLAS on one thread while the block runs (nested and concurrent blocks share one setting)."""
    global _active, _saved
    api = _api()
    with _state_lock:
        if _active == 0:
            n = int(api[0]()) if api else min(2, os.cpu_count() or 1)
            _saved = max(1, n)
            if api and n > 1:
                api[1](1)
            bell[1] = int(_saved > 1)  # the helpers spin longer while runs on several threads are active
        _active += 1
    try:
        yield
    finally:
        with _state_lock:
            _active -= 1
            if _active == 0:
                bell[1] = 0
                if api and _saved > 1:
                    api[1](_saved)


# --------------------------------------------------------------------------- the parts and the helpers


class _Part:
    __slots__ = ("fn", "started", "done", "finished", "error")

    def __init__(self, fn: Callable[[], object]):
        self.fn = fn
        self.started = False
        self.done = threading.Event()
        self.finished = np.zeros(1, np.int64)  # 1 once run, set by the helper with release order (see _helper_loop)
        self.error: BaseException | None = None

    def claim(self) -> bool:
        with _state_lock:
            if self.started:
                return False
            self.started = True
            return True

    def run(self) -> None:
        try:
            self.fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller, which raises it
            self.error = e
        finally:
            self.done.set()


_queue: queue.SimpleQueue[_Part] = queue.SimpleQueue()
_helpers: list[threading.Thread] = []
#: Why the helpers and the caller spin: on a 2-vCPU guest whose idle cores halt (AMD Zen 4 under Firecracker,
#: haltpoll off), a thread asleep on the queue, an event or the GIL took 20-100 us to wake (run_parts of two 100 us
#: parts: 193 us median), so a split paid back only from ~0.5 ms of work. So run_parts rings a bell after queueing
#: (``bell[0]`` += the parts queued): a helper spins on it, compiled and outside the GIL (the ``pause`` hint), for
#: ``_IDLE_SPINS`` rounds before it sleeps on the queue, and the caller spins ``_WAIT_SPINS`` rounds on a started
#: part's ``finished`` before it sleeps on its event. A helper woken by a ring that asks for the GIL while the caller
#: still holds it sleeps on the GIL (a hand-off measured 40 us median inside MobileNetV2): so a first part may ring
#: itself, from its compiled code once the GIL is released (``first_rings``), and the helper waits ``_SETTLE_SPINS``
#: rounds after a ring before it asks for the GIL. While runs on several threads are active (``bell[1]``, set by
#: :func:`serial`) a helper spins up to ``_RUN_SPINS`` rounds: one that left its spin at the 2 ms idle timeout mid-run
#: had to take the GIL from the caller, and the caller then slept waiting to get it back (the transformer encoder's
#: LayerNorm steps 43 -> 107 us at 2 threads); a run with no split for that long (Python-heavy graphs, an MDF
#: simulation) lets its helper sleep rather than hold a core.
bell = np.zeros(2, np.int64)  # [the parts queued so far, 1 while runs on several threads are active]
_IDLE_SPINS = 80_000  # ~2 ms at ~26 ns a round (AMD Zen 4), after the last run on several threads has ended
_RUN_SPINS = 2_000_000  # ~50 ms while such a run is active: longer than the gaps between the splits of the zoo's nets
_WAIT_SPINS = 40_000  # ~1 ms: a helper's part that has not ended by then is most likely descheduled
_SETTLE_SPINS = 100  # ~2.6 us: a caller that rang from Python has entered its own part by then
_sync: Any = None  # ops/_llvm_sync.py where the compiled kernels are on (set by _ensure_helpers)
_NOTHING = np.zeros(1, np.int64)


def _unstarted() -> _Part | None:
    """The next queued part this helper claims, or None: parts the caller started itself are dropped on the way."""
    while True:
        try:
            part = _queue.get_nowait()
        except queue.Empty:
            return None
        if part.claim():
            return part


def _helper_loop() -> None:
    ran, seen = _NOTHING, int(bell[0])
    while True:
        part = None
        if _sync is not None:
            rung = int(_sync.release_and_spin(ran, bell, seen, _IDLE_SPINS, _RUN_SPINS, _SETTLE_SPINS))
            ran, seen, rang = _NOTHING, rung, rung != seen
            part = _unstarted()
            if part is None and rang:
                continue  # the caller ran them: spin again
        while part is None:  # nothing came while spinning: sleep on the queue
            part = _queue.get()
            seen = int(bell[0])
            part = part if part.claim() else _unstarted()
        part.run()
        ran = part.finished


def _ensure_helpers(n: int) -> None:
    global _sync
    with _state_lock:
        if not _helpers:
            from . import _fast

            if _fast.enabled():
                from . import _llvm_sync

                _sync = _llvm_sync
        while len(_helpers) < n:
            t = threading.Thread(target=_helper_loop, name=f"stdops-blas-{len(_helpers) + 1}", daemon=True)
            _helpers.append(t)
            t.start()


def _wait(part: _Part) -> None:
    if _sync is None or not _sync.spin_until_set(part.finished, _WAIT_SPINS):
        part.done.wait()


def run_parts(parts: Sequence[Callable[..., object]], first_completes: bool = False, first_rings: bool = False) -> None:
    """Run every callable of ``parts`` (independent pieces of one result): the first here, the others on
    helper threads when the caller's thread count allows, any part not started by a helper when this
    thread is done also here. Returns when all are done; raises the first part's error.

    ``first_completes``: the parts share one piece of work, claimed unit by unit in compiled code, and the first
    returns True once every unit is done (whoever ran it): the others are then neither run here nor waited for
    (a helper still in one only finds nothing left to claim). A wake-up through the parts' events costs ~30-70 us
    on a 2-vCPU guest, more than a unit.

    ``first_rings``: the first part is called with the count of parts queued, and adds it to :data:`bell` (with
    ``_llvm_sync.ring``) in its compiled code, where it no longer holds the GIL."""
    n = threads() - 1 if len(parts) > 1 else 0
    if n <= 0:
        parts[0](0) if first_rings else parts[0]()
        for p in parts[1:]:
            p()
        return
    _ensure_helpers(min(n, len(parts) - 1))
    rest = [_Part(fn) for fn in parts[1:]]
    for part in rest:
        _queue.put(part)
    if first_rings and _sync is not None:
        done = parts[0](len(rest))
    else:
        if _sync is not None:
            _sync.ring(bell, len(rest))
        done = parts[0](0) if first_rings else parts[0]()
    if done is True and first_completes:
        for part in rest:
            part.claim()  # not started yet: it never will be
        return
    for part in rest:
        if part.claim():
            part.run()
        else:
            _wait(part)
    for part in rest:
        if part.error is not None:
            raise part.error


# --------------------------------------------------------------------------- the split GEMM


def _flops(sa: tuple, sb: tuple) -> float:
    """2 x the multiply-adds of np.matmul on these shapes (batch axes broadcast)."""
    k = sa[-1] if sa else 1
    m = sa[-2] if len(sa) > 1 else 1
    n = sb[-1] if len(sb) > 1 else 1
    batch = max(math.prod(sa[:-2]), math.prod(sb[:-2]))
    return 2.0 * batch * m * n * k


def _cuts(size: int, parts: int) -> list[int]:
    step = -(-size // parts)
    step = -(-step // _ALIGN) * _ALIGN
    return [min(size, i * step) for i in range(parts)] + [size]


def split_plan(sa: tuple, sb: tuple) -> tuple[str, list[int]] | None:
    """How :func:`matmul` splits a GEMM of these shapes: ("n" | "m" | "batch", boundaries), or None (one call).
    A function of the shapes alone (the result's bits must not depend on the machine's state)."""
    if len(sa) < 2 or len(sb) < 2:
        return None
    flops = _flops(sa, sb)
    if flops < _SPLIT_FLOPS:
        return None
    parts = 4 if flops >= _SPLIT4_FLOPS else 2
    m, n = sa[-2], sb[-1]
    for p in (parts, 2) if parts > 2 else (2,):
        if len(sa) == 2 and len(sb) == 2:
            if n >= p * _MIN_COLS:
                return "n", _cuts(n, p)
            if m >= p * _MIN_ROWS:
                return "m", _cuts(m, p)
        elif len(sa) == len(sb) and sa[:-2] == sb[:-2] and len(sa) == 3 and sa[0] >= p:
            step = -(-sa[0] // p)
            return "batch", [min(sa[0], i * step) for i in range(p)] + [sa[0]]
    return None


def matmul(a: np.ndarray, b: np.ndarray, out=None) -> np.ndarray:
    """np.matmul(a, b[, out]); a big float GEMM split into parts by its shape (see the module doc)."""
    if a.ndim == 2 and b.ndim == 2 and 2.0 * a.shape[0] * a.shape[1] * b.shape[1] < _SPLIT_FLOPS:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)  # what split_plan says, sooner
    plan = split_plan(a.shape, b.shape) if a.dtype.kind == "f" and b.dtype == a.dtype else None
    if plan is None or (threads() == 1 and whole_keeps_bits()):  # the parts' bits in one call, 8-12% sooner
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    axis, cuts = plan
    if out is None:
        out = np.empty(a.shape[:-1] + b.shape[-1:], np.result_type(a, b))
    spans = [(c0, c1) for c0, c1 in zip(cuts, cuts[1:]) if c1 > c0]
    if axis == "n":
        parts = [lambda c0=c0, c1=c1: np.matmul(a, b[:, c0:c1], out=out[:, c0:c1]) for c0, c1 in spans]
    elif axis == "m":
        parts = [lambda c0=c0, c1=c1: np.matmul(a[c0:c1], b, out=out[c0:c1]) for c0, c1 in spans]
    else:
        parts = [lambda c0=c0, c1=c1: np.matmul(a[c0:c1], b[c0:c1], out=out[c0:c1]) for c0, c1 in spans]
    run_parts(parts)
    return out


# --------------------------------------------------------------------------- prepared column panels

_PANEL = 256  # columns per panel
_PANEL_MAX_K = 384  # measured (12 weights cycling, one thread, alternating): 197x384x1536 -9%, 197x384x1152
_PANEL_MIN_N = 768  # -6%; K = 512 or 768 gains nothing (+3% .. -5%)
# K = 256 measured again inside whole models (one thread, alternating, CPU-time medians of 100 pairs, the
# allocator tuned as in benchmarks/bench_zoo.py): the built 4-layer transformer encoder (128 x 256 x 1024) 1.2%
# faster with the weights whole, its four first MLP steps 545 -> 501 us each (stdops profile, 40 runs); the zoo's
# torch export 1.3% faster (without the allocator tuned: 2.9-3.9%); ViT-small (197 x 384 x 1152 / 1536) 4.0% slower
# whole. Isolated GEMMs agree (6 weights cycling: 128 x 256 x 1024 423 us whole, 468 us in 256-column panels)
_PANEL_MIN_K = 257


def panel_width(k: int, n: int) -> int | None:
    """Columns per panel for a constant (k, n) right operand, or None (kept whole): a rule on the shape alone."""
    return _PANEL if _PANEL_MIN_K <= k <= _PANEL_MAX_K and n >= _PANEL_MIN_N else None


class Panels:
    """A constant float (k, n) matrix as contiguous column panels (the last one narrower when n is no multiple
    of the width); ``shape``/``dtype`` are the matrix's."""

    __slots__ = ("shape", "dtype", "cuts", "blocks")

    def __init__(self, w: np.ndarray, width: int):
        k, n = w.shape
        self.shape, self.dtype = (k, n), w.dtype
        self.cuts = list(range(0, n, width)) + [n]
        self.blocks = [np.ascontiguousarray(w[:, c0:c1]) for c0, c1 in zip(self.cuts, self.cuts[1:])]


def prepare_right(w: np.ndarray) -> np.ndarray | Panels:
    """A constant 2-D float right operand prepared for :func:`matmul_panels`: Panels where :func:`panel_width`
    says so, else the matrix itself, contiguous."""
    width = panel_width(*w.shape) if w.ndim == 2 and w.dtype.kind == "f" else None
    return Panels(w, width) if width else np.ascontiguousarray(w)


def matmul_panels(a: np.ndarray, w: np.ndarray | Panels) -> np.ndarray:
    """a (m, k) @ the prepared right operand (see :func:`prepare_right`): a fresh (m, n) array. Panels run as
    one GEMM each, grouped into 2 or 4 parts for the helper threads by the product's size (the thresholds of
    :func:`split_plan`)."""
    if not isinstance(w, Panels):
        return matmul(a, w)
    k, n = w.shape
    out = np.empty((a.shape[0], n), np.result_type(a.dtype, w.dtype))
    spans = list(zip(w.cuts, w.cuts[1:], w.blocks))
    flops = 2.0 * a.shape[0] * k * n
    parts = 1 if flops < _SPLIT_FLOPS else (4 if flops >= _SPLIT4_FLOPS else 2)
    parts = min(parts, len(spans))
    if parts == 1:
        for c0, c1, blk in spans:
            np.matmul(a, blk, out=out[:, c0:c1])
        return out
    step = -(-len(spans) // parts)

    def run(group: list) -> None:
        for c0, c1, blk in group:
            np.matmul(a, blk, out=out[:, c0:c1])

    groups = [spans[i : i + step] for i in range(0, len(spans), step)]
    run_parts([functools.partial(run, g) for g in groups])
    return out
