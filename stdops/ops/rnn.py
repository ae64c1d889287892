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
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..errors import KernelError
from . import _fast, _fast_rnn
from ._registry import op
from .dtypes import compute_dtype, is_float
from .rnn_cell import Act, GRUCell, LSTMCell, clipper, gru_cell, into, lstm_cell, parse_activations, rnn_cell, rnn_step


def _recurrent(RT: np.ndarray, B: int) -> Callable[[np.ndarray, np.ndarray], None]:
    """(h, out) -> out[rows of d] = h[rows of d] @ RT[d] for every direction d, on [D*B, .] arrays
    (out preallocated and C-contiguous). For a batch of 1, one BLAS GEMV per direction on the
    contiguous R[d] (RT[d] is its transpose); else one GEMM per direction."""
    D = RT.shape[0]
    if B == 1:
        Rs = [np.ascontiguousarray(RT[d].T) for d in range(D)]  # views of R: no copy when R is contiguous
        dot = np.dot
        if D == 1:
            R0 = Rs[0]

            def rec1(h: np.ndarray, out: np.ndarray) -> None:
                dot(R0, h[0], out=out[0])

            return rec1

        def rec_vec(h: np.ndarray, out: np.ndarray) -> None:
            for d, Rd in enumerate(Rs):
                dot(Rd, h[d], out=out[d])

        return rec_vec
    mm = np.matmul
    parts = [(slice(d * B, (d + 1) * B), RT[d]) for d in range(D)]

    def rec_mat(h: np.ndarray, out: np.ndarray) -> None:
        for rows, RTd in parts:
            mm(h[rows], RTd, out=out[rows])

    return rec_mat


def _rows(s: _Setup, a: np.ndarray) -> np.ndarray:
    """A fresh state [D, B, H] as C-contiguous rows [D*B, H] (the loops update it in place)."""
    return np.ascontiguousarray(a).reshape(s.D * s.B, s.H)


# --------------------------------------------------------------------------- shared set-up


@dataclasses.dataclass
class _Setup:
    T: int
    B: int
    H: int
    D: int
    wt: np.dtype
    out_dtype: np.dtype
    Gx: np.ndarray  # [T, D*B, G*H] input projection (reverse directions already time-reversed)
    RT: np.ndarray  # [D, H, G*H]  R transposed for h @ R^T
    Rb: np.ndarray  # [D, 1, G*H]
    mask: np.ndarray | None  # [T, B, 1] bool, None when every sequence has length T
    empty: np.ndarray | None  # [B] bool: sequences of length 0 (final states are 0), or None
    rev_idx: np.ndarray | None  # [T, B] time gather of the reverse direction
    h0: np.ndarray  # [D, B, H]
    acts: list[list[Act]]
    clip: float | None
    layout: int


_DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def _shapes(opname: str, gates: int, X, W, R, hidden_size, direction, layout):
    """The checked shapes: (X time-major, W, R, D, H, layout) (X [T, B, I] whatever the layout)."""
    X, W, R = np.asarray(X), np.asarray(W), np.asarray(R)
    if not is_float(X.dtype):
        raise KernelError(f"{opname}: X must be a floating-point tensor, got {X.dtype}")
    if direction not in _DIRECTIONS:
        raise KernelError(f"{opname}: direction must be forward, reverse or bidirectional, got {direction!r}")
    if int(layout) not in (0, 1):
        raise KernelError(f"{opname}: layout must be 0 or 1, got {layout}")
    layout = int(layout)
    D = _DIRECTIONS[direction]
    if X.ndim != 3:
        raise KernelError(f"{opname}: X must have rank 3, got shape {X.shape}")
    if layout == 1:
        X = X.transpose(1, 0, 2)
    I = X.shape[2]
    if R.ndim != 3 or R.shape[0] != D or R.shape[1] % gates or R.shape[1] != gates * R.shape[2]:
        raise KernelError(f"{opname}: R must have shape [{D}, {gates}*hidden_size, hidden_size], got {R.shape}")
    H = R.shape[2]
    if hidden_size is not None and int(hidden_size) != H:
        raise KernelError(f"{opname}: hidden_size={hidden_size} but R has shape {R.shape}")
    if W.shape != (D, gates * H, I):
        raise KernelError(f"{opname}: W must have shape {(D, gates * H, I)}, got {W.shape}")
    return X, W, R, D, H, layout


def _bias(opname: str, B, D: int, gates: int, H: int, wt) -> np.ndarray:
    """B [D, 2*G*H] checked, in the compute dtype (zeros when absent)."""
    if B is None:
        return np.zeros((D, 2 * gates * H), wt)
    bias = np.asarray(B)
    if bias.shape != (D, 2 * gates * H):
        raise KernelError(f"{opname}: B must have shape {(D, 2 * gates * H)}, got {bias.shape}")
    return bias.astype(wt, copy=False)


def _lengths(opname: str, sequence_lens, Bn: int, T: int) -> np.ndarray | None:
    """sequence_lens checked, as int64 (None when absent)."""
    if sequence_lens is None:
        return None
    sl = np.asarray(sequence_lens)
    if sl.dtype.kind not in "iu" or sl.shape != (Bn,):
        raise KernelError(
            f"{opname}: sequence_lens must be an integer tensor of shape ({Bn},), got {sl.dtype} {sl.shape}"
        )
    if sl.size and (sl.min() < 0 or sl.max() > T):
        raise KernelError(f"{opname}: sequence_lens values must lie in [0, {T}], got {sl}")
    return sl.astype(np.int64)


def _setup(
    opname: str,
    gates: int,
    X,
    W,
    R,
    B,
    sequence_lens,
    initial_h,
    *,
    hidden_size,
    activations,
    activation_alpha,
    activation_beta,
    clip,
    direction,
    layout,
    default_acts: tuple[str, ...],
    fold_rb: bool,
) -> _Setup:
    X, W, R, D, H, layout = _shapes(opname, gates, X, W, R, hidden_size, direction, layout)
    T, Bn, I = X.shape
    wt = compute_dtype(X.dtype)
    Xw = X.astype(wt, copy=False)
    bias = _bias(opname, B, D, gates, H, wt)
    Wb, Rb = bias[:, : gates * H], bias[:, gates * H :]

    mask = rev_idx = empty = None
    sl = _lengths(opname, sequence_lens, Bn, T)
    if sl is not None and (sl != T).any():
        t = np.arange(T)[:, None]
        mask = (t < sl[None, :])[:, :, None]
        rev_idx = np.where(t < sl[None, :], sl[None, :] - 1 - t, t)
        if (sl == 0).any():
            empty = sl == 0

    # the input projection of every step, one GEMM per direction
    xs = []
    for d in range(D):
        if direction == "reverse" or d == 1:
            xs.append(Xw[::-1] if rev_idx is None else Xw[rev_idx, np.arange(Bn)])
        else:
            xs.append(Xw)
    Wt = W.astype(wt, copy=False).transpose(0, 2, 1)  # [D, I, G*H]
    Gx = np.matmul(np.stack(xs).reshape(D, T * Bn, I), Wt).reshape(D, T, Bn, gates * H)
    Gx += (Wb + Rb if fold_rb else Wb)[:, None, None, :]
    # time-major rows [T, D*B, G*H] (row d*B + b), as the cells' states are laid out
    Gx = np.ascontiguousarray(Gx.transpose(1, 0, 2, 3)).reshape(T, D * Bn, gates * H)

    if initial_h is None:
        h0 = np.zeros((D, Bn, H), wt)
    else:
        h0 = _state(opname, "initial_h", initial_h, D, Bn, H, layout, wt)
    acts = parse_activations(opname, activations, activation_alpha, activation_beta, default_acts, D)
    RT = R.astype(wt, copy=False).transpose(0, 2, 1)
    return _Setup(
        T,
        Bn,
        H,
        D,
        wt,
        X.dtype,
        Gx,
        RT,
        Rb[:, None, :],
        mask,
        empty,
        rev_idx,
        h0,
        acts,
        None if clip is None else float(clip),
        layout,
    )


def _state(opname, name, s, D, Bn, H, layout, wt) -> np.ndarray:
    s = np.asarray(s)
    want = (Bn, D, H) if layout == 1 else (D, Bn, H)
    if s.shape != want:
        raise KernelError(f"{opname}: {name} must have shape {want}, got {s.shape}")
    if layout == 1:
        s = s.transpose(1, 0, 2)
    return s.astype(wt)  # a fresh array: the loop never touches the caller's tensor


def _finish(s: _Setup, direction: str, Y: np.ndarray, *states: np.ndarray) -> tuple:
    """Undo the reverse directions' time order in Y, zero the final states of empty sequences
    (as onnxruntime does), apply the layout, cast to X's dtype."""
    if s.empty is not None:
        states = tuple(np.where(s.empty[None, :, None], st.dtype.type(0), st) for st in states)
    for d in range(s.D):
        if direction == "reverse" or d == 1:
            Y[:, d] = Y[::-1, d] if s.rev_idx is None else Y[s.rev_idx, d, np.arange(s.B)]
    if s.layout == 1:
        Y = Y.transpose(2, 0, 1, 3)
        states = tuple(st.transpose(1, 0, 2) for st in states)
    od = s.out_dtype
    return (
        np.ascontiguousarray(Y.astype(od, copy=False)),
        *(np.ascontiguousarray(st.astype(od, copy=False)) for st in states),
    )


def _lstm_compiled(s: _Setup, input_forget) -> bool:
    """Whether the compiled LSTM loop (ops/_fast_rnn.py) computes this LSTM: float32, default activations,
    no clip, no input_forget (the caller checks peepholes and sequence lengths)."""
    if not _fast.enabled() or s.wt != np.float32 or s.clip is not None or input_forget:
        return False
    return all([a.name for a in acts] == ["sigmoid", "tanh", "tanh"] for acts in s.acts)


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
    s = _setup(
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
    rec = _recurrent(s.RT, Bn)
    add = np.add
    gxs = s.Gx  # [T, D*B, H]
    Y = np.zeros((s.T, D, Bn, H), s.wt)
    Y2 = Y.reshape(s.T, D * Bn, H)  # rows d*B + b
    h = _rows(s, s.h0)
    if s.mask is None:  # the state is Y[t - 1]
        for t in range(s.T):
            yt = Y2[t]
            rec(h, yt)
            add(gxs[t], yt, out=yt)
            h = rnn_step(yt, f, clip_)
        h = h.copy()  # _finish reorders Y in place
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
    return _finish(s, direction, Y, h.reshape(D, Bn, H))


# --------------------------------------------------------------------------- GRU


@op("onnx:GRU-7", kernels=(gru_cell,))
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
    s = _setup(
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
        rec = _recurrent(s.RT, Bn)
        hr = np.empty((DB, 3 * H), s.wt)  # Ht-1 @ R^T for all three gates
        gh_zr, gh_h = hr[:, : 2 * H], hr[:, 2 * H :]
    else:
        rec_zr = _recurrent(s.RT[..., : 2 * H], Bn)
        rec_h = _recurrent(s.RT[..., 2 * H :], Bn)
        gh_zr = np.empty((DB, 2 * H), s.wt)
    Y = np.zeros((s.T, D, Bn, H), s.wt)
    Y2 = Y.reshape(s.T, DB, H)  # rows d*B + b
    h = _rows(s, s.h0)
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
        h = h.copy()  # _finish reorders Y in place
    return _finish(s, direction, Y, h.reshape(D, Bn, H))


# --------------------------------------------------------------------------- LSTM


class _PackedLSTM:
    """An LSTM's weights laid out for the compiled loop (ops/_fast_rnn.py, AVX-512): W^T of every direction side
    by side [I, D*4H] (the input projection of every step and direction is one GEMM), Wb + Rb, R packed for the
    compiled GEMV, the peepholes. Built once by the kernel's ``prepare`` (or per call by the kernel itself)."""

    def __init__(self, W, R, B, P, direction: str, hidden_size):
        f32 = np.float32
        _, W, R, D, H, _ = _shapes("LSTM", 4, np.zeros((0, 0, np.shape(W)[-1]), f32), W, R, hidden_size, direction, 0)
        self.D, self.H, self.I = D, H, W.shape[2]
        self.direction = direction
        self.Wcat = np.ascontiguousarray(W.astype(f32, copy=False).transpose(2, 0, 1).reshape(self.I, D * 4 * H))
        bias = _bias("LSTM", B, D, 4, H, f32)
        self.bias = np.ascontiguousarray(bias[:, : 4 * H] + bias[:, 4 * H :])  # Xt W^T + (Wb + Rb), the reference's
        self.Rp = _fast_rnn.pack_recurrent(R.astype(f32, copy=False), 4)
        self.P = None
        if P is not None:
            P = np.asarray(P)
            if P.shape != (D, 3 * H):
                raise KernelError(f"LSTM: P must have shape {(D, 3 * H)}, got {P.shape}")
            self.P = np.ascontiguousarray(P, dtype=f32)
        self.reverse = np.array([direction == "reverse" or d == 1 for d in range(D)])

    def __call__(self, X, sequence_lens, initial_h, initial_c, layout) -> tuple:
        X = np.asarray(X)
        if not is_float(X.dtype) or X.ndim != 3 or X.shape[2] != self.I:
            _shapes(
                "LSTM",
                4,
                X,
                np.zeros((self.D, 4 * self.H, self.I)),
                np.zeros((self.D, 4 * self.H, self.H)),
                None,
                self.direction,
                layout,
            )  # raises the kernel's error
        if int(layout) not in (0, 1):
            raise KernelError(f"LSTM: layout must be 0 or 1, got {layout}")
        layout = int(layout)
        f32 = np.float32
        D, H = self.D, self.H
        Xt = X.transpose(1, 0, 2) if layout == 1 else X
        T, Bn, I = Xt.shape
        sl = _lengths("LSTM", sequence_lens, Bn, T)
        h = _rows_of(self._state("initial_h", initial_h, Bn, layout), D * Bn, H)
        c = _rows_of(self._state("initial_c", initial_c, Bn, layout), D * Bn, H)
        x2 = np.ascontiguousarray(Xt, dtype=f32).reshape(T * Bn, I)
        # one GEMM, not ops/_blas.py's split one: at 2 threads its hand-off measured slower than the 0.25 ms it
        # shares (lstm_2layer 2thr/1thr 1.03-1.07x against 0.95-1.01x)
        gx = np.matmul(x2, self.Wcat).reshape(T, Bn, D * 4 * H)
        Y = np.zeros((T, D, Bn, H), f32)
        lens = np.full(Bn, T, np.int64) if sl is None else sl
        _fast_rnn.lstm_packed(gx, self.bias, self.Rp, lens, self.reverse, self.P, h, c, Y.reshape(T, D * Bn, H), Bn)
        states = [h.reshape(D, Bn, H), c.reshape(D, Bn, H)]
        if sl is not None and (sl == 0).any():  # onnxruntime's convention (module doc)
            states = [np.where((sl == 0)[None, :, None], f32(0), st) for st in states]
        if layout == 1:
            Y = Y.transpose(2, 0, 1, 3)
            states = [st.transpose(1, 0, 2) for st in states]
        od = X.dtype
        return tuple(np.ascontiguousarray(a.astype(od, copy=False)) for a in (Y, *states))

    def _state(self, name, s, Bn, layout) -> np.ndarray:
        if s is None:
            return np.zeros((self.D, Bn, self.H), np.float32)
        return _state("LSTM", name, s, self.D, Bn, self.H, layout, np.float32)


def _rows_of(a: np.ndarray, rows: int, H: int) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(rows, H)


def _lstm_packs(activations, activation_alpha, activation_beta, clip, input_forget, D: int) -> bool:
    """Whether the packed compiled loop computes an LSTM with these attributes: AVX-512 and the compiled path on,
    the default activations, no clip, no input_forget (float32 compute is checked per call)."""
    if not (_fast.enabled() and _fast_rnn.PACKED_OK) or clip is not None or input_forget:
        return False
    try:
        acts = parse_activations("LSTM", activations, activation_alpha, activation_beta, ("Sigmoid", "Tanh", "Tanh"), D)
    except KernelError:
        return False  # the plain kernel reports it
    return all([a.name for a in a3] == ["sigmoid", "tanh", "tanh"] for a3 in acts)


def prepare_lstm(constants: tuple, attrs: dict):
    """With W and R known at load (and B, P known or absent): their packed layout (:class:`_PackedLSTM`) once; the
    step runs the compiled loop when X computes in float32, else the plain kernel."""
    consts = tuple(constants) + (None,) * (8 - len(constants))
    W, R, B, P = consts[1], consts[2], consts[3], consts[7]
    direction = attrs["direction"]
    D = _DIRECTIONS.get(direction)
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
        if (
            (B is None and B_ is not None)
            or (P is None and P_ is not None)
            or compute_dtype(np.asarray(X).dtype) != np.float32
            or not _fast.enabled()
        ):
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
    D0 = _DIRECTIONS.get(direction)
    if (
        D0 is not None
        and _lstm_packs(activations, activation_alpha, activation_beta, clip, input_forget, D0)
        and is_float(np.asarray(X).dtype)
        and compute_dtype(np.asarray(X).dtype) == np.float32
    ):
        return _PackedLSTM(W, R, B, P, direction, hidden_size)(X, sequence_lens, initial_h, initial_c, layout)
    s = _setup(
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
        c = _state("LSTM", "initial_c", initial_c, D, s.B, H, s.layout, s.wt)
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
    rec = _recurrent(s.RT, Bn)
    gxs = s.Gx  # [T, D*B, 4H]
    gates = np.empty((DB, 4 * H), s.wt)  # rows d*B + b: i, o, f, c
    Y = np.zeros((s.T, D, Bn, H), s.wt)
    Y2 = Y.reshape(s.T, DB, H)
    h = _rows(s, s.h0)
    c = _rows(s, c)
    masked = s.mask is not None
    if not masked and not peep and _lstm_compiled(s, input_forget):  # no AVX-512: the BLAS GEMV compiled loop
        _fast_rnn.lstm_loop(gxs, s.RT.transpose(0, 2, 1), h, c, Y2, Bn)
        return _finish(s, direction, Y, h.copy().reshape(D, Bn, H), c.reshape(D, Bn, H))
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
        h = h.copy()  # _finish reorders Y in place
    return _finish(s, direction, Y, h.reshape(D, Bn, H), c.reshape(D, Bn, H))
