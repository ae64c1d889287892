"""The ncnn plan's own fusion (stdops/ncnn/fuse.py): a 1x1 Convolution read only by a ConvolutionDepthWise runs
as one expand_depthwise step in the twin; the twin gives the plan-as-written's values (bit for bit on the compiled
path, within 1e-6 on the NumPy one), the wheel's within its tolerance, and every blob stays reachable."""

from __future__ import annotations

import numpy as np
import pytest

from stdops.ncnn import Net
from stdops.ops import _fast_blockcl

from . import wheel

TAG_F32 = np.zeros(1, np.uint32).tobytes()  # a tagged weight: 4 bytes of 0, then raw float32


def _net(
    act1: str,
    act2: str,
    stride: int,
    pad: int,
    C: int = 8,
    M: int = 24,
    extra_reader: bool = False,
    seed=0,
    residual: bool = False,
):
    """Input -> 1x1 Convolution (C -> M, act1) -> 3x3 ConvolutionDepthWise (stride, pad, act2) -> 1x1 project
    (to 4 channels, or with ``residual`` to C, added to the input through a Split: MobileNetV2's block)."""
    rng = np.random.default_rng(seed)
    P = C if residual else 4
    w1 = rng.standard_normal((M, C, 1, 1)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(M).astype(np.float32) * 0.1
    w2 = rng.standard_normal((M, 1, 3, 3)).astype(np.float32) * 0.3
    b2 = rng.standard_normal(M).astype(np.float32) * 0.1
    w3 = rng.standard_normal((P, M, 1, 1)).astype(np.float32) * 0.3
    src = "x1" if residual else "in0"
    lines = [
        "Input in0 0 1 in0",
        f"Convolution expand 1 1 {src} e 0={M} 1=1 5=1 6={M * C} {act1}",
    ]
    if residual:
        lines.insert(1, "Split splitr 1 2 in0 x0 x1")
    if extra_reader:
        lines = lines[:1] + [lines[1].replace(" 1 1 in0 e ", " 1 1 in0 e0 ")] + ["Split split 1 2 e0 e e2"]
    top = "p" if residual else "out0"
    lines += [
        f"ConvolutionDepthWise dw 1 1 e d 0={M} 1=3 3={stride} 4={pad} 5=1 6={M * 9} 7={M} {act2}",
        f"Convolution project 1 1 d {top} 0={P} 1=1 5=0 6={P * M}",
    ]
    if residual:
        lines.append("BinaryOp add 2 1 x0 p out0 0=0")
    outs = ["out0"] + (["e2"] if extra_reader else [])
    blobs = {b for line in lines for b in line.split()[4:] if "=" not in b}
    param = f"7767517\n{len(lines)} {len(blobs)}\n" + "\n".join(lines) + "\n"
    blob = TAG_F32 + w1.tobytes() + b1.tobytes() + TAG_F32 + w2.tobytes() + b2.tobytes() + TAG_F32 + w3.tobytes()
    return param, blob, outs


ACTS = [
    ("", ""),
    ("9=3 -23310=2,0.0,6.0", "9=3 -23310=2,0.0,6.0"),
    ("9=1", "9=6 -23310=2,0.2,0.5"),
    ("9=4", "9=2 -23310=1,0.1"),
]


def _written(net: Net, feeds: dict) -> dict:
    return net.plan.run(feeds, hook=lambda node, name, value: None)  # a hook: every layer as written


@pytest.mark.parametrize("acts", ACTS, ids=["none", "relu6", "relu-hardswish", "sigmoid-leaky"])
# a residual only where the block's output has its input's size (stride 1, padded)
@pytest.mark.parametrize(
    "stride,pad,hw,residual",
    [(1, 1, 17, False), (1, 1, 17, True), (2, 1, 16, False), (2, 0, 13, False), (1, 0, 9, False)],
)
def test_expand_depthwise_twin_matches_the_layers(kernels, acts, stride, pad, hw, residual, monkeypatch):
    """The three convolutions (and the residual's Split and BinaryOp) as one expand_depthwise_project step."""
    param, blob, _ = _net(*acts, stride, pad, residual=residual)
    net = Net.from_bytes(param, blob)
    twin = net.plan.fused
    assert twin is not None and [n.kernels for n in twin.nodes] == [("expand_depthwise_project",)]
    assert len(twin.nodes) == len(net.plan.nodes) - (4 if residual else 2)
    x = np.random.default_rng(1).standard_normal((8, hw, hw + 3)).astype(np.float32)
    channels_last: list = []
    real = _fast_blockcl.ChannelsLastBlock.__call__
    monkeypatch.setattr(
        _fast_blockcl.ChannelsLastBlock, "__call__", lambda *a, **k: channels_last.append(1) or real(*a, **k)
    )
    got, want = net.run({"in0": x}), _written(net, {"in0": x})
    a, b = got["out0"], want["out0"]
    assert a.shape == b.shape and a.dtype == b.dtype == np.float32
    if kernels and not channels_last:  # the planar compiled block computes what the compiled steps compute
        np.testing.assert_array_equal(a, b)
    else:
        assert float(np.max(np.abs(a - b))) <= 1e-6 * float(np.max(np.abs(b)))
    if wheel.available():
        (theirs,) = wheel.wheel_net(param.encode(), blob, [x], ["in0"], ["out0"], options=wheel.EXACT_OPTIONS)
        wheel.assert_close([a], [theirs], atol=1e-4, rtol=1e-4, what="expand_depthwise twin vs the wheel")


def test_expanded_blob_stays_reachable_and_shared_blobs_are_not_fused():
    param, blob, _ = _net("9=1", "9=1", 1, 1)
    net = Net.from_bytes(param, blob)
    x = np.random.default_rng(2).standard_normal((8, 10, 10)).astype(np.float32)
    ex = net.create_extractor()
    ex.input("in0", x)
    e = ex.extract("e")  # the fused block's intermediate: the layers as written compute it
    assert e.shape == (24, 10, 10) and float(e.min()) >= 0.0  # the expansion's ReLU
    # a blob two layers read (here through a Split) is no pair: nothing to fuse
    param2, blob2, _ = _net("9=1", "9=1", 1, 1, extra_reader=True)
    net2 = Net.from_bytes(param2, blob2)
    fused_kernels = (("expand_depthwise",), ("expand_depthwise_project",))
    assert net2.plan.fused is None or all(n.kernels not in fused_kernels for n in net2.plan.fused.nodes)


def test_an_input_the_block_does_not_take_runs_the_layers_as_written():
    """A 2-D blob into a one-channel expansion (ncnn reads it as 1 x H x W): the twin's step refuses it
    (PlanFallback) and the layers as written give the answer."""
    param, blob, _ = _net("9=1", "", 1, 1, C=1)
    net = Net.from_bytes(param, blob)
    assert net.plan.fused is not None
    x = np.random.default_rng(3).standard_normal((7, 9)).astype(np.float32)
    got, want = net.run({"in0": x}), _written(net, {"in0": x})
    np.testing.assert_array_equal(got["out0"], want["out0"])
    assert got["out0"].shape == (4, 7, 9)


# --------------------------------------------------------------------------- chains, residuals, SE blocks


class _Builder:
    """A .param text and its .bin, layer by layer (float32 weights, random, from one seed)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.lines = ["Input in0 0 1 in0"]
        self.blob = b""

    def add(self, line: str, *weights: np.ndarray, tagged: bool = True) -> None:
        self.lines.append(line)
        for k, w in enumerate(weights):  # the first weight of a layer is tagged, a bias is not
            self.blob += (TAG_F32 if k == 0 and tagged else b"") + w.astype(np.float32).tobytes()

    def conv(self, name, bottom, top, C, M, k=3, stride=1, pad=1, extra="", dw=False):
        w = self.rng.standard_normal((M, 1 if dw else C, k, k)) * (0.6 / np.sqrt(k * k * (1 if dw else C)))
        b = self.rng.standard_normal(M) * 0.1
        kind = (
            f"ConvolutionDepthWise {name} 1 1 {bottom} {top} 7={M}" if dw else f"Convolution {name} 1 1 {bottom} {top}"
        )
        self.add(f"{kind} 0={M} 1={k} 3={stride} 4={pad} 5=1 6={w.size} {extra}", w, b)

    def dense(self, name, bottom, top, K, M, extra=""):
        w = self.rng.standard_normal((M, K)) * (1.0 / np.sqrt(K))
        b = self.rng.standard_normal(M) * 0.1
        self.add(f"InnerProduct {name} 1 1 {bottom} {top} 0={M} 1=1 2={w.size} {extra}", w, b)

    def act(self, kind: str, bottom: str, top: str) -> None:
        """An activation layer (``kind`` a key of LAYER_ACTS) of ``bottom`` into ``top``."""
        if kind == "silu":  # Sigmoid + BinaryOp mul of the same blob, through a Split
            self.add(f"Split {top}_split 1 2 {bottom} {top}_a {top}_b")
            self.add(f"Sigmoid {top}_sig 1 1 {top}_a {top}_s")
            self.add(f"BinaryOp {top}_mul 2 1 {top}_b {top}_s {top} 0=2")
        elif kind == "silu_direct":  # the same, both layers reading the blob itself
            self.add(f"Sigmoid {top}_sig 1 1 {bottom} {top}_s")
            self.add(f"BinaryOp {top}_mul 2 1 {top}_s {bottom} {top} 0=2")
        else:
            self.add(LAYER_ACTS[kind].format(f"{top}_layer 1 1 {bottom} {top}"))

    def text(self) -> str:
        blobs = {b for line in self.lines for b in line.split()[4:] if "=" not in b}
        return f"7767517\n{len(self.lines)} {len(blobs)}\n" + "\n".join(self.lines) + "\n"


LAYER_ACTS = {
    "relu": "ReLU {}",
    "leaky": "ReLU {} 0=0.1",
    "clip": "Clip {} 0=-0.5 1=0.75",
    "sigmoid": "Sigmoid {}",
    "hardsigmoid": "HardSigmoid {} 0=0.2 1=0.5",
    "hardswish": "HardSwish {} 0=0.1666667 1=0.5",
    "swish": "Swish {}",
    "silu": None,
    "silu_direct": None,
}
#: activations the compiled epilogue computes as the kernels do, bit for bit (the others: a polynomial exp)
EXACT = {"", "relu", "leaky", "clip", "hardsigmoid", "hardswish"}


def _agree(net: Net, feeds: dict, exact: bool, outs=("out0",)) -> dict:
    got, want = net.run(feeds, list(outs)), _written(net, feeds)
    for k in outs:
        a, b = got[k], want[k]
        assert a.shape == b.shape and a.dtype == b.dtype == np.float32, k
        if exact:
            np.testing.assert_array_equal(a, b, err_msg=k)
        else:
            assert float(np.max(np.abs(a - b))) <= 1e-6 * float(np.max(np.abs(b))), k
    return got


def _against_wheel(param: str, blob: bytes, feeds: dict, got: dict, what: str) -> None:
    if not wheel.available():
        return
    names = list(feeds)
    theirs = wheel.wheel_net(
        param.encode(), blob, [feeds[n] for n in names], names, list(got), options=wheel.EXACT_OPTIONS
    )
    wheel.assert_close(list(got.values()), theirs, atol=1e-4, rtol=1e-4, what=what)


def _runs_of_the_written_plan(net: Net) -> list:
    """A list that grows by one at every run of the plan as written (a PlanFallback of the twin)."""
    calls: list = []
    run = net.plan._run
    net.plan._run = lambda *a, **k: calls.append(1) or run(*a, **k)  # type: ignore[method-assign]
    return calls


def _kernels(net: Net) -> list[tuple[str, ...]]:
    assert net.plan.fused is not None
    return [n.kernels for n in net.plan.fused.nodes]


def _residual_net(act: str, post: str, stride: int = 1, C: int = 8, seed: int = 0):
    """in0 -> Split -> 3x3 Convolution (stride) [-> act] -> BinaryOp add of the shortcut (the block input, or
    a 1x1 stride-2 Convolution of it, which comes first) [-> post] -> 1x1 Convolution -> out0."""
    b = _Builder(seed)
    b.add("Split split 1 2 in0 x0 x1")
    M = C if stride == 1 else 2 * C
    shortcut = "x1"
    if stride != 1:
        b.conv("down", "x1", "sc", C, M, k=1, stride=stride, pad=0)
        shortcut = "sc"
    b.conv("conv", "x0", "c", C, M, stride=stride)
    top = "c"
    if act:
        b.act(act, "c", "ca")
        top = "ca"
    b.add(f"BinaryOp add 2 1 {top} {shortcut} s 0=0")
    if post:
        b.act(post, "s", "sp")
    b.conv("head", "sp" if post else "s", "out0", M, 4, k=1, pad=0)
    return b.text(), b.blob


@pytest.mark.parametrize(
    "act,post",
    [("", "relu"), ("relu", "relu"), ("swish", ""), ("hardswish", "hardswish"), ("silu", "relu")]
    + [("leaky", "clip"), ("sigmoid", "hardsigmoid"), ("clip", "swish"), ("silu_direct", "silu_direct")],
)
@pytest.mark.parametrize("stride", [1, 2])
def test_convolution_activation_residual_chain_is_one_step(kernels, act, post, stride):
    param, blob = _residual_net(act, post, stride)
    net = Net.from_bytes(param, blob)
    ops = [n.op for n in net.plan.fused.nodes]  # the chain, the head [, the shortcut]; the Split's readers read in0
    assert ops == ["Convolution"] * (2 + (stride != 1))
    chain = next(n for n in net.plan.fused.nodes if len(n.inputs) == 2)
    assert chain.kernels == ("conv_act",) and chain.outputs == ["sp" if post else "s"]
    x = np.random.default_rng(1).standard_normal((8, 12, 11)).astype(np.float32)
    got = _agree(net, {"in0": x}, kernels and act in EXACT and post in EXACT)
    if stride == 2 or act in ("", "silu"):  # a few through the wheel (each is a process)
        _against_wheel(param, blob, {"in0": x}, got, f"conv {act} + residual + {post} vs the wheel")


def test_a_residual_of_another_shape_runs_the_layers_as_written():
    """ncnn's BinaryOp broadcasts a 1-D blob of C values per channel (ONNX's rule would take it per column):
    a residual that is not the convolution's own shape goes through the layers as written."""
    b = _Builder(3)
    b.lines.append("Input in1 0 1 in1")
    b.conv("conv", "in0", "c", 8, 8, extra="9=1")
    b.add("BinaryOp add 2 1 c in1 s 0=0")
    b.act("relu", "s", "out0")
    param, blob = b.text(), b.blob
    net = Net.from_bytes(param, blob)
    assert ("conv_act",) in _kernels(net) and len(net.plan.fused.nodes) == 1
    x = np.random.default_rng(4).standard_normal((8, 9, 8)).astype(np.float32)
    for r in (np.random.default_rng(5).standard_normal(s).astype(np.float32) for s in [(8,), (8, 1, 8), (8, 9, 8)]):
        reruns = _runs_of_the_written_plan(net)
        got = net.run({"in0": x, "in1": r})
        assert not reruns  # the step ran its layers as written itself
        _agree(net, {"in0": x, "in1": r}, exact=True)
        if r.ndim == 1:
            _against_wheel(param, blob, {"in0": x, "in1": r}, got, "residual of C values vs the wheel")


def test_fused_away_blobs_stay_reachable_and_shared_ones_are_not_fused():
    param, blob = _residual_net("swish", "relu")
    net = Net.from_bytes(param, blob)
    fused_names = set(net.plan.fused.names())
    assert not {"c", "ca", "s"} & fused_names
    x = np.random.default_rng(6).standard_normal((8, 10, 10)).astype(np.float32)
    ex = net.create_extractor()
    ex.input("in0", x)
    c, ca, s = ex.extract("c"), ex.extract("ca"), ex.extract("s")
    np.testing.assert_array_equal(s, net.plan.run({"in0": x}, ["s"], _noop)["s"])
    np.testing.assert_allclose(ca, c / (1.0 + np.exp(-c.astype(np.float64))), rtol=1e-6, atol=1e-7)  # the Swish
    assert c.shape == ca.shape == s.shape == (8, 10, 10)
    got = net.run({"in0": x}, ["s", "out0"])  # a fused-away blob asked for: the plan as written runs
    np.testing.assert_array_equal(got["s"], s)
    # a convolution's top read by two layers is no chain: it stays in the twin
    b = _Builder(0)
    b.conv("conv", "in0", "c", 8, 8)
    b.act("relu", "c", "out0")
    b.add("Sigmoid other 1 1 c out1")
    net2 = Net.from_bytes(b.text(), b.blob)
    assert net2.plan.fused is None or "c" in net2.plan.fused.names()


def _noop(node, name, value):
    pass


def _se_net(act1: str, act2: str, own1: str = "", own2: str = "", conv: str | None = "", C: int = 16, seed=0):
    """in0 -> Split -> global average Pooling -> InnerProduct (C -> C / 4, param ``own1``) [-> act1 layer] ->
    InnerProduct (-> C, ``own2``) [-> act2 layer] -> BinaryOp mul by the block input [-> 1x1 Convolution to 8
    channels (``conv``: its extra params) + BinaryOp add of a 1x1 Convolution of the input -> ReLU]."""
    b = _Builder(seed)
    b.add("Split split 1 3 in0 x0 x1 x2")
    b.add("Pooling gap 1 1 x1 p 0=1 4=1")
    b.dense("fc1", "p", "h", C, C // 4, own1)
    h = "h"
    if act1:
        b.act(act1, "h", "ha")
        h = "ha"
    b.dense("fc2", h, "g", C // 4, C, own2)
    g = "g"
    if act2:
        b.act(act2, "g", "ga")
        g = "ga"
    b.add(f"BinaryOp mul 2 1 {g} x0 m 0=2")
    if conv is None:
        b.add("Convolution head 1 1 x2 out1 0=4 1=1 5=0 6=64", np.ones((4, C), np.float32) / C)
        b.add("Noop keep 1 1 m out0")
        return b.text(), b.blob
    b.conv("short", "x2", "sc", C, 8, k=1, pad=0)
    b.conv("proj", "m", "pr", C, 8, k=1, pad=0, extra=conv)
    b.add("BinaryOp add 2 1 sc pr s 0=0")
    b.act("relu", "s", "out0")
    return b.text(), b.blob


@pytest.mark.parametrize(
    "acts",
    [
        ("", "hardsigmoid", "9=1", ""),  # MobileNetV3
        ("swish", "", "", "9=4"),  # EfficientNet
        ("", "", "9=1", "9=4"),  # RegNetY
        ("hardswish", "sigmoid", "", ""),
    ],
    ids=["mobilenetv3", "efficientnet", "regnety", "layers"],
)
def test_squeeze_excite_with_its_convolution_is_one_step(kernels, acts):
    act1, act2, own1, own2 = acts
    param, blob = _se_net(act1, act2, own1, own2)
    net = Net.from_bytes(param, blob)
    ks = _kernels(net)
    assert ks.count(("squeeze_excite_conv",)) == 1 and len(ks) == 2  # the shortcut and the block
    block = next(n for n in net.plan.fused.nodes if n.kernels == ("squeeze_excite_conv",))
    assert block.inputs == ["in0", "sc"]  # the block input and the shortcut, its residual
    x = np.random.default_rng(7).standard_normal((16, 9, 10)).astype(np.float32)
    got = _agree(net, {"in0": x}, exact=False)
    _against_wheel(param, blob, {"in0": x}, got, f"squeeze-excite {acts} vs the wheel")


def test_squeeze_excite_alone_and_its_fallback():
    """The block's product read by no convolution: one squeeze_excite step; a 2-D blob (ncnn: one channel)
    is not the block's input and runs the layers as written."""
    param, blob = _se_net("", "hardsigmoid", "9=1", "", conv=None)
    net = Net.from_bytes(param, blob)
    assert _kernels(net).count(("squeeze_excite",)) == 1
    x = np.random.default_rng(8).standard_normal((16, 7, 7)).astype(np.float32)
    got = _agree(net, {"in0": x}, exact=False, outs=("out0", "out1"))
    _against_wheel(param, blob, {"in0": x}, got, "squeeze_excite vs the wheel")
    ex = net.create_extractor()
    ex.input("in0", x)
    assert ex.extract("g").shape == (16,)  # the gate before its HardSigmoid: the layers as written


@pytest.mark.parametrize("act", ["hardswish", "relu", "swish"])
def test_inner_product_and_its_activation_are_one_step(kernels, act):
    """A classifier's hidden layer (MobileNetV3: InnerProduct -> HardSwish): one matmul_act step, for a flat
    blob and for a 2-D blob of rows (the layer's two forms)."""
    b = _Builder(9)
    b.dense("fc1", "in0", "h", 24, 32)
    b.act(act, "h", "ha")
    b.dense("fc2", "ha", "out0", 32, 10)
    param, blob = b.text(), b.blob
    net = Net.from_bytes(param, blob)
    assert _kernels(net)[0] == ("matmul_act",) and len(net.plan.fused.nodes) == 2
    rng = np.random.default_rng(10)
    for shape in [(24,), (5, 24), (6, 2, 2)]:
        x = rng.standard_normal(shape).astype(np.float32)
        got = _agree(net, {"in0": x}, exact=False)
        if shape == (5, 24):
            _against_wheel(param, blob, {"in0": x}, got, f"InnerProduct + {act} vs the wheel")


@pytest.mark.parametrize("transB", [0, 1])
@pytest.mark.parametrize("bias", [True, False])
def test_gemm_and_its_gelu_are_one_step(kernels, transB, bias):
    """pnnx's nn.Linear (a Gemm of a constant B and per-column C) and the GELU layer after it (a transformer's
    MLP): one matmul_act step for a 2-D blob of rows; the GEMM's other forms (1-D A: a (1, N) result; fast_gelu, the
    tanh form) keep the layers."""
    rng = np.random.default_rng(13)
    K, N = 24, 40
    B = rng.standard_normal((N, K) if transB else (K, N)) * (1.0 / np.sqrt(K))
    C = rng.standard_normal(N) * 0.1
    for fast_gelu in (0, 1):
        b = _Builder(14)
        c_term = "6=1 10=4" if bias else "6=0"
        weights = (B, C) if bias else (B,)
        b.add(f"Gemm fc 1 1 in0 h 3={transB} 5=1 {c_term} 8={N} 9={K}", *weights)
        if bias:  # C_data is tagged too (every constant of the Gemm layer)
            b.blob = TAG_F32 + B.astype(np.float32).tobytes() + TAG_F32 + C.astype(np.float32).tobytes()
        b.add(f"GELU act 1 1 h out0 0={fast_gelu}")
        param, blob = b.text(), b.blob
        net = Net.from_bytes(param, blob)
        fused_kernels = [k for k in _kernels(net) if k] if net.plan.fused is not None else []
        assert (("matmul_act",) in fused_kernels) == (fast_gelu == 0)
        for shape in [(7, K), (K,)]:
            x = rng.standard_normal(shape).astype(np.float32)
            got = _agree(net, {"in0": x}, exact=False)
            assert got["out0"].shape == (shape[0] if len(shape) == 2 else 1, N)
            _against_wheel(param, blob, {"in0": x}, got, f"Gemm + GELU {fast_gelu} vs the wheel")


def test_a_squeeze_excite_block_of_convolutions_on_the_pooled_vector():
    """onnx2ncnn's form of the block: the global Pooling gives a 1-D blob, which the 1 x 1 Convolutions read as
    InnerProducts (ncnn's flat path). Each Convolution + activation is a fused step that takes 3-D blobs only: it
    computes this one with its layers as written, in the step, without running the plan again."""
    b = _Builder(11)
    b.add("Split split 1 2 in0 x0 x1")
    b.add("Pooling gap 1 1 x1 p 0=1 4=1")
    b.conv("fc1", "p", "h", 16, 4, k=1, pad=0, extra="9=1")
    b.conv("fc2", "h", "g", 4, 16, k=1, pad=0)
    b.act("hardsigmoid", "g", "ga")
    b.add("BinaryOp mul 2 1 x0 ga out0 0=2")
    param, blob = b.text(), b.blob
    net = Net.from_bytes(param, blob)
    assert ("conv_act",) in _kernels(net)  # fc2 + its HardSigmoid
    x = np.random.default_rng(12).standard_normal((16, 6, 5)).astype(np.float32)
    reruns = _runs_of_the_written_plan(net)
    got = net.run({"in0": x})
    assert not reruns
    _agree(net, {"in0": x}, exact=True)
    _against_wheel(param, blob, {"in0": x}, got, "SE of 1x1 Convolutions on the pooled vector vs the wheel")
