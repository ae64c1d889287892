"""stdops vs the official ncnn wheel on the ResNet-style fixture (tests/ncnn/fixtures/resnet_small, made by
pnnx; fed a 224x224 input by default), measured in the same run at 1 and 2 threads, with the wheel's default
options and with exact-fp32 options (no fp16 storage/arithmetic, no packing, no Winograd/sgemm).

    python benchmarks/bench_ncnn.py [--fixture resnet_small] [--threads 1,2] [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "ncnn"))
sys.path.insert(0, HERE)


def _median_ms(fn, repeat: int) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(ts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixture", default="resnet_small")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument(
        "--size", type=int, default=224, help="input height/width fed to the fixture (0: its own 64x64 input)"
    )
    args = ap.parse_args(argv)

    import ncnn
    from run import blas_line
    from threadpoolctl import threadpool_limits
    from wheel import EXACT_OPTIONS

    import stdops.ncnn as sn
    from stdops.perf import tune_allocator

    tune_allocator()
    folder = os.path.join(HERE, "..", "tests", "ncnn", "fixtures", args.fixture)
    param, binf = os.path.join(folder, "model.param"), os.path.join(folder, "model.bin")
    x = np.load(os.path.join(folder, "in0.npy"))
    if args.size:
        x = np.random.default_rng(0).standard_normal((x.shape[0], args.size, args.size)).astype(np.float32)
    ours = sn.Net.load(param, binf)
    name_in, name_out = ours.input_names[0], ours.output_names[0]
    print(blas_line())
    print(f"fixture {args.fixture}: input {x.shape}; ncnn wheel {ncnn.__version__}")
    print(
        f"{'thr':>4}{'stdops ms':>11}{'ncnn default ms':>17}{'ratio':>8}{'ncnn exact ms':>15}{'ratio':>8}"
        f"{'max|diff| vs exact':>20}"
    )
    for threads in [int(t) for t in args.threads.split(",") if t]:
        results = {}
        for label, opts in (
            ("default", {"num_threads": threads}),
            ("exact", {**EXACT_OPTIONS, "num_threads": threads}),
        ):
            net = ncnn.Net()
            for k, v in opts.items():
                setattr(net.opt, k, v)
            net.load_param(param)
            net.load_model(binf)
            mat = ncnn.Mat(np.ascontiguousarray(x)).clone()

            def run_wheel(net=net, mat=mat):
                ex = net.create_extractor()
                ex.input(name_in, mat)
                return ex.extract(name_out)[1]

            results[label] = (_median_ms(run_wheel, args.repeat), np.array(run_wheel().numpy(), copy=True))
        with threadpool_limits(limits=threads):
            t_ours = _median_ms(lambda: ours.run({name_in: x}), args.repeat)
            y = ours.run({name_in: x})[name_out]
        diff = float(np.max(np.abs(y - results["exact"][1])))
        print(
            f"{threads:>4}{t_ours:>11.2f}{results['default'][0]:>17.2f}{t_ours / results['default'][0]:>7.2f}x"
            f"{results['exact'][0]:>15.2f}{t_ours / results['exact'][0]:>7.2f}x{diff:>20.2e}"
        )
    print("ratio = stdops time / ncnn time (lower is better for stdops)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
