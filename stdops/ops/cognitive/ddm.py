"""The drift diffusion model of decision making (MDF standard function ``drift_diffusion_integrator``):
the reference's Euler-Maruyama walk to a symmetric threshold, one trial per element, seedable (the reference
registers it but cannot run it).

The walk is the reference's, step for step: x_0 = starting_point, x_{k+1} = x_k + (mu + sigma z_k) with
mu = drift_rate dt, sigma = noise sqrt(dt) and z_k a standard normal, until |x_k| >= threshold; the result
is +(non_decision_time + k dt) when x_k > threshold, else -(non_decision_time + k dt) (a walk that lands
exactly on +threshold counts as the lower response, as the reference's ``x > threshold`` test gives).

Trial i of a call draws z_k = normal(key, i, k) from :mod:`.philox_normals`, a pure function of the call's
key (one 64-bit draw from the caller's ``numpy.random.Generator``), the trial's number and the step. So a
trial's walk does not depend on how the trials are grouped: the compiled kernel walks each trial to its end
(``stdops.ops._fast_ddm.ddm_walk``; only the normals a trial uses are made), the NumPy path advances all trials
a block of steps at a time (one cumulative sum per block, the trials that ended dropped between blocks), and
both give the same bits. Several calls' trials can be walked together (each with its own key): that is how
``stdops.mdf`` runs a sweep's seeds as one array computation (:func:`signed_times`).
"""

from __future__ import annotations

import numpy as np

from ... import limits
from ...errors import KernelError, StdopsError
from .. import _fast, _fast_ddm
from .._registry import op
from . import philox_normals

_FIRST_BLOCK = 16  # steps per trial in the NumPy path's first block (even: whole Philox calls)
_MAX_BLOCK = 512


def draw_key(rng: np.random.Generator) -> np.uint64:
    """The 64-bit key of one call: one draw from ``rng``."""
    return rng.integers(0, 2**64, dtype=np.uint64)


def _walk_numpy(keys, streams, x0, mu, sigma, thr, cap):
    """(steps, last x) of every trial, all of them advanced a block of steps at a time."""
    n = x0.size
    steps = np.zeros(n, dtype=np.int64)
    x = x0.copy()
    live = np.arange(n)
    block, rounds = _FIRST_BLOCK, 0
    while live.size:
        z = philox_normals.normals(keys[live], streams[live], steps[live], block)
        # x_{k+1} = x_k + (mu + sigma z_k), in the compiled walk's order of operations: z becomes the
        # increments, the first one takes x, and the running sum is the walk
        z *= sigma[live, None]
        z += mu[live, None]
        z[:, 0] += x[live]
        np.cumsum(z, axis=1, out=z)
        out = np.abs(z) >= thr[live, None]
        crossed = out.any(axis=1)
        rows = np.flatnonzero(crossed)
        if rows.size:
            k = out[rows].argmax(axis=1)
            fin = live[rows]
            steps[fin] += k + 1
            x[fin] = z[rows, k]
            if steps[fin].max() > cap:
                raise _no_crossing(cap)
        keep = ~crossed
        cont = live[keep]
        steps[cont] += block
        x[cont] = z[keep, -1]
        live = cont
        if live.size and steps[live[0]] >= cap:  # the live trials have all walked the same steps
            raise _no_crossing(cap)
        rounds += 1
        if rounds % 3 == 0 and block < _MAX_BLOCK:
            block *= 2
    return steps, x


def _no_crossing(cap: int) -> StdopsError:
    return StdopsError(
        f"drift_diffusion_integrator: no boundary crossing after {cap} steps (a very small noise and drift?)"
    )


def signed_times(keys, streams, x0, ndt, drift, thr, sd, step) -> np.ndarray:
    """Signed response times of trials given as flat float64 arrays of one length; trial ``i`` walks on the
    normals of ``(keys[i], streams[i])`` ((n,) uint64: its call's key and its number in that call)."""
    keys, streams = (np.asarray(a, dtype=np.uint64).reshape(-1) for a in (keys, streams))
    x0, ndt, drift, thr, sd, step = (
        np.asarray(a, dtype=np.float64).reshape(-1) for a in (x0, ndt, drift, thr, sd, step)
    )
    bad = ~(np.isfinite(step) & (step > 0))
    if bad.any():
        raise KernelError(f"drift_diffusion_integrator: dt must be a positive number, got {step[bad][0]!r}")
    bad = ~(np.isfinite(sd) & (sd >= 0))
    if bad.any():
        raise KernelError(f"drift_diffusion_integrator: noise must be a number >= 0, got {sd[bad][0]!r}")
    for name, a in (("drift_rate", drift), ("starting_point", x0), ("non_decision_time", ndt)):
        if not np.isfinite(a).all():
            raise KernelError(f"drift_diffusion_integrator: {name} must be finite, got {a[~np.isfinite(a)][0]!r}")
    if np.isnan(thr).any():
        raise KernelError("drift_diffusion_integrator: threshold is NaN")
    mu, sigma = drift * step, sd * np.sqrt(step)
    n = np.zeros(x0.shape, dtype=np.int64)
    above = x0 > thr
    inside = np.flatnonzero(np.abs(x0) < thr)
    if inside.size:
        cap = min(limits.max_loop_iterations(), philox_normals.MAX_STEPS)
        args = (keys[inside], streams[inside], x0[inside], mu[inside], sigma[inside], thr[inside], cap)
        if _fast.enabled():
            k, x = _fast_ddm.ddm_walk(*args)
            if k is None:
                raise _no_crossing(cap)
        else:
            k, x = _walk_numpy(*args)
        n[inside] = k
        above[inside] = x > thr[inside]
    t = ndt + n * step
    return np.where(above, t, -t)


def _trial_arrays(args, n_trials, what="drift_diffusion_integrator trials"):
    """The six arguments broadcast together (with ``n_trials`` copies in front), as flat float64 arrays, and
    the shape of one call's result."""
    arrs = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in args))
    shape = arrs[0].shape
    if n_trials is not None:
        shape = (int(n_trials),) + shape
        limits.check_elements(shape, what)
        arrs = [np.broadcast_to(a, shape) for a in arrs]
    return [np.array(a, dtype=np.float64).reshape(-1) for a in arrs], shape


@op("mdf:drift_diffusion_integrator")
def drift_diffusion_integrator(
    starting_point,
    non_decision_time,
    drift_rate,
    threshold,
    noise=1.0,
    dt=0.01,
    *,
    rng: np.random.Generator | None = None,
    n_trials: int | None = None,
):
    """Euler-Maruyama drift diffusion: x = starting_point; until |x| >= threshold,
    x += Normal(drift_rate*dt, noise*sqrt(dt)); returns +(non_decision_time + steps*dt) when x ends
    above threshold, else -(non_decision_time + steps*dt).

    Vectorized over trials: array arguments (broadcast together, or ``n_trials`` copies of scalar
    ones) are one trial per element, numbered in C order. ``rng`` is a ``numpy.random.Generator``
    (seedable); a call takes one 64-bit key from it and every trial's normals from that key (module
    docstring).
    """
    if rng is None:
        rng = np.random.default_rng()
    flat, shape = _trial_arrays((starting_point, non_decision_time, drift_rate, threshold, noise, dt), n_trials)
    size = flat[0].size
    keys = np.full(size, draw_key(rng), dtype=np.uint64)
    out = signed_times(keys, np.arange(size, dtype=np.uint64), *flat).reshape(shape)
    return float(out) if out.ndim == 0 else out


def replicated(rngs, per_call_args, n_trials: int | None = None) -> np.ndarray:
    """K calls of :func:`drift_diffusion_integrator` as one walk: call ``k`` takes the six arguments
    ``per_call_args[k]`` and its key from ``rngs[k]``. Returns ``(K, *shape)``, row k bit-identical to
    ``drift_diffusion_integrator(*per_call_args[k], rng=rngs[k], n_trials=n_trials)`` (the calls' trial
    shapes must agree)."""
    flats = [_trial_arrays(args, n_trials) for args in per_call_args]
    shapes = {shape for _, shape in flats}
    if len(shapes) != 1:
        raise KernelError(f"drift_diffusion_integrator: the replicas' trial shapes differ: {sorted(shapes)}")
    shape = flats[0][1]
    size = flats[0][0][0].size
    limits.check_elements((len(flats), size), "drift_diffusion_integrator trials of every replica")
    keys = np.repeat(np.array([draw_key(g) for g in rngs], dtype=np.uint64), size)
    streams = np.tile(np.arange(size, dtype=np.uint64), len(flats))
    cols = [np.concatenate([flat[i] for flat, _ in flats]) for i in range(6)]
    return signed_times(keys, streams, *cols).reshape((len(flats), *shape))
