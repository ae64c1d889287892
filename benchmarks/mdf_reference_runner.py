"""Run MDF example models with the reference engine (modeci-mdf 0.4.15) and time them.

Runs inside the separate venv ``.venv-mdf-ref`` (made by ``benchmarks/bench_mdf.py`` from
``benchmarks/requirements-mdf-ref.txt``), never in the project venv. Each model is run with the protocol
recorded in its expected file (``../shared/conformance/mdf/expected/<model>.json`` -> ``protocol``),
truncated to ``--steps`` evaluations, on a freshly built engine per run; load and engine construction
are not timed. One JSON object per model goes to stdout (one line each).

    .venv-mdf-ref/bin/python benchmarks/mdf_reference_runner.py NeuroML/FN.mdf.json --steps 100
    .venv-mdf-ref/bin/python benchmarks/mdf_reference_runner.py --serve   # requests on stdin (bench_mdf.py)

The protocol and timing code below (``plan``, ``drive``, ``measure``, ``encode``) has no dependency on
modeci-mdf: ``bench_mdf.py`` imports it and times stdops with the same loops.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFORMANCE = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "conformance", "mdf"))

# runs shorter than this many evaluations are repeated at least MIN_SHORT_REPEAT times (timer noise)
SHORT_RUN = 10
MIN_SHORT_REPEAT = 15


def conformance_dir() -> str:
    return os.environ.get("STDOPS_MDF_CONFORMANCE", DEFAULT_CONFORMANCE)


def model_path(model: str, conf: str | None = None) -> str:
    return os.path.join(conf or conformance_dir(), "models", model)


def expected_record(model: str, conf: str | None = None) -> dict:
    with open(os.path.join(conf or conformance_dir(), "expected", model + ".json")) as f:
        return json.load(f)


# ---------------------------------------------------------------------------------------------------
# protocol -> the list of time increments of the evaluations (None: evaluate() without one)


def _count_loop(dt: float, cond: Callable[[float], bool], cap: int) -> int:
    t, n = 0.0, 0
    while cond(t) and n < cap:
        n += 1
        t += dt  # accumulated as a float, like the reference's example scripts
    return n


def full_length(protocol: dict, cap: int = 10**7) -> int | None:
    """Evaluations of the complete protocol (None for actr: data dependent)."""
    kind = protocol.get("kind")
    if kind == "single":
        return 1
    if kind == "actr":
        return None
    dt, dur = float(protocol["dt"]), float(protocol["duration"])
    if kind == "repeat":
        if protocol.get("n") is not None:
            return int(protocol["n"])
        return _count_loop(dt, lambda t: t <= dur, cap)
    if kind == "time":
        loop = protocol.get("loop", "le")
        if loop == "le":
            return _count_loop(dt, lambda t: t <= dur, cap)
        if loop == "lt":
            return _count_loop(dt, lambda t: t < dur, cap)
        if loop == "le_plus_dt":
            return _count_loop(dt, lambda t: t <= dur + dt, cap)
        if loop == "lt_plus":
            plus = float(protocol.get("plus", dt))
            return _count_loop(dt, lambda t: t < dur + plus, cap)
        raise ValueError(f"unknown time loop {loop!r}")
    raise ValueError(f"unknown protocol kind {kind!r}")


def plan(protocol: dict, max_steps: int) -> list:
    """Time increments of the first ``max_steps`` evaluations of the protocol (actr: []: dynamic)."""
    kind = protocol.get("kind")
    if kind == "actr":
        return []
    n = min(full_length(protocol, cap=max_steps), max_steps)
    if kind == "time":
        return [None] + [float(protocol["dt"])] * (n - 1)
    return [None] * n


def random_inputs(path: str) -> dict | None:
    """Graph input ports (no edge into them), in graph order, filled like the expected files' harness:
    numpy.random.default_rng(0).standard_normal(shape).astype(float32). Keyed by port id."""
    with open(path) as f:
        if path.endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(f)
        else:
            data = json.load(f)
    (model,) = data.values()
    graph = next(iter(model["graphs"].values()))
    fed = {(e.get("receiver"), e.get("receiver_port")) for e in (graph.get("edges") or {}).values()}
    rng = np.random.default_rng(0)
    out = {}
    for nid, node in (graph.get("nodes") or {}).items():
        for pid, port in (node.get("input_ports") or {}).items():
            if (nid, pid) in fed or port.get("shape") is None:
                continue
            shape = port["shape"]
            if isinstance(shape, str):
                shape = tuple(int(s) for s in shape.strip("()[] ").split(",") if s.strip())
            out[pid] = rng.standard_normal(tuple(shape)).astype(np.float32)
    return out


# ---------------------------------------------------------------------------------------------------
# driving an engine: any object with evaluate(dt, inputs), output(port_id), outputs()


def drive(sim: Any, protocol: dict, steps: list, max_steps: int, inputs: dict | None) -> int:
    """Run the (truncated) protocol on ``sim``; returns the number of evaluations."""
    if protocol.get("kind") == "actr":
        goal: Any = {}
        dm: Any = {}
        n = 0
        for _ in range(min(int(protocol.get("max_iter", 1000)), max_steps)):
            sim.evaluate(None, {"goal_input": goal, "dm_input": dm})
            n += 1
            if _truthy(sim.output("check_output")):
                break
            goal = sim.output("fire_prod_output_to_goal")
            dm = sim.output("fire_prod_output_to_retrieval")
        return n
    for dt in steps:
        sim.evaluate(dt, inputs)
    return len(steps)


def _truthy(v: Any) -> bool:
    try:
        return bool(np.all(v))
    except Exception:
        return bool(v)


def measure(
    factory: Callable[[], Any],
    protocol: dict,
    max_steps: int,
    repeat: int,
    inputs: dict | None = None,
    warmup: int = 1,
) -> dict:
    """Median time per evaluation over ``repeat`` runs, each on a fresh engine from ``factory()``
    (not timed), after ``warmup`` untimed short runs. Returns ms_per_step, steps, run times and the
    outputs after the first timed run."""
    steps = plan(protocol, max_steps)
    for _ in range(warmup):
        sim = factory()
        drive(sim, protocol, steps[:3], 3, inputs)
    times, outputs, n = [], None, 0
    r = 0
    while r < repeat or (n < SHORT_RUN and r < max(repeat, MIN_SHORT_REPEAT)):
        sim = factory()
        gc.collect()
        t0 = time.perf_counter()
        n = drive(sim, protocol, steps, max_steps, inputs)
        times.append(time.perf_counter() - t0)
        if outputs is None:
            outputs = sim.outputs()
        r += 1
    med = statistics.median(times)
    return {
        "steps": n,
        "full_steps": full_length(protocol),
        "runs": len(times),
        "run_s": times,
        "ms_per_step": 1e3 * med / max(n, 1),
        "outputs": outputs,
    }


# ---------------------------------------------------------------------------------------------------
# JSON transport of output values


def encode(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        if v.dtype == object:
            return {
                "__ndarray__": [encode(x) for x in v.reshape(-1).tolist()],
                "dtype": "object",
                "shape": list(v.shape),
            }
        if v.dtype.kind in "fc" and not np.all(np.isfinite(v)):
            data = [_enc_float(x) for x in v.reshape(-1).tolist()]
            return {"__ndarray__": data, "dtype": str(v.dtype), "shape": list(v.shape), "flat": True}
        return {"__ndarray__": v.tolist(), "dtype": str(v.dtype), "shape": list(v.shape)}
    if isinstance(v, np.generic):
        return {"__npscalar__": encode(v.item()), "dtype": str(v.dtype)}
    if isinstance(v, float):
        return _enc_float(v)
    if isinstance(v, dict):
        return {str(k): encode(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return {"__tuple__": [encode(x) for x in v]}
    if isinstance(v, list):
        return [encode(x) for x in v]
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return {"__repr__": repr(v)}


def _enc_float(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return {"__float__": repr(x)}
    return x


def decode(v: Any) -> Any:
    if isinstance(v, dict):
        if "__float__" in v:
            return float(v["__float__"])
        if "__npscalar__" in v:
            x = decode(v["__npscalar__"])
            return x if v.get("dtype") == "object" else np.asarray(x, dtype=v.get("dtype"))[()]
        if "__ndarray__" in v:
            data = decode(v["__ndarray__"])
            if v.get("dtype") == "object":
                a = np.empty(len(data), dtype=object)
                for i, x in enumerate(data):
                    a[i] = x
                return a.reshape(v["shape"]) if v.get("shape") else a
            return np.asarray(data, dtype=v.get("dtype")).reshape(v.get("shape"))
        if v.get("__ndarray_summary__"):
            return None  # the expected files' summaries of large arrays: not comparable here
        if "__tuple__" in v:
            return tuple(decode(x) for x in v["__tuple__"])
        if "__repr__" in v:
            return v["__repr__"]
        return {k: decode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [decode(x) for x in v]
    return v


# ---------------------------------------------------------------------------------------------------
# the reference engine


class ReferenceSim:
    """modeci-mdf's EvaluableGraph behind the interface ``drive`` uses."""

    def __init__(self, path: str):
        from modeci_mdf.execution_engine import EvaluableGraph
        from modeci_mdf.utils import load_mdf

        model = load_mdf(path)
        self.eg = EvaluableGraph(model.graphs[0], verbose=False)

    def evaluate(self, dt: float | None, inputs: dict | None) -> None:
        self.eg.evaluate(time_increment=dt, initializer=inputs)

    def output(self, port: str) -> Any:
        for en in self.eg.enodes.values():
            if port in en.evaluable_outputs:
                return en.evaluable_outputs[port].curr_value
        raise KeyError(port)

    def outputs(self) -> dict:
        return {
            nid: {pid: op.curr_value for pid, op in en.evaluable_outputs.items()} for nid, en in self.eg.enodes.items()
        }


def run_reference(model: str, max_steps: int, repeat: int, conf: str | None = None) -> dict:
    import random

    path = model_path(model, conf)
    rec = expected_record(model, conf)
    protocol = rec["protocol"]
    inputs = random_inputs(path) if protocol.get("random_inputs") else None

    def factory():
        random.seed(0)
        np.random.seed(0)
        return ReferenceSim(path)

    t0 = time.perf_counter()
    factory()
    load_s = time.perf_counter() - t0
    res = measure(factory, protocol, max_steps, repeat, inputs)
    res["outputs"] = encode(res["outputs"])
    res.update(model=model, status="ok", load_init_s=load_s, protocol=protocol)
    return res


def versions() -> dict:
    out = {"python": sys.version.split()[0], "numpy": np.__version__}
    try:
        import modeci_mdf

        out["modeci_mdf"] = modeci_mdf.__version__
    except Exception as e:  # pragma: no cover - reported to the caller
        out["modeci_mdf"] = f"unavailable: {type(e).__name__}: {e}"
    return out


def _quiet_stdout():
    """The reference prints as it goes ("Init graph: ..."): keep our stdout for the JSON lines and send
    everything else written to fd 1 to /dev/null."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    sys.stdout = open(os.devnull, "w")
    return out


def _one(out, model: str, steps: int, repeat: int, conf: str | None) -> None:
    try:
        res = run_reference(model, steps, repeat, conf)
    except BaseException as e:  # report and go on with the next model
        if isinstance(e, KeyboardInterrupt):
            raise
        res = {"model": model, "status": "error", "error": f"{type(e).__name__}: {e}"[:2000]}
    out.write(json.dumps(res) + "\n")
    out.flush()


def _ddm(out, params: dict, trials: int) -> None:
    """Seconds for ``trials`` calls of the reference's drift_diffusion_integrator (one trial each)."""
    try:
        import numpy
        from modeci_mdf.functions.ddm import drift_diffusion_integrator as ddm

        numpy.random.seed(0)
        t0 = time.perf_counter()
        rts = [ddm(**params) for _ in range(trials)]
        res = {"ddm_s": time.perf_counter() - t0, "trials": trials, "mean_abs_rt": float(numpy.mean(numpy.abs(rts)))}
    except Exception as e:  # noqa: BLE001 - report
        res = {"error": f"{type(e).__name__}: {e}"[:500]}
    out.write(json.dumps(res) + "\n")
    out.flush()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help="model paths under <conformance>/models")
    ap.add_argument("--steps", type=int, default=200, help="evaluations per run at most")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per model")
    ap.add_argument("--conformance", default=None, help=f"default {DEFAULT_CONFORMANCE}")
    ap.add_argument(
        "--serve",
        action="store_true",
        help='read {"model", "steps", "repeat"} JSON lines on stdin, answer one line each',
    )
    args = ap.parse_args(argv)

    out = _quiet_stdout()
    t0 = time.perf_counter()
    v = versions()
    try:  # import the engine now, so the import is not charged to the first model
        import importlib

        importlib.import_module("modeci_mdf.execution_engine")
        importlib.import_module("modeci_mdf.utils")
    except Exception:
        pass
    v["import_s"] = time.perf_counter() - t0
    out.write(json.dumps({"hello": v}) + "\n")
    out.flush()
    for m in args.models:
        _one(out, m, args.steps, args.repeat, args.conformance)
    if args.serve:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            req = json.loads(line)
            if req.get("quit"):
                break
            if "ddm" in req:
                _ddm(out, req["ddm"], int(req.get("trials", 100)))
                continue
            _one(
                out,
                req["model"],
                int(req.get("steps", args.steps)),
                int(req.get("repeat", args.repeat)),
                req.get("conformance", args.conformance),
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
