"""Child process of ``runtimes.run_ncnn_wheel``: the ncnn wheel, exact-fp32 options, one extraction.

``python -m stdops.tools.ncnn_worker PARAM BIN IN.npz OUT.npz --inputs NAME... --outputs NAME...``; a blob the
wheel cannot extract is an error (exit 1, the reason on stderr).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

#: the options under which the wheel computes in float32 without the fast paths that change results
EXACT_OPTIONS = dict(
    num_threads=1,
    use_vulkan_compute=False,
    use_packing_layout=False,
    use_fp16_packed=False,
    use_fp16_storage=False,
    use_fp16_arithmetic=False,
    use_bf16_storage=False,
    use_winograd_convolution=False,
    use_sgemm_convolution=False,
)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("param")
    p.add_argument("weights")
    p.add_argument("fin")
    p.add_argument("fout")
    p.add_argument("--inputs", nargs="*", default=[])
    p.add_argument("--outputs", nargs="*", default=[])
    a = p.parse_args(argv)
    import ncnn

    net = ncnn.Net()
    net.opt.lightmode = False
    for k, v in EXACT_OPTIONS.items():
        setattr(net.opt, k, v)
    binary = a.param.endswith(".param.bin")
    if (net.load_param_bin(a.param) if binary else net.load_param(a.param)) != 0:
        print("the wheel refused the .param", file=sys.stderr)
        return 1
    if a.weights and net.load_model(a.weights) != 0:
        print("the wheel refused the .bin", file=sys.stderr)
        return 1
    ex = net.create_extractor()
    with np.load(a.fin) as z:
        arrays = [np.ascontiguousarray(z[f"arr_{k}"], dtype=np.float32) for k in range(len(a.inputs))]
    for name, arr in zip(a.inputs, arrays):
        # ncnn.Mat(array) borrows the array's memory: the array must outlive the clone
        ex.input(int(name) if binary else name, ncnn.Mat(arr).clone())
    out = []
    for name in a.outputs:
        ret, m = ex.extract(int(name) if binary else name)
        if ret != 0:
            print(f"the wheel could not extract blob {name!r} (status {ret})", file=sys.stderr)
            return 1
        out.append(np.array(m.numpy(), copy=True))
    np.savez(a.fout, *out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
