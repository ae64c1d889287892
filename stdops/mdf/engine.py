"""Executing MDF graphs: compile once (expressions, edges, schedule), then evaluate fast.

One evaluation of a node, in the reference's order:

1. read the input ports (an input port then falls back to its default_value, or zeros);
2. give every parameter its previous value (a stateful parameter that has never been evaluated
   reads its default_initial_value, else 0; a plain value is computed the first time);
3. evaluate the functions in dependency order (they see the PREVIOUS parameter values);
4. update the parameters in declared order (a later one sees the earlier ones' new values):
   ``value`` beats ``function`` beats ``time_derivative``; with a time increment dt a time derivative
   is a forward Euler step ``v + dv/dt * dt``, without one the parameter resets to its initial value;
   then each parameter condition sets ``v = where(test, value, v)`` (the test sees the old ``v``);
5. compute the output ports.

An edge sets its receiver port to ``weight * sender value`` (element-wise; weight 1 passes the value
through) just before the receiver runs, if the sender has run at least once. Several edges into one
port combine by the port's ``reduce`` (overwrite: the last, in declaration order, wins; add;
multiply): deterministic, where the reference depends on set ordering.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ..errors import InputError, StdopsError, ValidationError
from . import conditions as cond_mod
from .condition_files import build_condition
from .control import SimState as _State
from .control import Subgraph
from .expr import compile_value, constant_value
from .functions import CallContext
from .node_engine import NodeEngine, _InPort
from .scheduler import Scheduler
from .schema import Graph, Model


def _default_opset(model: Model | None) -> int:
    """The model's onnx_opset_version, else the newest opset the ONNX binding table knows."""
    from ..onnx.opset import newest_opset

    v = getattr(model, "onnx_opset_version", None) if model is not None else None
    try:
        return int(v) if v is not None else newest_opset()
    except (TypeError, ValueError):
        return newest_opset()


class _Edge:
    __slots__ = ("id", "sender", "sport", "receiver", "rport", "weight", "passthrough")
    id: str
    sender: str
    sport: str
    receiver: str
    rport: _InPort
    weight: Any
    passthrough: bool


class GraphEngine:
    """A compiled graph: nodes, edges, scheduler."""

    def __init__(self, graph: Graph, ctx: CallContext, where: str = ""):
        self.graph = graph
        self.ctx = ctx
        path = ctx.path
        self.where = where or f"graphs.{graph.id}"
        gw = self.where
        self.nodes: dict[str, NodeEngine] = {}
        for n in graph.nodes.values():
            self.nodes[n.id] = NodeEngine(n, f"{gw}.nodes.{n.id}", ctx)
        node_ids = list(self.nodes)
        self.edges: list[_Edge] = []
        deps: dict[str, set] = {n: set() for n in node_ids}
        for e in graph.edges.values():
            ew = f"{gw}.edges.{e.id}"
            if e.sender not in graph.nodes:
                raise ValidationError(path, f"{ew}.sender", f"no node {e.sender!r}")
            if e.receiver not in graph.nodes:
                raise ValidationError(path, f"{ew}.receiver", f"no node {e.receiver!r}")
            sn, rn = graph.nodes[e.sender], graph.nodes[e.receiver]
            if e.sender_port not in sn.output_ports:
                raise ValidationError(
                    path, f"{ew}.sender_port", f"node {e.sender!r} has no output port {e.sender_port!r}"
                )
            if e.receiver_port not in rn.input_ports:
                raise ValidationError(
                    path, f"{ew}.receiver_port", f"node {e.receiver!r} has no input port {e.receiver_port!r}"
                )
            ed = _Edge()
            ed.id, ed.sender, ed.sport, ed.receiver = e.id, e.sender, e.sender_port, e.receiver
            ed.rport = self.nodes[e.receiver].ports_by_id[e.receiver_port]
            w = (e.parameters or {}).get("weight", 1)
            c = compile_value(copy.deepcopy(w), {}, where=f"{ew}.parameters.weight", path=path)
            if not c.const:
                raise ValidationError(path, f"{ew}.parameters.weight", "an edge weight must be a constant")
            ed.weight = c.value
            ed.passthrough = type(ed.weight) in (int, float) and ed.weight == 1
            self.edges.append(ed)
            if rn.input_ports[e.receiver_port].default_value is None:
                deps[e.receiver].add(e.sender)
        self.incoming: dict[str, list[_Edge]] = {n: [e for e in self.edges if e.receiver == n] for n in node_ids}
        conds, term = {}, {}
        cs = graph.conditions
        ids = set(node_ids)
        if cs is not None:
            for n, c in (cs.node_specific or {}).items():
                if n not in ids:
                    raise ValidationError(path, f"{gw}.conditions.node_specific.{n}", f"no node {n!r}")
                conds[n] = build_condition(c, ids, f"{gw}.conditions.node_specific.{n}", path)
            for scale, c in (cs.termination or {}).items():
                tw = f"{gw}.conditions.termination.{scale}"
                try:
                    ts = cond_mod.parse_time_scale(scale)
                except ValueError as e:
                    raise ValidationError(path, tw, str(e)) from None
                term[ts] = build_condition(c, ids, tw, path)
        try:
            self.scheduler = Scheduler(node_ids, deps, conds, term, value_getter=self._value_of)
        except StdopsError as e:
            raise ValidationError(path, gw, str(e)) from None
        self.ran: set = set()
        self._held: list[_InPort] = []
        if ctx.state is not None:
            ctx.state.graphs.append(self)

    def _value_of(self, node: str, name: str) -> Any:
        return self.nodes[node].value_of(name)

    def all_nodes(self) -> list[tuple[str, NodeEngine]]:
        """(id, node) of every node, nested graphs' nodes included (after their parent)."""
        out = []
        for nid, ne in self.nodes.items():
            out.append((nid, ne))
            for sub, _, _ in ne.subgraphs:
                out += sub.all_nodes()
        return out

    def set_inputs(self, inputs: dict) -> None:
        """Hold each input on its port(s) for this trial: a node that runs several times in the trial
        reads it every time (as PsyNeuLink and modeci-mdf do). Ports of nested graphs' nodes can be
        given as ``node.port``."""
        nodes = self.all_nodes()
        for key, value in inputs.items():
            hits = []
            if "." in key and key not in {p for _, n in nodes for p in n.ports_by_id}:
                nid, _, pid = key.rpartition(".")
                hits = [n.ports_by_id[pid] for i, n in nodes if i == nid and pid in n.ports_by_id]
            else:
                hits = [n.ports_by_id[key] for _, n in nodes if key in n.ports_by_id]
            if not hits and self._body_reads(key):
                # a value a Loop body / If branch reads from the enclosing scope (ONNX outer-scope reference)
                self.ctx.state.inputs[key] = constant_value(value) if isinstance(value, list) else value
                continue
            if not hits:
                raise InputError(
                    f"{self.ctx.path + ': ' if self.ctx.path else ''}no input port {key!r} in graph "
                    f"{self.graph.id!r} (give a port id or 'node.port')"
                )
            # the caller's arrays are copied: nothing a model computes can write into them
            v = (
                constant_value(value)
                if isinstance(value, list)
                else np.array(value, copy=True)
                if isinstance(value, np.ndarray)
                else value
            )
            for port in hits:
                port.hold(v)
            self._held.extend(hits)
            if self.ctx.state is not None:
                self.ctx.state.inputs[key.rpartition(".")[2]] = v

    def _body_reads(self, name: str) -> bool:
        state = self.ctx.state
        return state is not None and any(name == p for g in state.graphs if g is not self for _, p in g.input_ports())

    def evaluate(self, dt: Any = None, inputs: dict | None = None) -> None:
        if inputs:
            self.set_inputs(inputs)
        try:
            self._evaluate(dt)
        finally:
            for port in self._held:
                port.held = None
            self._held.clear()
            if self.ctx.state is not None and inputs:
                self.ctx.state.inputs.clear()

    def _evaluate(self, dt: Any) -> None:
        nodes, incoming, ran = self.nodes, self.incoming, self.ran
        loc = f"{self.ctx.path}: " if self.ctx.path else ""
        try:
            for step in self.scheduler.run():
                for nid in step:
                    ran.add(nid)
                    for e in incoming[nid]:
                        if e.sender in ran:
                            v = nodes[e.sender].out_values[e.sport]
                            try:
                                e.rport.set(v if e.passthrough else e.weight * v)
                            except Exception as ex:  # noqa: BLE001 - weight and value do not fit
                                raise StdopsError(
                                    f"{loc}{self.where}.edges.{e.id}: {type(ex).__name__}: {ex}"
                                ) from None
                    node = nodes[nid]
                    try:
                        node.evaluate(dt)
                    except StdopsError:
                        raise
                    except KeyError as ex:  # an expression read a value nothing has computed yet
                        raise StdopsError(
                            f"{loc}{node.where}: evaluation failed: {ex} has no value yet (a parameter reads the "
                            f"previous values of parameters and functions; on the first evaluation there are none)"
                        ) from None
                    except Exception as ex:  # noqa: BLE001 - a value the model computes is at fault
                        raise StdopsError(f"{loc}{node.where}: evaluation failed: {type(ex).__name__}: {ex}") from None
        except StdopsError:
            raise
        except Exception as ex:  # noqa: BLE001 - a condition could not be evaluated
            raise StdopsError(f"{loc}{self.where}.conditions: {type(ex).__name__}: {ex}") from None

    def input_ports(self) -> list[tuple[str, str]]:
        """(node, port) of every input port no edge feeds: the graph's inputs."""
        fed = {(e.receiver, e.rport.id) for e in self.edges}
        return [(n, p.id) for n, ne in self.nodes.items() for p in ne.in_ports if (n, p.id) not in fed]

    def output_ports(self) -> list[tuple[str, str]]:
        """(node, port) of the output ports of nodes that send no edge."""
        senders = {e.sender for e in self.edges}
        return [(n, o) for n, ne in self.nodes.items() if n not in senders for o, _ in ne.outputs]


def _make_ctx(model: Model | None, state: _State) -> CallContext:
    producer = getattr(model, "generating_application", None)
    ctx = CallContext(path=getattr(model, "path", None), opset=_default_opset(model), state=state, producer=producer)

    def compile_subgraph(graph: Graph, where: str) -> Subgraph:
        sub = GraphEngine(
            graph,
            CallContext(
                path=ctx.path, opset=ctx.opset, state=state, compile_subgraph=compile_subgraph, producer=producer
            ),
            where,
        )
        return Subgraph(sub, state, where, ctx.path)

    ctx.compile_subgraph = compile_subgraph
    return ctx


def check_model(model: Model) -> None:
    """Compile every graph of ``model`` (no evaluation): raises on any bad reference or expression."""
    for g in model.graphs.values():
        build_graph(g, _make_ctx(model, _State(0)))


def build_graph(graph: Graph, ctx: CallContext) -> GraphEngine:
    """GraphEngine(graph), with anything unexpected reported as the model's fault at the graph."""
    try:
        return GraphEngine(graph, ctx)
    except StdopsError:
        raise
    except Exception as e:  # noqa: BLE001 - a value of the wrong kind somewhere in the graph
        raise ValidationError(ctx.path, f"graphs.{graph.id}", f"{type(e).__name__}: {e}") from None
