"""The zoo benchmark (`make bench`): stdops vs onnxruntime on every ONNX network, and vs the ncnn wheel (its
default options) on every ncnn network, at 1 and 2 threads; each pair timed alternately in the same run.

    python scripts/make_zoo.py ...                       # first: the zoo (see that script; `make zoo`)
    python benchmarks/bench_zoo.py [--models resnet18,ssdlite] [--threads 1,2] [--formats onnx,ncnn]

Rows: the zoo's torchvision/timm networks (zoo/manifest.json), the networks built in benchmarks/models.py
(ONNX) and the ResNet-style ncnn test fixture at 224x224. Prints the BLAS kernel in use and the machine's
float32 GEMM rate first. Per row and thread count, stdops and the peer are called alternately (a phase per
thread count, so that a peer's spinning pool threads slow only their own pair), and a last phase alternates
stdops at 1 and at 2 threads: ratio@t = stdops / peer at t threads (lower is better for stdops), 2thr/1thr =
stdops at 2 threads / stdops at 1 thread (<= 1: the second thread does not hurt). Times are the fastest call
of the alternating rounds (``--stat median`` for medians): on a shared machine the least disturbed one; at
1 thread they are the calling thread's CPU time (every runtime computes in the calling thread then), at 2
threads wall time, in turns of 3 calls of which the first is not counted: after a call each runtime's pool
threads spin for a while (onnxruntime's, ncnn's, stdops' helper), on the core the other runtime's second thread
needs, so strict alternation charges each runtime with the other's spinning. The last phase (stdops at 1 and 2
threads) goes in such turns too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "ncnn"))
from timing import alternating_many  # noqa: E402


def blas_line() -> str:
    from threadpoolctl import threadpool_info

    parts = [
        f"{i.get('internal_api')} {i.get('version')} kernel={i.get('architecture')} threads={i.get('num_threads')}"
        f" ({os.path.basename(i.get('filepath', ''))})"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]
    env = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    return "BLAS: " + "; ".join(parts) + f"  (env {env})"


def gemm_rate(threads: int, n: int = 1024) -> float:
    """GFLOP/s of numpy's float32 GEMM (n x n x n), best of a few runs."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    with threadpool_limits(limits=threads):
        a @ b
        best = min(_seconds(lambda: a @ b) for _ in range(5))
    return 2.0 * n**3 / best / 1e9


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _diff(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return float("nan")
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def _zoo_entries(zoo: str) -> dict:
    path = os.path.join(zoo, "manifest.json")
    if not os.path.exists(path):
        print(f"# no zoo at {zoo} (run `make zoo`): only the built-in networks")
        return {}
    with open(path) as f:
        return json.load(f)


def onnx_cases(zoo: str, names) -> list:
    """(name, model path or proto, feeds) for every ONNX network."""
    import onnx
    from models import MODELS

    cases = []
    for name, entry in _zoo_entries(zoo).items():
        if "model.onnx" in entry["files"]:
            feeds = {i["name"]: np.load(os.path.join(zoo, name, f"{i['name']}.npy")) for i in entry["inputs"]}
            cases.append((name, os.path.join(zoo, name, "model.onnx"), feeds))
    for name, build in MODELS.items():  # networks written with onnx.helper (benchmarks/models.py)
        cases.append((f"built:{name}", None, build))
    cases = [c for c in cases if not names or c[0] in names]
    out = []
    for name, path, feeds in cases:
        if path is None:  # a models.py builder
            model, feeds, _ = feeds()
        else:
            model = onnx.load(path)
        out.append((name, model, feeds))
    return out


def ncnn_cases(zoo: str, names) -> list:
    """(name, param, bin, {input: array without the batch axis}) for every ncnn network."""
    cases = []
    for name, entry in _zoo_entries(zoo).items():
        if "model.param" in entry["files"]:
            feeds = {}
            for i in entry["inputs"]:
                x = np.load(os.path.join(zoo, name, f"{i['name']}.npy"))[0]  # ncnn blobs have no batch axis
                # token ids as int32 (an Embed reads its blob's bits as int32), everything else float32
                feeds[i["name"]] = np.ascontiguousarray(x.astype(np.int32 if x.dtype.kind in "iu" else np.float32))
            cases.append((name, os.path.join(zoo, name, "model.param"), os.path.join(zoo, name, "model.bin"), feeds))
    fx = os.path.join(ROOT, "tests", "ncnn", "fixtures", "resnet_small")
    if os.path.exists(fx):
        x = np.random.default_rng(0).standard_normal((3, 224, 224)).astype(np.float32)
        cases.append(("ncnn resnet_small", os.path.join(fx, "model.param"), os.path.join(fx, "model.bin"), {"in0": x}))
    return [c for c in cases if not names or c[0] in names]


HEADER = (
    f"{'fmt':<5}{'model':<22}"
    + "".join(f"{f'stdops@{t}':>11}{f'peer@{t}':>10}{f'ratio@{t}':>9}" for t in (1, 2))
    + f"{'2thr/1thr':>11}{'max|diff|':>11}"
)


STAT = {"min": min, "median": statistics.median}


def _measure(fns, before, threads_list, repeat, budget, stat) -> list[float]:
    """Milliseconds [ours@t, peer@t for t in threads_list] + [ours at the last count, measured against ours at
    the first]: each thread count's pair alternating in a phase of its own (a peer's spinning pool threads
    then only slow the pair they belong to; at several threads in turns of 3 calls, the first untimed, as each
    runtime's threads spin for a while after its call), and stdops at both counts alternating in a last phase
    (in turns of 3 as well)."""
    k = len(threads_list)
    out = []
    for i in range(k):
        # one thread: every runtime computes in the calling thread, whose CPU time excludes the other processes'
        # several threads: wall time, in turns of 3 calls of which the last 2 count (see timing.alternating_many)
        one = threads_list[i] == 1
        clock, calls = (time.thread_time, 1) if one else (time.perf_counter, 3)
        ts = alternating_many(fns[2 * i : 2 * i + 2], repeat, budget / (k + 1), before[2 * i : 2 * i + 2], clock, calls)
        out += [1e3 * STAT[stat](t) for t in ts]
    if k > 1:
        # in turns of 3 calls too: a thread count's steady state (the helper asleep after a 1-thread call would
        # charge its wake-up to the 2-thread call after it, a pattern no user runs)
        ts = alternating_many([fns[0], fns[-2]], repeat, budget / (k + 1), [before[0], before[-2]], calls=3)
        out += [1e3 * STAT[stat](t) for t in ts]
    return out


def _print_row(fmt, name, threads_list, ms, diff) -> dict:
    cells, ratios = "", {}
    for i, t in enumerate(threads_list):
        o, p = ms[2 * i], ms[2 * i + 1]
        ratios[t] = o / p
        cells += f"{o:>11.2f}{p:>10.2f}{o / p:>8.2f}x"
    scale = f"{ms[-1] / ms[-2]:>10.2f}x" if len(threads_list) > 1 else f"{'':>11}"
    print(f"{fmt:<5}{name:<22}{cells}{scale}{diff:>11.2e}", flush=True)
    return ratios


def _blas_setter():
    from threadpoolctl import ThreadpoolController

    ctl = ThreadpoolController().select(user_api="blas")
    return lambda n: ctl.limit(limits=n)


def bench_onnx(cases, threads_list, repeat, budget, stat="min") -> dict:
    import onnxruntime as ort

    import stdops.onnx

    set_blas = _blas_setter()
    ratios = {}
    for name, model, feeds in cases:
        try:
            ours = stdops.onnx.load(model)
            set_blas(max(threads_list))
            y = ours.run(feeds)[ours.output_names[0]]
        except Exception as e:  # noqa: BLE001 - a row that cannot run says why; the table goes on
            print(f"onnx {name:<22} stdops fails: {type(e).__name__}: {str(e)[:120]}")
            continue
        fns, before = [], []
        for threads in threads_list:
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.log_severity_level = 3
            sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            fns += [lambda: ours.run(feeds), lambda sess=sess: sess.run(None, feeds)]
            before += [lambda t=threads: set_blas(t), None]
        ms = _measure(fns, before, threads_list, repeat, budget, stat)
        ratios[name] = _print_row("onnx", name, threads_list, ms, _diff(y, fns[1]()[0]))
    return ratios


def bench_ncnn(cases, threads_list, repeat, budget, stat="min") -> dict:
    import ncnn

    import stdops.ncnn as sn

    set_blas = _blas_setter()
    ratios = {}
    for name, param, binf, feeds in cases:
        try:
            ours = sn.Net.load(param, binf)
            out = ours.output_names[0]
            set_blas(max(threads_list))
            y = ours.run(feeds)[out]
        except Exception as e:  # noqa: BLE001
            probe = ncnn.Net()
            peer = "the wheel loads it" if probe.load_param(param) == 0 else "the wheel refuses it too"
            print(f"ncnn {name:<22} stdops fails ({peer}): {type(e).__name__}: {str(e)[:120]}")
            continue
        fns, before = [], []
        for threads in threads_list:
            net = ncnn.Net()
            net.opt.num_threads = threads
            net.load_param(param)
            net.load_model(binf)
            mats = {k: ncnn.Mat(v.view(np.float32) if v.dtype == np.int32 else v).clone() for k, v in feeds.items()}

            def wheel(net=net, mats=mats):
                ex = net.create_extractor()
                for k, m in mats.items():
                    ex.input(k, m)
                return ex.extract(out)[1]

            fns += [lambda: ours.run(feeds), wheel]
            before += [lambda t=threads: set_blas(t), None]
        ms = _measure(fns, before, threads_list, repeat, budget, stat)
        ratios[name] = _print_row("ncnn", name, threads_list, ms, _diff(y, np.array(fns[1]().numpy())))
    return ratios


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", default=os.path.join(ROOT, "zoo"))
    ap.add_argument("--models", default="", help="comma-separated row names (default: all)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--formats", default="onnx,ncnn")
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--budget", type=float, default=9.0, help="seconds per row (at least 5 rounds per phase)")
    ap.add_argument(
        "--stat",
        choices=sorted(STAT),
        default="min",
        help="per-call statistic (default min: on a shared machine the fastest round is the least disturbed)",
    )
    args = ap.parse_args(argv)
    names = {m for m in args.models.split(",") if m}
    threads_list = [int(t) for t in args.threads.split(",") if t]

    import onnxruntime as ort

    from stdops.perf import tune_allocator

    print(blas_line())
    print(
        "GEMM float32 1024^3: "
        + ", ".join(f"{t} thread{'s' * (t > 1)} {gemm_rate(t):.0f} GFLOP/s" for t in threads_list)
    )
    print(f"allocator tuned: {tune_allocator()}; numpy {np.__version__}; onnxruntime {ort.__version__}")
    print(HEADER)
    formats = set(args.formats.split(","))
    if "onnx" in formats:
        bench_onnx(onnx_cases(args.zoo, names), threads_list, args.repeat, args.budget, args.stat)
    if "ncnn" in formats:
        try:
            import ncnn

            print(f"# ncnn wheel {ncnn.__version__}, default options")
        except ImportError:
            print("# ncnn wheel not installed: ncnn rows skipped")
        else:
            bench_ncnn(ncnn_cases(args.zoo, names), threads_list, args.repeat, args.budget, args.stat)
    print("ratio = stdops time / peer time (onnx: onnxruntime; ncnn: the ncnn wheel); < 1 means stdops is faster")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
