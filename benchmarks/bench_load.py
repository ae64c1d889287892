"""ONNX load time against the number of nodes: a chain of Identity / Add nodes (10k, 30k, 100k by default).

Load must be linear in the node count (issue 9: it was quadratic, 41 s for 30k nodes). Each size is
timed alternately with onnxruntime's session creation on the same bytes (graph optimizations off, so it
does comparable work: parse, check, build), and the report gives seconds, microseconds per node, the
ratio to onnxruntime, and how the time per node grows from the smallest size to the largest.

    python benchmarks/bench_load.py [--sizes 10000,30000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import alternating  # noqa: E402

import stdops.onnx as so  # noqa: E402


def chain_model(n_nodes: int) -> bytes:
    """x -> (Identity, Add one)* -> y: ``n_nodes`` nodes, alternating, every value used once."""
    nodes = []
    prev = "x"
    for k in range(n_nodes):
        out = f"v{k}"
        if k % 2:
            nodes.append(helper.make_node("Add", [prev, "one"], [out], name=f"add{k}"))
        else:
            nodes.append(helper.make_node("Identity", [prev], [out], name=f"id{k}"))
        prev = out
    nodes.append(helper.make_node("Identity", [prev], ["y"], name="out"))
    g = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.ones(4, np.float32), "one")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,30000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        data = chain_model(n)
        x = np.arange(4, dtype=np.float32)
        m = so.load(data)  # the loaded model is correct: y = x + (number of Add nodes)
        np.testing.assert_array_equal(m.run({"x": x})["y"], x + n // 2)
        t_ours, t_ort = alternating(
            lambda data=data: so.load(data),
            lambda data=data: ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"]),
            repeat=args.repeat,
            budget=0.0,
        )
        ours, peer = min(t_ours), min(t_ort)
        rows.append((n, len(data), ours, peer))
        print(
            f"{n:>7} nodes ({len(data) / 1024:7.0f} KiB): stdops load {ours:6.2f} s ({ours / n * 1e6:5.1f} us/node), "
            f"onnxruntime session {peer:6.2f} s; ratio {ours / peer:5.2f}",
            flush=True,
        )
    if len(rows) > 1:
        (n0, _, t0, _), (n1, _, t1, _) = rows[0], rows[-1]
        print(f"time per node, {n1} vs {n0} nodes: x{(t1 / n1) / (t0 / n0):.2f} (1.0 = linear)")


if __name__ == "__main__":
    main()
