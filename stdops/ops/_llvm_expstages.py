"""The exp stages of ops/_fast_epilogue.py (the sigmoid and tanh its scalar loops compute) as LLVM IR on 16-lane
float32 vectors, for kernels whose gates stay in registers (ops/_fast_rnn.py's LSTM groups): each operation the one
numba's scalar code performs, in its order, so that every lane rounds as that code does: without contraction or
fast-math flags, except the sigmoid, whose multiply-adds are fused as in _fast_epilogue._sigmoid_span (compiled with
contraction). Imported only where numba (and so llvmlite) is installed.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils

from ._llvm_lanes import VL

__all__ = ["ExpStages"]


class ExpStages:
    """LLVM IR for <16 x float> arithmetic, each operation the one numba's scalar code of ops/_fast_epilogue.py
    performs (the sigmoid's multiply-adds fused as there, nothing else contracted), so that a vector lane rounds
    exactly as that code does."""

    def __init__(self, builder):
        self.b = builder
        self.f32, self.i32 = ir.FloatType(), ir.IntType(32)
        self.vec = ir.VectorType(self.f32, VL)
        self.ivec = ir.VectorType(self.i32, VL)
        mod = builder.module
        self._floor = cgutils.get_or_insert_function(mod, ir.FunctionType(self.vec, [self.vec]), "llvm.floor.v16f32")
        self._fabs = cgutils.get_or_insert_function(mod, ir.FunctionType(self.vec, [self.vec]), "llvm.fabs.v16f32")
        fma_type = ir.FunctionType(self.vec, [self.vec] * 3)
        self._fma = cgutils.get_or_insert_function(mod, fma_type, "llvm.fma.v16f32")

    def c(self, v):
        return ir.Constant(self.vec, [float(np.float32(v))] * VL)

    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def sel(self, cond, a, b):
        return self.b.select(cond, a, b)

    def cmp(self, op, a, b):
        return self.b.fcmp_ordered(op, a, b)

    def fma(self, a, b, c):
        return self.b.call(self._fma, [a, b, c])

    def floor(self, a):
        return self.b.call(self._floor, [a])

    def fabs(self, a):
        return self.b.call(self._fabs, [a])

    def madd(self, a, b, c, fused: bool):
        """a b + c: one fused multiply-add, or a product then a sum (each rounded)."""
        return self.fma(a, b, c) if fused else self.add(self.mul(a, b), c)

    def exp_poly(self, r, fused: bool = False):  # _fast_epilogue._exp_poly
        p = self.c(1.9875691500e-4)
        for k in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
            p = self.madd(p, r, self.c(k), fused)
        return self.add(self.madd(p, self.mul(r, r), r, fused), self.c(1.0))

    def exp_neg_abs(self, a, fused: bool = False):
        # exp(-|a|) as _fast_epilogue's exp stages: Cody-Waite by ln 2, the polynomial, 2^n by the exponent bits,
        # 0 where |a| >= 87; ``fused``: with _fast_epilogue._sigmoid_span's fused multiply-adds (its products and
        # their sums contracted)
        t = self.b.fneg(self.fabs(a))
        t = self.sel(self.cmp(">", t, self.c(-87.0)), t, self.c(-87.0))
        n = self.floor(self.madd(t, self.c(1.4426950408889634), self.c(0.5), fused))
        ln2_hi = self.c(0.693359375)
        r = self.fma(self.b.fneg(n), ln2_hi, t) if fused else self.sub(t, self.mul(n, ln2_hi))
        r = self.madd(n, self.c(2.12194440e-4), r, fused)
        q = self.exp_poly(r, fused)
        bits = self.b.shl(
            self.b.add(self.b.fptosi(n, self.ivec), ir.Constant(self.ivec, [127] * VL)),
            ir.Constant(self.ivec, [23] * VL),
        )
        e = self.mul(q, self.b.bitcast(bits, self.vec))
        inside = self.b.and_(self.cmp(">", a, self.c(-87.0)), self.cmp("<", a, self.c(87.0)))
        return self.sel(inside, e, self.c(0.0))

    def sigmoid(self, x):  # _act_chunk's ACT_SIGMOID (_fast_epilogue._sigmoid_span)
        ex = self.exp_neg_abs(x, fused=True)
        num = self.sel(self.cmp("<", x, self.c(0.0)), ex, self.c(1.0))
        s = self.div(num, self.add(self.c(1.0), ex))
        return self.sel(self.cmp("==", x, x), s, x)

    def tanh(self, x):  # _tanh_chunk
        e = self.exp_neg_abs(self.mul(self.c(2.0), x))
        x2 = self.mul(x, x)
        p = self.c(62.0 / 2835.0)
        p = self.sub(self.mul(p, x2), self.c(17.0 / 315.0))
        p = self.add(self.mul(p, x2), self.c(2.0 / 15.0))
        p = self.sub(self.mul(p, x2), self.c(1.0 / 3.0))
        small = self.add(x, self.mul(x, self.mul(x2, p)))
        big = self.div(self.sub(self.c(1.0), e), self.add(self.c(1.0), e))
        big = self.sel(self.cmp(">=", x, self.c(0.0)), big, self.b.fneg(big))
        return self.sel(self.cmp("<", self.fabs(x), self.c(0.3)), small, self.sel(self.cmp("==", x, x), big, x))
