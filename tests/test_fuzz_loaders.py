"""Seeded fuzzing of the ONNX and ncnn loaders (DESIGN.md, "Errors and bad input").

Valid seed models (the bundled XOR model in both formats, the ncnn fixtures as text and binary .param,
small ONNX models with Conv, If, Loop, shape-from-value ops and initializers) are damaged by seeded
mutations: truncation, byte flips, insertions and deletions, duplicated / swapped / dropped .param
lines, huge numbers in counts, params and dims, wrong magic, and structured protobuf damage. Each
damaged file is loaded and, when it loads, run on a small valid input. The outcome must be success or a
``StdopsError`` whose message names the file; never another exception, never a hang, never a giant
allocation, and the file is never modified.

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

import stdops
import stdops.ncnn as sn
import stdops.onnx as so
from stdops import limits
from stdops.errors import ModelFormatError, StdopsError
from stdops.ncnn import param as P

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
FIXTURES = ROOT / "tests" / "ncnn" / "fixtures"

#: per-case limits inside the forked child
ALARM_S = 4  # SIGALRM: a hang in Python code
WATCHDOG_S = 15  # the parent kills a child silent this long (a hang in C code)
ADDRESS_SPACE = 3 * 2**30  # RLIMIT_AS: a MemoryError under it is a giant allocation
MAX_ELEMENTS = 2**24  # stdops.limits inside the child: 64 MiB of float32 per tensor
MAX_LOOP = 10_000

HUGE_INTS = [2**31 - 1, -1, -2**31, 10**12, 2**32, 10**9, 0, 65536]


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


def _check(case: Case, folder: Path) -> str | None:
    """Load and run one case; None if it behaved, else what went wrong."""
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
        else:
            net = sn.Net.load(main, str(folder / case.bin) if case.bin else None)
            stage = "run"
            feeds = {n: case.feeds[n] for n in net.input_names if n in case.feeds}
            if len(feeds) == len(net.input_names) and feeds:
                net.run(feeds)
        return None
    except _Hang:
        return f"hang (> {ALARM_S} s) at {stage}"
    except StdopsError as e:
        mem = [x for x in _chain(e) if isinstance(x, MemoryError)]
        if mem:
            return f"giant allocation at {stage}: {type(e).__name__}: {str(e)[:300]}"
        if not any(n in str(e) for n in names):
            return f"{type(e).__name__} at {stage} does not name the file: {str(e)[:300]}"
        return None
    except BaseException as e:  # noqa: BLE001 - anything else is the bug we hunt
        tb = traceback.extract_tb(e.__traceback__)
        frames = [f"{Path(f.filename).name}:{f.lineno}" for f in tb if "/stdops/" in f.filename][-3:]
        return f"{type(e).__name__} at {stage}: {str(e)[:300]} [{' <- '.join(reversed(frames))}]"


def _onnx_feeds(m, given: dict[str, np.ndarray]) -> dict | None:
    feeds = {}
    for vi in m.inputs:
        if vi.name in given:
            feeds[vi.name] = given[vi.name]
        elif vi.kind == "tensor" and vi.dtype is not None and vi.shape is not None and \
                all(isinstance(d, int) and 0 <= d <= 8 for d in vi.shape):
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
            fail = _check(cases[i], root / f"case{i:04d}")
        except _Hang:
            fail = "hang (> alarm) while reporting"
        finally:
            signal.alarm(0)
        out.write(json.dumps({"done": i, "fail": fail}) + "\n")
    out.close()


def run_cases(cases: list[Case], root: Path) -> list[tuple[Case, str]]:
    """Run every case in forked children; returns (case, failure) for the cases that misbehaved."""
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
    kind = rng.choice(["truncate", "flip", "flip", "bitflip", "insert", "delete", "magic", "int32", "int32",
                       "append"])
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
        return f"delete{k}@{at}", data[:at] + data[at + k:]
    if kind == "magic":
        return "wrong magic", _rand_bytes(rng, magic_len) + data[magic_len:]
    if kind == "append":
        return "append", data + _rand_bytes(rng, rng.randint(1, 64))
    # a little-endian int32 (aligned or not) replaced by a huge / negative value
    at = rng.randrange(max(n - 3, 1))
    v = rng.choice(HUGE_INTS)
    return f"int32={v}@{at}", data[:at] + struct.pack("<I", v & 0xFFFFFFFF) + data[at + 4:]


# ====================================================================== ncnn seeds and mutations
@dataclasses.dataclass
class NcnnSeed:
    name: str
    param_text: bytes
    bin: bytes
    feeds: dict[str, np.ndarray]


def ncnn_seeds() -> list[NcnnSeed]:
    seeds = [NcnnSeed("xor", (EXAMPLES / "xor_mlp.param").read_bytes(), (EXAMPLES / "xor_mlp.bin").read_bytes(),
                      {"x": np.array([[0, 0], [0, 1], [1, 0], [1, 1]], np.float32)})]
    for d in sorted(FIXTURES.iterdir()):
        if not (d / "model.param").exists():
            continue
        blobs = json.loads((d / "blobs.json").read_text())
        feeds = {n: np.load(d / f"in{k}.npy") for k, n in enumerate(blobs["inputs"])}
        seeds.append(NcnnSeed(d.name, (d / "model.param").read_bytes(), (d / "model.bin").read_bytes(), feeds))
    return seeds


_NUM = ["2147483647", "-1", "-2147483648", "1000000000000", "0", "99999", "1e400", "-1e400", "nan", "1.5",
        "1" + "0" * 400, "-23300", "abc", '"', ""]


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


def ncnn_cases(rng: random.Random, n_text: int, n_binary: int, n_bin: int) -> list[Case]:
    cases = []
    seeds = ncnn_seeds()
    for k in range(n_text + n_binary + n_bin):
        s = seeds[k % len(seeds)]
        text, binp, weights = s.param_text, P.write_binary(P.parse_text(s.param_text.decode())), s.bin
        if k < n_text:
            what, text = mutate_param_text(text, rng)
            files, main = {"model.param": text, "model.bin": weights}, "model.param"
        elif k < n_text + n_binary:
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


# ====================================================================== ONNX seeds and mutations
def _vi(name, dtype=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def onnx_seeds() -> list[tuple[str, onnx.ModelProto, dict[str, np.ndarray]]]:
    r = np.random.default_rng(0)
    xor = onnx.load_from_string((EXAMPLES / "xor_mlp.onnx").read_bytes())
    xor_in = xor.graph.input[0]
    dims = [d.dim_value or 4 for d in xor_in.type.tensor_type.shape.dim]
    xor_feed = {xor_in.name: np.ones(dims, helper.tensor_dtype_to_np_dtype(xor_in.type.tensor_type.elem_type))}

    conv = _model(
        [helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1],
                          kernel_shape=[3, 3]),
         helper.make_node("Relu", ["c"], ["r"], name="relu"),
         helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Reshape", ["p", "shape"], ["f"], name="flat"),
         helper.make_node("Gemm", ["f", "G", "gb"], ["y"], name="fc", transB=1)],
        [_vi("x", shape=[1, 2, 6, 6])], [_vi("y", shape=[1, 4])],
        [_init("W", r.standard_normal((3, 2, 3, 3)).astype(np.float32)),
         _init("B", r.standard_normal(3).astype(np.float32)),
         _init("shape", np.array([1, 27], np.int64)),
         _init("G", r.standard_normal((4, 27)).astype(np.float32)),
         _init("gb", np.zeros(4, np.float32))])

    then_g = helper.make_graph([helper.make_node("Add", ["x", "one"], ["t"], name="then_add")], "then", [],
                               [_vi("t")], [_init("one", np.float32(1))])
    else_g = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["e"], name="else_mul")], "else", [],
                               [_vi("e")])
    iff = _model(
        [helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["cond"], name="gt"),
         helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)],
        [_vi("x", shape=[2, 3])], [_vi("y")], [_init("zero", np.float32(0))])

    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"], name="keep"),
         helper.make_node("Cast", ["i"], ["fi"], name="cast", to=TensorProto.FLOAT),
         helper.make_node("Add", ["v_in", "fi"], ["v_out"], name="acc"),
         helper.make_node("Mul", ["v_out", "x"], ["scan"], name="scan")],
        "body", [_vi("i", TensorProto.INT64, []), _vi("c_in", TensorProto.BOOL, []), _vi("v_in")],
        [_vi("c_out", TensorProto.BOOL, []), _vi("v_out"), _vi("scan")])
    loop = _model(
        [helper.make_node("Loop", ["M", "cond", "x"], ["v", "scans"], name="loop", body=body)],
        [_vi("x", shape=[3])], [_vi("v"), _vi("scans")],
        [_init("M", np.int64(3)), _init("cond", np.bool_(True))])

    shapes = _model(
        [helper.make_node("ConstantOfShape", ["cs"], ["z"], name="cos",
                          value=numpy_helper.from_array(np.array([0.5], np.float32))),
         helper.make_node("Expand", ["x", "es"], ["e"], name="expand"),
         helper.make_node("Add", ["e", "z"], ["a"], name="add"),
         helper.make_node("Tile", ["a", "reps"], ["t"], name="tile"),
         helper.make_node("Range", ["r0", "r1", "r2"], ["rg"], name="range"),
         helper.make_node("Pad", ["t", "pads"], ["pd"], name="pad"),
         helper.make_node("Gather", ["pd", "idx"], ["y"], name="gather", axis=1)],
        [_vi("x", shape=[1, 3])], [_vi("y"), _vi("rg")],
        [_init("cs", np.array([2, 3], np.int64)), _init("es", np.array([2, 3], np.int64)),
         _init("reps", np.array([1, 2], np.int64)), _init("r0", np.float32(0)), _init("r1", np.float32(5)),
         _init("r2", np.float32(1)), _init("pads", np.array([0, 1, 0, 1], np.int64)),
         _init("idx", np.array([0, 2], np.int64))])
    x23 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    return [("xor", xor, xor_feed),
            ("conv", conv, {"x": r.standard_normal((1, 2, 6, 6)).astype(np.float32)}),
            ("if", iff, {"x": x23}),
            ("loop", loop, {"x": np.arange(3, dtype=np.float32)}),
            ("shapes", shapes, {"x": np.arange(3, dtype=np.float32).reshape(1, 3)})]


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
    kind = rng.choice(["init_dims", "init_dims", "init_value", "attr_int", "attr_int", "opset", "elem_type",
                       "input_dims", "swap_io", "drop_node", "dup_node", "op_type", "data_type"])
    huge = rng.choice(HUGE_INTS + [10**15, -(2**63), 2**63 - 1])
    inits = [t for gg in graphs for t in gg.initializer]
    ints = [(n, a) for gg in graphs for n in gg.node for a in n.attribute
            if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS)]
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
        n.op_type = rng.choice(["Loop", "If", "Scan", "Conv", "Reshape", "Expand", "ConstantOfShape", "Tile",
                                "Resize", "Split", "Slice", "Frob", ""])
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


# ====================================================================== the fuzz tests
def _seeds_untouched():
    paths = [EXAMPLES / "xor_mlp.onnx", EXAMPLES / "xor_mlp.param", EXAMPLES / "xor_mlp.bin",
             *sorted(FIXTURES.glob("*/model.*"))]
    return {p: p.read_bytes() for p in paths}


def test_seeds_load_and_run(tmp_path):
    """The unmutated seeds pass through the same harness (so the harness itself is sound)."""
    cases = [Case(n, "onnx", {"model.onnx": m.SerializeToString()}, "model.onnx", None, f)
             for n, m, f in onnx_seeds()]
    for s in ncnn_seeds():
        cases.append(Case(s.name, "ncnn", {"model.param": s.param_text, "model.bin": s.bin}, "model.param",
                          "model.bin", s.feeds))
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
    failures = run_cases(cases, tmp_path)
    assert not failures, _report(failures, len(cases))
    assert _seeds_untouched() == before


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_ncnn(seed, tmp_path):
    before = _seeds_untouched()
    cases = ncnn_cases(random.Random(2000 + seed), n_text=110, n_binary=60, n_bin=50)
    failures = run_cases(cases, tmp_path)
    assert not failures, _report(failures, len(cases))
    assert _seeds_untouched() == before


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
                    return "giant allocation"
            return real(case, folder)
        _check = fake
        cases = [Case(lbl, "onnx", {"m.onnx": b""}, "m.onnx") for lbl in ("raise", "hang", "alloc")]
        got = {c.label: f for c, f in run_cases(cases, tmp_path)}
    finally:
        _check = real
    assert set(got) == {"hang", "alloc", "raise"}, got
    assert "hang" in got["hang"] and "giant" in got["alloc"]
