"""stdops compare: every value of one run against another (stdops, onnxruntime, the ncnn wheel, a model's
conversion); the first node that disagrees."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import StdopsError
from ._base import UsageError, existing_file, nonnegative_float, output_file, parse_inputs, positive_int, print_table

HELP = "every intermediate value vs onnxruntime / the ncnn wheel / another run; exit 1 on a disagreement"
RULE = "a value agrees when max|ours - theirs| <= atol + rtol * max|theirs| (over the value's elements)"
RUNTIMES = ("stdops", "stdops-unfused", "onnxruntime", "ncnn")


def register(sub: Any) -> argparse.ArgumentParser:
    from ..tools.autoinputs import add_arguments

    p = sub.add_parser(
        "compare",
        help=HELP,
        description="Run the model twice, by default in stdops and in its peer runtime (onnxruntime for ONNX, "
        "the ncnn wheel for ncnn), compare every intermediate value by name and name the first node that "
        f"disagrees. {RULE}; 'rel err' is max|ours - theirs| / max|theirs|, one number per value. --against picks "
        "the other run: a runtime (onnxruntime, ncnn, stdops, stdops-unfused; a runtime of the other format "
        "runs the model's conversion), another model file (run by stdops), or RUNTIME:FILE; --by picks the "
        "runtime of the first run. Inputs not given are made up from the declared shapes and dtypes (--seed). "
        "Exit status: 0 all agree, 1 a value disagrees, 2 a usage or model error.",
    )
    p.add_argument("model", type=existing_file, help="model file: .onnx, .param / .param.bin (ncnn)")
    p.add_argument("weights", nargs="?", type=existing_file, help="ncnn .bin (default: beside the .param)")
    add_arguments(p)
    p.add_argument("--against", metavar="PEER", help="RUNTIME, FILE or RUNTIME:FILE (default: the model's peer)")
    p.add_argument("--by", choices=RUNTIMES, default="stdops", help="the runtime of the first run (default stdops)")
    p.add_argument("--atol", type=nonnegative_float, default=1e-4, help="absolute tolerance (default 1e-4)")
    p.add_argument(
        "--rtol", type=nonnegative_float, default=1e-4, help="tolerance relative to max|theirs| (default 1e-4)"
    )
    p.add_argument(
        "--wheel-defaults",
        action="store_true",
        help="ncnn: the wheel's default options (fp16 storage, Winograd) instead of exact fp32",
    )
    p.add_argument(
        "--first-divergence", action="store_true", help="stop at the first value outside tolerance (in run order)"
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (instead of the table)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE.json", help="write the report as JSON")
    p.add_argument("--show", type=positive_int, default=40, help="rows to show around the first disagreement")
    p.set_defaults(func=main)
    return p


def main(a: argparse.Namespace) -> int:
    import json
    import math

    from .. import compare as cmp
    from .. import model_kind
    from ..tools import comparison
    from ..tools.autoinputs import feeds_from_args
    from ..tools.files import write_text_atomic
    from .run import load_model

    kind = model_kind(a.model)
    if kind == "mdf":
        raise UsageError(f"{a.model}: compare works on ONNX and ncnn models")
    if a.weights is not None and kind != "ncnn":
        raise UsageError("a weights file applies to ncnn models")
    if a.output is not None:
        output_file(a.output, "--output", (".json",))
    weights = str(a.weights) if a.weights else None
    first_side = comparison.Side(a.by, str(a.model), weights)
    peer = a.against or ("onnxruntime" if kind == "onnx" else "ncnn")
    second = comparison.parse_side(peer, str(a.model), weights)
    if a.wheel_defaults and "ncnn" not in (first_side.runtime, second.runtime):
        raise UsageError("--wheel-defaults applies to ncnn models (a run in the ncnn wheel)")
    if (first_side.runtime, first_side.path) == (second.runtime, second.path):
        raise UsageError(f"--against {peer}: that is the same run as the first one")
    given = parse_inputs(a.input)
    model = load_model(a.model, a.weights)
    feeds, notes = feeds_from_args(model, given, a)
    made_up = [k for k in feeds if k not in given]
    default_pair = a.by == "stdops" and a.against in (None, "onnxruntime" if kind == "onnx" else "ncnn")
    if default_pair:
        peer_notes: list[str] = []
        if kind == "onnx":
            diffs = cmp.compare_onnx(str(a.model), feeds)
        else:
            diffs = cmp.compare_ncnn(str(a.model), weights, feeds, exact=not a.wheel_defaults, notes=peer_notes)
        stopped = False
        if a.first_divergence:
            first = cmp.first_disagreement(diffs, a.atol, a.rtol)
            if first is not None:
                diffs, stopped = diffs[: diffs.index(first) + 1], True
        report = comparison.Report(first_side, second, diffs, a.atol, a.rtol, peer_notes, stopped)
        peer_label = (
            "onnxruntime"
            if kind == "onnx"
            else "ncnn wheel" + (" (default options)" if a.wheel_defaults else " (exact fp32)")
        )
        title = f"stdops vs {peer_label}"
    else:
        report = comparison.compare(
            first_side, second, feeds, a.atol, a.rtol, exact=not a.wheel_defaults, first_divergence=a.first_divergence
        )
        title = f"{report.a.label()} vs {report.b.label()}"
    doc = report.to_json(feeds, made_up)
    if a.output is not None:
        write_text_atomic(a.output, json.dumps(doc, indent=1))
    if a.json:
        doc["notes"] = [*notes, *doc["notes"]]
        print(json.dumps(doc, indent=1))
        return 0 if report.first is None else 1
    for note in notes + report.notes:
        print(f"note: {note}")
    diffs, first = report.diffs, report.first
    start = 0 if first is None else max(0, diffs.index(first) - a.show // 2)
    shown = diffs[start : start + a.show]

    def rel(d: Any) -> str:
        return "" if d.note or math.isnan(d.rel_err) else f"{d.rel_err:.3g}"

    rows = [(d.node, d.op, d.name, d.shape, d.note or f"{d.max_abs:.3g}", rel(d)) for d in shown]
    print_table(
        f"{title}: {len(diffs)} values"
        + (f" (rows {start + 1}-{start + len(shown)})" if len(shown) < len(diffs) else ""),
        ("node", "op", "value", "shape", "max |diff|", "rel err"),
        rows,
        marks=[not d.ok(a.atol, a.rtol) for d in shown],
    )
    print(f"rule: {RULE}; atol {a.atol:g}, rtol {a.rtol:g}")
    failed = [d for d in diffs if d.peer_failed]
    if failed and len(failed) == len(diffs):
        raise StdopsError(f"{a.model}: the peer produced no value to compare ({failed[0].note})")
    if failed:
        print(f"the peer failed on {len(failed)} of {len(diffs)} values (reason in the table): not disagreements")
    if a.output is not None:
        print(f"wrote the report to {a.output}")
    if first is None:
        print(f"all {len(diffs)} values agree")
        return 0
    if report.stopped:
        print(f"stopped at the first value outside tolerance ({len(diffs)} values compared)")
    bad = sum(not d.ok(a.atol, a.rtol) for d in diffs)
    print(
        f"first disagreement: node {first.node!r} ({first.op}), value {first.name!r}: "
        f"{first.note or f'max |diff| {first.max_abs:.3g}, rel err {first.rel_err:.3g}'}; "
        f"{bad} of {len(diffs)} values outside tolerance"
    )
    return 1
