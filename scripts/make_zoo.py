"""Make the benchmark zoo: torchvision/timm networks with random weights exported to ONNX (torch.onnx) and to
ncnn (pnnx), into zoo/ (gitignored), with a manifest of input shapes and sha256 checksums.

    python3 scripts/make_zoo.py setup              # .venv-zoo: torch + torchvision from local disk, timm, pnnx
    .venv-zoo/bin/python scripts/make_zoo.py export [--models resnet18,lstm_text] [--out zoo]
    .venv/bin/python scripts/make_zoo.py verify    # checksums of what the manifest lists (no torch needed)

`make zoo` runs the first two; `make bench` reads the manifest (benchmarks/bench_zoo.py). Nothing here is
downloaded at run time: every network is built from its constructor with random weights (seeded); batch
norm statistics are randomized too, so that folding them is not a no-op. A network that one exporter
cannot take is recorded in the manifest with the reason, and the other format is still written.
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
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV = os.path.join(ROOT, ".venv-zoo")
# torch/torchvision: the builds that lie on this machine's disk for Python 3.11 (pip takes them from there)
REQUIREMENTS = [
    ["torch==2.14.1", "torchvision==0.29.1"],
    ["timm==1.0.31", "pnnx==20261020", "onnx==1.23.2", "onnxscript==0.7.2"],
]
OPSET = 17


def setup() -> None:
    if not os.path.exists(os.path.join(VENV, "bin", "python")):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
    for reqs in REQUIREMENTS:
        subprocess.check_call([os.path.join(VENV, "bin", "python"), "-m", "pip", "install", "--quiet", *reqs])
    print(f"{VENV} ready")


# ----------------------------------------------------------------------------- the networks
def _randomize_bn(m, torch):
    """Random running statistics and affine parameters for every batch norm (seeded by the caller)."""
    for mod in m.modules():
        if isinstance(mod, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)):
            with torch.no_grad():
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                if mod.affine:
                    mod.weight.uniform_(0.5, 1.5)
                    mod.bias.uniform_(-0.2, 0.2)
    return m.eval()


def _networks(torch):
    """name -> (constructor, example inputs, input names, ncnn?): every constructor builds random weights."""
    import timm
    import torchvision.models as tvm
    from torchvision.models import detection

    class TransformerEncoder(torch.nn.Module):
        """4 post-norm encoder layers, d 256, 4 heads, feed-forward 1024 (GELU), sequence 128."""

        def __init__(self):
            super().__init__()
            layer = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, activation="gelu", batch_first=True)
            self.enc = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)

        def forward(self, x):
            return self.enc(x)

    class LSTMText(torch.nn.Module):
        """Token embedding, a 2-layer LSTM (hidden 256) and a classifier over the last step."""

        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(5000, 128)
            self.lstm = torch.nn.LSTM(128, 256, num_layers=2, batch_first=True)
            self.fc = torch.nn.Linear(256, 10)

        def forward(self, tokens):
            y, _ = self.lstm(self.emb(tokens))
            return self.fc(y[:, -1])

    img = (torch.randn(1, 3, 224, 224),)
    return {
        "resnet18": (lambda: tvm.resnet18(weights=None), img),
        "resnet50": (lambda: tvm.resnet50(weights=None), img),
        "mobilenet_v2": (lambda: tvm.mobilenet_v2(weights=None), img),
        "mobilenet_v3_small": (lambda: tvm.mobilenet_v3_small(weights=None), img),
        "efficientnet_b0": (lambda: tvm.efficientnet_b0(weights=None), img),
        "shufflenet_v2": (lambda: tvm.shufflenet_v2_x1_0(weights=None), img),
        "regnet_y_400mf": (lambda: tvm.regnet_y_400mf(weights=None), img),
        "vit_small": (lambda: timm.create_model("vit_small_patch16_224", pretrained=False), img),
        "transformer_encoder": (TransformerEncoder, (torch.randn(1, 128, 256),)),
        "ssdlite": (
            lambda: detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None),
            (torch.rand(1, 3, 320, 320),),
        ),
        "lstm_text": (LSTMText, (torch.randint(0, 5000, (1, 64)),)),
    }


class _SSDWrapper:
    """SSDLite takes a list of images and returns a list of dicts: exported as one image in, boxes/scores/labels out."""

    @staticmethod
    def wrap(model, torch):
        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, x):
                d = self.m([x[0]])[0]
                return d["boxes"], d["scores"], d["labels"]

        return Wrapped().eval()


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _export_onnx(torch, model, inputs, path):
    names = [f"in{i}" for i in range(len(inputs))]
    kw = dict(input_names=names, opset_version=OPSET, do_constant_folding=True)
    try:  # the TorchScript exporter first: it writes the plain ops the benchmarks expect
        torch.onnx.export(model, inputs, path, dynamo=False, **kw)
    except Exception:  # noqa: BLE001 - then the torch.export-based one
        torch.onnx.export(model, inputs, path, dynamo=True, external_data=False, **kw)
    return names


def _export_ncnn(model, inputs, folder):
    import pnnx

    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            pnnx.export(model, "model.pt", inputs, fp16=False, check_trace=False)
        except Exception:  # noqa: BLE001
            # pnnx writes the ncnn files before it imports its generated Python model, which fails for
            # module names with dashes (regnet): the ncnn files are complete then
            if not all(os.path.exists(os.path.join(tmp, f)) for f in ("model.ncnn.param", "model.ncnn.bin")):
                raise
        finally:
            os.chdir(cwd)
        for src, dst in (("model.ncnn.param", "model.param"), ("model.ncnn.bin", "model.bin")):
            shutil.copy(os.path.join(tmp, src), os.path.join(folder, dst))


def export(out: str, models: list[str] | None) -> None:
    import numpy as np
    import torch

    nets = _networks(torch)
    os.makedirs(out, exist_ok=True)
    mpath = os.path.join(out, "manifest.json")
    manifest = json.load(open(mpath)) if os.path.exists(mpath) else {}
    for name in models or list(nets):
        ctor, inputs = nets[name]
        torch.manual_seed(0)
        model = _randomize_bn(ctor(), torch)
        if name == "ssdlite":
            model = _SSDWrapper.wrap(model, torch)
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        entry = {"inputs": [], "files": {}, "errors": {}}
        for i, t in enumerate(inputs):
            a = t.numpy()
            np.save(os.path.join(folder, f"in{i}.npy"), a)
            entry["inputs"].append({"name": f"in{i}", "shape": list(a.shape), "dtype": str(a.dtype)})
        try:
            with torch.no_grad():
                _export_onnx(torch, model, inputs, os.path.join(folder, "model.onnx"))
        except Exception as e:  # noqa: BLE001 - recorded; the other exporter still runs
            entry["errors"]["onnx"] = f"{type(e).__name__}: {e}"[:500]
            traceback.print_exc()
        if name != "ssdlite":  # pnnx cannot trace torchvision's detection post-processing
            try:
                _export_ncnn(model, inputs, folder)
            except Exception as e:  # noqa: BLE001
                entry["errors"]["ncnn"] = f"{type(e).__name__}: {e}"[:500]
                traceback.print_exc()
        else:
            entry["errors"]["ncnn"] = "not exported: pnnx does not trace the detection post-processing"
        for f in sorted(os.listdir(folder)):
            entry["files"][f] = _sha256(os.path.join(folder, f))
        manifest[name] = entry
        with open(mpath, "w") as fh:
            json.dump(manifest, fh, indent=1, sort_keys=True)
        print(f"{name}: {sorted(entry['files'])} {entry['errors'] or ''}", flush=True)


def verify(out: str) -> int:
    mpath = os.path.join(out, "manifest.json")
    if not os.path.exists(mpath):
        print(f"no {mpath}: run `make zoo`")
        return 1
    bad = 0
    for name, entry in json.load(open(mpath)).items():
        for f, digest in entry["files"].items():
            p = os.path.join(out, name, f)
            if not os.path.exists(p) or _sha256(p) != digest:
                print(f"{name}/{f}: missing or changed")
                bad += 1
    print("zoo checksums:", "ok" if not bad else f"{bad} bad")
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=["setup", "export", "verify"])
    ap.add_argument("--out", default=os.path.join(ROOT, "zoo"))
    ap.add_argument("--models", default="")
    a = ap.parse_args(argv)
    if a.step == "setup":
        setup()
        return 0
    if a.step == "export":
        export(a.out, [m for m in a.models.split(",") if m] or None)
        return 0
    return verify(a.out)


if __name__ == "__main__":
    raise SystemExit(main())
