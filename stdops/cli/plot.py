"""stdops plot: a picture of any model's graph (--graph: ONNX, ncnn, MDF), or an MDF model's output ports
over time."""

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
    parse_inputs,
    positive_float,
    require_module,
)

HELP = "draw a model's graph (--graph: ONNX, ncnn, MDF as .svg/.html/.png/.pdf), or an MDF model over time"
GRAPH_SUFFIXES = (".svg", ".html", ".htm", ".png", ".pdf")

_APPLIES = {
    "--duration": ("mdf",),
    "--dt": ("mdf",),
    "--input": ("ncnn",),
    "--shape": ("ncnn",),
}


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "plot",
        help=HELP,
        description="--graph: draw the model's graph with a layered layout: a box per node (layer) with its "
        "type, name, weights, attributes and output shapes; for MDF a record per node with its input ports, "
        "parameters, functions and output ports, edges from port to port. Above "
        "120 nodes, runs of identical blocks are folded into one box (--fold). .html pans and zooms in a browser "
        "(self-contained: nothing is fetched); .png and .pdf need matplotlib (pip install 'stdops[plots]'). "
        "Without --graph: an MDF model's output ports over time (matplotlib).",
    )
    p.add_argument(
        "model", type=existing_file, help="model file: .onnx, .param / .param.bin (ncnn), .json / .yaml (MDF)"
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("plot.png"),
        metavar="FILE",
        help="image to write (--graph: .svg, .html, .png, .pdf; over time: .png, .svg, .pdf; default plot.png)",
    )
    p.add_argument("--graph", action="store_true", help="draw the graph (nodes, edges, shapes) instead")
    add_lenient(p)
    p.add_argument(
        "--fold",
        choices=("auto", "always", "never"),
        default="auto",
        help="fold runs of identical blocks into one box (auto: above 120 nodes)",
    )
    p.add_argument(
        "-i",
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="ncnn: an input to run the net on, for the blob shapes (default: made from the declared shapes)",
    )
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D1,D2,...",
        help="ncnn: an input's shape, for the blob shapes",
    )
    p.add_argument("--duration", type=nonnegative_float, help="MDF over time: simulated time to run")
    p.add_argument("--dt", type=positive_float, help="MDF over time: time step (> 0)")
    p.set_defaults(func=main)
    return p


def main(a: argparse.Namespace) -> int:
    from .. import model_kind

    kind = model_kind(a.model)
    if a.lenient and kind != "mdf":
        raise UsageError(f"--lenient applies to MDF models, not {kind.upper()}")
    if a.graph:
        if a.duration is not None or a.dt is not None:
            raise UsageError("--graph draws the graph: --duration and --dt do not apply")
        not_for(kind, {"--input": a.input, "--shape": a.shape}, _APPLIES)
        output_file(a.output, "--output", GRAPH_SUFFIXES)
        if str(a.output).lower().endswith((".png", ".pdf")):
            require_module("matplotlib", "a .png or .pdf picture", "plots")
        from ..tools.autoinputs import parse_shapes
        from ..viz import draw

        counts = draw(
            str(a.model),
            str(a.output),
            fold=a.fold,
            feeds=parse_inputs(a.input) or None,
            shapes=parse_shapes(a.shape),
            lenient=a.lenient,
        )
        folded = f"; {counts['folds']} run(s) of identical blocks folded" if counts["folds"] else ""
        print(f"drew {counts['nodes']} nodes as {counts['boxes']} boxes{folded}: {a.output}")
        return 0
    if kind != "mdf":
        raise UsageError(
            f"{a.model}: without --graph, plot draws an MDF model's outputs over time; add --graph for its graph"
        )
    if a.fold != "auto":
        raise UsageError("--fold applies to --graph")
    not_for(kind, {"--input": a.input, "--shape": a.shape}, _APPLIES)
    output_file(a.output, "--output", (".png", ".svg", ".pdf"))
    require_module("matplotlib", "plot", "plots")
    from ..mdf import cli as mdf_cli

    mdf_cli.plot(a.model, a.duration, a.dt, a.output, lenient=a.lenient)
    return 0
