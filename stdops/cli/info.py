"""stdops info: what a model declares (inputs, outputs, operators, parameters), without running it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._base import UsageError, add_lenient, existing_file, print_table

HELP = "inputs, outputs, operators (layers) and parameters of a model"


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "info",
        help=HELP,
        description="Inputs, outputs, operators (layers) and parameters of a model; for MDF: graphs, nodes, "
        "functions and conditions. Reads the file only: nothing is compiled or run.",
    )
    p.add_argument(
        "model", type=existing_file, help="model file: .onnx, .param / .param.bin (ncnn), .json / .yaml (MDF)"
    )
    p.add_argument("weights", nargs="?", type=existing_file, help="ncnn .bin (default: beside the .param)")
    add_lenient(p)
    p.set_defaults(func=main)
    return p


def _histogram(title: str, hist: dict) -> None:
    rows = [(op, n) for op, n in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))]
    print_table(title, ("type", "count"), rows)


def main(a: argparse.Namespace) -> int:
    from .. import model_kind

    kind = model_kind(a.model)
    if a.lenient and kind != "mdf":
        raise UsageError(f"--lenient applies to MDF models, not {kind.upper()}")
    if a.weights is not None and kind != "ncnn":
        raise UsageError(f"a weights file applies to ncnn models, not {kind.upper()}")
    if kind == "mdf":
        from ..mdf import cli as mdf_cli

        mdf_cli.info(a.model, lenient=a.lenient)
    elif kind == "ncnn":
        from ..ncnn import Net

        _info_ncnn(a.model, Net.load(a.model, a.weights))
    else:
        from ..onnx.summary import summarize

        _info_onnx(summarize(a.model))
    return 0


def _info_onnx(s: Any) -> None:
    print(s.path + (f" (produced by {s.producer})" if s.producer else ""))
    print("opsets: " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in s.opsets.items()) + f"; IR version {s.ir_version}")
    for title, vals in (("inputs", s.inputs), ("outputs", s.outputs)):
        print(f"{title}:")
        for v in vals:
            print(f"  {v}")
    print(
        f"nodes: {s.node_count:,}; parameters: {s.parameter_count:,}"
        + (f"; local functions: {s.function_count}" if s.function_count else "")
    )
    _histogram("operators", s.op_histogram)


def _info_ncnn(model: Path, net: Any) -> None:
    print(
        f"{model} ({'binary' if net.param_file.binary else 'text'} .param"
        f"{', weights ' + str(net.bin_path) if net.bin_path else ', no .bin'})"
    )
    print(f"layers: {len(net.layers)}; blobs: {len(net.blob_names)}")
    print("inputs: " + ", ".join(net.input_names))
    print("outputs: " + ", ".join(net.output_names))
    hist: dict = {}
    for layer in net.layers:
        hist[layer.type] = hist.get(layer.type, 0) + 1
    _histogram("layers", hist)
    if net.weight_storage:
        print("weight bytes by storage type: " + ", ".join(f"{k} {v:,}" for k, v in sorted(net.weight_storage.items())))
