"""PsyNeuLink's functions that its MDF exports name (``"function": "relu"``, ``"driftdiffusionanalytical"``) or
that older exports wrote by class name. PsyNeuLink writes most of its functions as MDF value expressions (its
integrators, Linear, Logistic): those need nothing here. Semantics from PsyNeuLink's documentation of each
function; every argument is positional, named as the export names it, and broadcasts (numpy float64, as the
export's JSON numbers are).
"""

from __future__ import annotations

import numpy as np

from .._registry import op


@op("pnl:ReLU", name="pnl_relu")
def relu(variable0, gain=1.0, bias=0.0, leak=0.0, scale=1.0, offset=0.0):
    """scale * max(x, leak * x) + offset with x = gain * (variable0 - bias) (PsyNeuLink's ReLU: for leak > 1
    the larger of the two, which differs from ONNX's LeakyRelu)."""
    x = gain * (np.asarray(variable0, dtype=np.float64) - bias)
    return scale * np.maximum(x, leak * x) + offset


@op("pnl:SimpleIntegrator", name="pnl_simple_integrator")
def simple_integrator(variable0, previous_value=0.0, rate=1.0, noise=0.0, offset=0.0):
    """previous_value + rate * variable0 + noise + offset"""
    return previous_value + variable0 * rate + noise + offset


@op("pnl:AdaptiveIntegrator", name="pnl_adaptive_integrator")
def adaptive_integrator(variable0, previous_value=0.0, rate=1.0, noise=0.0, offset=0.0):
    """(1 - rate) * previous_value + rate * variable0 + noise + offset (exponentially weighted average)"""
    return (1 - rate) * previous_value + rate * variable0 + noise + offset


@op("pnl:AccumulatorIntegrator", name="pnl_accumulator_integrator")
def accumulator_integrator(variable0=None, previous_value=0.0, rate=1.0, increment=0.0, noise=0.0):
    """previous_value * rate + increment + noise (the input is ignored)"""
    return previous_value * rate + increment + noise


@op("pnl:DriftDiffusionAnalytical", name="pnl_drift_diffusion_analytical")
def drift_diffusion_analytical(
    variable0, drift_rate=1.0, threshold=1.0, starting_value=0.0, noise=0.5, non_decision_time=0.2
):
    """Mean response time and error rate of the drift diffusion model in closed form (Bogacz et al. 2006,
    Psychol. Rev. 113:700, appendix; the drift -> 0 limit from Srivastava et al. 2016), as PsyNeuLink's
    DriftDiffusionAnalytical defines them: drift = drift_rate * variable0; the starting point enters as the
    bias b = (starting_value + threshold) / (2 threshold), clipped to (1e-8, 1 - 1e-8), through
    y0 = noise^2/2 * log(b'/(1 - b')) with b' = b for a positive drift and 1 - b for a negative one,
    limited to +-threshold; the error rate is reported as the probability of the lower boundary's
    reference frame (1 - ER for a negative drift). Returns (RT, ER): the first two of PsyNeuLink's
    eight values; the conditional moments that follow are not computed."""
    drift = np.asarray(drift_rate, dtype=np.float64) * np.asarray(variable0, dtype=np.float64)
    z = np.asarray(threshold, dtype=np.float64)
    c = np.asarray(noise, dtype=np.float64)
    t0 = np.asarray(non_decision_time, dtype=np.float64)
    b = np.clip((np.asarray(starting_value, dtype=np.float64) + z) / (2 * z), 1e-8, 1 - 1e-8)
    a = np.abs(drift)
    neg = drift < 0
    small = a < 1e-8
    with np.errstate(all="ignore"):
        # drift close to 0: the a -> 0 limit, in terms of the absolute bias
        b_abs = b * 2 * z - z
        rt0 = t0 + (z**2 - b_abs**2) / c**2
        er0 = (z - b_abs) / (2 * z)
        a_ = np.where(small, 1.0, a)
        zt = z / a_
        at = (a_ / c) ** 2
        b_adj = np.where(neg, 1 - b, b)
        y0 = (c**2 / 2) * np.log(b_adj / (1 - b_adj))
        y0 = np.where(np.abs(y0) > z, np.where(neg, -z, z), y0)
        x0 = y0 / a_
        e_x0 = np.exp(-2 * x0 * at)
        e_p = np.exp(2 * zt * at)
        e_m = np.exp(-2 * zt * at)
        rt = zt * np.tanh(zt * at) + (2 * zt * (1 - e_x0)) / (e_p - e_m) - x0 + t0
        er = 1 / (1 + e_p) - (1 - e_x0) / (e_p - e_m)
        # overflow of exp(2 z a / c^2): the diffusion vanishes next to the drift (near-deterministic)
        det = ~(np.isfinite(e_p) & np.isfinite(e_x0)) | (e_m == 0) | (e_x0 == 0)
        rt = np.where(det, zt / at - x0 + t0, rt)
        er = np.where(det, 0.0, er)
    rt = np.where(small, rt0, rt)
    er = np.where(small, er0, np.where(neg, 1 - er, er))
    return rt, er
