"""SVG and self-contained HTML for a placed diagram.

The HTML page inlines the SVG, its style and a small script (written here, nothing fetched at view time):
drag to pan, wheel or +/- to zoom at the pointer, 0 or "fit" to see it all, a search box that highlights
and centres matching nodes, and a panel with the full text of a clicked node. ``#selftest`` in the URL makes
the page zoom and pan itself once and record the result in ``data-selftest`` (for the headless-browser test).
"""

from __future__ import annotations

import html
import json

from .diagram import CHAR_W, LINE_H, PAD_X, PAD_Y, Diagram
from .layout import Placed, label_point

#: title colours by op family (fill, stroke); anything else is the default
FAMILIES = {
    "conv": ("#dbe9f8", "#3b6ea8"),
    "linear": ("#e2e0f5", "#5b4fa8"),
    "act": ("#fbe3d6", "#b65a2a"),
    "norm": ("#dcf0dc", "#3c8a3c"),
    "pool": ("#d8f0ee", "#2c8a82"),
    "shape": ("#eeeeee", "#777777"),
    "math": ("#fff4cc", "#a8862a"),
    "io": ("#e6e6e6", "#333333"),
    "fold": ("#fff7e0", "#c08a00"),
    "mdf": ("#eef3fb", "#3b5a8a"),
    "other": ("#f4f4f4", "#555555"),
}
_OPS = {
    "conv": "Conv ConvTranspose ConvInteger QLinearConv Convolution ConvolutionDepthWise Deconvolution "
    "DeconvolutionDepthWise Convolution1D Convolution3D DeformableConv2D",
    "linear": "Gemm MatMul MatMulInteger InnerProduct Einsum Attention MultiHeadAttention SDPA LSTM GRU RNN Embed",
    "act": "Relu LeakyRelu PRelu Elu Selu Celu Sigmoid HardSigmoid Tanh Softplus Softsign HardSwish Mish Gelu "
    "Softmax LogSoftmax ReLU TanH Swish ELU SELU GELU Clip Erf",
    "norm": "BatchNormalization LayerNormalization InstanceNormalization GroupNormalization RMSNormalization LRN "
    "BatchNorm LayerNorm InstanceNorm GroupNorm RMSNorm Normalize MVN",
    "pool": "MaxPool AveragePool GlobalAveragePool GlobalMaxPool LpPool Pooling Pooling1D Pooling3D Reduction",
    "shape": "Reshape Flatten Transpose Squeeze Unsqueeze Concat Split Slice Gather Identity Shape Expand Tile "
    "Pad Cast Permute Crop Noop Packing Padding Reorg PixelShuffle ShuffleChannel ExpandDims Flip Concat",
    "math": "Add Sub Mul Div Pow Sqrt Exp Log Abs Neg Max Min Sum Mean BinaryOp UnaryOp Eltwise Where ReduceMean "
    "ReduceSum ReduceMax",
}
_FAMILY_OF = {op: fam for fam, ops in _OPS.items() for op in ops.split()}


def family(kind: str, op: str) -> str:
    if kind in ("input", "output"):
        return "io"
    if kind == "fold":
        return "fold"
    if kind == "mdf":
        return "mdf"
    return _FAMILY_OF.get(op, "other")


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def edge_path(points: list[tuple[float, float]], tb: bool, back: bool) -> str:
    """Forward links: cubic pieces with tangents along the flow (smooth through the dummy points);
    feedback links and self-loops: a polyline (drawn dashed)."""
    (x0, y0) = points[0]
    parts = [f"M{_f(x0)},{_f(y0)}"]
    if back:
        parts += [f"L{_f(x)},{_f(y)}" for x, y in points[1:]]
        return " ".join(parts)
    for (ax, ay), (bx, by) in zip(points, points[1:]):
        if tb:
            dy = (by - ay) / 2
            parts.append(f"C{_f(ax)},{_f(ay + dy)} {_f(bx)},{_f(by - dy)} {_f(bx)},{_f(by)}")
        else:
            dx = (bx - ax) / 2
            parts.append(f"C{_f(ax + dx)},{_f(ay)} {_f(bx - dx)},{_f(by)} {_f(bx)},{_f(by)}")
    return " ".join(parts)


STYLE = """
.node rect.box{stroke-width:1.2}
.node text{white-space:pre;font-family:'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:12px;fill:#222}
.node text.title{font-size:13px;font-weight:bold} .node text.name{fill:#666}
.node text.section{fill:#777;font-style:italic}
.node text.port{fill:#1d4f91} .node.hit rect.box{stroke:#e0218a;stroke-width:3}
.edge{fill:none;stroke:#6b7480;stroke-width:1.2} .edge.back{stroke:#a05a9a;stroke-dasharray:5 3}
.elabel{font-family:'DejaVu Sans Mono',monospace;font-size:11px;fill:#555}
.frame{fill:#fffaf0;stroke:#c08a00;stroke-dasharray:6 3}
.flabel{font-family:sans-serif;font-size:12px;fill:#a06f00;font-weight:bold}
"""


def _svg_body(d: Diagram, p: Placed) -> str:
    tb = d.direction == "TB"
    out = [
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#6b7480"/></marker></defs>',
        '<g id="viewport">',
    ]
    for x0, y0, x1, y1, label in p.frames:
        out.append(
            f'<rect class="frame" x="{_f(x0)}" y="{_f(y0)}" width="{_f(x1 - x0)}" height="{_f(y1 - y0)}" rx="8"/>'
        )
        out.append(f'<text class="flabel" x="{_f(x0 + 8)}" y="{_f(y0 + 15)}">{html.escape(label)}</text>')
    for k, (lk, pts) in enumerate(zip(d.links, p.paths)):
        cls = "edge back" if p.back[k] else "edge"
        title = f"<title>{html.escape(lk.value)}</title>" if lk.value else ""
        out.append(f'<path class="{cls}" d="{edge_path(pts, tb, p.back[k])}" marker-end="url(#arrow)">{title}</path>')
        if lk.label and d.direction == "LR":
            mx, my = label_point(pts, p.back[k])
            w = len(lk.label) * 6.6 + 6
            out.append(
                f'<rect x="{_f(mx - w / 2)}" y="{_f(my - 8)}" width="{_f(w)}" height="15" fill="white" opacity="0.85"/>'
                f'<text class="elabel" x="{_f(mx)}" y="{_f(my + 4)}" text-anchor="middle">'
                f"{html.escape(lk.label)}</text>"
            )
    for k, b in enumerate(d.boxes):
        x, y, w, h = p.x[k], p.y[k], p.w[k], p.h[k]
        fill, stroke = FAMILIES[family(b.kind, b.op)]
        out.append(
            f'<g class="node" id="n{k}" data-kind="{b.kind}" data-op="{html.escape(b.op)}" '
            f'data-name="{html.escape(b.rows[1].text if len(b.rows) > 1 else b.rows[0].text)}">'
            f"<title>{html.escape(b.tooltip or b.rows[0].text)}</title>"
            f'<rect class="box" x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(h)}" rx="5" fill="white" '
            f'stroke="{stroke}"/>'
            f'<rect x="{_f(x)}" y="{_f(y)}" width="{_f(w)}" height="{_f(PAD_Y + LINE_H + 1)}" rx="5" fill="{fill}"/>'
        )
        for j, row in enumerate(b.rows):
            ty = y + PAD_Y + j * LINE_H + LINE_H * 0.75
            if row.port is not None:
                cx = x if row.side == "in" else x + w
                out.append(f'<circle cx="{_f(cx)}" cy="{_f(ty - LINE_H * 0.25)}" r="3.5" fill="{stroke}"/>')
            anchor = ' text-anchor="end"' if row.side == "out" else ""
            tx = x + w - PAD_X if row.side == "out" else x + PAD_X
            out.append(f'<text class="{row.style}" x="{_f(tx)}" y="{_f(ty)}"{anchor}>{html.escape(row.text)}</text>')
        out.append("</g>")
    out.append("</g>")
    return "\n".join(out)


def to_svg(d: Diagram, p: Placed) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_f(p.width)}" height="{_f(p.height)}" '
        f'viewBox="0 0 {_f(p.width)} {_f(p.height)}">\n<style>{STYLE}</style>\n'
        f'<rect width="100%" height="100%" fill="white"/>\n{_svg_body(d, p)}\n</svg>\n'
    )


_SCRIPT = r"""
(function () {
  var svg = document.getElementById('graph'), vp = document.getElementById('viewport');
  var W = +svg.dataset.width, H = +svg.dataset.height, s = 1, tx = 0, ty = 0;
  function apply() { vp.setAttribute('transform', 'translate(' + tx + ',' + ty + ') scale(' + s + ')');
    document.getElementById('zoom').textContent = Math.round(s * 100) + '%'; }
  function view() { var r = svg.getBoundingClientRect(); return {w: r.width, h: r.height, x: r.left, y: r.top}; }
  function zoomAt(f, px, py) { var n = Math.min(8, Math.max(0.02, s * f)); f = n / s;
    tx = px - (px - tx) * f; ty = py - (py - ty) * f; s = n; apply(); }
  function fit(all) { var v = view(), fa = Math.min(v.w / W, v.h / H), fw = Math.min(1, v.w / W);
    var whole = all || fa >= 0.5; s = whole ? Math.min(fa, 2) : fw;
    tx = (v.w - W * s) / 2; ty = whole ? (v.h - H * s) / 2 : 0;
    if (tx < 0) tx = 0; apply(); }
  svg.addEventListener('wheel', function (e) { e.preventDefault(); var v = view();
    zoomAt(Math.exp(-e.deltaY * 0.0015), e.clientX - v.x, e.clientY - v.y); }, {passive: false});
  var drag = null;
  svg.addEventListener('pointerdown', function (e) { drag = {x: e.clientX, y: e.clientY, tx: tx, ty: ty}; });
  window.addEventListener('pointermove', function (e) { if (!drag) return;
    tx = drag.tx + e.clientX - drag.x; ty = drag.ty + e.clientY - drag.y; apply(); });
  window.addEventListener('pointerup', function () { drag = null; });
  document.getElementById('zin').onclick = function () { var v = view(); zoomAt(1.25, v.w / 2, v.h / 2); };
  document.getElementById('zout').onclick = function () { var v = view(); zoomAt(0.8, v.w / 2, v.h / 2); };
  document.getElementById('fit').onclick = function () { fit(true); };
  window.addEventListener('keydown', function (e) { if (e.target.tagName === 'INPUT') return; var v = view();
    if (e.key === '+' || e.key === '=') zoomAt(1.25, v.w / 2, v.h / 2);
    else if (e.key === '-') zoomAt(0.8, v.w / 2, v.h / 2); else if (e.key === '0') fit(true); });
  var nodes = Array.prototype.slice.call(document.querySelectorAll('.node')), info = document.getElementById('info');
  nodes.forEach(function (g) { g.addEventListener('click', function () {
    info.textContent = g.querySelector('title').textContent; info.style.display = 'block'; }); });
  document.getElementById('search').addEventListener('input', function (e) {
    var q = e.target.value.toLowerCase(), first = null, hits = 0;
    nodes.forEach(function (g) { var on = q && g.textContent.toLowerCase().indexOf(q) >= 0;
      g.classList.toggle('hit', !!on); if (on) { hits++; if (!first) first = g; } });
    document.getElementById('hits').textContent = q ? hits + ' found' : '';
    if (first) { var b = first.querySelector('rect').getBBox(), v = view();
      tx = v.w / 2 - (b.x + b.width / 2) * s; ty = v.h / 2 - (b.y + b.height / 2) * s; apply(); } });
  fit(false);
  document.body.dataset.nodes = nodes.length;
  document.body.dataset.ready = '1';
  if (location.hash.indexOf('selftest') >= 0) {
    var before = vp.getAttribute('transform'), v = view(), s0 = s;
    svg.dispatchEvent(new WheelEvent('wheel',
      {deltaY: -400, clientX: v.x + 100, clientY: v.y + 100, bubbles: true, cancelable: true}));
    var zoomed = s / s0;
    svg.dispatchEvent(new PointerEvent('pointerdown', {clientX: 300, clientY: 300, bubbles: true}));
    window.dispatchEvent(new PointerEvent('pointermove', {clientX: 340, clientY: 325, bubbles: true}));
    window.dispatchEvent(new PointerEvent('pointerup', {clientX: 340, clientY: 325, bubbles: true}));
    document.body.dataset.selftest = JSON.stringify(
      {before: before, after: vp.getAttribute('transform'), zoomed: zoomed});
  }
})();
"""

_PAGE_STYLE = """
html,body{margin:0;height:100%;font-family:sans-serif} #bar{position:fixed;top:0;left:0;right:0;height:38px;
background:#f7f7f7;border-bottom:1px solid #ccc;display:flex;align-items:center;gap:8px;padding:0 10px;z-index:2}
#bar button{font-size:14px}
#bar .t{font-weight:bold;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;max-width:45%}
#graph{position:fixed;top:39px;left:0;right:0;bottom:0;width:100%;height:calc(100% - 39px);cursor:grab;background:white}
#info{display:none;position:fixed;right:10px;top:48px;max-width:40%;max-height:70%;overflow:auto;background:#fffff4;
border:1px solid #bbb;padding:8px;font-family:monospace;font-size:12px;white-space:pre;z-index:3}
#notes{color:#666;font-size:12px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
"""


def to_html(d: Diagram, p: Placed) -> str:
    title = html.escape(d.title)
    notes = html.escape("; ".join(d.notes))
    counts = f"{len(d.boxes)} boxes"
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>{_PAGE_STYLE}{STYLE}</style></head>
<body>
<div id="bar"><span class="t">{title}</span><span>{html.escape(counts)}</span>
<button id="zout" title="zoom out (-)">−</button><span id="zoom">100%</span>
<button id="zin" title="zoom in (+)">+</button><button id="fit" title="fit (0)">fit</button>
<input id="search" placeholder="find a node" size="18"><span id="hits"></span>
<span id="notes">{notes}</span></div>
<svg id="graph" xmlns="http://www.w3.org/2000/svg" data-width="{_f(p.width)}" data-height="{_f(p.height)}"
 data-layout="{html.escape(json.dumps({"direction": d.direction}))}">
<rect x="-100000" y="-100000" width="200000" height="200000" fill="white"/>
{_svg_body(d, p)}
</svg>
<div id="info"></div>
<script>{_SCRIPT}</script>
</body></html>
"""


__all__ = ["to_svg", "to_html", "edge_path", "family", "FAMILIES", "CHAR_W"]
