"""The vector pieces the compiled kernels' LLVM code shares (numba ``@intrinsic`` codegen in ops/_fast_conv.py,
_fast_stem.py, _fast_pointwise.py, _fast_dwtiles.py, _fast_rnn.py): float32 vectors of 16 (or 8) lanes, the fused
multiply-add, masked loads and stores, a scalar broadcast, an array argument's data pointer.

Why LLVM intrinsics at all: numba's own loops keep a register tile's accumulators in memory and emit 256-bit
vectors on this kind of machine; a tile written as LLVM vector values stays in the 32 zmm registers
(ops/_fast_conv.py's module doc has the measurement). Imported only where numba (and so llvmlite) is installed.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils

VL = 16  # float32 lanes of an AVX-512 vector


class Lanes:
    """The vector types and intrinsics of one codegen, declared in its builder's module once: vectors of ``width``
    float32 lanes (16: one AVX-512 register, two AVX2 ones; 8: one AVX2 register, the AVX2 tiles of
    ops/_fast_dwtiles.py and ops/_fast_stem.py, where a 16-lane tile would spill AVX2's 16 registers)."""

    def __init__(self, builder: ir.IRBuilder, width: int = VL):
        self.builder, self.width = builder, width
        self.f32, self.i32, self.i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
        self.vec = ir.VectorType(self.f32, width)
        self.vptr = self.vec.as_pointer()
        self.mvec = ir.VectorType(ir.IntType(1), width)  # a lane mask
        self.undef = ir.Constant(self.vec, ir.Undefined)
        self.zero = ir.Constant(self.vec, None)
        self.align = ir.Constant(self.i32, 4)  # float32 alignment: the kernels' pointers are element-aligned
        mod = builder.module
        vec, vptr, mvec, i32 = self.vec, self.vptr, self.mvec, self.i32
        v = f"v{width}f32"
        self.fma = cgutils.get_or_insert_function(mod, ir.FunctionType(vec, [vec, vec, vec]), f"llvm.fma.{v}")
        self.mload = cgutils.get_or_insert_function(
            mod, ir.FunctionType(vec, [vptr, i32, mvec, vec]), f"llvm.masked.load.{v}.p0{v}"
        )
        self.mstore = cgutils.get_or_insert_function(
            mod, ir.FunctionType(ir.VoidType(), [vec, vptr, i32, mvec]), f"llvm.masked.store.{v}.p0{v}"
        )
        self._lane0 = ir.Constant(ir.VectorType(i32, width), [0] * width)

    def splat(self, s: ir.Value) -> ir.Value:
        """The float32 scalar ``s`` in every lane."""
        b = self.builder
        return b.shuffle_vector(b.insert_element(self.undef, s, ir.Constant(self.i32, 0)), self.undef, self._lane0)

    def clamp(self, t: ir.Value, lo: ir.Value, hi: ir.Value) -> ir.Value:
        """t below lo -> lo, then above hi -> hi, lane by lane (ordered compares: NaN stays NaN), the clip of every
        tile."""
        b = self.builder
        t = b.select(b.fcmp_ordered("<", t, lo), lo, t)
        return b.select(b.fcmp_ordered(">", t, hi), hi, t)

    def mask(self, lanes: ir.Value) -> ir.Value:
        """The mask of the first ``lanes`` (an i64 value, 0..width) lanes: bit j of (1 << lanes) - 1."""
        b = self.builder
        bits = b.sub(b.shl(ir.Constant(self.i64, 1), lanes), ir.Constant(self.i64, 1))
        return b.bitcast(b.trunc(bits, ir.IntType(self.width)), self.mvec)


def data(context, builder, signature, args, i: int) -> ir.Value:
    """The data pointer of the codegen's array argument ``i``."""
    return context.make_array(signature.args[i])(context, builder, args[i]).data
