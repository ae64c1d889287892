"""Greedy non-maximum suppression, blocked and vectorized: the one NMS loop shared by the ONNX
NonMaxSuppression kernel (detection.py) and the ncnn detection layers.

Greedy NMS walks the boxes in priority order and keeps a box unless a box kept before it suppresses
it. Done box by box that is one vectorized step per kept box (thousands of Python iterations on a
detector's output). Here the boxes are taken in blocks of up to ``_BLOCK`` live boxes:

1. inside a block, the keep flags solve K[j] = not any(K[i] and S[i, j] for i < j) on the block's
   (b, b) suppression matrix S by fixpoint iteration: each round fixes at least one more leading
   box, and a round that changes nothing has reached the unique solution (usually 2-4 rounds; a
   row-by-row pass over the block takes over after ``_ROUNDS``);
2. the block's kept boxes then suppress the live boxes after the block in one vectorized test.
   When suppression needs the two boxes' closed intervals to meet on both axes (``overlap_only``),
   only the pairs a sweep over one axis finds are tested: boxes sorted by their low edge, box j
   can meet box i only if lo_j lies in [lo_i - max extent, hi_i] (with per-class coordinate offsets,
   as exporters write batched NMS, that is the box's own class). Pair batches are bounded by
   ``_PAIRS`` elements, so memory stays small whatever the box count.

The suppression test itself (the IoU rule and its degenerate cases) belongs to the caller: the ONNX
and ncnn rules differ for empty and inverted boxes.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_BLOCK = 256  # live boxes per block: the (b, b) matrix stays in cache
_ROUNDS = 12  # fixpoint rounds before the row-by-row pass
_PAIRS = 1 << 20  # pairs tested per vectorized batch

Suppresses = Callable[[np.ndarray, np.ndarray], np.ndarray]


def greedy_nms(
    lo: tuple[np.ndarray, np.ndarray],
    hi: tuple[np.ndarray, np.ndarray],
    suppresses: Suppresses,
    *,
    limit: int | None = None,
    overlap_only: bool = True,
) -> np.ndarray:
    """Positions (int64, ascending) kept by greedy NMS over n boxes given in priority order.

    ``lo``/``hi``: the boxes' low and high edges on two axes, arrays (n,) each. ``suppresses(i, j)``,
    vectorized over broadcast index arrays, is True where a kept box i removes box j (i before j).
    ``limit``: stop after that many kept boxes. ``overlap_only``: the caller guarantees that
    suppresses(i, j) is False whenever [lo, hi] of i and j are disjoint on either axis (with finite
    edges); the kernel then tests only the pairs whose intervals meet on one axis.
    """
    n = int(lo[0].shape[0])
    limit = n if limit is None else max(0, min(int(limit), n))
    if n == 0 or limit == 0:
        return np.zeros((0,), np.int64)
    sweep = _Sweep(lo, hi) if overlap_only else None
    alive = np.ones(n, bool)
    kept: list[np.ndarray] = []
    nkept, s = 0, 0
    while s < n and nkept < limit:
        blk = s + np.flatnonzero(alive[s:])[:_BLOCK]
        if blk.size == 0:
            break
        e = int(blk[-1]) + 1
        kb = blk[_resolve_block(suppresses, blk)]
        if nkept + kb.size >= limit:
            kept.append(kb[: limit - nkept])
            break
        kept.append(kb)
        nkept += kb.size
        if e < n and kb.size:
            if sweep is not None:
                sweep.suppress_after(kb, e, alive, suppresses)
            else:
                _suppress_dense(kb, e, alive, suppresses)
        s = e
    return np.concatenate(kept).astype(np.int64, copy=False) if kept else np.zeros((0,), np.int64)


def _resolve_block(suppresses: Suppresses, blk: np.ndarray) -> np.ndarray:
    """Keep flags of the block's boxes (all live on entry) under greedy NMS inside the block."""
    S = np.triu(suppresses(blk[:, None], blk[None, :]), 1)
    keep = np.ones(blk.size, bool)
    if not S.any():
        return keep
    for _ in range(_ROUNDS):
        new = ~S[keep].any(axis=0)
        if np.array_equal(new, keep):
            return keep
        keep = new
    keep = np.ones(blk.size, bool)  # a long suppression chain: row by row over the rows that suppress
    for i in np.flatnonzero(S.any(axis=1)):
        if keep[i]:
            keep &= ~S[i]
    return keep


def _suppress_dense(kb: np.ndarray, e: int, alive: np.ndarray, suppresses: Suppresses) -> None:
    """Every live box at position >= e tested against the kept boxes ``kb``, in bounded batches."""
    cand = e + np.flatnonzero(alive[e:])
    if cand.size == 0:
        return
    rows = max(1, _PAIRS // cand.size)
    for r0 in range(0, kb.size, rows):
        hit = suppresses(kb[r0 : r0 + rows, None], cand[None, :]).any(axis=0)
        if hit.any():
            alive[cand[hit]] = False
            cand = cand[~hit]
            if cand.size == 0:
                return


class _Sweep:
    """The boxes sorted by their low edge on the axis with the smaller relative extent, for finding
    the pairs whose intervals can meet on that axis."""

    def __init__(self, lo, hi):
        ext = [h - l for l, h in zip(lo, hi)]
        span = [abs(float(np.max(h) - np.min(l))) or 1.0 for l, h in zip(lo, hi)]
        ax = 0 if float(np.mean(ext[0])) / span[0] <= float(np.mean(ext[1])) / span[1] else 1
        self.lo, self.hi = lo[ax], hi[ax]
        self.order = np.argsort(self.lo, kind="stable")
        self.reach = self.lo.dtype.type(np.max(ext[ax]))  # the largest extent: lo_j >= lo_i - reach

    def suppress_after(self, kb, e, alive, suppresses) -> None:
        live = self.order[alive[self.order] & (self.order >= e)]
        if live.size == 0:
            return
        lo_sorted = self.lo[live]
        start = np.searchsorted(lo_sorted, self.lo[kb] - self.reach, "left")
        stop = np.searchsorted(lo_sorted, self.hi[kb], "right")
        counts = np.maximum(stop - start, 0)
        ends = np.cumsum(counts)
        total = int(ends[-1])
        r0 = 0
        while r0 < kb.size and total:
            # kept boxes r0..r1 whose candidate ranges add up to at most _PAIRS (at least one box)
            base = int(ends[r0] - counts[r0])
            r1 = max(r0 + 1, int(np.searchsorted(ends, base + _PAIRS, "right")))
            cnt = counts[r0:r1]
            m = int(cnt.sum())
            if m:
                first = np.repeat(start[r0:r1] - (ends[r0:r1] - cnt - base), cnt)
                jj = live[first + np.arange(m)]
                ii = np.repeat(kb[r0:r1], cnt)
                hit = suppresses(ii, jj)
                alive[jj[hit]] = False
            r0 = r1


def finite_edges(*edges: np.ndarray) -> bool:
    """Whether every edge is finite (the sweep's interval arithmetic needs it)."""
    return all(bool(np.isfinite(e).all()) for e in edges)
