"""The model as bytes, and what a worker does with it: load it once per process (keyed by its sha256), run a
batch of jobs, and send back plain arrays. Nothing here reads the model's path on the worker, so workers
need no shared filesystem -- only stdops installed."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import StdopsError


@dataclass(frozen=True)
class ModelPayload:
    """A model's files as bytes. ``name`` is the file name (for messages); ncnn has ``weights`` (the .bin)."""

    kind: str
    name: str
    data: bytes
    weights: bytes | None = None

    @property
    def sha256(self) -> str:
        """sha256 of the model file (ncnn: of the .param followed by the .bin)."""
        h = hashlib.sha256(self.data)
        if self.weights is not None:
            h.update(self.weights)
        return h.hexdigest()


def read_payload(path: str, kind: str) -> ModelPayload:
    """The bytes a worker needs to load the model at ``path`` (already loaded once here, so readable)."""
    name = os.path.basename(path)
    with open(path, "rb") as f:
        data = f.read()
    if kind == "ncnn":
        base = path[: -len(".param.bin")] if path.endswith(".param.bin") else os.path.splitext(path)[0]
        weights = None
        if os.path.exists(base + ".bin"):
            with open(base + ".bin", "rb") as f:
                weights = f.read()
        return ModelPayload(kind, name, data, weights)
    if kind == "onnx":
        import onnx
        from onnx.external_data_helper import uses_external_data

        proto = onnx.load_model_from_string(data)
        if any(uses_external_data(t) for t in proto.graph.initializer):
            # the tensors beside the file travel inside the one payload
            data = onnx.load_model(path, load_external_data=True).SerializeToString()
    return ModelPayload(kind, name, data)


def load_payload(p: ModelPayload) -> Any:
    """The model, loaded from bytes (MDF: the schema Model; ONNX: stdops.onnx.Model; ncnn: Net)."""
    if p.kind == "mdf":
        from ..mdf import model_from_data
        from ..mdf.io import parse_text

        model = model_from_data(parse_text(p.data.decode("utf-8"), p.name), p.name, warn=False)
        return model
    if p.kind == "onnx":
        from .. import onnx as _onnx

        return _onnx.load(p.data)
    from ..ncnn import Net

    return Net.from_bytes(p.data, p.weights)


# --------------------------------------------------------------------------- the per-process cache
_PAYLOADS: dict[str, ModelPayload] = {}  # registered by the worker plugin (or by the serial runner)
_MODELS: OrderedDict[str, tuple[Any, threading.Lock]] = OrderedDict()
_LOCK = threading.Lock()
_KEEP = 4  # loaded models kept per process
LOADS: dict[str, int] = {}  # how many times this process loaded each model (once, unless evicted)
REPLICA_JOBS: dict[str, int] = {}  # jobs of each model this process ran as replicas of one simulation


_REFS: dict[str, int] = {}  # sweeps of each model running in this process (two may share a cluster)


def register(p: ModelPayload) -> str:
    sha = p.sha256
    with _LOCK:
        _PAYLOADS[sha] = p
        _REFS[sha] = _REFS.get(sha, 0) + 1
    return sha


def forget(sha: str) -> None:
    with _LOCK:
        _REFS[sha] = _REFS.get(sha, 1) - 1
        if _REFS[sha] <= 0:
            _REFS.pop(sha, None)
            _PAYLOADS.pop(sha, None)
            _MODELS.pop(sha, None)


def loaded(sha: str) -> tuple[Any, threading.Lock, ModelPayload]:
    """The model with this hash, loaded at most once per process; its lock serialises ONNX / ncnn runs
    between a worker's threads."""
    with _LOCK:
        p = _PAYLOADS.get(sha)
        if p is None:
            raise RuntimeError(f"model {sha[:12]} was not sent to this worker (the sweep's plugin did not run)")
        hit = _MODELS.get(sha)
        if hit is not None:
            _MODELS.move_to_end(sha)
            return hit[0], hit[1], p
    model = load_payload(p)
    with _LOCK:
        LOADS[sha] = LOADS.get(sha, 0) + 1
        hit = _MODELS.setdefault(sha, (model, threading.Lock()))
        while len(_MODELS) > _KEEP:
            _MODELS.popitem(last=False)
    return hit[0], hit[1], p


# --------------------------------------------------------------------------- running jobs
@dataclass(frozen=True)
class RunConfig:
    """What every job of a sweep shares; ``limits`` are the client's stdops.limits (its --max-* options),
    in force on the worker while it runs the sweep's tasks, not beyond."""

    kind: str
    root_seed: int = 0
    duration: float | None = None
    dt: float | None = None
    limits: dict[str, int] | None = None
    #: the seeds of one point run as replicas of one simulation (MDF; see run_mdf_replicas)
    vectorize: bool = True


def run_batch(sha: str, config: RunConfig, jobs: list[tuple]) -> dict[str, Any]:
    """Run ``jobs`` [(j, overrides or feeds), ...] on the model ``sha``. Returns {"results": [(j, {var:
    array}, times or None)], "seconds": compute time} or {"error": message, "job": j} for a StdopsError
    (the model's fault: one clear line for the user, never retried)."""
    from .. import limits

    t0 = time.perf_counter()
    results: list[tuple] = []
    try:
        with limits.override(**(config.limits or {})):
            _run_jobs(sha, config, jobs, results)
    except StdopsError as e:
        return {"error": " ".join(str(e).split()), "job": jobs[len(results)][0]}
    return {"results": results, "seconds": time.perf_counter() - t0}


def _run_jobs(sha: str, config: RunConfig, jobs: list[tuple], results: list) -> None:
    model, lock, payload = loaded(sha)
    if config.kind == "mdf":
        copies: dict[str, Any] = {}  # jobs of one point share one copy of the model with its values set
        groups: list[tuple[Any, list[int]]] = []  # consecutive jobs of one point (its seeds)
        for j, overrides in jobs:
            key = repr(sorted(overrides.items()))
            m = copies.get(key)
            if m is None:
                m = copies[key] = with_parameters(model, overrides, payload.name)
            if groups and groups[-1][0] is m and config.vectorize:
                groups[-1][1].append(j)
            else:
                groups.append((m, [j]))
        for m, js in groups:
            if len(js) == 1:
                results.append((js[0], *run_mdf(m, config, js[0])))
            else:
                if run_mdf_replicas(m, config, js, results):
                    REPLICA_JOBS[sha] = REPLICA_JOBS.get(sha, 0) + len(js)
        return
    for j, feeds in jobs:
        with lock:
            out = model.run(dict(feeds))
        results.append((j, _arrays(out, payload.name), None))


def with_parameters(model: Any, overrides: dict[str, Any], name: str) -> Any:
    """A copy of the MDF model with "node.param" values set: a parameter's ``value``, or for a stateful one
    without a value, its ``default_initial_value`` (the value it starts from)."""
    if not overrides:
        return model
    m = model.model_copy(deep=True)  # the cached model stays as loaded
    graph = m.graph(None)
    for key, value in overrides.items():
        node_id, _, pid = key.rpartition(".")
        node = graph.nodes.get(node_id)
        param = node.parameters.get(pid) if node is not None else None
        if param is None:
            raise StdopsError(f"{name}: no parameter {key!r}")
        if param.value is not None:
            param.value = value
        else:
            param.default_initial_value = value
    return m


def run_mdf(model: Any, config: RunConfig, j: int) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    from ..mdf import Simulation

    sim = Simulation(model, seed=np.random.SeedSequence(config.root_seed, spawn_key=(j,)))
    if config.duration is None or config.dt is None:  # the plan gives a duration only with a dt
        sim.evaluate()
        outs = {f"{n}.{p}": v for n, ports in sim.outputs.items() for p, v in ports.items()}
        return _arrays(outs, model.path), None
    traj = sim.run(config.duration, config.dt)
    outs = {f"{n}.{p}": v for n, ports in traj.data.items() for p, v in ports.items()}
    return _arrays(outs, model.path), np.asarray(traj.times, dtype=np.float64)


def run_mdf_replicas(model: Any, config: RunConfig, js: list[int], results: list) -> bool:
    """Jobs ``js`` of one point as replicas of one simulation, replica k seeded as job js[k], their results
    appended to ``results``: the same as run_mdf gives for each job, bit for bit (stdops.mdf.replicas; a
    model the replica axis cannot carry is run job by job by the simulation itself). A model error is
    raised by the job it belongs to, after the jobs before it. Returns whether the replica axis held."""
    from ..mdf import Simulation

    seeds = [np.random.SeedSequence(config.root_seed, spawn_key=(j,)) for j in js]
    got: list[tuple]
    try:
        sim = Simulation(model, seeds=seeds)
        if config.duration is None or config.dt is None:
            outs = sim.evaluate()
            got = [
                (j, _arrays({f"{n}.{p}": v for n, ports in o.items() for p, v in ports.items()}, model.path), None)
                for j, o in zip(js, outs)
            ]
        else:
            got = [
                (
                    j,
                    _arrays({f"{n}.{p}": v for n, ports in t.data.items() for p, v in ports.items()}, model.path),
                    np.asarray(t.times, dtype=np.float64),
                )
                for j, t in zip(js, sim.run(config.duration, config.dt))
            ]
    except StdopsError:
        for j in js:  # the failing job, named as a job-by-job run names it
            results.append((j, *run_mdf(model, config, j)))
        raise
    results.extend(got)
    return sim.vectorized


def _arrays(values: dict[str, Any], name: str | None) -> dict[str, np.ndarray]:
    """Numeric, boolean and text values as arrays; anything else (a list, a dict, an ACT-R chunk) is left
    out and named in the result file's attributes."""
    out: dict[str, Any] = {}
    for k, v in values.items():
        try:
            a = v if isinstance(v, np.ndarray) else np.asarray(v)
        except (ValueError, TypeError):  # a ragged list
            a = None
        out[k] = a if a is not None and a.dtype.kind in "biufcUS" else None
    return out
