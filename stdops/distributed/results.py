"""A sweep's results as an ``xarray.Dataset``, kept in memory as jobs finish and written to netCDF (h5netcdf)
or zarr: the whole dataset into a temporary file beside the target, then renamed over it, so the file on disk
is always complete and readable -- a partial one holds the finished jobs (``job_done``) and ``--resume`` runs
only the others.

Layout: one variable per output port ("node.port") or model output, with the job dimensions first (the
swept parameters or ``point``, then ``seed``; or ``sample``), then ``time`` for a time-stepped MDF run, then
the value's own dimensions (``NAME_dim0``, ...). An output named like a coordinate (a port that shows a swept
parameter) is stored as ``NAME_output``. Attributes: the model's file name and sha256, stdops'
version, the command, the sweep's definition (JSON) and how job seeds are drawn.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from .plan import SweepError, SweepPlan

DONE = "job_done"
MARK = "stdops_sweep"  # attribute present on every file this module writes
SEEDING = "job j (C order over the job dimensions) draws from numpy.random.SeedSequence(root_seed).spawn(n_jobs)[j]"


def format_of(path: Path) -> str:
    low = str(path).lower().rstrip("/")
    if low.endswith(".nc"):
        return "netcdf"
    if low.endswith(".zarr"):
        return "zarr"
    raise SweepError(f"--output {path}: expected a .nc (netCDF) or .zarr file")


class ResultStore:
    """Every job's values at its place in the job grid; the dtype of a variable widens as values arrive
    (an output that is an int at one point and a float at another becomes float: the same whatever order
    the jobs finish in)."""

    def __init__(self, plan: SweepPlan, attrs: dict[str, Any]):
        self.plan = plan
        self.shape = plan.job_shape
        self.done = np.zeros(self.shape, dtype=bool)
        self.values: dict[str, np.ndarray] = {}
        self.dims: dict[str, list[str]] = {}
        self.times: np.ndarray | None = None
        self.not_stored: set[str] = set()
        self.attrs = dict(attrs)
        self.first_job: int | None = None
        self._taken = {*plan.coords(), *plan.job_dims, "time"}

    # ---------------------------------------------------------------- filling
    def describe(self, j: int) -> str:
        idx = np.unravel_index(j, self.shape)
        coords = self.plan.coords()
        parts = []
        for d, i in zip(self.plan.job_dims, idx):
            c = coords[d]
            label = c[int(i)] if not isinstance(c, tuple) else int(i)
            parts.append(f"{d}={label}")
        return ", ".join(parts)

    def add(self, j: int, values: dict[str, np.ndarray | None], times: np.ndarray | None) -> None:
        idx = np.unravel_index(j, self.shape)
        if self.first_job is None:
            self.first_job = j
            self.times = times
        elif (times is None) != ((held := self.times) is None) or (
            times is not None and held is not None and not np.array_equal(times, held)
        ):
            raise SweepError(f"job {j} ({self.describe(j)}) ran over other times than job {self.first_job}")
        for port, a in values.items():
            name = self.variable_name(port)
            if a is None or name in self.not_stored:
                self._drop(name)
                continue
            if name == DONE:
                raise SweepError(f"an output is named {DONE!r}, which the result file uses for itself")
            store = self.values.get(name)
            if store is None:
                if self.done.any() and name not in self.values:
                    raise SweepError(
                        f"output {name!r} has a value at job {j} ({self.describe(j)}) but none at job {self.first_job}"
                    )
                store = self._allocate(name, a, times is not None)
            if store.shape[len(self.shape) :] != a.shape:
                raise SweepError(
                    f"output {name!r} has shape {a.shape} at {self.describe(j)} but "
                    f"{store.shape[len(self.shape) :]} at {self.describe(self.first_job)}: a sweep stacks values "
                    "of one shape"
                )
            wide = np.result_type(store.dtype, a.dtype)
            if wide != store.dtype:
                store = self.values[name] = self._widen(store, wide)
            store[idx] = a
        self.done[idx] = True

    def variable_name(self, port: str) -> str:
        """An output's variable: its own name, unless a coordinate has it (an output port that shows a
        swept parameter, "stimulus.coherence"): then NAME_output."""
        if port in self._taken:
            return f"{port}_output"
        return port

    def _allocate(self, name: str, a: np.ndarray, timed: bool) -> np.ndarray:
        store = np.empty(self.shape + a.shape, dtype=a.dtype)
        store[...] = _fill(a.dtype)
        own = a.shape[1:] if timed else a.shape
        self.dims[name] = [
            *self.plan.job_dims,
            *(["time"] if timed else []),
            *(f"{name}_dim{i}" for i in range(len(own))),
        ]
        self.values[name] = store
        return store

    def _widen(self, store: np.ndarray, dtype: np.dtype) -> np.ndarray:
        out = store.astype(dtype)
        out[~self.done] = _fill(dtype)
        return out

    def _drop(self, name: str) -> None:
        self.not_stored.add(name)
        self.values.pop(name, None)
        self.dims.pop(name, None)

    @property
    def jobs_done(self) -> int:
        return int(self.done.sum())

    def pending(self) -> list[int]:
        return [int(j) for j in np.flatnonzero(~self.done.reshape(-1))]

    # ---------------------------------------------------------------- the dataset
    def dataset(self):
        import xarray as xr

        coords = dict(self.plan.coords())
        if self.times is not None:
            coords["time"] = self.times
        data_vars: dict[str, Any] = {name: (self.dims[name], arr) for name, arr in sorted(self.values.items())}
        data_vars[DONE] = (self.plan.job_dims, self.done)
        attrs = dict(self.attrs)
        attrs.update(
            jobs=self.plan.n_jobs,
            jobs_done=self.jobs_done,
            complete=int(self.done.all()),
            outputs_not_stored=", ".join(sorted(self.not_stored)),
        )
        return xr.Dataset(data_vars, coords=coords, attrs=attrs)

    # ---------------------------------------------------------------- resuming
    def restore(self, ds: Any) -> None:
        """Take the finished jobs of a partial file (already checked to be this model's and this sweep's)."""
        self.done = np.asarray(ds[DONE].values, dtype=bool).reshape(self.shape)
        if "time" in ds.coords:
            self.times = np.asarray(ds["time"].values, dtype=np.float64)
        for name in ds.data_vars:
            if name == DONE:
                continue
            arr = ds[name].values
            if arr.dtype == object:  # text comes back from netCDF as objects
                arr = np.asarray(arr.tolist(), dtype=str).reshape(arr.shape)
            self.values[name] = np.array(arr)
            self.dims[name] = list(ds[name].dims)
        self.not_stored = {s for s in str(ds.attrs.get("outputs_not_stored", "")).split(", ") if s}
        if self.done.any():
            self.first_job = int(np.flatnonzero(self.done.reshape(-1))[0])
        self.attrs["command"] = ds.attrs.get("command", self.attrs.get("command", ""))


def _fill(dtype: np.dtype) -> Any:
    if dtype.kind in "fc":
        return np.nan
    if dtype.kind in "US":
        return ""
    return 0


# --------------------------------------------------------------------------- files
def write(ds: Any, path: Path) -> None:
    """Write ``ds`` to ``path`` (.nc or .zarr) so that a reader never sees half a file: into a temporary
    name in the same folder, then renamed over the old one."""
    fmt = format_of(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    _remove(tmp)
    try:
        if fmt == "netcdf":
            ds.to_netcdf(tmp, engine="h5netcdf")
            os.replace(tmp, path)
            return
        # zarr format 2: fixed-width text (sample labels) has a specification there, and every zarr reader
        # reads it; consolidated metadata so that xarray opens it without a warning
        ds.to_zarr(tmp, mode="w", zarr_format=2, consolidated=True)
        if path.exists():
            old = path.with_name(f".{path.name}.old-{os.getpid()}")
            _remove(old)
            os.replace(path, old)
            os.replace(tmp, path)
            _remove(old)
        else:
            os.replace(tmp, path)
    finally:
        _remove(tmp)


def _remove(p: Path) -> None:
    if p.is_dir():
        shutil.rmtree(p)
    elif p.exists():
        p.unlink()


def read(path: Path) -> Any:
    """A result file, loaded into memory and closed (so it can be replaced)."""
    import xarray as xr

    fmt = format_of(path)
    try:
        if fmt == "netcdf":
            with xr.open_dataset(path, engine="h5netcdf") as ds:
                return ds.load()
        with xr.open_zarr(path) as ds:
            return ds.load()
    except Exception as e:  # noqa: BLE001 - any unreadable file is the user's to fix
        raise SweepError(f"--resume {path}: cannot read it as a sweep result ({type(e).__name__}: {e})") from None


def check_resumable(ds: Any, path: Path, payload_name: str, sha: str, definition: str) -> None:
    """Refuse a file that is not a stdops sweep, holds another model's results, or another sweep's."""
    attrs = ds.attrs
    if MARK not in attrs or DONE not in ds:
        raise SweepError(f"--resume {path}: not a stdops sweep result file; nothing was changed")
    if attrs.get("model_sha256") != sha:
        raise SweepError(
            f"--resume {path}: the file holds results of another model ({attrs.get('model', '?')}, sha256 "
            f"{str(attrs.get('model_sha256', '?'))[:12]}), not of {payload_name} (sha256 {sha[:12]}); nothing was "
            "changed"
        )
    if attrs.get("sweep") != definition:
        theirs, ours = json.loads(attrs.get("sweep", "{}")), json.loads(definition)
        diff = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
        raise SweepError(
            f"--resume {path}: the file holds another sweep of this model (it differs in {', '.join(diff)}); "
            "nothing was changed"
        )
