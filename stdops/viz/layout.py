"""A layered ("Sugiyama") layout, written for stdops' pictures: pure Python, a few hundred boxes in well under
a second.

1. cycles (MDF feedback edges) are broken by reversing the DFS back edges for the layering only;
2. layers: longest path from the sources, sources then moved down next to their first consumer;
3. links spanning several layers get a chain of dummy points, so they route between boxes;
4. order within each layer: barycenter sweeps down and up, keeping the order with the fewest crossings
   (counted exactly between every pair of adjacent layers);
5. coordinates across the layers: each box pulled towards the mean of its neighbours, with the order and
   the gaps kept (the mean of a left-packed and a right-packed placement keeps both);
6. links: from the sender's port (bottom of the box, or the row of an MDF output port) through their dummy
   points to the receiver's port.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .diagram import LINE_H, PAD_Y, Diagram, text_size

SWEEPS = 8
SMOOTHING_PASSES = 8
GAP = {"TB": 28.0, "LR": 24.0}  # between boxes of a layer
DUMMY_GAP = 10.0
RANK_GAP = {"TB": 44.0, "LR": 90.0}  # between layers (LR leaves room for edge labels)
MARGIN = 24.0


@dataclasses.dataclass
class Placed:
    x: list[float]
    y: list[float]
    w: list[float]
    h: list[float]
    paths: list[list[tuple[float, float]]]  # one polyline per link, sender to receiver
    back: list[bool]  # per link: drawn against the flow (a feedback edge or a self-loop)
    frames: list[tuple[float, float, float, float, str]]
    width: float
    height: float


def _break_cycles(n: int, edges: Sequence[tuple[int, int]]) -> set[int]:
    """Indices of edges that close a cycle (DFS back edges, from the boxes in file order)."""
    out: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for k, (u, v) in enumerate(edges):
        out[u].append((v, k))
    state = [0] * n  # 0 new, 1 on the stack, 2 done
    back: set[int] = set()
    for root in range(n):
        if state[root]:
            continue
        stack = [(root, iter(out[root]))]
        state[root] = 1
        while stack:
            u, it = stack[-1]
            for v, k in it:
                if state[v] == 1:
                    back.add(k)
                elif state[v] == 0:
                    state[v] = 1
                    stack.append((v, iter(out[v])))
                    break
            else:
                state[u] = 2
                stack.pop()
    return back


def _ranks(n: int, dag: Sequence[tuple[int, int]]) -> list[int]:
    succ: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for u, v in dag:
        succ[u].append(v)
        indeg[v] += 1
    rank = [0] * n
    ready = [u for u in range(n) if indeg[u] == 0]
    order = []
    while ready:
        u = ready.pop()
        order.append(u)
        for v in succ[u]:
            rank[v] = max(rank[v], rank[u] + 1)
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    has_pred = [False] * n
    for _u, v in dag:
        has_pred[v] = True
    for u in range(n):  # a source (graph input, constant node) sits just above its first consumer
        if not has_pred[u] and succ[u]:
            rank[u] = max(0, min(rank[v] for v in succ[u]) - 1)
    return rank


def _crossings(pos: Sequence[int], edges: list[tuple[int, int]]) -> int:
    """Crossings between two adjacent layers: inversions of the lower ends, the edges sorted by upper end."""
    seq = [pos[v] for _, v in sorted(edges, key=lambda e: (pos[e[0]], pos[e[1]]))]
    return _inversions(seq)


def _inversions(a: list[int]) -> int:
    if len(a) < 2:
        return 0
    mid = len(a) // 2
    left, right = a[:mid], a[mid:]
    count = _inversions(left) + _inversions(right)
    i = j = 0
    merged = []
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            merged.append(left[i])
            i += 1
        else:
            merged.append(right[j])
            count += len(left) - i
            j += 1
    merged += left[i:] + right[j:]
    a[:] = merged
    return count


def place(d: Diagram) -> Placed:
    n = len(d.boxes)
    sizes = [text_size(b.rows) for b in d.boxes]
    tb = d.direction == "TB"
    links = [(lk.src, lk.dst) for lk in d.links]
    loops = {k for k, (u, v) in enumerate(links) if u == v}
    back = _break_cycles(n, [e if k not in loops else (0, 0) for k, e in enumerate(links)]) - loops
    dag = [(v, u) if k in back else (u, v) for k, (u, v) in enumerate(links) if k not in loops]
    rank = _ranks(n, dag)
    # dummy chains: node ids >= n are dummies; chain[k] runs in layer order for link k
    layer_of = list(rank)
    chains: list[list[int]] = []
    for k, (u, v) in enumerate(links):
        if k in loops:
            chains.append([u])
            continue
        a, b = (v, u) if k in back else (u, v)
        chain = [a]
        for r in range(rank[a] + 1, rank[b]):
            layer_of.append(r)
            chain.append(len(layer_of) - 1)
        chain.append(b)
        chains.append(chain)
    total = len(layer_of)
    n_layers = max(layer_of, default=0) + 1
    up: list[list[int]] = [[] for _ in range(total)]
    down: list[list[int]] = [[] for _ in range(total)]
    for chain in chains:
        for a, b in zip(chain, chain[1:]):
            down[a].append(b)
            up[b].append(a)
    # initial order: depth-first discovery from the sources, in file order
    seen = [False] * total
    first: list[int] = []
    for root in [u for u in range(total) if not up[u]] + list(range(total)):
        if seen[root]:
            continue
        stack = [root]
        while stack:
            u = stack.pop()
            if seen[u]:
                continue
            seen[u] = True
            first.append(u)
            stack.extend(reversed(down[u]))
    layers: list[list[int]] = [[] for _ in range(n_layers)]
    for u in first:
        layers[layer_of[u]].append(u)
    between = [[(a, b) for a in layers[r] for b in down[a]] for r in range(n_layers - 1)]

    def positions() -> list[int]:
        pos = [0] * total
        for layer in layers:
            for i, u in enumerate(layer):
                pos[u] = i
        return pos

    def crossings() -> int:
        pos = positions()
        return sum(_crossings(pos, e) for e in between)

    best, best_layers = crossings(), [list(layer) for layer in layers]
    for _ in range(SWEEPS):
        if best == 0:
            break
        for direction in ("down", "up"):
            pos = positions()
            rng = range(1, n_layers) if direction == "down" else range(n_layers - 2, -1, -1)
            for r in rng:
                other = up if direction == "down" else down
                span = max(1, len(layers[r - 1 if direction == "down" else r + 1]) - 1)
                own = max(1, len(layers[r]) - 1)

                def key(u: int, _other=other, _span=span, _own=own, _pos=pos) -> tuple[float, int]:
                    nb = _other[u]
                    if not nb:
                        return (_pos[u] / _own, _pos[u])
                    return (sum(_pos[v] for v in nb) / len(nb) / _span, _pos[u])

                layers[r].sort(key=key)
                for i, u in enumerate(layers[r]):
                    pos[u] = i
            c = crossings()
            if c < best:
                best, best_layers = c, [list(layer) for layer in layers]
    layers = best_layers
    # coordinates across the layers
    cross_size = [(s[0] if tb else s[1]) for s in sizes] + [2.0] * (total - n)
    gap = GAP[d.direction]

    def sep(a: int, b: int) -> float:
        g = gap if a < n and b < n else DUMMY_GAP
        return (cross_size[a] + cross_size[b]) / 2 + g

    center = [0.0] * total
    for layer in layers:
        x = 0.0
        for i, u in enumerate(layer):
            if i:
                x += sep(layer[i - 1], u)
            center[u] = x

    def settle(layer: list[int], want: list[float]) -> None:
        m = len(layer)
        fwd = list(want)
        for i in range(1, m):
            fwd[i] = max(fwd[i], fwd[i - 1] + sep(layer[i - 1], layer[i]))
        bwd = list(want)
        for i in range(m - 2, -1, -1):
            bwd[i] = min(bwd[i], bwd[i + 1] - sep(layer[i], layer[i + 1]))
        for i, u in enumerate(layer):
            center[u] = (fwd[i] + bwd[i]) / 2

    for _ in range(SMOOTHING_PASSES):
        for nbrs, rng in ((up, range(1, n_layers)), (down, range(n_layers - 2, -1, -1))):
            for r in rng:
                layer = layers[r]
                want = [sum(center[v] for v in nbrs[u]) / len(nbrs[u]) if nbrs[u] else center[u] for u in layer]
                settle(layer, want)
    low = min((center[u] - cross_size[u] / 2 for u in range(total)), default=0.0)
    center = [c - low + MARGIN for c in center]
    # coordinates along the layers
    rank_size = [(s[1] if tb else s[0]) for s in sizes]
    thick = [0.0] * n_layers
    for u in range(n):
        thick[rank[u]] = max(thick[rank[u]], rank_size[u])
    start = [MARGIN] * n_layers
    for r in range(1, n_layers):
        start[r] = start[r - 1] + thick[r - 1] + RANK_GAP[d.direction]
    xs, ys, ws, hs = [], [], [], []
    for u in range(n):
        w, h = sizes[u]
        along = start[rank[u]] + (thick[rank[u]] - rank_size[u]) / 2
        across = center[u] - cross_size[u] / 2
        xs.append(across if tb else along)
        ys.append(along if tb else across)
        ws.append(float(w))
        hs.append(float(h))

    def point(along: float, across: float) -> tuple[float, float]:
        return (across, along) if tb else (along, across)

    def port_offset(box: int, port: str | None, side: str) -> float | None:
        if port is None:
            return None
        for j, row in enumerate(d.boxes[box].rows):
            if row.port == port and row.side == side:
                return PAD_Y + j * LINE_H + LINE_H / 2
        return None

    paths: list[list[tuple[float, float]]] = []
    for k, lk in enumerate(d.links):
        u, v = lk.src, lk.dst
        if tb:
            src = (xs[u] + ws[u] / 2, ys[u] + hs[u])
            dst = (xs[v] + ws[v] / 2, ys[v])
        else:
            so, do = port_offset(u, lk.src_port, "out"), port_offset(v, lk.dst_port, "in")
            src = (xs[u] + ws[u], ys[u] + (so if so is not None else hs[u] / 2))
            dst = (xs[v], ys[v] + (do if do is not None else hs[v] / 2))
        if k in loops:
            if tb:
                right = xs[u] + ws[u] + 18
                paths.append(
                    [src, (src[0], src[1] + 14), (right, src[1] + 14), (right, dst[1] - 14), (dst[0], dst[1] - 14), dst]
                )
            else:
                top = ys[u] - 16
                paths.append(
                    [src, (src[0] + 18, src[1]), (src[0] + 18, top), (dst[0] - 18, top), (dst[0] - 18, dst[1]), dst]
                )
            continue
        mids: list[tuple[float, float]] = []
        chain = chains[k][1:-1]
        if k in back:
            chain = list(reversed(chain))
        for dummy in chain:
            r = layer_of[dummy]
            near, far = start[r], start[r] + thick[r]  # the layer's two sides
            pair = [point(near, center[dummy]), point(far, center[dummy])]
            mids += list(reversed(pair)) if k in back else pair
        if k in back:
            # a feedback link goes around the boxes of the layers it spans, in its own lane
            lane_no = sum(1 for j in range(k) if j in back)
            lo, hi = sorted((rank[u], rank[v]))
            spanned = [b for b in range(n) if lo <= rank[b] <= hi]
            step = 18
            if tb:
                lane = max(xs[b] + ws[b] for b in spanned) + 16 + 10 * lane_no
                mids = [(src[0], src[1] + step), (lane, src[1] + step), (lane, dst[1] - step), (dst[0], dst[1] - step)]
            else:
                lane = min(ys[b] for b in spanned) - 16 - 10 * lane_no
                mids = [(src[0] + step, src[1]), (src[0] + step, lane), (dst[0] - step, lane), (dst[0] - step, dst[1])]
        paths.append([src, *mids, dst])
    # receivers with several inputs: spread their arrival points along the top (TB), in the order they come
    if tb:
        arriving: dict[int, list[int]] = {}
        for k, lk in enumerate(d.links):
            if k not in loops and k not in back:
                arriving.setdefault(lk.dst, []).append(k)
        for v, ks in arriving.items():
            if len(ks) < 2:
                continue
            ks.sort(key=lambda k: paths[k][-2][0])
            for i, k in enumerate(ks):
                x = xs[v] + ws[v] * (i + 1) / (len(ks) + 1)
                paths[k][-1] = (x, ys[v])
    frames = []
    for f in d.frames:
        x0 = min(xs[b] for b in f.boxes) - 12
        y0 = min(ys[b] for b in f.boxes) - 22
        x1 = max(xs[b] + ws[b] for b in f.boxes) + 12
        y1 = max(ys[b] + hs[b] for b in f.boxes) + 10
        frames.append((x0, y0, x1, y1, f.label))
    width = max([x + w for x, w in zip(xs, ws)] + [p[0] for path in paths for p in path] + [0.0]) + MARGIN
    height = max([y + h for y, h in zip(ys, hs)] + [p[1] for path in paths for p in path] + [0.0]) + MARGIN
    min_x = min([0.0] + [p[0] for path in paths for p in path] + [f[0] for f in frames])
    min_y = min([0.0] + [p[1] for path in paths for p in path] + [f[1] for f in frames])
    if min_x < 0 or min_y < 0:  # loops or frames reaching past the margin: shift everything
        dx, dy = max(0.0, -min_x + 4), max(0.0, -min_y + 4)
        xs = [x + dx for x in xs]
        ys = [y + dy for y in ys]
        paths = [[(p[0] + dx, p[1] + dy) for p in path] for path in paths]
        frames = [(a + dx, b + dy, c + dx, e + dy, s) for a, b, c, e, s in frames]
        width, height = width + dx, height + dy
    return Placed(xs, ys, ws, hs, paths, [k in back or k in loops for k in range(len(d.links))], frames, width, height)


def label_point(points: list[tuple[float, float]], back: bool) -> tuple[float, float]:
    """Where a link's label goes: the middle of its path (of its lane, for a feedback link)."""
    if back and len(points) >= 4:
        a, b = points[len(points) // 2 - 1], points[len(points) // 2]
        return ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
    if len(points) > 2:
        return points[len(points) // 2]
    return ((points[0][0] + points[-1][0]) / 2, (points[0][1] + points[-1][1]) / 2)
