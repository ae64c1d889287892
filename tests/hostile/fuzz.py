"""`make fuzz SECONDS=600 SEED=n`: the hostile-file suite's generators for a chosen time.

    python -m tests.hostile.fuzz --seconds 600 --seed 0

Batches of mutated files across the six formats (ONNX, ncnn .param text / .param.bin / .bin, MDF JSON /
YAML), each batch seeded from (seed, batch number) so any failure reproduces, run through the forked
harness (per-case alarm, watchdog, RLIMIT_AS; stdops.limits set to harness.CHILD_LIMITS in the children).
Prints the number of files per format, the outcomes, the crashes, the hangs, the exceptions that are not a
StdopsError naming the file, and the largest peak resident memory of a child; exits 1 if anything
misbehaved. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .harness import CHILD_LIMITS, Case, run_cases
from .mutate import (
    _onnx_ops,
    mdf_cases,
    mdf_seeds,
    ncnn_cases,
    onnx_cases,
    random_layer_case,
    random_node_case,
)

FORMATS = ("onnx", "param", "param.bin", "bin", "json", "yaml")
#: the claim is for inputs under 1 MB: a mutation that grows a file past it is left out (and counted)
MAX_INPUT = 1_000_000


def file_format(c: Case) -> str:
    """Which of the six formats a case damages."""
    if c.kind == "onnx":
        return "onnx"
    if c.kind == "mdf":
        return "yaml" if c.main.endswith(".yaml") else "json"
    if " bin " in f" {c.label} ":  # ncnn_cases labels a damaged weights file "<seed> <main> bin <damage>"
        return "bin"
    return "param.bin" if c.main.endswith(".param.bin") else "param"


def batch(rng: random.Random, k: int, ops: list[str], mdf_seed_docs) -> list[Case]:
    """About 300 cases, all six formats (MDF weighted up: it has two formats and the most code to reach)."""
    cases: list[Case] = []
    cases += onnx_cases(rng, n_bytes=25, n_proto=25)
    cases += [random_node_case(rng, 100_000 * k + j, ops) for j in range(30)]
    cases += ncnn_cases(rng, n_text=30, n_binary=30, n_bin=30)
    cases += [random_layer_case(rng, 100_000 * k + j) for j in range(30)]
    cases += mdf_cases(rng, 100, mdf_seed_docs)
    rng.shuffle(cases)
    return cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="hostile-file fuzzing for a chosen time")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    ops, docs = _onnx_ops(), mdf_seeds()
    deadline = time.monotonic() + args.seconds
    t0 = time.monotonic()
    per_format = dict.fromkeys(FORMATS, 0)
    tally: dict[str, int] = {}
    stats: dict = {}
    failures: list[tuple[int, Case, str]] = []
    largest = skipped = 0
    k = 0
    print(f"fuzz: seed {args.seed}, {args.seconds:.0f} s, child limits {CHILD_LIMITS}", flush=True)
    while time.monotonic() < deadline:
        rng = random.Random(f"{args.seed}/{k}")
        cases = batch(rng, k, ops, docs)
        big = [c for c in cases if max(len(d) for d in c.files.values()) >= MAX_INPUT]
        skipped += len(big)
        cases = [c for c in cases if c not in big]
        root = Path(tempfile.mkdtemp(prefix="stdops-fuzz-"))
        try:
            for c, f in run_cases(cases, root, tally, stats):
                failures.append((k, c, f))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        for c in cases:
            per_format[file_format(c)] += 1
            largest = max(largest, max(len(d) for d in c.files.values()))
        k += 1
        n = sum(per_format.values())
        print(
            f"  batch {k}: {n} files, {len(failures)} misbehaved, {n / (time.monotonic() - t0):.0f} files/s", flush=True
        )
    n = sum(per_format.values())
    kinds = {
        "crash": 0,
        "hang": 0,
        "giant allocation": 0,
        "not a StdopsError": 0,
        "does not name the file": 0,
        "file modified": 0,
    }
    for _, _, f in failures:
        if f.startswith("crash"):
            kinds["crash"] += 1
        elif f.startswith("hang"):
            kinds["hang"] += 1
        elif f.startswith("giant allocation"):
            kinds["giant allocation"] += 1
        elif "does not name the file" in f:
            kinds["does not name the file"] += 1
        elif f.endswith("was modified"):
            kinds["file modified"] += 1
        else:
            kinds["not a StdopsError"] += 1
    print(
        f"\nfiles: {n} in {time.monotonic() - t0:.0f} s ({k} batches; largest input {largest} bytes, "
        f"{skipped} generated files of 1 MB or more left out)"
    )
    print("per format: " + ", ".join(f"{f} {per_format[f]}" for f in FORMATS))
    print("outcomes: " + ", ".join(f"{o} {c}" for o, c in sorted(tally.items(), key=lambda kv: -kv[1])))
    print(
        f"crashes: {kinds['crash']}, hangs: {kinds['hang']}, non-StdopsError exceptions: "
        f"{kinds['not a StdopsError']}, giant allocations: {kinds['giant allocation']}, errors not naming "
        f"the file: {kinds['does not name the file']}, files modified: {kinds['file modified']}"
    )
    print(f"peak memory of a child: {stats.get('peak_rss_mb', 0):.0f} MB ({stats.get('children', 0)} children)")
    for b, c, f in failures[:40]:
        print(f"  [seed {args.seed} batch {b}] [{c.label[:200]}] {f[:300]}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
