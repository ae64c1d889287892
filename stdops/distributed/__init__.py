"""Sweeps: one model run many times -- an MDF model over a grid of parameters and seeds, an ONNX / ncnn model
over a batch of inputs -- in this process or on a dask.distributed cluster, with the results as one
labelled ``xarray.Dataset`` (written to netCDF or zarr). ``stdops sweep`` is the command line of the same.

    import stdops
    ds = stdops.sweep("examples/mdf/ddm_decision.yaml",
                      grid={"stimulus.coherence": [0.05, 0.1, 0.2, 0.4], "ddm.threshold": [0.5, 1.0]},
                      seeds=8, workers=2, output="ddm.nc")
    ds["ddm.accuracy"].mean("seed")                     # dims: stimulus.coherence, ddm.threshold
    ds = stdops.sweep("examples/xor_mlp.onnx", inputs="batch.npz")   # dims of each output: sample, ...

Where it runs: ``client`` (a dask Client), ``scheduler`` (an address), else a LocalCluster of ``workers``
processes (default: the cores; a script that starts one guards its top level with ``if __name__ ==
"__main__":``, as dask's worker processes require); ``serial=True`` runs here, without dask. The results
are bit-identical in every case: job ``j`` is seeded from ``SeedSequence(seed).spawn(n_jobs)[j]`` (see ``plan``).

Vectorized trials and seeds: an MDF model that integrates its trials as arrays (``examples/mdf/ddm_decision.yaml``
draws ``stimulus.trials`` drift-diffusion trials in one call) runs all of a point's trials inside one job;
a sweep never turns trials into tasks. Seeds are separate jobs (each its own random stream), batched many
to a task; the seeds of one point that share a task run as replicas of one simulation
(``Simulation(model, seeds=[...])``, :mod:`stdops.mdf.replicas`): one drift-diffusion walk for all their
trials, each job's result the bits its lone run gives (a model the replica axis cannot carry runs them one
by one).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .payload import RunConfig, read_payload, with_parameters
from .plan import SweepError, SweepPlan, build_mdf_plan, parse_grid, parse_values, read_samples
from .results import MARK, SEEDING, ResultStore, check_resumable, format_of, read, write

__all__ = ["sweep", "SweepError", "parse_grid", "parse_values"]


def sweep(
    model: str | os.PathLike,
    grid: Mapping[str, Sequence] | Sequence[tuple[str, Sequence]] | None = None,
    *,
    points: Sequence[Mapping[str, Any]] | None = None,
    seeds: int = 1,
    seed: int = 0,
    duration: float | None = None,
    dt: float | None = None,
    inputs: Any = None,
    client: Any = None,
    scheduler: str | None = None,
    workers: int | None = None,
    serial: bool = False,
    output: str | os.PathLike | None = None,
    resume: bool = False,
    task_seconds: float = 1.0,
    checkpoint_seconds: float = 10.0,
    connect_timeout: float = 10.0,
    progress: bool | Callable[[int, int], None] = False,
    command: str | None = None,
    log: Callable[[str], None] | None = None,
    vectorize: bool = True,
):
    """Run ``model`` at every job of the sweep and return the results as an ``xarray.Dataset``.

    MDF: ``grid`` {"node.param": values} (the cartesian product, in the order given) or ``points`` (a list
    of {"node.param": value}); ``seeds`` runs per point; ``seed`` the root seed; ``duration`` and ``dt`` step
    time (else one evaluation). ONNX / ncnn: ``inputs`` -- a folder of .npy, a .npz, or {input: array}
    stacked along axis 0 -- one run per sample.

    ``output`` (.nc or .zarr) is rewritten as jobs finish (every ``checkpoint_seconds``) and at the end;
    with ``resume`` the jobs it already holds are not run again. ``progress``: True for a progress bar on
    stderr, or a callable(done, total). ``log`` receives status lines (the dashboard's address).
    ``vectorize``: the seeds of a point that land in one task run as replicas of one simulation (MDF;
    the same bits as one run per seed, see stdops.mdf.replicas); False runs them one by one.
    """
    from .. import __version__, load, model_kind

    path = os.fspath(model)
    kind = model_kind(path)
    say = log or (lambda line: None)
    if sum(x is not None for x in (client, scheduler)) + bool(serial) > 1:
        raise SweepError("give one of client, scheduler and serial")
    if workers is not None and (client is not None or scheduler is not None or serial):
        raise SweepError("workers sizes the local cluster; it does not apply with a client, a scheduler or serial")
    if workers is not None and workers < 1:
        raise SweepError(f"workers must be >= 1, got {workers}")
    out = Path(output) if output is not None else None
    if out is not None:
        format_of(out)
    if resume and out is None:
        raise SweepError("resume needs the output file of the interrupted sweep")

    # ------------------------------------------------------------ the model and the plan, checked here
    loaded_here = load(path)
    if kind == "mdf":
        if inputs is not None:
            raise SweepError("inputs (a batch of samples) apply to ONNX and ncnn models; an MDF sweep sets parameters")
        plan = build_mdf_plan(loaded_here, path, grid, points, seeds, seed, duration, dt)
        _compile_check(loaded_here, plan)
    else:
        for given, what in ((grid, "a grid"), (points, "points"), (duration, "duration"), (dt, "dt")):
            if given:
                raise SweepError(f"{what} applies to MDF models; an {kind.upper()} sweep runs a batch of inputs")
        if seeds != 1:
            raise SweepError(f"seeds apply to MDF models; an {kind.upper()} model has no random stream to seed")
        if inputs is None:
            raise SweepError(f"an {kind.upper()} sweep runs a batch: give inputs (a folder of .npy or a .npz)")
        labels, feeds = read_samples(inputs, list(loaded_here.input_names), "inputs")
        plan = SweepPlan(kind, sample_labels=labels, sample_feeds=feeds)
    payload = read_payload(path, kind)
    sha = payload.sha256
    definition = plan.definition()
    attrs: dict[str, Any] = {
        MARK: 1,
        "model": payload.name,
        "model_sha256": sha,
        "model_kind": kind,
        "stdops_version": __version__,
        "command": command or _python_command(path, grid, points, seeds, seed, duration, dt, inputs),
        "sweep": definition,
    }
    if kind == "mdf":
        attrs.update(root_seed=plan.root_seed, seeds=plan.seeds, seeding=SEEDING)
        if duration is not None and dt is not None:  # the plan refused a duration without a dt
            attrs.update(duration=float(duration), dt=float(dt))
    store = ResultStore(plan, attrs)
    if resume and out is not None and out.exists():
        ds = read(out)
        check_resumable(ds, out, payload.name, sha, definition)
        store.restore(ds)
        say(f"resuming {out}: {store.jobs_done} of {plan.n_jobs} runs already there")
    if not store.pending():
        return store.dataset()

    # ------------------------------------------------------------ running
    from .. import limits

    config = RunConfig(
        kind, plan.root_seed, plan.duration, plan.dt, dataclasses.asdict(limits.get()), vectorize=bool(vectorize)
    )
    saver = _Checkpoints(store, out, checkpoint_seconds)
    from . import runner

    cluster = own_client = bar = None
    try:
        use = client
        if not serial and client is None:
            if scheduler is not None:
                own_client = use = runner.connect(scheduler, connect_timeout)
            else:
                cluster, own_client = runner.local_cluster(workers or _cores())
                use = own_client
        if use is not None:
            say(runner.dashboard(use))
        report, bar = _reporter(progress, store.jobs_done, plan.n_jobs)
        if use is None:
            runner.run_serial(plan, payload, config, store, report, saver.maybe)
        else:
            runner.run_dask(use, plan, payload, config, store, report, saver.maybe, task_seconds)
    except BaseException:
        if bar is not None:
            bar.stop()
        saver.save()  # what finished is kept, for resume
        if out is not None and saver.written:
            say(f"stopped: {store.jobs_done} of {plan.n_jobs} runs saved in {out} (resume continues from there)")
        raise
    finally:
        if own_client is not None:
            own_client.close()
        if cluster is not None:
            cluster.close()
    if bar is not None:
        bar.stop()
    saver.save()
    return store.dataset()


def _compile_check(model: Any, plan: SweepPlan) -> None:
    """Compile the model with the first and the last job's values, so a value the model cannot take is
    reported before any cluster starts."""
    from ..mdf import Simulation

    for j in sorted({0, plan.n_jobs - 1}):
        Simulation(with_parameters(model, plan.overrides(j), os.path.basename(str(model.path))), seed=0)


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _python_command(path, grid, points, seeds, seed, duration, dt, inputs) -> str:
    args = [repr(path)]
    for k, v in (("grid", grid), ("points", points), ("duration", duration), ("dt", dt)):
        if v is not None:
            args.append(f"{k}={v!r}")
    if inputs is not None:
        args.append(f"inputs={inputs!r}" if isinstance(inputs, (str, os.PathLike)) else "inputs=<arrays>")
    args += [f"seeds={seeds!r}", f"seed={seed!r}"]
    return f"stdops.sweep({', '.join(args)})"


class _Checkpoints:
    """The result file rewritten every ``every`` seconds while jobs finish, and once at the end; never
    before the first job has finished (a sweep that fails at once leaves an earlier file as it was)."""

    def __init__(self, store: ResultStore, out: Path | None, every: float):
        self.store, self.out, self.every = store, out, every
        self.written = store.jobs_done
        self.at = time.monotonic()

    def maybe(self) -> None:
        if self.out is not None and time.monotonic() - self.at >= self.every:
            self.save()

    def save(self) -> bool:
        if self.out is None or self.store.jobs_done == self.written or self.store.first_job is None:
            return False
        write(self.store.dataset(), self.out)
        self.written = self.store.jobs_done
        self.at = time.monotonic()
        return True


def _reporter(progress: Any, done: int, total: int):
    if callable(progress):
        return progress, None
    if not progress:
        return (lambda d, t: None), None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    class Rate(TextColumn):
        def __init__(self) -> None:
            super().__init__("")

        def render(self, task):  # runs per second since the start
            from rich.text import Text

            speed = task.finished_speed or task.speed
            if speed is None or not math.isfinite(speed):
                return Text("")
            return Text(f"{speed:.3g} runs/s" if speed < 1000 else f"{speed:.0f} runs/s")

    bar = Progress(
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs"),
        Rate(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
    )
    task = bar.add_task("sweep", total=total, completed=done)
    bar.start()

    def report(d: int, t: int) -> None:
        bar.update(task, completed=d)

    return report, bar
