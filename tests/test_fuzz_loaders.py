"""Seeded fuzzing of the ONNX and ncnn loaders (DESIGN.md, "Errors and bad input").

Valid seed models (the bundled XOR model in both formats, the ncnn fixtures as text and binary .param,
small ONNX models with Conv, If, Loop, shape-from-value ops and initializers) are damaged by seeded
mutations: truncation, byte flips, insertions and deletions, duplicated / swapped / dropped .param
lines, huge numbers in counts, params and dims, wrong magic, and structured protobuf damage. Two
generators reach further than damage to a few seeds can: a one-layer ncnn net of every layer type with
random (often extreme) params and the weights they declare, and a one-node ONNX model of every operator
with random attributes and inputs. Each file is loaded and, when it loads, run on a small valid input.
The outcome must be success or a ``StdopsError`` whose message names the file; never another exception,
never a hang, never a giant allocation, and the file is never modified.

The cases run in a forked child under ``RLIMIT_AS`` (a MemoryError anywhere means an allocation the
input did not justify), a per-case ``SIGALRM`` and a hard watchdog in the parent that kills a child
stuck in C code; a child that dies is a crash. The regression tests at the end are the minimal
reproducers of the bugs the fuzzing found.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import resource
import select
import signal
import struct
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import stdops.ncnn as sn
import stdops.onnx as so
from stdops import limits
from stdops.errors import ModelFormatError, StdopsError
from stdops.ncnn import param as P
from stdops.ncnn.spec import RawArray, RawScalar

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "ncnn" / "fixtures"

#: per-case limits inside the forked child
ALARM_S = 4  # SIGALRM: a hang in Python code
WATCHDOG_S = 15  # the parent kills a child silent this long (a hang in C code)
ADDRESS_SPACE = 3 * 2**30  # RLIMIT_AS: a MemoryError under it is a giant allocation
MAX_ELEMENTS = 2**24  # stdops.limits inside the child: 64 MiB of float32 per tensor
MAX_LOOP = 10_000

HUGE_INTS = [2**31 - 1, -1, -(2**31), 10**12, 2**32, 10**9, 0, 65536]


# ====================================================================== the forked runner
@dataclasses.dataclass
class Case:
    label: str  # "<seed> <mutation>", for the report
    kind: str  # "onnx" or "ncnn"
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


def _check(case: Case, folder: Path) -> tuple[str | None, str]:
    """Load and run one case: (None if it behaved, else what went wrong; the outcome, for the tally)."""
    main = str(folder / case.main)
    names = [str(folder / n) for n in case.files]
    stage = "load"
    try:
        if case.kind == "onnx":
            m = so.load(main)
            stage = "run"
            feeds = _onnx_feeds(m, case.feeds)
            if feeds is not None:
                m.run(feeds)
                stage = "ran"
        else:
            net = sn.Net.load(main, str(folder / case.bin) if case.bin else None)
            stage = "run"
            feeds = {n: case.feeds[n] for n in net.input_names if n in case.feeds}
            if len(feeds) == len(net.input_names) and feeds:
                net.run(feeds)
                stage = "ran"
        return None, "ran" if stage == "ran" else "loaded"
    except _Hang:
        return f"hang (> {ALARM_S} s) at {stage}", "hang"
    except StdopsError as e:
        outcome = f"{type(e).__name__} at {stage}"
        mem = [x for x in _chain(e) if isinstance(x, MemoryError)]
        if mem:
            return f"giant allocation at {stage}: {type(e).__name__}: {str(e)[:300]}", outcome
        if not any(n in str(e) for n in names):
            return f"{type(e).__name__} at {stage} does not name the file: {str(e)[:300]}", outcome
        return None, outcome
    except BaseException as e:  # noqa: BLE001 - anything else is the bug we hunt
        tb = traceback.extract_tb(e.__traceback__)
        frames = [f"{Path(f.filename).name}:{f.lineno}" for f in tb if "/stdops/" in f.filename][-3:]
        return (
            f"{type(e).__name__} at {stage}: {str(e)[:300]} [{' <- '.join(reversed(frames))}]",
            f"{type(e).__name__} at {stage}",
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


def _child(cases: list[Case], start: int, root: Path, wfd: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, resource.getrlimit(resource.RLIMIT_AS)[1]))
    limits.set_max_elements(MAX_ELEMENTS)
    limits.set_max_loop_iterations(MAX_LOOP)

    def on_alarm(signum, frame):
        raise _Hang()

    signal.signal(signal.SIGALRM, on_alarm)
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    out = os.fdopen(wfd, "w", buffering=1)
    for i in range(start, len(cases)):
        out.write(json.dumps({"start": i}) + "\n")
        signal.alarm(ALARM_S)
        try:
            fail, outcome = _check(cases[i], root / f"case{i:04d}")
        except _Hang:
            fail, outcome = "hang (> alarm) while reporting", "hang"
        finally:
            signal.alarm(0)
        out.write(json.dumps({"done": i, "fail": fail, "outcome": outcome}) + "\n")
    out.close()


def run_cases(cases: list[Case], root: Path, tally: dict[str, int] | None = None) -> list[tuple[Case, str]]:
    """Run every case in forked children; returns (case, failure) for the cases that misbehaved and
    counts each outcome ("ran", "loaded", "<error> at load|run", "hang") in ``tally``."""
    tally = {} if tally is None else tally
    for i, c in enumerate(cases):
        d = root / f"case{i:04d}"
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
        current, buf, done_all = i, b"", False
        with os.fdopen(rfd, "rb", buffering=0) as r:
            while True:
                ready, _, _ = select.select([r], [], [], WATCHDOG_S)
                if not ready:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    failures.append((cases[current], f"hang (> {WATCHDOG_S} s, killed)"))
                    i = current + 1
                    break
                chunk = r.read(65536)
                if not chunk:  # the child exited
                    _, status = os.waitpid(pid, 0)
                    if current < len(cases) and not done_all:
                        failures.append((cases[current], f"crash: child exit status {status:#x}"))
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
        d = root / f"case{i:04d}"
        for name, data in c.files.items():
            if (d / name).read_bytes() != data:
                failures.append((c, f"{name} was modified"))
    return failures


def _report(failures: list[tuple[Case, str]], n: int) -> str:
    lines = [f"{len(failures)} of {n} damaged models misbehaved:"]
    for c, f in failures[:40]:
        lines.append(f"  [{c.label}] {f}")
    return "\n".join(lines)


# ====================================================================== byte mutations
def _rand_bytes(rng: random.Random, n: int) -> bytes:
    return bytes(rng.randrange(256) for _ in range(n))


def mutate_bytes(data: bytes, rng: random.Random, magic_len: int = 4) -> tuple[str, bytes]:
    """One generic damage to a file's bytes: (what was done, damaged bytes)."""
    n = len(data)
    kind = rng.choice(["truncate", "flip", "flip", "bitflip", "insert", "delete", "magic", "int32", "int32", "append"])
    if kind == "truncate":
        at = rng.randrange(n)
        return f"truncate@{at}", data[:at]
    if kind in ("flip", "bitflip"):
        b = bytearray(data)
        k = rng.randint(1, 8)
        where = []
        for _ in range(k):
            at = rng.randrange(n)
            b[at] = b[at] ^ (1 << rng.randrange(8)) if kind == "bitflip" else rng.randrange(256)
            where.append(at)
        return f"{kind}@{where}", bytes(b)
    if kind == "insert":
        at, k = rng.randrange(n + 1), rng.randint(1, 16)
        return f"insert{k}@{at}", data[:at] + _rand_bytes(rng, k) + data[at:]
    if kind == "delete":
        at = rng.randrange(n)
        k = rng.randint(1, min(16, n - at))
        return f"delete{k}@{at}", data[:at] + data[at + k :]
    if kind == "magic":
        return "wrong magic", _rand_bytes(rng, magic_len) + data[magic_len:]
    if kind == "append":
        return "append", data + _rand_bytes(rng, rng.randint(1, 64))
    # a little-endian int32 (aligned or not) replaced by a huge / negative value
    at = rng.randrange(max(n - 3, 1))
    v = rng.choice(HUGE_INTS)
    return f"int32={v}@{at}", data[:at] + struct.pack("<I", v & 0xFFFFFFFF) + data[at + 4 :]


# ====================================================================== ncnn seeds and mutations
@dataclasses.dataclass
class NcnnSeed:
    name: str
    param_text: bytes
    bin: bytes
    feeds: dict[str, np.ndarray]


def ncnn_seeds() -> list[NcnnSeed]:
    seeds = [
        NcnnSeed(
            "xor",
            (EXAMPLES / "xor_mlp.param").read_bytes(),
            (EXAMPLES / "xor_mlp.bin").read_bytes(),
            {"x": np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)},
        )
    ]
    for d in sorted(FIXTURES.iterdir()):
        if not (d / "model.param").exists():
            continue
        blobs = json.loads((d / "blobs.json").read_text())
        feeds = {n: np.load(d / f"in{k}.npy") for k, n in enumerate(blobs["inputs"])}
        seeds.append(NcnnSeed(d.name, (d / "model.param").read_bytes(), (d / "model.bin").read_bytes(), feeds))
    return seeds


_NUM = [
    "2147483647",
    "-1",
    "-2147483648",
    "1000000000000",
    "0",
    "99999",
    "1e400",
    "-1e400",
    "nan",
    "1.5",
    "1" + "0" * 400,
    "-23300",
    "abc",
    '"',
    "",
]


def mutate_param_text(text: bytes, rng: random.Random) -> tuple[str, bytes]:
    lines = text.decode().split("\n")
    body = [k for k in range(2, len(lines)) if lines[k].strip()]
    kind = rng.choice(["dup", "swap", "drop", "number", "number", "number", "token", "counts", "bytes"])
    if kind == "dup":
        k = rng.choice(body)
        lines.insert(k + 1, lines[k])
    elif kind == "swap":
        a, b = rng.choice(body), rng.choice(body)
        lines[a], lines[b] = lines[b], lines[a]
        kind = f"swap {a + 1},{b + 1}"
    elif kind == "drop":
        k = rng.choice(body)
        del lines[k]
        kind = f"drop line {k + 1}"
    elif kind in ("number", "token"):
        k = rng.choice(body)
        toks = lines[k].split()
        j = rng.randrange(len(toks))
        t = toks[j]
        if kind == "number" and "=" in t:  # a param value (or one element of an array)
            key, _, val = t.partition("=")
            vals = val.split(",")
            vals[rng.randrange(len(vals))] = rng.choice(_NUM)
            toks[j] = key + "=" + ",".join(vals)
        elif kind == "number" and rng.random() < 0.5:  # a param id
            toks[j] = f"{rng.choice(['-23300', '-23330', '31', '32', '-1', '2147483647', '1e3'])}={t.partition('=')[2]}"
        else:
            toks[j] = rng.choice(_NUM + ["0=0", "=", "=1", "1=", "x=1", "-23301=99999,1"])
        lines[k] = " ".join(toks)
        kind = f"{kind} line {k + 1} token {j}"
    elif kind == "counts":
        toks = lines[1].split()
        toks[rng.randrange(2)] = rng.choice(_NUM)
        lines[1] = " ".join(toks)
    else:
        return mutate_bytes(text, rng)
    return kind, "\n".join(lines).encode()


_PVALS = [
    2**31 - 1,
    -1,
    -(2**31),
    10**12,
    0,
    1,
    2,
    3,
    7,
    100,
    65535,
    -233,
    1.5,
    -1.0,
    float("inf"),
    float("nan"),
    1e30,
    10**400,
    2**40,
    [0],
    [-1, -1],
    [2**31 - 1, 1],
    [1, 2, 3, 4, 5, 6, 7, 8],
    [],
    [10**400],
]


def _text_value(v) -> str:
    if isinstance(v, list):
        return ",".join(_text_value(x) for x in v)
    if isinstance(v, float):
        return repr(v) if np.isfinite(v) else ("1e400" if v > 0 else "-1e400" if v < 0 else "nan")
    return str(v)


def mutate_param_value(text: bytes, rng: random.Random, binary: bool) -> tuple[str, bytes]:
    """Set one param of one layer (an existing id or any of 0..31) to an extreme value, keeping the file
    well formed: the damage reaches the layer declarations and adapters, not only the parser."""
    pf = P.parse_text(text.decode())
    L = rng.choice(pf.layers[1:] or pf.layers)
    pid = rng.choice(list(L.params)) if L.params and rng.random() < 0.7 else rng.randrange(32)
    v = rng.choice(_PVALS)
    what = f"layer {L.name} param {pid}={_text_value(v)[:20]}"
    if binary:
        if isinstance(v, int) and not -(2**31) <= v < 2**32 or isinstance(v, list) and any(abs(x) >= 2**31 for x in v):
            v = 2**31 - 1  # a .param.bin holds 4-byte values only
        if isinstance(v, list):
            L.params[pid] = RawArray(b"".join(struct.pack("<i", x) for x in v))
        elif isinstance(v, float):
            L.params[pid] = RawScalar(struct.pack("<f", v))
        else:
            L.params[pid] = RawScalar(struct.pack("<I", v & 0xFFFFFFFF))
        return what, P.write_binary(pf)
    lines = text.decode().split("\n")
    toks = lines[L.line - 1].split()
    head, params = toks[: 4 + len(L.bottoms) + len(L.tops)], toks[4 + len(L.bottoms) + len(L.tops) :]
    params = [t for t in params if t.partition("=")[0] not in (str(pid), str(-23300 - pid))]
    params.append(
        f"{-23300 - pid}={len(v)}{''.join(',' + _text_value(x) for x in v)}"
        if isinstance(v, list)
        else f"{pid}={_text_value(v)}"
    )
    lines[L.line - 1] = " ".join(head + params)
    return what, "\n".join(lines).encode()


def ncnn_cases(rng: random.Random, n_text: int, n_binary: int, n_bin: int) -> list[Case]:
    cases = []
    seeds = ncnn_seeds()
    for k in range(n_text + n_binary + n_bin):
        s = seeds[k % len(seeds)]
        text, binp, weights = s.param_text, P.write_binary(P.parse_text(s.param_text.decode())), s.bin
        if k < n_text:
            if rng.random() < 0.5:
                what, text = mutate_param_value(text, rng, binary=False)
            else:
                what, text = mutate_param_text(text, rng)
            files, main = {"model.param": text, "model.bin": weights}, "model.param"
        elif k < n_text + n_binary:
            if rng.random() < 0.5:
                what, binp = mutate_param_value(text, rng, binary=True)
            else:
                what, binp = mutate_bytes(binp, rng)
            files, main = {"model.param.bin": binp, "model.bin": weights}, "model.param.bin"
        else:
            what, weights = mutate_bytes(weights, rng)
            if rng.random() < 0.5:
                files, main = {"model.param": text, "model.bin": weights}, "model.param"
            else:
                files, main = {"model.param.bin": binp, "model.bin": weights}, "model.param.bin"
            what = "bin " + what
        feeds = s.feeds
        if main.endswith(".param.bin"):  # blobs are named by index in a .param.bin
            pf = P.parse_text(s.param_text.decode())
            index: dict[str, int] = {}
            for L in pf.layers:
                for b in (*L.bottoms, *L.tops):
                    index.setdefault(b, len(index))
            feeds = {str(index[n]): v for n, v in s.feeds.items()}
        cases.append(Case(f"{s.name} {main} {what}", "ncnn", files, main, "model.bin", feeds))
    return cases


_EXPR_OPS = {
    "+": 2,
    "-": 2,
    "*": 2,
    "//": 2,
    "/": 2,
    "max": 2,
    "min": 2,
    "pow": 2,
    "fmod": 2,
    "and": 2,
    "xor": 2,
    "lshift": 2,
    "rshift": 2,
    "abs": 1,
    "neg": 1,
    "square": 1,
    "trunc": 1,
    "ceil": 1,
    "floor": 1,
    "round": 1,
    "exp": 1,
    "log": 1,
    "sqrt": 1,
    "reciprocal": 1,
    "tanh": 1,
}


def _random_expr(rng: random.Random, depth: int) -> str:
    """A random ncnn shape expression (Reshape / Crop / Interp *_expr params)."""
    r = rng.random()
    if depth <= 0 or r < 0.3:
        return rng.choice(
            [
                f"{rng.randint(0, 2)}{rng.choice('whdcn')}",
                str(rng.choice(_INT_VALUES_EXPR)),
                rng.choice(["0.5", "-1", "1e30", "3.7"]),
            ]
        )
    op = rng.choice(sorted(_EXPR_OPS))
    return f"{op}({','.join(_random_expr(rng, depth - 1) for _ in range(_EXPR_OPS[op]))})"


_INT_VALUES_EXPR = [0, 1, 2, 3, -1, 31, 32, 64, 2147483647, -2147483648, 1000000]


def _random_param(kind: str, rng: random.Random):
    ints = [0, 1, 1, 2, 3, 4, -1, -2, -233, -234, 7, 16, 2**31 - 1, -(2**31), 10**9, 65536]
    floats = [0.0, 0.5, 1.0, -1.0, 2.0, 1e-6, 1e30, -1e30, float("inf"), float("nan")]
    if kind == "int":
        return rng.choice(ints) if rng.random() < 0.7 else rng.randint(-3, 12)
    if kind == "float":
        return rng.choice(floats)
    if kind == "str":
        if rng.random() < 0.6:
            return ",".join(_random_expr(rng, 3) for _ in range(rng.randint(1, 4)))
        return rng.choice(["a", "ij,jk->ik", "ii->i", "abc,", "x", "i->ii", "(", "+(0w", "9w", "0q"])
    n = rng.choice([0, 1, 2, 3, 4, 6, 8])
    return [_random_param(kind[:-1], rng) for _ in range(n)]


def random_layer_case(rng: random.Random, k: int, types: list[str] | None = None) -> Case:
    """A small net: Input, a Split, and one layer of a random type with random params (extreme values
    included) and weights of the sizes its params declare: the damage reaches every adapter and kernel."""
    from stdops.ncnn.modelbin import ModelBinWriter
    from stdops.ncnn.spec import LAYERS, resolve_params

    t = rng.choice(types or sorted(t for t in LAYERS if t != "Input"))
    spec = LAYERS[t]
    nb = spec.n_inputs if spec.n_inputs is not None else rng.randint(1, 3)
    nt = spec.n_outputs if spec.n_outputs is not None else rng.randint(1, 3)
    by_name = {p.name: p for p in spec.params}
    params = {}
    for p in spec.params:
        if rng.random() < 0.5:
            params[p.id] = _random_param(p.resolved_kind(by_name), rng)
    shape = tuple(rng.randint(1, 6) for _ in range(rng.randint(1, 4)))
    lines = ["7767517", ""]
    lines.append(f"Input in 0 1 data 0={shape[-1]}")
    bottoms = ["data"] if nb == 1 else [f"d{j}" for j in range(nb)]
    if nb > 1:
        lines.append(f"Split sp 1 {nb} data {' '.join(bottoms)}")
    tops = [f"y{j}" for j in range(nt)]
    toks = [t, "L", str(nb), str(nt), *bottoms, *tops]
    for pid, v in params.items():
        toks.append(
            f"{-23300 - pid}={len(v)}{''.join(',' + _text_value(x) for x in v)}"
            if isinstance(v, list)
            else f"{pid}={_text_value(v)}"
        )
    lines.append(" ".join(toks))
    lines[1] = f"{len(lines) - 2} {1 + (nb if nb > 1 else 0) + nt}"
    text = ("\n".join(lines) + "\n").encode()
    w = ModelBinWriter()
    try:
        resolved = resolve_params(spec, P.parse_text(text.decode()).layers[-1].params, "", None, nb, nt)
        for decl in spec.weights(resolved):
            n = int(decl.size)
            if not 0 <= n <= 200_000:
                raise ValueError
            w.write(np.random.default_rng(k).standard_normal(n).astype(np.float32), decl.tagged)
    except Exception:  # noqa: BLE001 - params the loader must refuse: give it a little junk to read
        w.write_raw_bytes(b"\0" * 4 * rng.randint(0, 8))
    x = np.random.default_rng(k).standard_normal(shape).astype(np.float32)
    what = f"{t} {nb}->{nt} params {dict((pid, _text_value(v)[:24]) for pid, v in params.items())} input {shape}"
    return Case(
        f"layer {what}",
        "ncnn",
        {"model.param": text, "model.bin": w.getvalue()},
        "model.param",
        "model.bin",
        {"data": x},
    )


# ====================================================================== ONNX seeds and mutations
def _vi(name, dtype=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    m = helper.make_model(
        helper.make_graph(nodes, "g", inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", opset)]
    )
    m.ir_version = 8
    return m


def onnx_seeds() -> list[tuple[str, onnx.ModelProto, dict[str, np.ndarray]]]:
    r = np.random.default_rng(0)
    xor = onnx.load_from_string((EXAMPLES / "xor_mlp.onnx").read_bytes())
    xor_in = xor.graph.input[0]
    dims = [d.dim_value or 4 for d in xor_in.type.tensor_type.shape.dim]
    xor_feed = {xor_in.name: np.ones(dims, helper.tensor_dtype_to_np_dtype(xor_in.type.tensor_type.elem_type))}

    conv = _model(
        [
            helper.make_node(
                "Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1], kernel_shape=[3, 3]
            ),
            helper.make_node("Relu", ["c"], ["r"], name="relu"),
            helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
            helper.make_node("Reshape", ["p", "shape"], ["f"], name="flat"),
            helper.make_node("Gemm", ["f", "G", "gb"], ["y"], name="fc", transB=1),
        ],
        [_vi("x", shape=[1, 2, 6, 6])],
        [_vi("y", shape=[1, 4])],
        [
            _init("W", r.standard_normal((3, 2, 3, 3)).astype(np.float32)),
            _init("B", r.standard_normal(3).astype(np.float32)),
            _init("shape", np.array([1, 27], np.int64)),
            _init("G", r.standard_normal((4, 27)).astype(np.float32)),
            _init("gb", np.zeros(4, np.float32)),
        ],
    )

    then_g = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["t"], name="then_add")],
        "then",
        [],
        [_vi("t")],
        [_init("one", np.float32(1))],
    )
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["e"], name="else_mul")], "else", [], [_vi("e")])
    iff = _model(
        [
            helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["cond"], name="gt"),
            helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g),
        ],
        [_vi("x", shape=[2, 3])],
        [_vi("y")],
        [_init("zero", np.float32(0))],
    )

    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"], name="keep"),
            helper.make_node("Cast", ["i"], ["fi"], name="cast", to=TensorProto.FLOAT),
            helper.make_node("Add", ["v_in", "fi"], ["v_out"], name="acc"),
            helper.make_node("Mul", ["v_out", "x"], ["scan"], name="scan"),
        ],
        "body",
        [_vi("i", TensorProto.INT64, []), _vi("c_in", TensorProto.BOOL, []), _vi("v_in")],
        [_vi("c_out", TensorProto.BOOL, []), _vi("v_out"), _vi("scan")],
    )
    loop = _model(
        [helper.make_node("Loop", ["M", "cond", "x"], ["v", "scans"], name="loop", body=body)],
        [_vi("x", shape=[3])],
        [_vi("v"), _vi("scans")],
        [_init("M", np.int64(3)), _init("cond", np.bool_(True))],
    )

    shapes = _model(
        [
            helper.make_node(
                "ConstantOfShape", ["cs"], ["z"], name="cos", value=numpy_helper.from_array(np.array([0.5], np.float32))
            ),
            helper.make_node("Expand", ["x", "es"], ["e"], name="expand"),
            helper.make_node("Add", ["e", "z"], ["a"], name="add"),
            helper.make_node("Tile", ["a", "reps"], ["t"], name="tile"),
            helper.make_node("Range", ["r0", "r1", "r2"], ["rg"], name="range"),
            helper.make_node("Pad", ["t", "pads"], ["pd"], name="pad"),
            helper.make_node("Gather", ["pd", "idx"], ["y"], name="gather", axis=1),
        ],
        [_vi("x", shape=[1, 3])],
        [_vi("y"), _vi("rg")],
        [
            _init("cs", np.array([2, 3], np.int64)),
            _init("es", np.array([2, 3], np.int64)),
            _init("reps", np.array([1, 2], np.int64)),
            _init("r0", np.float32(0)),
            _init("r1", np.float32(5)),
            _init("r2", np.float32(1)),
            _init("pads", np.array([0, 1, 0, 1], np.int64)),
            _init("idx", np.array([0, 2], np.int64)),
        ],
    )
    x23 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    return [
        ("xor", xor, xor_feed),
        ("conv", conv, {"x": r.standard_normal((1, 2, 6, 6)).astype(np.float32)}),
        ("if", iff, {"x": x23}),
        ("loop", loop, {"x": np.arange(3, dtype=np.float32)}),
        ("shapes", shapes, {"x": np.arange(3, dtype=np.float32).reshape(1, 3)}),
    ]


def _all_graphs(g: onnx.GraphProto):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from _all_graphs(a.g)
            for sg in a.graphs:
                yield from _all_graphs(sg)


def mutate_proto(m: onnx.ModelProto, rng: random.Random) -> str:
    """One structured damage to a model, in place: (what was done)."""
    graphs = list(_all_graphs(m.graph))
    g = rng.choice(graphs)
    kind = rng.choice(
        [
            "init_dims",
            "init_value",
            "init_value",
            "init_value",
            "attr_int",
            "attr_int",
            "attr_int",
            "opset",
            "elem_type",
            "input_dims",
            "swap_io",
            "drop_node",
            "dup_node",
            "op_type",
            "data_type",
        ]
    )
    huge = rng.choice(HUGE_INTS + [10**15, -(2**63), 2**63 - 1] + [-2, 2, 3, 5, 100] * 2)
    inits = [t for gg in graphs for t in gg.initializer]
    ints = [
        (n, a)
        for gg in graphs
        for n in gg.node
        for a in n.attribute
        if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS)
    ]
    if kind == "init_dims" and inits:
        t = rng.choice(inits)
        dims = list(t.dims) or [1]
        dims[rng.randrange(len(dims))] = huge
        del t.dims[:]
        t.dims.extend(dims)
        return f"initializer {t.name} dims={dims}"
    if kind == "init_value" and inits:
        t = rng.choice(inits)
        try:
            a = numpy_helper.to_array(t).copy()
        except Exception:  # noqa: BLE001 - already damaged by an earlier mutation
            return "none"
        if a.size:
            flat = a.reshape(-1)
            if a.dtype.kind in "iu":
                flat[rng.randrange(a.size)] = max(min(huge, np.iinfo(a.dtype).max), np.iinfo(a.dtype).min)
            elif a.dtype.kind == "f":
                flat[rng.randrange(a.size)] = rng.choice([np.inf, -np.inf, np.nan, 1e30, -1e30])
            elif a.dtype.kind == "b":
                flat[...] = not flat[0]
            t.CopyFrom(numpy_helper.from_array(a, t.name))
        return f"initializer {t.name} value"
    if kind == "attr_int" and ints:
        n, a = rng.choice(ints)
        if a.type == onnx.AttributeProto.INT:
            a.i = huge
        elif a.ints:
            a.ints[rng.randrange(len(a.ints))] = huge
        return f"node {n.name} attribute {a.name}={huge}"
    if kind == "opset":
        m.opset_import[0].version = rng.choice([-1, 0, 1, 2**31 - 1, 10**12, 5])
        return f"opset {m.opset_import[0].version}"
    if kind == "elem_type" and (g.input or g.output):
        vi = rng.choice(list(g.input) + list(g.output))
        vi.type.tensor_type.elem_type = rng.choice([0, 8, 16, 99, -1, 2**31 - 1])
        return f"value {vi.name} elem_type={vi.type.tensor_type.elem_type}"
    if kind == "input_dims" and g.input and g.input[0].type.tensor_type.shape.dim:
        d = rng.choice(list(g.input[0].type.tensor_type.shape.dim))
        d.dim_value = huge
        return f"input dims {huge}"
    if kind == "swap_io" and g.node:
        n = rng.choice(list(g.node))
        names, ni = list(n.input) + list(n.output), len(n.input)
        if len(names) >= 2:
            a, b = rng.sample(range(len(names)), 2)
            names[a], names[b] = names[b], names[a]
            del n.input[:], n.output[:]
            n.input.extend(names[:ni])
            n.output.extend(names[ni:])
        return f"swap names in {n.name}"
    if kind == "drop_node" and g.node:
        k = rng.randrange(len(g.node))
        del g.node[k]
        return f"drop node {k}"
    if kind == "dup_node" and g.node:
        k = rng.randrange(len(g.node))
        g.node.insert(k, g.node[k])
        return f"dup node {k}"
    if kind == "op_type" and g.node:
        n = rng.choice(list(g.node))
        n.op_type = rng.choice(
            [
                "Loop",
                "If",
                "Scan",
                "Conv",
                "Reshape",
                "Expand",
                "ConstantOfShape",
                "Tile",
                "Resize",
                "Split",
                "Slice",
                "Frob",
                "",
            ]
        )
        return f"node {n.name} op_type={n.op_type}"
    if kind == "data_type" and inits:
        t = rng.choice(inits)
        t.data_type = rng.choice([0, 8, 16, 99, 2**31 - 1])
        return f"initializer {t.name} data_type={t.data_type}"
    return "none"


def onnx_cases(rng: random.Random, n_bytes: int, n_proto: int) -> list[Case]:
    seeds = onnx_seeds()
    cases = []
    for k in range(n_bytes + n_proto):
        name, proto, feeds = seeds[k % len(seeds)]
        if k < n_bytes:
            what, data = mutate_bytes(proto.SerializeToString(), rng, magic_len=2)
        else:
            m = onnx.ModelProto()
            m.CopyFrom(proto)
            what = "; ".join(mutate_proto(m, rng) for _ in range(rng.randint(1, 2)))
            data = m.SerializeToString()
        cases.append(Case(f"{name} {what}", "onnx", {"model.onnx": data}, "model.onnx", None, feeds))
    return cases


_STRS = [
    "constant",
    "reflect",
    "edge",
    "wrap",
    "NOTSET",
    "SAME_UPPER",
    "SAME_LOWER",
    "VALID",
    "linear",
    "nearest",
    "cubic",
    "half_pixel",
    "asymmetric",
    "align_corners",
    "round_prefer_floor",
    "floor",
    "max",
    "avg",
    "mean",
    "sum",
    "none",
    "",
    "foo",
    "ij,jk->ik",
    "forward",
    "reverse",
    "bidirectional",
    "Relu",
    "Tanh",
    "Sigmoid",
    "DCR",
    "CRD",
    "bilinear",
    "zeros",
    "border",
    "reflection",
    "LEFT",
    "RIGHT",
    "NCHW",
]
_INT_VALUES = [0, 1, 2, 3, -1, -2, 4, 7, 2**31 - 1, -(2**31), 10**12, 2**62, 65536, 100]


def _onnx_ops() -> list[str]:
    from stdops.ops import _registry

    ops = sorted({k.split(":", 1)[1] for k in _registry.SPEC_INDEX if k.startswith("onnx:")})
    return [o for o in ops if o not in ("If", "Loop", "Scan", "Constant")]


def _random_attr(name: str, atype, rng: random.Random):
    A = onnx.AttributeProto
    if atype == A.INT:
        return helper.make_attribute(name, rng.choice(_INT_VALUES))
    if atype == A.INTS:
        return helper.make_attribute(
            name, [rng.choice(_INT_VALUES) for _ in range(rng.choice([0, 1, 2, 3, 4, 6, 8]))], attr_type=A.INTS
        )
    if atype == A.FLOAT:
        return helper.make_attribute(
            name, rng.choice([0.0, 0.5, 1.0, -1.0, 2.0, 1e-6, 1e30, float("inf"), float("nan")])
        )
    if atype == A.FLOATS:
        return helper.make_attribute(
            name, [rng.choice([0.0, 0.5, 1.0, -1.0, 1e30]) for _ in range(rng.randint(0, 4))], attr_type=A.FLOATS
        )
    if atype == A.STRING:
        return helper.make_attribute(name, rng.choice(_STRS))
    if atype == A.STRINGS:
        return helper.make_attribute(name, [rng.choice(_STRS) for _ in range(rng.randint(0, 3))], attr_type=A.STRINGS)
    if atype == A.TENSOR:
        return helper.make_attribute(
            name,
            numpy_helper.from_array(
                np.array(rng.choice([[1.0], [0], [2, 3], [0.5, -1.0]]), rng.choice([np.float32, np.int64]))
            ),
        )
    return None


def _random_input(type_strs: list[str], rng: random.Random, np_rng) -> np.ndarray:
    choices = []
    for ts in type_strs:
        ts = ts.replace("tensor(", "").rstrip(")")
        if ts in ("float", "int64", "int32", "bool", "uint8", "double", "float16", "int8"):
            choices.append(ts)
    dt = rng.choice(choices or ["float"])
    shape = tuple(rng.randint(1, 4) for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4])))
    if dt in ("int64", "int32", "int8", "uint8"):
        if rng.random() < 0.3:  # a shape / axes / pads / repeats input with extreme values
            vals = [rng.choice(_INT_VALUES) for _ in range(rng.randint(0, 4))]
            info = np.iinfo(np.dtype(dt if dt != "int64" else np.int64))
            return np.clip(np.array(vals, np.int64), info.min, info.max).astype(dt)
        return np_rng.integers(-3, 5, shape).astype(dt)
    if dt == "bool":
        return np_rng.random(shape) < 0.5
    return np_rng.standard_normal(shape).astype({"float": np.float32, "double": np.float64, "float16": np.float16}[dt])


def random_node_case(rng: random.Random, k: int, ops: list[str]) -> Case:
    """A one-node ONNX model: a random supported operator with random attributes (extreme values
    included) on small random inputs, some fed and some initializers."""
    from onnx import defs

    np_rng = np.random.default_rng(k)
    op = rng.choice(ops)
    opset = rng.choice([13, 17, 18, 21])
    try:
        schema = defs.get_schema(op, opset, "")
    except Exception:  # noqa: BLE001 - not defined at this opset: let the loader refuse it
        schema = None
    inputs, feeds, inits, attrs = [], {}, [], []
    if schema is not None:
        tc = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
        n_in = sum(1 for f in schema.inputs if f.option != f.option.Optional)
        n_in += rng.randint(0, len(schema.inputs) - n_in)
        if any(f.option == f.option.Variadic for f in schema.inputs):
            n_in = max(n_in, 1) + rng.randint(0, 2)
        for j in range(n_in):
            f = schema.inputs[min(j, len(schema.inputs) - 1)]
            if f.option == f.option.Optional and rng.random() < 0.2:
                inputs.append("")
                continue
            arr = _random_input(tc.get(f.type_str, [f.type_str]), rng, np_rng)
            name = f"in{j}"
            inputs.append(name)
            if rng.random() < 0.5:
                inits.append(numpy_helper.from_array(arr, name))
            else:
                feeds[name] = arr
        for a in schema.attributes.values():
            if a.required or rng.random() < 0.4:
                attr = _random_attr(a.name, a.type, rng)
                if attr is not None:
                    attrs.append(attr)
        n_out = max(1, len(schema.outputs) - (rng.randint(0, 1) if len(schema.outputs) > 1 else 0))
    else:
        n_in, n_out = 1, 1
        inputs, feeds = ["in0"], {"in0": np.ones(3, np.float32)}
    node = helper.make_node(op, inputs, [f"y{j}" for j in range(n_out)], name="n")
    node.attribute.extend(attrs)
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for n, v in feeds.items()],
        [helper.make_tensor_value_info(f"y{j}", 0, None) for j in range(n_out)],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    what = (
        f"{op} opset {opset} attrs {[(a.name, str(helper.get_attribute_value(a))[:30]) for a in attrs]} "
        f"inputs {[(n, v.dtype.name, v.shape if v.size > 4 else v.tolist()) for n, v in feeds.items()]} "
        f"inits {[(t.name, list(t.dims)) for t in inits]}"
    )
    return Case(f"node {what}", "onnx", {"model.onnx": m.SerializeToString()}, "model.onnx", None, feeds)


# ====================================================================== the fuzz tests
def _seeds_untouched():
    paths = [
        EXAMPLES / "xor_mlp.onnx",
        EXAMPLES / "xor_mlp.param",
        EXAMPLES / "xor_mlp.bin",
        *sorted(FIXTURES.glob("*/model.*")),
    ]
    return {p: p.read_bytes() for p in paths}


def test_seeds_load_and_run(tmp_path):
    """The unmutated seeds pass through the same harness (so the harness itself is sound)."""
    cases = [Case(n, "onnx", {"model.onnx": m.SerializeToString()}, "model.onnx", None, f) for n, m, f in onnx_seeds()]
    for s in ncnn_seeds():
        cases.append(
            Case(s.name, "ncnn", {"model.param": s.param_text, "model.bin": s.bin}, "model.param", "model.bin", s.feeds)
        )
    failures = run_cases(cases, tmp_path)
    assert not failures, _report(failures, len(cases))
    for c in cases:  # and they did load and run
        folder = tmp_path / f"case{cases.index(c):04d}"
        if c.kind == "onnx":
            m = so.load(folder / c.main)
            assert m.run(_onnx_feeds(m, c.feeds))
        else:
            net = sn.Net.load(folder / c.main, folder / c.bin)
            assert net.run(c.feeds)


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_onnx(seed, tmp_path):
    before = _seeds_untouched()
    cases = onnx_cases(random.Random(1000 + seed), n_bytes=130, n_proto=120)
    tally: dict[str, int] = {}
    failures = run_cases(cases, tmp_path, tally)
    print(f"onnx seed {seed}: {len(cases)} cases", dict(sorted(tally.items(), key=lambda kv: -kv[1])))
    assert not failures, _report(failures, len(cases))
    assert tally.get("ran", 0) >= len(cases) // 10  # the mutations reach the kernels, not only the parser
    assert _seeds_untouched() == before


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_ncnn(seed, tmp_path):
    before = _seeds_untouched()
    cases = ncnn_cases(random.Random(2000 + seed), n_text=110, n_binary=60, n_bin=50)
    tally: dict[str, int] = {}
    failures = run_cases(cases, tmp_path, tally)
    print(f"ncnn seed {seed}: {len(cases)} cases", dict(sorted(tally.items(), key=lambda kv: -kv[1])))
    assert not failures, _report(failures, len(cases))
    assert tally.get("ran", 0) >= len(cases) // 10
    assert _seeds_untouched() == before


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_ncnn_random_layers(seed, tmp_path):
    rng = random.Random(3000 + seed)
    cases = [random_layer_case(rng, 1000 * seed + k) for k in range(600)]
    tally: dict[str, int] = {}
    failures = run_cases(cases, tmp_path, tally)
    print(f"ncnn layers seed {seed}: {len(cases)} cases", dict(sorted(tally.items(), key=lambda kv: -kv[1])))
    assert not failures, _report(failures, len(cases))
    assert tally.get("ran", 0) >= len(cases) // 10


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_onnx_random_nodes(seed, tmp_path):
    rng, ops = random.Random(4000 + seed), _onnx_ops()
    cases = [random_node_case(rng, 1000 * seed + k, ops) for k in range(500)]
    tally: dict[str, int] = {}
    failures = run_cases(cases, tmp_path, tally)
    print(f"onnx nodes seed {seed}: {len(cases)} cases", dict(sorted(tally.items(), key=lambda kv: -kv[1])))
    assert not failures, _report(failures, len(cases))
    assert tally.get("ran", 0) >= len(cases) // 10


def test_harness_catches_what_it_should(tmp_path):
    """The runner reports a foreign exception, a hang and a giant allocation (it is not vacuous)."""

    class Bad(Case):
        pass

    global _check
    real = _check
    try:

        def fake(case, folder):
            if case.label == "raise":
                raise_it = {}
                raise_it["missing"]  # KeyError
            if case.label == "hang":
                while True:
                    pass
            if case.label == "alloc":
                try:
                    np.ones(2**40, np.uint8)
                except MemoryError:
                    return "giant allocation", "x"
            return real(case, folder)

        _check = fake
        cases = [Case(lbl, "onnx", {"m.onnx": b""}, "m.onnx") for lbl in ("raise", "hang", "alloc")]
        got = {c.label: f for c, f in run_cases(cases, tmp_path)}
    finally:
        _check = real
    assert set(got) == {"hang", "alloc", "raise"}, got
    assert "hang" in got["hang"] and "giant" in got["alloc"]


# ====================================================================== regressions: what the fuzzing found
def _net_case(label: str, param: str, x: np.ndarray, bin_data: bytes = b"") -> Case:
    return Case(
        label, "ncnn", {"model.param": param.encode(), "model.bin": bin_data}, "model.param", "model.bin", {"data": x}
    )


def _onnx_case(label: str, m: onnx.ModelProto, feeds=None) -> Case:
    return Case(label, "onnx", {"model.onnx": m.SerializeToString()}, "model.onnx", None, feeds or {})


def _behaves_then(case: Case, tmp_path: Path, error, match: str | None = None, run: bool = True):
    """The case passes the forked harness (no crash, hang or giant allocation), then, in this process under
    the harness's element limit, raises ``error`` naming the file (and matching ``match``)."""
    failures = run_cases([case], tmp_path / "fork")
    assert not failures, _report(failures, 1)
    folder = tmp_path / "direct"
    folder.mkdir()
    for name, data in case.files.items():
        (folder / name).write_bytes(data)
    old = limits.set_max_elements(MAX_ELEMENTS)
    try:
        with pytest.raises(error, match=match) as e:
            if case.kind == "onnx":
                m = so.load(folder / case.main)
                if run:
                    m.run(case.feeds)
            else:
                net = sn.Net.load(folder / case.main, folder / case.bin)
                if run:
                    net.run(case.feeds)
    finally:
        limits.set_max_elements(old)
    assert str(folder / case.main) in str(e.value) or str(folder / "model.bin") in str(e.value), str(e.value)
    return e.value


def test_onnx_initializer_with_huge_dims_and_tiny_data_is_refused(tmp_path):
    """Bug: the element-limit check raised a ResourceLimitError that named neither file nor data problem.
    Dims of 10**12 elements over 4 bytes of data are a corrupt tensor: a ModelFormatError naming both."""
    t = numpy_helper.from_array(np.ones(1, np.float32), "w")
    del t.dims[:]
    t.dims.append(10**12)
    m = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_vi("x", shape=[1])], [_vi("y")], [t])
    err = _behaves_then(
        _onnx_case("huge dims", m),
        tmp_path,
        ModelFormatError,
        r"initializer 'w'.*1000000000000 "
        r"elements.*holds at most 16",
        run=False,
    )
    assert "corrupt" in str(err)


def test_onnx_initializer_with_negative_dims_is_a_format_error(tmp_path):
    t = numpy_helper.from_array(np.ones((1, 2), np.float32), "w")
    t.dims[0] = -1
    m = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [_vi("x", shape=[2])], [_vi("y")], [t])
    _behaves_then(_onnx_case("negative dims", m), tmp_path, ModelFormatError, r"initializer 'w'.*negative", run=False)


def test_onnx_initializer_over_the_limit_with_real_data_names_the_file(tmp_path):
    m = _model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add")],
        [_vi("x", shape=[1])],
        [_vi("y")],
        [_init("w", np.ones(MAX_ELEMENTS + 1, np.float32))],
    )
    from stdops.errors import ResourceLimitError

    _behaves_then(_onnx_case("big initializer", m), tmp_path, ResourceLimitError, "initializer 'w'", run=False)


def test_onnx_unknown_elem_type_of_a_graph_input_names_file_and_input(tmp_path):
    """Bug: ModelFormatError(None, None, 'unknown tensor data type'): neither file nor input named."""
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", shape=[2])], [_vi("y")])
    m.graph.input[0].type.tensor_type.elem_type = 2**31 - 1
    _behaves_then(
        _onnx_case("elem_type", m),
        tmp_path,
        ModelFormatError,
        r"graph input 'x'.*unknown tensor data "
        r"type",
        run=False,
    )


def test_onnx_unknown_elem_type_in_a_loop_body_names_file_and_node(tmp_path):
    """Bug: the Loop adapter's scan-output dtype error named no file (found as 'loop value scan elem_type')."""
    _, loop, feeds = onnx_seeds()[3]
    m = onnx.ModelProto()
    m.CopyFrom(loop)
    m.graph.node[0].attribute[0].g.output[2].type.tensor_type.elem_type = 2**31 - 1
    _behaves_then(
        _onnx_case("loop elem_type", m, feeds),
        tmp_path,
        ModelFormatError,
        r"node 'loop' \(Loop-1\): unknown tensor data type",
        run=False,
    )


def test_onnx_loop_iteration_cap_names_file_and_node(tmp_path):
    """Bug: the Loop iteration cap's ResourceLimitError passed through the plan without file or node."""
    from stdops.errors import ResourceLimitError

    _, loop, feeds = onnx_seeds()[3]
    m = onnx.ModelProto()
    m.CopyFrom(loop)
    m.graph.initializer[0].CopyFrom(_init("M", np.int64(2**62)))
    old = limits.set_max_loop_iterations(50)
    try:
        _behaves_then(
            _onnx_case("loop cap", m, feeds),
            tmp_path,
            ResourceLimitError,
            r"node 'loop' \(Loop\): Loop ran 50 iterations",
        )
    finally:
        limits.set_max_loop_iterations(old)


def test_onnx_conv_with_huge_pads_is_refused_before_allocating(tmp_path):
    """Bug: the shared pad_input of Conv / pooling allocated whatever the pads asked (4 TiB here)."""
    from stdops.errors import ResourceLimitError

    m = _model(
        [helper.make_node("Conv", ["x", "W"], ["y"], name="conv", pads=[0, 2**31 - 1, 0, 0])],
        [_vi("x", shape=[1, 1, 3, 3])],
        [_vi("y")],
        [_init("W", np.ones((1, 1, 1, 1), np.float32))],
    )
    _behaves_then(
        _onnx_case("conv pads", m, {"x": np.ones((1, 1, 3, 3), np.float32)}),
        tmp_path,
        ResourceLimitError,
        r"node 'conv' \(Conv\).*padded input",
    )


XOR_PARAM = (EXAMPLES / "xor_mlp.param").read_text()
XOR_BIN = (EXAMPLES / "xor_mlp.bin").read_bytes()


@pytest.mark.parametrize(
    "old,new,match",
    [
        (
            "Softmax                  softmax                  1 1 logits probabilities 0=1 1=1",
            "Clip clip 1 1 logits probabilities 0=1" + "0" * 400,
            r"layer 'clip' \(Clip\): param 0 \(min\)",
        ),
        (
            "2=4 9=1",
            "2=4 9=1 -23310=2,1," + "1" + "0" * 400,
            r"layer 'layer1' \(InnerProduct\): param 10 \(activation_params\)",
        ),
    ],
    ids=["scalar", "array"],
)
def test_ncnn_float_param_beyond_any_float_is_a_format_error(old, new, match, tmp_path):
    """Bug: OverflowError (int too large to convert to float) from spec._convert."""
    text = XOR_PARAM.replace(old, new, 1)
    case = Case(
        "float",
        "ncnn",
        {"model.param": text.encode(), "model.bin": XOR_BIN},
        "model.param",
        "model.bin",
        {"x": np.ones((4, 2), np.float32)},
    )
    _behaves_then(
        case, tmp_path, ModelFormatError, match + ": a 401-digit number is outside the float range", run=False
    )


def test_ncnn_int_param_outside_int32_is_a_format_error(tmp_path):
    text = XOR_PARAM.replace("0=1 1=1\n", "0=99999999999 1=1\n")
    case = Case(
        "softmax",
        "ncnn",
        {"model.param": text.encode(), "model.bin": XOR_BIN},
        "model.param",
        "model.bin",
        {"x": np.ones((4, 2), np.float32)},
    )
    _behaves_then(
        case, tmp_path, ModelFormatError, r"param 0 \(axis\): 99999999999 is outside the int32 range", run=False
    )


def _one_layer(layer: str, nbottom: int = 1) -> str:
    if nbottom == 1:
        return f"7767517\n2 2\nInput in 0 1 data\n{layer}\n"
    return f"7767517\n3 4\nInput in 0 1 data\nSplit sp 1 2 data d0 d1\n{layer}\n"


def test_ncnn_convolution_with_huge_pad_is_refused_before_allocating(tmp_path):
    from stdops.errors import ResourceLimitError

    w = struct.pack("<I", 0) + np.ones(1, np.float32).tobytes()
    case = _net_case(
        "conv pad", _one_layer("Convolution L 1 1 data y 0=1 1=1 6=1 14=2147483647"), np.ones((1, 3, 3), np.float32), w
    )
    _behaves_then(case, tmp_path, ResourceLimitError, r"node 'L' \(Convolution\).*padded input")


def test_ncnn_diag_with_int_min_offset_does_not_crash(tmp_path):
    """Bug: numpy's diagonal segfaults on offset -2**31; Diag now clamps the offset (empty diagonal)."""
    case = _net_case("diag", _one_layer("Diag L 1 1 data y 0=-2147483648"), np.ones((2, 4), np.float32))
    assert not run_cases([case], tmp_path), "Diag crashed"
    net = sn.Net.from_bytes(_one_layer("Diag L 1 1 data y 0=-2147483648"))
    assert net.run({"data": np.ones((2, 4), np.float32)})["y"].shape == (0,)
    net = sn.Net.from_bytes(_one_layer("Diag L 1 1 data y 0=2147483647"))
    assert net.run({"data": np.ones((2, 4), np.float32)})["y"].shape == (0,)
    net = sn.Net.from_bytes(_one_layer("Diag L 1 1 data y 0=-1"))
    np.testing.assert_array_equal(net.run({"data": np.arange(8, dtype=np.float32).reshape(2, 4)})["y"], [4])


@pytest.mark.parametrize(
    "layer,x",
    [
        ("Diag L 1 1 data y 0=1000000000", (3,)),
        ("Packing L 1 1 data y 0=2147483647 1=1", (2, 2, 5, 6)),
        ("ROIPooling L 2 1 d0 d1 y 0=12 1=2147483647", (3, 4, 3)),
        ("ROIAlign L 2 1 d0 d1 y 0=2147483647 1=1 5=1", (1, 6, 3)),
        ("ROIAlign L 2 1 d0 d1 y 0=2 1=2147483647", (1, 6, 4)),
        ("ROIAlign L 2 1 d0 d1 y 0=2 1=2 3=65536", (1, 6, 4)),
        ("Pooling L 1 1 data y 0=0 7=1 8=1000000000", (4, 2)),
        ("Pooling3D L 1 1 data y 0=0 7=1 8=1000000000", (2, 2, 4, 1)),
        ("Padding L 1 1 data y 0=1 3=2147483647 6=11", (1, 3, 3)),
    ],
)
def test_ncnn_layers_refuse_giant_outputs(layer, x, tmp_path):
    """Bugs: these layers allocated what their params asked (MemoryError under RLIMIT_AS)."""
    from stdops.errors import ResourceLimitError

    nb = int(layer.split()[2])
    bin_data = np.arange(11, dtype=np.float32).tobytes() if "6=11" in layer else b""
    case = _net_case(layer, _one_layer(layer, nb), np.ones(x, np.float32), bin_data)
    _behaves_then(case, tmp_path, ResourceLimitError, r"node 'L' \(\w+\): \w+ \w+( \w+)?: shape")


def test_ncnn_roialign_pooled_size_zero_is_refused(tmp_path):
    """Bug: pooled_width 0 with pooled_height 10**9 looped a billion times over empty rows (a hang)."""
    case = _net_case(
        "roialign", _one_layer("ROIAlign L 2 1 d0 d1 y 0=0 1=1000000000 3=65536", 2), np.ones((5, 5, 2), np.float32)
    )
    _behaves_then(case, tmp_path, ModelFormatError, "pooled size must be positive", run=False)


@pytest.mark.parametrize(
    "layer", ["Spectrogram L 1 1 data y 0=2147483647", "InverseSpectrogram L 1 1 data y 0=1000000000 3=12"]
)
def test_ncnn_spectrogram_window_is_refused_at_load_naming_file_and_layer(layer, tmp_path):
    """Bugs: a 2**31-sample window allocated at load, and the limit error named neither file nor layer."""
    from stdops.errors import ResourceLimitError

    case = _net_case(layer, _one_layer(layer), np.ones(8, np.float32))
    _behaves_then(case, tmp_path, ResourceLimitError, r"line 4 layer 'L' \(\w+\): Spectrogram window", run=False)


def test_ncnn_expression_lshift_by_a_huge_count_is_cheap():
    """Bug: lshift(1, 2147483647) built a 2**31-bit Python int (256 MiB, seconds) before the int32 wrap."""
    import time

    from stdops.ncnn.expr import parse

    t = time.perf_counter()
    assert parse("lshift(1,2147483647),lshift(3,31),lshift(1,4),lshift(1,-1)").eval([np.ones((2, 3), np.float32)]) == [
        0,
        -(2**31),
        16,
        0,
    ]
    assert time.perf_counter() - t < 0.5
    with pytest.raises(ValueError, match="not a finite number"):  # was an OverflowError
        parse("ceil(exp(1e30))").eval([np.ones(2, np.float32)])


def test_fuzz_ncnn_shape_expressions(tmp_path):
    """Random shape expressions in the layers that take them (Reshape, Crop, Interp)."""
    rng = random.Random(5000)
    cases = [random_layer_case(rng, k, ["Reshape", "Crop", "Interp"]) for k in range(300)]
    tally: dict[str, int] = {}
    failures = run_cases(cases, tmp_path, tally)
    print("ncnn expressions: 300 cases", dict(sorted(tally.items(), key=lambda kv: -kv[1])))
    assert not failures, _report(failures, len(cases))
