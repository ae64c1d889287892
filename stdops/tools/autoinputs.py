"""Inputs made from what a model declares, for commands run without ``-i`` (profile, compare, reduce).

ONNX graph inputs declare an element type and a shape whose dimensions may be symbolic (``batch``) or
unknown; ncnn ``Input`` layers may declare ``0=w 1=h 11=d 2=c``. A symbolic or unknown dimension becomes 1
unless ``--shape NAME=D1,D2,...`` says otherwise, and each such choice is reported as a note. Values are
drawn from a seeded generator (``numpy.random.default_rng(seed)``): floats from the standard normal, integers
from [0, 4) (small enough to be valid indices for most Gather/embedding inputs), booleans fair coins.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InputError, StdopsError

#: the largest input made without being asked (elements); anything larger needs -i or an explicit --shape
MAX_AUTO_ELEMENTS = 1 << 26


@dataclasses.dataclass(frozen=True)
class DeclaredInput:
    name: str
    kind: str  # "tensor" or what else the model declares ("sequence", "optional", ...)
    dtype: np.dtype | None
    shape: tuple[int | str | None, ...] | None  # None: rank unknown; str / None entries: not fixed


def parse_shapes(items: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """``NAME=D1,D2,...`` (repeatable) -> {name: shape}."""
    out: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.replace("x", ",").split(",") if d.strip())
        except ValueError:
            shape = ()
        if not sep or not name or not shape or any(d < 0 for d in shape):
            raise InputError(f"--shape {item!r}: expected NAME=D1,D2,... with whole numbers >= 0")
        out[name] = shape
    return out


def declared_inputs(model: Any) -> list[DeclaredInput]:
    """The inputs a loaded ONNX Model or ncnn Net asks for, as declared."""
    if hasattr(model, "param_file"):  # ncnn Net
        out = []
        for layer in model.layers:
            if layer.type != "Input":
                continue
            p = layer.params
            w, h, d, c = (int(getattr(p, k)) for k in ("w", "h", "d", "c"))
            if c > 0 and d > 0:
                shape: tuple | None = (c, d, h, w)
            elif c > 0:
                shape = (c, h, w)
            elif h > 0:
                shape = (h, w)
            elif w > 0:
                shape = (w,)
            else:
                shape = None
            for top in layer.decl.tops:
                out.append(DeclaredInput(top, "tensor", np.dtype(np.float32), shape))
        return out
    return [DeclaredInput(v.name, v.kind, v.dtype, v.shape) for v in model.inputs]


def _values(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    kind = dtype.kind
    if kind == "b":
        return rng.random(shape) < 0.5
    if kind in "iu":
        return rng.integers(0, 4, size=shape).astype(dtype)
    if kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if kind == "O" or kind in "US":
        return np.full(shape, "stdops", dtype=object)
    # float16/32/64 and the ml_dtypes floats (bfloat16, float8): drawn in float32, then cast
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


def make_inputs(
    model: Any,
    given: dict[str, Any] | None = None,
    seed: int = 0,
    shapes: dict[str, tuple[int, ...]] | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """Feeds for every declared input not in ``given``, and notes saying what was made up."""
    feeds = dict(given or {})
    shapes = dict(shapes or {})
    declared = declared_inputs(model)
    unknown = set(shapes) - {d.name for d in declared}
    if unknown:
        names = ", ".join(d.name for d in declared)
        raise InputError(f"--shape names no input of the model: {', '.join(sorted(unknown))} (inputs: {names})")
    rng = np.random.default_rng(seed)
    notes: list[str] = []
    for d in declared:
        if d.name in feeds:
            continue
        if d.kind != "tensor" or d.dtype is None:
            raise InputError(f"input {d.name!r} is a {d.kind} without a declared element type: give it with -i")
        if d.name in shapes:
            shape = shapes[d.name]
            if d.shape is not None and len(d.shape) != len(shape):
                raise InputError(f"--shape {d.name}: the model declares rank {len(d.shape)}, got {shape}")
            for want, got in zip(d.shape or (), shape):
                if isinstance(want, int) and want > 0 and want != got:
                    raise InputError(f"--shape {d.name}: the model fixes a dimension to {want}, got {shape}")
        elif d.shape is None:
            raise InputError(
                f"input {d.name!r} declares no shape: give --shape {d.name}=D1,D2,... or -i {d.name}=FILE.npy"
            )
        else:
            free = [k for k, v in enumerate(d.shape) if not (isinstance(v, int) and v > 0)]
            shape = tuple(v if isinstance(v, int) and v > 0 else 1 for v in d.shape)  # the free ones set to 1
            if free:
                named = ", ".join(f"{d.shape[k]!r}" if d.shape[k] else f"#{k}" for k in free)
                notes.append(f"input {d.name!r}: dimension(s) {named} set to 1 (--shape {d.name}=... to choose)")
        if int(np.prod(shape, dtype=np.int64)) > MAX_AUTO_ELEMENTS:
            raise InputError(f"input {d.name!r} of shape {shape} is too large to make up: give it with -i")
        try:
            feeds[d.name] = _values(rng, np.dtype(d.dtype), shape)
        except (TypeError, ValueError) as e:
            raise StdopsError(f"input {d.name!r}: cannot make {d.dtype} values ({e}): give it with -i") from None
        notes.append(f"input {d.name!r}: random {np.dtype(d.dtype).name} {list(shape)} (seed {seed})")
    return feeds, notes


# --------------------------------------------------------------------------- the command line's side
def add_arguments(p: Any, seed_help: str = "seed of the inputs made up for missing -i (default 0)") -> None:
    """``-i``, ``--shape`` and ``--seed`` for a subcommand that makes up the inputs it is not given."""
    p.add_argument(
        "-i",
        "--input",
        action="append",
        default=[],
        metavar="NAME=FILE.npy",
        help="an input (repeatable); inputs not given are made up from the model's declared shapes and dtypes",
    )
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D1,D2,...",
        help="shape of a made-up input, for dimensions the model leaves open (repeatable)",
    )
    p.add_argument("--seed", type=int, default=0, help=seed_help)


def feeds_from_args(model: Any, given: dict[str, Any], a: Any) -> tuple[dict[str, Any], list[str]]:
    """The -i feeds completed with made-up inputs, and notes naming each made-up one (a command prints them
    with its result, so that a command that fails prints its one error line only)."""
    return make_inputs(model, given, seed=a.seed, shapes=parse_shapes(a.shape))
