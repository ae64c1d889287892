"""stdops reduce: bisect a failing ONNX or ncnn model down to a small sub-model that still fails."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ._base import UsageError, existing_file, nonnegative_float, output_file, parse_inputs, positive_float

HELP = "bisect a model that disagrees with a peer (or raises, or fails --check) to a minimal failing cut"


def register(sub: Any) -> argparse.ArgumentParser:
    from ..tools.autoinputs import add_arguments
    from ..tools.runtimes import RUNTIMES

    p = sub.add_parser(
        "reduce",
        help=HELP,
        description="Bisect an ONNX or ncnn model that fails down to a small cut that still fails, written in "
        "the same format: an .onnx whose graph inputs are the cut's inputs, or a .param/.bin. The cut's inputs "
        "are frozen to the values a stdops run of the whole model gave them and saved beside it as "
        "OUT-STEM.NAME.npy. Failing means: against a peer (--against), stdops raises, the peer raises, or an "
        "output disagrees (max|ours - theirs| <= atol + rtol * max|theirs| agrees), the way the whole model "
        "fails; with --check CMD, the command exits non-zero. In CMD, {model} is the candidate's path "
        "(appended when absent), {weights} its ncnn .bin and {inputs} expands to -i NAME=FILE.npy for each "
        "input. Exit status: 0 reduced, 2 a usage or model error, or a model that does not fail.",
    )
    p.add_argument("model", type=existing_file, help="model file: .onnx, .param / .param.bin (ncnn)")
    p.add_argument("weights", nargs="?", type=existing_file, help="ncnn .bin (default: beside the .param)")
    p.add_argument("--against", choices=[r for r in RUNTIMES if r != "stdops"], help="the peer runtime")
    p.add_argument("--check", metavar="CMD", help="a command whose non-zero exit status means failing")
    add_arguments(p)
    p.add_argument("--atol", type=nonnegative_float, default=1e-4, help="absolute tolerance (default 1e-4)")
    p.add_argument("--rtol", type=nonnegative_float, default=1e-4, help="tolerance relative to max|theirs|")
    p.add_argument("-v", "--verbose", action="store_true", help="print each candidate as it is judged (stderr)")
    p.add_argument("--check-timeout", type=positive_float, default=300.0, help="seconds per check (default 300)")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="the reduced model: .onnx, or .param for ncnn (its .bin beside it); default MODEL-STEM.reduced.*",
    )
    p.set_defaults(func=main)
    return p


def _default_output(model: Path, kind: str) -> Path:
    name = model.name
    for suffix in (".param.bin", ".param", ".onnx"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
            break
    return Path(f"{name}.reduced" + (".onnx" if kind == "onnx" else ".param"))


def main(a: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from .. import model_kind
    from ..tools import cut as cutmod
    from ..tools.autoinputs import feeds_from_args
    from ..tools.reduce import Judge, reduce_model
    from ..tools.runtimes import FOR_KIND

    kind = model_kind(a.model)
    if kind == "mdf":
        raise UsageError(f"{a.model}: reduce cuts ONNX and ncnn models, not MDF")
    if a.weights is not None and kind != "ncnn":
        raise UsageError("a weights file applies to ncnn models")
    if (a.against is None) == (a.check is None):
        raise UsageError("give --against PEER or --check CMD (one of them)")
    if a.against is not None and a.against not in FOR_KIND[kind]:
        raise UsageError(f"--against {a.against} does not run {kind.upper()} models (use {', '.join(FOR_KIND[kind])})")
    if a.check is not None and not a.check.strip():
        raise UsageError("--check: the command is empty")
    out = a.output if a.output is not None else _default_output(a.model, kind)
    output_file(out, "--output", (".onnx",) if kind == "onnx" else (".param",))
    given = parse_inputs(a.input)
    source = cutmod.open_source(str(a.model), str(a.weights) if a.weights else None)
    model = source.model if isinstance(source, cutmod.OnnxSource) else source.net
    feeds, notes = feeds_from_args(model, given, a)
    judge = Judge(a.against, a.check, a.atol, a.rtol, a.check_timeout)
    steps: list[str] = []

    def log(line: str) -> None:
        steps.append(line)
        if a.verbose:
            print(line, file=sys.stderr, flush=True)

    result, work = reduce_model(source, feeds, judge, log=log)
    try:
        stem = out.name[: -len(source.suffix)]
        folder = out.parent if str(out.parent) else Path(".")
        # write next to the target first, then move every file into place: nothing is left half-written
        staging = Path(tempfile.mkdtemp(prefix=".stdops-reduce-", dir=folder))
        try:
            files = source.write(result.nodes, result.outputs, str(staging), stem)
            moves = {files["model"]: folder / Path(files["model"]).name}
            if files["weights"]:
                moves[files["weights"]] = folder / Path(files["weights"]).name
            inputs = {}
            for name, p in files["inputs"].items():
                moves[p] = folder / Path(p).name
                inputs[name] = folder / Path(p).name
            for src, dst in moves.items():
                shutil.move(src, dst)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        work.cleanup()
    names = [f"{source.nodes[k].name} ({source.nodes[k].op})" for k in result.nodes]
    for note in notes:
        print(f"note: {note}")
    if not a.verbose:
        print("\n".join(steps))
    print(
        f"reduced {len(source.nodes)} nodes to {len(result.nodes)}: {', '.join(names)}; "
        f"{result.evaluations} candidates in {result.seconds:.1f} s"
    )
    print(f"failure: {result.outcome.kind}" + (f" ({result.outcome.detail})" if result.outcome.detail else ""))
    print(f"wrote {out}" + (f" and {files['weights'] and Path(files['weights']).name}" if files["weights"] else ""))
    for name, p in inputs.items():
        print(f"  input {name!r}: {p}")
    rerun = " ".join(f"-i {name}={p}" for name, p in inputs.items())
    if a.against:
        print(f"rerun: stdops compare {out} {rerun} --against {a.against}")
    return 0
