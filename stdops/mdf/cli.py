"""Command-line helpers for MDF models, called by ``stdops run | info | plot`` (stdops/cli.py).

- ``run_model(path, duration, dt, out)``: one evaluation, or a time-stepped run (progress bar for
  long runs), then a table of the final outputs; ``out`` (.csv or .npz) saves the trajectory.
- ``info(path)``: graphs, nodes, functions used, edges, conditions.
- ``plot(path, duration, dt, out_png, graph)``: every output port over time, or the graph itself.
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..errors import StdopsError, ValidationError
from .api import n_steps as _n_steps

console = Console()

#: runs with more steps than this show a progress bar
PROGRESS_MIN_STEPS = 200


def _load(path: Any, lenient: bool = False):
    """Load for the CLI: an unknown field is an error (did you mean ...?), or with ``lenient`` (the CLI's
    ``--lenient``) a printed warning."""
    from . import io

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", io.MdfWarning)
        model = io.load(path, strict=not lenient)
    _print_warnings(caught)
    return model


def _print_warnings(caught: list) -> None:
    from . import io

    for w in caught:
        if issubclass(w.category, io.MdfWarning):
            console.print(f"[yellow]warning:[/yellow] {escape(str(w.message))}")


class _reporting_nonfinite:  # noqa: N801 - used as a context manager
    """Collect the run's NonFiniteWarnings (node, port, first evaluation) and print them at the end."""

    def __enter__(self):
        self._cm = warnings.catch_warnings(record=True)
        self.caught = self._cm.__enter__()
        from .api import NonFiniteWarning

        warnings.simplefilter("always", NonFiniteWarning)
        return self

    def __exit__(self, *exc):
        self._cm.__exit__(*exc)
        _print_warnings(self.caught)
        return False


def _summary(v: Any) -> tuple[str, str, str]:
    """(shape, type, summary) of a value."""
    if isinstance(v, dict):
        return "-", "dict", escape(str(v)[:60])
    if isinstance(v, (list, tuple)) and not all(isinstance(x, (int, float, bool, np.number)) for x in v):
        return f"({len(v)},)", type(v).__name__, escape(str(v)[:60])
    a = np.asarray(v)
    if a.dtype == object:
        return str(a.shape), "object", escape(str(v)[:60])
    shape = str(a.shape) if a.ndim else "()"
    if a.size == 0:
        return shape, str(a.dtype), "empty"
    if a.size == 1:
        return (
            shape,
            str(a.dtype),
            f"{a.reshape(-1)[0]!r}" if a.dtype.kind in "bU" else f"{float(a.reshape(-1)[0]):.10g}",
        )
    x = a.astype(np.float64) if a.dtype.kind in "biuf" else None
    if x is None:
        return shape, str(a.dtype), escape(str(a.reshape(-1)[:4]))
    return shape, str(a.dtype), f"min {x.min():.6g}  max {x.max():.6g}  mean {x.mean():.6g}"


def print_outputs(outputs: dict, title: str = "outputs") -> None:
    t = Table(title=title)
    for col in ("node", "port", "shape", "dtype", "value"):
        t.add_column(col)
    for n, ports in outputs.items():
        for p, v in ports.items():
            shape, dtype, summ = _summary(v)
            t.add_row(escape(n), escape(p), shape, dtype, summ)
    console.print(t)


def _preferred(model, duration: float | None, dt: float | None) -> tuple[float, float] | None:
    """(duration, dt) of a time-stepped run, the one not given taken from the model's metadata
    (``preferred_duration``, ``preferred_dt``); None for one evaluation (neither given)."""
    if duration is None and dt is not None:
        duration = _metadata_time(model, "preferred_duration")
        if duration is None:
            return None  # a dt alone, and no preferred duration: one evaluation
    if duration is None:
        return None
    if dt is None:
        dt = _metadata_time(model, "preferred_dt")
        if dt is None:
            raise StdopsError("--duration needs --dt (the model gives no preferred_dt)")
    return float(duration), float(dt)


def _metadata_time(model, key: str) -> float | None:
    """A duration or step from the model's metadata: the file's word, so checked as --duration / --dt are
    (a number; a step > 0, a duration >= 0, both finite)."""
    v = (model.metadata or {}).get(key)
    if v is None:
        return None
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or (v <= 0 if key == "preferred_dt" else v < 0):
        want = "a number > 0" if key == "preferred_dt" else "a number >= 0"
        raise ValidationError(getattr(model, "path", None), f"metadata.{key}", f"expected {want}, got {v!r}")
    return float(v)


def run_model(
    path: Any,
    duration: float | None = None,
    dt: float | None = None,
    out: Any | None = None,
    graph: str | None = None,
    seed: int | None = None,
    inputs: dict | None = None,
    lenient: bool = False,
) -> None:
    """Run an MDF model and print its final outputs; with ``duration``/``dt`` step time (evaluate at
    t = 0, then at t = k*dt up to duration: see Simulation.run) and optionally save the trajectory.
    ``inputs`` ({port id or "node.port": value}) feed the graph's input ports at every evaluation.
    ``lenient``: unknown fields are warnings, not errors. An output that becomes inf or NaN is reported."""
    from .api import Simulation

    model = _load(path, lenient)
    sim = Simulation(model, graph=graph, seed=seed)
    span = _preferred(model, duration, dt)
    if out is not None:
        ext = os.path.splitext(os.fspath(out))[1].lower()
        if ext not in (".csv", ".npz"):
            raise StdopsError(f"--out {out}: expected a .csv or .npz file")
        if span is None:
            raise StdopsError("--out saves a trajectory: give --duration and --dt")
    if span is None:
        with np.errstate(all="ignore"), _reporting_nonfinite():
            sim.evaluate(inputs=inputs)
        print_outputs(sim.outputs, f"outputs of {escape(sim.graph.id)}")
        return
    duration, dt = span
    n_steps = _n_steps(duration, dt)
    with np.errstate(all="ignore"), _reporting_nonfinite():
        if n_steps > PROGRESS_MIN_STEPS:
            from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

            with Progress(
                TextColumn("[bold]running[/bold]"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeRemainingColumn(),
                console=console,
                transient=True,
            ) as prog:
                task = prog.add_task("run", total=n_steps)
                every = max(1, n_steps // 200)

                def progress(i: int, n: int) -> None:
                    if i % every == 0 or i == n:
                        prog.update(task, completed=i)

                traj = sim.run(duration, dt, inputs=inputs, progress=progress)
        else:
            traj = sim.run(duration, dt, inputs=inputs)
    console.print(f"{len(traj.times)} steps, t = 0 .. {traj.times[-1]:.6g} (dt {dt})")
    print_outputs(sim.outputs, f"outputs of {escape(sim.graph.id)} at t = {traj.times[-1]:.6g}")
    if out is not None:
        if os.fspath(out).lower().endswith(".csv"):
            traj.to_csv(out)
        else:
            traj.to_npz(out)
        console.print(f"saved the trajectory to {escape(os.fspath(out))}")


def _cond_str(c: Any) -> str:
    kw = ", ".join(f"{k}={_cond_str(v)}" for k, v in (c.kwargs or {}).items()) if hasattr(c, "kwargs") else None
    if kw is not None:
        return f"{c.type}({kw})"
    if isinstance(c, list):
        return "[" + ", ".join(_cond_str(x) for x in c) + "]"
    return repr(c)


def info(path: Any, lenient: bool = False) -> None:
    """Print the model's graphs, nodes (ports, parameters, functions), edges and conditions."""
    model = _load(path, lenient)
    console.print(
        f"[bold]{escape(str(path))}[/bold]: MDF model {escape(model.id)!r} "
        f"({escape(str(model.format))}; {escape(str(model.generating_application or '-'))})"
    )
    used: dict[str, int] = {}
    for g in model.graphs.values():
        console.print(f"graph [bold]{escape(g.id)}[/bold]: {len(g.nodes)} node(s), {len(g.edges)} edge(s)")
        t = Table()
        for col in ("node", "inputs", "parameters", "functions", "outputs"):
            t.add_column(col)
        for n in g.nodes.values():
            funcs = []
            for f in list(n.functions.values()) + list(n.parameters.values()):
                if isinstance(f.function, str):
                    funcs.append(f"{f.id}: {f.function}")
                    used[f.function] = used.get(f.function, 0) + 1
            params = [
                p.id + (" (stateful)" if p.is_stateful() else "")
                for p in n.parameters.values()
                if not isinstance(p.function, str)
            ]
            t.add_row(
                escape(n.id),
                escape(", ".join(n.input_ports)),
                escape(", ".join(params)),
                escape(", ".join(funcs)),
                escape(", ".join(n.output_ports)),
            )
        console.print(t)
        for e in g.edges.values():
            w = (e.parameters or {}).get("weight")
            console.print(
                f"  edge {escape(e.id)}: {escape(e.sender)}.{escape(e.sender_port)} -> "
                f"{escape(e.receiver)}.{escape(e.receiver_port)}"
                + (f" (weight {escape(str(w)[:40])})" if w is not None else "")
            )
        cs = g.conditions
        if cs is not None:
            for n, c in (cs.node_specific or {}).items():
                console.print(f"  condition {escape(n)}: {escape(_cond_str(c))}")
            for s, c in (cs.termination or {}).items():
                console.print(f"  termination {escape(s)}: {escape(_cond_str(c))}")
        else:
            console.print("  conditions: default (senders' EveryNCalls; trial ends when all have run)")
    if used:
        console.print("functions used: " + ", ".join(f"{escape(k)} x{v}" for k, v in sorted(used.items())))


def plot(
    path: Any,
    duration: float | None = None,
    dt: float | None = None,
    out_png: Any = "mdf.png",
    graph_id: str | None = None,
    lenient: bool = False,
) -> None:
    """Run for ``duration`` with ``dt`` and plot every output port over time (the graph picture is
    ``stdops plot --graph``, stdops/viz)."""
    import matplotlib

    matplotlib.use("Agg")
    from .api import Simulation

    model = _load(path, lenient)
    span = _preferred(model, duration, dt)
    if span is None:
        raise StdopsError("plot needs --duration and --dt (or --graph)")
    duration, dt = span
    sim = Simulation(model, graph=graph_id)
    with np.errstate(all="ignore"), _reporting_nonfinite():
        traj = sim.run(duration, dt)
    traj.plot(out_png, title=f"{model.id}: {sim.graph.id}")
    console.print(f"saved {len(traj.columns())} series over {len(traj.times)} steps to {escape(os.fspath(out_png))}")
