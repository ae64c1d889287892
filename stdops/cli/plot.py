"""stdops plot: an MDF model's output ports over time, or its graph."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._base import UsageError, existing_file, nonnegative_float, output_file, positive_float, require_module

HELP = "plot an MDF model's output ports over time, or (--graph) its nodes and edges"


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("plot", help=HELP, description=HELP + ". Needs matplotlib (pip install 'stdops[plots]').")
    p.add_argument("model", type=existing_file, help="MDF model file (.json, .yaml)")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("plot.png"),
        metavar="FILE",
        help="image to write (.png, .svg, .pdf; default plot.png)",
    )
    p.add_argument("--duration", type=nonnegative_float, help="simulated time to run")
    p.add_argument("--dt", type=positive_float, help="time step (> 0)")
    p.add_argument("--graph", action="store_true", help="draw the nodes and edges instead")
    p.set_defaults(func=main)
    return p


def main(a: argparse.Namespace) -> int:
    from .. import model_kind

    if model_kind(a.model) != "mdf":
        raise UsageError(f"{a.model}: plot draws MDF models (.json, .yaml)")
    if a.graph and (a.duration is not None or a.dt is not None):
        raise UsageError("--graph draws the graph: --duration and --dt do not apply")
    output_file(a.output, "--output", (".png", ".svg", ".pdf"))
    require_module("matplotlib", "plot", "plots")
    from ..mdf import cli as mdf_cli

    mdf_cli.plot(a.model, a.duration, a.dt, a.output, a.graph)
    return 0
