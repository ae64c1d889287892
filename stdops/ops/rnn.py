"""Recurrent kernels: RNN, GRU, LSTM (ONNX semantics, ONNX weight layout).

Common shape rules (layout 0; layout 1 swaps the first two axes of X, Y and the states):

- X ``[T, B, I]``; W ``[D, G*H, I]``; R ``[D, G*H, H]``; B ``[D, 2*G*H]`` (Wb then Rb);
  sequence_lens ``[B]``; initial_h / initial_c ``[D, B, H]``; P (LSTM) ``[D, 3*H]``.
- Y ``[T, D, B, H]``; Y_h / Y_c ``[D, B, H]``. D is 2 for ``bidirectional``, else 1;
  G is the number of gates (1 RNN, 3 GRU ``zrh``, 4 LSTM ``iofc``).
- Steps past a sequence's length output zeros and hold the state; the reverse direction runs
  each sequence backwards from its own last valid step. A sequence of length 0 has zero final
  states Y_h / Y_c (onnxruntime's convention; the spec is silent).

The input projection ``X @ W^T`` of every step is one GEMM per direction; the loop runs over time
steps only, with both directions advanced together, each step on the shared cells of
:mod:`stdops.ops.rnn_cell` (which the ncnn layers run on too). Apart from the recurrent GEMV, a step costs
NumPy call overhead more than arithmetic, so the loop allocates nothing and makes few calls: the
recurrent product goes into a preallocated gate buffer (``out=``; one BLAS GEMV per direction on
the contiguous R for a batch of 1), activations run in place (one sigmoid over LSTM's i, o, f
gates), the new hidden state is written straight into Y, states and gates are 2-D rows
``[D*B, n]`` (direction-major) and every view is taken once, before the loop. The arithmetic is
the plain formulas of the docstrings, operation for operation: the results are bitwise those of
the straightforward step-by-step evaluation. Arithmetic stays in float32 (float64 for float64
inputs; float16/bfloat16 compute in float32); outputs have X's dtype.

With the compiled path (ops/_fast_rnn.py) an LSTM with the default activations and no clip or input_forget, and a
GRU with linear_before_reset, computing in float32, run instead a compiled loop over every step on R packed once
(the kernels' ``prepare``, at load time: a direct call packs per call); machines with neither AVX-512 nor AVX2 keep the
NumPy loops (LSTM: a compiled loop with BLAS's GEMV). On AMD cores an LSTM without peepholes on a batch of 1 and a
full-length sequence computes its input projection inside that loop instead of one GEMM before it, one direction
after the other (ops/_fast_lstm_x.py: the recurrence is bound by its loads there, the projection's FMAs overlap it;
a reverse direction runs on the steps reversed). The NumPy
loops stay the reference the compiled ones are tested against (tests/ops/test_fast_rnn.py, test_fast_lstm_x.py).
"""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from . import _fast, _fast_lstm_loop, _fast_lstm_x, _fast_rnn
from ._registry import op
from ._rnn_setup import (
    DIRECTIONS,
    Setup,
    bias_of,
    check_shapes,
    finish,
    lengths_of,
    recurrent_product,
    setup,
    state_of,
    state_rows,
)
from .dtypes import compute_dtype, is_float
from .rnn_cell import GRUCell, LSTMCell, clipper, gru_cell, into, lstm_cell, parse_activations, rnn_cell, rnn_step


def _lstm_compiled(s: Setup, input_forget) -> bool:
    """Whether the compiled LSTM loop (ops/_fast_rnn.py) computes this LSTM: float32, default activations,
    no clip, no input_forget (the caller checks peepholes and sequence lengths)."""
    if not _fast.enabled() or s.wt != np.float32 or s.clip is not None or input_forget:
        return False
    return all([a.name for a in acts] == ["sigmoid", "tanh", "tanh"] for acts in s.acts)


# --------------------------------------------------------------------------- the compiled loops' weights


class _Packed:
    """A recurrent op's weights laid out for the compiled loops (ops/_fast_rnn.py, AVX-512 or AVX2): W^T of every
    direction side by side [I, D*G*H] (the input projection of every step and direction is one GEMM), the biases, R
    packed for the compiled GEMV. Built once by the kernel's ``prepare`` (or per call by the kernel itself)."""

    def __init__(self, opname: str, gates: int, W, R, B, direction: str, hidden_size):
        f32 = np.float32
        probe = np.zeros((0, 0, np.shape(W)[-1]), f32)
        _, W, R, D, H, _ = check_shapes(opname, gates, probe, W, R, hidden_size, direction, 0)
        self.opname, self.gates = opname, gates
        self.D, self.H, self.I = D, H, W.shape[2]
        self.direction = direction
        self.Wcat = np.ascontiguousarray(W.astype(f32, copy=False).transpose(2, 0, 1).reshape(self.I, D * gates * H))
        self.B = bias_of(opname, B, D, gates, H, f32)  # [D, 2 G H]: Wb then Rb
        self.Rp = _fast_rnn.pack_recurrent(R.astype(f32, copy=False), gates)
        self.reverse = np.array([direction == "reverse" or d == 1 for d in range(D)])

    def _begin(self, X, sequence_lens, layout):
        """X checked against the weights: (layout, T, B, sequence lengths or None, lengths [B], x [T*B, I])."""
        X = np.asarray(X)
        D, H, G = self.D, self.H, self.gates
        if not is_float(X.dtype) or X.ndim != 3 or X.shape[2] != self.I or int(layout) not in (0, 1):
            W0, R0 = np.zeros((D, G * H, self.I)), np.zeros((D, G * H, H))
            check_shapes(self.opname, G, X, W0, R0, None, self.direction, layout)  # raises the kernel's error
        layout = int(layout)
        Xt = X.transpose(1, 0, 2) if layout == 1 else X
        T, Bn, I = Xt.shape
        sl = lengths_of(self.opname, sequence_lens, Bn, T)
        x2 = np.ascontiguousarray(Xt, dtype=np.float32).reshape(T * Bn, I)
        lens = np.full(Bn, T, np.int64) if sl is None else sl
        return layout, T, Bn, sl, lens, x2

    def _project(self, x2, T, Bn) -> np.ndarray:
        """gx [T, B, D*G*H] = x W^T of every step and direction: one GEMM, not ops/_blas.py's split one (at 2
        threads its hand-off measured slower than the 0.25 ms it shares: lstm_2layer 2thr/1thr 1.03-1.07x against
        0.95-1.01x)."""
        return np.matmul(x2, self.Wcat).reshape(T, Bn, self.D * self.gates * self.H)

    def _initial(self, name, s, Bn, layout) -> np.ndarray:
        """An initial state as rows [D*B, H] (fresh: the loops update it in place)."""
        D, H = self.D, self.H
        a = (
            np.zeros((D, Bn, H), np.float32)
            if s is None
            else state_of(self.opname, name, s, D, Bn, H, layout, np.float32)
        )
        return np.ascontiguousarray(a).reshape(D * Bn, H)

    def _end(self, X, Y, rows, sl, layout) -> tuple:
        """(Y, *final states) in the layout and X's dtype; the final states of empty sequences zero (module doc)."""
        D, Bn, H = self.D, Y.shape[2], self.H
        states = [st.reshape(D, Bn, H) for st in rows]
        if sl is not None and (sl == 0).any():
            states = [np.where((sl == 0)[None, :, None], np.float32(0), st) for st in states]
        if layout == 1:
            Y = Y.transpose(2, 0, 1, 3)
            states = [st.transpose(1, 0, 2) for st in states]
        od = np.asarray(X).dtype
        return tuple(np.ascontiguousarray(a.astype(od, copy=False)) for a in (Y, *states))


class _PackedLSTM(_Packed):
    """LSTM: Wb + Rb folded (x W^T + (Wb + Rb), the reference's order), the peepholes."""

    def __init__(self, W, R, B, P, direction: str, hidden_size):
        super().__init__("LSTM", 4, W, R, B, direction, hidden_size)
        D, H = self.D, self.H
        self.bias = np.ascontiguousarray(self.B[:, : 4 * H] + self.B[:, 4 * H :])
        self.P = None
        if P is not None:
            P = np.asarray(P)
            if P.shape != (D, 3 * H):
                raise KernelError(f"LSTM: P must have shape {(D, 3 * H)}, got {P.shape}")
            self.P = np.ascontiguousarray(P, dtype=np.float32)
        # the input projection in the recurrence's loop (ops/_fast_lstm_x.py, one direction at a time, a reverse one
        # on the steps reversed) without peepholes, where its rule holds; run when the batch is 1 and the sequence
        # full-length. Per direction: W^T packed, the direction's part of the packed R (a view)
        self.Wp: list[np.ndarray] | None = None
        if _fast_lstm_x.FUSED_OK and self.P is None:
            G, n = 4 * H, self.Rp.size // D
            self.Wp = [_fast_lstm_x.pack_input(self.Wcat[:, d * G : (d + 1) * G]) for d in range(D)]
            self.Rd = [self.Rp[d * n : (d + 1) * n] for d in range(D)]

    def __call__(self, X, sequence_lens, initial_h, initial_c, layout) -> tuple:
        layout, T, Bn, sl, lens, x2 = self._begin(X, sequence_lens, layout)
        D, H = self.D, self.H
        h = self._initial("initial_h", initial_h, Bn, layout)
        c = self._initial("initial_c", initial_c, Bn, layout)
        Y = np.zeros((T, D, Bn, H), np.float32)
        if self.Wp is not None and Bn == 1 and T > 0 and (sl is None or (sl == T).all()) and _fast_lstm_x.usable():
            for d in range(D):
                xd = np.ascontiguousarray(x2[::-1]) if self.reverse[d] else x2
                yd = Y.reshape(T, 1, H) if D == 1 and not self.reverse[d] else np.empty((T, 1, H), np.float32)
                _fast_lstm_x.lstm_x(xd, self.Wp[d], self.bias[d], self.Rd[d], h[d : d + 1], c[d : d + 1], yd)
                if yd.base is not Y:
                    Y[:, d, 0] = yd[::-1, 0] if self.reverse[d] else yd[:, 0]
        else:
            gx = self._project(x2, T, Bn)
            Yr = Y.reshape(T, D * Bn, H)
            _fast_lstm_loop.lstm_packed(gx, self.bias, self.Rp, lens, self.reverse, self.P, h, c, Yr, Bn)
        return self._end(X, Y, (h, c), sl, layout)


class _PackedGRU(_Packed):
    """GRU with linear_before_reset: Wb and Rb kept apart (the reference adds them one after the other)."""

    def __init__(self, W, R, B, direction: str, hidden_size):
        super().__init__("GRU", 3, W, R, B, direction, hidden_size)
        H = self.H
        self.wbias = np.ascontiguousarray(self.B[:, : 3 * H])
        self.rbias = np.ascontiguousarray(self.B[:, 3 * H :])

    def __call__(self, X, sequence_lens, initial_h, layout) -> tuple:
        layout, T, Bn, sl, lens, x2 = self._begin(X, sequence_lens, layout)
        gx = self._project(x2, T, Bn)
        D, H = self.D, self.H
        h = self._initial("initial_h", initial_h, Bn, layout)
        Y = np.zeros((T, D, Bn, H), np.float32)
        _fast_rnn.gru_packed(gx, self.wbias, self.rbias, self.Rp, lens, self.reverse, h, Y.reshape(T, D * Bn, H), Bn)
        return self._end(X, Y, (h,), sl, layout)


def _packs(opname: str, defaults: tuple[str, ...], activations, alpha, beta, clip, D: int) -> bool:
    """Whether the packed compiled loops compute this op: AVX-512 or AVX2 and the compiled path on, the default
    activations, no clip (the caller checks the rest; float32 compute is checked per call)."""
    if not (_fast.enabled() and _fast_rnn.TILES_OK) or clip is not None:
        return False
    try:
        acts = parse_activations(opname, activations, alpha, beta, defaults, D)
    except KernelError:
        return False  # the plain kernel reports it
    want = [n.lower() for n in defaults]
    return all([a.name for a in per_dir] == want for per_dir in acts)


def _packed_x(X) -> bool:
    """Whether X computes in float32 (the compiled loops' dtype)."""
    dt = np.asarray(X).dtype
    return is_float(dt) and compute_dtype(dt) == np.float32


def _lstm_packs(activations, activation_alpha, activation_beta, clip, input_forget, D: int) -> bool:
    """:func:`_packs` for an LSTM: no input_forget either."""
    lstm_acts = ("Sigmoid", "Tanh", "Tanh")
    return not input_forget and _packs("LSTM", lstm_acts, activations, activation_alpha, activation_beta, clip, D)


def _gru_packs(activations, activation_alpha, activation_beta, clip, linear_before_reset, D: int) -> bool:
    """:func:`_packs` for a GRU: linear_before_reset only (the other form needs r * h before its last GEMV)."""
    gru_acts = ("Sigmoid", "Tanh")
    return bool(linear_before_reset) and _packs(
        "GRU", gru_acts, activations, activation_alpha, activation_beta, clip, D
    )


def prepare_gru(constants: tuple, attrs: dict):
    """With W and R known at load (B known or absent): their packed layout (:class:`_PackedGRU`) once; the step
    runs the compiled loop when X computes in float32, else the plain kernel."""
    consts = tuple(constants) + (None,) * (6 - len(constants))
    W, R, B = consts[1], consts[2], consts[3]
    direction = attrs["direction"]
    D = DIRECTIONS.get(direction)
    if W is None or R is None or D is None:
        return None
    a = attrs
    if not _gru_packs(
        a["activations"], a["activation_alpha"], a["activation_beta"], a["clip"], a["linear_before_reset"], D
    ):
        return None
    packed = _PackedGRU(W, R, B, direction, attrs["hidden_size"])
    plain_attrs = dict(attrs)
    layout = attrs["layout"]

    def gru_prepared(X, W_, R_, B_=None, sequence_lens=None, initial_h=None):
        if (B is None and B_ is not None) or not _packed_x(X) or not _fast.enabled():
            return gru(X, W_, R_, B_, sequence_lens, initial_h, **plain_attrs)
        return packed(X, sequence_lens, initial_h, layout)

    return gru_prepared


# --------------------------------------------------------------------------- RNN


@op("onnx:RNN-7", kernels=(rnn_cell,))
def rnn(
    X,
    W,
    R,
    B=None,
    sequence_lens=None,
    initial_h=None,
    /,
    *,
    hidden_size=None,
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    direction="forward",
    layout=0,
):
    """Ht = f(Xt @ Wi^T + Ht-1 @ Ri^T + Wbi + Rbi), f = Tanh by default.

    Returns (Y, Y_h): Y [T, D, B, H], Y_h [D, B, H] (layout 1: [B, T, D, H], [B, D, H]);
    X's dtype. See the module docstring for the shapes of the inputs.
    """
    s = setup(
        "RNN",
        1,
        X,
        W,
        R,
        B,
        sequence_lens,
        initial_h,
        hidden_size=hidden_size,
        activations=activations,
        activation_alpha=activation_alpha,
        activation_beta=activation_beta,
        clip=clip,
        direction=direction,
        layout=layout,
        default_acts=("Tanh",),
        fold_rb=True,
    )
    D, Bn, H = s.D, s.B, s.H
    f = into([a[0] for a in s.acts], Bn)
    clip_ = clipper(s.clip)
    rec = recurrent_product(s.RT, Bn)
    add = np.add
    gxs = s.Gx  # [T, D*B, H]
    Y = np.zeros((s.T, D, Bn, H), s.wt)
    Y2 = Y.reshape(s.T, D * Bn, H)  # rows d*B + b
    h = state_rows(s, s.h0)
    if s.mask is None:  # the state is Y[t - 1]
        for t in range(s.T):
            yt = Y2[t]
            rec(h, yt)
            add(gxs[t], yt, out=yt)
            h = rnn_step(yt, f, clip_)
        h = h.copy()  # finish reorders Y in place
    else:
        mask = np.tile(s.mask, (1, D, 1))  # [T, D*B, 1]
        hn = np.empty_like(h)
        for t in range(s.T):
            rec(h, hn)
            add(gxs[t], hn, out=hn)
            rnn_step(hn, f, clip_)
            m = mask[t]
            np.copyto(h, hn, where=m)
            np.multiply(hn, m, out=Y2[t])
    return finish(s, direction, Y, h.reshape(D, Bn, H))


# --------------------------------------------------------------------------- GRU


@op("onnx:GRU-7", kernels=(gru_cell,), prepare=prepare_gru)
def gru(
    X,
    W,
    R,
    B=None,
    sequence_lens=None,
    initial_h=None,
    /,
    *,
    hidden_size=None,
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    direction="forward",
    layout=0,
    linear_before_reset=0,
):
    """zt = f(Xt Wz^T + Ht-1 Rz^T + Wbz + Rbz); rt = f(Xt Wr^T + Ht-1 Rr^T + Wbr + Rbr);
    ht = g(Xt Wh^T + (rt * Ht-1) Rh^T + Rbh + Wbh)  (linear_before_reset=0) or
    ht = g(Xt Wh^T + rt * (Ht-1 Rh^T + Rbh) + Wbh)  (linear_before_reset!=0);
    Ht = (1 - zt) * ht + zt * Ht-1.  f = Sigmoid, g = Tanh by default; gate order z, r, h.

    Returns (Y, Y_h) as RNN; X's dtype.
    """
    lbr = bool(linear_before_reset)
    D0 = DIRECTIONS.get(direction)
    if D0 is not None and _gru_packs(activations, activation_alpha, activation_beta, clip, lbr, D0) and _packed_x(X):
        return _PackedGRU(W, R, B, direction, hidden_size)(X, sequence_lens, initial_h, layout)
    s = setup(
        "GRU",
        3,
        X,
        W,
        R,
        B,
        sequence_lens,
        initial_h,
        hidden_size=hidden_size,
        activations=activations,
        activation_alpha=activation_alpha,
        activation_beta=activation_beta,
        clip=clip,
        direction=direction,
        layout=layout,
        default_acts=("Sigmoid", "Tanh"),
        fold_rb=False,
    )
    H, D, Bn = s.H, s.D, s.B
    DB = D * Bn
    Gx = s.Gx  # [T, D*B, 3H]
    Rb = np.repeat(s.Rb[:, 0], Bn, axis=0)  # [D*B, 3H], rows as the states
    Gx[..., : 2 * H] += Rb[:, : 2 * H]  # z and r take both biases up front
    Rbh = Rb[:, 2 * H :]
    if not lbr:
        Gx[..., 2 * H :] += Rbh
    step = GRUCell(
        into([a[0] for a in s.acts], Bn), into([a[1] for a in s.acts], Bn), clipper(s.clip), DB, H, s.wt, lbr
    ).step
    if lbr:
        rec = recurrent_product(s.RT, Bn)
        hr = np.empty((DB, 3 * H), s.wt)  # Ht-1 @ R^T for all three gates
        gh_zr, gh_h = hr[:, : 2 * H], hr[:, 2 * H :]
    else:
        rec_zr = recurrent_product(s.RT[..., : 2 * H], Bn)
        rec_h = recurrent_product(s.RT[..., 2 * H :], Bn)
        gh_zr = np.empty((DB, 2 * H), s.wt)
    Y = np.zeros((s.T, D, Bn, H), s.wt)
    Y2 = Y.reshape(s.T, DB, H)  # rows d*B + b
    h = state_rows(s, s.h0)
    masked = s.mask is not None
    if masked:
        mask = np.tile(s.mask, (1, D, 1))  # [T, D*B, 1]
        hn = np.empty_like(h)
    for t in range(s.T):
        out = hn if masked else Y2[t]
        if lbr:
            rec(h, hr)
            np.add(gh_h, Rbh, out=gh_h)
            step(Gx[t], gh_zr, h, out, gh_h)
        else:
            rec_zr(h, gh_zr)
            step(Gx[t], gh_zr, h, out, rec_h)
        if masked:
            m = mask[t]
            np.copyto(h, hn, where=m)
            np.multiply(hn, m, out=Y2[t])
        else:
            h = out
    if not masked:
        h = h.copy()  # finish reorders Y in place
    return finish(s, direction, Y, h.reshape(D, Bn, H))


# --------------------------------------------------------------------------- LSTM


def prepare_lstm(constants: tuple, attrs: dict):
    """With W and R known at load (and B, P known or absent): their packed layout (:class:`_PackedLSTM`) once; the
    step runs the compiled loop when X computes in float32, else the plain kernel."""
    consts = tuple(constants) + (None,) * (8 - len(constants))
    W, R, B, P = consts[1], consts[2], consts[3], consts[7]
    direction = attrs["direction"]
    D = DIRECTIONS.get(direction)
    if W is None or R is None or D is None:
        return None
    if not _lstm_packs(
        attrs["activations"],
        attrs["activation_alpha"],
        attrs["activation_beta"],
        attrs["clip"],
        attrs["input_forget"],
        D,
    ):
        return None
    packed = _PackedLSTM(W, R, B, P, direction, attrs["hidden_size"])
    plain_attrs = {k: attrs[k] for k in attrs}
    layout = attrs["layout"]

    def lstm_prepared(X, W_, R_, B_=None, sequence_lens=None, initial_h=None, initial_c=None, P_=None):
        if (B is None and B_ is not None) or (P is None and P_ is not None) or not _packed_x(X) or not _fast.enabled():
            return lstm(X, W_, R_, B_, sequence_lens, initial_h, initial_c, P_, **plain_attrs)
        return packed(X, sequence_lens, initial_h, initial_c, layout)

    return lstm_prepared


@op("onnx:LSTM-7", kernels=(lstm_cell,), prepare=prepare_lstm)
def lstm(
    X,
    W,
    R,
    B=None,
    sequence_lens=None,
    initial_h=None,
    initial_c=None,
    P=None,
    /,
    *,
    hidden_size=None,
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    direction="forward",
    input_forget=0,
    layout=0,
):
    """it = f(Xt Wi^T + Ht-1 Ri^T + Pi * Ct-1 + Wbi + Rbi); ft = f(... f gate ..., Pf * Ct-1)
    (ft = 1 - it when input_forget); ct = g(Xt Wc^T + Ht-1 Rc^T + Wbc + Rbc);
    Ct = ft * Ct-1 + it * ct; ot = f(Xt Wo^T + Ht-1 Ro^T + Po * Ct + Wbo + Rbo); Ht = ot * h(Ct).
    f = Sigmoid, g = h = Tanh by default; gate order i, o, f, c; clip bounds the gate inputs.

    Returns (Y, Y_h, Y_c): Y as RNN, Y_h and Y_c [D, B, H] ([B, D, H] for layout 1); X's dtype.
    """
    D0 = DIRECTIONS.get(direction)
    if (
        D0 is not None
        and _lstm_packs(activations, activation_alpha, activation_beta, clip, input_forget, D0)
        and _packed_x(X)
    ):
        return _PackedLSTM(W, R, B, P, direction, hidden_size)(X, sequence_lens, initial_h, initial_c, layout)
    s = setup(
        "LSTM",
        4,
        X,
        W,
        R,
        B,
        sequence_lens,
        initial_h,
        hidden_size=hidden_size,
        activations=activations,
        activation_alpha=activation_alpha,
        activation_beta=activation_beta,
        clip=clip,
        direction=direction,
        layout=layout,
        default_acts=("Sigmoid", "Tanh", "Tanh"),
        fold_rb=True,
    )
    H, D = s.H, s.D
    if initial_c is None:
        c = np.zeros((D, s.B, H), s.wt)
    else:
        c = state_of("LSTM", "initial_c", initial_c, D, s.B, H, s.layout, s.wt)
    peep = P is not None
    if peep:
        P = np.asarray(P)
        if P.shape != (D, 3 * H):
            raise KernelError(f"LSTM: P must have shape {(D, 3 * H)}, got {P.shape}")
    Bn = s.B
    DB = D * Bn
    if peep:
        P = np.repeat(P.astype(s.wt, copy=False), Bn, axis=0)  # [D*B, 3H], rows as the states
    step = LSTMCell(
        into([a[0] for a in s.acts], Bn),
        into([a[1] for a in s.acts], Bn),
        into([a[2] for a in s.acts], Bn),
        clipper(s.clip),
        DB,
        H,
        s.wt,
        P if peep else None,
        bool(input_forget),
    ).step
    rec = recurrent_product(s.RT, Bn)
    gxs = s.Gx  # [T, D*B, 4H]
    gates = np.empty((DB, 4 * H), s.wt)  # rows d*B + b: i, o, f, c
    Y = np.zeros((s.T, D, Bn, H), s.wt)
    Y2 = Y.reshape(s.T, DB, H)
    h = state_rows(s, s.h0)
    c = state_rows(s, c)
    masked = s.mask is not None
    if not masked and not peep and _lstm_compiled(s, input_forget):  # neither AVX-512 nor AVX2: the BLAS GEMV loop
        _fast_rnn.lstm_loop(gxs, s.RT.transpose(0, 2, 1), h, c, Y2, Bn)
        return finish(s, direction, Y, h.copy().reshape(D, Bn, H), c.reshape(D, Bn, H))
    if masked:
        mask = np.tile(s.mask, (1, D, 1))  # [T, D*B, 1]
        hn = np.empty_like(h)
    cn = np.empty_like(c) if masked else c  # unmasked: the cell state is updated in place
    for t in range(s.T):
        rec(h, gates)
        np.add(gxs[t], gates, out=gates)  # Xt W^T + Wb + Rb + Ht-1 R^T
        if masked:
            step(gates, c, cn, hn)
            m = mask[t]
            np.copyto(h, hn, where=m)
            np.copyto(c, cn, where=m)
            np.multiply(hn, m, out=Y2[t])
        else:
            h = step(gates, c, c, Y2[t])
    if not masked:
        h = h.copy()  # finish reorders Y in place
    return finish(s, direction, Y, h.reshape(D, Bn, H), c.reshape(D, Bn, H))
