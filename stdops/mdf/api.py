"""The public API: :class:`Simulation` (run a graph) and :class:`Trajectory` (a time-stepped run's
values, with CSV / NPZ export and a plot)."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import limits
from ..errors import InputError, ResourceLimitError, SharedStateError, StdopsError
from ..npz import save_npz
from .engine import _make_ctx, _State, build_graph
from .functions import STANDARD
from .io import MdfWarning
from .replicas import Replicas, ReplicaState, split
from .schema import Graph, Model


class NonFiniteWarning(MdfWarning):
    """An output port that became inf or NaN during a run (node, port, first evaluation)."""


class Trajectory:
    """Values of every output port at each time of a run: ``times`` (n,), ``data[node][port]`` (n, ...)."""

    def __init__(self, times: list, data: dict):
        self.times = np.asarray(times, dtype=np.float64)
        self.data: dict[str, dict[str, np.ndarray]] = {}
        for n, ports in data.items():
            self.data[n] = {}
            for p, vals in ports.items():
                self.data[n][p] = _stack(vals)

    def __getitem__(self, key: str) -> np.ndarray:
        """``traj["node.port"]`` or ``traj["port"]`` (when unique)."""
        if "." in key:
            n, _, p = key.rpartition(".")
            if n in self.data and p in self.data[n]:
                return self.data[n][p]
        hits = [ports[key] for ports in self.data.values() if key in ports]
        if len(hits) == 1:
            return hits[0]
        raise KeyError(key)

    def columns(self) -> list[tuple[str, np.ndarray]]:
        """(column name, (n,) values) for every scalar element of every output port."""
        cols = []
        for n, ports in self.data.items():
            for p, arr in ports.items():
                if arr.dtype == object:
                    continue
                flat = arr.reshape(len(self.times), -1)
                if flat.shape[1] == 1:
                    cols.append((f"{n}.{p}", flat[:, 0]))
                else:
                    for j in range(flat.shape[1]):
                        cols.append((f"{n}.{p}[{j}]", flat[:, j]))
        return cols

    def to_csv(self, path: Any = None) -> str:
        """CSV text (``time`` then one column per scalar element); written to ``path`` if given."""
        cols = self.columns()
        lines = [",".join(["time"] + [c for c, _ in cols])]
        for i, t in enumerate(self.times):
            lines.append(",".join([repr(float(t))] + [repr(float(v[i])) for _, v in cols]))
        text = "\n".join(lines) + "\n"
        if path is not None:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return text

    def to_npz(self, path: Any) -> None:
        arrays = {"time": self.times}
        for n, ports in self.data.items():
            for p, arr in ports.items():
                if arr.dtype != object:
                    arrays[f"{n}.{p}"] = arr
        save_npz(path, arrays)

    def plot(self, path: Any = None, title: str | None = None):
        """Every numeric output port over time (matplotlib); saved to ``path`` if given."""
        import matplotlib

        if path is not None:
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        cols = self.columns()
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for name, v in cols[:40]:
            ax.plot(self.times, v, label=name)
        ax.set_xlabel("time")
        if title:
            ax.set_title(title)
        if cols:
            ax.legend(fontsize="small", loc="best")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=120)
            plt.close(fig)
        return fig


def _stack(vals: list) -> np.ndarray:
    try:
        arrs = [np.asarray(v) for v in vals]
        if arrs and all(a.shape == arrs[0].shape and a.dtype != object for a in arrs):
            return np.stack(arrs) if arrs else np.zeros(0)
    except (ValueError, TypeError):
        pass
    out = np.empty(len(vals), dtype=object)
    for i, v in enumerate(vals):
        out[i] = v
    return out


class Simulation:
    """Run one graph of an MDF model.

    ``evaluate(time_increment=None, inputs=None)`` runs one trial (the scheduler's
    environment state update); ``run(duration, dt)`` steps time and returns a :class:`Trajectory`.
    ``seed`` seeds the generator used by drift_diffusion_integrator and ACT-R conflict resolution.

    ``seeds=[s_0, ..., s_{K-1}]`` (instead of ``seed``) runs K replicas of the model at once, replica k
    drawing every random number from ``numpy.random.default_rng(s_k)``: ``evaluate()``, ``outputs`` and
    ``run()`` then give a list of K results, result k bit-identical to what ``Simulation(model,
    seed=s_k)`` gives. Values that are the same in every replica are computed once, the random functions
    and what is computed from their values carry a replica axis (:mod:`stdops.mdf.replicas`: the
    drift-diffusion trials of all replicas are one walk). Where the replicas would part ways (a condition
    or a truth test on values that differ, a value handed to code that does not know replicas) the run is
    repeated one replica at a time, from the start (``vectorized`` becomes False, ``fallback_reason`` says
    why).

    A Simulation holds the state of its run, so it is one thread's at a time: a call from a second thread
    while one is running raises :class:`~stdops.errors.SharedStateError` (give each thread its own
    Simulation; they may share the loaded model). Each evaluation has its own resource budget
    (:mod:`stdops.limits`).
    """

    def __init__(self, model: Any, graph: str | None = None, seed: Any = None, *, seeds: Any = None):
        if isinstance(model, (str, os.PathLike)):
            from .io import load

            model = load(model)
        if isinstance(model, Graph):
            model = Model(id=model.id, graphs={model.id: model})
        self.model = model
        self.graph = model.graph(graph)
        self._seeds: list | None = None
        self._state: _State
        if seeds is not None:
            if seed is not None:
                raise StdopsError("Simulation: give seed or seeds, not both")
            self._seeds = list(seeds)
            if not self._seeds:
                raise StdopsError("Simulation: seeds is empty (one seed per replica)")
            self._state = ReplicaState(self._seeds)
        else:
            self._state = _State(seed)
        #: the replicas run one by one, after a refusal of the replica axis (``fallback_reason``)
        self._separate: list[Simulation] | None = None
        self._calls: list[tuple[str, tuple]] = []  # a replicated run's calls so far, replayed by the fallback
        self.fallback_reason: str | None = None
        self._lock = threading.Lock()
        self._holder: int | None = None
        with limits.budget("load"):
            self._engine = build_graph(self.graph, _make_ctx(model, self._state))
        self.time = 0.0
        self.n_evaluations = 0
        #: (node, port) -> (evaluation, time) where it first held inf or NaN
        self.nonfinite: dict[tuple[str, str], tuple[int, Any]] = {}
        self._ports: list | None = None

    @contextlib.contextmanager
    def _exclusive(self, what: str):
        """Run ``what`` holding the simulation: a second thread (or a re-entrant call) is refused clearly."""
        if not self._lock.acquire(blocking=False):
            me = threading.get_ident()
            if self._holder == me:
                raise SharedStateError(f"Simulation.{what}: called while this thread is already running it")
            raise SharedStateError(
                f"Simulation.{what}: this Simulation is being run by another thread; a Simulation is one "
                "thread's at a time (give each thread its own Simulation of the shared model)"
            )
        self._holder = threading.get_ident()
        try:
            yield
        except (ResourceLimitError, InputError) as e:
            raise self._naming_file(e) from None
        except StdopsError as e:
            if type(e) is not StdopsError:
                raise
            raise self._naming_file(e) from None
        finally:
            self._holder = None
            self._lock.release()

    def _naming_file(self, e: StdopsError) -> StdopsError:
        """``e`` with the model's file in front, if it does not name it (a scheduler or limit error)."""
        path = getattr(self.model, "path", None) or getattr(self.model, "_path", None)
        if not path or str(path) in str(e):
            return e
        return type(e)(f"{path}: graphs.{self.graph.id}: {e}")

    @property
    def rng(self) -> np.random.Generator:
        if isinstance(self._state, ReplicaState):
            raise StdopsError("Simulation.rng: a replicated simulation has one generator per replica (rngs)")
        return self._state.rng

    @property
    def rngs(self) -> list[np.random.Generator]:
        """The replicas' generators (a replicated simulation)."""
        if not isinstance(self._state, ReplicaState):
            return [self._state.rng]
        if self._separate is not None:
            return [s.rng for s in self._separate]
        return list(self._state.rngs)

    @property
    def replicas(self) -> int | None:
        """K for ``Simulation(model, seeds=[...K seeds])``, else None."""
        return None if self._seeds is None else len(self._seeds)

    @property
    def vectorized(self) -> bool:
        """Whether the replicas run as one computation (False for one seed, or after a fallback)."""
        return self._seeds is not None and self._separate is None

    def evaluate(self, time_increment: Any = None, inputs: dict | None = None) -> Any:
        """One trial; ``inputs`` keyed by input-port id or ``"node.port"`` (held on the port for every
        execution of its node in the trial). Returns ``outputs`` (a list of them, one per replica, for a
        replicated simulation)."""
        with self._exclusive("evaluate"):
            if self._seeds is not None:
                return self._replicated("evaluate", (time_increment, inputs))
            with limits.budget("evaluation"):
                return self._evaluate(time_increment, inputs)

    def _evaluate(self, time_increment: Any, inputs: dict | None) -> Any:
        self._engine.evaluate(time_increment, inputs)
        self.n_evaluations += 1
        if time_increment is not None:
            self.time += time_increment
        self._check_finite(self.time if time_increment is not None else None)
        return self.outputs

    def _replicated(self, method: str, args: tuple) -> Any:
        """``evaluate`` / ``run`` of a replicated simulation: with the replica axis while it holds, else (from
        the first refusal on, or any error: the lone runs then raise the model's own) one replica at a time."""
        if self._separate is None:
            try:
                if method == "evaluate":
                    with limits.budget("evaluation"):
                        out = self._evaluate(*args)
                else:
                    out = self._run(*args)
            except Exception as e:  # noqa: BLE001 - every replica is run on its own instead
                self._separate_replicas(e)
            else:
                self._calls.append((method, args[:3] + (None,) + args[4:] if method == "run" else args))
                return out
        assert self._separate is not None
        out = [getattr(s, method)(*args) for s in self._separate]
        self.time, self.n_evaluations = self._separate[0].time, self._separate[0].n_evaluations
        return out

    def _separate_replicas(self, why: BaseException) -> None:
        """From now on, one Simulation per replica: each made afresh from its seed and given the calls made
        so far, so it stands where a lone run would."""
        assert self._seeds is not None
        self.fallback_reason = " ".join(f"{type(why).__name__}: {why}".split())[:500]
        sims = [Simulation(self.model, self.graph.id, seed=s) for s in self._seeds]
        for method, args in self._calls:
            for sim in sims:
                getattr(sim, method)(*args)
        self._separate = sims

    @property
    def outputs(self) -> Any:
        if self._seeds is None:
            return {n: dict(e.out_values) for n, e in self._engine.nodes.items()}
        if self._separate is not None:
            return [s.outputs for s in self._separate]
        return _per_replica({n: dict(e.out_values) for n, e in self._engine.nodes.items()}, len(self._seeds))

    def node_outputs(self) -> Any:
        """Like ``outputs``, with the nodes of nested graphs too (keyed by their own ids)."""
        if self._separate is not None:
            return [s.node_outputs() for s in self._separate]
        out = {n: dict(e.out_values) for n, e in self._engine.all_nodes()}
        return out if self._seeds is None else _per_replica(out, len(self._seeds))

    @property
    def parameters(self) -> Any:
        if self._separate is not None:
            return [s.parameters for s in self._separate]
        out = {n: {p.id: p.curr for p in e.params} for n, e in self._engine.nodes.items()}
        return out if self._seeds is None else _per_replica(out, len(self._seeds))

    @property
    def execution_order(self) -> list[list[str]]:
        """The nodes run in each scheduler step so far (every evaluation)."""
        return [list(s) for s in self._engine.scheduler.execution_list]

    def output(self, key: str) -> Any:
        """One output value by ``"node.port"`` or a unique port id (a list of them for a replicated
        simulation)."""
        if self._separate is not None:
            return [s.output(key) for s in self._separate]
        if self._seeds is not None:
            return split(self._output(key), len(self._seeds))
        return self._output(key)

    def _output(self, key: str) -> Any:
        if "." in key:
            n, _, p = key.rpartition(".")
            if n in self._engine.nodes and p in self._engine.nodes[n].out_values:
                return self._engine.nodes[n].out_values[p]
        hits = [e.out_values[key] for e in self._engine.nodes.values() if key in e.out_values]
        if len(hits) == 1:
            return hits[0]
        raise KeyError(key)

    def run(
        self,
        duration: float,
        dt: float,
        inputs: dict | None = None,
        progress: Callable[[int, int], None] | None = None,
        clock: str = "steps",
    ) -> Any:
        """evaluate() at t = 0, then evaluate(time_increment=dt) at t = k*dt for k = 1 .. K, with
        K = round(duration/dt) when duration is a whole number of steps (within 1e-9 of one), else
        floor(duration/dt): ``run(20, 0.05)`` gives 401 evaluations, the last at t = 20. Times are computed
        as k*dt, never accumulated, so they do not drift.

        ``clock="accumulate"`` reproduces the reference's example scripts instead (``t += dt`` as a float
        while ``t <= duration``), whose step count can differ by one from the integer rule when rounding
        accumulates (the conformance tests use this protocol). ``progress(i, n)`` is called as it goes.
        A replicated simulation returns a list of K Trajectories."""
        with self._exclusive("run"):
            if self._seeds is not None:
                return self._replicated("run", (duration, dt, inputs, progress, clock))
            return self._run(duration, dt, inputs, progress, clock)

    def _run(self, duration: float, dt: float, inputs: dict | None, progress, clock: str) -> Any:
        if dt is None or not (dt > 0 and math.isfinite(dt)):
            raise StdopsError(f"run: dt must be a positive finite number, got {dt!r}")
        if duration is None or not (duration >= 0 and math.isfinite(duration)):
            raise StdopsError(f"run: duration must be a finite number >= 0, got {duration!r}")
        if clock not in ("steps", "accumulate"):
            raise StdopsError(f"run: clock must be 'steps' or 'accumulate', not {clock!r}")
        # The step count comes from the caller or the file's metadata (preferred_dt): bound it before a list
        # of times (and a trajectory of that many values per port) is built (stdops/limits.py).
        limits.check_elements((n_steps(duration, dt),), f"run(duration={duration!r}, dt={dt!r}): time steps", 8)
        if clock == "steps":
            times = [k * dt for k in range(n_steps(duration, dt))]
            if abs(times[-1] - duration) <= 1e-9 * max(1.0, abs(duration)):
                times[-1] = float(duration)
        else:
            times, t = [], 0.0
            while t <= duration:
                times.append(t)
                t += dt
        n = len(times)
        data: dict = {n_: {p: [] for p in e.out_values} for n_, e in self._engine.nodes.items()}
        for i in range(n):
            with limits.budget("evaluation"):
                self._engine.evaluate(None if i == 0 else dt, inputs)
            self.n_evaluations += 1
            self._check_finite(times[i])
            for node, e in self._engine.nodes.items():
                d = data[node]
                for p, v in e.out_values.items():
                    d[p].append(v)
            if progress is not None:
                progress(i + 1, n)
        self.time = times[-1] if times else 0.0
        if self._seeds is None:
            return Trajectory(times, data)
        k = len(self._seeds)
        per = {n_: {p: [split(v, k) for v in vals] for p, vals in ports.items()} for n_, ports in data.items()}
        return [
            Trajectory(times, {n_: {p: [v[r] for v in vals] for p, vals in ports.items()} for n_, ports in per.items()})
            for r in range(k)
        ]

    def _check_finite(self, t: Any) -> None:
        """The first evaluation at which each output port holds inf or NaN: recorded in ``nonfinite`` and
        reported once per port as a NonFiniteWarning (node, port, evaluation, time). One reduction per
        float array (a finite sum means finite elements; a non-finite one is confirmed
        element-wise, since finite values can overflow a sum)."""
        ports = self._ports
        if ports is None:
            ports = self._ports = [(n, p, e.out_values) for n, e in self._engine.nodes.items() for p in e.out_values]
        isfinite, add_reduce, ndarray = math.isfinite, np.add.reduce, np.ndarray
        for node, port, values in ports:
            v = values[port]
            tv = type(v)
            if tv is float:
                if isfinite(v):
                    continue
            elif tv is ndarray:
                if v.dtype.kind not in "fc" or isfinite(add_reduce(v, axis=None)):
                    continue
                if np.isfinite(v).all():
                    continue
            elif isinstance(v, np.floating):
                if isfinite(v):
                    continue
            elif tv is Replicas:
                d = v.data
                if d is None or d.dtype.kind not in "fc" or np.isfinite(d).all():
                    continue
                v = d
            else:
                continue
            if (node, port) in self.nonfinite:
                continue
            what = "NaN" if np.isnan(v).any() else "inf"
            self.nonfinite[(node, port)] = (self.n_evaluations, t)
            warnings.warn(
                f"{self.model.path + ': ' if getattr(self.model, 'path', None) else ''}node {node!r} "
                f"output port {port!r} is {what} from evaluation {self.n_evaluations}"
                + (f" (t = {t:.6g})" if t is not None else ""),
                NonFiniteWarning,
                stacklevel=3,
            )


def _per_replica(values: dict, n: int) -> list[dict]:
    """{node: {port: value}} with Replicas among the values -> K such dicts, one per replica."""
    split_values = {node: {p: split(v, n) for p, v in ports.items()} for node, ports in values.items()}
    return [{node: {p: vals[k] for p, vals in ports.items()} for node, ports in split_values.items()} for k in range(n)]


def n_steps(duration: float, dt: float) -> int:
    """Evaluations of ``run(duration, dt)``: 1 + round(duration/dt) when that is within 1e-9 (relative) of
    a whole number, else 1 + floor(duration/dt)."""
    q = duration / dt
    if not math.isfinite(q):
        raise StdopsError(f"run: duration / dt = {duration!r} / {dt!r} is not a finite number of steps")
    k = round(q)
    if abs(q - k) > 1e-9 * max(1.0, abs(q)):
        k = math.floor(q)
    return int(k) + 1


def standard_function_names() -> list[str]:
    return sorted(STANDARD)
