"""stdops profile: per-node time, FLOPs, bytes moved and share of wall time of an ONNX or ncnn model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._base import UsageError, existing_file, output_file, parse_inputs, positive_int, print_table

HELP = "per-node time (median over runs), FLOPs, bytes moved and share of wall time; a Chrome trace"


def register(sub: Any) -> argparse.ArgumentParser:
    from ..tools.autoinputs import add_arguments

    p = sub.add_parser(
        "profile",
        help=HELP,
        description="Run an ONNX or ncnn model several times and time every node through the plan's step timer: "
        "a table sorted by median time with FLOPs (estimated from the shapes; '-' where no rule applies), bytes "
        "read and written, and each node's share of the wall time. --trace writes a Chrome trace "
        "(chrome://tracing, ui.perfetto.dev) with one event per node of the median run.",
    )
    p.add_argument("model", type=existing_file, help="model file: .onnx, .param / .param.bin (ncnn)")
    p.add_argument("weights", nargs="?", type=existing_file, help="ncnn .bin (default: beside the .param)")
    add_arguments(p)
    p.add_argument("--runs", type=positive_int, default=10, help="timed runs (default 10)")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    p.add_argument("--top", type=positive_int, help="rows to show (default: every node)")
    p.add_argument("--trace", type=Path, metavar="FILE.json", help="write a Chrome trace (Trace Event Format)")
    p.add_argument(
        "-o", "--output", type=Path, metavar="FILE", help="write the per-node table as .json or .csv as well"
    )
    p.set_defaults(func=main)
    return p


def load_for_profile(model: Path, weights: Path | None) -> Any:
    from .. import model_kind
    from .run import load_model

    kind = model_kind(model)
    if kind == "mdf":
        raise UsageError(f"{model}: profile times the nodes of ONNX and ncnn models; MDF models have no plan of nodes")
    if weights is not None and kind != "ncnn":
        raise UsageError("a weights file applies to ncnn models")
    return load_model(model, weights)


def main(a: argparse.Namespace) -> int:
    import json

    from ..tools import profile as prof
    from ..tools.autoinputs import feeds_from_args
    from ..tools.files import write_text_atomic

    if a.warmup < 0:
        raise UsageError("--warmup must be >= 0")
    if a.trace is not None:
        output_file(a.trace, "--trace", (".json",))
    if a.output is not None:
        output_file(a.output, "--output", (".json", ".csv"))
    given = parse_inputs(a.input)
    m = load_for_profile(a.model, a.weights)
    feeds, notes = feeds_from_args(m, given, a)
    p = prof.profile(m, feeds, runs=a.runs, warmup=a.warmup)
    for note in notes:
        print(f"note: {note}")
    rows = prof.table_rows(p, a.top)
    print_table(f"{a.model}: nodes by median time", prof.COLUMNS, rows)
    print(prof.summary_line(p))
    if a.trace is not None:
        write_text_atomic(a.trace, json.dumps(prof.chrome_trace(p)))
        print(f"wrote a Chrome trace of {len(p.trace)} node events to {a.trace}")
    if a.output is not None:
        write_text_atomic(a.output, prof.export(p, str(a.output).lower().endswith(".csv")))
        print(f"wrote the per-node table to {a.output}")
    return 0
