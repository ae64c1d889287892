"""Control flow inside MDF nodes: ONNX Loop bodies and If branches held by a node as MDF graphs, and the
simulation state they read the enclosing graphs through (outer-scope values by name)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import limits
from ..errors import StdopsError, ValidationError

if TYPE_CHECKING:  # the engine imports this module, not the other way round
    from .engine import GraphEngine
    from .functions import CallContext


class SimState:
    """Shared by everything a simulation compiles: the random generator, and what a control-flow body may
    read of its enclosing graphs by name (the graphs, the inputs given to this evaluation)."""

    def __init__(self, seed: Any = None):
        self.rng = np.random.default_rng(seed)
        self.graphs: list[GraphEngine] = []
        self.inputs: dict[str, Any] = {}

    def outer_value(self, name: str) -> Any:
        """An ONNX outer-scope value by name: an input given to this evaluation, else the last value of an
        output port of that id in an enclosing graph (MDF port ids are the ONNX value names); None if none."""
        if name in self.inputs:
            return self.inputs[name]
        for g in self.graphs:
            for ne in g.nodes.values():
                v = ne.out_values.get(name)
                if v is not None:
                    return v
        return None


class Subgraph:
    """A Loop body or If branch held by a node, compiled once. Its inputs are the ports no edge feeds:

    - a port whose id names a value of the enclosing node's scope or of the enclosing graphs (an input given
      to the evaluation, an output port) reads that value (ONNX outer-scope references, by name);
    - the others are the body's formal inputs (Loop: iteration number, condition, carried values). MDF does
      not record ONNX's order of them, so each carried value goes to the first remaining port whose declared
      shape is the value's shape (else the next port in order), and the ports left over are the iteration
      number and then the condition.
    """

    def __init__(self, engine: GraphEngine, state: SimState, where: str, path: str | None):
        self.engine, self.state, self.where, self.path = engine, state, where, path
        self.ins = engine.input_ports()
        self.outs = engine.output_ports()
        self.ports = [engine.nodes[n].ports_by_id[p] for n, p in self.ins]

    def run(self, scope: dict, carried: list, iteration: Any = None, cond: Any = None) -> list:
        formal: list[int] = []
        for i, (port, (_, pid)) in enumerate(zip(self.ports, self.ins)):
            v = scope.get(pid) if pid in scope else self.state.outer_value(pid)
            if v is None:
                formal.append(i)
            else:
                port.set(v)
        left = list(formal)
        for v in carried:
            shape = np.shape(v)
            pick = next((i for i in left if self.ports[i].shape == shape and shape != ()), None)
            if pick is None and left:
                pick = left[0] if len(left) <= len(carried) else left[-1]
            if pick is None:
                raise StdopsError(
                    f"{self.path + ': ' if self.path else ''}{self.where}: the body has no input "
                    f"port left for a carried value"
                )
            left.remove(pick)
            self.ports[pick].set(v)
        for i, v in zip(left, (iteration, cond)):
            self.ports[i].set(v)
        if len(left) > 2 or (left and iteration is None):
            names = ", ".join(repr(self.ins[i][1]) for i in left)
            raise StdopsError(
                f"{self.path + ': ' if self.path else ''}{self.where}: the body reads {names}, which is neither "
                f"one of its inputs nor a value of the enclosing graph (give it as an input)"
            )
        self.engine.evaluate(None)
        return [self.engine.nodes[n].out_values[o] for n, o in self.outs]


def _subgraph_param(ctx: CallContext, source: Callable, name: str, op: str, where: str):
    """The MDF graph a Loop/If node holds in its parameter ``name`` (``{"graph_<id>": {...}}``)."""
    from .schema import graph_from_value

    key = source(name)
    graph = graph_from_value(ctx.constants.get(key)) if key is not None else None
    if graph is None:
        raise ValidationError(ctx.path, where, f"onnx::{op} needs a '{name}' parameter holding an MDF graph")
    if ctx.compile_subgraph is None:  # compile_call comes here only with one (functions.py)
        raise ValidationError(ctx.path, where, f"onnx::{op}: subgraphs are not compiled here")
    return ctx.compile_subgraph(graph, f"{where}.{name}")


def compile_loop(args, local, where, ctx, source, names) -> tuple[Callable, set[str]]:
    """onnx::Loop whose ``body`` is an MDF graph (as modeci-mdf's ONNX importer writes it). The body's
    inputs are its ports no edge feeds: the carried values, the iteration number and the condition (see
    engine.Subgraph for how they are told apart) and values of the enclosing scope, read by name."""
    runner = _subgraph_param(ctx, source, "body", "Loop", where)
    m_key, cond_key = source("M"), source("cond")
    carried_keys = [local[a] for a in args if a not in ("M", "cond", "body")]
    cap = limits.max_loop_iterations()

    def call(s: dict) -> Any:
        m = None if m_key is None else s[m_key]
        trip = None if m is None else int(np.asarray(m).reshape(-1)[0]) if np.size(m) else 0
        cond = True if cond_key is None else bool(np.asarray(s[cond_key]).reshape(-1)[0])
        carried = [s[k] for k in carried_keys]
        i = 0
        while (trip is None or i < trip) and cond:
            if i >= cap:
                raise StdopsError(f"{where}: onnx::Loop ran {cap} iterations without stopping")
            outs = runner.run(s, carried, iteration=np.asarray(i, dtype=np.int64), cond=np.asarray(cond))
            cond_out, new = _split_loop_outputs(outs, len(carried))
            if cond_out is not None:
                cond = bool(np.asarray(cond_out).reshape(-1)[0])
            carried = new
            i += 1
        return carried[0] if len(carried) == 1 else tuple(carried)

    return call, names


def compile_if(args, local, where, ctx, source, names) -> tuple[Callable, set[str]]:
    """onnx::If whose then_branch / else_branch are MDF graphs: the branch the condition picks runs (its
    ports read values of the enclosing scope by name) and its outputs are the node's value."""
    then_run = _subgraph_param(ctx, source, "then_branch", "If", where)
    else_run = _subgraph_param(ctx, source, "else_branch", "If", where)
    cond_key = source("cond")
    if cond_key is None:
        raise ValidationError(ctx.path, where, "onnx::If needs its 'cond' input")

    def call(s: dict) -> Any:
        branch = then_run if bool(np.asarray(s[cond_key]).reshape(-1)[0]) else else_run
        outs = branch.run(s, [])
        return outs[0] if len(outs) == 1 else tuple(outs)

    return call, names


def _split_loop_outputs(outs: list, n_carried: int) -> tuple[Any, list]:
    """Body outputs -> (condition, carried values): the one boolean output is the condition."""
    if len(outs) == n_carried:
        return None, list(outs)
    flags = [isinstance(v, (bool, np.bool_)) or (isinstance(v, np.ndarray) and v.dtype == np.bool_) for v in outs]
    if flags.count(True) == 1:
        i = flags.index(True)
        rest = outs[:i] + outs[i + 1 :]
        return outs[i], rest[:n_carried]
    return outs[0], list(outs[1 : 1 + n_carried])
