"""Helpers for the producers' corpus (tests/mdf/corpus/, made by scripts/make_mdf_corpus.py): run an MDF file
the way its producer ran the model and compare with the producer's own results."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

CORPUS = Path(__file__).resolve().parent / "corpus"
PNL_DIR = CORPUS / "psyneulink"
MDF_DIR = CORPUS / "modeci_mdf"

#: PsyNeuLink compositions whose export cannot reproduce PsyNeuLink's results, with the cause
PNL_KNOWN: dict[str, str] = {
    "stroop": "a port fed by several projections (colour and word pathways into the response, task demand into "
    "the hidden layers) is exported as a parameter that combines the ports; MDF functions read a parameter's "
    "previous value, so the combination lags one trial behind PsyNeuLink's (stroop_single_pathway is the same "
    "network with one projection into each layer, and matches)",
    "ddm_analytical": "the export's output ports read the function's values [0] and [1] (mean RT, error rate); "
    "PsyNeuLink's DDM mechanism reorders them (decision variable = +-threshold, then RT) in code that is not "
    "exported (the function's own values match: test_psyneulink_ddm_analytical_function)",
    "logistic_offset_scale": "PsyNeuLink's Logistic(offset, x_0, scale) is exported as MDF's logistic, whose "
    "offset enters the exponent with the opposite sign and which has no x_0 or scale",
    "nested_chained": "PsyNeuLink 0.21 exports no edge into or out of a nested composition (projections to its "
    "interface mechanisms are left out), so the outer graph has no edges",
}


#: modeci-mdf exports that neither modeci-mdf nor stdops can run, with the producer's defect; stdops must
#: refuse them with a StdopsError naming the file and the JSON path
MDF_KNOWN: dict[str, str] = {
    "keras_conv": "keras_to_mdf writes a Conv2D node whose relu parameter reads the function "
    "'transposed_output' (MDF parameters read their previous values, so it has none on the first "
    "evaluation), 'onnx:Transpose' with one colon and 6 pads for a 2-D convolution",
}


def pnl_cases() -> list[Path]:
    return sorted(p for p in PNL_DIR.glob("*.json") if not p.name.endswith(".expected.json"))


def mdf_cases() -> list[Path]:
    return sorted(p for p in MDF_DIR.glob("*.json") if not p.name.endswith(".expected.json"))


def expected_of(path: Path) -> dict:
    return json.loads(path.with_name(path.name[: -len(".json")] + ".expected.json").read_text())


def run_pnl_case(path: Path, rtol: float = 1e-6, atol: float = 1e-9) -> list[str]:
    """Run every trial as PsyNeuLink did (one evaluate per trial, the trial's inputs held on the input
    ports); mismatches against PsyNeuLink's per-trial output-port values (empty: all match)."""
    import stdops.mdf as mdf

    exp = expected_of(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mdf.MdfWarning)
        sim = mdf.Simulation(mdf.load(path), seed=0)
    errs: list[str] = []
    for t, (feed, want) in enumerate(zip(exp["inputs"], exp["outputs"])):
        sim.evaluate(inputs={k: np.asarray(v, dtype=np.float64) for k, v in feed.items()})
        got = sim.node_outputs()
        for node, ports in want.items():
            for port, value in ports.items():
                mine = got.get(node, {}).get(port)
                if mine is None:
                    errs.append(f"trial {t}: {node}.{port}: no such output")
                    continue
                a = np.asarray(mine, dtype=np.float64)
                b = np.asarray(value, dtype=np.float64)
                if a.size != b.size or not np.allclose(a.reshape(b.shape), b, rtol=rtol, atol=atol):
                    errs.append(f"trial {t}: {node}.{port}: {a.reshape(-1)[:4]} != PsyNeuLink's {b.reshape(-1)[:4]}")
    return errs


def run_mdf_case(path: Path, rtol: float = 1e-5, atol: float = 1e-6) -> list[str]:
    """One evaluate with the recorded feeds (network input and weights); mismatches of the output nodes
    against the recorded values (modeci-mdf's, or the framework's where modeci-mdf cannot run its export)."""
    import stdops.mdf as mdf

    data = np.load(path.with_suffix(".npz"))
    feeds = {k[3:]: data[k] for k in data.files if k.startswith("in:")}
    want = {k[4:]: data[k] for k in data.files if k.startswith("out:")}
    sim = mdf.Simulation(mdf.load(path), seed=0)
    sim.evaluate(inputs=feeds)
    errs = []
    for key, value in want.items():
        node, _, port = key.partition(".")
        got = sim.node_outputs().get(node, {}).get(port)
        if got is None:
            errs.append(f"{key}: no such output")
            continue
        a = np.asarray(got, dtype=np.float64)
        b = np.asarray(value, dtype=np.float64)
        if a.shape != b.shape:
            errs.append(f"{key}: shape {a.shape} != {b.shape}")
        elif not np.allclose(a, b, rtol=rtol, atol=atol):
            errs.append(f"{key}: max abs diff {np.max(np.abs(a - b)):.3g}")
    return errs
