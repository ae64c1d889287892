"""A picture of any model: ONNX, ncnn and MDF graphs drawn with a layered layout written here.

``diagram`` turns a model into boxes (one per node / layer, with their type, shapes, weights, attributes;
for MDF their ports, parameters, functions and expressions) and links (value flows; MDF: port to port);
``fold`` replaces runs of identical blocks by one box; ``layout`` places everything in layers (rank,
order, coordinates); ``svg`` writes an SVG or a self-contained HTML page that pans and zooms; ``raster``
draws the same layout with matplotlib (PNG, PDF).
"""

from __future__ import annotations

from typing import Any


def draw(path: str, out: str, fold: str = "auto", feeds: dict[str, Any] | None = None, **kw: Any) -> dict:
    """Draw the model at ``path`` into ``out`` (.svg, .html, .png, .pdf); returns counts for the caller."""
    from . import diagram, layout, svg
    from .fold import fold_repeats

    d = diagram.build(path, feeds=feeds, **kw)
    n_nodes = d.node_count()
    if fold == "always" or (fold == "auto" and n_nodes > diagram.FOLD_ABOVE):
        d = fold_repeats(d)
    diagram.check_size(d, path)
    placed = layout.place(d)
    low = out.lower()
    from ..tools.files import write_text_atomic, write_with

    if low.endswith(".svg"):
        write_text_atomic(out, svg.to_svg(d, placed))
    elif low.endswith((".html", ".htm")):
        write_text_atomic(out, svg.to_html(d, placed))
    else:
        from . import raster

        write_with(out, lambda tmp: raster.draw(d, placed, tmp, "pdf" if low.endswith(".pdf") else "png"))
    return {"nodes": n_nodes, "boxes": len(d.boxes), "folds": sum(1 for b in d.boxes if b.kind == "fold")}
