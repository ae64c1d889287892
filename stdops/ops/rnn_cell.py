"""Recurrent cells: one time step of an RNN, GRU or LSTM on precomputed input projections.

The pre-activations of a step are the input projection ``x W^T + Wb`` (one GEMM over every time step,
computed by the caller), plus the recurrent product ``h R^T + Rb`` (a GEMV per step, computed by the
caller in whatever precision it keeps its weights: float, or ncnn's dynamically quantized int8). The
cells turn them into the new states with the gate activations (ONNX names, alpha/beta as the RNN ops
take them); the activation functions are the activation kernels themselves.

The ONNX RNN/GRU/LSTM kernels (:mod:`stdops.ops.rnn`), the ncnn LSTM/GRU/RNN layers (fp32, int8,
projection) and MDF (through ``onnx::LSTM`` etc.) all run on these cells. :class:`LSTMCell`,
:class:`GRUCell` and :func:`rnn_step` are the in-place engines (scratch buffers, no allocation per step,
for the time loops); :func:`lstm_cell`, :func:`gru_cell` and :func:`rnn_cell` are the kernels (fresh
outputs, inputs untouched) on the same engines. Gate orders are ONNX's: LSTM i, o, f, c; GRU z, r, h.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import KernelError
from ._registry import op
from .activation import elu, hard_sigmoid, leaky_relu, relu, sigmoid, sigmoid_into, softplus, softsign
from .activation import thresholded_relu as _thresholded_relu
from .dtypes import compute_dtype, is_float
from .elementwise import tanh

# --------------------------------------------------------------------------- activations


def _affine(x, a, b):
    """Affine (an RNN activation with no kernel of its own): x * alpha + beta."""
    return x * a + b


def _scaled_tanh(x, a, b):
    """ScaledTanh (an RNN activation with no kernel of its own): alpha * tanh(beta * x)."""
    return a * np.tanh(x * b)


#: lower-case ONNX name -> (function(x, alpha, beta), default alpha or None, default beta or None)
ACTIVATIONS: dict[str, tuple[Callable, float | None, float | None]] = {
    "relu": (lambda x, a, b: relu(x), None, None),
    "tanh": (lambda x, a, b: tanh(x), None, None),
    "sigmoid": (lambda x, a, b: sigmoid(x), None, None),
    "affine": (_affine, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: leaky_relu(x, alpha=float(a)), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: _thresholded_relu(x, alpha=float(a)), 1.0, None),
    "scaledtanh": (_scaled_tanh, 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: hard_sigmoid(x, alpha=float(a), beta=float(b)), 0.2, 0.5),
    "elu": (lambda x, a, b: elu(x, alpha=float(a)), 1.0, None),
    "softsign": (lambda x, a, b: softsign(x), None, None),
    "softplus": (lambda x, a, b: softplus(x), None, None),
}
#: the kernels behind the table (for the registry: the cells run on them)
_ACTIVATION_KERNELS = (relu, tanh, sigmoid, leaky_relu, _thresholded_relu, hard_sigmoid, elu, softsign, softplus)


@dataclasses.dataclass(frozen=True)
class Act:
    """One gate activation with its parameters."""

    name: str
    alpha: float
    beta: float

    def __call__(self, x: np.ndarray) -> np.ndarray:
        fn = ACTIVATIONS[self.name][0]
        t = x.dtype.type
        return np.asarray(fn(x, t(self.alpha), t(self.beta)))


def parse_activations(
    opname: str, activations, alphas, betas, defaults: tuple[str, ...], num_dirs: int
) -> list[list[Act]]:
    """Per direction, the activation functions in the op's order. ``activation_alpha`` and
    ``activation_beta`` are consumed in order by the functions that take that parameter."""
    k = len(defaults)
    names = list(defaults) * num_dirs if not activations else [str(a) for a in activations]
    if len(names) != k * num_dirs:
        raise KernelError(
            f"{opname}: expected {k * num_dirs} activations for {num_dirs} direction(s), got {len(names)}: {names}"
        )
    alphas = list(alphas or ())
    betas = list(betas or ())
    acts = []
    for nm in names:
        key = nm.lower()
        if key not in ACTIVATIONS:
            raise KernelError(
                f"{opname}: unsupported activation {nm!r} (supported: "
                f"Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, "
                f"ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)"
            )
        _, da, db = ACTIVATIONS[key]
        a = float(alphas.pop(0)) if da is not None and alphas else (da or 0.0)
        b = float(betas.pop(0)) if db is not None and betas else (db or 0.0)
        acts.append(Act(key, a, b))
    return [acts[d * k : (d + 1) * k] for d in range(num_dirs)]


#: (src, dst) -> dst = f(src)
Into = Callable[[np.ndarray, np.ndarray], object]


def _into1(a: Act) -> Into:
    """(src, dst) -> dst[...] = a(src): the common functions write in place (the same ufuncs as their
    kernels), the others through their kernel."""
    if a.name == "sigmoid":
        return lambda src, dst: sigmoid_into(src, out=dst)
    if a.name == "tanh":
        return lambda src, dst: np.tanh(src, out=dst)
    if a.name == "relu":
        return lambda src, dst: np.maximum(src, src.dtype.type(0), out=dst)

    def generic(src: np.ndarray, dst: np.ndarray) -> None:
        dst[...] = a(src)

    return generic


def into(funcs: Sequence[Act], rows: int) -> Into:
    """(src, dst) -> dst = funcs[d](src) on the rows d*rows:(d+1)*rows of direction d ([D*rows, n] arrays;
    src may be dst); one call when every direction uses the same function."""
    if all(f == funcs[0] for f in funcs):
        return _into1(funcs[0])
    fs = [(slice(d * rows, (d + 1) * rows), _into1(f)) for d, f in enumerate(funcs)]

    def per_dir(src: np.ndarray, dst: np.ndarray) -> None:
        for rs, f in fs:
            f(src[rs], dst[rs])

    return per_dir


def clipper(clip: float | None) -> Callable[[np.ndarray], object] | None:
    """x -> clip(x) in place, or None without clip."""
    if clip is None:
        return None
    lo, hi = -clip, clip
    return lambda x: np.clip(x, lo, hi, out=x)


# --------------------------------------------------------------------------- the engines


def rnn_step(gates: np.ndarray, f: Into, clip: Callable | None) -> np.ndarray:
    """Ht = f(clip(gates)) in place on ``gates`` (the pre-activations x W^T + H R^T + Wb + Rb)."""
    if clip is not None:
        clip(gates)
    f(gates, gates)
    return gates


class GRUCell:
    """One GRU step on rows [n, .]: z, r = f(gx + gh) on their halves; candidate = g(gx_h + r * gh_h)
    (linear before reset, gh_h = H R_h^T + Rb_h) or g(gx_h + (r * H) R_h^T) (Rb_h in gx_h);
    Ht = (1 - z) * candidate + z * Ht-1.

    ``step(gx, gh_zr, h, out, gh_h_or_rec_h)``: gx [n, 3H] (x W^T + Wb ...), gh_zr [n, 2H]
    (H R_zr^T + Rb_zr), h [n, H]; the last argument is gh_h [n, H] with ``linear_before_reset``, else
    ``rec_h(r * H, into)`` writing the product with R_h^T. The step is a closure over its scratch
    buffers, its branches settled here (a time loop calls it once per step)."""

    def __init__(
        self, f: Into, g: Into, clip: Callable | None, rows: int, H: int, dtype: np.dtype, linear_before_reset: bool
    ):
        zr = np.empty((rows, 2 * H), dtype)
        z, r = zr[:, :H], zr[:, H:]
        hh = np.empty((rows, H), dtype)
        t1, t2 = np.empty_like(hh), np.empty_like(hh)
        one = np.dtype(dtype).type(1)
        add, mul, sub = np.add, np.multiply, np.subtract
        lbr = bool(linear_before_reset)

        def step(gx: np.ndarray, gh_zr: np.ndarray, h: np.ndarray, out: np.ndarray, recurrent_h) -> np.ndarray:
            add(gx[:, : 2 * H], gh_zr, out=zr)
            if clip is not None:
                clip(zr)
            f(zr, zr)
            if lbr:
                mul(r, recurrent_h, out=hh)
            else:
                mul(r, h, out=t1)
                recurrent_h(t1, hh)
            add(gx[:, 2 * H :], hh, out=hh)
            if clip is not None:
                clip(hh)
            g(hh, hh)
            sub(one, z, out=t1)  # Ht = (1 - z) * hh + z * Ht-1
            mul(t1, hh, out=t1)
            mul(z, h, out=t2)
            add(t1, t2, out=out)
            return out

        self.step = step


class LSTMCell:
    """One LSTM step on rows [n, .]: it = f(gi + Pi * Ct-1), ft = f(gf + Pf * Ct-1) (1 - it with
    input_forget), ct = g(gc), Ct = ft * Ct-1 + it * ct, ot = f(go + Po * Ct), Ht = ot * h(Ct); the clip
    bounds every gate input.

    ``step(gates, c, c_out, h_out)``: ``gates`` (i, o, f, c pre-activations, overwritten), ``c`` the cell
    state; writes Ct into ``c_out`` (which may be ``c``) and Ht into ``h_out``, returns h_out. A closure
    over its scratch buffers, its branches settled here (a time loop calls it once per step)."""

    def __init__(
        self,
        f: Into,
        g: Into,
        h: Into,
        clip: Callable | None,
        rows: int,
        H: int,
        dtype: np.dtype,
        peepholes: np.ndarray | None = None,
        input_forget: bool = False,
    ):
        th = np.empty((rows, H), dtype)  # h(Ct)
        one = np.dtype(dtype).type(1)
        couple = bool(input_forget)
        add, mul = np.add, np.multiply
        views: list = [None, ()]  # the gates buffer of the last call and its views (one per time loop)

        def gate_views(gates: np.ndarray) -> tuple:
            if gates is not views[0]:
                views[0] = gates
                views[1] = (*(gates[:, k * H : (k + 1) * H] for k in range(4)), gates[:, : 3 * H])
            return views[1]

        def gate(fn: Into, x: np.ndarray) -> np.ndarray:
            """fn(clip(x)) into a fresh array (the gates that depend on the cell state)."""
            x = np.array(x)
            if clip is not None:
                clip(x)
            fn(x, x)
            return x

        if peepholes is None and not couple:  # i, o, f contiguous and independent of the cell

            def step(gates: np.ndarray, c: np.ndarray, c_out: np.ndarray, h_out: np.ndarray) -> np.ndarray:
                gi, go, gf, gc, iof = gate_views(gates)
                if clip is not None:
                    clip(gates)
                f(iof, iof)
                g(gc, gc)
                mul(gf, c, out=c_out)  # Ct = f * Ct-1 + i * g(c)
                mul(gi, gc, out=gc)
                add(c_out, gc, out=c_out)
                h(c_out, th)
                mul(go, th, out=h_out)
                return h_out

        else:
            peep = None if peepholes is None else (peepholes[:, :H], peepholes[:, H : 2 * H], peepholes[:, 2 * H :])

            def step(gates: np.ndarray, c: np.ndarray, c_out: np.ndarray, h_out: np.ndarray) -> np.ndarray:
                pi, po, pf, pc, _ = gate_views(gates)
                if peep is not None:
                    pi = pi + peep[0] * c
                    pf = pf + peep[2] * c
                i = gate(f, pi)
                ft = one - i if couple else gate(f, pf)
                add(ft * c, i * gate(g, pc), out=c_out)
                if peep is not None:
                    po = po + peep[1] * c_out
                h(c_out, th)
                mul(gate(f, po), th, out=h_out)
                return h_out

        self.step = step


# --------------------------------------------------------------------------- the kernels


def _rows(x, what: str, opname: str, width: int | None = None) -> np.ndarray:
    x = np.asarray(x)
    if not is_float(x.dtype):
        raise KernelError(f"{opname}: {what} must be a floating-point tensor, got {x.dtype}")
    if x.ndim != 2 or (width is not None and x.shape[1] != width):
        want = f"[batch, {width}]" if width is not None else "[batch, n]"
        raise KernelError(f"{opname}: {what} must have shape {want}, got {x.shape}")
    return x


def _one_direction(opname, activations, alpha, beta, defaults) -> list[Act]:
    return parse_activations(opname, activations, alpha, beta, defaults, 1)[0]


@op(kernels=_ACTIVATION_KERNELS)
def rnn_cell(gates, /, *, activations=None, activation_alpha=None, activation_beta=None, clip=None):
    """Ht = f(clip(gates)), gates the pre-activations x W^T + Ht-1 R^T + Wb + Rb of one step [B, H]
    (f = Tanh by default). Ht has gates' shape and dtype (float16/bfloat16 computed in float32)."""
    g = _rows(gates, "gates", "rnn_cell")
    wt = compute_dtype(g.dtype)
    (f,) = _one_direction("rnn_cell", activations, activation_alpha, activation_beta, ("Tanh",))
    h = rnn_step(g.astype(wt, copy=True), _into1(f), clipper(None if clip is None else float(clip)))
    return h.astype(g.dtype, copy=False)


@op(kernels=_ACTIVATION_KERNELS)
def gru_cell(
    gx,
    gh,
    h,
    r_h=None,
    /,
    *,
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    linear_before_reset=0,
):
    """zt = f(gx_z + gh_z), rt = f(gx_r + gh_r); ht = g(gx_h + rt * gh_h) (linear_before_reset != 0) or
    g(gx_h + (rt * Ht-1) r_h) (0; Rb_h already in gx_h); Ht = (1 - zt) * ht + zt * Ht-1.

    gx [B, 3H] the input projection x W^T + Wb of one step (z, r, h); gh [B, 3H] the recurrent product
    Ht-1 R^T + Rb (only its z, r parts without linear_before_reset); h [B, H]; r_h [H, H] = R_h^T, needed
    without linear_before_reset. f = Sigmoid, g = Tanh by default. Ht [B, H], gx's dtype.
    """
    gx = _rows(gx, "gx", "gru_cell")
    B, H3 = gx.shape
    if H3 % 3:
        raise KernelError(f"gru_cell: gx must have shape [batch, 3 * hidden], got {gx.shape}")
    H = H3 // 3
    lbr = bool(linear_before_reset)
    gh = _rows(gh, "gh", "gru_cell")
    if gh.shape[0] != B or gh.shape[1] not in ((3 * H,) if lbr else (2 * H, 3 * H)):
        raise KernelError(f"gru_cell: gh of shape {gh.shape} does not fit gx of shape {gx.shape}")
    h = _rows(h, "h", "gru_cell", H)
    wt = compute_dtype(gx.dtype)
    rec_h = None
    if not lbr:
        if r_h is None or np.shape(r_h) != (H, H):
            raise KernelError(f"gru_cell: without linear_before_reset, r_h [{H}, {H}] is needed")
        rh = np.asarray(r_h, wt)
        rec_h = lambda x, out: np.matmul(x, rh, out=out)  # noqa: E731
    f, g = _one_direction("gru_cell", activations, activation_alpha, activation_beta, ("Sigmoid", "Tanh"))
    cell = GRUCell(_into1(f), _into1(g), clipper(None if clip is None else float(clip)), B, H, wt, lbr)
    ghw = gh.astype(wt, copy=False)
    out = np.empty((B, H), wt)
    cell.step(
        gx.astype(wt, copy=False), ghw[:, : 2 * H], h.astype(wt, copy=False), out, ghw[:, 2 * H :] if lbr else rec_h
    )
    return out.astype(gx.dtype, copy=False)


@op(kernels=_ACTIVATION_KERNELS)
def lstm_cell(
    gates,
    c,
    p=None,
    /,
    *,
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    input_forget=0,
):
    """it = f(gi + Pi * Ct-1), ft = f(gf + Pf * Ct-1) (1 - it with input_forget), ct = g(gc),
    Ct = ft * Ct-1 + it * ct, ot = f(go + Po * Ct), Ht = ot * h(Ct).

    gates [B, 4H] the pre-activations x W^T + Ht-1 R^T + Wb + Rb of one step in ONNX order i, o, f, c;
    c [B, H] the cell state; p [3H] the peepholes (i, o, f). f = Sigmoid, g = h = Tanh by default; clip
    bounds every gate input. Returns (Ht, Ct), [B, H] each, in gates' dtype.
    """
    gates = _rows(gates, "gates", "lstm_cell")
    B, H4 = gates.shape
    if H4 % 4:
        raise KernelError(f"lstm_cell: gates must have shape [batch, 4 * hidden], got {gates.shape}")
    H = H4 // 4
    c = _rows(c, "c", "lstm_cell", H)
    wt = compute_dtype(gates.dtype)
    peep = None
    if p is not None:
        if np.shape(p) != (3 * H,):
            raise KernelError(f"lstm_cell: p must have shape ({3 * H},), got {np.shape(p)}")
        peep = np.broadcast_to(np.asarray(p, wt), (B, 3 * H))
    f, g, hh = _one_direction("lstm_cell", activations, activation_alpha, activation_beta, ("Sigmoid", "Tanh", "Tanh"))
    cell = LSTMCell(
        _into1(f), _into1(g), _into1(hh), clipper(None if clip is None else float(clip)), B, H, wt, peep, input_forget
    )
    c_out, h_out = np.empty((B, H), wt), np.empty((B, H), wt)
    cell.step(gates.astype(wt, copy=True), c.astype(wt, copy=False), c_out, h_out)
    return h_out.astype(gates.dtype, copy=False), c_out.astype(gates.dtype, copy=False)
