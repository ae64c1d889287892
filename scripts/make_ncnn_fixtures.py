"""Make the ncnn model fixtures in tests/ncnn/fixtures/ (not part of the test run; torch and pnnx only here).

Two steps, in two environments:

    # 1. export small torch modules to ncnn with pnnx (an environment with torch==2.13.0 and pnnx):
    python scripts/make_ncnn_fixtures.py export --out tests/ncnn/fixtures
    # 2. record the official ncnn wheel's outputs (the project venv, which has the `ncnn` test extra):
    .venv/bin/python scripts/make_ncnn_fixtures.py expect --out tests/ncnn/fixtures

Each fixture folder holds model.param, model.bin, the input(s) in0.npy ... and the wheel's outputs under
exact-fp32 options, out0.npy ... (tests compare stdops against those within 1e-4).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np


def _modules():
    import torch
    from torch import nn

    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNetSmall(nn.Module):
        """ResNet-style: stem, 4 stages of basic blocks, global pooling, classifier."""

        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(
                nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
            )
            self.layers = nn.Sequential(Block(16, 16, 1), Block(16, 32, 2), Block(32, 64, 2), Block(64, 64, 2))
            self.fc = nn.Linear(64, 10)

        def forward(self, x):
            x = self.layers(self.stem(x))
            x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
            return torch.softmax(self.fc(x), dim=1)

    class RecurrentNet(nn.Module):
        """An LSTM and a GRU stacked, with a linear head."""

        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(16, 32, batch_first=True)
            self.gru = nn.GRU(32, 24, batch_first=True, bidirectional=True)
            self.head = nn.Linear(48, 5)

        def forward(self, x):
            y, _ = self.lstm(x)
            y, _ = self.gru(torch.tanh(y))
            return self.head(y)

    class TransformerBlock(nn.Module):
        """Pre-norm encoder block: multi-head self-attention and a GELU feed-forward."""

        def __init__(self, d=64, heads=4):
            super().__init__()
            self.n1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.n2 = nn.LayerNorm(d)
            self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            h = self.n1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.ff(self.n2(x))

    def randomize_bn(m):
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.data.uniform_(0.5, 1.5)
                mod.bias.data.uniform_(-0.2, 0.2)
        return m.eval()

    return {
        "resnet_small": (randomize_bn(ResNetSmall()), (torch.randn(1, 3, 64, 64),)),
        "recurrent": (RecurrentNet().eval(), (torch.randn(1, 12, 16),)),
        "transformer_block": (TransformerBlock().eval(), (torch.randn(1, 20, 64),)),
    }


def export(out: str) -> None:
    import pnnx

    for name, (module, inputs) in _modules().items():
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            cwd = os.getcwd()
            os.chdir(tmp)
            try:
                pnnx.export(module, "model.pt", inputs, fp16=False, check_trace=False)
            finally:
                os.chdir(cwd)
            shutil.copy(os.path.join(tmp, "model.ncnn.param"), os.path.join(folder, "model.param"))
            shutil.copy(os.path.join(tmp, "model.ncnn.bin"), os.path.join(folder, "model.bin"))
        for k, t in enumerate(inputs):
            x = t.detach().numpy().astype(np.float32)
            np.save(os.path.join(folder, f"in{k}.npy"), x[0])  # pnnx drops the batch axis
        print("exported", folder)


def expect(out: str) -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ncnn"))
    import ncnn
    from wheel import EXACT_OPTIONS  # noqa: E402

    for name in sorted(os.listdir(out)):
        folder = os.path.join(out, name)
        param = os.path.join(folder, "model.param")
        if not os.path.exists(param):
            continue
        net = ncnn.Net()
        for k, v in EXACT_OPTIONS.items():
            setattr(net.opt, k, v)
        net.load_param(param)
        net.load_model(os.path.join(folder, "model.bin"))
        names_in = [n for n in net.input_names()]
        names_out = [n for n in net.output_names()]
        ex = net.create_extractor()
        for k, n in enumerate(names_in):
            x = np.load(os.path.join(folder, f"in{k}.npy"))
            ex.input(n, ncnn.Mat(np.ascontiguousarray(x)).clone())
        for k, n in enumerate(names_out):
            ret, m = ex.extract(n)
            assert ret == 0, (name, n, ret)
            np.save(os.path.join(folder, f"out{k}.npy"), np.array(m.numpy(), copy=True))
        with open(os.path.join(folder, "blobs.json"), "w") as f:
            json.dump({"inputs": names_in, "outputs": names_out, "ncnn": ncnn.__version__}, f, indent=1)
        print("expected", folder, names_in, names_out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["export", "expect"])
    ap.add_argument("--out", default="tests/ncnn/fixtures")
    a = ap.parse_args()
    (export if a.step == "export" else expect)(a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
