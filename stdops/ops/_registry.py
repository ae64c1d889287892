"""The operator registry: the single list of kernels that `stdops ops` prints and the tests walk.

A kernel is a plain function on NumPy arrays::

    @op("onnx:Celu-12")
    def celu(x, /, *, alpha=1.0):
        \"\"\"y = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)). Shape and dtype of x.\"\"\"

- inputs are positional (optional ones default to None); attributes are keyword-only and carry the
  spec's real defaults in the signature; names follow ONNX;
- it returns one array, or a tuple of arrays for several outputs (all of them, always);
- ``spec`` strings say what the kernel implements: ``"onnx:Op-V"`` means "ONNX ``Op`` from opset
  version V on, until a newer registered version or adapter takes over". V is the oldest version
  whose meaning the kernel implements unchanged (a widened type list is not a change of meaning).
  Other front ends use ``"ncnn:Layer"`` and ``"mdf:name"``.

Registration is explicit: a module's kernels are registered when ``stdops.ops`` imports it.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

_EMPTY = inspect.Parameter.empty


@dataclasses.dataclass(frozen=True)
class OpDef:
    """One kernel and what it implements."""

    name: str  # the Python name of the kernel, e.g. "gather_nd"
    fn: Callable
    specs: tuple[str, ...]  # e.g. ("onnx:GatherND-13",)
    inputs: tuple[str, ...]  # positional parameter names
    optional_inputs: frozenset[str]  # positional parameters with a default (None)
    variadic: bool  # takes *inputs
    attrs: dict[str, Any]  # keyword-only attribute -> default (REQUIRED if none)
    module: str

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.fn.__doc__ or "")

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else ""

    def front_ends(self) -> tuple[str, ...]:
        return tuple(sorted({s.split(":", 1)[0] for s in self.specs}))

    def spec_for(self, front_end: str) -> list[str]:
        return [s.split(":", 1)[1] for s in self.specs if s.startswith(front_end + ":")]


class _Required:
    """Marker default of an attribute the spec requires."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()

#: kernel name -> OpDef
OPS: dict[str, OpDef] = {}
#: "onnx:Celu" -> {12: OpDef} (version -> kernel), filled from the spec strings
SPEC_INDEX: dict[str, dict[int | None, OpDef]] = {}


def _signature(fn: Callable) -> tuple[tuple[str, ...], frozenset[str], bool, dict[str, Any]]:
    inputs, optional, attrs, variadic = [], set(), {}, False
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            inputs.append(p.name)
            if p.default is not _EMPTY:
                optional.add(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            variadic = True
        elif p.kind is p.KEYWORD_ONLY:
            attrs[p.name] = REQUIRED if p.default is _EMPTY else p.default
        else:
            raise TypeError(f"kernel {fn.__qualname__}: **{p.name} is not allowed; declare attributes")
    return tuple(inputs), frozenset(optional), variadic, attrs


def _parse_spec(spec: str) -> tuple[str, int | None]:
    """'onnx:Celu-12' -> ('onnx:Celu', 12); 'ncnn:ReLU' -> ('ncnn:ReLU', None)."""
    if ":" not in spec:
        raise ValueError(f"spec {spec!r} must look like 'onnx:Op-V', 'ncnn:Layer' or 'mdf:name'")
    head, _, ver = spec.rpartition("-")
    if head and ver.isdigit():
        return head, int(ver)
    return spec, None


def op(*specs: str, name: str | None = None) -> Callable[[Callable], Callable]:
    """Register a kernel under one or more spec strings. Returns the function unchanged."""

    def register(fn: Callable) -> Callable:
        key = name or fn.__name__
        if key in OPS:
            raise ValueError(f"kernel {key!r} registered twice ({OPS[key].module} and {fn.__module__})")
        if not fn.__doc__:
            raise ValueError(f"kernel {key!r} needs a docstring with its formula and shape/dtype rule")
        inputs, optional, variadic, attrs = _signature(fn)
        d = OpDef(key, fn, tuple(specs), inputs, optional, variadic, attrs, fn.__module__)
        for s in specs:
            head, ver = _parse_spec(s)
            versions = SPEC_INDEX.setdefault(head, {})
            if ver in versions:
                raise ValueError(f"spec {s!r} claimed by {versions[ver].name!r} and {key!r}")
            versions[ver] = d
        OPS[key] = d
        return fn

    return register
