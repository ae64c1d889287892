"""One MDF node, compiled once: its input ports, parameters (stateful, time derivatives, conditions),
functions in dependency order and output ports; the evaluation order is :mod:`stdops.mdf.engine`'s."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from .. import limits
from ..errors import ResourceLimitError, StdopsError, ValidationError
from .expr import compile_value
from .functions import STANDARD, CallContext, compile_call, onnx_string_attributes, string_constant
from .schema import Node, Parameter

DEFAULT_INIT_VALUE = 0.0


class _InPort:
    __slots__ = ("id", "key", "default", "shape", "reduce", "curr", "zeros", "last", "first_zero", "held")

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
        self.held = None  # a trial's input: read by every execution of the node within the trial
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

    def hold(self, value: Any) -> None:
        self.held = value
        self.set(value)

    def take(self) -> Any:
        v = self.curr
        if v is None:
            v = self.held if self.held is not None else self.default if self.default is not None else self.zeros
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
        if node.graphs:
            from .engine import GraphEngine  # a nested graph: the graph engine again (imported here: no cycle)
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

        # a parameter that gives an ONNX function of this node a STRING attribute (``mode: constant``) holds
        # a string, not a name; ``fid[i]`` in the node's expressions says which outputs of a call are read
        calls = [(f.id, f.function) for f in node.functions.values()]
        calls += [(p.id, p.function) for p in node.parameters.values()]
        string_params: set[str] = set()  # a string attribute: the value is a string when it names nothing
        maybe_string_params: set[str] = set()  # a required attribute: a string when it does not compile
        for _, fname in calls:
            if isinstance(fname, str):
                definite, maybe = onnx_string_attributes(fname, ctx.opset)
                string_params |= definite
                maybe_string_params |= maybe
        ctx.output_counts = _output_counts(node, [c for c, fname in calls if fname is not None])

        # parameters
        self.params: list[_Param] = []
        for p in node.parameters.values():
            pw = f"{where}.parameters.{p.id}"
            if (
                isinstance(p.value, str)
                and p.value not in known
                and (p.id in string_params or (p.id in maybe_string_params and not _compiles(p.value, known, pw, path)))
            ):
                rt = _Param(p.id)
                rt.value = string_constant(p.value)
                rt.static, rt.curr = True, p.value
                ctx.constants[p.id] = p.value
                self.params.append(rt)
                continue
            self.params.append(self._compile_param(p, known, pw, ctx))
        self.param_by_id = {p.id: p for p in self.params}

        # functions, ordered so that each comes after the functions it reads
        compiled = []
        all_reads: set = set()  # every id the functions read
        for f in node.functions.values():
            fw = f"{where}.functions.{f.id}"
            fname = str(f.function) if f.function is not None else None
            if fname is not None and (f.value is None or fname in STANDARD or fname.startswith("onnx:")):
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


def _output_counts(node: Node, call_ids: list[str]) -> dict[str, int]:
    """call id -> 1 + the largest ``id[i]`` index the node's expressions use."""
    import re

    texts = [o.value for o in node.output_ports.values()]
    texts += [f.value for f in node.functions.values()]
    texts += [v for f in node.functions.values() for v in (f.args or {}).values()]
    texts += [p.value for p in node.parameters.values()]
    texts = [t for t in texts if isinstance(t, str)]
    out: dict[str, int] = {}
    for cid in call_ids:
        pat = re.compile(re.escape(cid) + r"\[(\d+)\]")
        idx = [int(m) for t in texts for m in pat.findall(t)]
        if idx:
            out[cid] = max(idx) + 1
    return out


def _with_steps(steps: list, fn: Callable) -> Callable:
    if not steps:
        return fn

    def run(s: dict) -> Any:
        for k, c in steps:
            s[k] = c.fn(s)
        return fn(s)

    return run


def _compiles(expr: str, known: Any, where: str, path: str | None) -> bool:
    """Whether a parameter's text is an expression (else, for a required string attribute, the text)."""
    from .expr import compile_value

    try:
        compile_value(expr, known, where=where, path=path)
    except StdopsError:
        return False
    return True
