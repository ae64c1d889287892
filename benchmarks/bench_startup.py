"""Start-up: the import time of `stdops` and `stdops.onnx`, and the wall time of `stdops --help` and
`stdops info` on the bundled models (median of several fresh processes).

    python benchmarks/bench_startup.py [--repeat 7]

Each figure is a fresh interpreter, so it includes Python's own start (printed first, for reference).
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).with_name("stdops")


def _wall(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, cwd=ROOT)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _import_us(module: str, repeat: int) -> float:
    """Cumulative import time of ``module`` from ``python -X importtime`` (microseconds, median)."""
    values = []
    for _ in range(repeat):
        r = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True
        )
        for line in r.stderr.splitlines():
            m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\s*)(\S+)$", line)
            if m and m.group(3) == module and not m.group(2):
                values.append(int(m.group(1)))
    return statistics.median(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    print(f"python -c pass:                 {_wall([sys.executable, '-c', 'pass'], a.repeat) * 1e3:7.0f} ms")
    # stdops.onnx is lazy; stdops.onnx.model is what loading an ONNX model imports (the onnx package, kernels)
    for module in ("stdops", "stdops.cli", "stdops.onnx", "stdops.onnx.model", "stdops.ncnn", "stdops.mdf"):
        print(f"import {module + ':':24s} {_import_us(module, a.repeat) / 1e3:7.0f} ms (python -X importtime)")
    cmds = {
        "stdops --help": [str(SCRIPT), "--help"],
        "stdops --version": [str(SCRIPT), "--version"],
        "stdops info xor_mlp.onnx": [str(SCRIPT), "info", "examples/xor_mlp.onnx"],
        "stdops info xor_mlp.param": [str(SCRIPT), "info", "examples/xor_mlp.param"],
        "stdops info mdf/network.json": [str(SCRIPT), "info", "examples/mdf/network.json"],
    }
    for label, cmd in cmds.items():
        print(f"{label + ':':31s} {_wall(cmd, a.repeat) * 1e3:7.0f} ms (wall, fresh process)")


if __name__ == "__main__":
    main()
