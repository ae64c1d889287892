"""Allocation limits: a model must not make us allocate memory its inputs don't justify.

Kernels whose output size comes from tensor *values* (ConstantOfShape, Expand, Tile, Range,
OneHot, Pad, Resize, ...) call :func:`check_elements` before allocating. The limit is a
process-wide setting the user can raise: ``stdops.limits.set_max_elements(n)`` or the
environment variable ``STDOPS_MAX_ELEMENTS``.
"""

from __future__ import annotations

import math
import os

from .errors import ResourceLimitError

#: default: 2**31 elements (8 GiB of float32), far above any model that fits this machine's use
_DEFAULT_MAX_ELEMENTS = 2**31
_max_elements = int(os.environ.get("STDOPS_MAX_ELEMENTS", _DEFAULT_MAX_ELEMENTS))


def max_elements() -> int:
    return _max_elements


def set_max_elements(n: int) -> int:
    """Set the element limit; returns the previous one."""
    global _max_elements
    old, _max_elements = _max_elements, int(n)
    return old


def check_elements(shape, what: str = "output") -> None:
    """Refuse a tensor of ``shape`` (any iterable of ints) above the element limit or with a
    negative dimension."""
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ResourceLimitError(f"{what}: negative dimension in shape {tuple(dims)}")
    n = math.prod(dims)
    if n > _max_elements:
        raise ResourceLimitError(
            f"{what}: shape {tuple(dims)} has {n} elements, above the limit of {_max_elements} "
            f"(raise it with stdops.limits.set_max_elements or STDOPS_MAX_ELEMENTS)"
        )


#: Loop iterations allowed in one Loop (or MDF integration) before it counts as runaway: about a second to
#: a minute of work, never an unbounded hang; raise it with set_max_loop_iterations or the env variable
_max_loop_iterations = int(os.environ.get("STDOPS_MAX_LOOP_ITERATIONS", 1_000_000))


def max_loop_iterations() -> int:
    return _max_loop_iterations


def set_max_loop_iterations(n: int) -> int:
    """Set the Loop iteration cap; returns the previous one."""
    global _max_loop_iterations
    old, _max_loop_iterations = _max_loop_iterations, int(n)
    return old
