"""The one door from a front end to a kernel: ``bind(kernel, attrs, constants) -> Bound``.

Every front end converts its file's notation (ONNX attributes and input order, ncnn param ids and blob
layout, MDF named arguments) into the kernel's attributes and the load-time values of its inputs, and
calls :func:`bind` once per node at load time:

- the attributes are checked against the kernel's signature: an unknown one, or a required one that is
  missing, is a :class:`~stdops.errors.ModelFormatError` (the front end adds the file and the node);
- the kernel's ``prepare`` (``@op(..., prepare=...)``), if it has one, gets the constants (an ONNX
  initializer, an ncnn weight, an MDF constant: the same way for all three) and every attribute, and may
  return a specialised step (re-laid-out weights, tables built from attributes, folded static inputs);
- the :class:`Bound` step is then called with every input of the kernel, the constants included. When
  an input is not the very constant it was prepared for (an ONNX initializer overridden by a feed), the
  plain kernel runs instead, so a prepared step never computes with stale weights.

A :class:`Bound` keeps what it was made from (kernel, attributes, constants), so that a load-time graph
pass can inspect a node and bind it again (``bound.rebind(...)``, or ``bind`` with another kernel)
without knowing which front end made it (docs/architecture.md, "The compiled graph").
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import KernelError, ModelFormatError
from ._registry import REQUIRED, OpDef, kernel_of


@dataclasses.dataclass(frozen=True, eq=False)
class Bound:
    """A kernel bound at load time: ``bound(*inputs)`` runs it. ``constants[i]`` is the load-time value
    of input i (None: known only at run time, or absent)."""

    kernel: OpDef
    attrs: Mapping[str, Any]  # the attributes as given (validated; defaults not filled in)
    constants: tuple[Any, ...]
    fn: Callable  # the step the plan calls: the prepared one, or the kernel with its attributes
    prepared: bool  # whether the kernel's prepare specialised the step

    def __call__(self, *inputs: Any, **attrs: Any) -> Any:
        """Run the step; attributes given here (a callable an adapter builds per node) run the plain
        kernel with them added."""
        if attrs:
            return self.kernel.fn(*inputs, **{**self.attrs, **attrs})
        return self.fn(*inputs)

    def rebind(self, attrs: Mapping[str, Any] | None = None, constants: Sequence[Any] | None = None) -> Bound:
        """The same kernel bound again with other attributes and/or constants (a graph pass folding a
        BatchNormalization into a Conv's weights rebinds the Conv with the new ones)."""
        return bind(
            self.kernel, self.attrs if attrs is None else attrs, self.constants if constants is None else constants
        )


def check_attrs(kernel: OpDef, attrs: Mapping[str, Any], where: str | None = None) -> None:
    """Refuse attributes the kernel does not take and required ones that are missing."""
    unknown = sorted(set(attrs) - set(kernel.attrs))
    if unknown:
        raise ModelFormatError(
            None,
            where,
            f"unknown attribute(s) {', '.join(unknown)} (accepted: {', '.join(kernel.attrs) or 'none'})",
        )
    missing = [a for a, d in kernel.attrs.items() if d is REQUIRED and a not in attrs]
    if missing:
        raise ModelFormatError(None, where, f"missing required attribute(s) {', '.join(missing)}")


def bind(
    kernel: OpDef | Callable | str,
    attrs: Mapping[str, Any] | None = None,
    constants: Sequence[Any] = (),
    *,
    where: str | None = None,
) -> Bound:
    """Bind ``kernel`` (its OpDef, function or name) to ``attrs`` and the load-time ``constants`` (one
    per input in the kernel's order, None where unknown; shorter than the inputs is fine)."""
    k = kernel_of(kernel)
    attrs = dict(attrs or {})
    check_attrs(k, attrs, where)
    consts = tuple(constants)
    plain: Callable = functools.partial(k.fn, **attrs) if attrs else k.fn
    if k.prepare is None:
        return Bound(k, attrs, consts, plain, False)
    try:
        fast = k.prepare(consts, {**k.defaults(), **attrs})
    except KernelError as e:  # the load-time values themselves are wrong: the model's fault
        raise ModelFormatError(None, where, str(e)) from None
    if fast is None:
        return Bound(k, attrs, consts, plain, False)
    return Bound(k, attrs, consts, _guarded(fast, plain, consts), True)


def _guarded(fast: Callable, plain: Callable, consts: tuple[Any, ...]) -> Callable:
    """``fast`` while the constant inputs are the objects it was prepared for, else ``plain``."""
    held = tuple((i, c) for i, c in enumerate(consts) if c is not None)
    if not held:
        return fast
    if len(held) == 1:
        (i0, c0), n0 = held[0], held[0][0] + 1

        def step1(*xs: Any) -> Any:
            return fast(*xs) if len(xs) >= n0 and xs[i0] is c0 else plain(*xs)

        return step1
    n = max(i for i, _ in held) + 1

    def step(*xs: Any) -> Any:
        if len(xs) < n or any(xs[i] is not c for i, c in held):
            return plain(*xs)
        return fast(*xs)

    return step
