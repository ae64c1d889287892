"""stdops demo: the bundled examples, one kernel library behind three formats."""

from __future__ import annotations

import argparse
from typing import Any

from ._base import print_table
from .run import print_outputs

LOADS_MODELS = False  # no --max-* limits
HELP = "run the bundled examples: XOR as ONNX and as ncnn, an MDF oscillator"


def register(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "demo",
        help=HELP,
        description="Run the bundled examples: the XOR network as ONNX and as ncnn (same answers, one kernel "
        "library), and a damped oscillator written in MDF.",
    )
    p.set_defaults(func=main)
    return p


def main(a: argparse.Namespace) -> int:
    from .. import load
    from ..examples import demo_inputs, demo_mdf_path, demo_model_path, demo_ncnn_paths
    from ..ncnn import Net

    feeds = demo_inputs()
    path = demo_model_path()
    m = load(path)
    print(f"ONNX {path}: {len(m.proto.graph.node)} nodes, {m.parameter_count():,} parameters")
    result = m.run(feeds)
    print_outputs(result)
    param, weights = demo_ncnn_paths()
    net = Net.load(param, weights)
    print(f"ncnn {param}: {len(net.layers)} layers")
    probs = net.run({"x": feeds["x"]})["probabilities"]
    rows = [
        (f"{x0:g}", f"{x1:g}", int(label), f"{p_onnx[label]:.6f}", f"{p_ncnn[label]:.6f}")
        for (x0, x1), label, p_onnx, p_ncnn in zip(feeds["x"], result["label"], result["probabilities"], probs)
    ]
    print_table("XOR truth table (ONNX and ncnn)", ("a", "b", "label", "P(label) ONNX", "P(label) ncnn"), rows)
    mdf_path = demo_mdf_path()
    if mdf_path is not None:
        from ..mdf import Simulation
        from ..mdf import load as load_mdf

        sim = Simulation(load_mdf(mdf_path))
        traj = sim.run(duration=10.0, dt=0.01)
        print(f"MDF {mdf_path}: {len(traj.times)} time steps")
        for key, v in traj.columns():
            print(f"  {key}: start {v[0]:.4g}, end {v[-1]:.4g}, min {v.min():.4g}, max {v.max():.4g}")
    return 0
