"""RNN / GRU / LSTM kernels against a naive per-sequence, per-step reference written here."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from stdops.errors import KernelError
from stdops.ops.rnn import gru, lstm, rnn
from stdops.ops.rnn_cell import gru_cell, lstm_cell, rnn_cell

# ----------------------------------------------------------------------------- naive reference

_REF_ACT = {  # name -> (f(x, alpha, beta), default alpha, default beta)
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: 1.0 / (1.0 + np.exp(-x)), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0.0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.minimum(np.maximum(a * x + b, 0), 1), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0)) - 1)), 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.log(1 + np.exp(x)), None, None),
}

_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _ref_acts(names, alphas, betas):
    alphas, betas = list(alphas or []), list(betas or [])
    out = []
    for nm in names:
        f, da, db = _REF_ACT[nm.lower()]
        a = alphas.pop(0) if (da is not None and alphas) else da
        b = betas.pop(0) if (db is not None and betas) else db
        out.append(lambda x, f=f, a=a, b=b: f(x, a, b))
    return out


def reference(
    kind,
    X,
    W,
    R,
    B=None,
    seq=None,
    h0=None,
    c0=None,
    P=None,
    *,
    direction="forward",
    layout=0,
    activations=None,
    alpha=None,
    beta=None,
    clip=None,
    lbr=0,
    input_forget=0,
):
    X, W, R = (np.asarray(a, np.float64) for a in (X, W, R))
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else np.asarray(h0).transpose(1, 0, 2)
        c0 = None if c0 is None else np.asarray(c0).transpose(1, 0, 2)
    T, Bn, _ = X.shape
    D = 2 if direction == "bidirectional" else 1
    H = R.shape[2]
    G = _GATES[kind]
    B = np.zeros((D, 2 * G * H)) if B is None else np.asarray(B, np.float64)
    seq = np.full(Bn, T) if seq is None else np.asarray(seq)
    h0 = np.zeros((D, Bn, H)) if h0 is None else np.asarray(h0, np.float64)
    c0 = np.zeros((D, Bn, H)) if c0 is None else np.asarray(c0, np.float64)
    P = np.zeros((D, 3 * H)) if P is None else np.asarray(P, np.float64)
    k = len(_DEFAULT_ACTS[kind])
    names = activations or _DEFAULT_ACTS[kind] * D
    acts = _ref_acts(names, alpha, beta)
    cl = (lambda v: v) if clip is None else (lambda v: np.clip(v, -clip, clip))
    Y = np.zeros((T, D, Bn, H))
    Yh = np.zeros((D, Bn, H))
    Yc = np.zeros((D, Bn, H))
    for d in range(D):
        fs = acts[d * k : (d + 1) * k]
        backwards = direction == "reverse" or d == 1
        Wd, Rd = W[d], R[d]
        Wb, Rb = B[d, : G * H], B[d, G * H :]
        for b in range(Bn):
            h, c = h0[d, b].copy(), c0[d, b].copy()
            steps = range(seq[b] - 1, -1, -1) if backwards else range(seq[b])
            for t in steps:
                x = X[t, b]
                if kind == "RNN":
                    h = fs[0](cl(Wd @ x + Rd @ h + Wb + Rb))
                elif kind == "GRU":
                    sl = [slice(j * H, (j + 1) * H) for j in range(3)]
                    z = fs[0](cl(Wd[sl[0]] @ x + Rd[sl[0]] @ h + Wb[sl[0]] + Rb[sl[0]]))
                    r = fs[0](cl(Wd[sl[1]] @ x + Rd[sl[1]] @ h + Wb[sl[1]] + Rb[sl[1]]))
                    if lbr:
                        hh = fs[1](cl(Wd[sl[2]] @ x + r * (Rd[sl[2]] @ h + Rb[sl[2]]) + Wb[sl[2]]))
                    else:
                        hh = fs[1](cl(Wd[sl[2]] @ x + Rd[sl[2]] @ (r * h) + Rb[sl[2]] + Wb[sl[2]]))
                    h = (1 - z) * hh + z * h
                else:
                    pre = [
                        Wd[j * H : (j + 1) * H] @ x
                        + Rd[j * H : (j + 1) * H] @ h
                        + Wb[j * H : (j + 1) * H]
                        + Rb[j * H : (j + 1) * H]
                        for j in range(4)
                    ]
                    pi, po, pf = P[d, :H], P[d, H : 2 * H], P[d, 2 * H :]
                    i = fs[0](cl(pre[0] + pi * c))
                    f = 1 - i if input_forget else fs[0](cl(pre[2] + pf * c))
                    c = f * c + i * fs[1](cl(pre[3]))
                    o = fs[0](cl(pre[1] + po * c))
                    h = o * fs[2](c)
                Y[t, d, b] = h
            if seq[b] > 0:  # a length-0 sequence has zero final states (onnxruntime's convention)
                Yh[d, b], Yc[d, b] = h, c
    if layout:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return (Y, Yh, Yc) if kind == "LSTM" else (Y, Yh)


# ----------------------------------------------------------------------------- helpers

_KERNELS = {"RNN": rnn, "GRU": gru, "LSTM": lstm}


def make(
    kind, *, T=4, Bn=3, I=5, H=3, D=1, layout=0, seed=0, dtype=np.float32, seq=None, init=True, peep=False, bias=True
):
    rng = np.random.default_rng(seed)
    G = _GATES[kind]
    X = rng.standard_normal((T, Bn, I) if layout == 0 else (Bn, T, I)).astype(dtype)
    W = (rng.standard_normal((D, G * H, I)) * 0.6).astype(dtype)
    R = (rng.standard_normal((D, G * H, H)) * 0.6).astype(dtype)
    B = (rng.standard_normal((D, 2 * G * H)) * 0.5).astype(dtype) if bias else None
    sshape = (D, Bn, H) if layout == 0 else (Bn, D, H)
    h0 = rng.standard_normal(sshape).astype(dtype) if init else None
    c0 = rng.standard_normal(sshape).astype(dtype) if init else None
    P = (rng.standard_normal((D, 3 * H)) * 0.5).astype(dtype) if peep else None
    sl = None if seq is None else np.asarray(seq, np.int32)
    return X, W, R, B, sl, h0, c0, P


def run_case(
    kind,
    *,
    D=1,
    layout=0,
    seq=None,
    init=True,
    peep=False,
    bias=True,
    dtype=np.float32,
    direction=None,
    activations=None,
    alpha=None,
    beta=None,
    clip=None,
    lbr=0,
    input_forget=0,
    rtol=2e-5,
    atol=2e-5,
    **shape,
):
    X, W, R, B, sl, h0, c0, P = make(
        kind, D=D, layout=layout, seq=seq, init=init, peep=peep, bias=bias, dtype=dtype, **shape
    )
    direction = direction or ("bidirectional" if D == 2 else "forward")
    kw = dict(direction=direction, layout=layout)
    if activations is not None:
        kw["activations"] = tuple(activations)
    if alpha is not None:
        kw["activation_alpha"] = tuple(alpha)
    if beta is not None:
        kw["activation_beta"] = tuple(beta)
    if clip is not None:
        kw["clip"] = clip
    if kind == "GRU":
        kw["linear_before_reset"] = lbr
    if kind == "LSTM":
        kw["input_forget"] = input_forget
        got = lstm(X, W, R, B, sl, h0, c0, P, hidden_size=W.shape[1] // 4, **kw)
    else:
        got = _KERNELS[kind](X, W, R, B, sl, h0, **kw)
    want = reference(
        kind,
        X,
        W,
        R,
        B,
        sl,
        h0,
        c0 if kind == "LSTM" else None,
        P if kind == "LSTM" else None,
        direction=direction,
        layout=layout,
        activations=activations,
        alpha=alpha,
        beta=beta,
        clip=clip,
        lbr=lbr,
        input_forget=input_forget,
    )
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.dtype(dtype)
        assert g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=rtol, atol=atol)
    return got


# ----------------------------------------------------------------------------- tests

_STRUCT = list(itertools.product(["RNN", "GRU", "LSTM"], [1, 2], [0, 1], [None, [4, 1, 3]]))


@pytest.mark.parametrize("kind,D,layout,seq", _STRUCT)
def test_directions_layouts_sequence_lens(kind, D, layout, seq):
    run_case(kind, D=D, layout=layout, seq=seq)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("seq", [None, [2, 4, 0]])
def test_reverse(kind, seq):
    run_case(kind, direction="reverse", seq=seq)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_defaults_no_bias_no_initial_state(kind):
    run_case(kind, init=False, bias=False)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_float64_stays_float64(kind):
    run_case(kind, dtype=np.float64, D=2, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_clip(kind):
    run_case(kind, D=2, clip=0.4, seq=[4, 2, 3])


@pytest.mark.parametrize("lbr,D,seq", [(1, 1, None), (1, 2, [3, 4, 1]), (0, 2, None)])
def test_gru_linear_before_reset(lbr, D, seq):
    run_case("GRU", lbr=lbr, D=D, seq=seq)


@pytest.mark.parametrize("D,seq,input_forget", [(1, None, 0), (2, [4, 2, 3], 0), (1, None, 1), (2, [1, 4, 4], 1)])
def test_lstm_peepholes_input_forget(D, seq, input_forget):
    run_case("LSTM", peep=True, D=D, seq=seq, input_forget=input_forget)


_ACT_CASES = [
    ("RNN", ["Relu"], None, None),
    ("RNN", ["LeakyRelu"], [0.3], None),
    ("RNN", ["Affine"], [0.7], [0.2]),
    ("RNN", ["ThresholdedRelu"], [0.25], None),
    ("RNN", ["Elu"], [0.5], None),
    ("RNN", ["Softsign"], None, None),
    ("RNN", ["Softplus"], None, None),
    ("RNN", ["ScaledTanh"], [1.5], [0.5]),
    ("RNN", ["HardSigmoid"], None, None),  # default alpha 0.2, beta 0.5
    ("RNN", ["LeakyRelu"], None, None),  # default alpha 0.01
    ("GRU", ["HardSigmoid", "Softsign"], [0.3], [0.4]),
    ("GRU", ["sigmoid", "relu"], None, None),  # case-insensitive names
    ("LSTM", ["HardSigmoid", "ScaledTanh", "Elu"], [0.3, 1.5, 0.7], [0.4, 0.8]),
    ("LSTM", ["Sigmoid", "Affine", "Softplus"], [0.5], [0.1]),
]


@pytest.mark.parametrize("kind,acts,alpha,beta", _ACT_CASES)
def test_activations(kind, acts, alpha, beta):
    run_case(kind, activations=acts, alpha=alpha, beta=beta)


def test_bidirectional_different_activations():
    run_case("RNN", D=2, activations=["Tanh", "Relu"])
    run_case(
        "LSTM",
        D=2,
        activations=["Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Softsign", "Relu"],
        alpha=[0.25],
        beta=[0.45],
        seq=[3, 4, 2],
    )


def test_padded_steps_zero_and_state_held():
    Y, Yh, Yc = run_case("LSTM", seq=[4, 1, 2])
    assert not Y[1:, :, 1].any() and not Y[2:, :, 2].any()
    np.testing.assert_array_equal(Yh[0, 1], Y[0, 0, 1])
    np.testing.assert_array_equal(Yh[0, 2], Y[1, 0, 2])


def test_inputs_not_modified():
    X, W, R, B, sl, h0, c0, P = make("LSTM", D=2, peep=True, seq=[4, 2, 3])
    copies = [a.copy() for a in (X, W, R, B, sl, h0, c0, P)]
    lstm(X, W, R, B, sl, h0, c0, P, direction="bidirectional")
    for a, c in zip((X, W, R, B, sl, h0, c0, P), copies):
        np.testing.assert_array_equal(a, c)


def test_float16_input():
    X, W, R, B, sl, h0, _, _ = make("GRU", dtype=np.float16)
    Y, Yh = gru(X, W, R, B, sl, h0)
    assert Y.dtype == np.float16 and Yh.dtype == np.float16
    want = reference("GRU", X, W, R, B, sl, h0)
    np.testing.assert_allclose(Y.astype(np.float64), want[0], rtol=5e-3, atol=5e-3)


_BAD = [
    ("RNN", dict(direction="sideways"), "direction"),
    ("RNN", dict(layout=2), "layout"),
    ("RNN", dict(hidden_size=7), "hidden_size"),
    ("RNN", dict(activations=("Tanh", "Tanh")), "activations"),
    ("RNN", dict(activations=("Swish",)), "activation"),
    ("GRU", dict(direction="bidirectional"), "R must have shape"),
]


@pytest.mark.parametrize("kind,kw,msg", _BAD)
def test_bad_attributes(kind, kw, msg):
    X, W, R, B, sl, h0, _, _ = make(kind)
    with pytest.raises(KernelError, match=msg):
        _KERNELS[kind](X, W, R, B, sl, h0, **kw)


def test_bad_inputs():
    X, W, R, B, sl, h0, c0, P = make("LSTM")
    with pytest.raises(KernelError, match="rank 3"):
        lstm(X[0], W, R)
    with pytest.raises(KernelError, match="W must"):
        lstm(X, W[:, :, :-1], R)
    with pytest.raises(KernelError, match="B must"):
        lstm(X, W, R, B[:, :-1])
    with pytest.raises(KernelError, match="sequence_lens"):
        lstm(X, W, R, B, np.array([1, 2, 9], np.int32))
    with pytest.raises(KernelError, match="sequence_lens"):
        lstm(X, W, R, B, np.array([1.0, 2.0, 3.0]))
    with pytest.raises(KernelError, match="initial_h"):
        lstm(X, W, R, B, None, h0[:, :2])
    with pytest.raises(KernelError, match="initial_c"):
        lstm(X, W, R, B, None, h0, c0[:, :, :2])
    with pytest.raises(KernelError, match="P must"):
        lstm(X, W, R, B, None, h0, c0, np.zeros((1, 5), np.float32))
    with pytest.raises(KernelError, match="floating"):
        rnn(X.astype(np.int32), W, R)


def test_lists_accepted_for_tuples():
    X, W, R, B, sl, h0, _, _ = make("RNN")
    a = rnn(X, W, R, B, sl, h0, activations=["LeakyRelu"], activation_alpha=[0.2])
    b = rnn(X, W, R, B, sl, h0, activations=("LeakyRelu",), activation_alpha=(0.2,))
    np.testing.assert_array_equal(a[0], b[0])


# ----------------------------------------------------------------------------- ONNX adapters / binding


def _onnx_run(kind, opset, inputs, attrs):
    onnx = pytest.importorskip("onnx")
    from onnx import helper as oh

    import stdops.onnx

    names = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"][: len(inputs)]
    node_in = [nm if a is not None else "" for nm, a in zip(names, inputs)]
    feeds = {nm: a for nm, a in zip(names, inputs) if a is not None}
    outs = ["Y", "Y_h", "Y_c"][: 3 if kind == "LSTM" else 2]
    node = oh.make_node(kind, node_in, outs, **attrs)
    tp = {np.dtype(np.float32): onnx.TensorProto.FLOAT, np.dtype(np.int32): onnx.TensorProto.INT32}
    g = oh.make_graph(
        [node],
        "g",
        [oh.make_tensor_value_info(nm, tp[a.dtype], a.shape) for nm, a in feeds.items()],
        [oh.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outs],
    )
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", opset)])
    res = stdops.onnx.load(m).run(feeds)
    return [res[o] for o in outs]


@pytest.mark.parametrize(
    "kind,opset,attrs",
    [
        ("RNN", 1, {"output_sequence": 1}),
        ("RNN", 7, {}),
        ("RNN", 14, {"layout": 0}),
        ("GRU", 1, {"output_sequence": 1, "direction": "foward"}),
        ("GRU", 3, {"output_sequence": 0, "linear_before_reset": 1}),
        ("GRU", 7, {"linear_before_reset": 1}),
        ("LSTM", 1, {"output_sequence": 1}),
        ("LSTM", 7, {"input_forget": 1}),
        ("LSTM", 22, {"layout": 0}),
    ],
)
def test_onnx_versions(kind, opset, attrs):
    X, W, R, B, sl, h0, c0, P = make(kind, seq=[4, 2, 3], peep=True)
    inputs = [X, W, R, B, sl, h0] + ([c0, P] if kind == "LSTM" else [])
    got = _onnx_run(kind, opset, inputs, {"hidden_size": R.shape[2], **attrs})
    want = reference(
        kind,
        X,
        W,
        R,
        B,
        sl,
        h0,
        c0 if kind == "LSTM" else None,
        P if kind == "LSTM" else None,
        lbr=attrs.get("linear_before_reset", 0),
        input_forget=attrs.get("input_forget", 0),
    )
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


# ----------------------------------------------------------------------------- the cells


def _clipped(x, clip):
    return x if clip is None else np.clip(x, -clip, clip)


@pytest.mark.parametrize("clip", [None, 0.7])
@pytest.mark.parametrize("input_forget", [0, 1])
@pytest.mark.parametrize("peep", [False, True])
def test_lstm_cell(clip, input_forget, peep):
    rng = np.random.default_rng(11)
    B, H = 3, 5
    gates = rng.standard_normal((B, 4 * H)).astype(np.float32)
    c = rng.standard_normal((B, H)).astype(np.float32)
    p = rng.standard_normal(3 * H).astype(np.float32) if peep else None
    g64, c64 = gates.astype(np.float64), c.astype(np.float64)
    gi, go, gf, gc = (g64[:, k * H : (k + 1) * H] for k in range(4))
    pi, po, pf = (np.zeros(H),) * 3 if p is None else (p[:H], p[H : 2 * H], p[2 * H :])
    sig = _REF_ACT["sigmoid"][0]
    i = sig(_clipped(gi + pi * c64, clip), None, None)
    f = 1 - i if input_forget else sig(_clipped(gf + pf * c64, clip), None, None)
    c_new = f * c64 + i * np.tanh(_clipped(gc, clip))
    o = sig(_clipped(go + po * c_new, clip), None, None)
    before = gates.copy()
    h_got, c_got = lstm_cell(gates, c, p, clip=clip, input_forget=input_forget)
    np.testing.assert_array_equal(gates, before)  # the input is not touched
    assert h_got.dtype == np.float32 and c_got.dtype == np.float32
    np.testing.assert_allclose(c_got, c_new, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h_got, o * np.tanh(c_new), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("lbr", [0, 1])
@pytest.mark.parametrize("clip", [None, 0.5])
@pytest.mark.parametrize("acts", [None, ["HardSigmoid", "Softsign"]])
def test_gru_cell(lbr, clip, acts):
    rng = np.random.default_rng(12)
    B, H = 2, 4
    gx = rng.standard_normal((B, 3 * H)).astype(np.float32)
    gh = rng.standard_normal((B, 3 * H)).astype(np.float32)
    h = rng.standard_normal((B, H)).astype(np.float32)
    r_h = rng.standard_normal((H, H)).astype(np.float32)
    f, g = _ref_acts(acts or ["Sigmoid", "Tanh"], None, None)
    x64, h64, hh64 = gx.astype(np.float64), gh.astype(np.float64), h.astype(np.float64)
    z = f(_clipped(x64[:, :H] + h64[:, :H], clip))
    r = f(_clipped(x64[:, H : 2 * H] + h64[:, H : 2 * H], clip))
    rec = r * h64[:, 2 * H :] if lbr else (r * hh64) @ r_h.astype(np.float64)
    cand = g(_clipped(x64[:, 2 * H :] + rec, clip))
    got = gru_cell(gx, gh, h, None if lbr else r_h, linear_before_reset=lbr, clip=clip, activations=acts)
    np.testing.assert_allclose(got, (1 - z) * cand + z * hh64, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("act,alpha,beta", [(None, None, None), ("Relu", None, None), ("ScaledTanh", [0.5], [2.0])])
def test_rnn_cell(act, alpha, beta):
    rng = np.random.default_rng(13)
    gates = rng.standard_normal((3, 6)).astype(np.float32)
    (f,) = _ref_acts([act or "Tanh"], alpha, beta)
    got = rnn_cell(gates, activations=None if act is None else [act], activation_alpha=alpha, activation_beta=beta)
    np.testing.assert_allclose(got, f(gates.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_cells_refuse_bad_shapes():
    with pytest.raises(KernelError, match="4 \\* hidden"):
        lstm_cell(np.zeros((2, 7), np.float32), np.zeros((2, 1), np.float32))
    with pytest.raises(KernelError, match="r_h"):
        gru_cell(np.zeros((2, 6), np.float32), np.zeros((2, 6), np.float32), np.zeros((2, 2), np.float32))
    with pytest.raises(KernelError, match="floating-point"):
        rnn_cell(np.zeros((2, 3), np.int32))
