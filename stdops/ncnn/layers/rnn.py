"""Recurrent layers (ncnn-operators.txt: LSTM, GRU, RNN) on the shared recurrent kernels.

ncnn stores, per direction, weight_xc [gates*H, I], bias_c [gates', H], weight_hc [gates*H, num_output]
(LSTM: weight_hr [num_output, H] when a projection is present), gate order LSTM I F O G, GRU R U N with
bias rows R U WN BN. At load time these become ONNX's layout and gate order (LSTM i o f c, GRU z r h with
linear_before_reset): the fp32 layers without a projection run the ONNX LSTM / GRU / RNN kernels whole;
the projection LSTM and the int8 layers run their own time loop on the same cells
(:mod:`stdops.ops.rnn_cell`), with the recurrent product computed their way (through weight_hr; or
ncnn's dynamic quantization: per-step absmax int8 of x and h, exact int32 products by MatMulInteger).
A blob is [T, size] (2d); the output is [T, num_output * D]; optional bottoms/tops carry the hidden (and
cell) state [D, num_output].
"""

from __future__ import annotations

import numpy as np

from ...errors import KernelError
from ...ops import linalg, rnn_cell
from ...ops import rnn as recurrent
from ...ops.bind import bind
from ..spec import P, Ref, W, layer

_F32 = np.float32

_RNN_PARAMS = [P(0, "num_output", 0), P(1, "weight_data_size", 0), P(2, "direction", 0), P(8, "int8_scale_term", 0)]


def _dirs(p) -> int:
    if p.direction not in (0, 1, 2):
        raise ValueError(f"direction must be 0 (forward), 1 (reverse) or 2 (bidirectional), got {p.direction}")
    return 2 if p.direction == 2 else 1


def _input_size(p, gates: int, hidden: int) -> int:
    d = _dirs(p)
    if p.num_output <= 0 or hidden <= 0:
        raise ValueError(f"num_output must be positive, got {p.num_output}")
    per = d * hidden * gates
    if p.weight_data_size <= 0 or p.weight_data_size % per:
        raise ValueError(
            f"weight_data_size {p.weight_data_size} is not a positive multiple of {per} (directions x hidden x gates)"
        )
    return p.weight_data_size // per


def _weights(p, gates: int, bias_rows: int, hidden: int, proj: bool) -> list:
    d = _dirs(p)
    size = _input_size(p, gates, hidden)
    ws = [
        W("weight_xc", size * hidden * gates * d, True),
        W("bias_c", hidden * bias_rows * d, True),
        W("weight_hc", p.num_output * hidden * gates * d, True),
    ]
    if proj:
        ws.append(W("weight_hr", hidden * p.num_output * d, True))
    if p.int8_scale_term:
        ws += [W("weight_xc_int8_scales", hidden * gates * d), W("weight_hc_int8_scales", hidden * gates * d)]
    return ws


def _direction_name(p) -> str:
    return ("forward", "reverse", "bidirectional")[p.direction]


def _state(blob: np.ndarray | None, d: int, n: int, what: str) -> np.ndarray:
    """A state bottom ([D, n] or [n]) as [D, n] float32 (zeros when absent)."""
    if blob is None:
        return np.zeros((d, n), _F32)
    if blob.size != d * n:
        raise ValueError(f"{what} state has {blob.size} values, expected {d} x {n}")
    return np.asarray(blob, _F32).reshape(d, n)


def _state_out(state: np.ndarray, like: np.ndarray | None) -> np.ndarray:
    """The state top: the shape of the state bottom when one was given, else [D, n]."""
    return state.reshape(like.shape) if like is not None else state


def _directions(p, D: int, run_dir, x: np.ndarray, *states: np.ndarray) -> tuple:
    """``run_dir(x, d, *states of direction d, reverse)`` for every direction: (y [T, D * n] with the
    directions side by side, each final state stacked [D, n])."""
    outs = [run_dir(x, d, *(s[d] for s in states), p.direction == 1 or d == 1) for d in range(D)]
    y = np.concatenate([o[0] for o in outs], axis=1)
    return (y, *(np.stack([o[k] for o in outs]) for k in range(1, len(outs[0]))))


def _check_x(x: np.ndarray, size: int, name: str) -> np.ndarray:
    if x.ndim != 2 or x.shape[1] != size:
        raise ValueError(f"{name} takes a 2d blob [T, {size}], got shape {x.shape}")
    return x


# --------------------------------------------------------------------------- int8 (ncnn's own scheme)


def _dyn_quant(v: np.ndarray, axis=None) -> tuple[np.ndarray, np.ndarray]:
    """Round-half-away-from-zero int8 quantization with scale 127 / absmax (1 if absmax is 0)."""
    absmax = np.abs(v).max(axis=axis, keepdims=True) if v.size else np.zeros((1,) * v.ndim, _F32)
    scale = np.where(absmax == 0, _F32(1), _F32(127) / np.where(absmax == 0, _F32(1), absmax)).astype(_F32)
    return _round_int8(v * scale), scale


def _round_int8(a: np.ndarray) -> np.ndarray:
    """round(a) half away from zero, clamped to [-127, 127], as int32."""
    m = np.abs(a)
    f = np.floor(m)
    q = f + (m - f >= 0.5)
    return np.clip(np.copysign(q, a), -127, 127).astype(np.int32)


def _int8_run(x, wxc8, scx, whc8, sch, h0, c0, reverse, cell_fn):
    """One direction of an int8 recurrence: gate pre-activations = bias + descaled int dot products.
    cell_fn(pre_x, pre_h, h, c) -> (h_new, c_new): pre_x/pre_h are the descaled x and h products."""
    xq, xs = _dyn_quant(x, axis=1)  # per time step
    T = x.shape[0]
    h, c = h0.copy(), (None if c0 is None else c0.copy())
    ys = np.zeros((T, h.shape[0]), _F32)
    dx = (_F32(1) / xs[:, 0])[:, None] * (_F32(1) / scx)[None, :]  # [T, G*H]
    gx = linalg.mat_mul_integer(xq.astype(np.int8), wxc8.T).astype(_F32) * dx  # [T, G*H]
    for t in range(T):
        ti = T - 1 - t if reverse else t
        hq, hs = _dyn_quant(h)
        gh = linalg.mat_mul_integer(whc8, hq.astype(np.int8)).astype(_F32) * ((_F32(1) / hs[0]) * (_F32(1) / sch))
        h, c = cell_fn(gx[ti], gh, h, c)
        ys[ti] = h
    return ys, h, c


# --------------------------------------------------------------------------- LSTM


def _lstm_weights(p):
    return _weights(p, 4, 4, p.hidden_size, p.num_output != p.hidden_size)


@layer(
    "LSTM",
    params=_RNN_PARAMS[:3] + [P(3, "hidden_size", Ref("num_output")), P(8, "int8_scale_term", 0)],
    weights=_lstm_weights,
    inputs=None,
    outputs=None,
    kernels=(recurrent.lstm, rnn_cell.lstm_cell, linalg.gemm, linalg.mat_mul, linalg.mat_mul_integer),
)
def lstm(p, w):
    """c = sigmoid(F) * c + sigmoid(I) * tanh(G); h = sigmoid(O) * tanh(c) (times weight_hr when
    hidden_size != num_output); gates = W_xc x + W_hc h + b. Bottoms x[, h0, c0]; tops y[, h, c]."""
    H = p.hidden_size
    O = p.num_output
    D = _dirs(p)
    size = _input_size(p, 4, H)
    proj = O != H
    wxc = w["weight_xc"].reshape(D, 4 * H, size)
    bc = w["bias_c"].reshape(D, 4, H)
    whc = w["weight_hc"].reshape(D, 4 * H, O)
    whr = w["weight_hr"].reshape(D, O, H) if proj else None
    if whr is not None and whr.dtype == np.int8:  # lstm.cpp uses the projection as fp32, int8 mode or not
        raise KernelError("LSTM: weight_hr is stored as int8; ncnn reads the projection as fp32 data")
    int8 = bool(p.int8_scale_term)
    order = [0, 2, 1, 3]  # ONNX i o f c from ncnn I F O G

    def onnx_gates(m, k):  # [D, 4H, k] in ONNX order
        return np.ascontiguousarray(m.reshape(D, 4, H, k)[:, order].reshape(D, 4 * H, k), dtype=_F32)

    direction = _direction_name(p)
    bias = np.ascontiguousarray(bc[:, order].reshape(D, 4 * H), dtype=_F32)

    def cell(gates, c):  # one step of one direction on the shared cell: (Ht, Ct) before the projection
        hh, cc = rnn_cell.lstm_cell(gates[None], c[None])
        return hh[0], cc[0]

    def project(d, hh):
        return linalg.mat_mul(whr[d], hh) if proj else hh

    if int8:
        scx = onnx_gates(w["weight_xc_int8_scales"].reshape(D, 4 * H, 1), 1).reshape(D, 4 * H)
        sch = onnx_gates(w["weight_hc_int8_scales"].reshape(D, 4 * H, 1), 1).reshape(D, 4 * H)
        wx8 = np.ascontiguousarray(wxc.reshape(D, 4, H, size)[:, order].reshape(D, 4 * H, size))
        wh8 = np.ascontiguousarray(whc.reshape(D, 4, H, O)[:, order].reshape(D, 4 * H, O))

        def run_dir(x, d, h0, c0, reverse):
            def step_int8(px, ph, h, c):
                hh, c = cell(bias[d] + px + ph, c)
                return project(d, hh), c

            return _int8_run(x, wx8[d], scx[d], wh8[d], sch[d], h0, c0, reverse, step_int8)
    elif not proj:
        Wk = onnx_gates(wxc, size)
        Rk = onnx_gates(whc, O)
        Bk = np.concatenate([bias, np.zeros((D, 4 * H), _F32)], axis=1)
        # bound once: the kernel's prepare lays the weights out for its compiled loop at load time
        lstm_step = bind(recurrent.lstm, {"hidden_size": H, "direction": direction}, (None, Wk, Rk, Bk))

        def run_all(x, h0, c0):
            y, yh, yc = lstm_step(x[:, None, :], Wk, Rk, Bk, None, h0[:, None, :], c0[:, None, :])
            return y.reshape(x.shape[0], D * O), yh[:, 0], yc[:, 0]
    else:  # the recurrent product reads the projected state r = weight_hr h, of num_output values
        Wx = [onnx_gates(wxc, size)[d] for d in range(D)]
        Wh = [onnx_gates(whc, O)[d] for d in range(D)]

        def run_dir(x, d, h0, c0, reverse):
            T = x.shape[0]
            gx = linalg.gemm(x.astype(_F32, copy=False), Wx[d], bias[d], transB=1)  # every step's projection
            ys = np.zeros((T, O), _F32)
            r, c = h0, c0
            for t in range(T):
                ti = T - 1 - t if reverse else t
                hh, c = cell(gx[ti] + linalg.mat_mul(Wh[d], r), c)
                r = project(d, hh)
                ys[ti] = r
            return ys, r, c

    def step(*bottoms):
        x = _check_x(bottoms[0], size, "LSTM")
        hb = bottoms[1] if len(bottoms) >= 3 else None
        cb = bottoms[2] if len(bottoms) >= 3 else None
        h0 = _state(hb, D, O, "LSTM hidden")
        c0 = _state(cb, D, H, "LSTM cell")
        if not int8 and not proj:
            y, yh, yc = run_all(x, h0, c0)
        else:
            y, yh, yc = _directions(p, D, run_dir, x, h0, c0)
        if p.n_tops >= 3:
            return y, _state_out(yh, hb), _state_out(yc, cb)
        return y

    return step


# --------------------------------------------------------------------------- GRU


@layer(
    "GRU",
    params=_RNN_PARAMS,
    weights=lambda p: _weights(p, 3, 4, p.num_output, False),
    inputs=None,
    outputs=None,
    kernels=(recurrent.gru, rnn_cell.gru_cell, linalg.mat_mul_integer),
)
def gru(p, w):
    """r = sigmoid(W_r x + U_r h + b_r), u = sigmoid(W_u x + U_u h + b_u),
    n = tanh(W_n x + b_wn + r * (U_n h + b_bn)), h = (1 - u) * n + u * h. Bottoms x[, h0]; tops y[, h]."""
    H = p.num_output
    D = _dirs(p)
    size = _input_size(p, 3, H)
    wxc = w["weight_xc"].reshape(D, 3, H, size)
    bc = w["bias_c"].reshape(D, 4, H)
    whc = w["weight_hc"].reshape(D, 3, H, H)
    order = [1, 0, 2]  # ONNX z r h from ncnn R U N
    int8 = bool(p.int8_scale_term)
    direction = _direction_name(p)

    if int8:  # on the shared cell in ONNX order (z = U, r = R, h = N), linear before reset
        scx = w["weight_xc_int8_scales"].reshape(D, 3, H)[:, order].reshape(D, 3 * H)
        sch = w["weight_hc_int8_scales"].reshape(D, 3, H)[:, order].reshape(D, 3 * H)
        wx8 = np.ascontiguousarray(wxc[:, order].reshape(D, 3 * H, size))
        wh8 = np.ascontiguousarray(whc[:, order].reshape(D, 3 * H, H))
        bx = np.concatenate([bc[:, 1], bc[:, 0], bc[:, 2]], axis=1).astype(_F32)  # b_u, b_r, b_wn
        bh = np.concatenate([np.zeros((D, 2 * H), _F32), bc[:, 3].astype(_F32)], axis=1)  # b_bn

        def run_dir(x, d, h0, reverse):
            def step_int8(px, ph, h, c):
                hn = rnn_cell.gru_cell((bx[d] + px)[None], (bh[d] + ph)[None], h[None], linear_before_reset=1)
                return hn[0], None

            ys, h, _ = _int8_run(x, wx8[d], scx[d], wh8[d], sch[d], h0, None, reverse, step_int8)
            return ys, h
    else:
        Wk = np.ascontiguousarray(wxc[:, order].reshape(D, 3 * H, size), dtype=_F32)
        Rk = np.ascontiguousarray(whc[:, order].reshape(D, 3 * H, H), dtype=_F32)
        zero = np.zeros((D, H), _F32)
        Wb = np.concatenate([bc[:, 1], bc[:, 0], bc[:, 2]], axis=1)
        Rb = np.concatenate([zero, zero, bc[:, 3]], axis=1)
        Bk = np.concatenate([Wb, Rb], axis=1).astype(_F32)

    def step(*bottoms):
        x = _check_x(bottoms[0], size, "GRU")
        hb = bottoms[1] if len(bottoms) >= 2 else None
        h0 = _state(hb, D, H, "GRU hidden")
        if int8:
            y, yh = _directions(p, D, run_dir, x, h0)
        else:
            y, yh = recurrent.gru(
                x[:, None, :],
                Wk,
                Rk,
                Bk,
                None,
                h0[:, None, :],
                hidden_size=H,
                direction=direction,
                linear_before_reset=1,
            )
            y, yh = y.reshape(x.shape[0], D * H), yh[:, 0]
        if p.n_tops >= 2:
            return y, _state_out(yh, hb)
        return y

    return step


# --------------------------------------------------------------------------- RNN


@layer(
    "RNN",
    params=_RNN_PARAMS,
    weights=lambda p: _weights(p, 1, 1, p.num_output, False),
    inputs=None,
    outputs=None,
    kernels=(recurrent.rnn, rnn_cell.rnn_cell, linalg.mat_mul_integer),
)
def rnn(p, w):
    """h = tanh(W_xc x + W_hc h + b). Bottoms x[, h0]; tops y[, h]."""
    H = p.num_output
    D = _dirs(p)
    size = _input_size(p, 1, H)
    wxc = w["weight_xc"].reshape(D, H, size)
    bc = w["bias_c"].reshape(D, H)
    whc = w["weight_hc"].reshape(D, H, H)
    int8 = bool(p.int8_scale_term)
    direction = _direction_name(p)

    if int8:
        scx = w["weight_xc_int8_scales"].reshape(D, H)
        sch = w["weight_hc_int8_scales"].reshape(D, H)
        bias = bc.astype(_F32)

        def run_dir(x, d, h0, reverse):
            def step_int8(px, ph, h, c):
                return rnn_cell.rnn_cell((bias[d] + px + ph)[None])[0], None

            ys, h, _ = _int8_run(x, wxc[d], scx[d], whc[d], sch[d], h0, None, reverse, step_int8)
            return ys, h
    else:
        Wk = np.ascontiguousarray(wxc, dtype=_F32)
        Rk = np.ascontiguousarray(whc, dtype=_F32)
        Bk = np.concatenate([bc, np.zeros((D, H), _F32)], axis=1).astype(_F32)

    def step(*bottoms):
        x = _check_x(bottoms[0], size, "RNN")
        hb = bottoms[1] if len(bottoms) >= 2 else None
        h0 = _state(hb, D, H, "RNN hidden")
        if int8:
            y, yh = _directions(p, D, run_dir, x, h0)
        else:
            y, yh = recurrent.rnn(x[:, None, :], Wk, Rk, Bk, None, h0[:, None, :], hidden_size=H, direction=direction)
            y, yh = y.reshape(x.shape[0], D * H), yh[:, 0]
        if p.n_tops >= 2:
            return y, _state_out(yh, hb)
        return y

    return step
