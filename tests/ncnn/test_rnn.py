"""LSTM, GRU and RNN against the ncnn wheel: directions, state bottoms/tops, LSTM projection, int8 weights."""

from __future__ import annotations

import numpy as np
import pytest

import stdops.ncnn as sn
from stdops.errors import ModelFormatError

from . import wheel

N = 24
needs_wheel = pytest.mark.skipif(not wheel.available(), reason="the ncnn wheel (test extra) is not installed")

GATES = {"LSTM": (4, 4), "GRU": (3, 4), "RNN": (1, 1)}  # weight gates, bias rows


def _f(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def make_case(type_name, i, int8=False):
    rng = np.random.default_rng({"LSTM": 100, "GRU": 200, "RNN": 300}[type_name] * 100 + i + (50 if int8 else 0))
    gates, brows = GATES[type_name]
    direction = i % 3
    D = 2 if direction == 2 else 1
    T = int(rng.integers(1, 7))
    size = int(rng.integers(1, 6))
    O = int(rng.integers(1, 6))
    H = O
    params = {0: O, 2: direction}
    if type_name == "LSTM" and (i // 3) % 3 == 1:
        H = int(rng.integers(1, 6))
        if H == O:
            H += 1
        params[3] = H
    params[1] = size * H * gates * D
    ws = 0.5 if type_name != "RNN" else 0.4
    if int8:
        params[8] = 1
        w_xc = rng.integers(-127, 128, size=D * gates * H * size).astype(np.int8)
        w_hc = rng.integers(-127, 128, size=D * gates * H * O).astype(np.int8)
    else:
        w_xc = _f(rng, D * gates * H * size, scale=ws)
        w_hc = _f(rng, D * gates * H * O, scale=ws)
    weights = [w_xc, _f(rng, D * brows * H, scale=0.3), w_hc]
    if H != O:
        weights.append(_f(rng, D * O * H, scale=0.5))
    if int8:
        weights += [
            rng.uniform(50, 200, D * gates * H).astype(np.float32),
            rng.uniform(50, 200, D * gates * H).astype(np.float32),
        ]
    x = _f(rng, T, size)
    n_states = 2 if type_name == "LSTM" else 1
    mode = (i // 9) % 3 if i < 18 else i % 3  # 0: x only, 1: with state bottoms and tops, 2: mixed
    inputs = [x]
    n_out = 1
    if mode == 1 or (mode == 2 and i % 2):
        shapes = [(D, O), (D, H)][:n_states]
        if D == 1 and i % 4 == 1:
            shapes = [(O,), (H,)][:n_states]
        inputs += [_f(rng, *s, scale=0.5) for s in shapes]
    if mode == 1 or (mode == 2 and not i % 2):
        n_out = 1 + n_states
    return params, weights, inputs, n_out


def _check(type_name, case, atol=1e-4):
    params, weights, inputs, n_out = case
    ours = sn.run_layer(type_name, params, weights, inputs, n_out)
    theirs = wheel.wheel_run(type_name, params, weights, inputs, n_out)
    wheel.assert_close(ours, theirs, atol=atol, rtol=1e-4, what=f"{type_name} {params} {[x.shape for x in inputs]}")


@needs_wheel
@pytest.mark.parametrize("type_name", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("i", range(N))
def test_recurrent_fp32(type_name, i):
    _check(type_name, make_case(type_name, i))


@needs_wheel
@pytest.mark.parametrize("type_name", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("i", range(6))
def test_recurrent_int8(type_name, i):
    _check(type_name, make_case(type_name, i, int8=True), atol=1e-3)


def test_state_tops_through_a_net(tmp_path):
    """LSTM with state bottoms and tops, GRU and RNN, loaded from a text .param and a .bin like any model."""
    from stdops.ncnn.modelbin import ModelBinWriter

    mb = ModelBinWriter()
    cases = {t: make_case(t, 10) for t in ("LSTM", "GRU", "RNN")}  # direction 1, state bottoms and tops
    lines = []
    for t, (params, weights, inputs, n_out) in cases.items():
        for w in weights:
            mb.write(w, True)
        ps = " ".join(f"{k}={v}" for k, v in params.items())
        bottoms = " ".join(f"{t}_in{k}" for k in range(len(inputs)))
        tops = " ".join(f"{t}_out{k}" for k in range(n_out))
        lines.append(f"{t} {t.lower()} {len(inputs)} {n_out} {bottoms} {tops} {ps}")
    inputs_decl = [f"Input {t}_i{k} 0 1 {t}_in{k}" for t, c in cases.items() for k in range(len(c[2]))]
    nblobs = sum(len(c[2]) + c[3] for c in cases.values())
    text = f"7767517\n{len(inputs_decl) + len(lines)} {nblobs}\n" + "\n".join(inputs_decl + lines) + "\n"
    (tmp_path / "m.param").write_text(text)
    (tmp_path / "m.bin").write_bytes(mb.getvalue())
    net = sn.Net.load(tmp_path / "m.param", tmp_path / "m.bin")
    feeds = {f"{t}_in{k}": x for t, c in cases.items() for k, x in enumerate(c[2])}
    out = net.run(feeds)
    for t, (params, weights, inputs, n_out) in cases.items():
        want = sn.run_layer(t, params, weights, inputs, n_out)
        for k in range(n_out):
            np.testing.assert_array_equal(out[f"{t}_out{k}"], want[k])


def test_bad_params_and_weights():
    x = np.zeros((3, 2), np.float32)
    with pytest.raises(ModelFormatError, match="float literal"):
        sn.run_layer("LSTM", {0: 2.0, 1: 16}, [], [x])
    with pytest.raises(ModelFormatError, match="has 3 elements"):
        sn.run_layer(
            "GRU", {0: 2, 1: 12}, [np.zeros(12, np.float32), np.zeros(3, np.float32), np.zeros(12, np.float32)], [x]
        )
    with pytest.raises((ModelFormatError, ValueError), match="weight_data_size"):
        sn.run_layer("RNN", {0: 2, 1: 5}, [], [x])
    with pytest.raises(ValueError, match=r"2d blob \[T, 2\]"):
        sn.run_layer(
            "RNN",
            {0: 2, 1: 4},
            [np.zeros(4, np.float32), np.zeros(2, np.float32), np.zeros(4, np.float32)],
            [np.zeros((3, 3), np.float32)],
        )
