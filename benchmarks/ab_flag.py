"""A/B of one module attribute (a kernel's ``USE`` switch, a threshold) on a whole model, with the peer in the same
rounds (1 thread unless ``--threads``).

    python benchmarks/ab_flag.py MODEL [WEIGHTS] --flag stdops.ops._fast_winochan.USE --values False,True
                                 [--shape 3,224,224] [--rounds 100] [--budget 60] [--threads 2]

The model is loaded four times, with the values A B B A (the attribute set before each load: routes and packed
weights are chosen then and at the first run, which follows the load). Each round calls the four nets and then the
peer (onnxruntime for ONNX, the ncnn wheel with its default options for ncnn), each timed by the calling thread's CPU
time. The first net runs right after the peer, its caches cold: on a 2 ms model that costs a third of its time (the
ncnn ResNet-style fixture: 1.76 ms alone, 2.35 alternating with the wheel), enough to credit a "gain" to whichever
value sits there. So the comparison is of the nets in matching slots, each after another stdops net: A = the 4th, B =
the mean of the 2nd and 3rd (min of the rounds each); the 1st is printed for reference. The attribute is set again
before each net's call, for switches read at call time (a split threshold).

With ``--threads N`` (N > 1) every runtime gets N threads, times are wall time, and each net and the peer run in
turns of 3 calls of which the last 2 count (each runtime's threads spin for a while after its call: bench_zoo.py).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import alternating_many  # noqa: E402


def _value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _feeds(model_path: str, names, shapes) -> dict:
    rng = np.random.default_rng(0)
    folder = os.path.dirname(model_path)
    out = {}
    for name, shape in zip(names, shapes):
        path = os.path.join(folder, f"{name}.npy")
        out[name] = np.load(path) if os.path.exists(path) else rng.standard_normal(shape).astype(np.float32)
    return out


def _onnx(path: str, threads: int = 1):
    import onnx
    import onnxruntime as ort

    import stdops.onnx

    model = onnx.load(path)
    names = [i.name for i in model.graph.input]
    shapes = [[d.dim_value or 1 for d in i.type.tensor_type.shape.dim] for i in model.graph.input]
    feeds = _feeds(path, names, shapes)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return (lambda: stdops.onnx.load(model)), feeds, (lambda: sess.run(None, feeds)), "onnxruntime"


def _ncnn(path: str, weights: str | None, shape=None, threads: int = 1):
    import ncnn

    import stdops.ncnn as sn

    probe = sn.Net.load(path, weights)
    feeds = {}
    for name in probe.input_names:
        if shape is not None:  # random values of that shape (the benchmark's 224 x 224 for the ResNet-style fixture)
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        else:
            x = np.load(os.path.join(os.path.dirname(path), f"{name}.npy"))
            x = x[0] if x.ndim > 1 and x.shape[0] == 1 else x  # the zoo's inputs carry a batch axis, ncnn blobs none
        feeds[name] = np.ascontiguousarray(x.astype(np.int32 if x.dtype.kind in "iu" else np.float32))
    net = ncnn.Net()
    net.opt.num_threads = threads
    net.load_param(path)
    net.load_model(weights or os.path.splitext(path)[0] + ".bin")
    mats = {k: ncnn.Mat(v.view(np.float32) if v.dtype == np.int32 else v).clone() for k, v in feeds.items()}
    out = probe.output_names[0]

    def wheel():
        ex = net.create_extractor()
        for k, m in mats.items():
            ex.input(k, m)
        return ex.extract(out)[1]

    return (lambda: sn.Net.load(path, weights)), feeds, wheel, "the ncnn wheel"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("weights", nargs="?")
    ap.add_argument("--flag", required=True, help="module.attribute, e.g. stdops.ops._fast_gemm.USE")
    ap.add_argument("--values", required=True, help="A,B (Python literals)")
    ap.add_argument("--shape", help="ncnn: feed random values of this shape (C,H,W) instead of the model's input file")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    threadpool_limits(args.threads)
    module_name, attr = args.flag.rsplit(".", 1)
    module = importlib.import_module(module_name)
    a, b = (_value(v) for v in args.values.split(","))
    if args.model.endswith(".onnx"):
        load, feeds, peer, peer_name = _onnx(args.model, args.threads)
    else:
        shape = tuple(int(d) for d in args.shape.split(",")) if args.shape else None
        load, feeds, peer, peer_name = _ncnn(args.model, args.weights, shape, args.threads)
    nets, values = [], (a, b, b, a)
    for v in values:
        setattr(module, attr, v)
        net = load()
        net.run(feeds)  # the first run picks the routes
        nets.append(net)
    first = nets[0].run(feeds)
    second = nets[1].run(feeds)
    diff = max(float(np.max(np.abs(np.asarray(first[k]) - np.asarray(second[k])))) for k in first)
    fns = [lambda n=n: n.run(feeds) for n in nets] + [peer]
    before = [lambda v=v: setattr(module, attr, v) for v in values] + [None]
    one = args.threads == 1
    clock, calls = (time.thread_time, 1) if one else (time.perf_counter, 3)
    ts = alternating_many(fns, args.rounds, args.budget, before, clock, calls)
    ms = [1e3 * min(t) for t in ts]
    ta, tb = ms[3], (ms[1] + ms[2]) / 2
    n = len(ts[0])
    print(f"{args.flag}: {a!r} -> {b!r}; max|A - B| over the outputs {diff:.2e}; {n} calls at {args.threads} threads")
    print(f"  A={a!r}: {ta:.3f} ms (4th net; the 1st, after the peer: {ms[0]:.3f})")
    print(f"  B={b!r}: {tb:.3f} ms (2nd {ms[1]:.3f}, 3rd {ms[2]:.3f})")
    print(f"  {peer_name}: {ms[4]:.3f} ms")
    print(f"  B / A {tb / ta:.3f}; A / peer {ta / ms[4]:.3f}, B / peer {tb / ms[4]:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
