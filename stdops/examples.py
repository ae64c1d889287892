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
        nodes, "xor_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 2]),
         helper.make_tensor_value_info("label", TensorProto.INT64, ["batch"])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="stdops.examples")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def demo_inputs() -> dict:
    """The four XOR cases."""
    return {"x": np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)}


def demo_model_path() -> Path:
    """examples/xor_mlp.onnx in a source checkout; otherwise built into a temporary folder."""
    path = _REPO_EXAMPLES / "xor_mlp.onnx"
    if path.exists():
        return path
    out = Path(tempfile.gettempdir()) / f"stdops-{os.getuid() if hasattr(os, 'getuid') else 0}"
    out.mkdir(exist_ok=True)
    path = out / "xor_mlp.onnx"
    path.write_bytes(xor_mlp().SerializeToString())
    return path


def write_all(folder: Path = _REPO_EXAMPLES) -> list[Path]:
    folder.mkdir(exist_ok=True)
    path = folder / "xor_mlp.onnx"
    path.write_bytes(xor_mlp().SerializeToString())
    return [path]


if __name__ == "__main__":
    for p in write_all():
        print(p)
