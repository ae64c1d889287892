"""The one binder (stdops.ops.bind): attribute checks, the kernel's load-time prepare, the guard that runs
the plain kernel when an input is not the constant it was prepared for, and rebinding."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

import stdops.onnx
from stdops.errors import KernelError, ModelFormatError
from stdops.ops import OPS, _registry
from stdops.ops._registry import from_attributes, kernel_of, op, uses
from stdops.ops.bind import Bound, bind
from stdops.ops.conv import conv

RNG = np.random.default_rng(5)


def test_attributes_are_checked():
    with pytest.raises(ModelFormatError, match=r"unknown attribute\(s\) alpah"):
        bind("leaky_relu", {"alpah": 0.1})
    with pytest.raises(ModelFormatError, match=r"missing required attribute\(s\) axis"):
        bind("concat", {})
    with pytest.raises(ModelFormatError, match="node 'n'"):
        bind("concat", {}, where="node 'n'")


def test_kernel_named_by_function_name_or_opdef():
    for k in (conv, "conv", OPS["conv"]):
        assert bind(k).kernel is OPS["conv"]
    with pytest.raises(ValueError, match="not a registered kernel"):
        kernel_of(np.add)


def test_plain_bind_is_the_kernel_with_its_attributes():
    x = np.linspace(-2, 2, 9, dtype=np.float32)
    b = bind("leaky_relu", {"alpha": 0.5})
    assert isinstance(b, Bound) and not b.prepared
    np.testing.assert_array_equal(b(x), np.where(x >= 0, x, np.float32(0.5) * x))
    np.testing.assert_array_equal(b.rebind({"alpha": 0.25})(x), np.where(x >= 0, x, np.float32(0.25) * x))


def test_conv_weights_prepared_once_and_guarded():
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bias = RNG.standard_normal(4).astype(np.float32)
    b = bind(conv, {"pads": (1, 1, 1, 1)}, (None, w, bias))
    assert b.prepared and b.constants[1] is w
    ref = conv(x, w, bias, pads=(1, 1, 1, 1))
    np.testing.assert_allclose(b(x, w, bias), ref, rtol=1e-5, atol=1e-5)
    w2 = -w  # not the prepared constant (an overriding feed): the plain kernel runs on it
    np.testing.assert_allclose(b(x, w2, bias), conv(x, w2, bias, pads=(1, 1, 1, 1)), rtol=1e-6, atol=1e-6)


@contextlib.contextmanager
def _temporary_kernels(*names):
    """Kernels a test registers, taken out of the registry afterwards."""
    try:
        yield
    finally:
        for name in names:
            d = _registry.OPS.pop(name, None)
            if d is not None:
                _registry._BY_FN.pop(id(d.fn), None)
                for s in d.specs:
                    _registry.SPEC_INDEX.pop(_registry._parse_spec(s)[0], None)


def test_prepare_gets_constants_and_every_attribute_and_its_refusal_is_a_model_error():
    seen = []

    def prepare(constants, attrs):
        seen.append((constants, attrs))
        return None  # nothing to specialise: the plain kernel serves

    def refuse(constants, attrs):
        raise KernelError("table of 3 keys for 2 values")

    with _temporary_kernels("probe", "refusing"):

        @op("test:prepared-probe", prepare=prepare)
        def probe(x, /, *, k=2):
            """y = x * k (a test kernel)."""
            return x * k

        @op("test:prepared-refusing", prepare=refuse)
        def refusing(x, /):
            """y = x (a test kernel)."""
            return x

        ones = np.ones(2)
        b = bind(probe, {}, (ones,))
        assert not b.prepared and seen[0][0][0] is ones and seen[0][1] == {"k": 2}  # the default filled in
        with pytest.raises(ModelFormatError, match="table of 3 keys"):
            bind(refusing, {}, (None,))


def test_attribute_only_preparation_builds_the_table_once():
    calls = []

    def build(**attrs):
        calls.append(attrs)
        return lambda x: x + attrs["k"]

    with _temporary_kernels("adds"):

        @op("test:from-attributes", prepare=from_attributes(build))
        def adds(x, /, *, k=1):
            """y = x + k (a test kernel)."""
            return x + k

        b = bind(adds, {"k": 3})
        assert b.prepared and calls == [{"k": 3}]
        assert b(np.ones(1))[0] == 4 and len(calls) == 1


def test_registry_sees_the_onnx_adapters_and_specs():
    u = uses("reduce_sum")
    assert "ReduceSum-13" in u["onnx"] and "ReduceSum-1" in u["onnx"]  # spec and adapter
    assert uses("binarizer")["onnx"] == ["Binarizer-1"]  # onnx-ml counts for the ONNX front end


def test_onnx_nodes_keep_their_bound_kernel():
    from onnx import TensorProto, helper, numpy_helper

    w = RNG.standard_normal((2, 3, 1, 1)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["X", "W"], ["Y"]), helper.make_node("Relu", ["Y"], ["Z"])],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("Z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "W")],
    )
    m = stdops.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    conv_node, relu_node = m.plan.nodes
    assert conv_node.bound.kernel.name == "conv" and conv_node.bound.constants[1] is m.plan._template[1]
    assert conv_node.fn is conv_node.bound.fn and relu_node.kernels == ("relu",)
    # a graph pass may rebind a node without knowing the front end: here, W negated
    m.plan.nodes[0] = conv_node.rebound(conv_node.bound.rebind(constants=(None, -w)))
    assert m.plan.nodes[0].bound.prepared
