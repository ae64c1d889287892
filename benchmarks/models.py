"""Benchmark models built with onnx.helper and seeded random weights (no downloads).

Each builder returns (ModelProto, feeds, gflop) where gflop counts 2 x multiply-adds of the
convolutions / matrix products (the usual convention).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class _Builder:
    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.flop = 0.0
        self._n = 0

    def name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def weight(self, shape, scale=None) -> str:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        scale = scale if scale is not None else np.sqrt(2.0 / max(fan_in, 1))
        n = self.name("w")
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * scale).astype(np.float32), n))
        return n

    def const(self, value, dtype=np.int64) -> str:
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), n))
        return n

    def node(self, op, inputs, n_out=1, **attrs):
        outs = [self.name(op.lower() + "_") for _ in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.name(op + "_node"), **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x, cin, cout, k, stride, hw_out, group=1, relu=True, relu6=False):
        w = self.weight([cout, cin // group, k, k])
        b = self.weight([cout], scale=0.01)
        y = self.node("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)
        self.flop += 2.0 * cout * (cin // group) * k * k * hw_out * hw_out
        if relu6:
            y = self.node("Clip", [y, self.const(0.0, np.float32), self.const(6.0, np.float32)])
        elif relu:
            y = self.node("Relu", [y])
        return y

    def model(self, name, inputs, outputs):
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="stdops.bench")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


def resnet18_like(seed: int = 0):
    """ResNet-18 topology (BN folded into the convolutions), 1x3x224x224 -> 1000 logits."""
    b = _Builder(seed)
    x = b.conv("x", 3, 64, 7, 2, 112)
    x = b.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin, hw = 64, 56
    for cout, stride in ((64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)):
        hw_out = hw // stride
        y = b.conv(x, cin, cout, 3, stride, hw_out)
        y = b.conv(y, cout, cout, 3, 1, hw_out, relu=False)
        if stride != 1 or cin != cout:
            w = b.weight([cout, cin, 1, 1])
            x = b.node("Conv", [x, w], kernel_shape=[1, 1], strides=[stride, stride])
            b.flop += 2.0 * cout * cin * hw_out * hw_out
        x = b.node("Relu", [b.node("Add", [x, y])])
        cin, hw = cout, hw_out
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])])
    out = b.node("Gemm", [x, b.weight([1000, 512]), b.weight([1000], 0.01)], transB=1)
    b.flop += 2.0 * 512 * 1000
    m = b.model(
        "resnet18_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1000])],
    )
    feeds = {"x": np.random.default_rng(seed + 1).standard_normal((1, 3, 224, 224)).astype(np.float32)}
    return m, feeds, b.flop / 1e9


def mobilenetv2_like(seed: int = 0):
    """MobileNetV2 topology (BN folded, ReLU6 as Clip), 1x3x224x224 -> 1000 logits."""
    b = _Builder(seed)
    x = b.conv("x", 3, 32, 3, 2, 112, relu6=True)
    cin, hw = 32, 112
    settings = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ]
    for t, c, n, s in settings:
        for i in range(n):
            stride = s if i == 0 else 1
            hid = cin * t
            y = x
            if t != 1:
                y = b.conv(y, cin, hid, 1, 1, hw, relu6=True)
            hw_out = hw // stride
            y = b.conv(y, hid, hid, 3, stride, hw_out, group=hid, relu6=True)
            y = b.conv(y, hid, c, 1, 1, hw_out, relu=False)
            x = b.node("Add", [x, y]) if stride == 1 and cin == c else y
            cin, hw = c, hw_out
    x = b.conv(x, cin, 1280, 1, 1, hw, relu6=True)
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])])
    out = b.node("Gemm", [x, b.weight([1000, 1280]), b.weight([1000], 0.01)], transB=1)
    b.flop += 2.0 * 1280 * 1000
    m = b.model(
        "mobilenetv2_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1000])],
    )
    feeds = {"x": np.random.default_rng(seed + 1).standard_normal((1, 3, 224, 224)).astype(np.float32)}
    return m, feeds, b.flop / 1e9


def transformer_encoder(seed: int = 0, layers: int = 4, seq: int = 128, d: int = 256, heads: int = 4, ff: int = 1024):
    """Post-norm transformer encoder layers (multi-head self-attention + GELU feed-forward), [1, seq, d]."""
    b = _Builder(seed)
    dh = d // heads
    x = "x"
    split_shape = b.const([1, seq, heads, dh])
    merge_shape = b.const([1, seq, d])
    scale = b.const(1.0 / np.sqrt(dh), np.float32)
    for _ in range(layers):
        qkv = []
        for _p in range(3):
            h = b.node("Add", [b.node("MatMul", [x, b.weight([d, d], 0.05)]), b.weight([d], 0.01)])
            h = b.node("Reshape", [h, split_shape])
            qkv.append(b.node("Transpose", [h], perm=[0, 2, 1, 3]))
        q, k, v = qkv
        kt = b.node("Transpose", [k], perm=[0, 1, 3, 2])
        s = b.node("Mul", [b.node("MatMul", [q, kt]), scale])
        p = b.node("Softmax", [s], axis=-1)
        o = b.node("Transpose", [b.node("MatMul", [p, v])], perm=[0, 2, 1, 3])
        o = b.node("Reshape", [o, merge_shape])
        o = b.node("Add", [b.node("MatMul", [o, b.weight([d, d], 0.05)]), b.weight([d], 0.01)])
        x = b.node(
            "LayerNormalization", [b.node("Add", [x, o]), b.weight([d], 1.0), b.weight([d], 0.0)], axis=-1, epsilon=1e-5
        )
        hdn = b.node("Add", [b.node("MatMul", [x, b.weight([d, ff], 0.05)]), b.weight([ff], 0.01)])
        # GELU(x) = 0.5 x (1 + erf(x / sqrt 2)), as exporters write it before opset 20
        e = b.node("Erf", [b.node("Mul", [hdn, b.const(1 / np.sqrt(2), np.float32)])])
        g = b.node(
            "Mul", [b.node("Mul", [hdn, b.const(0.5, np.float32)]), b.node("Add", [e, b.const(1.0, np.float32)])]
        )
        f = b.node("Add", [b.node("MatMul", [g, b.weight([ff, d], 0.05)]), b.weight([d], 0.01)])
        x = b.node(
            "LayerNormalization", [b.node("Add", [x, f]), b.weight([d], 1.0), b.weight([d], 0.0)], axis=-1, epsilon=1e-5
        )
        b.flop += 2.0 * seq * (4 * d * d + 2 * d * ff) + 2.0 * 2 * seq * seq * d
    m = b.model(
        "transformer_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, d])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, seq, d])],
    )
    feeds = {"x": np.random.default_rng(seed + 1).standard_normal((1, seq, d)).astype(np.float32)}
    return m, feeds, b.flop / 1e9


def lstm_2layer(seed: int = 0, seq: int = 64, hidden: int = 256, inp: int = 256):
    """Two stacked single-direction LSTM layers, [seq, 1, inp] -> [seq, 1, hidden]."""
    b = _Builder(seed)
    x = "x"
    axes = b.const([1])
    size_in = inp
    for _ in range(2):
        w = b.weight([1, 4 * hidden, size_in], 0.05)
        r = b.weight([1, 4 * hidden, hidden], 0.05)
        bias = b.weight([1, 8 * hidden], 0.01)
        y, _h, _c = b.node("LSTM", [x, w, r, bias], n_out=3, hidden_size=hidden)
        x = b.node("Squeeze", [y, axes])  # [seq, 1, 1, hidden] -> [seq, 1, hidden]
        b.flop += 2.0 * seq * 4 * hidden * (size_in + hidden)
        size_in = hidden
    m = b.model(
        "lstm_2layer",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, 1, inp])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [seq, 1, hidden])],
    )
    feeds = {"x": np.random.default_rng(seed + 1).standard_normal((seq, 1, inp)).astype(np.float32)}
    return m, feeds, b.flop / 1e9


MODELS = {
    "resnet18_like": resnet18_like,
    "mobilenetv2_like": mobilenetv2_like,
    "transformer_encoder": transformer_encoder,
    "lstm_2layer": lstm_2layer,
}
