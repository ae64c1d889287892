"""Folding repeated blocks: a run of identical blocks (transformer layers, residual blocks) is drawn once,
in a frame that says how many times it repeats, and the other instances become one box.

The boxes are cut into segments at the points of the file order where a single value flows from everything
before to everything after (the residual stream between two layers); a segment's signature is its boxes'
types, parameter shapes and attributes and its internal wiring. The longest run of k >= 2 consecutive
equal groups of p segments (p <= MAX_PERIOD) is folded, then the search goes on after it.
"""

from __future__ import annotations

from .diagram import Box, Diagram, Frame, Link, Row

MAX_PERIOD = 8


def _segments(d: Diagram) -> list[list[int]]:
    n = len(d.boxes)
    crossing = [0] * (n + 1)  # crossing[i]: values flowing from boxes < = i to boxes > i
    last_use: dict[tuple[int, str], int] = {}
    for lk in d.links:
        if lk.dst > lk.src:
            key = (lk.src, lk.value or str(id(lk)))
            last_use[key] = max(last_use.get(key, lk.src), lk.dst)
    for (src, _value), end in last_use.items():
        crossing[src] += 1
        crossing[end] -= 1
    segs: list[list[int]] = []
    current: list[int] = []
    live = 0
    for i in range(n):
        live += crossing[i]
        if d.boxes[i].kind not in ("op", "mdf"):  # graph inputs and outputs stand alone
            if current:
                segs.append(current)
            segs.append([i])
            current = []
            continue
        current.append(i)
        if live <= 1 and d.boxes[i].kind in ("op", "mdf"):
            segs.append(current)
            current = []
    if current:
        segs.append(current)
    return segs


def _signature(d: Diagram, seg: list[int], incoming: dict[int, list[Link]]) -> tuple:
    local = {b: k for k, b in enumerate(seg)}
    parts = []
    for b in seg:
        box = d.boxes[b]
        if box.kind not in ("op", "mdf"):
            return ("unfoldable", b)
        wiring = tuple(sorted(local.get(lk.src, -1) for lk in incoming.get(b, [])))
        parts.append((box.signature or box.op, wiring))
    return tuple(parts)


def fold_repeats(d: Diagram) -> Diagram:
    segs = _segments(d)
    incoming: dict[int, list[Link]] = {}
    for lk in d.links:
        incoming.setdefault(lk.dst, []).append(lk)
    sigs = [_signature(d, s, incoming) for s in segs]
    removed: dict[int, int] = {}  # box -> the fold box standing for it
    new_boxes: list[Box] = list(d.boxes)
    frames: list[Frame] = list(d.frames)
    i = 0
    while i < len(segs):
        best_p, best_k = 0, 1
        for p in range(1, MAX_PERIOD + 1):
            if i + 2 * p > len(segs):
                break
            k = 1
            while i + (k + 1) * p <= len(segs) and sigs[i + k * p : i + (k + 1) * p] == sigs[i : i + p]:
                k += 1
            if k >= 2 and k * p > best_k * best_p and sum(len(s) for s in segs[i : i + p]) * (k - 1) >= 2:
                best_p, best_k = p, k
        if best_k < 2:
            i += 1
            continue
        first = [b for s in segs[i : i + best_p] for b in s]
        rest = [b for s in segs[i + best_p : i + best_k * best_p] for b in s]
        fold_id = len(new_boxes)
        names = [d.boxes[b].rows[1].text if len(d.boxes[b].rows) > 1 else d.boxes[b].id for b in (rest[0], rest[-1])]
        ops: dict[str, int] = {}
        for b in first:
            ops[d.boxes[b].op] = ops.get(d.boxes[b].op, 0) + 1
        new_boxes.append(
            Box(
                f"fold:{fold_id}",
                "fold",
                "fold",
                [
                    Row(f"× {best_k - 1} more", "title"),
                    Row(f"identical to the block above ({len(first)} nodes each)", "name"),
                    Row(f"{names[0]} … {names[1]}"[:60]),
                    Row(", ".join(f"{op} ×{c}" for op, c in ops.items())[:60]),
                ],
                f"{best_k - 1} blocks folded ({len(rest)} nodes): " + ", ".join(d.boxes[b].id for b in rest[:50]),
            )
        )
        for b in rest:
            removed[b] = fold_id
        frames.append(Frame(f"frame:{fold_id}", first, f"block ×{best_k}"))
        i += best_k * best_p
    if not removed:
        return d
    links: list[Link] = []
    seen: set[tuple] = set()
    for lk in d.links:
        src, dst = removed.get(lk.src, lk.src), removed.get(lk.dst, lk.dst)
        if src == dst:
            continue
        key = (src, dst, lk.value if src < len(d.boxes) and lk.src not in removed else "")
        if key in seen:
            continue
        seen.add(key)
        links.append(Link(src, dst, lk.src_port, lk.dst_port, lk.label, lk.value))
    keep = [k for k in range(len(new_boxes)) if k not in removed]
    boxes = [new_boxes[k] for k in keep]
    # the fold box sits where its blocks were, so the file order (the layout's first guess) stays sensible
    order = sorted(range(len(boxes)), key=lambda j: _position(keep[j], removed, d))
    final = {keep[j]: pos for pos, j in enumerate(order)}
    out_links = [Link(final[lk.src], final[lk.dst], lk.src_port, lk.dst_port, lk.label, lk.value) for lk in links]
    out_frames = [Frame(f.id, [final[b] for b in f.boxes], f.label) for f in frames]
    return Diagram(
        d.title,
        d.direction,
        [boxes[j] for j in order],
        out_links,
        out_frames,
        [*d.notes, f"{len(removed)} nodes folded into {len(set(removed.values()))} box(es)"],
    )


def _position(box: int, removed: dict[int, int], d: Diagram) -> float:
    if box < len(d.boxes):
        return float(box)
    firsts = [b for b, f in removed.items() if f == box]
    return min(firsts) - 0.5
