"""ops/_llvm_lanes.py's pieces for 8-lane float32 vectors: one ymm register each on AVX2 + FMA machines (16 of
them), where a 16-lane vector would take two and a tile sized for AVX-512's 32 zmm registers spills. The same
attributes as ``Lanes`` (those the AVX2 tiles of ops/_fast_dwtiles.py and ops/_fast_stem.py use), so one codegen
serves both widths. Imported only where numba (and so llvmlite) is installed.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils

VL8 = 8  # float32 lanes of an AVX2 vector


class Lanes8:
    """The 8-lane vector types and intrinsics of one codegen, declared in its builder's module once."""

    def __init__(self, builder: ir.IRBuilder):
        self.builder = builder
        self.f32, self.i32, self.i64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
        self.vec = ir.VectorType(self.f32, VL8)
        self.vptr = self.vec.as_pointer()
        self.mvec = ir.VectorType(ir.IntType(1), VL8)
        self.undef = ir.Constant(self.vec, ir.Undefined)
        self.zero = ir.Constant(self.vec, None)
        self.align = ir.Constant(self.i32, 4)
        mod = builder.module
        vec, vptr, mvec, i32 = self.vec, self.vptr, self.mvec, self.i32
        self.fma = cgutils.get_or_insert_function(mod, ir.FunctionType(vec, [vec, vec, vec]), "llvm.fma.v8f32")
        self.mload = cgutils.get_or_insert_function(
            mod, ir.FunctionType(vec, [vptr, i32, mvec, vec]), "llvm.masked.load.v8f32.p0v8f32"
        )
        self.mstore = cgutils.get_or_insert_function(
            mod, ir.FunctionType(ir.VoidType(), [vec, vptr, i32, mvec]), "llvm.masked.store.v8f32.p0v8f32"
        )
        self._lane0 = ir.Constant(ir.VectorType(i32, VL8), [0] * VL8)

    def splat(self, s: ir.Value) -> ir.Value:
        """The float32 scalar ``s`` in every lane."""
        b = self.builder
        return b.shuffle_vector(b.insert_element(self.undef, s, ir.Constant(self.i32, 0)), self.undef, self._lane0)
