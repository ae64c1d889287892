"""stdops compare: every value against the peer runtime; the first node that disagrees."""

from __future__ import annotations

import argparse
from typing import Any

from ._base import UsageError, existing_file, nonnegative_float, parse_inputs, positive_int, print_table

HELP = "every intermediate value vs onnxruntime / the ncnn wheel; exit 1 on a disagreement"
RULE = "a value agrees when max|ours - theirs| <= atol + rtol * max|theirs| (over the value's elements)"


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "compare",
        help=HELP,
        description="Run the model in stdops and in its peer runtime (onnxruntime for ONNX, the ncnn wheel for "
        f"ncnn), compare every intermediate value and name the first node that disagrees. {RULE}. "
        "Exit status: 0 all agree, 1 a value disagrees, 2 a usage or model error.",
    )
    p.add_argument("model", type=existing_file, help="model file: .onnx, .param / .param.bin (ncnn)")
    p.add_argument("weights", nargs="?", type=existing_file, help="ncnn .bin (default: beside the .param)")
    p.add_argument("-i", "--input", action="append", default=[], metavar="NAME=FILE.npy", help="an input (repeatable)")
    p.add_argument("--atol", type=nonnegative_float, default=1e-4, help="absolute tolerance (default 1e-4)")
    p.add_argument(
        "--rtol", type=nonnegative_float, default=1e-4, help="tolerance relative to max|theirs| (default 1e-4)"
    )
    p.add_argument(
        "--wheel-defaults",
        action="store_true",
        help="ncnn: the wheel's default options (fp16 storage, Winograd) instead of exact fp32",
    )
    p.add_argument("--show", type=positive_int, default=40, help="rows to show around the first disagreement")
    p.set_defaults(func=main)
    return p


def main(a: argparse.Namespace) -> int:
    from .. import compare as cmp
    from .. import model_kind

    kind = model_kind(a.model)
    if kind == "mdf":
        raise UsageError(f"{a.model}: compare works on ONNX and ncnn models")
    if a.weights is not None and kind != "ncnn":
        raise UsageError("a weights file applies to ncnn models")
    if a.wheel_defaults and kind != "ncnn":
        raise UsageError("--wheel-defaults applies to ncnn models")
    feeds = parse_inputs(a.input)
    if kind == "onnx":
        diffs = cmp.compare_onnx(str(a.model), feeds)
        peer = "onnxruntime"
    else:
        diffs = cmp.compare_ncnn(str(a.model), str(a.weights) if a.weights else None, feeds, exact=not a.wheel_defaults)
        peer = "ncnn wheel" + (" (default options)" if a.wheel_defaults else " (exact fp32)")
    first = cmp.first_disagreement(diffs, a.atol, a.rtol)
    start = 0 if first is None else max(0, diffs.index(first) - a.show // 2)
    shown = diffs[start : start + a.show]
    rows = [
        (d.node, d.op, d.name, d.shape, d.note or f"{d.max_abs:.3g}", "" if d.note else f"{d.max_rel:.3g}")
        for d in shown
    ]
    print_table(
        f"stdops vs {peer}: {len(diffs)} values"
        + (f" (rows {start + 1}-{start + len(shown)})" if len(shown) < len(diffs) else ""),
        ("node", "op", "value", "shape", "max |diff|", "max rel"),
        rows,
        marks=[not d.ok(a.atol, a.rtol) for d in shown],
    )
    print(f"rule: {RULE}; atol {a.atol:g}, rtol {a.rtol:g}")
    if first is None:
        print(f"all {len(diffs)} values agree")
        return 0
    bad = sum(not d.ok(a.atol, a.rtol) for d in diffs)
    print(
        f"first disagreement: node {first.node!r} ({first.op}), value {first.name!r}: "
        f"{first.note or f'max |diff| {first.max_abs:.3g}'}; {bad} of {len(diffs)} values outside tolerance"
    )
    return 1
