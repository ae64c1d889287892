"""Side-by-side timings: stdops vs onnxruntime and onnx.reference, measured in the same run.

    make bench                      # all models, 1 and 2 threads
    python benchmarks/run.py --models resnet18_like --threads 1 --repeat 10

Prints, per model and thread count: median milliseconds of each runtime, the ratios, stdops' GFLOP/s
and the largest absolute output difference against onnxruntime. Run it with OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE unset (the Makefile does) and read the BLAS kernel line it prints first.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import MODELS  # noqa: E402


def _median_ms(fn, repeat: int, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def blas_line() -> str:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "BLAS: (threadpoolctl not installed)"
    parts = [
        f"{i.get('internal_api')} {i.get('version')} kernel={i.get('architecture')} threads={i.get('num_threads')}"
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]
    env = {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    return "BLAS: " + "; ".join(parts) + f"  (env {env})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--reference-repeat", type=int, default=3, help="runs of the (slow) onnx.reference")
    ap.add_argument("--no-reference", action="store_true")
    args = ap.parse_args(argv)

    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator
    from threadpoolctl import threadpool_limits

    import stdops.onnx
    from stdops.perf import tune_allocator

    print(blas_line())
    print(f"allocator tuned: {tune_allocator()}")
    print(f"numpy {np.__version__}; onnxruntime {ort.__version__}; cores {os.cpu_count()}")
    header = (
        f"{'model':<20}{'thr':>4}{'stdops ms':>11}{'ort ms':>9}{'ref ms':>9}{'stdops/ort':>12}"
        f"{'ref/stdops':>12}{'GFLOP/s':>9}{'max|diff|':>11}"
    )
    print(header)
    print("-" * len(header))
    for name in [m for m in args.models.split(",") if m]:
        model, feeds, gflop = MODELS[name]()
        ours = stdops.onnx.load(model)
        out_name = ours.output_names[0]
        for threads in [int(t) for t in args.threads.split(",") if t]:
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            so.log_severity_level = 3
            sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            with threadpool_limits(limits=threads):
                t_ours = _median_ms(lambda: ours.run(feeds), args.repeat)
                y_ours = ours.run(feeds)[out_name]
                t_ort = _median_ms(lambda: sess.run(None, feeds), args.repeat)
                y_ort = sess.run(None, feeds)[0]
                t_ref = float("nan")
                if not args.no_reference:
                    ref = ReferenceEvaluator(model)
                    t_ref = _median_ms(lambda: ref.run(None, feeds), args.reference_repeat, warmup=0)
            diff = float(np.max(np.abs(y_ours.astype(np.float64) - y_ort)))
            print(
                f"{name:<20}{threads:>4}{t_ours:>11.2f}{t_ort:>9.2f}{t_ref:>9.1f}{t_ours / t_ort:>11.2f}x"
                f"{t_ref / t_ours:>11.1f}x{gflop / (t_ours / 1e3):>9.1f}{diff:>11.2e}"
            )
            sys.stdout.flush()
    print("stdops/ort: < 1 means stdops is faster; ref/stdops: how many times faster than onnx.reference")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
