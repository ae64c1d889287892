"""The project's own example models (examples/mdf): a drift-diffusion decision model, an oscillator
and a small network, each checked against an independent calculation."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import stdops.mdf as mdf

EX = Path(__file__).resolve().parents[2] / "examples" / "mdf"


def _logistic(x, gain, bias, offset):
    return 1 / (1 + np.exp(-1 * gain * (x + bias) + offset))


def test_ddm_decision_matches_theory():
    sim = mdf.Simulation(mdf.load(EX / "ddm_decision.yaml"), seed=1)
    sim.evaluate()
    o = sim.outputs["ddm"]
    assert o["signed_rt"].shape == (2000,)
    # symmetric bounds +-a from 0, unit noise; the walk's steps of dt = 0.01 overshoot the boundary, which to
    # second order moves it out by 0.5826 * sqrt(dt) (Siegmund 1979; Broadie, Glasserman & Kou 1997)
    a, v, t0 = 1.0 + 0.5826 * math.sqrt(0.01), 2.0 * 0.3, 0.2
    p_upper = 1 / (1 + math.exp(-2 * a * v))
    mean_dt = (a / v) * math.tanh(a * v)
    assert abs(o["accuracy"] - p_upper) < 0.04
    assert abs(o["mean_rt"] - (t0 + mean_dt)) < 0.08
    again = mdf.Simulation(mdf.load(EX / "ddm_decision.yaml"), seed=1)
    again.evaluate()
    np.testing.assert_array_equal(again.outputs["ddm"]["signed_rt"], o["signed_rt"])


def test_oscillator_matches_euler_and_decays():
    dt, duration = 0.001, 10.0
    sim = mdf.Simulation(mdf.load(EX / "oscillator.yaml"))
    traj = sim.run(duration, dt)
    m, k, c = 1.0, 4.0, 0.2
    x, v = 1.0, 0.0
    xs = [x]
    for _ in range(len(traj.times) - 1):
        x = x + v * dt  # parameters update in declared order: x first (sees the old v) ...
        v = v + (-(k * x + c * v) / m) * dt  # ... then v sees the new x (semi-implicit Euler)
        xs.append(x)
    np.testing.assert_allclose(traj["mass_spring.position"], xs, rtol=1e-12, atol=1e-12)
    # the analytic damped solution, to the accuracy of the integrator
    w0, zeta = math.sqrt(k / m), c / (2 * math.sqrt(k * m))
    wd = w0 * math.sqrt(1 - zeta**2)
    t = traj.times
    exact = np.exp(-zeta * w0 * t) * (np.cos(wd * t) + zeta * w0 / wd * np.sin(wd * t))
    np.testing.assert_allclose(traj["mass_spring.position"], exact, atol=5e-3)
    e = traj["mass_spring.energy"]
    assert e[-1] < 0.2 * e[0]


def test_network_matches_a_hand_written_simulation():
    dt, duration = 0.01, 5.0
    sim = mdf.Simulation(mdf.load(EX / "network.json"))
    traj = sim.run(duration, dt)
    t = 0.0
    r1 = r2 = 0.0
    r2_prev = None
    rows = []
    for step in range(len(traj.times)):
        first = step == 0
        t = 0 if first else t + 1 * dt
        level = 1.5 * np.sin(2 * math.pi * 0.5 * t)
        inh = 0.0 if r2_prev is None else 1.5 * r2_prev
        r1 = 0.0 if first else r1 + ((-r1 + _logistic(level - inh, 4, -0.5, 0)) / 0.1) * dt
        r2 = 0.0 if first else r2 + ((-r2 + _logistic(2.0 * r1, 4, -0.5, 0)) / 0.3) * dt
        r2_prev = r2
        rows.append((level, r1, r2, r1 + 0.5 * r2))
    rows = np.array(rows)
    np.testing.assert_allclose(traj["drive.out"], rows[:, 0], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(traj["unit1.rate"], rows[:, 1], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(traj["unit2.rate"], rows[:, 2], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(traj["readout.sum"], rows[:, 3], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["ddm_decision.yaml", "oscillator.yaml", "network.json"])
def test_examples_round_trip_and_cli(name, tmp_path, capsys):
    from stdops.mdf import cli

    m = mdf.load(EX / name)
    mdf.save(m, tmp_path / name)
    assert mdf.to_data(mdf.load(tmp_path / name)) == mdf.to_data(m)
    cli.info(EX / name)
    if name == "ddm_decision.yaml":
        cli.run_model(EX / name, seed=0)
    else:
        cli.run_model(EX / name, 1.0, 0.01, tmp_path / "t.csv")
        assert (tmp_path / "t.csv").read_text().startswith("time,")
        cli.plot(EX / name, 1.0, 0.01, tmp_path / "p.png")
        assert (tmp_path / "p.png").stat().st_size > 1000
    from stdops.viz import draw

    draw(str(EX / name), str(tmp_path / "g.svg"))  # the graph picture (stdops plot --graph)
    assert (tmp_path / "g.svg").read_text().count("<rect") >= len(m.graph().nodes)
    assert "outputs" in capsys.readouterr().out
