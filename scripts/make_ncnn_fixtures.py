"""Make the ncnn model fixtures (not part of the test run; torch, torchvision and pnnx only here).

Small modules go to tests/ncnn/fixtures/<name>/ (committed); real networks (torchvision, random weights)
to tests/ncnn/networks/<name>/ (generated, not committed: tens of MB each), with their checksums in the
committed manifest tests/ncnn/networks.json, which the tests check before using a generated folder.

    # 0. the exporter's own environment (.venv-pnnx: torch 2.14.1 + torchvision 0.29.1 from local disk, pnnx):
    python3 scripts/make_ncnn_fixtures.py setup
    # 1. export with pnnx (in .venv-pnnx):
    .venv-pnnx/bin/python scripts/make_ncnn_fixtures.py export            # small modules -> fixtures/
    .venv-pnnx/bin/python scripts/make_ncnn_fixtures.py export-networks   # networks -> networks/
    # 2. record the official ncnn wheel's outputs (the project venv, which has the `ncnn` test extra):
    .venv/bin/python scripts/make_ncnn_fixtures.py expect
    .venv/bin/python scripts/make_ncnn_fixtures.py expect --networks      # also writes networks.json

Each folder holds model.param, model.bin, the input(s) in0.npy ... (int32 for token ids) and the wheel's
outputs, out0.npy ..., under exact-fp32 options (where the wheel crashes with packing off - DeepLabV3's
dilation-24 convolution - with packing on, recorded in blobs.json). Tests compare stdops against them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
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


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURES = os.path.join(ROOT, "tests", "ncnn", "fixtures")
NETWORKS = os.path.join(ROOT, "tests", "ncnn", "networks")
MANIFEST = os.path.join(ROOT, "tests", "ncnn", "networks.json")
EXPORT_VENV = os.path.join(ROOT, ".venv-pnnx")
#: the exporter's environment: torchvision needs this torch (both from local disk on these machines)
EXPORT_PACKAGES = ["torch==2.14.1", "torchvision==0.29.1", "pnnx==20261020"]


def _randomize(m):
    """Random weights for every layer (torch's init) plus random BatchNorm statistics, so folding them
    into the convolutions is exercised; eval mode."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(1)
    for mod in m.modules():
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            n = mod.num_features
            mod.running_mean.copy_((torch.rand(n, generator=g) - 0.5) * 0.4)
            mod.running_var.copy_(torch.rand(n, generator=g) + 0.5)
            mod.weight.data.copy_(torch.rand(n, generator=g) + 0.5)
            mod.bias.data.copy_((torch.rand(n, generator=g) - 0.5) * 0.4)
    return m.eval()


def _small_networks():
    """Real architectures at a size worth committing (a few hundred KB): a ViT from torchvision's own
    VisionTransformer class, a text classifier (Embedding -> LSTM -> Linear) and a transformer encoder."""
    import torch
    import torchvision
    from torch import nn

    torch.manual_seed(0)

    class TextLSTM(nn.Module):
        """Token ids -> Embedding -> bidirectional LSTM -> linear head per token."""

        def __init__(self, vocab=200, d=32, hidden=48, classes=6):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.lstm = nn.LSTM(d, hidden, batch_first=True, bidirectional=True)
            self.head = nn.Linear(2 * hidden, classes)

        def forward(self, ids):
            y, _ = self.lstm(self.embed(ids))
            return self.head(y)

    class Encoder(nn.Module):
        """torch's TransformerEncoder (2 post-norm layers, ReLU feed-forward), run by module (no fast path)."""

        def __init__(self, d=64, heads=4):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=128, dropout=0.0, batch_first=True)
            self.enc = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)

        def forward(self, x):
            return self.enc(x)

    vit = torchvision.models.VisionTransformer(
        image_size=64, patch_size=16, num_layers=2, num_heads=4, hidden_dim=64, mlp_dim=128, num_classes=10
    )
    # torchvision zero-initializes the classifier head and the class token: random ones, so the output
    # depends on every layer
    nn.init.normal_(vit.heads.head.weight, std=0.2)
    nn.init.normal_(vit.heads.head.bias, std=0.2)
    nn.init.normal_(vit.class_token, std=0.2)
    ids = torch.randint(0, 200, (1, 16))
    return {
        "vit_tiny": (vit.eval(), (torch.randn(1, 3, 64, 64),)),
        "text_lstm": (TextLSTM().eval(), (ids,)),
        "transformer_encoder": (Encoder().eval(), (torch.randn(1, 24, 64),)),
    }


def _big_networks():
    """torchvision architectures with random weights (no download: weights=None)."""
    import torch
    import torchvision.models as tm
    import torchvision.models.segmentation as ts

    torch.manual_seed(0)
    x224 = (torch.randn(1, 3, 224, 224),)
    return {
        "resnet18": (lambda: tm.resnet18(weights=None), x224),
        "mobilenet_v2": (lambda: tm.mobilenet_v2(weights=None), x224),
        "mobilenet_v3_large": (lambda: tm.mobilenet_v3_large(weights=None), x224),
        "mobilenet_v3_small": (lambda: tm.mobilenet_v3_small(weights=None), x224),
        "shufflenet_v2_x1_0": (lambda: tm.shufflenet_v2_x1_0(weights=None), x224),
        "efficientnet_b0": (lambda: tm.efficientnet_b0(weights=None), x224),
        "convnext_tiny": (lambda: tm.convnext_tiny(weights=None), x224),
        "deeplabv3_mobilenet_v3_large": (
            lambda: ts.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=False),
            x224,
        ),
        "lraspp_mobilenet_v3_large": (
            lambda: ts.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None),
            x224,
        ),
    }


def _export_one(folder: str, module, inputs) -> None:
    import pnnx
    import torch

    class Plain(torch.nn.Module):
        """Segmentation models return a dict; pnnx wants tensors."""

        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *xs):
            y = self.m(*xs)
            return y["out"] if isinstance(y, dict) else y

    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            # grad enabled: torch's TransformerEncoderLayer takes its fused fast path (an op pnnx cannot
            # write) only without grad
            pnnx.export(Plain(module).eval(), "model.pt", inputs, fp16=False, check_trace=False)
        finally:
            os.chdir(cwd)
        shutil.copy(os.path.join(tmp, "model.ncnn.param"), os.path.join(folder, "model.param"))
        shutil.copy(os.path.join(tmp, "model.ncnn.bin"), os.path.join(folder, "model.bin"))
    for k, t in enumerate(inputs):
        x = t.detach().numpy()
        x = x.astype(np.int32) if x.dtype.kind in "iu" else x.astype(np.float32)
        np.save(os.path.join(folder, f"in{k}.npy"), x[0])  # pnnx drops the batch axis
    print("exported", folder, flush=True)


def export_networks(out: str, only: list[str] | None) -> None:
    for name, (make, inputs) in _big_networks().items():
        if only and name not in only:
            continue
        _export_one(os.path.join(out, name), _randomize(make()), inputs)


def setup() -> None:
    """Create .venv-pnnx with the exporter's packages (kept out of the project's own venv)."""
    if not os.path.exists(os.path.join(EXPORT_VENV, "bin", "python")):
        subprocess.check_call([sys.executable, "-m", "venv", EXPORT_VENV])
    subprocess.check_call([os.path.join(EXPORT_VENV, "bin", "python"), "-m", "pip", "install", *EXPORT_PACKAGES])


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def export(out: str, only: list[str] | None) -> None:
    for name, (module, inputs) in {**_modules(), **_small_networks()}.items():
        if only and name not in only:
            continue
        _export_one(os.path.join(out, name), module, inputs)


def _wheel_outputs(folder: str, options: dict) -> tuple[list[str], list[str], list[np.ndarray]]:
    import ncnn

    net = ncnn.Net()
    for k, v in options.items():
        setattr(net.opt, k, v)
    if net.load_param(os.path.join(folder, "model.param")) != 0:
        raise RuntimeError("the wheel refused model.param")
    if net.load_model(os.path.join(folder, "model.bin")) != 0:
        raise RuntimeError("the wheel refused model.bin")
    names_in, names_out = list(net.input_names()), list(net.output_names())
    ex = net.create_extractor()
    keep = []
    for k, n in enumerate(names_in):
        x = np.ascontiguousarray(np.load(os.path.join(folder, f"in{k}.npy")))
        keep.append(x)  # ncnn.Mat(ndarray) is a view: an int32 array feeds int32 bits (Embed reads those)
        ex.input(n, ncnn.Mat(x).clone())
    outs = []
    for n in names_out:
        ret, m = ex.extract(n)
        if ret != 0:
            raise RuntimeError(f"extract {n} returned {ret}")
        outs.append(np.array(m.numpy(), copy=True))
    return names_in, names_out, outs


def _forked(fn, *args):
    """fn(*args) in a forked child (the wheel can segfault); None when it crashed."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)

    def run():
        try:
            child.send(("ok", fn(*args)))
        except BaseException as e:  # noqa: BLE001
            child.send(("error", f"{type(e).__name__}: {e}"))

    p = ctx.Process(target=run)
    p.start()
    child.close()
    try:
        status, payload = parent.recv()
    except EOFError:
        p.join()
        return None, f"crashed (exit code {p.exitcode})"
    p.join()
    return (payload, "") if status == "ok" else (None, payload)


def expect(out: str, manifest: str | None = None, only: list[str] | None = None) -> None:
    sys.path.insert(0, os.path.join(ROOT, "tests", "ncnn"))
    import ncnn
    from wheel import EXACT_OPTIONS  # noqa: E402

    entries = {}
    for name in sorted(os.listdir(out)):
        folder = os.path.join(out, name)
        if not os.path.exists(os.path.join(folder, "model.param")) or (only and name not in only):
            continue
        options, note = dict(EXACT_OPTIONS), "exact fp32 options"
        res, err = _forked(_wheel_outputs, folder, options)
        if res is None:  # DeepLabV3: the wheel segfaults on a dilated convolution with packing off
            options["use_packing_layout"] = True
            note = f"packing on (with packing off the wheel {err})"
            res, err = _forked(_wheel_outputs, folder, options)
            if res is None:
                raise RuntimeError(f"{name}: the wheel failed: {err}")
        names_in, names_out, outs = res
        for k, y in enumerate(outs):
            np.save(os.path.join(folder, f"out{k}.npy"), y)
        info = {"inputs": names_in, "outputs": names_out, "ncnn": ncnn.__version__, "options": note}
        with open(os.path.join(folder, "blobs.json"), "w") as f:
            json.dump(info, f, indent=1)
        files = sorted(f for f in os.listdir(folder) if f.endswith((".param", ".bin", ".npy", ".json")))
        entries[name] = {**info, "sha256": {f: sha256(os.path.join(folder, f)) for f in files}}
        print("expected", folder, names_in, names_out, note, flush=True)
    if manifest:
        with open(manifest, "w") as f:
            json.dump(entries, f, indent=1, sort_keys=True)
            f.write("\n")
        print("wrote", manifest)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["setup", "export", "export-networks", "expect"])
    ap.add_argument("--out", help="folder (default: tests/ncnn/fixtures, or tests/ncnn/networks for networks)")
    ap.add_argument("--networks", action="store_true", help="expect: the generated networks (writes the manifest)")
    ap.add_argument("--only", nargs="*", help="export only these names")
    a = ap.parse_args()
    if a.step == "setup":
        setup()
    elif a.step == "export":
        export(a.out or FIXTURES, a.only)
    elif a.step == "export-networks":
        export_networks(a.out or NETWORKS, a.only)
    elif a.networks:
        expect(a.out or NETWORKS, MANIFEST, a.only)
    else:
        expect(a.out or FIXTURES, None, a.only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
