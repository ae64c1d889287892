"""Conv speed against onnxruntime (and optionally onnx.reference) on ResNet-18 / MobileNetV2 layer shapes.

One-node models built with onnx.helper (weights as initializers), batch 1, one thread for both;
a few pooling and ConvTranspose layers follow the Conv table.
Run with the BLAS tuning variables unset for this command only:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_conv.py [--reference]

Prints per layer the median time of each backend and the ratio stdops / onnxruntime.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import alternating, alternating_many  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import stdops.onnx  # noqa: E402

# name, C_in, H(=W), C_out, kernel, stride, pad, group
LAYERS = [
    ("resnet18 conv1 7x7/2", 3, 224, 64, 7, 2, 3, 1),
    ("ncnn resnet_small stem 7x7/2", 3, 224, 16, 7, 2, 3, 1),
    ("resnet18 l1 3x3 64", 64, 56, 64, 3, 1, 1, 1),
    ("resnet18 l2 3x3/2 64->128", 64, 56, 128, 3, 2, 1, 1),
    ("resnet18 l2 3x3 128", 128, 28, 128, 3, 1, 1, 1),
    ("resnet18 l2 down 1x1/2", 64, 56, 128, 1, 2, 0, 1),
    ("resnet18 l3 3x3/2 128->256", 128, 28, 256, 3, 2, 1, 1),
    ("resnet18 l3 3x3 256", 256, 14, 256, 3, 1, 1, 1),
    ("resnet18 l4 3x3/2 256->512", 256, 14, 512, 3, 2, 1, 1),
    ("resnet18 l4 3x3 512", 512, 7, 512, 3, 1, 1, 1),
    ("mbv2 stem 3x3/2", 3, 224, 32, 3, 2, 1, 1),
    ("mbv3 stem 3x3/2", 3, 224, 16, 3, 2, 1, 1),
    ("mbv2 expand 1x1 16->96", 16, 112, 96, 1, 1, 0, 1),
    ("mbv2 dw 3x3/2 96", 96, 112, 96, 3, 2, 1, 96),
    ("mbv2 dw 3x3 144", 144, 56, 144, 3, 1, 1, 144),
    ("mbv2 project 1x1 144->24", 144, 56, 24, 1, 1, 0, 1),
    ("mbv2 expand 1x1 32->192", 32, 28, 192, 1, 1, 0, 1),
    ("mbv2 dw 3x3 576", 576, 14, 576, 3, 1, 1, 576),
    ("mbv2 project 1x1 960->160", 960, 7, 160, 1, 1, 0, 1),
    # the rest of MobileNetV2's layer shapes (ops/_fast_pointwise.py's 1x1 layers, the depthwise kernels)
    ("mbv2 project 1x1 32->16", 32, 112, 16, 1, 1, 0, 1),
    ("mbv2 expand 1x1 24->144", 24, 56, 144, 1, 1, 0, 1),
    ("mbv2 project 1x1 192->32", 192, 28, 32, 1, 1, 0, 1),
    ("mbv2 expand 1x1 64->384", 64, 14, 384, 1, 1, 0, 1),
    ("mbv2 expand 1x1 96->576", 96, 14, 576, 1, 1, 0, 1),
    ("mbv2 project 1x1 576->96", 576, 14, 96, 1, 1, 0, 1),
    ("mbv2 expand 1x1 160->960", 160, 7, 960, 1, 1, 0, 1),
    ("mbv2 last 1x1 320->1280", 320, 7, 1280, 1, 1, 0, 1),
    ("mbv2 dw 3x3 32", 32, 112, 32, 3, 1, 1, 32),
    ("mbv2 dw 3x3/2 144", 144, 56, 144, 3, 2, 1, 144),
    ("mbv2 dw 3x3 192", 192, 28, 192, 3, 1, 1, 192),
    ("mbv2 dw 3x3/2 192", 192, 28, 192, 3, 2, 1, 192),
    ("mbv2 dw 3x3 384", 384, 14, 384, 3, 1, 1, 384),
    ("mbv2 dw 3x3/2 576", 576, 14, 576, 3, 2, 1, 576),
    ("mbv2 dw 3x3 960", 960, 7, 960, 3, 1, 1, 960),
    ("effnet dw 5x5 240", 240, 28, 240, 5, 1, 2, 240),
    ("effnet dw 5x5/2 240", 240, 28, 240, 5, 2, 2, 240),
    ("effnet dw 5x5 672", 672, 14, 672, 5, 1, 2, 672),
]


def conv_model(c, h, m, k, s, p, g, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((m, c // g, k, k), dtype=np.float32) * np.float32(0.1)
    b = rng.standard_normal((m,), dtype=np.float32)
    node = helper.make_node("Conv", ["X", "W", "B"], ["Y"], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, group=g)
    graph = helper.make_graph(
        [node],
        "conv",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, c, h, h])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((1, c, h, h), dtype=np.float32)
    return model, x


# name, op, x shape, attrs, initializers (name -> shape), outputs
OTHERS = [
    (
        "resnet18 maxpool 3x3/2",
        "MaxPool",
        (1, 64, 112, 112),
        dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        {},
        1,
    ),
    (
        "maxpool 3x3/2 + Indices",
        "MaxPool",
        (1, 64, 112, 112),
        dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        {},
        2,
    ),
    (
        "avgpool 3x3/1 64@56",
        "AveragePool",
        (1, 64, 56, 56),
        dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
        {},
        1,
    ),
    ("global avgpool 512@7", "GlobalAveragePool", (1, 512, 7, 7), {}, {}, 1),
    ("global avgpool 1280@7", "GlobalAveragePool", (1, 1280, 7, 7), {}, {}, 1),
    (
        "convT 4x4/2 256->128 @14",
        "ConvTranspose",
        (1, 256, 14, 14),
        dict(kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1]),
        {"W": (256, 128, 4, 4)},
        1,
    ),
    (
        "convT 2x2/2 64->32 @56",
        "ConvTranspose",
        (1, 64, 56, 56),
        dict(kernel_shape=[2, 2], strides=[2, 2]),
        {"W": (64, 32, 2, 2)},
        1,
    ),
]


def other_model(op, shape, attrs, inits, n_out, seed=0):
    rng = np.random.default_rng(seed)
    outs = ["Y", "I"][:n_out]
    node = helper.make_node(op, ["X"] + list(inits), outs, **attrs)
    graph = helper.make_graph(
        [node],
        op,
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT if o == "Y" else TensorProto.INT64, None) for o in outs],
        [
            numpy_helper.from_array(rng.standard_normal(s, dtype=np.float32) * np.float32(0.1), k)
            for k, s in inits.items()
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, rng.standard_normal(shape, dtype=np.float32)


def _stem_layer(model) -> bool:
    """Whether the one Conv of ``model`` takes the stem kernel (ops/_fast_stem.py) on this machine."""
    from stdops.ops import _fast_stem
    from stdops.ops.conv import prepare_conv_weight

    node = model.graph.node[0]
    attrs = {a.name: list(a.ints) if a.ints else a.i for a in node.attribute}
    w = numpy_helper.to_array(model.graph.initializer[0])
    if attrs.get("group", 1) != 1:
        return False
    h = model.graph.input[0].type.tensor_type.shape.dim[2].dim_value
    k, s, p = w.shape[2], attrs["strides"][0], attrs["pads"][0]
    out = ((h + 2 * p - k) // s + 1,) * 2
    return _fast_stem.takes(prepare_conv_weight(w), 2, out, attrs["strides"], (1, 1))


def timeit(fn, repeat, budget=1.0):
    fn()
    fn()
    times = []
    t_end = time.perf_counter() + budget
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if time.perf_counter() > t_end and len(times) >= 5:
            break
    return statistics.median(times)


def time_pair(fa, fb, repeat, budget=2.0):
    """Median times of fa and fb, measured alternately so that both see the same machine load."""
    ta, tb = alternating(fa, fb, repeat, budget)
    return statistics.median(ta), statistics.median(tb)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--reference", action="store_true", help="also time onnx.reference")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-fast", action="store_true", help="the NumPy kernels only (no numba)")
    ap.add_argument(
        "--old-stem",
        action="store_true",
        help="also time the layers the stem kernel takes (ops/_fast_stem.py) on the path they took before it",
    )
    ap.add_argument("--only", default="", help="run only the rows whose name contains this text")
    args = ap.parse_args()
    if args.no_fast:
        from stdops.ops import _fast

        _fast.set_enabled(False)

    import onnxruntime as ort
    from threadpoolctl import threadpool_info, threadpool_limits

    threadpool_limits(args.threads)
    blas = [(i.get("internal_api"), i.get("architecture"), i.get("num_threads")) for i in threadpool_info()]
    print(f"# numpy {np.__version__}, onnxruntime {ort.__version__}, threads {args.threads}, BLAS {blas}")
    print(
        f"# OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')} "
        f"OPENBLAS_L2_SIZE={os.environ.get('OPENBLAS_L2_SIZE')}"
    )
    from stdops.ops import _fast_stem

    hdr = f"{'layer':30s} {'GFLOP':>6s} {'stdops ms':>10s} {'ort ms':>8s} {'ratio':>6s}"
    if args.old_stem:
        hdr += f" {'pre-stem ms':>11s}"
    if args.reference:
        hdr += f" {'ref ms':>8s}"
    print(hdr)
    ratios = []
    cases = [
        (name, *conv_model(c, h, m, k, s, p, g), 2 * m * (c // g) * k * k * ((h + 2 * p - k) // s + 1) ** 2 / 1e9)
        for name, c, h, m, k, s, p, g in LAYERS
    ]
    cases += [
        (name, *other_model(op, shape, attrs, inits, n_out), 0.0) for name, op, shape, attrs, inits, n_out in OTHERS
    ]
    for i, (name, model, x, gflop) in enumerate(cases):
        if args.only not in name:
            continue
        if i == len(LAYERS) and ratios:
            print(f"# geometric mean ratio over the Conv layers: {float(np.exp(np.mean(np.log(ratios)))):.2f}")
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        ours = stdops.onnx.load(model)
        refs = sess.run(None, {"X": x})
        got = ours.run({"X": x})
        err = max(
            float(np.max(np.abs(got[o.name].astype(np.float64) - r)) / (np.max(np.abs(r)) + 1e-12))
            for o, r in zip(model.graph.output, refs)
        )
        stem = args.old_stem and model.graph.node[0].op_type == "Conv" and _stem_layer(model)
        if stem:  # the stem path and the one before it (its USE off), alternating with onnxruntime

            def new_path():
                _fast_stem.USE = True

            def old_path():
                _fast_stem.USE = False

            run_ours = lambda: ours.run({"X": x})  # noqa: E731
            tn, tr, to = alternating_many(
                [run_ours, lambda: sess.run(None, {"X": x}), run_ours], args.repeat, 2.0, [new_path, None, old_path]
            )
            new_path()
            t_us, t_ort, t_old = (statistics.median(t) for t in (tn, tr, to))
        else:
            t_us, t_ort = time_pair(lambda: ours.run({"X": x}), lambda: sess.run(None, {"X": x}), args.repeat)
        ratio = t_us / t_ort
        ratios.append(ratio)
        line = f"{name:30s} {gflop:6.3f} {t_us * 1e3:10.3f} {t_ort * 1e3:8.3f} {ratio:6.2f}"
        if args.old_stem:
            line += f" {t_old * 1e3:11.3f}" if stem else f" {'-':>11s}"
        if args.reference:
            from onnx.reference import ReferenceEvaluator

            ref = ReferenceEvaluator(model)
            t_ref = timeit(lambda: ref.run(None, {"X": x}), 3, budget=0.5)
            line += f" {t_ref * 1e3:8.2f}"
        if err > 1e-4:
            line += f"  MISMATCH rel err {err:.2e}"
        print(line, flush=True)
    geo = float(np.exp(np.mean(np.log(ratios))))
    print(f"# geometric mean ratio stdops/onnxruntime, all rows: {geo:.2f}")


if __name__ == "__main__":
    main()
