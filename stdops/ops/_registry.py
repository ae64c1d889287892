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
  Other front ends use ``"ncnn:Layer"`` and ``"mdf:name"``;
- ``prepare=`` declares the kernel's load-time preparation (weight re-layout, tables built from
  attributes, folding of static inputs): ``prepare(constants, attrs) -> step or None`` receives the
  load-time value of each input (None where unknown) and every attribute (defaults filled in); the step
  it returns is called with all the inputs, as the kernel is. :func:`stdops.ops.bind.bind` is the one
  place that calls it, for every front end.

Registration is explicit: a module's kernels are registered when ``stdops.ops`` imports it. Front ends
record which of their ops run on a kernel (:func:`record_use`), so that the registry answers, for every
kernel, which ONNX ops, ncnn layers and MDF functions reach it (:func:`uses`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Any

_EMPTY = inspect.Parameter.empty

#: prepare(constants, attrs) -> a step called with every input, or None when the plain kernel serves
Prepare = Callable[[tuple, dict], "Callable | None"]


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
    prepare: Prepare | None = None  # load-time preparation (see the module docstring)
    variadic_name: str | None = None  # the name of the *inputs parameter
    kernels: tuple[str, ...] = ()  # the kernels this one runs on (a cell, an activation): uses flow to them

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.fn.__doc__ or "")

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else ""

    def front_ends(self) -> tuple[str, ...]:
        """The front ends that reach this kernel: its spec prefixes and the recorded uses."""
        return tuple(sorted(uses(self)))

    def defaults(self) -> dict[str, Any]:
        """The attributes with a default, by name."""
        return {a: d for a, d in self.attrs.items() if d is not REQUIRED}

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
#: id(kernel function) -> OpDef, so that a front end may name a kernel by its function
_BY_FN: dict[int, OpDef] = {}
#: kernel name -> front end -> what of that front end runs on it (ONNX adapters, ncnn layers, MDF functions)
_USES: dict[str, dict[str, set[str]]] = {}


def _signature(fn: Callable) -> tuple[tuple[str, ...], frozenset[str], str | None, dict[str, Any]]:
    inputs: list[str] = []
    optional: set[str] = set()
    attrs: dict[str, Any] = {}
    variadic: str | None = None
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            inputs.append(p.name)
            if p.default is not _EMPTY:
                optional.add(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            variadic = p.name
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


def op(
    *specs: str, name: str | None = None, prepare: Prepare | None = None, kernels: Sequence[Callable] = ()
) -> Callable[[Callable], Callable]:
    """Register a kernel under its spec strings (none for a kernel only other kernels and front ends run
    on, such as the recurrent cells), with its load-time ``prepare`` if it has one and the ``kernels`` it
    runs on. Returns the function unchanged."""

    def register(fn: Callable) -> Callable:
        key = name or fn.__name__
        if key in OPS:
            raise ValueError(f"kernel {key!r} registered twice ({OPS[key].module} and {fn.__module__})")
        if not fn.__doc__:
            raise ValueError(f"kernel {key!r} needs a docstring with its formula and shape/dtype rule")
        inputs, optional, variadic, attrs = _signature(fn)
        runs_on = tuple(kernel_of(k).name for k in kernels)
        d = OpDef(
            key,
            fn,
            tuple(specs),
            inputs,
            optional,
            variadic is not None,
            attrs,
            fn.__module__,
            prepare,
            variadic,
            runs_on,
        )
        for s in specs:
            head, ver = _parse_spec(s)
            versions = SPEC_INDEX.setdefault(head, {})
            if ver in versions:
                raise ValueError(f"spec {s!r} claimed by {versions[ver].name!r} and {key!r}")
            versions[ver] = d
        OPS[key] = d
        _BY_FN[id(fn)] = d
        return fn

    return register


def from_attributes(build: Callable[..., Callable]) -> Prepare:
    """A ``prepare`` that builds the step from the attributes alone (a look-up table, a forest):
    ``build(**attrs)`` returns the step."""

    def prepare(constants: tuple, attrs: dict) -> Callable:
        del constants
        return build(**attrs)

    prepare.__qualname__ = prepare.__name__ = f"from_attributes({build.__name__})"
    return prepare


def kernel_of(kernel: OpDef | Callable | str) -> OpDef:
    """The OpDef of a kernel given as its OpDef, its function or its name."""
    if isinstance(kernel, OpDef):
        return kernel
    if isinstance(kernel, str):
        return OPS[kernel]
    d = _BY_FN.get(id(kernel))
    if d is None or d.fn is not kernel:
        raise ValueError(f"{getattr(kernel, '__qualname__', kernel)!r} is not a registered kernel")
    return d


def record_use(kernel: OpDef | Callable | str, front_end: str, what: str) -> None:
    """Note that ``what`` of ``front_end`` (an ONNX op version, an ncnn layer, an MDF function) runs on
    ``kernel``; ``stdops ops`` prints it."""
    d = kernel_of(kernel)
    _USES.setdefault(d.name, {}).setdefault(front_end, set()).add(what)


def _direct_uses(d: OpDef) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for s in d.specs:
        prefix, _, what = s.partition(":")
        out.setdefault("onnx" if prefix.startswith("onnx") else prefix, set()).add(what)
    for fe, whats in _USES.get(d.name, {}).items():
        out.setdefault(fe, set()).update(whats)
    return out


def uses(kernel: OpDef | Callable | str) -> dict[str, list[str]]:
    """front end -> what of it reaches the kernel: its own spec strings (``onnx-ml:Binarizer-1`` counts
    for the ONNX front end), the recorded uses, and the uses of every kernel that runs on it."""
    d = kernel_of(kernel)
    out: dict[str, set[str]] = {}
    users = {d.name}
    frontier = [d.name]
    while frontier:  # the kernels that run on d, directly or through others
        name = frontier.pop()
        for k in OPS.values():
            if name in k.kernels and k.name not in users:
                users.add(k.name)
                frontier.append(k.name)
    for name in users:
        for fe, whats in _direct_uses(OPS[name]).items():
            out.setdefault(fe, set()).update(whats)
    return {fe: sorted(w) for fe, w in sorted(out.items())}
