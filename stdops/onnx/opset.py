"""Binding ONNX nodes to kernels: the (domain, op_type, since_version) -> kernel-or-adapter table.

The table is built from two sources:

- the kernels' spec strings (``@op("onnx:Celu-12")``): from version 12 on, a Celu node calls the
  kernel with its attributes as keywords;
- adapters (``stdops/onnx/adapters/<family>.py``) for the versions whose *meaning* differs from the
  kernel's (an attribute that became an input, a changed default, a dtype enum to convert):
  ``@adapter("ReduceSum", 1)`` turns a ReduceSum-1..12 node into a call of the same kernel.

For a node, the entry chosen is the one with the newest version <= the model's opset for that
domain; at equal versions an adapter wins (it wraps the kernel). Attributes are converted once,
at load time, and the kernel is bound through the one binder (:func:`stdops.ops.bind.bind`); a step
then is one call of a prepared callable.

Other front ends reach an ONNX operator through :func:`select` (MDF's ``onnx::Op`` functions): the
table entry for an opset, with the kernel's input and attribute names and a ``bind`` that needs
nothing of this module's internals.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from ..errors import ModelFormatError, UnsupportedOp
from ..ops import _registry
from ..ops._registry import REQUIRED, OpDef
from ..ops.bind import Bound, bind

#: ONNX domain -> the spec prefix kernels register under
DOMAIN_PREFIX = {
    "": "onnx",
    "ai.onnx": "onnx",
    "ai.onnx.ml": "onnx-ml",
    "ai.onnx.preview.training": "onnx-training",
    "ai.onnx.preview": "onnx-preview",
}


def domain_prefix(domain: str) -> str:
    return DOMAIN_PREFIX.get(domain, domain)


@dataclasses.dataclass
class BindContext:
    """What an adapter knows about the node it binds (all of it fixed at load time)."""

    op_type: str
    domain: str
    opset: int  # the model's opset for this node's domain
    since: int  # the version of the table entry that matched
    node_name: str
    path: str | None
    attrs: dict[str, Any]  # converted attribute values; adapters may pop/rewrite entries
    n_inputs: int  # inputs as written on the node, empty optional ones included
    input_present: list[bool]
    n_outputs: int
    kernel: OpDef | None
    constants: list[Any]  # load-time value of each input (initializer / Constant) or None
    compile_graph: Callable[[Any], Any] | None = None  # for GRAPH attributes (control flow)
    opsets: dict[str, int] = dataclasses.field(default_factory=dict)
    output_present: list[bool] = dataclasses.field(default_factory=list)  # "" = an output nobody asks for
    #: the nodes (after function inlining) before this one in its graph: what a Gradient node differentiates
    earlier_nodes: list = dataclasses.field(default_factory=list)

    @property
    def where(self) -> str:
        return f"node {self.node_name!r} ({self.op_type}-{self.since})"

    def error(self, message: str) -> ModelFormatError:
        return ModelFormatError(self.path, self.where, message)

    def constant(self, i: int) -> Any:
        return self.constants[i] if i < len(self.constants) else None

    def bind(self, kernel: OpDef | None = None, constants: list[Any] | None = None, **overrides: Any) -> Bound:
        """The kernel (default: the table's) bound through the one binder with this node's attributes
        (and ``overrides``) and the load-time values of its inputs (default: the node's own, which
        fits when the step is called with the node's inputs in order). Unknown attributes and missing
        required ones are a ModelFormatError naming the node."""
        k = kernel or self.kernel
        if k is None:
            raise UnsupportedOp(self.domain, self.op_type, self.opset, self.where, self.path)
        try:
            return bind(k, {**self.attrs, **overrides}, self.constants if constants is None else constants)
        except ModelFormatError as e:
            raise self.error(e.detail) from None

    def dtype_attr(self, name: str, default: Any = REQUIRED) -> Any:
        """Convert an attribute holding a TensorProto data type enum to a numpy dtype, in place."""
        if name not in self.attrs:
            if default is REQUIRED:
                raise self.error(f"missing required attribute {name}")
            return default
        self.attrs[name] = onnx_dtype(self.attrs[name], self)
        return self.attrs[name]


Adapter = Callable[[BindContext], Callable]
StepFn = TypeVar("StepFn", bound=Callable)


def reads_outer(step: StepFn, names: list[str]) -> StepFn:
    """Publish the enclosing-scope values a step's subgraphs read (control flow, ``Plan.outer_names``):
    the front end appends them to the node's inputs and the step receives them after its own."""
    setattr(step, "outer_inputs", names)  # noqa: B010 - a function attribute the front end reads with getattr
    return step


#: (prefix:op_type, version) -> adapter
ADAPTERS: dict[tuple[str, int], Adapter] = {}


def adapter(op_type: str, *versions: int, domain: str = "") -> Callable[[Adapter], Adapter]:
    """Register ``fn(ctx) -> callable(*inputs)`` for the given since-versions of an op."""

    def register(fn: Adapter) -> Adapter:
        for v in versions:
            key = (f"{domain_prefix(domain)}:{op_type}", v)
            if key in ADAPTERS:
                raise ValueError(f"adapter for {key} registered twice")
            ADAPTERS[key] = fn
            kernels = _registry.SPEC_INDEX.get(key[0], {})
            newest = [kv for kv in kernels if kv is not None]
            kernel = kernels.get(v) or (kernels[max(newest)] if newest else None)
            if kernel is not None:  # the kernel this version binds to (see resolve)
                _registry.record_use(kernel, "onnx", f"{op_type}-{v}")
        return fn

    return register


def onnx_dtype(code: int, ctx: BindContext | None = None) -> np.dtype:
    """TensorProto.DataType enum -> numpy dtype (ml_dtypes for bfloat16, float8, int4, float4)."""
    from onnx import helper

    try:
        if int(code) == 8:  # STRING: onnx maps it to object
            return np.dtype(object)
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(code)))
    except Exception as e:  # noqa: BLE001 - any lookup failure is the model's fault
        msg = f"unknown tensor data type {code!r} ({e})"
        if ctx is not None:
            raise ctx.error(msg) from None
        raise ModelFormatError(None, None, msg) from None


_COMPLETE = False


def _complete() -> None:
    """Register the adapters (version adapters, control flow, Gradient) before the table is read: the
    table is whole whoever asks (the loader, MDF, ``stdops ops``)."""
    global _COMPLETE
    if not _COMPLETE:
        from . import adapters, control, gradient  # noqa: F401  (they register into ADAPTERS)

        _COMPLETE = True


def resolve(domain: str, op_type: str, opset: int) -> tuple[int, OpDef | None, Adapter | None]:
    """The table entry for ``op_type`` at the model's ``opset``: (since, kernel, adapter).
    Raises UnsupportedOp when no entry has a version <= opset."""
    _complete()
    key = f"{domain_prefix(domain)}:{op_type}"
    kernels = _registry.SPEC_INDEX.get(key, {})
    versions = {v for v in kernels if v is not None and v <= opset}
    versions |= {v for (k, v) in ADAPTERS if k == key and v <= opset}
    if not versions:
        raise UnsupportedOp(domain, op_type, opset)
    since = max(versions)
    kernel = kernels.get(since)
    if kernel is None:  # an adapter-only entry binds to the newest kernel of that op
        newer = [v for v in kernels if v is not None]
        kernel = kernels[max(newer)] if newer else None
    return since, kernel, ADAPTERS.get((key, since))


@dataclasses.dataclass(frozen=True)
class OnnxOp:
    """The binding-table entry of one ONNX operator at one opset, for front ends other than ONNX's
    (MDF's ``onnx::Op``): the kernel's input and attribute names, and :meth:`bind`."""

    domain: str
    op_type: str
    opset: int
    since: int
    kernel: OpDef | None
    adapter: Adapter | None

    @property
    def input_names(self) -> tuple[str, ...]:
        """The inputs in ONNX order (the kernel's parameter names; a variadic input last)."""
        if self.kernel is None:
            return ()
        k = self.kernel
        return k.inputs + ((k.variadic_name,) if k.variadic_name else ())

    @property
    def variadic(self) -> bool:
        return bool(self.kernel and self.kernel.variadic)

    @property
    def attributes(self) -> dict[str, Any]:
        """Attribute name -> default (REQUIRED when the spec has none)."""
        return dict(self.kernel.attrs) if self.kernel is not None else {}

    def bind(
        self,
        attrs: dict[str, Any],
        constants: list[Any] | None = None,
        *,
        n_inputs: int,
        n_outputs: int = 1,
        name: str = "",
        path: str | None = None,
    ) -> Callable:
        """The step for a call with ``n_inputs`` inputs (trailing absent ones left out) and the given
        attributes; ``constants``: the load-time value of each input, None where unknown."""
        consts = list(constants) if constants is not None else [None] * n_inputs
        ctx = BindContext(
            op_type=self.op_type,
            domain=self.domain,
            opset=self.opset,
            since=self.since,
            node_name=name or self.op_type,
            path=path,
            attrs=dict(attrs),
            n_inputs=n_inputs,
            input_present=[True] * n_inputs,
            n_outputs=n_outputs,
            kernel=self.kernel,
            constants=consts,
            opsets={self.domain: self.opset},
            output_present=[True] * n_outputs,
        )
        return self.adapter(ctx) if self.adapter is not None else ctx.bind()


def select(op_type: str, opset: int, domain: str = "") -> OnnxOp:
    """The table entry an ONNX node ``op_type`` of ``domain`` would bind to at ``opset``.
    Raises UnsupportedOp when there is none."""
    since, kernel, adapt = resolve(domain, op_type, opset)
    return OnnxOp(domain, op_type, opset, since, kernel, adapt)


def newest_opset(domain: str = "") -> int:
    """The newest version of ``domain`` that any entry of the table names."""
    _complete()
    prefix = domain_prefix(domain) + ":"
    versions = [v for key, vs in _registry.SPEC_INDEX.items() if key.startswith(prefix) for v in vs if v is not None]
    versions += [v for (key, v) in ADAPTERS if key.startswith(prefix)]
    return max(versions, default=1)


def bound_ops() -> dict[str, list[int]]:
    """Every ONNX op type the table binds (``prefix:Op``) and its versions."""
    _complete()
    out: dict[str, set[int]] = {}
    for key, versions in _registry.SPEC_INDEX.items():
        if key.startswith("onnx"):
            out.setdefault(key, set()).update(v for v in versions if v is not None)
    for key, v in ADAPTERS:
        out.setdefault(key, set()).add(v)
    return {k: sorted(v) for k, v in sorted(out.items())}
