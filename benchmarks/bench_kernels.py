"""Kernel micro-benchmarks against onnxruntime: LSTM / GRU / RNN and Erf / Gelu as one-node models.

One-node models built with onnx.helper (weights as initializers), one thread for both runtimes.
Run with the BLAS tuning variables unset for this command only:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_kernels.py [--only lstm,erf]

The two runtimes are timed alternately (so that both see the same machine load); each row prints
the minimum and the median time of each and the ratios stdops / onnxruntime, plus the largest
difference between their outputs. The minimum is the steadier number on a busy machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import alternating  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import stdops.onnx  # noqa: E402

_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def recurrent_model(op, T, B, I, H, direction="forward", seed=0, **attrs):
    """op in LSTM / GRU / RNN: X [T, B, I] -> Y, Y_h (and Y_c), weights scaled 0.05 as in models.py."""
    rng = np.random.default_rng(seed)
    G = _GATES[op]
    D = 2 if direction == "bidirectional" else 1
    inits = [
        numpy_helper.from_array((rng.standard_normal(s) * 0.05).astype(np.float32), n)
        for n, s in (("W", (D, G * H, I)), ("R", (D, G * H, H)), ("B", (D, 2 * G * H)))
    ]
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, ["X", "W", "R", "B"], outs, hidden_size=H, direction=direction, **attrs)
    graph = helper.make_graph(
        [node],
        op.lower(),
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, B, I])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return model, rng.standard_normal((T, B, I)).astype(np.float32)


def unary_model(op, shape, opset, seed=0, scale=1.5, **attrs):
    rng = np.random.default_rng(seed)
    node = helper.make_node(op, ["X"], ["Y"], **attrs)
    graph = helper.make_graph(
        [node],
        op.lower(),
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return model, (rng.standard_normal(shape) * scale).astype(np.float32)


# name, group, builder
CASES = [
    ("LSTM T64 B1 I256 H256", "lstm", lambda: recurrent_model("LSTM", 64, 1, 256, 256)),
    ("LSTM T64 B1 H128 bidir", "lstm", lambda: recurrent_model("LSTM", 64, 1, 128, 128, "bidirectional")),
    ("LSTM T32 B8 I64 H64", "lstm", lambda: recurrent_model("LSTM", 32, 8, 64, 64)),
    ("GRU T64 B1 I256 H256", "gru", lambda: recurrent_model("GRU", 64, 1, 256, 256)),
    ("GRU T64 B1 H256 lbr=1", "gru", lambda: recurrent_model("GRU", 64, 1, 256, 256, linear_before_reset=1)),
    ("RNN T64 B1 I256 H256", "rnn", lambda: recurrent_model("RNN", 64, 1, 256, 256)),
    ("Erf 131072 (GELU in models.py)", "erf", lambda: unary_model("Erf", (1, 128, 1024), 13)),
    ("Erf 1048576", "erf", lambda: unary_model("Erf", (1024, 1024), 13)),
    ("Erf 4096", "erf", lambda: unary_model("Erf", (4096,), 13)),
    ("Gelu-20 131072", "erf", lambda: unary_model("Gelu", (1, 128, 1024), 20)),
]


def time_pair(fa, fb, repeat, budget):
    """(min, median) times of fa and fb, measured alternately so that both see the same load."""
    ta, tb = alternating(fa, fb, repeat, budget)
    return (min(ta), statistics.median(ta)), (min(tb), statistics.median(tb))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--budget", type=float, default=3.0, help="seconds per row at most (after 5 runs)")
    ap.add_argument("--only", default="", help="comma-separated groups: lstm, gru, rnn, erf")
    args = ap.parse_args()

    import onnxruntime as ort
    from threadpoolctl import threadpool_info, threadpool_limits

    threadpool_limits(1)
    blas = [
        (i.get("internal_api"), i.get("architecture"), i.get("num_threads"))
        for i in threadpool_info()
        if i.get("user_api") == "blas"
    ]
    print(f"# numpy {np.__version__}, onnxruntime {ort.__version__}, 1 thread, BLAS {blas}")
    print(
        f"# OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')} "
        f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE')}"
    )
    hdr = (
        f"{'kernel':32s} {'stdops ms':>10s} {'ort ms':>8s} {'ratio':>6s}   {'median: stdops':>14s} "
        f"{'ort':>7s} {'ratio':>6s} {'max|diff|':>10s}"
    )
    print(hdr)
    print("-" * len(hdr))
    groups = {g for g in args.only.split(",") if g}
    for name, group, build in CASES:
        if groups and group not in groups:
            continue
        model, x = build()
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        ours = stdops.onnx.load(model)
        feeds = {"X": x}
        got = ours.run(feeds)
        want = sess.run(None, feeds)
        diff = max(float(np.max(np.abs(got[o.name].astype(np.float64) - w))) for o, w in zip(model.graph.output, want))
        (us_min, us_med), (ort_min, ort_med) = time_pair(
            lambda: ours.run(feeds), lambda: sess.run(None, feeds), args.repeat, args.budget
        )
        print(
            f"{name:32s} {us_min * 1e3:10.3f} {ort_min * 1e3:8.3f} {us_min / ort_min:6.2f}   "
            f"{us_med * 1e3:14.3f} {ort_med * 1e3:7.3f} {us_med / ort_med:6.2f} {diff:10.2e}",
            flush=True,
        )
    print("ratio = stdops / onnxruntime (< 1: stdops is faster); left block: minimum times, right: medians")


if __name__ == "__main__":
    main()
