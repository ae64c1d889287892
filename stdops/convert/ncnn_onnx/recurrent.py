"""Recurrent ncnn layers -> ONNX LSTM / GRU / RNN.

The weights are re-laid out as the front end does (stdops/ncnn/layers/rnn.py): ncnn's per-direction
weight_xc [gates*H, I], weight_hc [gates*H, num_output], bias_c [gates', H], gate order LSTM I F O G and
GRU R U N (bias rows R U WN BN) become ONNX's W, R, B in ONNX gate order (LSTM i o f c, GRU z r h with
linear_before_reset). A blob [T, size] is the sequence; the output [T, num_output * D]. An LSTM with a
projection (hidden_size != num_output) has no ONNX op: it is unrolled over the (static) time steps.
"""

from __future__ import annotations

import numpy as np

from .base import F32, LayerCtx, emits


def _dirs(p) -> int:
    return 2 if p.direction == 2 else 1


def _direction(p) -> str:
    return ("forward", "reverse", "bidirectional")[p.direction]


def _sequence(ctx: LayerCtx) -> tuple[str, int, int]:
    T, size = ctx.in_shapes[0]
    return ctx.g.reshape(ctx.x(), (T, 1, size)), T, size


def _state(ctx: LayerCtx, k: int, D: int, n: int) -> str:
    return ctx.g.reshape(ctx.x(k), (D, 1, n)) if k < len(ctx.ins) else ""


def _outputs(ctx: LayerCtx, outs: list[str], T: int, D: int, H: int, n_states: int) -> None:
    g = ctx.g
    y = g.op("Transpose", [outs[0]], perm=[0, 2, 1, 3])  # [T, 1, D, H]
    ctx.put(0, g.reshape(y, (1, T, D * H)))
    if len(ctx.results) > n_states:
        for k in range(1, n_states + 1):
            ctx.put(k, outs[k], raw=True)


def _check_int8(ctx: LayerCtx) -> None:
    if getattr(ctx.p, "int8_scale_term", 0):
        raise ctx.fail("int8 recurrent layers quantize x and h dynamically at every step; not converted")


@emits("LSTM")
def lstm(ctx: LayerCtx) -> None:
    _check_int8(ctx)
    g, p, w = ctx.g, ctx.p, ctx.w
    H, O, D = int(p.hidden_size), int(p.num_output), _dirs(p)
    X, T, size = _sequence(ctx)
    wxc = w["weight_xc"].astype(F32).reshape(D, 4, H, size)
    bc = w["bias_c"].astype(F32).reshape(D, 4, H)
    whc = w["weight_hc"].astype(F32).reshape(D, 4, H, O)
    order = [0, 2, 1, 3]  # ONNX i o f c from ncnn I F O G
    if O != H:
        _lstm_projected(ctx, X, T, size, wxc, bc, whc, w["weight_hr"].astype(F32).reshape(D, O, H))
        return
    W = g.const(wxc[:, order].reshape(D, 4 * H, size), stem="W")
    R = g.const(whc[:, order].reshape(D, 4 * H, O), stem="R")
    B = g.const(np.concatenate([bc[:, order].reshape(D, 4 * H), np.zeros((D, 4 * H), F32)], axis=1), stem="B")
    with_state = len(ctx.ins) >= 3
    ins = [X, W, R, B, "", _state(ctx, 1, D, O) if with_state else "", _state(ctx, 2, D, H) if with_state else ""]
    while ins[-1] == "":
        ins.pop()
    outs = g.op("LSTM", ins, 3, hidden_size=H, direction=_direction(p))
    _outputs(ctx, outs, T, D, H, 2)


def _lstm_projected(ctx, X, T, size, wxc, bc, whc, whr) -> None:
    """An LSTM whose hidden state is projected by weight_hr, one time step after another."""
    g, p = ctx.g, ctx.p
    D = wxc.shape[0]
    H, O = wxc.shape[2], whc.shape[3]
    xs = g.reshape(ctx.x(), (T, size))
    with_state = len(ctx.ins) >= 3
    steps_out, h_out, c_out = [], [], []
    for d in range(D):
        wx = g.const(np.ascontiguousarray(wxc[d].reshape(4 * H, size).T), stem="Wx")
        wh = g.const(np.ascontiguousarray(whc[d].reshape(4 * H, O).T), stem="Wh")
        wr = g.const(np.ascontiguousarray(whr[d].T), stem="Whr")
        gx = g.op("Add", [g.op("MatMul", [xs, wx]), g.const(bc[d].reshape(1, 4 * H), stem="bias")])  # [T, 4H]
        if with_state:
            r = g.reshape(g.slice(g.reshape(ctx.x(1), (D, O)), [d], [d + 1], [0]), (1, O))
            c = g.reshape(g.slice(g.reshape(ctx.x(2), (D, H)), [d], [d + 1], [0]), (1, H))
        else:
            r = g.const(np.zeros((1, O), F32), stem="h0")
            c = g.const(np.zeros((1, H), F32), stem="c0")
        reverse = p.direction == 1 or d == 1
        ys: list[str | None] = [None] * T
        for t in range(T):
            ti = T - 1 - t if reverse else t
            gates = g.op("Add", [g.slice(gx, [ti], [ti + 1], [0]), g.op("MatMul", [r, wh])])  # [1, 4H]
            i_, f_, o_, g_ = g.op("Split", [gates, g.ints([H] * 4, "split")], 4, axis=1)
            c = g.op(
                "Add",
                [g.op("Mul", [g.op("Sigmoid", [f_]), c]), g.op("Mul", [g.op("Sigmoid", [i_]), g.op("Tanh", [g_])])],
            )
            h = g.op("Mul", [g.op("Sigmoid", [o_]), g.op("Tanh", [c])])
            r = g.op("MatMul", [h, wr])  # [1, O]
            ys[ti] = r
        steps_out.append(g.op("Concat", ys, axis=0))  # [T, O]
        h_out.append(r)
        c_out.append(c)
    y = steps_out[0] if D == 1 else g.op("Concat", steps_out, axis=1)
    ctx.put(0, y, raw=True)
    if len(ctx.results) >= 3:
        ctx.put(1, h_out[0] if D == 1 else g.op("Concat", h_out, axis=0), raw=True)
        ctx.put(2, c_out[0] if D == 1 else g.op("Concat", c_out, axis=0), raw=True)


@emits("GRU")
def gru(ctx: LayerCtx) -> None:
    _check_int8(ctx)
    g, p, w = ctx.g, ctx.p, ctx.w
    H, D = int(p.num_output), _dirs(p)
    X, T, size = _sequence(ctx)
    wxc = w["weight_xc"].astype(F32).reshape(D, 3, H, size)
    bc = w["bias_c"].astype(F32).reshape(D, 4, H)
    whc = w["weight_hc"].astype(F32).reshape(D, 3, H, H)
    order = [1, 0, 2]  # ONNX z r h from ncnn R U N
    zero = np.zeros((D, H), F32)
    Wb = np.concatenate([bc[:, 1], bc[:, 0], bc[:, 2]], axis=1)
    Rb = np.concatenate([zero, zero, bc[:, 3]], axis=1)
    ins = [
        X,
        g.const(wxc[:, order].reshape(D, 3 * H, size), stem="W"),
        g.const(whc[:, order].reshape(D, 3 * H, H), stem="R"),
        g.const(np.concatenate([Wb, Rb], axis=1), stem="B"),
    ]
    if len(ctx.ins) >= 2:
        ins += ["", _state(ctx, 1, D, H)]
    outs = g.op("GRU", ins, 2, hidden_size=H, direction=_direction(p), linear_before_reset=1)
    _outputs(ctx, outs, T, D, H, 1)


@emits("RNN")
def rnn(ctx: LayerCtx) -> None:
    _check_int8(ctx)
    g, p, w = ctx.g, ctx.p, ctx.w
    H, D = int(p.num_output), _dirs(p)
    X, T, size = _sequence(ctx)
    ins = [
        X,
        g.const(w["weight_xc"].astype(F32).reshape(D, H, size), stem="W"),
        g.const(w["weight_hc"].astype(F32).reshape(D, H, H), stem="R"),
        g.const(np.concatenate([w["bias_c"].astype(F32).reshape(D, H), np.zeros((D, H), F32)], axis=1), stem="B"),
    ]
    if len(ctx.ins) >= 2:
        ins += ["", _state(ctx, 1, D, H)]
    outs = g.op("RNN", ins, 2, hidden_size=H, direction=_direction(p))
    _outputs(ctx, outs, T, D, H, 1)
