"""The drift diffusion model of decision making (MDF standard function ``drift_diffusion_integrator``):
the reference's Euler-Maruyama walk to a symmetric threshold, vectorized over trials and over blocks of
steps, with an explicit seedable ``numpy.random.Generator`` (the reference registers it but cannot run it).

Each round draws a block of K increments for every trial still inside, as standard normals: with
z_k = N(0, 1) + drift*dt/sigma (sigma = noise*sqrt(dt)) and c_j = z_1 + ... + z_j, the walk after j more
steps is x + sigma*c_j, so the block leaves (-threshold, threshold) exactly where c_j reaches
(threshold - x)/sigma or (-threshold - x)/sigma: one cumulative sum and a row maximum and minimum per block,
the first crossing step searched only in the rows that cross. K doubles every few rounds (the few long
trials at the end run in long blocks). The steps drawn after a trial's crossing are discarded unseen, so the
result has the reference loop's distribution; the draws are not the reference's (it calls numpy's global
generator once per step).
"""

from __future__ import annotations

import numpy as np

from ... import limits
from ...errors import StdopsError
from .._registry import op

_FIRST_BLOCK = 32
_MAX_BLOCK = 1024


def _first_exit(x0, mu, sigma, thr, rng, cap):
    """Steps until x0 + sum(Normal(mu, sigma)) leaves (-thr, thr), and whether it left above (x > thr);
    flat float64 arrays of trials that start inside, sigma > 0."""
    n = x0.size
    steps = np.zeros(n, dtype=np.int64)
    up = np.zeros(n, dtype=bool)
    x = x0.copy()
    live = np.arange(n)
    k_block, rounds = _FIRST_BLOCK, 0
    buf = np.empty(0)
    while live.size:
        m = live.size
        if buf.size < m * k_block:
            buf = np.empty(m * k_block)
        z = buf[: m * k_block].reshape(m, k_block)
        rng.standard_normal(out=z)
        z += (mu[live] / sigma[live])[:, None]
        np.cumsum(z, axis=1, out=z)
        xl, sl, tl = x[live], sigma[live], thr[live]
        hi, lo = (tl - xl) / sl, (-tl - xl) / sl
        cross = (z.max(axis=1) >= hi) | (z.min(axis=1) <= lo)
        rows = np.flatnonzero(cross)
        if rows.size:
            zr = z[rows]
            k = ((zr >= hi[rows, None]) | (zr <= lo[rows, None])).argmax(axis=1)
            fin = live[rows]
            steps[fin] += k + 1
            up[fin] = xl[rows] + sl[rows] * zr[np.arange(rows.size), k] > tl[rows]
        keep = ~cross
        cont = live[keep]
        steps[cont] += k_block
        x[cont] = xl[keep] + sl[keep] * z[keep, -1]
        live = cont
        if live.size and steps[live].max() > cap:
            raise StdopsError(
                f"drift_diffusion_integrator: no boundary crossing after {cap} steps (a very small noise and drift?)"
            )
        rounds += 1
        if rounds % 3 == 0 and k_block < _MAX_BLOCK:
            k_block *= 2
    return steps, up


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
    ones) integrate every trial at once, in blocks of steps (module docstring). ``rng`` is a
    ``numpy.random.Generator`` (seedable).
    """
    if rng is None:
        rng = np.random.default_rng()
    arrs = np.broadcast_arrays(
        *(
            np.asarray(a, dtype=np.float64)
            for a in (starting_point, non_decision_time, drift_rate, threshold, noise, dt)
        )
    )
    shape = arrs[0].shape
    if n_trials is not None:
        shape = (int(n_trials),) + shape
        limits.check_elements(shape, "drift_diffusion_integrator trials")
        arrs = [np.broadcast_to(a, shape) for a in arrs]
    x0, ndt, drift, thr, sd, step = (np.array(a, dtype=np.float64).reshape(-1) for a in arrs)
    mu, sigma = drift * step, sd * np.sqrt(step)
    n = np.zeros(x0.shape, dtype=np.int64)
    above = x0 > thr
    cap = limits.max_loop_iterations()
    inside = np.abs(x0) < thr
    noisy = np.flatnonzero(inside & (sigma > 0))
    if noisy.size:
        n[noisy], above[noisy] = _first_exit(x0[noisy], mu[noisy], sigma[noisy], thr[noisy], rng, cap)
    still = np.flatnonzero(inside & ~(sigma > 0))  # no noise: the reference's loop, step by step
    x = x0[still].copy()
    k = 0
    while still.size:
        x = x + mu[still]
        n[still] += 1
        out = np.abs(x) >= thr[still]
        above[still[out]] = x[out] > thr[still[out]]
        still, x = still[~out], x[~out]
        k += 1
        if k > cap:
            raise StdopsError(
                f"drift_diffusion_integrator: no boundary crossing after {cap} steps (zero noise and drift?)"
            )
    t = ndt + n * step
    out = np.where(above, t, -t).reshape(shape)
    return float(out) if out.ndim == 0 else out
