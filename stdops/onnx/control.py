"""Control flow: If, Loop and Scan, whose bodies are subgraphs compiled once, at load time, like the
main graph (ONNX IR spec, "Control flow" operators).

A subgraph may read values of the enclosing scopes. The compiled subgraph lists those names
(``Plan.outer_names``); the adapter publishes them as ``outer_inputs`` so the front end appends them
to the node's inputs, and the step receives their values after the node's own inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import limits
from ..errors import KernelError, ResourceLimitError
from ..graph import subgraph_hook
from .opset import BindContext, adapter, onnx_dtype, reads_outer


def _compile(ctx: BindContext, attr: str):
    g = ctx.attrs.pop(attr, None)
    if g is None:
        raise ctx.error(f"missing required attribute {attr}")
    if ctx.compile_graph is None:
        raise ctx.error("subgraphs are not supported here")
    return g, ctx.compile_graph(g)


def _outer(*plans) -> list[str]:
    names: list[str] = []
    for p in plans:
        names += [n for n in p.outer_names if n not in names]
    return names


def _check_outputs(ctx: BindContext, plan, n: int, what: str) -> None:
    if len(plan.output_names) != n:
        raise ctx.error(f"{what} produces {len(plan.output_names)} outputs, the node declares {n}")


@adapter("If", 1)
def _if(ctx: BindContext):
    """If(cond) -> the outputs of then_branch or else_branch (If-1..-24 differ only in types)."""
    node = ctx.node_name
    _, then_p = _compile(ctx, "then_branch")
    _, else_p = _compile(ctx, "else_branch")
    if ctx.attrs:
        raise ctx.error(f"unknown attribute(s) {', '.join(sorted(ctx.attrs))}")
    _check_outputs(ctx, then_p, ctx.n_outputs, "then_branch")
    _check_outputs(ctx, else_p, ctx.n_outputs, "else_branch")
    outer = _outer(then_p, else_p)

    def run_if(cond, *outer_vals):
        c = np.asarray(cond)
        if c.size != 1:
            raise KernelError(f"If: cond must hold one element, got shape {c.shape}")
        taken = bool(c.reshape(-1)[0])
        plan = then_p if taken else else_p
        env = dict(zip(outer, outer_vals))
        out = plan.run(
            {n: env[n] for n in plan.outer_names}, hook=subgraph_hook(f"{node}/{'then' if taken else 'else'}")
        )
        return tuple(out[n] for n in plan.output_names)

    return reads_outer(run_if, outer)


def _empty_like_output(vi, ctx: BindContext | None = None) -> np.ndarray:
    """A zero-length scan output for a loop that ran no iteration: shape [0] + the declared tail."""
    tt = vi.type.tensor_type
    dtype = onnx_dtype(tt.elem_type, ctx) if tt.elem_type else np.float32
    tail = [d.dim_value if d.HasField("dim_value") else 0 for d in tt.shape.dim] if tt.HasField("shape") else []
    return np.zeros([0, *tail], dtype)


@adapter("Loop", 1)
def _loop(ctx: BindContext):
    """Loop(M?, cond?, v_initial...) -> (v_final..., scan_outputs...) (Loop-1..-24: same meaning)."""
    node = ctx.node_name
    body_g, body = _compile(ctx, "body")
    if ctx.attrs:
        raise ctx.error(f"unknown attribute(s) {', '.join(sorted(ctx.attrs))}")
    n_state = ctx.n_inputs - 2
    if n_state < 0:
        raise ctx.error("Loop needs at least the M and cond inputs (either may be empty)")
    b_in, b_out = body.input_names, body.output_names
    if len(b_in) != n_state + 2:
        raise ctx.error(f"body takes {len(b_in)} inputs, expected {n_state + 2} (iteration, cond, states)")
    if len(b_out) < n_state + 1:
        raise ctx.error(f"body produces {len(b_out)} outputs, expected at least {n_state + 1}")
    n_scan = len(b_out) - 1 - n_state
    if ctx.n_outputs > n_state + n_scan:
        raise ctx.error(f"node declares {ctx.n_outputs} outputs, the body yields {n_state + n_scan}")
    empty_scans = [_empty_like_output(vi, ctx) for vi in body_g.output[1 + n_state :]]
    outer = body.outer_names

    def run_loop(m, cond, *rest):
        state = list(rest[:n_state])
        env = dict(zip(outer, rest[n_state:]))
        max_trip = None if m is None else int(np.asarray(m).reshape(-1)[0])
        go = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
        budget = limits.current()  # the run's: iterations add up across nested loops
        cap = budget.limits.max_loop_iterations
        scans: list[list] = [[] for _ in range(n_scan)]
        i = 0
        while go and (max_trip is None or i < max_trip):
            if i >= cap:
                raise ResourceLimitError(
                    f"Loop ran {cap} iterations without stopping (raise the limit with "
                    f"stdops.limits.configure(max_loop_iterations=...) or {limits.ENV['max_loop_iterations']})"
                )
            budget.charge_loop(1, "Loop")
            feeds = {b_in[0]: np.array(i, np.int64), b_in[1]: np.array(go)}
            feeds.update(zip(b_in[2:], state))
            feeds.update(env)
            out = body.run(feeds, hook=subgraph_hook(f"{node}[{i}]"))
            go = bool(np.asarray(out[b_out[0]]).reshape(-1)[0])
            state = [out[n] for n in b_out[1 : 1 + n_state]]
            for j, n in enumerate(b_out[1 + n_state :]):
                scans[j].append(out[n])
            i += 1
        stacked = [np.stack(s) if s else empty_scans[j] for j, s in enumerate(scans)]
        return (*state, *stacked)

    return reads_outer(run_loop, outer)


@adapter("Scan", 9)
def _scan(ctx: BindContext):
    """Scan(initial states..., scan inputs...) -> (final states..., scan outputs...) (Scan-9 on)."""
    node = ctx.node_name
    _, body = _compile(ctx, "body")
    n_scan_in = ctx.attrs.pop("num_scan_inputs", None)
    if n_scan_in is None:
        raise ctx.error("missing required attribute num_scan_inputs")
    in_axes = list(ctx.attrs.pop("scan_input_axes", ()) or [0] * n_scan_in)
    in_dirs = list(ctx.attrs.pop("scan_input_directions", ()) or [0] * n_scan_in)
    n_state = ctx.n_inputs - n_scan_in
    n_scan_out = len(body.output_names) - n_state
    out_axes = list(ctx.attrs.pop("scan_output_axes", ()) or [0] * n_scan_out)
    out_dirs = list(ctx.attrs.pop("scan_output_directions", ()) or [0] * n_scan_out)
    if ctx.attrs:
        raise ctx.error(f"unknown attribute(s) {', '.join(sorted(ctx.attrs))}")
    if n_state < 0 or n_scan_out < 0 or len(body.input_names) != ctx.n_inputs:
        raise ctx.error("body inputs/outputs do not match the node's states and scan inputs")
    if (
        len(in_axes) != n_scan_in
        or len(in_dirs) != n_scan_in
        or len(out_axes) != n_scan_out
        or len(out_dirs) != n_scan_out
    ):
        raise ctx.error("scan axes/directions lists do not match the number of scan inputs/outputs")
    b_in, b_out = body.input_names, body.output_names
    outer = body.outer_names

    def run_scan(*args):
        state = list(args[:n_state])
        xs = [np.asarray(a) for a in args[n_state : ctx.n_inputs]]
        env = dict(zip(outer, args[ctx.n_inputs :]))
        axes = [ax + x.ndim if ax < 0 else ax for ax, x in zip(in_axes, xs)]
        lengths = {x.shape[ax] for x, ax in zip(xs, axes)}
        if len(lengths) > 1:
            raise KernelError(f"Scan inputs have different sequence lengths {sorted(lengths)}")
        n = lengths.pop() if lengths else 0
        outs: list[list[Any]] = [[] for _ in range(n_scan_out)]
        budget = limits.current()
        for t in range(n):
            budget.charge_loop(1, "Scan")
            feeds = dict(zip(b_in[:n_state], state))
            for name, x, ax, d in zip(b_in[n_state:], xs, axes, in_dirs):
                feeds[name] = np.take(x, n - 1 - t if d else t, axis=ax)
            feeds.update(env)
            out = body.run(feeds, hook=subgraph_hook(f"{node}[{t}]"))
            state = [out[nm] for nm in b_out[:n_state]]
            for j, nm in enumerate(b_out[n_state:]):
                outs[j].append(out[nm])
        result = []
        for j, seq in enumerate(outs):
            if out_dirs[j]:
                seq = seq[::-1]
            y = np.stack(seq) if seq else np.zeros((0,), np.float32)
            ax = out_axes[j] + y.ndim if out_axes[j] < 0 else out_axes[j]
            result.append(np.moveaxis(y, 0, ax) if ax else y)
        return (*state, *result)

    return reads_outer(run_scan, outer)


@adapter("Scan", 8)
def _scan_8(ctx: BindContext):
    """Scan-8: like Scan-9 with a leading batch axis on every state and scan input, an optional first
    input sequence_lens [batch] (steps past a sequence's length are skipped; its scan outputs are
    zero there), scan axis 1, and ``directions`` for the scan inputs."""
    node = ctx.node_name
    _, body = _compile(ctx, "body")
    n_scan_in = ctx.attrs.pop("num_scan_inputs", None)
    if n_scan_in is None:
        raise ctx.error("missing required attribute num_scan_inputs")
    dirs = list(ctx.attrs.pop("directions", ()) or [0] * n_scan_in)
    if ctx.attrs:
        raise ctx.error(f"unknown attribute(s) {', '.join(sorted(ctx.attrs))}")
    n_state = ctx.n_inputs - 1 - n_scan_in
    if n_state < 0 or len(body.input_names) != n_state + n_scan_in or len(dirs) != n_scan_in:
        raise ctx.error("body inputs do not match the node's states and scan inputs")
    b_in, b_out = body.input_names, body.output_names
    n_scan_out = len(b_out) - n_state
    outer = body.outer_names
    n_in = ctx.n_inputs

    def run_scan_8(seq_lens, *args):
        env = dict(zip(outer, args[n_in - 1 :]))
        states = [np.asarray(a) for a in args[:n_state]]
        xs = [np.asarray(a) for a in args[n_state : n_in - 1]]
        batch, full = xs[0].shape[0], xs[0].shape[1]
        lens = np.full(batch, full, np.int64) if seq_lens is None else np.asarray(seq_lens).reshape(-1)
        final: list[list] = [[] for _ in range(n_state)]
        scans: list[list] = [[] for _ in range(n_scan_out)]
        budget = limits.current()
        for b in range(batch):
            state = [s[b] for s in states]
            n = int(lens[b])
            if not 0 <= n <= full:
                raise KernelError(f"Scan: sequence_lens[{b}] = {n} is outside [0, {full}]")
            steps: list[list] = [[] for _ in range(n_scan_out)]
            for t in range(n):
                budget.charge_loop(1, "Scan")
                feeds = dict(zip(b_in[:n_state], state))
                for name, x, d in zip(b_in[n_state:], xs, dirs):
                    feeds[name] = x[b, n - 1 - t if d else t]
                feeds.update(env)
                out = body.run(feeds, hook=subgraph_hook(f"{node}[{b},{t}]"))
                state = [out[nm] for nm in b_out[:n_state]]
                for j, nm in enumerate(b_out[n_state:]):
                    steps[j].append(np.asarray(out[nm]))
            for j, s in enumerate(state):
                final[j].append(s)
            for j, seq in enumerate(steps):
                scans[j].append(seq)
        results = [np.stack(f) for f in final]
        for j in range(n_scan_out):
            per_batch = scans[j]
            proto = next((s[0] for s in per_batch if s), None)
            if proto is None:
                results.append(np.zeros((batch, 0), np.float32))
                continue
            y = np.zeros((batch, full, *proto.shape), proto.dtype)
            for b, seq in enumerate(per_batch):
                if seq:
                    y[b, : len(seq)] = np.stack(seq)
            results.append(y)
        return tuple(results)

    return reads_outer(run_scan_8, outer)


@adapter("SequenceMap", 17)
def _sequence_map(ctx: BindContext):
    """SequenceMap(input_sequence, additional_inputs...) -> sequences: the body applied to each element
    (an additional input that is a sequence contributes its i-th element, a tensor itself)."""
    node = ctx.node_name
    _, body = _compile(ctx, "body")
    if ctx.attrs:
        raise ctx.error(f"unknown attribute(s) {', '.join(sorted(ctx.attrs))}")
    if len(body.input_names) != ctx.n_inputs:
        raise ctx.error(f"body takes {len(body.input_names)} inputs, the node has {ctx.n_inputs}")
    _check_outputs(ctx, body, ctx.n_outputs, "body")
    outer = body.outer_names
    n_in = ctx.n_inputs

    def run_sequence_map(seq, *rest):
        extra, env = rest[: n_in - 1], dict(zip(outer, rest[n_in - 1 :]))
        if not isinstance(seq, list):
            raise KernelError("SequenceMap: the first input must be a sequence")
        for e in extra:
            if isinstance(e, list) and len(e) != len(seq):
                raise KernelError(f"SequenceMap: sequences of lengths {len(seq)} and {len(e)}")
        results: list[list] = [[] for _ in body.output_names]
        budget = limits.current()
        for i, item in enumerate(seq):
            budget.charge_loop(1, "SequenceMap")
            feeds = {body.input_names[0]: item}
            for name, e in zip(body.input_names[1:], extra):
                feeds[name] = e[i] if isinstance(e, list) else e
            feeds.update(env)
            out = body.run(feeds, hook=subgraph_hook(f"{node}[{i}]"))
            for j, nm in enumerate(body.output_names):
                results[j].append(out[nm])
        return tuple(results)

    return reads_outer(run_sequence_map, outer)
