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
import dataclasses
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from .. import limits
from ..errors import InputError, ResourceLimitError, StdopsError, ValidationError
from . import conditions as cond_mod
from .expr import compile_value, constant_value
from .functions import STANDARD, CallContext, compile_call
from .scheduler import Scheduler
from .schema import Graph, Model, Node, Parameter

DEFAULT_INIT_VALUE = 0.0


class _State:
    """Shared by everything a simulation compiles: the random generator."""

    def __init__(self, seed: Any = None):
        self.rng = np.random.default_rng(seed)


def _default_opset(model: Model | None) -> int:
    """The model's onnx_opset_version, else the newest opset the ONNX binding table knows."""
    from ..onnx.opset import newest_opset

    v = getattr(model, "onnx_opset_version", None) if model is not None else None
    try:
        return int(v) if v is not None else newest_opset()
    except (TypeError, ValueError):
        return newest_opset()


class _InPort:
    __slots__ = ("id", "key", "default", "shape", "reduce", "curr", "zeros", "last", "first_zero")

    def __init__(self, port, where: str, path: str | None):
        self.id = port.id
        self.key = port.id
        self.shape = tuple(port.shape) if port.shape is not None else ()
        self.reduce = port.reduce or "overwrite"
        if port.default_value is not None:
            c = compile_value(copy.deepcopy(port.default_value), {}, where=f"{where}.default_value", path=path)
            if not c.const:
                raise ValidationError(path, f"{where}.default_value", "a default value must be a constant")
            self.default = c.value
        else:
            self.default = None
        try:  # a shape is the model's word: bounded before anything is allocated for it
            limits.check_array(self.shape, np.float64, "input port")
        except ResourceLimitError as e:
            raise ValidationError(path, f"{where}.shape", str(e)) from None
        self.zeros = np.full(self.shape, 0.0)
        # before the first evaluation an unconnected port holds integer zeros unless typed float
        self.first_zero = self.zeros if port.type and "float" in port.type else np.zeros(self.shape, np.int64)
        self.last = None
        self.reset()

    def reset(self) -> None:
        if self.reduce == "overwrite":
            self.curr = self.default if self.default is not None else self.first_zero
        else:
            self.curr = None

    def set(self, value: Any) -> None:
        if self.curr is None or self.reduce == "overwrite":
            self.curr = value
        elif self.reduce == "add":
            self.curr = self.curr + value
        else:
            self.curr = self.curr * value

    def take(self) -> Any:
        v = self.curr
        if v is None:
            v = self.default if self.default is not None else self.zeros
        self.curr = None
        self.last = v
        return v


class _Param:
    __slots__ = ("id", "key", "value", "call", "td", "dflt", "conds", "stateful", "curr", "static", "once", "fresh")

    def __init__(self, pid: str):
        self.id = pid
        self.key = pid
        self.value = self.call = self.td = self.dflt = None
        self.conds: list = []
        self.stateful = False
        self.curr: Any = None
        self.static = False
        #: how a plain value's first evaluation is shared with its update, so that it is computed once per
        #: step: "skip" (nothing reads it before the update), "reuse" (what it reads cannot change before
        #: the update), None (it reads functions / parameters that can: evaluated again at the update)
        self.once: str | None = None
        self.fresh = False

    def current(self, s: dict) -> Any:
        if self.curr is None:
            if self.value is not None or self.dflt is not None:
                if self.stateful:
                    return self.dflt.fn(s) if self.dflt is not None else DEFAULT_INIT_VALUE
                if self.once == "skip":
                    return None
                s[self.key] = DEFAULT_INIT_VALUE
                self.curr = self.value.fn(s)
                self.fresh = self.once == "reuse"
        return self.curr

    def update(self, s: dict, dt: Any) -> Any:
        if self.value is not None:
            if self.fresh:  # computed by current() in this step, from values that have not changed since
                v, self.fresh = self.curr, False
            else:
                v = self.value.fn(s)
        elif self.call is not None:
            v = self.call(s)
        elif self.td is not None:
            if dt is None:
                v = self.dflt.fn(s) if self.dflt is not None else None
            else:
                cur = self.curr
                if cur is None:
                    cur = self.dflt.fn(s) if self.dflt is not None else DEFAULT_INIT_VALUE
                v = np.add(cur, self.td.fn(s) * dt)
        else:
            v = self.curr
        if self.conds:
            for test, val in self.conds:
                mask = test.fn(s)
                tv = val.fn(s)
                if v is None:
                    v = DEFAULT_INIT_VALUE
                v = np.where(mask, tv, v)
        self.curr = v
        return v


class NodeEngine:
    """A compiled node: scope, ports, parameters, functions, outputs."""

    def __init__(self, node: Node, where: str, ctx: CallContext):
        self.id = node.id
        self.where = where
        ctx = dataclasses.replace(ctx, constants={})  # load-time constants are per node
        path = ctx.path
        self.scope: dict = {}
        self.in_ports = [_InPort(p, f"{where}.input_ports.{p.id}", path) for p in node.input_ports.values()]
        self.ports_by_id = {p.id: p for p in self.in_ports}
        known: dict[str, Hashable] = {}
        for p in node.input_ports:
            known[p] = p
        for p in node.parameters:
            known[p] = p
        for f in node.functions:
            known[f] = f
        # nested graphs: fed from same-named input ports, their outputs visible as "node.port"
        self.subgraphs: list = []
        for sg in node.graphs.values():
            sub = GraphEngine(sg, dataclasses.replace(ctx, constants={}), f"{where}.graphs.{sg.id}")
            feeds = []
            for n, p in sub.input_ports():
                for name in (p, f"{n}.{p}"):
                    if name in node.input_ports:
                        feeds.append((name, sub.nodes[n].ports_by_id[p]))
                        break
            outs = []
            for n, ne in sub.nodes.items():
                for o, _ in ne.outputs:
                    key = ("graph", sg.id, n, o)
                    outs.append((key, ne, o))
                    known.setdefault(f"{n}.{o}", key)
            self.subgraphs.append((sub, feeds, outs))
        base_known = (
            set(node.input_ports) | set(node.parameters) | {k for k, v in known.items() if isinstance(v, tuple)}
        )

        # parameters
        self.params: list[_Param] = []
        for p in node.parameters.values():
            self.params.append(self._compile_param(p, known, f"{where}.parameters.{p.id}", ctx))
        self.param_by_id = {p.id: p for p in self.params}

        # functions, ordered so that each comes after the functions it reads
        compiled = []
        all_reads: set = set()  # every id the functions read
        for f in node.functions.values():
            fw = f"{where}.functions.{f.id}"
            fname = str(f.function) if f.function is not None else None
            if fname is not None and (f.value is None or fname in STANDARD or fname.startswith("onnx::")):
                # a known function beats a value written beside it (as in the reference)
                fn, names = compile_call(str(f.function), f.args, known, f.id, fw, ctx)
            elif f.value is not None:
                from .functions import compile_args

                steps, local, names = compile_args(f.args, known, f.id, fw, path)
                c = compile_value(copy.deepcopy(f.value), local, where=f"{fw}.value", path=path)
                names |= {n for n in c.names if n in known and local.get(n) == known[n]}
                fn = _with_steps(steps, c.fn)
            else:
                raise ValidationError(path, fw, "a function needs 'function' or 'value'")
            compiled.append((f.id, fn, {n for n in names if n in node.functions and n != f.id}, fw))
            all_reads.update(names)
        self.functions: list[tuple[str, Callable]] = []
        ready = set(base_known)
        queue = list(compiled)
        seen_len: dict[str, int] = {}
        while queue:
            fid, fn, needs, fw = queue.pop(0)
            if needs <= ready:
                self.functions.append((fid, fn))
                ready.add(fid)
            else:
                if seen_len.get(fid) == len(queue):
                    missing = ", ".join(sorted(needs - ready))
                    raise ValidationError(
                        path,
                        fw,
                        f"cannot be ordered: it reads {missing}, which depend(s) on it (a cycle between functions)",
                    )
                seen_len[fid] = len(queue)
                queue.append((fid, fn, needs, fw))

        # outputs
        self.outputs: list[tuple[str, Callable]] = []
        for o in node.output_ports.values():
            if o.value is None:
                raise ValidationError(path, f"{where}.output_ports.{o.id}.value", "an output port needs a value")
            c = compile_value(copy.deepcopy(o.value), known, where=f"{where}.output_ports.{o.id}.value", path=path)
            self.outputs.append((o.id, c.fn))
        self.out_values: dict[str, Any] = {o.id: None for o in node.output_ports.values()}
        self.func_values: dict[str, Any] = {}
        self._dyn = [p for p in self.params if not p.static]
        for p in self.params:
            if p.static:
                self.scope[p.key] = p.curr
        self._share_first_evaluations(node, all_reads)

    def _share_first_evaluations(self, node: Node, function_reads: set) -> None:
        """Decide, per plain-valued parameter, how its first-trial value is computed once (see _Param.once)."""
        readers = set(function_reads)
        opaque = False
        for p in self.params:
            opaque |= p.call is not None  # a function-valued parameter: what it reads is not known here
            for c in (p.value, p.td, p.dflt, *[x for pair in p.conds for x in pair]):
                if c is not None:
                    readers |= c.names  # a condition reads its own parameter's current value
        stable = set(node.input_ports) | {p.id for p in self.params if p.static}
        for p in self.params:
            if p.value is not None and not p.stateful and not p.static:
                if p.id not in readers and not opaque:
                    p.once = "skip"
                elif p.value.names <= stable:
                    p.once = "reuse"

    def _compile_param(self, p: Parameter, known: dict, pw: str, ctx: CallContext) -> _Param:
        path = ctx.path
        rt = _Param(p.id)
        rt.stateful = p.is_stateful()
        if p.value is not None:
            rt.value = compile_value(copy.deepcopy(p.value), known, where=f"{pw}.value", path=path)
        elif p.function is not None:
            rt.call, _ = compile_call(str(p.function), p.args, known, p.id, pw, ctx)
        if p.time_derivative is not None:
            rt.td = compile_value(p.time_derivative, known, where=f"{pw}.time_derivative", path=path)
        if p.default_initial_value is not None:
            rt.dflt = compile_value(
                copy.deepcopy(p.default_initial_value), known, where=f"{pw}.default_initial_value", path=path
            )
        for c in p.conditions:
            cw = f"{pw}.conditions.{c.id}"
            if c.test is None or c.value is None:
                raise ValidationError(path, cw, "a parameter condition needs 'test' and 'value'")
            rt.conds.append(
                (
                    compile_value(c.test, known, where=f"{cw}.test", path=path),
                    compile_value(copy.deepcopy(c.value), known, where=f"{cw}.value", path=path),
                )
            )
        if rt.value is not None and rt.value.const and not rt.stateful and not rt.conds:
            rt.static = True
            rt.curr = rt.value.value
            ctx.constants[p.id] = rt.value.value
        return rt

    def evaluate(self, dt: Any) -> None:
        s = self.scope
        for port in self.in_ports:
            s[port.key] = port.take()
        for sub, feeds, outs in self.subgraphs:
            for key, port in feeds:
                port.set(s[key])
            sub.evaluate(dt)
            for key, ne, o in outs:
                s[key] = ne.out_values[o]
        dyn = self._dyn
        for p in dyn:
            s[p.key] = p.current(s)
        fv = self.func_values
        for fid, fn in self.functions:
            fv[fid] = s[fid] = fn(s)
        for p in dyn:
            s[p.key] = p.update(s, dt)
        ov = self.out_values
        for oid, fn in self.outputs:
            ov[oid] = fn(s)

    def value_of(self, name: str) -> Any:
        """Current value of a port, parameter or function (for Threshold conditions)."""
        if name in self.ports_by_id:
            port = self.ports_by_id[name]
            return port.last if port.last is not None else (port.default if port.default is not None else port.zeros)
        if name in self.param_by_id:
            p = self.param_by_id[name]
            if p.curr is None:
                if p.dflt is not None and p.dflt.const:
                    return p.dflt.value
                return 0
            return p.curr
        if name in self.func_values:
            return self.func_values[name]
        if name in self.out_values:
            v = self.out_values[name]
            return 0 if v is None else v
        return 0


def _with_steps(steps: list, fn: Callable) -> Callable:
    if not steps:
        return fn

    def run(s: dict) -> Any:
        for k, c in steps:
            s[k] = c.fn(s)
        return fn(s)

    return run


class _Edge:
    __slots__ = ("id", "sender", "sport", "receiver", "rport", "weight", "passthrough")


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
                conds[n] = cond_mod.build_condition(c, ids, f"{gw}.conditions.node_specific.{n}", path)
            for scale, c in (cs.termination or {}).items():
                tw = f"{gw}.conditions.termination.{scale}"
                try:
                    ts = cond_mod.parse_time_scale(scale)
                except ValueError as e:
                    raise ValidationError(path, tw, str(e)) from None
                term[ts] = cond_mod.build_condition(c, ids, tw, path)
        try:
            self.scheduler = Scheduler(node_ids, deps, conds, term, value_getter=self._value_of)
        except StdopsError as e:
            raise ValidationError(path, gw, str(e)) from None
        self.ran: set = set()

    def _value_of(self, node: str, name: str) -> Any:
        return self.nodes[node].value_of(name)

    def set_inputs(self, inputs: dict) -> None:
        for key, value in inputs.items():
            hits = []
            if "." in key and key not in {p for n in self.nodes.values() for p in n.ports_by_id}:
                nid, _, pid = key.rpartition(".")
                if nid in self.nodes and pid in self.nodes[nid].ports_by_id:
                    hits.append(self.nodes[nid].ports_by_id[pid])
            else:
                hits = [n.ports_by_id[key] for n in self.nodes.values() if key in n.ports_by_id]
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
                port.set(v)

    def evaluate(self, dt: Any = None, inputs: dict | None = None) -> None:
        if inputs:
            self.set_inputs(inputs)
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
    ctx = CallContext(path=getattr(model, "path", None), opset=_default_opset(model), state=state)

    def compile_subgraph(graph: Graph, where: str) -> Callable:
        sub = GraphEngine(
            graph, CallContext(path=ctx.path, opset=ctx.opset, state=state, compile_subgraph=compile_subgraph), where
        )
        ins = sub.input_ports()
        outs = sub.output_ports()

        def run(i: int, cond: Any, carried: list) -> list:
            feeds = list(carried)
            if len(ins) == len(carried) + 2:
                feeds = [np.asarray(i, dtype=np.int64), np.asarray(cond)] + feeds
            for (n, p), v in zip(ins, feeds):
                sub.nodes[n].ports_by_id[p].set(v)
            sub.evaluate(None)
            return [sub.nodes[n].out_values[o] for n, o in outs]

        return run

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
