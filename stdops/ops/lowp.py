"""The low-precision number types (bfloat16, the float8 family, float4/float6, int4/uint4, int2/uint2).

NumPy has no such dtypes; ``ml_dtypes`` provides them. Importing it costs 0.5-1.8 s, so no module imports
it at import time: ``types()`` imports it on first use and returns the dtype sets the kernels test
against. Kernels rely on ml_dtypes only for storage and for round-to-nearest-even of *in-range* values;
every rule for out-of-range, NaN and Inf values is computed by the kernels themselves (see ``cast.py``).
"""

from __future__ import annotations

import dataclasses
import functools
from types import ModuleType

import numpy as np


@dataclasses.dataclass(frozen=True)
class LowPrecisionTypes:
    module: ModuleType  # ml_dtypes
    bfloat16: np.dtype
    float8: frozenset[np.dtype]  # e4m3fn, e4m3fnuz, e5m2, e5m2fnuz: the ones Cast's ``saturate`` governs
    e8m0: np.dtype
    float4: np.dtype  # float4_e2m1fn
    floats: frozenset[np.dtype]  # every ml_dtypes float (bfloat16, float8 incl. e8m0, float4, float6)
    ints: frozenset[np.dtype]  # int4, uint4, int2, uint2
    bits: dict[np.dtype, int]  # storage bits of the sub-byte types

    def iinfo(self, dt: np.dtype) -> tuple[int, int]:
        """(min, max) of an integer dtype, NumPy's or a sub-byte one."""
        info = np.iinfo(dt) if dt.kind in "iu" else self.module.iinfo(dt)
        return int(info.min), int(info.max)


@functools.cache
def types() -> LowPrecisionTypes:
    import ml_dtypes as m

    f8 = frozenset(np.dtype(t) for t in (m.float8_e4m3fn, m.float8_e4m3fnuz, m.float8_e5m2, m.float8_e5m2fnuz))
    e8m0 = np.dtype(m.float8_e8m0fnu)
    f4 = np.dtype(m.float4_e2m1fn)
    f6 = frozenset(np.dtype(t) for t in (m.float6_e2m3fn, m.float6_e3m2fn))
    bf16 = np.dtype(m.bfloat16)
    ints = frozenset(np.dtype(t) for t in (m.int4, m.uint4, m.int2, m.uint2))
    bits = {np.dtype(m.int4): 4, np.dtype(m.uint4): 4, f4: 4, np.dtype(m.int2): 2, np.dtype(m.uint2): 2}
    bits.update({d: 6 for d in f6})
    return LowPrecisionTypes(m, bf16, f8, e8m0, f4, f8 | f6 | {bf16, e8m0, f4}, ints, bits)


def is_low_precision(dt: np.dtype) -> bool:
    """True for the ml_dtypes types; never imports ml_dtypes (their scalar types live in that module)."""
    return np.dtype(dt).type.__module__.startswith("ml_dtypes")
