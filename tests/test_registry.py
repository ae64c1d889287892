"""The registry is the single list of kernels: walk it and hold every kernel to the conventions."""

from __future__ import annotations

import inspect
import keyword

import numpy as np
import pytest

import stdops.onnx  # noqa: F401  (registers adapters too)
from stdops.onnx.opset import ADAPTERS, bound_ops
from stdops.ops import OPS, REQUIRED, op
from stdops.ops._registry import SPEC_INDEX, uses

# The ONNX operators the MDF standard lists (spec/mdf-standard-functions.txt), for the coverage report.
MDF_ONNX_OPS = set(
    """
Abs Acos Acosh Add And ArgMax ArgMin Asin Asinh Atan Atanh AveragePool BatchNormalization Bernoulli BitShift Cast
CastLike Ceil Celu Clip Compress Concat ConcatFromSequence Constant ConstantOfShape Conv ConvInteger ConvTranspose Cos
Cosh CumSum DepthToSpace DequantizeLinear Det Div Dropout DynamicQuantizeLinear Einsum Elu Equal Erf Exp Expand EyeLike
Flatten Floor GRU Gather GatherElements GatherND Gemm GlobalAveragePool GlobalLpPool GlobalMaxPool Greater
GreaterOrEqual HardSigmoid HardSwish Hardmax Identity If InstanceNormalization IsInf IsNaN LRN LSTM LeakyRelu Less
LessOrEqual Log LogSoftmax Loop LpNormalization LpPool MatMul MatMulInteger Max MaxPool MaxRoiPool MaxUnpool Mean
MeanVarianceNormalization Min Mod Mul Multinomial Neg NegativeLogLikelihoodLoss NonMaxSuppression NonZero Not OneHot
Optional OptionalGetElement OptionalHasElement Or PRelu Pad Pow QLinearConv QLinearMatMul QuantizeLinear RNN
RandomNormal RandomNormalLike RandomUniform RandomUniformLike Range Reciprocal ReduceL1 ReduceL2 ReduceLogSum
ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu Reshape Resize
ReverseSequence RoiAlign Round Scan Scatter ScatterElements ScatterND Selu SequenceAt SequenceConstruct SequenceEmpty
SequenceErase SequenceInsert SequenceLength Shape Shrink Sigmoid Sign Sin Sinh Size Slice Softmax
SoftmaxCrossEntropyLoss Softplus Softsign SpaceToDepth Split SplitToSequence Sqrt Squeeze StringNormalizer Sub Sum Tan
Tanh TfIdfVectorizer ThresholdedRelu Tile TopK Transpose Trilu Unique Unsqueeze Upsample Where Xor
""".split()
)


@pytest.mark.parametrize("name", sorted(OPS))
def test_kernel_follows_conventions(name):
    d = OPS[name]
    assert d.doc.strip(), f"{name}: needs a docstring (formula, shape/dtype rule)"
    assert d.specs or uses(d), f"{name}: registered without a spec, and nothing runs on it"
    assert not keyword.iskeyword(name)
    sig = inspect.signature(d.fn)
    for p in sig.parameters.values():
        if p.kind is p.KEYWORD_ONLY:
            assert p.default is inspect.Parameter.empty or not isinstance(p.default, (list, dict, set)), (
                f"{name}: attribute {p.name} has a mutable default"
            )
    for s in d.specs:
        assert ":" in s


def test_spec_index_matches_kernels():
    for key, versions in SPEC_INDEX.items():
        for v, d in versions.items():
            assert d.name in OPS
            assert any(s == key or s == f"{key}-{v}" for s in d.specs)


def test_every_adapter_wraps_a_known_op():
    for key, v in ADAPTERS:
        assert key.split(":", 1)[0] in ("onnx", "onnx-ml", "onnx-training", "onnx-preview")
        assert v >= 1


def test_registering_twice_or_without_docstring_is_refused():
    with pytest.raises(ValueError, match="twice"):
        op("onnx:Relu-999")(OPS["relu"].fn)

    def nodoc(x):
        return x

    with pytest.raises(ValueError, match="docstring"):
        op("test:nodoc")(nodoc)


def test_required_attributes_are_marked():
    concat = OPS["concat"]
    assert concat.attrs["axis"] is REQUIRED
    assert concat.variadic


def test_every_mdf_listed_onnx_op_binds():
    """Every ONNX operator the MDF standard lists binds to a kernel (the list is the spec's, above)."""
    bound = {k.split(":", 1)[1] for k in bound_ops() if k.startswith("onnx:")}
    missing = sorted(MDF_ONNX_OPS - bound)
    assert not missing, f"MDF-listed ONNX ops with no kernel: {' '.join(missing)}"


FLOAT_UNARY = [
    "abs_",
    "neg",
    "sqrt",
    "exp",
    "log",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "relu",
    "erf",
    "floor",
    "softplus",
    "softsign",
    "reciprocal",
    "round_",
    "sign",
    "selu",
    "elu",
    "celu",
    "hard_sigmoid",
    "hard_swish",
    "mish",
    "softmax",
    "log_softmax",
]


@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_float32_stays_float32(name):
    x = np.linspace(0.1, 2.0, 12, dtype=np.float32).reshape(3, 4)
    y = OPS[name].fn(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == x.shape


def _ops_output(capsys, **kw) -> str:
    import argparse

    from stdops.cli import ops as ops_command

    ops_command.main(argparse.Namespace(**{"front_end": None, "layer": None, **kw}))
    return capsys.readouterr().out


def test_stdops_ops_shows_every_front_end_of_a_kernel(capsys):
    out = _ops_output(capsys)
    rows = {line.split()[0]: line for line in out.splitlines()[3:] if line.strip()}
    assert "Conv-1" in rows["conv"] and "Convolution" in rows["conv"] and "ConvolutionDepthWise" in rows["conv"]
    assert "ReduceSum-1,13" in rows["reduce_sum"] and "Reduction" in rows["reduce_sum"]  # an adapter and a spec
    assert rows["linear"].split()[-1] == "linear"  # an MDF standard function
    assert "LSTM" in rows["lstm_cell"]  # reached through the LSTM kernel and the ncnn layer
    assert "bound by two or more front ends" in out


def test_stdops_ops_ncnn_lists_the_kernels_of_each_layer(capsys):
    out = _ops_output(capsys, front_end="ncnn")
    rows = {line.split()[0]: line for line in out.splitlines()[3:] if line.strip()}
    assert "gemm" in rows["InnerProduct"].split() and "mat_mul_integer" in rows["InnerProduct"].split()
    assert "(ncnn's own" in rows["PriorBox"]
    out = _ops_output(capsys, layer="PriorBox")
    assert "ncnn's own math: SSD prior boxes" in out
