"""The set-up the recurrent kernels of ops/rnn.py share (their NumPy loops and the compiled ones): the shape and
attribute checks, the input projection of every step (one GEMM per direction), the recurrent product of the NumPy
loops, and the outputs' final layout. See ops/rnn.py's module doc for the shapes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from ..errors import KernelError
from .dtypes import compute_dtype, is_float
from .rnn_cell import Act, parse_activations


def recurrent_product(RT: np.ndarray, B: int) -> Callable[[np.ndarray, np.ndarray], None]:
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


def state_rows(s: Setup, a: np.ndarray) -> np.ndarray:
    """A fresh state [D, B, H] as C-contiguous rows [D*B, H] (the loops update it in place)."""
    return np.ascontiguousarray(a).reshape(s.D * s.B, s.H)


# --------------------------------------------------------------------------- shared set-up


@dataclasses.dataclass
class Setup:
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


DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}


def check_shapes(opname: str, gates: int, X, W, R, hidden_size, direction, layout):
    """The checked shapes: (X time-major, W, R, D, H, layout) (X [T, B, I] whatever the layout)."""
    X, W, R = np.asarray(X), np.asarray(W), np.asarray(R)
    if not is_float(X.dtype):
        raise KernelError(f"{opname}: X must be a floating-point tensor, got {X.dtype}")
    if direction not in DIRECTIONS:
        raise KernelError(f"{opname}: direction must be forward, reverse or bidirectional, got {direction!r}")
    if int(layout) not in (0, 1):
        raise KernelError(f"{opname}: layout must be 0 or 1, got {layout}")
    layout = int(layout)
    D = DIRECTIONS[direction]
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


def bias_of(opname: str, B, D: int, gates: int, H: int, wt) -> np.ndarray:
    """B [D, 2*G*H] checked, in the compute dtype (zeros when absent)."""
    if B is None:
        return np.zeros((D, 2 * gates * H), wt)
    bias = np.asarray(B)
    if bias.shape != (D, 2 * gates * H):
        raise KernelError(f"{opname}: B must have shape {(D, 2 * gates * H)}, got {bias.shape}")
    return bias.astype(wt, copy=False)


def lengths_of(opname: str, sequence_lens, Bn: int, T: int) -> np.ndarray | None:
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


def setup(
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
) -> Setup:
    X, W, R, D, H, layout = check_shapes(opname, gates, X, W, R, hidden_size, direction, layout)
    T, Bn, I = X.shape
    wt = compute_dtype(X.dtype)
    Xw = X.astype(wt, copy=False)
    bias = bias_of(opname, B, D, gates, H, wt)
    Wb, Rb = bias[:, : gates * H], bias[:, gates * H :]

    mask = rev_idx = empty = None
    sl = lengths_of(opname, sequence_lens, Bn, T)
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
        h0 = state_of(opname, "initial_h", initial_h, D, Bn, H, layout, wt)
    acts = parse_activations(opname, activations, activation_alpha, activation_beta, default_acts, D)
    RT = R.astype(wt, copy=False).transpose(0, 2, 1)
    return Setup(
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


def state_of(opname, name, s, D, Bn, H, layout, wt) -> np.ndarray:
    s = np.asarray(s)
    want = (Bn, D, H) if layout == 1 else (D, Bn, H)
    if s.shape != want:
        raise KernelError(f"{opname}: {name} must have shape {want}, got {s.shape}")
    if layout == 1:
        s = s.transpose(1, 0, 2)
    return s.astype(wt)  # a fresh array: the loop never touches the caller's tensor


def finish(s: Setup, direction: str, Y: np.ndarray, *states: np.ndarray) -> tuple:
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
