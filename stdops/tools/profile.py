"""Per-node profile of an ONNX or ncnn model: time (median over runs), FLOPs, bytes moved, share of wall time.

Timing goes through the plan's step timer (``stdops.graph.timing``): the clock is read just before and just
after each node's kernel, inside the same run whose wall time is measured around ``model.run``. What the
node times leave out of the wall time (feed checks, the hook-free slot bookkeeping, timer calls) is reported
as "outside nodes". A node's time is the median of its times over the runs; the Chrome trace lays out one
event per node from the run whose wall time is the median, at the offsets it really ran.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
import time
from typing import Any

import numpy as np

from ..graph import Node, timing
from . import flops as _flops


@dataclasses.dataclass
class NodeProfile:
    name: str
    op: str
    times: list[float]  # seconds, one per timed run
    flops: int | None
    bytes_in: int  # inputs read, weights included
    bytes_out: int  # outputs written
    out_shapes: list[tuple]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def bytes_moved(self) -> int:
        return self.bytes_in + self.bytes_out


@dataclasses.dataclass
class Profile:
    model: str
    nodes: list[NodeProfile]  # in execution order
    walls: list[float]  # seconds per timed run
    trace: list[tuple[str, str, float, float]]  # (node, op, start, end) of the median run, seconds from its start
    outputs: dict[str, Any] = dataclasses.field(default_factory=dict)  # the last run's result

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def node_total(self) -> float:
        """The sum of the nodes' median times."""
        return sum(n.median for n in self.nodes)

    def coverage(self) -> list[float]:
        """Per run: the nodes' times over that run's wall time. (A sum of medians need not match the median
        wall time when runs are bimodal, as on a loaded machine; within one run they must add up.)"""
        return [sum(n.times[r] for n in self.nodes) / w for r, w in enumerate(self.walls)]

    def by_time(self) -> list[NodeProfile]:
        return sorted(self.nodes, key=lambda n: -n.median)


def _nbytes(v: Any) -> int:
    if isinstance(v, np.ndarray):
        return int(v.nbytes)
    if isinstance(v, (list, tuple)):
        return sum(_nbytes(x) for x in v)
    return 0


def _shapes(v: Any) -> list[tuple]:
    vs = v if isinstance(v, tuple) else (v,)
    return [tuple(x.shape) if isinstance(x, np.ndarray) else () for x in vs]


_GRAPH_NODE = re.compile(r"graph node (\d+) ")


def _details(model: Any) -> tuple[dict[str, dict], dict[str, Any], dict[str, int]]:
    """ONNX: the attributes of each plan node (by name); ncnn: each layer's params and weight bytes."""
    attrs: dict[str, dict] = {}
    params: dict[str, Any] = {}
    weights: dict[str, int] = {}
    if hasattr(model, "param_file"):
        for layer in model.layers:
            params[layer.name] = layer.params
            weights[layer.name] = sum(int(w.nbytes) for w in layer.weights.values())
        return attrs, params, weights
    from onnx import helper

    proto_nodes = model.proto.graph.node
    for node in model.plan.nodes:
        m = _GRAPH_NODE.match(node.where)
        if m and "function" not in node.where:
            n = proto_nodes[int(m.group(1))]
            try:
                attrs[node.name] = {a.name: helper.get_attribute_value(a) for a in n.attribute}
            except Exception:  # noqa: BLE001 - an attribute onnx cannot decode: no FLOP rule needs it
                attrs[node.name] = {}
    return attrs, params, weights


def profile(model: Any, feeds: dict[str, Any], runs: int = 10, warmup: int = 1) -> Profile:
    """Run ``model`` (a loaded ONNX Model or ncnn Net) ``warmup + runs`` times on ``feeds``."""
    attrs, params, weights = _details(model)
    order: list[Node] = []
    info: dict[str, NodeProfile] = {}
    per_run: list[list[tuple[Node, float, float]]] = []
    walls: list[float] = []

    for r in range(warmup + runs):
        record: list[tuple[Node, float, float]] = []
        first = r == 0

        def timer(node: Node, start: float, end: float, inputs: list, result: Any, _rec=record, _first=first) -> None:
            _rec.append((node, start, end))
            if _first:
                order.append(node)
                info[node.name] = NodeProfile(
                    node.name,
                    node.op,
                    [],
                    _flops.estimate(node.op, inputs, result, attrs.get(node.name), params.get(node.name)),
                    sum(_nbytes(v) for v in inputs) + weights.get(node.name, 0),
                    _nbytes(result),
                    _shapes(result),
                )

        with timing(timer):
            t0 = time.perf_counter()
            result = model.run(feeds)
            t1 = time.perf_counter()
        if r >= warmup:
            walls.append(t1 - t0)
            per_run.append([(n, s - t0, e - t0) for n, s, e in record])
            for n, s, e in record:
                info[n.name].times.append(e - s)
    mid = sorted(range(len(walls)), key=walls.__getitem__)[len(walls) // 2]
    trace = [(n.name, n.op, s, e) for n, s, e in per_run[mid]]
    return Profile(getattr(model, "path", None) or "model", [info[n.name] for n in order], walls, trace, result)


def chrome_trace(p: Profile) -> dict:
    """The Trace Event Format read by chrome://tracing and Perfetto: one complete ("X") event per node,
    times in microseconds, plus the process and thread names as metadata ("M") events."""
    events: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": f"stdops {p.model}"}},
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "plan (median run)"}},
    ]
    by_name = {n.name: n for n in p.nodes}
    for name, op, start, end in p.trace:
        n = by_name[name]
        events.append(
            {
                "name": name,
                "cat": op,
                "ph": "X",
                "ts": round(start * 1e6, 3),
                "dur": round((end - start) * 1e6, 3),
                "pid": 1,
                "tid": 1,
                "args": {
                    "op": op,
                    "median_us": round(n.median * 1e6, 3),
                    "flops": n.flops,
                    "bytes_moved": n.bytes_moved,
                    "output_shapes": [list(s) for s in n.out_shapes],
                },
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"wall_median_us": p.wall * 1e6}}


def _si(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}".rstrip()


def table_rows(p: Profile, top: int | None = None) -> list[tuple]:
    """Rows for print_table, slowest first: node, op, median ms, share of wall, FLOPs, bytes, GFLOP/s."""
    wall = p.wall
    rows = []
    for n in p.by_time()[:top]:
        t = n.median
        rate = _si(n.flops / t, "FLOP/s") if n.flops and t > 0 else "-"
        rows.append(
            (
                n.name,
                n.op,
                f"{t * 1e3:.3f}",
                f"{100 * t / wall:.1f}%",
                _si(n.flops),
                _si(n.bytes_moved, "B"),
                rate,
                " ".join("x".join(map(str, s)) for s in n.out_shapes),
            )
        )
    return rows


COLUMNS = ("node", "op", "median ms", "of wall", "FLOPs", "bytes moved", "rate", "output shape")


def summary_line(p: Profile) -> str:
    cov = p.coverage()
    return (
        f"{len(p.nodes)} nodes over {len(p.walls)} runs: wall {p.wall * 1e3:.3f} ms (median, min "
        f"{min(p.walls) * 1e3:.3f}, max {max(p.walls) * 1e3:.3f}); node times add up to "
        f"{100 * statistics.median(cov):.1f}% "
        f"of their run's wall time (median over runs, lowest {100 * min(cov):.1f}%); the medians sum to "
        f"{p.node_total * 1e3:.3f} ms"
    )


def export(p: Profile, csv: bool) -> str:
    """The per-node table (execution order) as JSON or CSV, times in microseconds."""
    import io
    import json

    records = [
        {
            "node": n.name,
            "op": n.op,
            "median_us": n.median * 1e6,
            "share_of_wall": n.median / p.wall,
            "flops": n.flops,
            "bytes_in": n.bytes_in,
            "bytes_out": n.bytes_out,
            "output_shapes": [list(s) for s in n.out_shapes],
        }
        for n in p.nodes
    ]
    if not csv:
        return json.dumps({"model": p.model, "runs": len(p.walls), "wall_median_us": p.wall * 1e6, "nodes": records})
    import csv as _csv

    buf = io.StringIO()
    w = _csv.writer(buf)
    w.writerow(list(records[0]) if records else ["node"])
    for n in p.nodes:  # the records' columns, from the typed profile
        shapes = " ".join("x".join(map(str, s)) for s in n.out_shapes)
        flops = n.flops if n.flops is not None else ""
        w.writerow(
            [n.name, n.op, f"{n.median * 1e6:.3f}", f"{n.median / p.wall:.4f}", flops]
            + [n.bytes_in, n.bytes_out, shapes]
        )
    return buf.getvalue()
