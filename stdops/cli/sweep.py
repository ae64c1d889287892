"""stdops sweep: one model run many times (a grid of MDF parameters and seeds, a batch of ONNX / ncnn inputs)
on a dask.distributed cluster, the results written as one labelled dataset (.nc or .zarr)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from ._base import UsageError, existing_file, nonnegative_float, not_for, positive_float, positive_int, require_module

HELP = "run a model over a parameter grid (MDF) or a batch of inputs (ONNX / ncnn), on dask; results as .nc/.zarr"

_APPLIES = {
    "--grid": ("mdf",),
    "--values": ("mdf",),
    "--seeds": ("mdf",),
    "--seed": ("mdf",),
    "--duration": ("mdf",),
    "--dt": ("mdf",),
    "--inputs": ("onnx", "ncnn"),
}


class _Axis(argparse.Action):
    """--grid and --values append to one list, so the dimensions keep the order they were given in."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option_string: Any = None) -> None:
        axes = list(getattr(namespace, "axes", None) or [])
        axes.append((option_string, values))
        namespace.axes = axes


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "sweep",
        help=HELP,
        description="Run a model at every point of a sweep and write the results as one xarray dataset. MDF: the "
        "cartesian product of --grid / --values (dimensions in the order given), --seeds runs per point, over "
        "time with --duration and --dt. ONNX / ncnn: every sample of --inputs, stacked along 'sample'. Runs on a "
        "local dask cluster of --workers processes, or on the cluster of --scheduler; --serial runs here. Job j "
        "is seeded from numpy.random.SeedSequence(--seed).spawn(jobs)[j], so results are bit-identical however "
        "they are spread.",
        epilog="Example: stdops sweep examples/mdf/ddm_decision.yaml --grid stimulus.coherence=0:0.5:6 "
        "--values ddm.threshold=0.5,1 --seeds 8 -o ddm.nc",
    )
    p.add_argument("model", type=existing_file, help="model file: .json / .yaml (MDF), .onnx, .param (ncnn)")
    p.add_argument(
        "--grid",
        action=_Axis,
        dest="axes",
        metavar="NODE.PARAM=START:STOP:N",
        help="MDF: N evenly spaced values from START to STOP (repeatable: a cartesian grid)",
    )
    p.add_argument(
        "--values", action=_Axis, dest="axes", metavar="NODE.PARAM=A,B,C", help="MDF: these values (repeatable)"
    )
    p.add_argument("--seeds", type=positive_int, help="MDF: runs per point, each its own random stream (default 1)")
    p.add_argument("--seed", type=int, help="MDF: the root seed of numpy.random.SeedSequence (default 0)")
    p.add_argument("--duration", type=nonnegative_float, help="MDF: simulated time of each run (with --dt)")
    p.add_argument("--dt", type=positive_float, help="MDF: time step (> 0)")
    p.add_argument(
        "--inputs",
        type=Path,
        metavar="DIR|FILE.npz",
        help="ONNX / ncnn: a folder of .npy (one sample each; or one folder per sample holding NAME.npy), or a "
        ".npz of arrays stacked along axis 0",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on the dask cluster of this scheduler")
    where.add_argument("--workers", type=positive_int, help="processes of the local cluster (default: the cores)")
    where.add_argument("--serial", action="store_true", help="run here, one job after another (no dask)")
    p.add_argument("--timeout", type=positive_float, default=10.0, help="seconds to wait for --scheduler (default 10)")
    p.add_argument(
        "--task-seconds",
        type=positive_float,
        default=1.0,
        help="target compute time of one task; jobs are batched to reach it (default 1)",
    )
    p.add_argument(
        "--checkpoint-seconds",
        type=positive_float,
        default=10.0,
        help="rewrite the result file at most this often while the sweep runs (default 10)",
    )
    p.add_argument("--resume", action="store_true", help="keep the runs the -o file already holds, run the others")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.nc|FILE.zarr", help="the result file")
    p.set_defaults(func=main, axes=[])
    return p


def _check_output(out: Path, resume: bool) -> None:
    low = str(out).lower().rstrip("/")
    if not low.endswith((".nc", ".zarr")):
        raise UsageError(f"--output {out}: expected a .nc (netCDF) or .zarr file")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"--output {out}: the folder {parent} does not exist")
    if low.endswith(".nc") and out.is_dir():
        raise UsageError(f"--output {out}: is a folder, expected a .nc file")
    if low.endswith(".zarr") and out.exists() and not out.is_dir():
        raise UsageError(f"--output {out}: is a file; a .zarr store is a folder")
    if resume and not out.exists():
        print(f"--resume: {out} does not exist yet; running every point", file=sys.stderr)


def main(a: argparse.Namespace) -> int:
    from .. import model_kind

    kind = model_kind(a.model)
    not_for(
        kind,
        {
            "--grid": [v for o, v in a.axes if o == "--grid"],
            "--values": [v for o, v in a.axes if o == "--values"],
            "--seeds": a.seeds,
            "--seed": a.seed,
            "--duration": a.duration,
            "--dt": a.dt,
            "--inputs": a.inputs,
        },
        _APPLIES,
    )
    if (a.duration is None) != (a.dt is None):
        raise UsageError("--duration and --dt go together: give both for a time-stepped sweep, or neither")
    if kind != "mdf" and a.inputs is None:
        raise UsageError(f"an {kind.upper()} sweep runs a batch of inputs: give --inputs DIR or FILE.npz")
    if a.inputs is not None and not a.inputs.exists():
        raise UsageError(f"--inputs {a.inputs}: no such file or folder")
    _check_output(a.output, a.resume)
    require_module("xarray", "stdops sweep", "distributed")
    if not a.serial:
        require_module("distributed", "stdops sweep", "distributed")
    if str(a.output).lower().rstrip("/").endswith(".nc"):
        require_module("h5netcdf", "writing netCDF", "distributed")
        require_module("h5py", "writing netCDF", "distributed")
    else:
        require_module("zarr", "writing zarr", "distributed")

    from ..distributed import parse_grid, parse_values, sweep

    grid = [parse_grid(v) if o == "--grid" else parse_values(v) for o, v in a.axes]
    ds = sweep(
        a.model,
        grid,
        seeds=a.seeds or 1,
        seed=a.seed or 0,
        duration=a.duration,
        dt=a.dt,
        inputs=a.inputs,
        scheduler=a.scheduler,
        workers=a.workers,
        serial=a.serial,
        output=a.output,
        resume=a.resume,
        task_seconds=a.task_seconds,
        checkpoint_seconds=a.checkpoint_seconds,
        connect_timeout=a.timeout,
        progress=not a.no_progress,
        command=_command(),
        log=lambda line: print(line, file=sys.stderr),
    )
    dims = ", ".join(f"{d}={n}" for d, n in ds.sizes.items())
    outputs = [v for v in ds.data_vars if v != "job_done"]
    print(f"wrote {a.output}: {int(ds.attrs['jobs_done'])} runs; dimensions {dims}")
    print(f"variables: {', '.join(outputs)}")
    skipped = ds.attrs.get("outputs_not_stored")
    if skipped:
        print(f"not stored (not numbers or text): {skipped}")
    return 0


def _command() -> str:
    """The command line as typed, minus the options that only say where or how to run (so a resumed or
    re-placed sweep records the same command)."""
    argv = ["stdops", *sys.argv[1:]]
    drop_flag = {"--resume", "--serial", "--no-progress", "--debug"}
    drop_value = {"--scheduler", "--workers", "--timeout", "--task-seconds", "--checkpoint-seconds"}
    out: list[str] = []
    skip = False
    for word in argv:
        if skip:
            skip = False
            continue
        name = word.split("=", 1)[0]
        if name in drop_flag:
            continue
        if name in drop_value:
            skip = "=" not in word
            continue
        out.append(word)
    return shlex.join(out)
