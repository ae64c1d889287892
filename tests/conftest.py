"""Suite-wide hooks. The ncnn differential suite's count: how many randomized cases each layer type ran through
the official wheel. Printed at the end of every run that includes tests/ncnn; when the whole folder ran with the wheel
installed, every layer the wheel provides must have at least MIN_CASES cases (issue 5's bar)."""

from __future__ import annotations

import collections
import glob
import json
import os
import tempfile

import pytest

from stdops.ncnn.spec import LAYERS
from stdops.ops import _fast

from .ncnn import wheel

MIN_CASES = 20
#: compiled out of the wheel: tested against NumPy references instead
NOT_IN_WHEEL = {"ArgMax", "SPP"}


@pytest.fixture(params=[True, False], ids=["compiled", "numpy"])
def kernels(request):
    """Each test twice: with the compiled kernels (the ``fast`` extra; skipped where numba is absent) and with the
    NumPy ones only."""
    if request.param and _fast.numba is None:
        pytest.skip("numba (the optional 'fast' extra) is not installed")
    prev = _fast.set_enabled(request.param)
    yield request.param
    _fast.set_enabled(prev)


_HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ncnn")
_ENV = "STDOPS_NCNN_COUNT_DIR"


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controlling process (or a run without xdist)
        os.environ[_ENV] = tempfile.mkdtemp(prefix="stdops-ncnn-counts-")


def pytest_sessionfinish(session, exitstatus):
    d = os.environ.get(_ENV)
    if not d or not os.path.isdir(d):
        return
    with open(os.path.join(d, f"counts-{os.getpid()}.json"), "w") as f:
        json.dump(dict(wheel.COUNTS), f)
    config = session.config
    if hasattr(config, "workerinput"):
        return
    counts: collections.Counter = collections.Counter()
    for path in glob.glob(os.path.join(d, "counts-*.json")):
        with open(path) as f:
            counts.update(json.load(f))
    if not counts:
        return
    expected = sorted(set(LAYERS) - NOT_IN_WHEEL)
    short = [(t, counts.get(t, 0)) for t in expected if counts.get(t, 0) < MIN_CASES]
    total = sum(counts[t] for t in counts if t in LAYERS and t != "Input")
    whole = _whole_folder_ran(config)
    config._stdops_ncnn_summary = (
        f"ncnn differential suite: {len(expected) - len(short)} of {len(expected)} wheel layers with >= "
        f"{MIN_CASES} randomized cases; {total} cases through the wheel; fewest: "
        f"{min((counts.get(t, 0) for t in expected), default=0)}"
        + (f"; below {MIN_CASES}: {', '.join(f'{t}={n}' for t, n in short)}" if short and whole else "")
        + ("" if whole else " (a partial run: the bar applies when tests/ncnn runs whole)")
    )
    if short and wheel.available() and whole:
        session.exitstatus = 1
        config._stdops_ncnn_summary = "FAILED " + config._stdops_ncnn_summary


def _whole_folder_ran(config) -> bool:
    ran = [os.path.abspath(str(a).split("::")[0]) for a in config.args]
    tests_root = os.path.dirname(_HERE)
    return any(r in (_HERE, tests_root, os.path.dirname(tests_root)) for r in ran)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    line = getattr(config, "_stdops_ncnn_summary", None)
    if line:
        terminalreporter.write_line(line, red=line.startswith("FAILED"))
