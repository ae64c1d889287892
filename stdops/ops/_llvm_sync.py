"""Atomics and a spin wait for compiled kernels that run on two threads at once (numba intrinsics, the ``fast``
extra): numba has no atomics on the CPU, so these are LLVM's atomic instructions on an int64 array's elements.

Why compiled threads meet here rather than through ops/_blas.run_parts alone: a hand-off through its queue costs
~19 us (median, 2-vCPU AMD Zen 2 guest), more than a whole step of an LSTM (~16-20 us at H = 256), so a
recurrence split over two threads runs both halves inside one compiled call each (started once by run_parts) and
meets the other thread once a step through these flags: a few hundred nanoseconds when both threads run.

- :func:`load_acquire`, :func:`store_release`: an element read / written as an atomic (the compiler may neither
  hoist the read out of a spin loop nor move the stores before a release after it; on x86 both are plain moves).
- :func:`claim`: compare-and-swap 0 -> 1; True for the one thread that took the flag.
- :func:`fetch_add`: an atomic add, the value before.
- :func:`wait_at_least`: spin (the ``pause`` hint) until an element reaches a value; after ``_SPINS`` rounds it
  yields the core (``sched_yield``) at every round, as both threads may share one vCPU on a busy host.
- ops/_blas.py's helpers between parts: :func:`release_and_spin` (a helper marks its part done, then spins on the
  bell for the next), :func:`spin_until_set` (the caller waits for a helper's part), :func:`ring` (a first part
  rings the bell from its compiled code).
"""

from __future__ import annotations

from ._fast import numba

__all__ = [
    "claim", "fetch_add", "load_acquire", "release_and_spin", "ring", "spin_until_set", "store_release", "wait_at_least"
]  # fmt: skip

# pause rounds before the wait starts yielding (AMD Zen 2: ~20-25 ns a pause, so ~50 us of spinning; a step's
# half is ~10 us, a thread that has not come by then is most likely descheduled)
_SPINS = 2000

if numba is not None:
    import platform

    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    _X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")

    def _element(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.gep(ary.data, [args[1]])

    def _check(arr):
        return isinstance(arr, types.Array) and arr.dtype == types.int64 and arr.ndim == 1

    @intrinsic
    def load_acquire(typingctx, arr, i):
        """arr[i] read with acquire ordering (int64 array, intp index)."""
        if not _check(arr):
            return None
        sig = types.int64(arr, types.intp)

        def codegen(context, builder, signature, args):
            return builder.load_atomic(_element(context, builder, signature, args), "acquire", 8)

        return sig, codegen

    @intrinsic
    def store_release(typingctx, arr, i, v):
        """arr[i] = v with release ordering."""
        if not _check(arr):
            return None
        sig = types.void(arr, types.intp, types.int64)

        def codegen(context, builder, signature, args):
            builder.store_atomic(args[2], _element(context, builder, signature, args), "release", 8)
            return context.get_dummy_value()

        return sig, codegen

    @intrinsic
    def claim(typingctx, arr, i):
        """Compare-and-swap arr[i] from 0 to 1: True where this thread made the swap."""
        if not _check(arr):
            return None
        sig = types.boolean(arr, types.intp)

        def codegen(context, builder, signature, args):
            i64 = ir.IntType(64)
            pair = builder.cmpxchg(
                _element(context, builder, signature, args), ir.Constant(i64, 0), ir.Constant(i64, 1), "acq_rel",
                "acquire",
            )  # fmt: skip
            return builder.extract_value(pair, 1)

        return sig, codegen

    @intrinsic
    def fetch_add(typingctx, arr, i, v):
        """arr[i] += v atomically (acquire-release); the value before."""
        if not _check(arr):
            return None
        sig = types.int64(arr, types.intp, types.int64)

        def codegen(context, builder, signature, args):
            return builder.atomic_rmw("add", _element(context, builder, signature, args), args[2], "acq_rel")

        return sig, codegen

    @intrinsic
    def _relax(typingctx, rounds):
        """One round of a spin wait: the ``pause`` hint, and from round ``_SPINS`` on ``sched_yield()``."""
        sig = types.void(types.int64)

        def codegen(context, builder, signature, args):
            mod = builder.module
            if _X86:
                builder.call(
                    cgutils.get_or_insert_function(mod, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause"), []
                )
            late = builder.icmp_signed(">=", args[0], ir.Constant(ir.IntType(64), _SPINS))
            with builder.if_then(late, likely=False):
                fnty = ir.FunctionType(ir.IntType(32), [])
                builder.call(cgutils.get_or_insert_function(mod, fnty, "sched_yield"), [])
            return context.get_dummy_value()

        return sig, codegen

    @numba.njit(cache=True, nogil=True, inline="always")
    def wait_at_least(arr, i, value):  # pragma: no cover - compiled
        """Spin until arr[i] >= value (read with acquire ordering)."""
        rounds = 0
        while load_acquire(arr, i) < value:
            _relax(rounds)
            rounds += 1

    @numba.njit(cache=True, nogil=True, inline="always")
    def ring(bell, count):  # pragma: no cover - compiled
        """bell[0] += count where count > 0 (ops/_blas.run_parts' ``first_rings``: the helpers may take the parts)."""
        if count > 0:
            fetch_add(bell, 0, count)

    @numba.njit(cache=True, nogil=True)
    def release_and_spin(done, count, seen, rounds, run_rounds, settle):  # pragma: no cover - compiled
        """done[0] = 1 (release order), then spin (``pause`` only, never yielding) until count[0] != seen or
        ``rounds`` rounds have passed (``run_rounds`` while count[1] != 0); after a change ``settle`` rounds more.
        count[0] as last read.

        ops/_blas.py's helpers wait here for the next part, outside the GIL: a thread that sleeps on a 2-vCPU
        guest's halted core takes tens of microseconds to wake. ``settle`` lets the caller that rang enter its own
        part (releasing the GIL) before the helper asks for the GIL, so that the helper does not sleep on it."""
        store_release(done, 0, 1)
        v = load_acquire(count, 0)
        k = 0
        while v == seen:
            if k >= (run_rounds if load_acquire(count, 1) != 0 else rounds):
                break
            _relax(0)
            k += 1
            v = load_acquire(count, 0)
        if v != seen:
            for _ in range(settle):
                _relax(0)
        return v

    @numba.njit(cache=True, nogil=True)
    def spin_until_set(flag, rounds):  # pragma: no cover - compiled
        """Spin (``pause`` only) until flag[0] != 0 (acquire order) or ``rounds`` rounds have passed; whether set."""
        k = 0
        while load_acquire(flag, 0) == 0:
            if k >= rounds:
                return False
            _relax(0)
            k += 1
        return True
