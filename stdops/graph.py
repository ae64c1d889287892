"""The dataflow IR shared by the ONNX and ncnn front ends, and its compiled plan.

A front end turns a model into :class:`Node` records whose ``fn`` is a kernel with its attributes
already bound, then compiles them once into a :class:`Plan`:

- every value gets a slot index; a step is ``(fn, input slots, output slots, slots to release)``;
- a run fills a list of slots and calls the steps in order: no dict look-ups, no attribute parsing;
- an intermediate is released right after its last use, so peak memory follows liveness;
- asking for a subset of outputs runs only the steps they need (ncnn's Extractor semantics);
  the schedule for each requested set is computed once and cached;
- a ``hook(node, output_name, value)`` sees every value as it is produced (``stdops compare``, ``--dump``);
- inside ``with timing(callback):`` every step of the outermost plan reports the clock around its kernel
  (``stdops profile``); a run outside such a block pays nothing for it;
- a plan may carry an optimized twin, ``plan.fused`` (stdops/optimize: folded constants, fused chains):
  a run without a hook whose requested values all exist in the twin runs the twin; with a hook every
  node runs as written, so every value is seen.

Conventions for values: a tensor is an ``np.ndarray``; a sequence is a ``list``; an empty optional is
``None``. A kernel returns a single value, or a ``tuple`` holding every output of the op.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from .errors import InputError, ModelFormatError, OpError, ResourceLimitError, StdopsError
from .ops._blas import serial as blas_serial


class PlanFallback(StdopsError):
    """Raised by a step of an optimized plan whose load-time assumption does not hold for this run (a value's
    shape that a folded Shape node took as static): the run is done again on the plan as written."""


#: slot 0 always holds None: an empty optional input reads it
_EMPTY_SLOT = 0

Hook = Callable[[str, str, Any], None]

#: the hook of the run in progress, so that steps running subgraphs (If, Loop, Scan) can show their
#: inner values too (see ``subgraph_hook``)
_ACTIVE_HOOK: contextvars.ContextVar[Hook | None] = contextvars.ContextVar("stdops_hook", default=None)


#: ``timer(node, start, end, inputs, result)``: the perf_counter readings around one step's kernel
StepTimer = Callable[["Node", float, float, list, Any], None]

#: the step timer of the runs in progress (see ``timing``); the outermost plan takes it, so that steps of
#: subgraphs (If, Loop, Scan bodies) count as part of the node that runs them, never twice
_STEP_TIMER: contextvars.ContextVar[StepTimer | None] = contextvars.ContextVar("stdops_step_timer", default=None)


@contextlib.contextmanager
def timing(timer: StepTimer) -> Iterator[None]:
    """Within the block, each plan run calls ``timer(node, start, end, inputs, result)`` after every step, with
    ``time.perf_counter()`` read before the step gathers its inputs and right after its kernel returns (the
    hook and slot releases are outside the interval). ``inputs`` and ``result`` are the step's values (to size
    them, not to keep them)."""
    token = _STEP_TIMER.set(timer)
    try:
        yield
    finally:
        _STEP_TIMER.reset(token)


def subgraph_hook(prefix: str) -> Hook | None:
    """The active run's hook, naming values of a subgraph run ``prefix/inner node`` (None when no hook)."""
    outer = _ACTIVE_HOOK.get()
    if outer is None:
        return None
    return lambda node, name, value: outer(f"{prefix}/{node}", name, value)


@dataclasses.dataclass
class Node:
    """One operation of a model, with its kernel bound.

    ``bound`` is the :class:`~stdops.ops.bind.Bound` behind ``fn`` when the step is exactly one kernel
    called on the node's inputs in order (``fn is bound.fn``): its kernel, attributes and constant inputs
    are then what a graph pass reads and rewrites (:meth:`rebound`). It is None for steps that do more
    (control flow, version adapters that reorder inputs, ncnn layout conversions); ``kernels`` still names
    the kernels such a step runs on.
    """

    name: str  # unique within the graph (front ends invent one when the file has none)
    op: str  # what the user calls it: "Conv", "Convolution", ...
    fn: Callable  # fn(*input values) -> value | tuple of values
    inputs: list[str]  # value names; "" = empty optional input
    outputs: list[str]  # value names; "" = an output the model does not use
    where: str = ""  # where it is in the file (line of a .param, node index), for messages
    bound: Any = None  # stdops.ops.bind.Bound | None (see above)
    kernels: tuple[str, ...] = ()  # the kernels the step runs on (names in stdops.ops.OPS)
    check: bool = False  # a step without outputs run whenever its inputs are computed (an optimizer's guard)

    def rebound(self, bound: Any, inputs: Sequence[str] | None = None) -> Node:
        """This node running another Bound (a graph pass's rewrite): the same name, outputs and place,
        ``inputs`` (default: the same) in the new kernel's order."""
        return dataclasses.replace(
            self,
            fn=bound.fn,
            bound=bound,
            inputs=list(self.inputs if inputs is None else inputs),
            kernels=(bound.kernel.name,),
        )


@dataclasses.dataclass(frozen=True)
class _Step:
    fn: Callable
    ins: tuple[int, ...]
    outs: tuple[int, ...]  # slot per kernel result; -1 = result dropped
    release: tuple[int, ...]  # slots to clear after this step
    node: Node


class Plan:
    """A compiled graph. ``run`` is re-entrant: every call works on its own slot list."""

    def __init__(
        self,
        nodes: Sequence[Node],
        inputs: Sequence[str],
        outputs: Sequence[str],
        constants: dict[str, Any] | None = None,
        path: str | None = None,
        outer: Iterable[str] = (),
    ):
        """``inputs`` are fed per run; ``constants`` are fixed values (initializers); ``outer`` names
        values a subgraph reads from its enclosing scope (fed per run like inputs)."""
        self.path = path
        self.nodes = list(nodes)
        self.input_names = list(inputs)
        self.output_names = list(outputs)
        self.outer_names = [n for n in outer if n not in set(self.input_names)]
        constants = dict(constants or {})
        slot: dict[str, int] = {}
        template: list[Any] = [None]

        def new_slot(name: str) -> int:
            slot[name] = len(template)
            template.append(None)
            return slot[name]

        for name, value in constants.items():
            template[new_slot(name)] = value
        for name in [*self.input_names, *self.outer_names]:
            if name not in slot:  # an input that is also an initializer (ONNX IR < 4) shares its slot:
                new_slot(name)  # a feed overrides the value, no feed keeps it
        producer: dict[str, int] = {}
        for k, node in enumerate(self.nodes):
            for name in node.inputs:
                if name and name not in slot:
                    raise ModelFormatError(
                        path,
                        _where(node),
                        f"input {name!r} is not produced by any earlier node, graph input or initializer",
                    )
            for name in node.outputs:
                if not name:
                    continue
                if name in producer or name in self.input_names:
                    raise ModelFormatError(path, _where(node), f"value {name!r} is produced twice")
                producer[name] = k
                new_slot(name)
        for name in self.output_names:
            if name not in slot:
                raise ModelFormatError(path, "graph outputs", f"output {name!r} is not produced by any node")
        self._slot = slot
        self._producer = producer
        self._template = template
        self._const_slots = frozenset(slot[n] for n in constants)
        self._input_slots = [(n, slot[n]) for n in [*self.input_names, *self.outer_names]]
        self._schedules: dict[tuple[str, ...], list[_Step]] = {}
        self._needed_inputs: dict[tuple[str, ...], list[tuple[str, int]]] = {}
        #: per schedule, its steps as plain tuples for runs without a hook or a timer (see _run_bare)
        self._bare: dict[tuple[str, ...], list[tuple]] = {}
        #: the optimized twin (stdops/optimize), run instead of this plan when no hook is attached
        self.fused: Plan | None = None
        #: feed signatures (names, shapes, dtypes) the twin refused (PlanFallback): runs of them skip it
        self._twin_refused: set[tuple] = set()

    @property
    def as_run(self) -> Plan:
        """The plan a run without a hook executes (for the graph outputs): the optimized twin if there is one."""
        return self.fused if self.fused is not None else self

    def constants(self) -> dict[str, Any]:
        """The fixed values (initializers, folded constants) by name."""
        return {n: self._template[s] for n, s in self._slot.items() if s in self._const_slots}

    # ------------------------------------------------------------------ compile
    def names(self) -> list[str]:
        """Every value name of the graph (inputs, constants, intermediates, outputs)."""
        return list(self._slot)

    def slot_name(self, slot: int) -> str:
        """The value name a slot index holds (for inspecting schedules)."""
        if not hasattr(self, "_names_by_slot"):
            self._names_by_slot = {s: n for n, s in self._slot.items()}
        return self._names_by_slot[slot]

    def schedule(self, outputs: Sequence[str] | None = None) -> list[_Step]:
        """The steps that compute ``outputs`` (default: the graph outputs), with release lists."""
        want = tuple(self.output_names if outputs is None else outputs)
        cached = self._schedules.get(want)
        if cached is not None:
            return cached
        for name in want:
            if name not in self._slot:
                raise InputError(f"{self.path or 'model'}: no value named {name!r} in the graph")
        needed: set[int] = set()
        stack = [self._producer[n] for n in want if n in self._producer]
        while stack:
            k = stack.pop()
            if k in needed:
                continue
            needed.add(k)
            stack.extend(self._producer[n] for n in self.nodes[k].inputs if n in self._producer)
        for k, node in enumerate(self.nodes):  # checks on values the run computes anyway
            if node.check and all(n not in self._producer or self._producer[n] in needed for n in node.inputs if n):
                needed.add(k)
        order = sorted(needed)
        keep = {self._slot[n] for n in want} | self._const_slots
        last_use: dict[int, int] = {}
        for pos, k in enumerate(order):
            for name in self.nodes[k].inputs:
                if name:
                    last_use[self._slot[name]] = pos
            for name in self.nodes[k].outputs:
                if name:
                    last_use.setdefault(self._slot[name], pos)  # produced, never read: free at once
        releases: dict[int, list[int]] = {}
        for s, pos in last_use.items():
            if s not in keep:
                releases.setdefault(pos, []).append(s)
        steps = []
        for pos, k in enumerate(order):
            node = self.nodes[k]
            steps.append(
                _Step(
                    node.fn,
                    tuple(self._slot[n] if n else _EMPTY_SLOT for n in node.inputs),
                    tuple(self._slot[n] if n else -1 for n in node.outputs),
                    tuple(releases.get(pos, ())),
                    node,
                )
            )
        used = {i for st in steps for i in st.ins} | {self._slot[n] for n in want}
        self._needed_inputs[want] = [(n, s) for n, s in self._input_slots if s in used]
        self._bare[want] = [
            (st.fn, st.ins, len(st.ins), st.outs[0] if len(st.outs) == 1 else None, st.release, st) for st in steps
        ]
        self._schedules[want] = steps
        return steps

    # ------------------------------------------------------------------ run
    def run(
        self, feeds: dict[str, Any], outputs: Sequence[str] | None = None, hook: Hook | None = None
    ) -> dict[str, Any]:
        """Run with ``feeds`` (name -> value, already validated by the front end); returns the
        requested values by name."""
        want = self.output_names if outputs is None else list(outputs)
        fast = self.fused
        if hook is None and fast is not None and all(n in fast._slot for n in want):
            # the feeds' signature only once the twin has refused some (2.6 us a run otherwise, of a 24-step plan's
            # ~12 us outside its steps: measured on ResNet-18's plan with its steps stubbed out)
            key = _feed_signature(feeds) if self._twin_refused else None
            if key is None or key not in self._twin_refused:
                try:
                    return fast.run(feeds, want)
                except PlanFallback:
                    # an assumption of the optimizer failed: the plan as written decides, and later runs of
                    # feeds of the same shapes go to it at once instead of paying the twin's partial run again
                    if len(self._twin_refused) >= 64:
                        self._twin_refused.clear()
                    self._twin_refused.add(_feed_signature(feeds) if key is None else key)
        steps = self.schedule(want)
        timer = _STEP_TIMER.get()
        token = _ACTIVE_HOOK.set(hook)
        timer_token = _STEP_TIMER.set(None) if timer is not None else None  # inner plans: not timed again
        try:
            with blas_serial():  # OpenBLAS on one thread; big GEMMs split by shape (ops/_blas.py)
                return self._run(steps, want, feeds, hook, timer)
        finally:
            _ACTIVE_HOOK.reset(token)
            if timer_token is not None:
                _STEP_TIMER.reset(timer_token)

    def _run(
        self,
        steps: list[_Step],
        want: list[str],
        feeds: dict[str, Any],
        hook: Hook | None,
        timer: StepTimer | None = None,
    ) -> dict[str, Any]:
        vals = list(self._template)
        key = tuple(want)
        for name, s in self._needed_inputs[key]:
            if name in feeds:
                vals[s] = feeds[name]
            elif s not in self._const_slots:
                raise InputError(f"{self.path or 'model'}: missing input {name!r}")
        if hook is None and timer is None:
            self._run_bare(self._bare[key], vals)
            return {name: vals[self._slot[name]] for name in want}
        for step in steps:
            try:
                if timer is None:
                    res = step.fn(*[vals[i] for i in step.ins])
                else:
                    start = time.perf_counter()  # gathering the inputs is part of the step's cost
                    args = [vals[i] for i in step.ins]
                    res = step.fn(*args)
                    end = time.perf_counter()
            except Exception as e:  # noqa: BLE001 - a kernel's complaint becomes the node's error
                err = self._step_error(e, step.node)
                if err is e:
                    raise
                raise err from e
            if timer is not None:
                timer(step.node, start, end, args, res)
                del args  # the inputs' slots may be released below
            self._store(step, res, vals)
            if hook is not None:
                for name, s in zip(step.node.outputs, step.outs):
                    if s >= 0:
                        hook(step.node.name, name, vals[s])
            for s in step.release:
                vals[s] = None
        return {name: vals[self._slot[name]] for name in want}

    def _run_bare(self, bare: list[tuple], vals: list) -> None:
        """The steps of a run without a hook or a timer: what _run's loop does, from plain tuples, a step of one or
        two inputs called without building an argument list (a 16-step plan: ~1 us a step less, measured with
        its kernels stubbed out)."""
        for fn, ins, n_in, out, release, step in bare:
            try:
                if n_in == 1:
                    res = fn(vals[ins[0]])
                elif n_in == 2:
                    res = fn(vals[ins[0]], vals[ins[1]])
                else:
                    res = fn(*[vals[i] for i in ins])
            except Exception as e:  # noqa: BLE001 - a kernel's complaint becomes the node's error
                err = self._step_error(e, step.node)
                if err is e:
                    raise
                raise err from e
            if out is not None and type(res) is not tuple:  # one output (-1: dropped)
                if out >= 0:
                    vals[out] = res
            else:
                self._store(step, res, vals)
            for s in release:
                vals[s] = None

    def _store(self, step, res, vals: list) -> None:
        """A step's result into its output slots (-1: an output nothing reads): a tuple one per output, else the
        first output."""
        outs = step.outs
        if type(res) is tuple:
            if len(res) < len(outs):
                raise OpError(
                    step.node.name, step.node.op, f"kernel returned {len(res)} outputs, node has {len(outs)}", self.path
                )
            for s, v in zip(outs, res):
                if s >= 0:
                    vals[s] = v
        elif outs and outs[0] >= 0:
            vals[outs[0]] = res

    def _step_error(self, e: Exception, node: Node) -> Exception:
        """The error a step's exception becomes: a limit or format error located at the file and node, another
        StdopsError as it is, anything else an OpError naming the node."""
        if isinstance(e, (ResourceLimitError, ModelFormatError)):
            return self._located(e, node)
        if isinstance(e, StdopsError):
            return e
        return OpError(node.name, node.op, e, self.path)

    def _located(self, e: StdopsError, node: Node) -> StdopsError:
        """A limit or format error a kernel raised at run time (a Loop's iteration cap, a subgraph's
        bad declaration), given the file and node it happened at unless an inner plan already did."""
        if getattr(e, "located", False):
            return e
        if isinstance(e, ModelFormatError):
            if e.path is not None:
                return e
            err: StdopsError = ModelFormatError(self.path, _where(node) + (f" {e.where}" if e.where else ""), e.detail)
        else:
            loc = f"{self.path}: " if self.path else ""
            err = ResourceLimitError(f"{loc}node {node.name!r} ({node.op}): {e}")
        err.located = True
        return err


def _feed_signature(feeds: dict[str, Any]) -> tuple:
    """What a twin's guards can depend on besides values: each feed's name, shape and dtype."""
    return tuple((k, getattr(v, "shape", None), str(getattr(v, "dtype", type(v).__name__))) for k, v in feeds.items())


def _where(node: Node) -> str:
    return f"node {node.name!r} ({node.op})" + (f" at {node.where}" if node.where else "")
