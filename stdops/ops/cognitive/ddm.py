"""The drift diffusion model of decision making (MDF standard function ``drift_diffusion_integrator``):
Euler-Maruyama integration to a symmetric threshold, vectorized over trials, with an explicit seedable
``numpy.random.Generator`` (the reference registers it but cannot run it)."""

from __future__ import annotations

import numpy as np

from ... import limits
from ...errors import StdopsError
from .._registry import op


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
    ones) integrate every trial at once. ``rng`` is a ``numpy.random.Generator`` (seedable).
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
    x = x0.copy()
    n = np.zeros(x.shape, dtype=np.int64)
    mu, sigma = drift * step, sd * np.sqrt(step)
    active = np.flatnonzero(np.abs(x) < thr)
    cap = limits.max_loop_iterations()
    k = 0
    while active.size:
        x[active] = x[active] + rng.normal(mu[active], sigma[active])
        n[active] += 1
        active = active[np.abs(x[active]) < thr[active]]
        k += 1
        if k > cap:
            raise StdopsError(
                f"drift_diffusion_integrator: no boundary crossing after {cap} steps (zero noise and drift?)"
            )
    t = ndt + n * step
    out = np.where(x > thr, t, -t).reshape(shape)
    return float(out) if out.ndim == 0 else out
