"""stdops run: a model on inputs (ONNX, ncnn) or over time (MDF)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._base import (
    UsageError,
    add_lenient,
    existing_file,
    nonnegative_float,
    not_for,
    output_file,
    output_folder,
    parse_inputs,
    positive_float,
    print_table,
)

HELP = "run a model: ONNX / ncnn on inputs from .npy files, MDF over time"

#: which model kinds each option applies to (anything else is refused, never ignored)
_APPLIES = {
    "WEIGHTS": ("ncnn",),
    "--dump": ("onnx", "ncnn"),
    "--duration": ("mdf",),
    "--dt": ("mdf",),
    "--seed": ("mdf",),
    "--profile": ("onnx", "ncnn"),
    "--lenient": ("mdf",),
}


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "run",
        help=HELP,
        description="Run a model. ONNX / ncnn: feed inputs from .npy files and print each output's shape, dtype "
        "and summary. MDF: evaluate once, or step time with --duration and --dt.",
    )
    p.add_argument(
        "model", type=existing_file, help="model file: .onnx, .param / .param.bin (ncnn), .json / .yaml (MDF)"
    )
    p.add_argument("weights", nargs="?", type=existing_file, help="ncnn .bin (default: beside the .param)")
    p.add_argument("-i", "--input", action="append", default=[], metavar="NAME=FILE.npy", help="an input (repeatable)")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="PATH",
        help="where to write the result: FILE.npz (every output / the MDF trajectory), FILE.csv (MDF "
        "trajectory), or a folder (ONNX / ncnn: one NAME.npy per output)",
    )
    p.add_argument("--dump", type=Path, metavar="FOLDER", help="ONNX / ncnn: save EVERY intermediate value as NAME.npy")
    p.add_argument("--duration", type=nonnegative_float, help="MDF: simulated time to run")
    p.add_argument("--dt", type=positive_float, help="MDF: time step (> 0)")
    p.add_argument("--seed", type=int, help="MDF: random seed")
    add_lenient(p)
    p.add_argument(
        "--profile",
        action="store_true",
        help="ONNX / ncnn: time every node of the run and print the slowest (stdops profile for more)",
    )
    p.set_defaults(func=main)
    return p


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def summary(v: Any) -> str:
    import numpy as np

    if v is None:
        return "empty optional"
    if isinstance(v, list):
        return f"sequence of {len(v)}"
    a = np.asarray(v)
    if a.size == 0:
        return "empty"
    if a.dtype.kind in "fciub":
        x = a.astype(np.float64) if a.dtype.kind != "c" else np.abs(a)
        return f"min {x.min():.6g}  max {x.max():.6g}  mean {x.mean():.6g}"
    flat = a.ravel()
    return ", ".join(map(str, flat[:4])) + (" ..." if flat.size > 4 else "")


def print_outputs(result: dict) -> None:
    import numpy as np

    rows = []
    for name, v in result.items():
        shape = str(tuple(np.shape(v))) if isinstance(v, np.ndarray) else "-"
        dtype = str(v.dtype) if isinstance(v, np.ndarray) else type(v).__name__
        rows.append((name, shape, dtype, summary(v)))
    print_table("outputs", ("name", "shape", "dtype", "summary"), rows)


def load_model(model: Path, weights: Path | None = None) -> Any:
    from .. import load

    if weights is not None:
        from .. import ncnn

        return ncnn.Net.load(model, weights)
    return load(model)


def main(a: argparse.Namespace) -> int:
    from .. import model_kind

    kind = model_kind(a.model)
    not_for(
        kind,
        {
            "WEIGHTS": a.weights,
            "--dump": a.dump,
            "--duration": a.duration,
            "--dt": a.dt,
            "--seed": a.seed,
            "--lenient": a.lenient,
            "--profile": a.profile,
        },
        _APPLIES,
    )
    # every path is checked before any work starts
    out = a.output
    if kind == "mdf":
        if out is not None:
            output_file(out, "--output", (".csv", ".npz"))
            if a.duration is None:
                raise UsageError("--output saves a trajectory: give --duration (and --dt)")
        from ..mdf import cli as mdf_cli

        mdf_cli.run_model(
            a.model, a.duration, a.dt, out, seed=a.seed, inputs=parse_inputs(a.input) or None, lenient=a.lenient
        )
        return 0
    if out is not None:
        if str(out).lower().endswith(".csv"):
            raise UsageError(f"--output {out}: a .csv holds an MDF trajectory; write .npz or a folder")
        output_file(out, "--output", (".npz",)) if str(out).lower().endswith(".npz") else output_folder(out, "--output")
    if a.dump is not None:
        output_folder(a.dump, "--dump")
        if a.profile:
            raise UsageError("--profile times a run without hooks: it does not go with --dump")
    feeds = parse_inputs(a.input)
    m = load_model(a.model, a.weights)
    if a.profile:
        result = _profiled_run(m, feeds)
    else:
        hook = _dump_hook(a.dump) if a.dump is not None else None
        result = m.run(feeds, hook=hook)
    print_outputs(result)
    if a.dump is not None:
        print(f"saved every intermediate value to {a.dump}")
    if out is not None:
        _save(result, out)
    return 0


#: nodes --profile lists
PROFILE_TOP = 10


def _profiled_run(m: Any, feeds: dict) -> dict:
    """One run with every node timed; prints the slowest nodes and returns the outputs."""
    from ..tools import profile as prof

    p = prof.profile(m, feeds, runs=1, warmup=0)
    print_table(
        f"slowest {min(PROFILE_TOP, len(p.nodes))} of {len(p.nodes)} nodes (one run)",
        prof.COLUMNS,
        prof.table_rows(p, PROFILE_TOP),
    )
    print(prof.summary_line(p))
    return p.outputs


def _dump_hook(folder: Path):
    import numpy as np

    folder.mkdir(exist_ok=True)

    def hook(node: str, name: str, value: Any) -> None:
        if isinstance(value, np.ndarray) and value.dtype != object:
            # values inside a subgraph (node "loop[3]/add") repeat per iteration: keep them apart
            stem = f"{_safe(node)}__{_safe(name)}" if "/" in node else _safe(name)
            np.save(folder / f"{stem}.npy", value, allow_pickle=False)

    return hook


def _save(result: dict, out: Path) -> None:
    import numpy as np

    from ..npz import save_npz

    arrays = {n: v for n, v in result.items() if isinstance(v, np.ndarray) and v.dtype != object}
    if str(out).lower().endswith(".npz"):
        save_npz(out, arrays)
    else:
        out.mkdir(exist_ok=True)
        for name, v in arrays.items():
            np.save(out / f"{_safe(name)}.npy", v, allow_pickle=False)
    skipped = len(result) - len(arrays)
    print(
        f"saved {len(arrays)} output(s) to {out}" + (f" ({skipped} non-tensor output(s) not saved)" if skipped else "")
    )
