"""The forked runner of the hostile-file suite (DESIGN.md, "Errors and bad input").

A case is a set of files (an ONNX model, an ncnn .param / .param.bin with its .bin, an MDF JSON / YAML
file) that is loaded and, when it loads, run on a small valid input. The outcome must be success or a
``StdopsError`` whose message names the file; never another exception, never a hang, never a giant
allocation, and the files are never modified.

Cases run in a forked child under ``RLIMIT_AS`` (a MemoryError anywhere means an allocation the input did
not justify), a per-case ``SIGALRM`` and a hard watchdog in the parent that kills a child stuck in C code;
a child that dies is a crash. The parent reads each child's peak resident memory (``wait4``).

``bounded(fn)`` runs one callable the same way and reports what it raised, how long it took and the memory
it reached: the hostile-case tests assert all three.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import resource
import select
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import stdops.ncnn as sn
import stdops.onnx as so
from stdops import limits
from stdops.errors import StdopsError

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "ncnn" / "fixtures"

#: per-case limits inside the forked child
ALARM_S = 4  # SIGALRM: a hang in Python code
WATCHDOG_S = 15  # the parent kills a child silent this long (a hang in C code)
ADDRESS_SPACE = 3 * 2**30  # RLIMIT_AS: a MemoryError under it is a giant allocation
#: stdops.limits inside the fuzzing child: a mutated file may ask for anything up to these, so they are what
#: bounds its memory (64 MiB of float32 per tensor, 256 MiB per value)
CHILD_LIMITS = dict(
    max_elements=2**24,
    max_bytes=2**28,
    max_loop_iterations=10_000,
    max_work=2**28,
    max_graph_nodes=200_000,
    max_yaml_nodes=200_000,
)
MAX_ELEMENTS = CHILD_LIMITS["max_elements"]
MAX_LOOP = CHILD_LIMITS["max_loop_iterations"]


# ====================================================================== the forked runner
@dataclasses.dataclass
class Case:
    label: str  # "<seed> <mutation>", for the report
    kind: str  # "onnx", "ncnn" or "mdf"
    files: dict[str, bytes]  # file name -> content (written to the case's folder)
    main: str  # the model file to load (a name in files)
    bin: str | None = None  # ncnn weights (a name in files)
    feeds: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)


class _Hang(BaseException):
    """Raised by SIGALRM: a BaseException so no `except Exception` in the loaders swallows it."""


def _chain(e: BaseException):
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _load_and_run(case: Case, main: str, folder: Path, stage: list[str]) -> str:
    """Load the case's model and run it on its feeds; returns the last stage reached (``stage[0]`` says
    where it is while it goes)."""
    if case.kind == "onnx":
        m = so.load(main)
        stage[0] = "run"
        feeds = _onnx_feeds(m, case.feeds)
        if feeds is None:
            return "loaded"
        m.run(feeds)
        return "ran"
    if case.kind == "ncnn":
        net = sn.Net.load(main, str(folder / case.bin) if case.bin else None)
        stage[0] = "run"
        feeds = {n: case.feeds[n] for n in net.input_names if n in case.feeds}
        if len(feeds) != len(net.input_names) or not feeds:
            return "loaded"
        net.run(feeds)
        return "ran"
    import stdops.mdf as mdf

    model = mdf.load(main)
    stage[0] = "run"
    for g in list(model.graphs)[:3]:
        sim = mdf.Simulation(model, graph=g, seed=0)
        sim.evaluate()
        sim.evaluate(0.01)
    return "ran"


def _check(case: Case, folder: Path) -> tuple[str | None, str]:
    """Load and run one case: (None if it behaved, else what went wrong; the outcome, for the tally)."""
    main = str(folder / case.main)
    names = [str(folder / n) for n in case.files]
    where = ["load"]
    try:
        return None, _load_and_run(case, main, folder, where)
    except _Hang:
        return f"hang (> {ALARM_S} s) at {where[0]}", "hang"
    except StdopsError as e:
        outcome = f"{type(e).__name__} at {where[0]}"
        mem = [x for x in _chain(e) if isinstance(x, MemoryError)]
        if mem:
            return f"giant allocation at {where[0]}: {type(e).__name__}: {str(e)[:300]}", outcome
        if not any(n in str(e) for n in names):
            return f"{type(e).__name__} at {where[0]} does not name the file: {str(e)[:300]}", outcome
        return None, outcome
    except BaseException as e:  # noqa: BLE001 - anything else is the bug we hunt
        tb = traceback.extract_tb(e.__traceback__)
        frames = [f"{Path(f.filename).name}:{f.lineno}" for f in tb if "/stdops/" in f.filename][-3:]
        return (
            f"{type(e).__name__} at {where[0]}: {str(e)[:300]} [{' <- '.join(reversed(frames))}]",
            f"{type(e).__name__} at {where[0]}",
        )


def _onnx_feeds(m, given: dict[str, np.ndarray]) -> dict | None:
    feeds = {}
    for vi in m.inputs:
        if vi.name in given:
            feeds[vi.name] = given[vi.name]
        elif (
            vi.kind == "tensor"
            and vi.dtype is not None
            and vi.shape is not None
            and all(isinstance(d, int) and 0 <= d <= 8 for d in vi.shape)
        ):
            feeds[vi.name] = np.ones(vi.shape, vi.dtype) if vi.dtype != object else np.full(vi.shape, "a", object)
        else:
            return None
    return feeds


def _child_setup() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, resource.getrlimit(resource.RLIMIT_AS)[1]))
    limits.configure(**CHILD_LIMITS)
    from stdops.mdf.scheduler import set_max_passes

    set_max_passes(2000)  # a damaged condition may never let a trial end

    def on_alarm(signum, frame):
        raise _Hang()

    signal.signal(signal.SIGALRM, on_alarm)
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")


def _child(cases: list[Case], start: int, root: Path, wfd: int) -> None:
    _child_setup()
    out = os.fdopen(wfd, "w", buffering=1)
    for i in range(start, len(cases)):
        out.write(json.dumps({"start": i}) + "\n")
        signal.alarm(ALARM_S)
        try:
            fail, outcome = _check(cases[i], root / f"case{i:05d}")
        except _Hang:
            fail, outcome = "hang (> alarm) while reporting", "hang"
        finally:
            signal.alarm(0)
        out.write(json.dumps({"done": i, "fail": fail, "outcome": outcome}) + "\n")
    out.close()


def run_cases(
    cases: list[Case], root: Path, tally: dict[str, int] | None = None, stats: dict[str, Any] | None = None
) -> list[tuple[Case, str]]:
    """Run every case in forked children; returns (case, failure) for the cases that misbehaved and
    counts each outcome ("ran", "loaded", "<error> at load|run", "hang") in ``tally``. ``stats`` gets the
    largest peak resident memory of a child (``peak_rss_mb``) and the number of children."""
    tally = {} if tally is None else tally
    stats = {} if stats is None else stats
    for i, c in enumerate(cases):
        d = root / f"case{i:05d}"
        d.mkdir(parents=True, exist_ok=True)
        for name, data in c.files.items():
            (d / name).write_bytes(data)
    failures: list[tuple[Case, str]] = []
    i = 0
    while i < len(cases):
        rfd, wfd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 0
            try:
                os.close(rfd)
                _child(cases, i, root, wfd)
            except BaseException:  # noqa: BLE001
                code = 3
            finally:
                os._exit(code)
        os.close(wfd)
        stats["children"] = stats.get("children", 0) + 1
        current, buf, done_all = i, b"", False
        with os.fdopen(rfd, "rb", buffering=0) as r:
            while True:
                ready, _, _ = select.select([r], [], [], WATCHDOG_S)
                if not ready:
                    os.kill(pid, signal.SIGKILL)
                    _reap(pid, stats)
                    failures.append((cases[current], f"hang (> {WATCHDOG_S} s, killed)"))
                    tally["hang"] = tally.get("hang", 0) + 1
                    i = current + 1
                    break
                chunk = r.read(65536)
                if not chunk:  # the child exited
                    status = _reap(pid, stats)
                    if current < len(cases) and not done_all:
                        failures.append((cases[current], f"crash: child exit status {status:#x}"))
                        tally["crash"] = tally.get("crash", 0) + 1
                    i = current + 1
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    msg = json.loads(line)
                    if "start" in msg:
                        current = msg["start"]
                    else:
                        tally[msg["outcome"]] = tally.get(msg["outcome"], 0) + 1
                        if msg["fail"]:
                            failures.append((cases[msg["done"]], msg["fail"]))
                        if msg["done"] == len(cases) - 1:
                            done_all = True
                        current = msg["done"] + 1
        if done_all:
            break
    for i, c in enumerate(cases):  # nothing a user loads is modified
        d = root / f"case{i:05d}"
        for name, data in c.files.items():
            if (d / name).read_bytes() != data:
                failures.append((c, f"{name} was modified"))
    return failures


def _reap(pid: int, stats: dict) -> int:
    _, status, usage = os.wait4(pid, 0)
    stats["peak_rss_mb"] = max(stats.get("peak_rss_mb", 0.0), usage.ru_maxrss / 1024)
    return status


def report(failures: list[tuple[Case, str]], n: int) -> str:
    lines = [f"{len(failures)} of {n} damaged models misbehaved:"]
    for c, f in failures[:40]:
        lines.append(f"  [{c.label}] {f}")
    return "\n".join(lines)


# ====================================================================== one bounded call
@dataclasses.dataclass
class Outcome:
    """What a callable did in a forked child: the exception it raised (type name, message, whether a
    StdopsError), or its result's repr; seconds taken; peak resident memory growth over the child's start."""

    error: str | None
    message: str
    stdops_error: bool
    seconds: float
    peak_mb: float
    result: Any = None

    def raised(self, cls: type, match: str | None = None) -> bool:
        import re

        return self.error == cls.__name__ and (match is None or re.search(match, self.message) is not None)


def bounded(fn: Callable[[], Any], seconds: float = 20.0, memory: int = ADDRESS_SPACE) -> Outcome:
    """Run ``fn()`` in a forked child under ``RLIMIT_AS = memory`` and a wall-clock cap of ``seconds``
    (the child is killed past it: the outcome's error is then "hang"). The defaults of stdops.limits are in
    force in the child unless ``fn`` changes them."""
    rfd, wfd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(rfd)
            resource.setrlimit(resource.RLIMIT_AS, (memory, resource.getrlimit(resource.RLIMIT_AS)[1]))
            warnings.simplefilter("ignore")
            start_rss = _rss_mb()
            t0 = time.perf_counter()
            try:
                res = fn()
                msg = {"error": None, "message": "", "stdops": False, "result": repr(res)[:2000]}
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                msg = {"error": type(e).__name__, "message": str(e)[:100_000], "stdops": isinstance(e, StdopsError)}
            msg["seconds"] = time.perf_counter() - t0
            msg["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - start_rss
            with os.fdopen(wfd, "wb") as w:
                w.write(pickle.dumps(msg))
        except BaseException:  # noqa: BLE001
            code = 3
        finally:
            os._exit(code)
    os.close(wfd)
    t0 = time.perf_counter()
    data = b""
    with os.fdopen(rfd, "rb", buffering=0) as r:
        while True:
            left = seconds - (time.perf_counter() - t0)
            ready, _, _ = select.select([r], [], [], max(left, 0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return Outcome("hang", f"still running after {seconds} s (killed)", False, seconds, float("nan"))
            chunk = r.read(1 << 20)
            if not chunk:
                break
            data += chunk
    _, status = os.waitpid(pid, 0)
    if not data:
        return Outcome("crash", f"child exit status {status:#x}", False, time.perf_counter() - t0, float("nan"))
    m = pickle.loads(data)
    return Outcome(m["error"], m["message"], m["stdops"], m["seconds"], m["peak_mb"], m.get("result"))


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0
