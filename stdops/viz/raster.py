"""PNG and PDF of a placed diagram, drawn with matplotlib (the ``plots`` extra): the same boxes, rows, colours
and links as the SVG, one pixel of the layout per pixel of the image (scaled down for very large pictures)."""

from __future__ import annotations

from .diagram import LINE_H, PAD_X, PAD_Y, Diagram, TooLargeToPicture
from .layout import Placed, label_point
from .svg import FAMILIES, family

#: the most pixels a PNG may have; larger pictures are scaled down to it, to at most MIN_SCALE
MAX_PIXELS = 48_000_000
MIN_SCALE = 0.4


def _curve(points: list[tuple[float, float]], tb: bool, back: bool) -> tuple[list, list]:
    from matplotlib.path import Path

    verts, codes = [points[0]], [Path.MOVETO]
    if back:
        for p in points[1:]:
            verts.append(p)
            codes.append(Path.LINETO)
        return verts, codes
    for (ax, ay), (bx, by) in zip(points, points[1:]):
        if tb:
            dy = (by - ay) / 2
            verts += [(ax, ay + dy), (bx, by - dy), (bx, by)]
        else:
            dx = (bx - ax) / 2
            verts += [(ax + dx, ay), (bx - dx, by), (bx, by)]
        codes += [Path.CURVE4] * 3
    return verts, codes


def draw(d: Diagram, p: Placed, out: str, fmt: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch, PathPatch, Polygon, Rectangle
    from matplotlib.path import Path

    scale = 1.0
    if fmt == "png" and p.width * p.height > MAX_PIXELS:
        scale = (MAX_PIXELS / (p.width * p.height)) ** 0.5
        if scale < MIN_SCALE:
            raise TooLargeToPicture(
                f"the picture is {p.width:.0f} x {p.height:.0f} px: too large for a readable PNG; "
                "write .svg or .html (they zoom)"
            )
    dpi = 100
    fig = plt.figure(figsize=(p.width * scale / dpi, p.height * scale / dpi), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, p.width)
    ax.set_ylim(p.height, 0)
    ax.axis("off")
    pt = 72 / dpi * scale  # points per layout pixel
    tb = d.direction == "TB"
    for x0, y0, x1, y1, label in p.frames:
        ax.add_patch(
            FancyBboxPatch(
                (x0, y0),
                x1 - x0,
                y1 - y0,
                boxstyle="round,pad=0,rounding_size=8",
                fc="#fffaf0",
                ec="#c08a00",
                ls="--",
                lw=1,
            )
        )
        ax.text(x0 + 8, y0 + 15, label, fontsize=12 * pt, color="#a06f00", weight="bold", family="sans-serif")
    for k, (lk, pts) in enumerate(zip(d.links, p.paths)):
        verts, codes = _curve(pts, tb, p.back[k])
        color = "#a05a9a" if p.back[k] else "#6b7480"
        ax.add_patch(PathPatch(Path(verts, codes), fc="none", ec=color, lw=1.2 * scale, ls="--" if p.back[k] else "-"))
        (ex, ey), (px, py) = pts[-1], verts[-2]
        dx, dy = ex - px, ey - py
        norm = max(1e-6, (dx * dx + dy * dy) ** 0.5)
        dx, dy = dx / norm * 7, dy / norm * 7
        ax.add_patch(
            Polygon(
                [(ex, ey), (ex - dx - dy * 0.45, ey - dy + dx * 0.45), (ex - dx + dy * 0.45, ey - dy - dx * 0.45)],
                fc=color,
                ec="none",
            )
        )
        if lk.label and not tb:
            mx, my = label_point(pts, p.back[k])
            ax.text(
                mx,
                my,
                lk.label,
                fontsize=11 * pt,
                ha="center",
                va="center",
                family="monospace",
                color="#555",
                bbox=dict(fc="white", ec="none", alpha=0.85, pad=1),
            )
    for k, b in enumerate(d.boxes):
        x, y, w, h = p.x[k], p.y[k], p.w[k], p.h[k]
        fill, stroke = FAMILIES[family(b.kind, b.op)]
        ax.add_patch(
            FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0,rounding_size=5", fc="white", ec=stroke, lw=1.2 * scale)
        )
        ax.add_patch(Rectangle((x + 1, y + 1), w - 2, PAD_Y + LINE_H - 1, fc=fill, ec="none"))
        for j, row in enumerate(b.rows):
            ty = y + PAD_Y + j * LINE_H + LINE_H * 0.5
            style = {
                "title": dict(weight="bold", color="#222"),
                "name": dict(color="#666"),
                "section": dict(color="#777", style="italic"),
                "port": dict(color="#1d4f91"),
            }.get(row.style, {})
            size = 13 if row.style == "title" else 12
            if row.side == "out":
                ax.text(
                    x + w - PAD_X,
                    ty,
                    row.text,
                    fontsize=size * pt,
                    family="monospace",
                    va="center",
                    ha="right",
                    fontdict=style,
                )
            else:
                ax.text(x + PAD_X, ty, row.text, fontsize=size * pt, family="monospace", va="center", fontdict=style)
            if row.port is not None:
                cx = x if row.side == "in" else x + w
                ax.add_patch(matplotlib.patches.Circle((cx, ty), 3.5, fc=stroke, ec="none"))
    fig.savefig(out, format=fmt, dpi=dpi, facecolor="white")
    plt.close(fig)
