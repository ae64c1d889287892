"""Many runs of one model, spread over workers: parameter sweeps of MDF models (a drift-diffusion model over
a grid of drift rates), batches of inputs for ONNX / ncnn models.

    from stdops.distributed import sweep
    results = sweep("model.onnx", [{"x": a}, {"x": b}, ...])               # in this process
    results = sweep("model.onnx", feeds_list, client=dask_client)           # on a dask.distributed cluster
    traj = sweep("ddm.yaml", [{"duration": 5, "dt": 0.01, "seed": s} for s in range(100)])   # MDF runs

Each worker loads the model once (cached by path) and reuses it for every task it gets. The dask
dependency is optional (the ``distributed`` extra); without a client the runs happen here, in order.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from typing import Any

from .errors import StdopsError


@functools.lru_cache(maxsize=8)
def _loaded(path: str, kind: str):
    from . import load

    return load(path)


def run_one(path: str, job: dict[str, Any]) -> Any:
    """One run of the model at ``path``. ONNX / ncnn: ``job`` is the feeds; the result is {output: value}.
    MDF: ``job`` may hold ``duration``, ``dt``, ``seed``, ``inputs`` and ``parameters`` (values to set on
    nodes, keyed "node.param"); the result is the Trajectory of ``run(duration, dt)``, or the outputs after
    one evaluation when no duration is given."""
    from . import model_kind

    path = os.fspath(path)
    kind = model_kind(path)
    model = _loaded(path, kind)
    if kind != "mdf":
        return model.run(dict(job))
    from .mdf import Simulation

    job = dict(job)
    overrides = job.pop("parameters", None) or {}
    if overrides:
        model = model.model_copy(deep=True)  # the cached model stays as loaded
        for key, value in overrides.items():
            _set_parameter(model, key, value, path)
    sim = Simulation(model, seed=job.pop("seed", None))
    duration, dt, inputs = job.pop("duration", None), job.pop("dt", None), job.pop("inputs", None)
    if job:
        raise StdopsError(f"{path}: unknown sweep job keys {sorted(job)} (duration, dt, seed, inputs, parameters)")
    if duration is None:
        sim.evaluate(inputs=inputs)
        return sim.outputs
    return sim.run(duration, dt)


def _set_parameter(model: Any, key: str, value: Any, path: str) -> None:
    node_id, _, param = key.rpartition(".")
    for g in model.graphs.values():
        node = g.nodes.get(node_id)
        if node is not None and param in node.parameters:
            node.parameters[param].value = value
            return
    raise StdopsError(f"{path}: sweep parameter {key!r}: no node {node_id!r} with a parameter {param!r}")


def sweep(path: str | os.PathLike, jobs: Iterable[dict[str, Any]], client: Any = None) -> list[Any]:
    """Results of ``run_one(path, job)`` for every job, in order; on ``client`` (a dask.distributed
    Client) when given."""
    path = os.fspath(path)
    jobs = list(jobs)
    if client is None:
        return [run_one(path, job) for job in jobs]
    futures = client.map(functools.partial(run_one, path), jobs, pure=False)
    return client.gather(futures)
