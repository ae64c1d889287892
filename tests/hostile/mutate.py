"""Seeded mutations of the six hostile-file formats: ONNX (.onnx), ncnn (.param text, .param.bin, .bin) and
MDF (JSON, YAML).

Valid seed models (the bundled XOR model in both formats, the ncnn fixtures as text and binary .param,
small ONNX models with Conv, If, Loop, shape-from-value ops and initializers, the MDF examples and, when
``../shared`` is present, the MDF conformance models) are damaged by seeded mutations: truncation, byte
flips, insertions and deletions, duplicated / swapped / dropped .param lines, huge numbers in counts,
params and dims, wrong magic, structured protobuf damage, MDF fields deleted or set to values of the wrong
kind or to hostile expressions, YAML anchors, aliases and tags. Two generators reach further than damage
to a few seeds can: a one-layer ncnn net of every layer type with random (often extreme) params and the
weights they declare, and a one-node ONNX model of every operator with random attributes and inputs.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import struct
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from stdops.ncnn import param as P
from stdops.ncnn.spec import RawArray, RawScalar

from .harness import EXAMPLES, FIXTURES, Case

HUGE_INTS = [2**31 - 1, -1, -(2**31), 10**12, 2**32, 10**9, 0, 65536]


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


# ====================================================================== MDF seeds and mutations
SHARED_MDF = (Path(__file__).resolve().parents[3] / "shared" / "conformance" / "mdf" / "models").resolve()


def mdf_seeds() -> list[tuple[str, dict]]:
    """(name, parsed document) of the MDF examples and, when ../shared is present, the conformance models."""
    import yaml

    files = sorted((EXAMPLES / "mdf").glob("*.json")) + sorted((EXAMPLES / "mdf").glob("*.yaml"))
    if SHARED_MDF.is_dir():
        files += [
            p for p in sorted(SHARED_MDF.rglob("*.json")) if "Keras" not in p.parts and p.stat().st_size < 200_000
        ]
    seeds = []
    for p in files:
        text = p.read_text()
        seeds.append((p.stem, json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)))
    return seeds


#: values of the wrong kind
GARBAGE = [
    None,
    1,
    -3,
    2.5,
    "",
    "x",
    "1/0",
    "[1,2",
    {},
    [],
    {"a": 1},
    [1, [2]],
    True,
    "__x__",
    "a.b",
    "nan",
    {"type": "Nope"},
    "-1",
    [-1],
    "numpy.zeros(-1)",
    10**30,
    -(10**30),
    1e308,
    [10**20],
    [[1, 2], [3]],
]

#: expressions a hostile file may hold (the issue-9 probe's, and escape attempts)
HOSTILE_EXPRESSIONS = [
    "round(1, -10**9)",
    "pow(3, 10**16000, 10**16000+7)",
    "pow(3, 2**4000, 2**4000+7)",
    "numpy.array(10**20) ** 10**9",
    "numpy.array(10**20) << 10**10",
    "sum(((0,),)*200000, ())",
    "math.prod((10**16000,)*5000)",
    "math.prod((2**4000,)*5000)",
    "'%999999999d' % 1",
    "'%.999999999f' % 1.5",
    "numpy.full(10**6, 'a'*1000)",
    "numpy.concatenate([numpy.ones(1000)]*100000)",
    "numpy.stack([numpy.ones(10000)]*100000)",
    "numpy.vstack([numpy.ones(10000)]*100000)",
    "numpy.hstack([numpy.ones(10000)]*100000)",
    "numpy.ones((10**5, 1)) + numpy.ones((1, 10**5))",
    "numpy.where(numpy.ones((10**5, 1)) > 0, 1, numpy.ones((1, 10**5)))",
    "numpy.outer(numpy.ones(10**5), numpy.ones(10**5))",
    "numpy.eye(10**6)",
    "numpy.zeros((10**5, 10**5), 'U100')",
    "numpy.zeros_like(1, shape=(10**5, 10**5))",
    "numpy.zeros(float('nan'))",
    "numpy.zeros([-1])",
    "numpy.array([[1]*1000]*1000) @ numpy.array([[1]*1000]*1000)",
    "'a' * 10**9",
    "[0] * 10**9",
    "('ab' * 500000) + ('ab' * 500000)",
    "10**10**10",
    "2**2**2**2**2",
    "1 << 10**9",
    "int('9' * 4000) * int('9' * 4000)",
    "sum([numpy.ones(10**6)] * 10**6)",
    "numpy.multiply(x, 0, out=x)",
    "numpy.add(x, 1, x)",
    "numpy.cumsum(x, 0, None, x)",
    "numpy.median(x, None, None, True)",
    "-" * 5000 + "1",
    "(" * 300 + "1" + ")" * 300,
    "not " * 3000 + "1",
    "x.__class__.__bases__",
    "__import__('os').system('true')",
    "open('/etc/passwd')",
    "(lambda: 1)()",
    "[c for c in ().__class__.__base__.__subclasses__()]",
    "math.factorial(10**8)",
    "numpy.log(-1) / 0",
    "1 / 0",
]


def _paths(o, p=()):
    yield p, o
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, p + (k,))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _paths(v, p + (i,))


def mutate_mdf_data(d: dict, rng: random.Random) -> tuple[str, dict]:
    """1-3 structural damages: a field deleted, set to a value of the wrong kind, or (for a string: the
    fields expressions live in) set to a hostile expression."""
    d = copy.deepcopy(d)
    entries = list(_paths(d))[1:]
    done = []
    for _ in range(rng.randint(1, 3)):
        p, old = rng.choice(entries)
        parent = d
        try:
            for k in p[:-1]:
                parent = parent[k]
            r = rng.random()
            if r < 0.2 and isinstance(parent, dict):
                del parent[p[-1]]
                done.append(f"del {'.'.join(map(str, p))}")
            elif r < 0.55 or isinstance(old, str):
                parent[p[-1]] = rng.choice(HOSTILE_EXPRESSIONS)
                done.append(f"{'.'.join(map(str, p))}={str(parent[p[-1]])[:40]!r}")
            else:
                parent[p[-1]] = copy.deepcopy(rng.choice(GARBAGE))
                done.append(f"{'.'.join(map(str, p))}={str(parent[p[-1]])[:30]!r}")
        except (KeyError, IndexError, TypeError):
            pass
    return "; ".join(done) or "none", d


_YAML_TAGS = [
    "!!int abc",
    "!!float x",
    "!!python/object/apply:os.system ['true']",
    "!!binary AAA=",
    "!!set {a}",
    "!!timestamp x",
    "!!bool maybe",
    "!!omap [1]",
    "!!str",
    "!!null x",
    "!!int " + "9" * 4301,
]


def mutate_mdf_text(text: str, rng: random.Random, yaml_fmt: bool) -> tuple[str, str]:
    """Damage to the file's text: generic byte damage, a 4301-digit integer, and for YAML anchors, aliases
    (bombs and cycles) and tags."""
    kinds = ["bytes", "bytes", "bigint"] + (["tag", "tag", "alias_bomb", "self_alias", "dup_key"] if yaml_fmt else [])
    kind = rng.choice(kinds)
    lines = text.split("\n")
    if kind == "bigint":
        import re

        nums = list(re.finditer(r"(?<![\w.])\d+(?![\w.])", text))
        if nums:
            m = rng.choice(nums)
            return "4301-digit int", text[: m.start()] + "7" * 4301 + text[m.end() :]
        kind = "bytes"
    if kind == "bytes":
        what, data = mutate_bytes(text.encode(), rng)
        return what, data.decode("utf-8", "replace")
    vals = [k for k, line in enumerate(lines) if ": " in line and not line.rstrip().endswith(":")]
    if not vals:
        return "none", text
    k = rng.choice(vals)
    head, _, _ = lines[k].partition(": ")
    if kind == "tag":
        tag = rng.choice(_YAML_TAGS)
        lines[k] = f"{head}: {tag}"
        return f"line {k + 1} {tag[:30]}", "\n".join(lines)
    if kind == "alias_bomb":
        fan = rng.choice([5, 9, 10])
        depth = rng.choice([4, 6, 8, 9])
        bomb = [f"{head}: &l0 [" + ",".join(["x"] * fan) + "]"]
        for i in range(1, depth):
            bomb.append(
                f"{' ' * (len(head) - len(head.lstrip()))}_b{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * fan) + "]"
            )
        lines[k : k + 1] = bomb
        lines.insert(k + len(bomb), f"{' ' * (len(head) - len(head.lstrip()))}_bomb: *l{depth - 1}")
        return f"alias bomb {fan}^{depth} at line {k + 1}", "\n".join(lines)
    if kind == "self_alias":
        lines[k] = f"{head}: &self [1, *self]" if rng.random() < 0.5 else f"{head}: &self {{a: *self}}"
        return f"self alias at line {k + 1}", "\n".join(lines)
    lines.insert(k + 1, lines[k])
    return f"duplicate key at line {k + 1}", "\n".join(lines)


def mdf_cases(rng: random.Random, n: int, seeds: list[tuple[str, dict]] | None = None) -> list[Case]:
    import yaml

    seeds = seeds if seeds is not None else mdf_seeds()
    cases = []
    for k in range(n):
        name, data = seeds[k % len(seeds)]
        yaml_fmt = rng.random() < 0.5
        what, d = mutate_mdf_data(data, rng) if rng.random() < 0.75 else ("", data)
        try:
            text = yaml.safe_dump(d, sort_keys=False) if yaml_fmt else json.dumps(d, indent=1)
        except (ValueError, TypeError, yaml.YAMLError):
            text = json.dumps(data)
        if not what or rng.random() < 0.3:
            w2, text = mutate_mdf_text(text, rng, yaml_fmt)
            what = f"{what}; text {w2}" if what else f"text {w2}"
        fname = "model.yaml" if yaml_fmt else "model.json"
        cases.append(Case(f"mdf {name} {fname} {what}", "mdf", {fname: text.encode("utf-8", "replace")}, fname))
    return cases
