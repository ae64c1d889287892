"""A user's --check for `stdops reduce` on ncnn: exit 1 when the candidate .param, run in stdops, differs from
the ORIGINAL net run by the ncnn wheel fed at the same blobs (the wheel's Extractor takes any blob as input).
Usage: ncnn_original_net.py CANDIDATE.param ORIGINAL.param ORIGINAL.bin -i NAME=FILE.npy ..."""

import sys

import ncnn
import numpy as np

import stdops

candidate, param, weights = sys.argv[1:4]
rest = sys.argv[4:]
feeds = {}
for k in range(0, len(rest), 2):
    name, path = rest[k + 1].split("=", 1)
    feeds[name] = np.ascontiguousarray(np.load(path), dtype=np.float32)
ours = stdops.load(candidate).run(feeds)
net = ncnn.Net()
for option in (
    "use_winograd_convolution",
    "use_sgemm_convolution",
    "use_packing_layout",
    "use_fp16_storage",
    "use_fp16_packed",
    "use_fp16_arithmetic",
    "use_bf16_storage",
):
    setattr(net.opt, option, False)
net.opt.num_threads = 1
if net.load_param(param) != 0 or net.load_model(weights) != 0:
    sys.exit("the wheel refused the original net")
ex = net.create_extractor()
for name, value in feeds.items():
    ex.input(name, ncnn.Mat(value).clone())  # value stays referenced by feeds while the Mat is cloned
differ = []
for name, value in ours.items():
    ret, mat = ex.extract(name)
    if ret != 0 or not np.allclose(value, np.array(mat.numpy()), rtol=1e-4, atol=1e-4):
        differ.append(name)
print("differ:", differ)
sys.exit(1 if differ else 0)
