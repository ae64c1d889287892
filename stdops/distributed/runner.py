"""Running a sweep's jobs: in this process, or on a dask.distributed cluster.

On a cluster the model reaches every worker once, as bytes, through a worker plugin (new workers that join
later get it too, so a restarted worker can take over); each worker loads it on its first task and keeps it.
Jobs go out in batches sized so that a task computes for about ``task_seconds`` (the first tasks hold one
job each and measure the rate), never more than a fair share of what is left, so the last tasks stay short.
A task lost with its worker is rescheduled by the scheduler; one that still fails with ``KilledWorker`` is
submitted again, up to ``retries`` times. A job's result does not depend on which task or worker ran it.
"""

from __future__ import annotations

import collections
import math
import time
import uuid
from collections.abc import Callable
from typing import Any

from .payload import ModelPayload, RunConfig, forget, register, run_batch
from .plan import SweepError, SweepPlan
from .results import ResultStore

Report = Callable[[int, int], None]  # (jobs done, jobs in all)


class Batcher:
    """Batch sizes from the measured compute time per job (a moving average over finished tasks)."""

    def __init__(self, task_seconds: float):
        self.task_seconds = task_seconds
        self.per_job: float | None = None

    def observe(self, seconds: float, n_jobs: int) -> None:
        per = max(seconds, 1e-6) / max(n_jobs, 1)
        self.per_job = per if self.per_job is None else 0.7 * self.per_job + 0.3 * per

    def size(self, remaining: int, slots: int) -> int:
        if self.per_job is None:
            return 1  # the first tasks measure
        by_time = max(1, int(self.task_seconds / self.per_job))
        fair = max(1, math.ceil(remaining / (2 * max(slots, 1))))
        return max(1, min(by_time, fair))


def _consume(store: ResultStore, plan: SweepPlan, res: dict[str, Any], report: Report) -> None:
    if "error" in res:
        where = store.describe(res["job"]) if res.get("job") is not None else "a job"
        raise SweepError(f"{res['error']} (at {where})")
    for j, values, times in res["results"]:
        store.add(j, values, times)
    report(store.jobs_done, plan.n_jobs)


def run_serial(
    plan: SweepPlan,
    payload: ModelPayload,
    config: RunConfig,
    store: ResultStore,
    report: Report,
    checkpoint: Callable[[], None],
) -> None:
    """Every pending job here, through the same code a worker runs: one at a time, or (``config.vectorize``,
    MDF) the pending seeds of each point together, as replicas of one simulation."""
    sha = register(payload)
    try:
        for batch in _point_batches(plan, store.pending(), config.vectorize and plan.kind == "mdf"):
            _consume(store, plan, run_batch(sha, config, [plan.job(j) for j in batch]), report)
            checkpoint()
    finally:
        forget(sha)


def _point_batches(plan: SweepPlan, jobs: list[int], by_point: bool) -> list[list[int]]:
    """Jobs in order, cut where the point changes (the seed is the last, fastest job dimension), or one each."""
    if not by_point:
        return [[j] for j in jobs]
    out: list[list[int]] = []
    for j in jobs:
        if out and j // plan.seeds == out[-1][-1] // plan.seeds:
            out[-1].append(j)
        else:
            out.append([j])
    return out


def _payload_plugin(payload: ModelPayload):
    from distributed.diagnostics.plugin import WorkerPlugin

    class SweepModel(WorkerPlugin):
        """Hands the model's bytes to a worker (and to every worker that joins later)."""

        def __init__(self, p: ModelPayload):
            self.payload = p

        def setup(self, worker: Any) -> None:
            register(self.payload)

        def teardown(self, worker: Any) -> None:
            forget(self.payload.sha256)

    return SweepModel(payload)


def _slots(client: Any) -> int:
    return max(1, sum(client.nthreads().values()))


def run_dask(
    client: Any,
    plan: SweepPlan,
    payload: ModelPayload,
    config: RunConfig,
    store: ResultStore,
    report: Report,
    checkpoint: Callable[[], None],
    task_seconds: float,
    retries: int = 3,
) -> None:
    from distributed import KilledWorker, as_completed

    sha = payload.sha256
    name = f"stdops-sweep-{sha[:16]}-{uuid.uuid4().hex[:8]}"
    client.register_plugin(_payload_plugin(payload), name=name)
    pending = collections.deque(store.pending())
    batcher = Batcher(task_seconds)
    in_flight: dict[str, tuple[list[int], int]] = {}
    futures = as_completed()
    slots, slots_at = _slots(client), time.monotonic()

    def submit(batch: list[int], attempt: int) -> None:
        fut = client.submit(
            run_batch, sha, config, [plan.job(j) for j in batch], key=f"stdops-sweep-{uuid.uuid4().hex}", pure=False
        )
        in_flight[fut.key] = (batch, attempt)
        futures.add(fut)

    def fill() -> None:
        nonlocal slots, slots_at
        if time.monotonic() - slots_at > 2.0:  # workers come and go
            slots, slots_at = _slots(client), time.monotonic()
        while pending and len(in_flight) < 2 * slots:
            n = batcher.size(len(pending), slots)
            submit([pending.popleft() for _ in range(min(n, len(pending)))], 0)

    try:
        fill()
        for fut in futures:
            batch, attempt = in_flight.pop(fut.key)
            if fut.status != "finished":
                exc = fut.exception() if fut.status == "error" else None
                # a worker that dies takes its tasks (KilledWorker) or the results it held ("lost": seen when
                # SIGKILL lands between a task's end and the client's fetch) with it; jobs are pure functions
                # of their seeds, so running the batch again gives the same bits
                if (fut.status == "lost" or isinstance(exc, KilledWorker)) and attempt < retries:
                    submit(batch, attempt + 1)
                    continue
                if exc is not None:
                    raise exc
                raise SweepError(f"a task of the sweep was {fut.status} on the cluster")
            res = fut.result()
            fut.release()
            _consume(store, plan, res, report)
            if "seconds" in res:
                batcher.observe(res["seconds"], len(batch))
            checkpoint()
            fill()
    finally:
        for key in list(in_flight):
            client.cancel([key], force=True)
        try:
            client.unregister_worker_plugin(name)
        except Exception:  # noqa: BLE001 - a cluster already gone has nothing to unregister
            pass


# --------------------------------------------------------------------------- clusters
def connect(address: str, timeout: float) -> Any:
    """A client of the scheduler at ``address``; a scheduler that does not answer within ``timeout`` seconds,
    or has no worker by then, is one clear error (never a hang)."""
    from distributed import Client

    try:
        client = Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as e:
        raise SweepError(
            f"--scheduler {address}: cannot reach the scheduler within {timeout:g} s ({' '.join(str(e).split())})"
        ) from None
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (OSError, TimeoutError) as e:
        client.close()
        raise SweepError(f"--scheduler {address}: the scheduler has no worker after {timeout:g} s ({e})") from None
    return client


def local_cluster(workers: int) -> tuple[Any, Any]:
    """A LocalCluster of ``workers`` processes with one thread each (the runs are CPU-bound NumPy), its
    dashboard on a free port."""
    import logging

    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
        preload=["stdops.distributed._quiet_worker"],
    )
    return cluster, Client(cluster)


def dashboard(client: Any) -> str:
    services = client.scheduler_info().get("services", {})
    if "dashboard" in services:
        return f"dask dashboard: {client.dashboard_link}"
    return "dask dashboard: not served by this scheduler (it needs bokeh: pip install 'stdops[distributed]')"
