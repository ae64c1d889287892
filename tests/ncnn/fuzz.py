"""The param-space fuzzer against the official wheel, from the command line (``make fuzz-ncnn SEED=n``):

    python -m tests.ncnn.fuzz --seed 7 --cases 200 [--layers Convolution,Crop] [--show 3]

Prints one line per layer and the count line; exits 1 on any failure (or a layer short of its cases)."""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from stdops.ncnn.spec import LAYERS

from . import wheel
from .fuzz_engine import fuzz_layer
from .fuzz_spaces import SPACES


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0, help="the run's seed (a nightly run gives a new one)")
    ap.add_argument("--cases", type=int, default=200, help="cases compared with the wheel per layer")
    ap.add_argument("--layers", default="", help="comma-separated layer types (default: every layer)")
    ap.add_argument("--show", type=int, default=3, help="failures shown per layer")
    a = ap.parse_args(argv)
    names = [n for n in a.layers.split(",") if n] or sorted(SPACES)
    wheel.QUIET = True
    warnings.simplefilter("ignore", RuntimeWarning)  # overflow / 0 / 0 in cases that produce inf / NaN on purpose
    t0 = time.time()
    results = []
    for name in names:
        r = fuzz_layer(name, SPACES[name], a.cases, a.seed)
        results.append(r)
        status = "ok" if not r.failures and r.compared >= a.cases else "FAILED"
        print(
            f"{name:26s} {r.compared:5d} compared {r.redrawn:5d} redrawn {len(r.failures):4d} failed  {status}",
            flush=True,
        )
        unseen = sorted({p.id for p in LAYERS[name].params} - r.ids_seen)
        if unseen and a.cases >= 100:
            print(f"    param ids never set: {unseen}")
        for msg in r.failures[: a.show]:
            print("    " + msg.replace("\n", "\n    ")[:1500])
    failed = sum(len(r.failures) for r in results)
    short = [r.type_name for r in results if r.compared < a.cases]
    print(
        f"ncnn param-space fuzz (seed {a.seed}): {len(results)} layers, >= {min(r.compared for r in results)} cases "
        f"each ({a.cases} asked), {sum(r.compared for r in results)} cases compared with the wheel, "
        f"{sum(r.redrawn for r in results)} redrawn, {failed} failed"
        + (f"; short of cases: {', '.join(short)}" if short else "")
        + f" ({time.time() - t0:.0f}s)"
    )
    return 1 if failed or short else 0


if __name__ == "__main__":
    sys.exit(main())
