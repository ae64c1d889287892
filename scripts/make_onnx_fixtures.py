"""Make tests/onnx/fixtures/: models exported by torch.onnx (the TorchScript exporter real users meet) at
several opsets, with onnxruntime's outputs recorded beside them (not part of the test run).

    # 1. in an environment with torch==2.13.0 and onnx:
    python scripts/make_onnx_fixtures.py export --out tests/onnx/fixtures
    # 2. in the project venv (onnxruntime is a test extra):
    .venv/bin/python scripts/make_onnx_fixtures.py expect --out tests/onnx/fixtures

The torch modules are the ones of scripts/make_ncnn_fixtures.py (a ResNet-style CNN, an LSTM+GRU net, a
transformer block); each fixture is NAME.onnx, NAME.in.npy and NAME.out.npy.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import warnings

import numpy as np

#: (module, opset): old opsets exercise the version adapters
EXPORTS = [("resnet_small", 11), ("recurrent", 14), ("transformer_block", 17)]


def export(out: str) -> None:
    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from make_ncnn_fixtures import _modules

    warnings.simplefilter("ignore")
    mods = _modules()
    os.makedirs(out, exist_ok=True)
    for name, opset in EXPORTS:
        module, inputs = mods[name]
        stem = os.path.join(out, f"{name}_opset{opset}")
        torch.onnx.export(module, inputs, stem + ".onnx", opset_version=opset, dynamo=False)
        np.save(stem + ".in.npy", inputs[0].detach().numpy().astype(np.float32))
        print("exported", stem)


def expect(out: str) -> None:
    import onnxruntime as ort

    for path in sorted(glob.glob(os.path.join(out, "*.onnx"))):
        stem = path[: -len(".onnx")]
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        x = np.load(stem + ".in.npy")
        y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
        np.save(stem + ".out.npy", y)
        print("expected", stem, y.shape)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["export", "expect"])
    ap.add_argument("--out", default="tests/onnx/fixtures")
    a = ap.parse_args()
    (export if a.step == "export" else expect)(a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
