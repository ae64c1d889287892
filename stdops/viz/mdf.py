"""An MDF graph as records: one box per node with its input ports, parameters, functions, condition and
output ports as rows, and links from an output-port row of the sender to an input-port row of the receiver.

What modeci-mdf's level-3 graph shows (ports, parameters with values, functions with their expressions),
drawn with edges that really end at the ports they connect and the edge weights as labels."""

from __future__ import annotations

from typing import Any

from .diagram import Box, Diagram, Link, Row, clip, dims

#: MDF rows hold expressions: wider than op rows
MDF_ROW = 64


def _expr(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_expr(x) for x in v[:6]) + (", …" if len(v) > 6 else "") + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_expr(x)}" for k, x in list(v.items())[:4]) + (", …" if len(v) > 4 else "") + "}"
    return str(v)


def _call(function: Any, args: dict | None) -> str:
    inner = ", ".join(f"{k}={_expr(v)}" for k, v in (args or {}).items())
    return f"{function}({inner})"


def _condition(c: Any) -> str:
    if c is None:
        return ""
    kw = getattr(c, "kwargs", None) or {}
    return f"{c.type}(" + ", ".join(f"{k}={_expr(v)}" for k, v in kw.items()) + ")"


def from_mdf(path: str, graph_id: str | None = None, lenient: bool = False) -> Diagram:
    from ..mdf import load

    model = load(path, strict=not lenient)
    g = model.graph(graph_id)
    notes = []
    if len(model.graphs) > 1:
        notes.append(f"drawing graph {g.id!r} of {len(model.graphs)}")
    conds = (g.conditions.node_specific or {}) if g.conditions is not None else {}
    boxes: list[Box] = []
    index: dict[str, int] = {}
    for node in g.nodes.values():
        rows = [Row(node.id, "title")]
        tip = [f"node {node.id}"]
        if node.input_ports:
            rows.append(Row("input ports", "section"))
            for port in node.input_ports.values():
                extra = []
                if port.shape is not None:
                    extra.append(dims(port.shape))
                if port.default_value is not None:
                    extra.append(f"default {_expr(port.default_value)}")
                if port.reduce not in (None, "overwrite"):
                    extra.append(f"reduce {port.reduce}")
                text = port.id + (f"  ({', '.join(extra)})" if extra else "")
                rows.append(Row(clip(text, MDF_ROW), "port", port.id, "in"))
                tip.append(f"in  {text}")
        if node.parameters:
            rows.append(Row("parameters", "section"))
            for param in node.parameters.values():
                if param.time_derivative is not None:
                    text = f"d{param.id}/dt = {_expr(param.time_derivative)}"
                    if param.default_initial_value is not None:
                        text += f"; {param.id}(0) = {_expr(param.default_initial_value)}"
                elif param.function is not None:
                    text = f"{param.id} = {_call(param.function, param.args)}"
                elif param.value is not None:
                    text = f"{param.id} = {_expr(param.value)}"
                    if param.default_initial_value is not None:
                        text += f" (initially {_expr(param.default_initial_value)})"
                else:
                    text = f"{param.id} = {_expr(param.default_initial_value)}"
                for c in param.conditions:
                    text += f"; if {_expr(c.test)}: {_expr(c.value)}"
                rows.append(Row(clip(text, MDF_ROW)))
                tip.append(text)
        if node.functions:
            rows.append(Row("functions", "section"))
            for f in node.functions.values():
                text = f"{f.id} = " + (_call(f.function, f.args) if f.function is not None else _expr(f.value))
                rows.append(Row(clip(text, MDF_ROW)))
                tip.append(text)
        cond = _condition(conds.get(node.id))
        if cond:
            rows.append(Row(clip(f"runs when {cond}", MDF_ROW), "section"))
            tip.append(f"condition {cond}")
        if node.graphs:
            rows.append(Row(f"{len(node.graphs)} nested graph(s)", "section"))
        if node.output_ports:
            rows.append(Row("output ports", "section"))
            for output in node.output_ports.values():
                text = f"{output.id} = {_expr(output.value)}"
                rows.append(Row(clip(text, MDF_ROW), "port", output.id, "out"))
                tip.append(f"out {text}")
        index[node.id] = len(boxes)
        boxes.append(Box(f"node:{node.id}", "mdf", "mdf", rows, "\n".join(tip)))
    links = []
    for e in g.edges.values():
        if e.sender not in index or e.receiver not in index:
            continue
        weight = (e.parameters or {}).get("weight")
        label = "" if weight is None or (isinstance(weight, (int, float)) and weight == 1) else f"w={_expr(weight)}"
        links.append(Link(index[e.sender], index[e.receiver], e.sender_port, e.receiver_port, label, e.id))
    term = (g.conditions.termination or {}) if g.conditions is not None else {}
    for k, stop in term.items():
        notes.append(f"termination {k}: {_condition(stop)}")
    return Diagram(f"{path}: graph {g.id}", "LR", boxes, links, notes=notes)
