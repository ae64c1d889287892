"""MDF (ModECI Model Description Format) front end: load, validate and execute MDF models.

    import stdops.mdf as mdf
    model = mdf.load("model.json")            # or .yaml
    sim = mdf.Simulation(model, seed=0)
    sim.evaluate()                             # one trial
    sim.outputs                                # {node: {port: value}}
    traj = sim.run(duration=2.0, dt=0.01)      # time-stepped, -> Trajectory

Modules: ``schema`` (pydantic models), ``io`` (JSON/YAML), ``expr`` (safe expressions),
``functions`` (standard functions, ``onnx::Op``), ``actr``, ``conditions`` (scheduler), ``engine``.
"""

from __future__ import annotations

from .api import NonFiniteWarning, Simulation, Trajectory, n_steps
from .engine import GraphEngine, check_model
from .functions import STANDARD, drift_diffusion_integrator
from .io import MdfWarning, dumps, load, loads, model_from_data, save, to_data
from .schema import (
    Condition,
    ConditionSet,
    Edge,
    Function,
    Graph,
    InputPort,
    Model,
    Node,
    OutputPort,
    Parameter,
    ParameterCondition,
)

__all__ = [
    "load",
    "loads",
    "save",
    "dumps",
    "to_data",
    "model_from_data",
    "check_model",
    "Simulation",
    "Trajectory",
    "GraphEngine",
    "STANDARD",
    "drift_diffusion_integrator",
    "MdfWarning",
    "NonFiniteWarning",
    "n_steps",
    "Model",
    "Graph",
    "Node",
    "Edge",
    "InputPort",
    "OutputPort",
    "Function",
    "Parameter",
    "ParameterCondition",
    "Condition",
    "ConditionSet",
    "is_mdf_file",
]


def is_mdf_file(path) -> bool:
    """True for a .json/.yaml/.yml file whose top level looks like an MDF model."""
    import os

    p = os.fspath(path)
    ext = os.path.splitext(p)[1].lower()
    if ext not in (".json", ".yaml", ".yml"):
        return False
    try:
        with open(p, "rb") as f:
            head = f.read(65536).decode("utf-8", "replace")
    except OSError:
        return False
    return "graphs" in head
