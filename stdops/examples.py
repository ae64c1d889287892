"""Example models the project builds itself (with ``onnx.helper``), used by ``stdops demo``,
the README and the tests. ``python -m stdops.examples`` (re)writes them into ``examples/``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

_REPO_EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def xor_mlp():
    """A 2-2-2 MLP whose hand-set weights compute XOR: logits -> Softmax probabilities and the
    ArgMax class. h1 = relu(a + b), h2 = relu(a + b - 1); xor = h1 - 2 h2."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w1 = np.array([[1, 1], [1, 1]], np.float32)
    b1 = np.array([0, -1], np.float32)
    w2 = np.array([[-4, 4], [8, -8]], np.float32)  # class 0 logit = -4 xor + 2, class 1 = 4 xor - 2
    b2 = np.array([2, -2], np.float32)
    inits = [numpy_helper.from_array(v, n) for n, v in (("W1", w1), ("B1", b1), ("W2", w2), ("B2", b2))]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["xw1"], name="layer1_matmul"),
        helper.make_node("Add", ["xw1", "B1"], ["z1"], name="layer1_bias"),
        helper.make_node("Relu", ["z1"], ["h"], name="layer1_relu"),
        helper.make_node("Gemm", ["h", "W2", "B2"], ["logits"], name="layer2_gemm"),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1, name="softmax"),
        helper.make_node("ArgMax", ["logits"], ["label"], axis=1, keepdims=0, name="argmax"),
    ]
    graph = helper.make_graph(
        nodes,
        "xor_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])],
        [
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 2]),
            helper.make_tensor_value_info("label", TensorProto.INT64, ["batch"]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="stdops.examples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def xor_ncnn() -> tuple[str, bytes]:
    """The same XOR network as ncnn layers (.param text, .bin bytes), written with our own writers:
    InnerProduct with fused ReLU, InnerProduct, Softmax over each row of a (batch, 2) blob."""
    from .ncnn.modelbin import ModelBinWriter
    from .ncnn.param import LayerDecl, ParamFile, write_text

    w1 = np.array([[1, 1], [1, 1]], np.float32)  # ncnn InnerProduct weight: (num_output, num_input)
    b1 = np.array([0, -1], np.float32)
    w2 = np.array([[-4, 8], [4, -8]], np.float32)
    b2 = np.array([2, -2], np.float32)
    layers = [
        LayerDecl("Input", "input", [], ["x"], {0: 2, 1: 4}, 3),
        LayerDecl("InnerProduct", "layer1", ["x"], ["h"], {0: 2, 1: 1, 2: 4, 9: 1}, 4),
        LayerDecl("InnerProduct", "layer2", ["h"], ["logits"], {0: 2, 1: 1, 2: 4}, 5),
        LayerDecl("Softmax", "softmax", ["logits"], ["probabilities"], {0: 1, 1: 1}, 6),
    ]
    weights = ModelBinWriter()
    for w, b in ((w1, b1), (w2, b2)):
        weights.write(w, tagged=True)
        weights.write(b, tagged=False)
    return write_text(ParamFile(layers, 4, None, False)), weights.getvalue()


def demo_inputs() -> dict:
    """The four XOR cases."""
    return {"x": np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)}


def _folder() -> Path:
    """examples/ in a source checkout; otherwise a temporary folder the examples are built into."""
    if (_REPO_EXAMPLES / "xor_mlp.onnx").exists():
        return _REPO_EXAMPLES
    out = Path(tempfile.gettempdir()) / f"stdops-{os.getuid() if hasattr(os, 'getuid') else 0}"
    if not (out / "xor_mlp.onnx").exists():
        write_all(out)
    return out


def demo_model_path() -> Path:
    """The XOR network as ONNX (examples/xor_mlp.onnx)."""
    return _folder() / "xor_mlp.onnx"


def demo_ncnn_paths() -> tuple[Path, Path]:
    """The XOR network as ncnn (examples/xor_mlp.param, .bin)."""
    return _folder() / "xor_mlp.param", _folder() / "xor_mlp.bin"


def demo_mdf_path() -> Path | None:
    """The damped oscillator MDF model (examples/mdf/oscillator.yaml), in a source checkout."""
    p = _REPO_EXAMPLES / "mdf" / "oscillator.yaml"
    return p if p.exists() else None


def write_all(folder: Path = _REPO_EXAMPLES) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    onnx_path = folder / "xor_mlp.onnx"
    onnx_path.write_bytes(xor_mlp().SerializeToString())
    param, weights = xor_ncnn()
    (folder / "xor_mlp.param").write_text(param)
    (folder / "xor_mlp.bin").write_bytes(weights)
    return [onnx_path, folder / "xor_mlp.param", folder / "xor_mlp.bin"]


if __name__ == "__main__":
    for p in write_all():
        print(p)
