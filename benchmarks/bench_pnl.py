"""PsyNeuLink as a speed anchor: the PsyNeuLink corpus (tests/mdf/corpus/psyneulink, made by
scripts/make_mdf_corpus.py) run by PsyNeuLink itself, in its Python mode and, where it compiles, its LLVM mode
(ExecutionMode.LLVMRun), and by stdops from the exported MDF file, per model, in the same run.

    make bench                                  # includes this: DEFAULT_MODELS
    python benchmarks/bench_pnl.py --models all # every composition of the corpus (LLVM compiles take a while)
    python benchmarks/bench_pnl.py --models stroop_single_pathway,cond_threshold --rounds 5

A round times, per model, one Composition.run over the model's trials in each PsyNeuLink mode (in .venv-pnl,
one subprocess serving every request: this file with --serve) and then stdops' evaluate per trial on a fresh
Simulation (load and construction not timed); rounds alternate so both sides see the same machine load; the
median per side is reported. The PsyNeuLink composition is built once per model (and compiled once for LLVM,
a warm-up run excluded from the timing); its state carries over between its timed runs, which changes
nothing in the work per trial. Ratios: PsyNeuLink time / stdops time (how many times faster stdops is).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(ROOT, "tests", "mdf", "corpus", "psyneulink")
SCRIPTS = os.path.join(ROOT, "scripts")


#: one or two of each kind (chains, integrators, conditions, nesting, Stroop): PsyNeuLink's LLVM mode compiles
#: each composition first, several seconds apiece
DEFAULT_MODELS = [
    "linear_chain",
    "mixed_chain_vectors",
    "simple_integrator",
    "leaky_competing_integrator",
    "fitzhugh_nagumo_many_trials",
    "drift_diffusion_integrator_to_threshold",
    "integrators_in_series",
    "cond_every_n_calls",
    "cond_threshold",
    "cond_any_of_calls",
    "nested_composition",
    "stroop_single_pathway",
    "stroop_integrator_mode",
]

# ---------------------------------------------------------------------------------------------------------
# the PsyNeuLink side (inside .venv-pnl)


def serve() -> int:
    """Answer {"model", "repeat"} lines with {"python_s": [...], "llvm_s": [...] or "llvm_error"}."""
    out = sys.stdout
    sys.stdout = sys.stderr  # PsyNeuLink prints; keep the protocol channel clean
    warnings.simplefilter("ignore")
    import psyneulink as pnl

    sys.path.insert(0, SCRIPTS)
    import mdf_corpus_pnl as corpus

    built: dict = {}
    out.write(json.dumps({"hello": {"psyneulink": pnl.__version__}}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("quit"):
            break
        name, repeat = req["model"], int(req.get("repeat", 1))
        res: dict = {"model": name}
        try:
            if name not in built:
                for reg in pnl.primary_registries:
                    pnl.clear_registry(reg)
                built[name] = {"python": corpus.BUILDERS[name](), "llvm": None}
                try:
                    comp, inputs = corpus.BUILDERS[name]()
                    comp.run(inputs=inputs, execution_mode=pnl.ExecutionMode.LLVMRun)  # compiles
                    built[name]["llvm"] = (comp, inputs)
                except Exception as e:  # noqa: BLE001 - LLVM mode does not compile every composition
                    built[name]["llvm_error"] = f"{type(e).__name__}: {str(e)[:120]}"
            comp, inputs = built[name]["python"]
            res["python_s"] = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                comp.run(inputs=inputs)
                res["python_s"].append(time.perf_counter() - t0)
            if built[name]["llvm"] is not None:
                comp, inputs = built[name]["llvm"]
                res["llvm_s"] = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    comp.run(inputs=inputs, execution_mode=pnl.ExecutionMode.LLVMRun)
                    res["llvm_s"].append(time.perf_counter() - t0)
            else:
                res["llvm_error"] = built[name].get("llvm_error", "?")
        except Exception as e:  # noqa: BLE001 - report and go on
            res["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        out.write(json.dumps(res) + "\n")
        out.flush()
    return 0


# ---------------------------------------------------------------------------------------------------------
# the stdops side


def stdops_run_time(path: str, expected: dict) -> float:
    import numpy as np

    import stdops.mdf as mdf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = mdf.Simulation(mdf.load(path), seed=0)
        feeds = [{k: np.asarray(v, dtype=np.float64) for k, v in f.items()} for f in expected["inputs"]]
        t0 = time.perf_counter()
        for f in feeds:
            sim.evaluate(inputs=f)
        return time.perf_counter() - t0


def _fmt_ms(x):
    return "-" if x is None else f"{x * 1e3:.3f}"


def _fmt_ratio(x):
    return "-" if x is None else f"{x:.1f}x"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--models", default="default", help="comma list of composition names, 'default' (DEFAULT_MODELS) or 'all'"
    )
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per model")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help="also write the measurements to this JSON file")
    args = ap.parse_args(argv)
    if args.serve:
        return serve()

    names = sorted(f[: -len(".json")] for f in os.listdir(CORPUS) if f.endswith(".json") and ".expected" not in f)
    if args.models != "all":
        want = DEFAULT_MODELS if args.models == "default" else [m.strip() for m in args.models.split(",") if m.strip()]
        names = [n for n in want if n in names]
    sys.path.insert(0, SCRIPTS)
    from make_mdf_corpus import VENV_PNL, pnl_python

    py = os.path.join(VENV_PNL, "bin", "python")
    if not os.path.exists(py):
        try:
            py = pnl_python()
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"PsyNeuLink venv unavailable ({e}): nothing to compare", file=sys.stderr)
            return 0
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env.pop("PYTHONPATH", None)

    def start():
        p = subprocess.Popen(
            [py, os.path.abspath(__file__), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
            env=env,
        )
        return p, json.loads(p.stdout.readline())["hello"]

    def stop(p):
        try:
            p.stdin.write(json.dumps({"quit": True}) + "\n")
            p.stdin.close()
            p.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            p.kill()
            p.wait()

    proc, hello = start()
    import numpy as np

    import stdops

    print(
        f"PsyNeuLink {hello['psyneulink']} (Python mode, LLVM mode where it compiles) vs stdops "
        f"{getattr(stdops, '__version__', '?')} (numpy {np.__version__}) on the exported MDF; "
        f"{args.rounds} alternating rounds, medians; one run = every trial of the model"
    )
    header = (
        f"{'composition':<40}{'trials':>7}{'stdops ms':>11}{'PNL py ms':>11}{'PNL llvm ms':>13}"
        f"{'py/stdops':>11}{'llvm/stdops':>13}"
    )
    print(header)
    print("-" * len(header))
    rows = []
    try:
        for name in names:
            path = os.path.join(CORPUS, name + ".json")
            with open(os.path.join(CORPUS, name + ".expected.json")) as f:
                expected = json.load(f)
            ours, py_s, llvm_s = [], [], []
            note = ""
            for _ in range(args.rounds):
                proc.stdin.write(json.dumps({"model": name, "repeat": 1}) + "\n")
                proc.stdin.flush()
                res = json.loads(proc.stdout.readline())
                if "error" in res:
                    note = res["error"]
                    break
                py_s += res.get("python_s", [])
                llvm_s += res.get("llvm_s", [])
                note = res.get("llvm_error", "")
                ours.append(stdops_run_time(path, expected))
            t_ours = statistics.median(ours) if ours else None
            t_py = statistics.median(py_s) if py_s else None
            t_llvm = statistics.median(llvm_s) if llvm_s else None
            r_py = t_py / t_ours if (t_py and t_ours) else None
            r_llvm = t_llvm / t_ours if (t_llvm and t_ours) else None
            rows.append(
                {
                    "model": name,
                    "stdops_s": t_ours,
                    "python_s": t_py,
                    "llvm_s": t_llvm,
                    "note": note,
                    "ratio_python": r_py,
                    "ratio_llvm": r_llvm,
                }
            )
            print(
                f"{name:<40}{expected['num_trials']:>7}{_fmt_ms(t_ours):>11}{_fmt_ms(t_py):>11}"
                f"{_fmt_ms(t_llvm):>13}{_fmt_ratio(r_py):>11}{_fmt_ratio(r_llvm):>13}"
            )
            if note and t_llvm is None:
                print(f"    LLVM mode: {note}")
            sys.stdout.flush()
            if note:  # a failed LLVM compile can leave PsyNeuLink's LLVM state unusable: a fresh server
                stop(proc)
                proc, _ = start()
    finally:
        stop(proc)
    for key, label in (("ratio_python", "Python mode"), ("ratio_llvm", "LLVM mode")):
        rs = [r[key] for r in rows if r[key]]
        if rs:
            print(
                f"PsyNeuLink {label} / stdops over {len(rs)} compositions: median {statistics.median(rs):.1f}x, "
                f"min {min(rs):.1f}x, max {max(rs):.1f}x"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
