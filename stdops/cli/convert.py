"""stdops convert: a model from one format into another (ncnn -> ONNX, ONNX <-> MDF, ONNX -> ncnn, ncnn <-> MDF
through ONNX), the direction picked by the two file types."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ._base import UsageError, existing_file, not_for, output_file, positive_int

HELP = "convert a model between ncnn, ONNX and MDF (the direction from the file types)"

_SUFFIXES = (".onnx", ".json", ".yaml", ".yml", ".param")

#: which source kinds each option applies to
_APPLIES = {
    "--weights": ("ncnn",),
    "--input-shape": ("ncnn", "mdf", "onnx"),
    "--graph": ("mdf",),
}


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "convert",
        help=HELP,
        description="Convert SRC into DST: ncnn (.param / .param.bin with its .bin) -> ONNX (.onnx), ONNX -> MDF "
        "(.json / .yaml), MDF -> ONNX, ONNX -> ncnn (.param, its .bin written beside it), ncnn <-> MDF through "
        "ONNX. Nothing is written unless the whole conversion succeeds.",
        epilog="ncnn shapes have no batch axis (C,H,W); the ONNX written adds a batch axis of 1. An ncnn model "
        "whose Input layers declare no shape needs --input-shape.",
    )
    p.add_argument("src", type=existing_file, metavar="SRC", help="model to convert")
    p.add_argument("dst", type=Path, nargs="?", metavar="DST", help="file to write (.onnx, .json, .yaml, .param)")
    p.add_argument("-o", "--output", type=Path, metavar="DST", help="the file to write (instead of DST)")
    p.add_argument("--weights", type=existing_file, metavar="FILE.bin", help="ncnn source: its .bin, if not beside it")
    p.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=D1,D2,...",
        help="shape of an input (repeatable): ncnn sources without the batch axis, MDF input ports without a "
        "shape, ONNX inputs with dynamic sizes when writing ncnn (with the batch axis)",
    )
    p.add_argument("--opset", type=positive_int, help="ONNX opset to write (default 20; MDF sources: the model's)")
    p.add_argument("--graph", metavar="ID", help="MDF source: the graph to convert (default: the only one)")
    p.set_defaults(func=main)
    return p


def parse_shapes(items: list[str]) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            shape = ()
        if not sep or not name or not shape or min(shape) < 1:
            raise UsageError(f"--input-shape {item!r}: expected NAME=D1,D2,... with sizes >= 1")
        if name in shapes:
            raise UsageError(f"--input-shape: {name!r} is given twice")
        shapes[name] = shape
    return shapes


def main(a: argparse.Namespace) -> int:
    from ..convert import kind_of

    if a.dst is not None and a.output is not None and a.dst != a.output:
        raise UsageError(f"give the destination once: DST {a.dst} and --output {a.output} differ")
    dst = a.output if a.output is not None else a.dst
    if dst is None:
        raise UsageError("stdops convert: the destination is missing (stdops convert SRC DST)")
    src_kind = kind_of(a.src)
    if src_kind is None:
        raise UsageError(f"{a.src}: unknown model type (expected .param, .param.bin, .onnx, .json, .yaml)")
    output_file(dst, "DST", _SUFFIXES)
    dst_kind = kind_of(dst)
    if dst_kind == src_kind:
        raise UsageError(f"{a.src} and {dst} are both {src_kind.upper()}: nothing to convert")
    if str(dst).lower().endswith(".param.bin"):
        raise UsageError(f"DST {dst}: write a text .param (its .bin goes beside it)")
    not_for(src_kind, {"--weights": a.weights, "--input-shape": a.input_shape, "--graph": a.graph}, _APPLIES)
    if a.input_shape and src_kind == "onnx" and dst_kind != "ncnn":
        raise UsageError("--input-shape applies to ONNX sources written as ncnn (static shapes), not to ONNX -> MDF")
    if a.opset is not None and dst_kind != "onnx" and src_kind == "onnx":
        raise UsageError("--opset applies when ONNX is written (or an ncnn / MDF model passes through ONNX)")
    shapes = parse_shapes(a.input_shape)
    from ..convert import convert

    written = convert(a.src, dst, weights=a.weights, input_shapes=shapes or None, opset=a.opset, graph=a.graph)
    print(f"{a.src} ({src_kind}) -> " + ", ".join(written))
    return 0
