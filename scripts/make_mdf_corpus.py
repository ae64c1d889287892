"""Build the MDF producers' corpus: MDF files written by the tools that write them, with the producer's own
results as expected values (tests/mdf/corpus/, checked by tests/mdf/test_corpus.py).

    python scripts/make_mdf_corpus.py                 # both producers (creates their venvs on first use)
    python scripts/make_mdf_corpus.py --only pnl      # PsyNeuLink compositions only
    python scripts/make_mdf_corpus.py --only mdf      # modeci-mdf's PyTorch / ONNX / Keras interfaces only
    python scripts/make_mdf_corpus.py --check         # rebuild elsewhere, compare the files' checksums

The producers never enter the project venv. Each gets its own, made here from pinned requirements:

- ``.venv-pnl``: torch 2.13.0 (the CPU wheel on disk) then psyneulink 0.21.0.0 (it pulls modeci-mdf 0.4.13).
  Compositions: scripts/mdf_corpus_pnl.py. Each is exported with ``psyneulink.get_mdf_serialized`` and run
  with ``Composition.run``; the expected file holds, per trial, the inputs (as MDF input-port values) and
  every node's output-port values after the trial, read from PsyNeuLink.
- ``.venv-mdf-prod``: torch 2.13.0, then benchmarks/requirements-mdf-ref.txt (modeci-mdf 0.4.15 and
  onnxruntime), then tensorflow-cpu for the Keras interface. Models: scripts/mdf_corpus_mdf.py (hand-made
  networks with seeded random weights in the shape of VGG/ResNet/MobileNet/... blocks). The expected values
  are modeci-mdf's own outputs (its EvaluableGraph) for the exported file.

How a PsyNeuLink trial maps onto MDF: one ``Composition.run`` trial is one MDF ``evaluate()`` of the graph
(scheduler clock, call counts and every stateful parameter carry over between trials); the trial's input
for a node is given as that node's input-port value and stays there for every execution of the node in the
trial. The termination condition for a trial is the graph's ``termination.environment_state_update``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.join(ROOT, "tests", "mdf", "corpus")
VENV_PNL = os.path.join(ROOT, ".venv-pnl")
VENV_MDF = os.path.join(ROOT, ".venv-mdf-prod")
TORCH = "torch==2.13.0"
PNL = "psyneulink==0.21.0.0"
TF = "tensorflow-cpu==2.21.0"
MDF_REQS = os.path.join(ROOT, "benchmarks", "requirements-mdf-ref.txt")


def _venv(path: str, installs: list[list[str]]) -> str:
    py = os.path.join(path, "bin", "python")
    stamp = os.path.join(path, ".installed")
    want = hashlib.sha256(json.dumps(installs).encode()).hexdigest()
    if os.path.exists(stamp) and open(stamp).read().strip() == want:
        return py
    if not os.path.exists(py):
        subprocess.run([sys.executable, "-m", "venv", path], check=True)
        subprocess.run([py, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    for args in installs:
        print(f"{os.path.basename(path)}: pip install {' '.join(args)}", flush=True)
        subprocess.run([py, "-m", "pip", "install", "--quiet", *args], check=True)
    with open(stamp, "w") as f:
        f.write(want + "\n")
    return py


def pnl_python() -> str:
    return _venv(VENV_PNL, [[TORCH], [PNL]])


def mdf_python(with_tf: bool = True) -> str:
    installs = [[TORCH], ["-r", MDF_REQS]]
    if with_tf:
        installs.append([TF])
    return _venv(VENV_MDF, installs)


# ---------------------------------------------------------------------------------------------------------
# PsyNeuLink side (runs in .venv-pnl)


def _plain(v):
    import numpy as np

    if isinstance(v, np.ndarray):
        if v.dtype == object:
            return [_plain(x) for x in v.tolist()]
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def _all_mechanisms(comp):
    import psyneulink as pnl

    out = []
    for n in comp.nodes:
        if isinstance(n, pnl.Composition):
            out += _all_mechanisms(n)
        else:
            out.append(n)
    return out


def run_pnl(names: list[str] | None, out_dir: str) -> None:
    import warnings

    import numpy as np
    import psyneulink as pnl

    sys.path.insert(0, HERE)
    import mdf_corpus_pnl as corpus

    os.makedirs(out_dir, exist_ok=True)
    for name, build in corpus.BUILDERS.items():
        if names and name not in names:
            continue
        for reg in pnl.primary_registries:  # fresh names (no "-1" suffixes) for every composition
            pnl.clear_registry(reg)
        comp, inputs = build()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            text = pnl.get_mdf_serialized(comp, fmt="json")
        export_warnings = sorted({str(w.message) for w in caught if "MDF" in str(w.message)})
        mdf = json.loads(text)
        graph = next(iter(next(iter(mdf.values()))["graphs"].values()))
        mdf_nodes = _mdf_nodes(graph)
        n_trials = len(next(iter(inputs.values())))
        trials: list = []
        function_values: list = []
        mechs = _all_mechanisms(comp)

        def after_trial(comp=comp, mechs=mechs, trials=trials, mdf_nodes=mdf_nodes, function_values=function_values):
            rec = {}
            for m in mechs:
                ports = mdf_nodes.get(m.name, {}).get("output_ports", [])
                rec[m.name] = {p: _plain(op.parameters.value.get(comp)) for p, op in zip(ports, m.output_ports)}
            trials.append(rec)
            function_values.append({m.name: _plain(m.function.parameters.value.get(comp)) for m in mechs})

        comp.run(inputs=inputs, call_after_trial=after_trial)
        feeds = []
        for t in range(n_trials):
            feed = {}
            for node, vals in inputs.items():
                while isinstance(node, pnl.Composition):  # a nested composition: its (one) input node
                    (node,) = node.get_nodes_by_role(pnl.NodeRole.INPUT)
                ports = mdf_nodes[node.name]["input_ports"]
                v = np.asarray(vals[t], dtype=np.float64)
                shapes = mdf_nodes[node.name]["input_shapes"]
                if len(ports) == 1:
                    feed[f"{node.name}.{ports[0]}"] = v.reshape(shapes[0] or v.shape).tolist()
                else:
                    for p, s, x in zip(ports, shapes, v):
                        feed[f"{node.name}.{p}"] = np.asarray(x).reshape(s or np.shape(x)).tolist()
            feeds.append(feed)
        expected = {
            "producer": f"PsyNeuLink {pnl.__version__}",
            "composition": name,
            "num_trials": n_trials,
            "inputs": feeds,
            "outputs": trials,
            "results": _plain(comp.results),
            "function_values": function_values,
            "export_warnings": export_warnings,
        }
        with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
            json.dump(mdf, f, indent=1)
            f.write("\n")
        with open(os.path.join(out_dir, f"{name}.expected.json"), "w") as f:
            json.dump(expected, f, indent=1)
            f.write("\n")
        print(f"pnl {name}: {n_trials} trials, {len(mechs)} mechanisms", flush=True)


def _mdf_nodes(graph: dict, out: dict | None = None) -> dict:
    """node id -> its input/output port ids (in order), including nodes of nested graphs."""
    out = {} if out is None else out
    for nid, node in (graph.get("nodes") or {}).items():
        ins = node.get("input_ports") or {}
        out[nid] = {
            "input_ports": list(ins),
            "input_shapes": [p.get("shape") if isinstance(p, dict) else None for p in ins.values()],
            "output_ports": list(node.get("output_ports") or {}),
        }
        if "nodes" in node:
            _mdf_nodes(node, out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["pnl", "mdf"], default=None)
    ap.add_argument("--names", nargs="*", default=None, help="only these models")
    ap.add_argument("--out", default=CORPUS)
    ap.add_argument("--no-tensorflow", action="store_true", help="skip the Keras interface")
    ap.add_argument("--check", action="store_true", help="rebuild into a temporary folder, compare checksums")
    ap.add_argument("--inside", choices=["pnl", "mdf"], default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.inside == "pnl":
        run_pnl(args.names, os.path.join(args.out, "psyneulink"))
        return 0
    if args.inside == "mdf":
        sys.path.insert(0, HERE)
        import mdf_corpus_mdf

        return mdf_corpus_mdf.run(args.names, args.out, tensorflow=not args.no_tensorflow)
    rc = 0
    if args.check:  # rebuild elsewhere, compare with the committed files
        import tempfile

        committed, args.out = args.out, tempfile.mkdtemp(prefix="mdf-corpus-")
    passthrough = ["--out", args.out] + (["--names", *args.names] if args.names else [])
    if args.only in (None, "pnl"):
        # PsyNeuLink writes some metadata from sets: a fixed hash seed makes its files reproducible
        env = dict(os.environ, PYTHONHASHSEED="0")
        rc |= subprocess.call([pnl_python(), __file__, "--inside", "pnl", *passthrough], env=env)
    if args.only in (None, "mdf"):
        extra = ["--no-tensorflow"] if args.no_tensorflow else []
        rc |= subprocess.call([mdf_python(not args.no_tensorflow), __file__, "--inside", "mdf", *passthrough, *extra])
    if args.check:
        rc |= _compare(args.out, committed)
    return rc


def _compare(new: str, old: str) -> int:
    """sha256 of every rebuilt MDF file's canonical JSON (keys sorted: PsyNeuLink's order of conditions
    varies from run to run) against the committed one's; 1 if any differs or is missing."""
    bad = 0
    for sub in ("psyneulink", "modeci_mdf"):
        for name in sorted(os.listdir(os.path.join(new, sub))) if os.path.isdir(os.path.join(new, sub)) else []:
            if not name.endswith(".json") or name.endswith(".expected.json"):
                continue
            digests = []
            for root in (new, old):
                try:
                    with open(os.path.join(root, sub, name)) as f:
                        canonical = json.dumps(json.load(f), sort_keys=True)
                    digests.append(hashlib.sha256(canonical.encode()).hexdigest())
                except (OSError, ValueError):
                    digests.append(None)
            same = digests[0] == digests[1]
            bad |= not same
            print(f"{'same' if same else 'DIFFERS'} {sub}/{name}")
    return int(bad)


if __name__ == "__main__":
    raise SystemExit(main())
