"""MDF: stdops vs the reference engine (modeci-mdf 0.4.15), measured in the same run.

    make bench                                          # includes this
    python benchmarks/bench_mdf.py                      # the default models
    python benchmarks/bench_mdf.py --models 'NeuroML/PyNN/*' --steps 100 --repeat 5
    python benchmarks/bench_mdf.py --models all         # every model the reference ran (status ok)
    python benchmarks/bench_mdf.py --no-reference       # stdops only

Each model is run with the protocol of its expected file (../shared/conformance/mdf/expected/<model>.json
-> protocol: one evaluate, or evaluate() at t=0 then evaluate(time_increment=dt) ...), truncated to
--steps evaluations, on a fresh engine per run (load and engine construction not timed), by both
engines with the same driver loop (benchmarks/mdf_reference_runner.py: plan/drive/measure). Per model it
prints the evaluations timed per run (of the full protocol's), the median milliseconds per evaluation
(per time step) of stdops and of the reference, the ratio reference/stdops (how many times faster
stdops is), the largest absolute difference between the two engines' output-port values after the
run, and the same against the reference's recorded values at that step (the expected file).

modeci-mdf and its dependencies never enter the project venv: the reference runs in its own venv
.venv-mdf-ref, created on first use from benchmarks/requirements-mdf-ref.txt (and re-installed when that
file changes), as one subprocess that serves every model of the run. The goal of the MDF issue is
>= 100x per time step on NeuroML/FN.mdf.* and NeuroML/PyNN/*: the last column says where it is met.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import mdf_reference_runner as R  # noqa: E402

REF_VENV = os.path.join(ROOT, ".venv-mdf-ref")
REF_REQS = os.path.join(HERE, "requirements-mdf-ref.txt")
REF_RUNNER = os.path.join(HERE, "mdf_reference_runner.py")

DEFAULT_MODELS = [
    "MDF/Simple.json",
    "MDF/States.json",
    "NeuroML/FN.mdf.json",
    "NeuroML/IzhikevichTest.mdf.json",
    "NeuroML/PyNN/*.yaml",
    "ONNX/ab.json",
    "ONNX/abcd.json",
    "ACT-R/count.json",
]
GOAL_MODELS = ["NeuroML/FN.mdf.*", "NeuroML/PyNN/*"]
GOAL_RATIO = 100.0
NONDETERMINISTIC = {"NeuroML/ABCD.mdf.json", "NeuroML/ABCD.mdf.yaml"}  # two edges into one port


# ---------------------------------------------------------------------------------------------------
# model selection


def ok_models(conf: str) -> list[str]:
    """Every model whose expected file says the reference ran it (status ok)."""
    root = os.path.join(conf, "expected")
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".json"):
                continue
            rel = os.path.relpath(os.path.join(d, f), root)[: -len(".json")].replace(os.sep, "/")
            try:
                with open(os.path.join(d, f)) as fh:
                    if json.load(fh).get("status") == "ok":
                        out.append(rel)
            except (OSError, ValueError):
                pass
    return sorted(out)


def select_models(spec: str, conf: str) -> list[str]:
    ok = ok_models(conf)
    out: list[str] = []
    for item in [s.strip() for s in spec.split(",") if s.strip()]:
        if item == "default":
            out += select_models(",".join(DEFAULT_MODELS), conf)
        elif item == "all":
            out += [m for m in ok if m not in NONDETERMINISTIC]
        elif any(c in item for c in "*?["):
            out += [m for m in ok if fnmatch.fnmatchcase(m, item)]
        else:
            out.append(item)  # named explicitly: run it even if the reference failed on it
    seen: set = set()
    return [m for m in out if not (m in seen or seen.add(m))]


def is_goal_model(model: str) -> bool:
    return any(fnmatch.fnmatchcase(model, g) for g in GOAL_MODELS)


# ---------------------------------------------------------------------------------------------------
# stdops side


class StdopsSim:
    """stdops.mdf.Simulation behind the interface mdf_reference_runner.drive uses."""

    def __init__(self, path: str):
        import stdops.mdf

        self.sim = stdops.mdf.Simulation(stdops.mdf.load(path), seed=0)

    def evaluate(self, dt: float | None, inputs: dict | None) -> None:
        self.sim.evaluate(time_increment=dt, inputs=inputs)

    def output(self, port: str) -> Any:
        return self.sim.output(port)

    def outputs(self) -> dict:
        return self.sim.outputs


def run_stdops(model: str, max_steps: int, repeat: int, conf: str) -> dict:
    path = R.model_path(model, conf)
    protocol = R.expected_record(model, conf)["protocol"]
    inputs = R.random_inputs(path) if protocol.get("random_inputs") else None
    t0 = time.perf_counter()
    StdopsSim(path)
    load_s = time.perf_counter() - t0
    res = R.measure(lambda: StdopsSim(path), protocol, max_steps, repeat, inputs)
    res.update(model=model, status="ok", load_init_s=load_s, protocol=protocol)
    return res


# ---------------------------------------------------------------------------------------------------
# the reference: its venv and its server subprocess


def _reqs_hash() -> str:
    with open(REF_REQS, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ensure_reference_venv(log) -> str | None:
    """The reference venv's python, creating/updating .venv-mdf-ref when needed; None if impossible."""
    py = os.path.join(REF_VENV, "bin", "python")
    stamp = os.path.join(REF_VENV, ".installed")
    want = _reqs_hash()
    try:
        with open(stamp) as f:
            if f.read().strip() == want and os.path.exists(py):
                return py
    except OSError:
        pass
    print(
        f"setting up the reference venv {os.path.relpath(REF_VENV, ROOT)} from "
        f"{os.path.relpath(REF_REQS, ROOT)} (once; about a minute) ...",
        file=log,
        flush=True,
    )
    try:
        if not os.path.exists(py):
            subprocess.run([sys.executable, "-m", "venv", REF_VENV], check=True)
        subprocess.run(
            [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", REF_REQS], check=True
        )
        subprocess.run([py, "-c", "import modeci_mdf.execution_engine"], check=True, stdout=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"reference venv setup failed ({e}); running stdops only", file=log, flush=True)
        return None
    with open(stamp, "w") as f:
        f.write(want + "\n")
    return py


class ReferenceServer:
    """mdf_reference_runner.py --serve in the reference venv: one request line, one answer line."""

    def __init__(self, python: str, conf: str):
        self.errlog = tempfile.NamedTemporaryFile("w+", prefix="mdf-ref-", suffix=".log", delete=False)
        env = dict(os.environ, STDOPS_MDF_CONFORMANCE=conf, PYTHONWARNINGS="ignore")
        env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen(
            [python, REF_RUNNER, "--serve", "--conformance", conf],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errlog,
            text=True,
            bufsize=1,
            cwd=ROOT,
            env=env,
        )
        self.hello = self._read(120.0).get("hello", {})

    def _read(self, timeout: float) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError(f"no answer from the reference in {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(
                f"the reference runner exited ({self.proc.poll()}); see {self.errlog.name}: " + self.tail()
            )
        return json.loads(line)

    def tail(self, n: int = 5) -> str:
        try:
            with open(self.errlog.name) as f:
                return " | ".join(f.read().strip().splitlines()[-n:])
        except OSError:
            return ""

    def run(self, model: str, steps: int, repeat: int, timeout: float) -> dict:
        return self.request({"model": model, "steps": steps, "repeat": repeat}, timeout)

    def request(self, req: dict, timeout: float) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return self._read(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"quit": True}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.errlog.close()
        try:
            os.unlink(self.errlog.name)
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------------
# comparing outputs


def _plain(v: Any) -> Any:
    if isinstance(v, np.ndarray) and v.dtype == object:
        return [_plain(x) for x in v.reshape(-1).tolist()]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def value_diff(a: Any, b: Any) -> float:
    """Largest absolute difference of two port values (inf when they cannot be matched)."""
    if a is None or b is None:
        return 0.0 if a is None and b is None else float("inf")
    numeric = all(
        not isinstance(x, (dict, str)) and not (isinstance(x, np.ndarray) and x.dtype == object) for x in (a, b)
    )
    if numeric:
        try:
            x = np.asarray(a, dtype=np.float64)
            y = np.asarray(b, dtype=np.float64)
        except (TypeError, ValueError):
            numeric = False
        else:
            if x.size != y.size:
                return float("inf")
            if x.size == 0:
                return 0.0
            d = np.abs(x.reshape(-1) - y.reshape(-1))
            both_nan = np.isnan(x.reshape(-1)) & np.isnan(y.reshape(-1))
            d[both_nan] = 0.0
            return float(np.nan_to_num(d, nan=np.inf).max())
    return 0.0 if _plain(a) == _plain(b) else float("inf")


def outputs_diff(ours: dict, theirs: dict) -> tuple[float, list[str]]:
    """Max over every node/port both have; ports missing on one side are listed."""
    worst, notes = 0.0, []
    for node, ports in theirs.items():
        mine = (ours or {}).get(node)
        if mine is None:
            notes.append(f"node {node} missing")
            continue
        for port, v in ports.items():
            if port not in mine:
                notes.append(f"{node}.{port} missing")
                continue
            d = value_diff(mine[port], v)
            if not np.isfinite(d):
                notes.append(f"{node}.{port} differs")
            worst = max(worst, d)
    return worst, notes


def expected_at(model: str, steps: int, conf: str) -> dict | None:
    """The reference's recorded output values after ``steps`` evaluations of the protocol."""
    rec = R.expected_record(model, conf)
    if rec.get("status") != "ok" or model in NONDETERMINISTIC:
        return None
    g = next(iter(rec["graphs"].values()))
    traj = g.get("trajectory")
    if rec["protocol"].get("kind") in ("time", "repeat") and traj:
        out = {}
        for node, ports in traj.items():
            out[node] = {
                p: R.decode(vals[steps - 1])
                for p, vals in ports.items()
                if isinstance(vals, list) and len(vals) >= steps
            }
        return out
    if rec["protocol"].get("kind") in ("time", "repeat"):
        return None
    return R.decode(g.get("outputs") or {})


# ---------------------------------------------------------------------------------------------------


#: the reference's measured DDM (NOTES-mdf.md: ~390 steps per trial); the issue's goal: 1/100 of its time
DDM_PARAMS = {
    "starting_point": 0.0,
    "non_decision_time": 0.2,
    "drift_rate": 0.1,
    "threshold": 2.0,
    "noise": 1.0,
    "dt": 0.01,
}
DDM_GOAL = 100.0
DDM_REF_TRIALS = 200


def bench_ddm(ref, trials: int, rounds: int) -> dict | None:
    """drift_diffusion_integrator: stdops' ``trials`` at once (the compiled walk, and the NumPy path beside
    it) vs the reference's function called once per trial (DDM_REF_TRIALS per round, in its venv),
    alternating rounds (after one untimed call of each stdops path); per-trial medians. Then the README's
    example, ``sim.run(duration=10, dt=0.01)`` on examples/mdf/ddm_decision.yaml (2000 trials per evaluation)."""
    from stdops.ops import _fast
    from stdops.ops.cognitive.ddm import drift_diffusion_integrator as ddm

    p = DDM_PARAMS
    paths = {"compiled": True, "numpy": False} if _fast.numba is not None else {"numpy": False}
    ours: dict[str, list[float]] = {k: [] for k in paths}
    theirs, mean_rt, ref_rt, err = [], None, None, None

    def run_ours(path: str, seed: int) -> float:
        prev = _fast.set_enabled(paths[path])
        try:
            t0 = time.perf_counter()
            out = ddm(*p.values(), rng=np.random.default_rng(seed), n_trials=trials)
            return time.perf_counter() - t0, out
        finally:
            _fast.set_enabled(prev)

    for path in paths:  # the compiled kernel loads (or compiles) on its first call
        run_ours(path, 0)
    same = None
    for r in range(rounds):
        outs = {}
        for path in paths:
            dt_s, outs[path] = run_ours(path, r + 1)
            ours[path].append(dt_s / trials)
        first = next(iter(outs.values()))
        same = (same is not False) and all(np.array_equal(first, o) for o in outs.values())
        mean_rt = float(np.mean(np.abs(first)))
        if ref is not None:
            try:
                res = ref.request({"ddm": p, "trials": DDM_REF_TRIALS}, 600.0)
                if "error" in res:
                    err = res["error"]
                else:
                    theirs.append(res["ddm_s"] / res["trials"])
                    ref_rt = res["mean_abs_rt"]
            except Exception as e:  # noqa: BLE001 - report and go on
                err = f"{type(e).__name__}: {e}"
    t_ref = float(np.median(theirs)) if theirs else None
    print(
        f"drift_diffusion_integrator ({', '.join(f'{k}={v}' for k, v in p.items())}; ~{(mean_rt - 0.2) / 0.01:.0f} "
        f"steps per trial), {trials} trials per call, median of {rounds} alternating rounds:"
        + (f" reference {t_ref * 1e6:.1f} us/trial ({DDM_REF_TRIALS} calls per round)" if t_ref else "")
    )
    ratio = None
    for path, ts in ours.items():
        t = float(np.median(ts))
        r_ = t_ref / t if t_ref else None
        if path == next(iter(paths)):
            ratio = r_
        print(
            f"    stdops {path:<9}{t * trials * 1e3:8.1f} ms = {t * 1e6:6.2f} us/trial"
            + (
                f"; ref/stdops {r_:6.1f}x (goal {DDM_GOAL:g}x: {'met' if r_ >= DDM_GOAL else 'NOT met'})"
                if r_
                else f"; reference: {err or 'not run'}"
            )
        )
    print(
        f"    the paths give the same bits: {same}; mean |RT| stdops {mean_rt:.3f}"
        + (f", reference {ref_rt:.3f} (its {DDM_REF_TRIALS} trials)" if ref_rt is not None else "")
    )
    import stdops.mdf as mdf

    t0 = time.perf_counter()
    sim = mdf.Simulation(mdf.load(os.path.join(ROOT, "examples", "mdf", "ddm_decision.yaml")), seed=0)
    sim.evaluate()
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    traj = sim.run(duration=10, dt=0.01)
    run_s = time.perf_counter() - t0
    print(
        f"examples/mdf/ddm_decision.yaml (2000 trials, dt 0.01): one evaluation {one * 1e3:.0f} ms (with load); "
        f"the README's sim.run(duration=10, dt=0.01): {len(traj.times)} evaluations in {run_s:.2f} s"
    )
    return {
        "stdops_s_per_trial": float(np.median(next(iter(ours.values())))),
        "reference_s_per_trial": t_ref,
        "ratio": ratio,
        "readme_run_s": run_s,
    }


def _fmt(x: float | None, spec: str) -> str:
    if x is None or (isinstance(x, float) and np.isnan(x)):
        return "-"
    return format(x, spec)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--models",
        default="default",
        help="comma list of model paths under ../shared/conformance/mdf/models; globs match the "
        "models the reference ran (status ok); 'default', 'all'. Default: " + ",".join(DEFAULT_MODELS),
    )
    ap.add_argument("--steps", type=int, default=200, help="evaluations (time steps) per run at most")
    ap.add_argument("--repeat", type=int, default=7, help="timed runs of stdops per model")
    ap.add_argument("--reference-repeat", type=int, default=3, help="timed runs of the (slow) reference")
    ap.add_argument("--no-reference", action="store_true", help="stdops only (no reference venv)")
    ap.add_argument(
        "--reference-python",
        default=None,
        help="a python that has modeci-mdf (default: .venv-mdf-ref, created when missing)",
    )
    ap.add_argument("--reference-timeout", type=float, default=900.0, help="seconds per model")
    ap.add_argument("--conformance", default=R.conformance_dir(), help="the shared conformance/mdf folder")
    ap.add_argument("--json", default=None, help="also write every measurement to this JSON file")
    ap.add_argument("--no-ddm", action="store_true", help="skip the drift_diffusion_integrator comparison")
    ap.add_argument("--ddm-trials", type=int, default=10_000, help="trials of stdops' vectorized DDM per round")
    ap.add_argument("--ddm-rounds", type=int, default=3, help="alternating rounds of the DDM comparison")
    ap.add_argument(
        "--check",
        action="store_true",
        help=f"exit 1 unless every goal model is >= {GOAL_RATIO:g}x and stdops ran every model",
    )
    args = ap.parse_args(argv)

    conf = os.path.abspath(args.conformance)
    if not os.path.isdir(os.path.join(conf, "expected")):
        print(f"no MDF conformance data at {conf}: nothing to benchmark", file=sys.stderr)
        return 0 if not args.check else 1
    models = select_models(args.models, conf)

    import stdops
    import stdops.mdf

    warnings.simplefilter("ignore", stdops.mdf.MdfWarning)
    warnings.simplefilter("ignore", RuntimeWarning)  # overflow in the HH rate expressions, as in the reference

    ref: ReferenceServer | None = None
    ref_note = "reference: not run (--no-reference)"
    if not args.no_reference:
        py = args.reference_python or ensure_reference_venv(sys.stderr)
        if py:
            try:
                ref = ReferenceServer(py, conf)
                h = ref.hello
                ref_note = (
                    f"reference: modeci-mdf {h.get('modeci_mdf')} (python {h.get('python')}, numpy "
                    f"{h.get('numpy')}) in {os.path.relpath(os.path.dirname(os.path.dirname(py)), ROOT)}"
                )
            except Exception as e:  # report and go on with stdops alone
                ref_note = f"reference: could not start ({type(e).__name__}: {e})"
                ref = None
        else:
            ref_note = "reference: unavailable (venv setup failed)"

    print(
        f"MDF: stdops {getattr(stdops, '__version__', '?')} (python {sys.version.split()[0]}, numpy "
        f"{np.__version__}); {ref_note}"
    )
    print(
        f"per model: the expected file's protocol, first {args.steps} evaluations at most, fresh engine per "
        f"run, median of {args.repeat} (stdops) / {args.reference_repeat} (reference) runs; cores {os.cpu_count()}"
    )
    header = (
        f"{'model':<44}{'steps':>11}{'stdops ms/step':>16}{'ref ms/step':>13}{'ref/stdops':>12}"
        f"{'max|diff| ref':>15}{'max|diff| exp':>15}  goal"
    )
    print(header)
    print("-" * len(header))
    sys.stdout.flush()

    results = []
    failures = []
    try:
        for model in models:
            row: dict = {"model": model}
            try:
                ours = run_stdops(model, args.steps, args.repeat, conf)
            except Exception as e:
                ours = {"status": "error", "error": f"{type(e).__name__}: {e}"}
                failures.append(f"{model}: stdops {ours['error']}")
            row["stdops"] = ours
            theirs: dict | None = None
            if ref is not None:
                try:
                    theirs = ref.run(model, args.steps, args.reference_repeat, args.reference_timeout)
                except Exception as e:
                    theirs = {"status": "error", "error": f"{type(e).__name__}: {e}"}
                    if ref.proc.poll() is not None or isinstance(e, TimeoutError):
                        ref.close()
                        ref = None  # a dead or hung reference ends the reference side of this run
                row["reference"] = theirs
            ok_ours = ours.get("status") == "ok"
            ok_ref = theirs is not None and theirs.get("status") == "ok"
            t_ours = ours.get("ms_per_step") if ok_ours else None
            t_ref = theirs.get("ms_per_step") if ok_ref else None
            ratio = t_ref / t_ours if (t_ours and t_ref) else None
            d_ref = d_exp = None
            notes: list[str] = []
            if ok_ours and ok_ref:
                if theirs.get("steps") != ours.get("steps"):
                    notes.append(f"steps differ: reference {theirs.get('steps')}")
                d_ref, n = outputs_diff(ours["outputs"], R.decode(theirs["outputs"]))
                notes += n
            if ok_ours:
                try:
                    exp = expected_at(model, ours["steps"], conf)
                except (OSError, KeyError, ValueError, IndexError):
                    exp = None
                if exp is not None:
                    d_exp, _ = outputs_diff(ours["outputs"], exp)
            goal = ""
            if is_goal_model(model):
                if ratio is None:
                    goal = "-"
                else:
                    goal = "ok" if ratio >= GOAL_RATIO else f"BELOW {GOAL_RATIO:g}x"
                    if ratio < GOAL_RATIO:
                        failures.append(f"{model}: {ratio:.1f}x < {GOAL_RATIO:g}x")
            row.update(ratio=ratio, max_diff_reference=d_ref, max_diff_expected=d_exp, notes=notes)
            results.append(row)

            steps = "-"
            if ok_ours:
                full = ours.get("full_steps")
                steps = f"{ours['steps']}/{full}" if full else f"{ours['steps']}"
            print(
                f"{model:<44}{steps:>11}{_fmt(t_ours, '.4f'):>16}{_fmt(t_ref, '.3f'):>13}"
                f"{(_fmt(ratio, '.1f') + 'x') if ratio else '-':>12}{_fmt(d_ref, '.2e'):>15}"
                f"{_fmt(d_exp, '.2e'):>15}  {goal}"
            )
            for what, r in (("stdops", ours), ("reference", theirs)):
                if r is not None and r.get("status") != "ok":
                    print(f"    {what} failed: {r.get('error', '?')[:300]}")
            for n in notes:
                print(f"    note: {n}")
            sys.stdout.flush()
        ddm_row = bench_ddm(ref, args.ddm_trials, args.ddm_rounds) if not args.no_ddm else None
        if ddm_row and ddm_row.get("ratio") is not None and ddm_row["ratio"] < DDM_GOAL:
            failures.append(f"drift_diffusion_integrator: {ddm_row['ratio']:.1f}x < {DDM_GOAL:g}x")
    finally:
        if ref is not None:
            ref.close()

    ratios = [r["ratio"] for r in results if is_goal_model(r["model"]) and r.get("ratio")]
    print(
        "ref/stdops: how many times faster stdops is per evaluation (time step); max|diff| ref: largest "
        "absolute output difference against the reference in this run; exp: against its recorded values"
    )
    if ratios:
        met = sum(x >= GOAL_RATIO for x in ratios)
        print(
            f"goal >= {GOAL_RATIO:g}x per time step on {' and '.join(GOAL_MODELS)}: met on {met}/{len(ratios)} "
            f"models (min {min(ratios):.1f}x, median {float(np.median(ratios)):.1f}x)"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"args": vars(args), "reference": ref_note, "results": results},
                f,
                indent=1,
                default=lambda o: R.encode(o) if isinstance(o, (np.ndarray, np.generic)) else repr(o),
            )
    stdops_errors = [f for f in failures if ": stdops " in f]
    if stdops_errors:
        print("stdops failed on: " + "; ".join(stdops_errors))
        return 1
    if args.check and failures:
        print("check failed: " + "; ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
