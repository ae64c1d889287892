"""What a sweep runs: the parameter axes (a cartesian grid, or a list of points), the seeds, the input
samples, and the numbering of jobs that every other part (workers, result file, resume) agrees on.

Jobs are numbered in C order over the sweep's dimensions: the parameter axes in the order given (or the
``point`` axis), then ``seed`` (MDF) -- or over ``sample`` (ONNX / ncnn). Job ``j`` of an MDF sweep draws its
random numbers from ``numpy.random.SeedSequence(root_seed).spawn(n_jobs)[j]``, which is
``SeedSequence(root_seed, spawn_key=(j,))``: a job's result depends on nothing but its own number, never on
the workers, the batching or the order in which tasks finish.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StdopsError


class SweepError(StdopsError):
    """A sweep that cannot be run as asked: a parameter that does not exist, a grid with no point, a result
    file that belongs to another model or sweep, a scheduler that cannot be reached."""


# --------------------------------------------------------------------------- parsing the command line's forms
def _number(text: str) -> Any:
    """'3' -> 3, '0.5' -> 0.5, anything else stays a string (an MDF value may be an expression)."""
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        v = float(t)
    except ValueError:
        return t
    return v


def parse_grid(item: str) -> tuple[str, list]:
    """``node.param=START:STOP:N`` -> (name, N evenly spaced values from START to STOP inclusive). Integers
    when START and STOP are written as integers and every value is whole (a trial count stays an int)."""
    name, sep, spec = item.partition("=")
    parts = spec.split(":")
    if not sep or not name.strip() or len(parts) != 3:
        raise SweepError(f"--grid {item!r}: expected NAME=START:STOP:N (e.g. stimulus.coherence=0:1:11)")
    start, stop, count = (_number(p) for p in parts)
    if not isinstance(start, (int, float)) or not isinstance(stop, (int, float)):
        raise SweepError(f"--grid {item!r}: START and STOP must be numbers")
    if not isinstance(count, int) or isinstance(count, bool):
        raise SweepError(f"--grid {item!r}: N must be a whole number of points, got {parts[2]!r}")
    if count <= 0:
        raise SweepError(f"--grid {item!r}: a grid of {count} points has no point to run (N must be >= 1)")
    if not (math.isfinite(start) and math.isfinite(stop)):
        raise SweepError(f"--grid {item!r}: START and STOP must be finite")
    values = np.linspace(float(start), float(stop), count)
    if isinstance(start, int) and isinstance(stop, int) and np.all(values == np.round(values)):
        return name.strip(), [int(v) for v in np.round(values)]
    return name.strip(), [float(v) for v in values]


def parse_values(item: str) -> tuple[str, list]:
    """``node.param=a,b,c`` -> (name, [a, b, c]) with numbers parsed as numbers."""
    name, sep, spec = item.partition("=")
    if not sep or not name.strip():
        raise SweepError(f"--values {item!r}: expected NAME=V1,V2,... (e.g. ddm.threshold=0.5,1,2)")
    values = [_number(v) for v in spec.split(",") if v.strip()]
    if not values:
        raise SweepError(f"--values {item!r}: no value given, so the sweep has no point to run")
    if any(isinstance(v, float) for v in values) and all(isinstance(v, (int, float)) for v in values):
        values = [float(v) for v in values]  # 0,0.5,1: one type along the axis
    return name.strip(), values


# --------------------------------------------------------------------------- the plan
@dataclass
class Axis:
    name: str
    values: list


@dataclass
class SweepPlan:
    """The dimensions of a sweep and its jobs. MDF: ``axes`` (a grid) or ``points`` (a list), then ``seeds``.
    ONNX / ncnn: ``samples`` (labels) with their feeds."""

    kind: str
    axes: list[Axis] = field(default_factory=list)
    points: list[dict[str, Any]] | None = None
    seeds: int = 1
    root_seed: int = 0
    duration: float | None = None
    dt: float | None = None
    sample_labels: list | None = None
    sample_feeds: list[dict[str, np.ndarray]] | None = None

    # ---------------------------------------------------------------- shape of the job grid
    @property
    def job_dims(self) -> list[str]:
        if self.kind != "mdf":
            return ["sample"]
        head = ["point"] if self.points is not None else [a.name for a in self.axes]
        return [*head, "seed"]

    @property
    def job_shape(self) -> tuple[int, ...]:
        if self.kind != "mdf":
            return (len(self.sample_labels or ()),)
        head = (len(self.points),) if self.points is not None else tuple(len(a.values) for a in self.axes)
        return (*head, self.seeds)

    @property
    def n_jobs(self) -> int:
        return int(np.prod(self.job_shape, dtype=np.int64))

    def overrides(self, j: int) -> dict[str, Any]:
        """The parameter values of job ``j`` (MDF)."""
        idx = np.unravel_index(j, self.job_shape)
        if self.points is not None:
            return dict(self.points[int(idx[0])])
        return {a.name: a.values[int(i)] for a, i in zip(self.axes, idx[:-1])}

    def seed_sequence(self, j: int) -> np.random.SeedSequence:
        """Job j's seed: ``SeedSequence(root_seed).spawn(n_jobs)[j]``, built directly."""
        return np.random.SeedSequence(self.root_seed, spawn_key=(j,))

    def job(self, j: int) -> tuple:
        """What a worker needs to run job ``j``: (j, parameter overrides) or (j, feeds)."""
        if self.kind == "mdf":
            return (j, self.overrides(j))
        assert self.sample_feeds is not None
        return (j, self.sample_feeds[j])

    def coords(self) -> dict[str, Any]:
        """Coordinates of the job dimensions (and, for a list of points, each parameter along ``point``)."""
        if self.kind != "mdf":
            return {"sample": np.asarray(self.sample_labels)}
        out: dict[str, Any] = {}
        if self.points is not None:
            out["point"] = np.arange(len(self.points))
            for name in self.points[0]:
                out[name] = ("point", np.asarray([p[name] for p in self.points]))
        else:
            for a in self.axes:
                out[a.name] = np.asarray(a.values)
        out["seed"] = np.arange(self.seeds)
        return out

    def definition(self) -> str:
        """A canonical JSON text of everything that decides the results (stored in the file's attributes,
        compared on --resume)."""
        d: dict[str, Any] = {"kind": self.kind}
        if self.kind == "mdf":
            if self.points is not None:
                d["points"] = self.points
            else:
                d["grid"] = [[a.name, a.values] for a in self.axes]
            d.update(seeds=self.seeds, root_seed=self.root_seed, duration=self.duration, dt=self.dt)
        else:
            h = hashlib.sha256()
            for feeds in self.sample_feeds or ():
                for name in sorted(feeds):
                    a = np.ascontiguousarray(feeds[name])
                    h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
                    h.update(a.tobytes())
            d.update(samples=[str(s) for s in self.sample_labels or ()], inputs_sha256=h.hexdigest())
        return json.dumps(d, sort_keys=True, default=_json_default)


def _json_default(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"not JSON: {type(v).__name__}")


# --------------------------------------------------------------------------- building and checking a plan
def mdf_parameter_names(model: Any) -> dict[str, Any]:
    """Every "node.param" of the simulated (first) graph that a sweep can set -> its schema Parameter."""
    graph = model.graph(None)
    return {f"{n.id}.{p.id}": p for n in graph.nodes.values() for p in n.parameters.values()}


def check_parameter(name: str, known: Mapping[str, Any], where: str) -> None:
    if name in known:
        p = known[name]
        if p.value is None and p.default_initial_value is None:
            raise SweepError(
                f"{where}: parameter {name!r} is computed by a function each evaluation; a sweep sets a "
                "parameter's value (or the initial value of a stateful one)"
            )
        return
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.5)
    hint = f" (did you mean {close[0]}?)" if close else f" (parameters: {', '.join(sorted(known)) or 'none'})"
    raise SweepError(f"{where}: no parameter {name!r}{hint}")


def build_mdf_plan(
    model: Any,
    path: str,
    grid: Mapping[str, Sequence] | Sequence[tuple[str, Sequence]] | None,
    points: Sequence[Mapping[str, Any]] | None,
    seeds: int,
    root_seed: int,
    duration: float | None,
    dt: float | None,
) -> SweepPlan:
    if grid and points is not None:
        raise SweepError("give a grid or a list of points, not both")
    if isinstance(seeds, bool) or not isinstance(seeds, (int, np.integer)) or seeds < 1:
        raise SweepError(f"seeds must be a whole number >= 1, got {seeds!r}")
    if isinstance(root_seed, bool) or not isinstance(root_seed, (int, np.integer)) or root_seed < 0:
        raise SweepError(f"the root seed must be a whole number >= 0, got {root_seed!r}")
    if (duration is None) != (dt is None):
        raise SweepError("a time-stepped sweep needs both duration and dt")
    if dt is not None and not (math.isfinite(dt) and dt > 0):
        raise SweepError(f"dt must be a positive number, got {dt!r}")
    if duration is not None and not (math.isfinite(duration) and duration >= 0):
        raise SweepError(f"duration must be a number >= 0, got {duration!r}")
    known = mdf_parameter_names(model)
    plan = SweepPlan("mdf", seeds=int(seeds), root_seed=int(root_seed), duration=duration, dt=dt)
    if points is not None:
        pts = [dict(p) for p in points]
        if not pts:
            raise SweepError("the list of points is empty: the sweep has no point to run")
        names = list(pts[0])
        for i, p in enumerate(pts):
            if list(p) != names:
                raise SweepError(f"point {i} sets {sorted(p)}, point 0 sets {sorted(names)}: every point sets the same")
        for name in names:
            check_parameter(name, known, path)
        plan.points = pts
    else:
        items = list(grid.items()) if isinstance(grid, Mapping) else list(grid or ())
        seen: set[str] = set()
        for name, values in items:
            check_parameter(name, known, path)
            if name in seen:
                raise SweepError(f"{path}: parameter {name!r} is swept twice")
            seen.add(name)
            vals = [v.item() if isinstance(v, np.generic) else v for v in values]
            if not vals:
                raise SweepError(f"{path}: parameter {name!r} has no value, so the grid has no point to run")
            if len({json.dumps(v, default=str) for v in vals}) != len(vals):
                raise SweepError(f"{path}: parameter {name!r} lists a value twice: {vals}")
            plan.axes.append(Axis(name, vals))
    return plan


def read_samples(inputs: Any, input_names: Sequence[str], where: str) -> tuple[list, list[dict[str, np.ndarray]]]:
    """The samples of an ONNX / ncnn batch sweep -> (labels, feeds per sample).

    - a mapping {input: array stacked along axis 0} (or a .npz file holding that): sample i feeds row i;
    - a folder of .npy files (a one-input model): each file is one sample, labelled by its name;
    - a folder of folders: each subfolder is one sample, holding INPUT.npy for each input.
    """
    if isinstance(inputs, (str, os.PathLike)):
        p = Path(inputs)
        if p.is_dir():
            return _samples_from_folder(p, input_names)
        if p.suffix.lower() != ".npz":
            raise SweepError(f"--inputs {p}: expected a folder of .npy files or a .npz file")
        stacked = _load_npz(p)
        where = str(p)
    else:
        stacked = {k: np.asarray(v) for k, v in dict(inputs).items()}
    unknown = sorted(set(stacked) - set(input_names))
    if unknown:
        raise SweepError(f"{where}: no model input {unknown[0]!r} (inputs: {', '.join(input_names)})")
    missing = [n for n in input_names if n not in stacked]
    if missing:
        raise SweepError(f"{where}: no array for the model input(s) {', '.join(missing)}")
    lengths = {n: (a.shape[0] if a.ndim else -1) for n, a in stacked.items()}
    if any(v < 0 for v in lengths.values()) or len(set(lengths.values())) != 1:
        raise SweepError(f"{where}: every input must stack its samples along axis 0 with one count, got {lengths}")
    n = next(iter(lengths.values()))
    if n == 0:
        raise SweepError(f"{where}: no sample to run")
    return list(range(n)), [{k: a[i] for k, a in stacked.items()} for i in range(n)]


def _load_npz(p: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(p, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise SweepError(f"--inputs {p}: cannot read: {e}") from None


def _load_npy(p: Path) -> np.ndarray:
    try:
        return np.load(p, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise SweepError(f"--inputs {p}: cannot read: {e}") from None


def _samples_from_folder(folder: Path, input_names: Sequence[str]) -> tuple[list, list[dict[str, np.ndarray]]]:
    subdirs = sorted(d for d in folder.iterdir() if d.is_dir())
    files = sorted(f for f in folder.iterdir() if f.is_file() and f.suffix.lower() == ".npy")
    if subdirs and files:
        raise SweepError(f"--inputs {folder}: holds both .npy files and folders; use one layout")
    if files:
        if len(input_names) != 1:
            raise SweepError(
                f"--inputs {folder}: one .npy per sample fits a one-input model; this one has inputs "
                f"{', '.join(input_names)}: give one folder per sample holding NAME.npy for each"
            )
        return [f.stem for f in files], [{input_names[0]: _load_npy(f)} for f in files]
    if not subdirs:
        raise SweepError(f"--inputs {folder}: no .npy file and no sample folder, so there is no sample to run")
    feeds = []
    for d in subdirs:
        present = {f.stem: f for f in d.iterdir() if f.suffix.lower() == ".npy"}
        missing = [n for n in input_names if n not in present]
        if missing:
            raise SweepError(f"--inputs {d}: no {missing[0]}.npy (inputs: {', '.join(input_names)})")
        feeds.append({n: _load_npy(present[n]) for n in input_names})
    return [d.name for d in subdirs], feeds
