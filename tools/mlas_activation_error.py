"""The error of onnxruntime's float32 sigmoid and tanh (MLAS's rational approximations), and a check
that the numpy body's fused multiply-add emulation is exact, over every float32 input.

    python3 tools/mlas_activation_error.py [--stride N]

For every float32 ``x`` in the function's clamping range and beyond (all bit patterns with
``|x| <= 2 * hi``; ``--stride N`` takes every N-th one), in one compiled loop:

* ``mlas(x)``: the sequence of ``onnxkit_default_domain.kernels._mlas`` with true fused
  multiply-adds (LLVM's ``llvm.fma.f32``, the instruction onnxruntime's FMA3 kernel uses);
* ``emulated(x)``: the same with each fused multiply-add computed as the numpy body does (the
  float64 product of two float32 values, exact, plus the coefficient, rounded to float64 and then
  to float32): counted where its bits differ from ``mlas(x)`` (expected: 0);
* the error of ``mlas(x)`` against the exact function evaluated in float64 (libm's ``exp`` and
  ``tanh``, within one float64 ulp): the largest absolute error, and the largest error in units
  in the last place of the float32 value nearest the exact result (``ulp(e)`` = the float32
  spacing at ``|e|``, the subnormal spacing at least), over the whole sweep and over the inputs
  where the exact result is at least 2^-10 in magnitude (the logistic's negative tail, where its
  ``p / q + 0.5`` cancels, has a large relative but a small absolute error);
* against the float32 harness tolerance of Clause 11 / the ONNX 1-3 vectors (``|err| <= 1e-7 +
  1e-3 |exact|``, ``onnxkit.tolerances``): the largest ratio of the error to it, and how many
  inputs exceed it.

Prints one line per function; docs/decisions.md quotes the figures.
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np


def build():
    import numba
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic

    from onnxkit_default_domain.api import MLAS_LOGISTIC, MLAS_TANH

    @intrinsic
    def fma(typingctx, a, b, c):
        def codegen(context, builder, sig, args):
            f32 = ir.FloatType()
            return builder.call(builder.module.declare_intrinsic("llvm.fma", [f32], ir.FunctionType(f32, [f32] * 3)),
                                args)
        return types.float32(types.float32, types.float32, types.float32), codegen

    def tables(table):
        (lo, hi), p, q = table
        return np.float32(lo), np.float32(hi), np.array(p, np.float32), np.array(q, np.float32)

    @numba.njit(nogil=True)
    def rational(v, lo, hi, p, q, emulate):
        if v < lo:
            v = lo
        if v > hi:
            v = hi
        v2 = v * v
        d = np.float64(v2)
        a = p[0]
        for k in range(1, p.shape[0]):
            a = np.float32(np.float64(a) * d + np.float64(p[k])) if emulate else fma(a, v2, p[k])
        b = q[0]
        for k in range(1, q.shape[0]):
            b = np.float32(np.float64(b) * d + np.float64(q[k])) if emulate else fma(b, v2, q[k])
        return (a * v) / b

    @numba.njit(nogil=True)
    def sweep(start, stop, stride, logistic, lo, hi, p, q):
        """Bit patterns [start, stop) of one sign's floats (start, stop as uint32 values)."""
        emu_diff = 0
        worst_abs = 0.0
        worst_ulp = 0.0
        worst_ulp_x = 0.0
        worst_ulp_big = 0.0
        worst_ulp_big_x = 0.0
        worst_harness = 0.0
        worst_harness_x = 0.0
        over_harness = 0
        bits = np.empty(1, np.uint32)
        view = bits.view(np.float32)
        for b in range(start, stop, stride):
            bits[0] = b
            x = view[0]
            m = rational(x, lo, hi, p, q, False)
            e = rational(x, lo, hi, p, q, True)
            if logistic:
                m = m + np.float32(0.5)
                e = e + np.float32(0.5)
                if m < 0:
                    m = np.float32(0.0)
                if e < 0:
                    e = np.float32(0.0)
                exact = 1.0 / (1.0 + math.exp(-np.float64(x)))
            else:
                exact = math.tanh(np.float64(x))
            if m != e and not (m != m and e != e):
                emu_diff += 1
            err = abs(np.float64(m) - exact)
            if err > worst_abs:
                worst_abs = err
            ae = abs(exact)
            ulp = 2.0 ** -149
            if ae >= 2.0 ** -126:
                ulp = 2.0 ** (math.floor(math.log2(ae)) - 23)
                # log2 may round up at a power of two's lower neighbour: keep ulp <= ae * 2^-23
                if ulp > ae * 2.0 ** -23:
                    ulp = ulp / 2
            u = err / ulp
            if u > worst_ulp:
                worst_ulp, worst_ulp_x = u, np.float64(x)
            if ae >= 2.0 ** -10 and u > worst_ulp_big:
                worst_ulp_big, worst_ulp_big_x = u, np.float64(x)
            h = err / (1e-7 + 1e-3 * ae)
            if h > 1.0:
                over_harness += 1
            if h > worst_harness:
                worst_harness, worst_harness_x = h, np.float64(x)
        return (emu_diff, worst_abs, worst_ulp, worst_ulp_x, worst_ulp_big, worst_ulp_big_x, worst_harness,
                worst_harness_x, over_harness)

    return tables(MLAS_LOGISTIC), tables(MLAS_TANH), sweep


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stride", type=int, default=1, help="take every N-th float32 (1: all)")
    ap.add_argument("--only", choices=("logistic", "tanh"), help="one function")
    args = ap.parse_args(argv)
    logistic_t, tanh_t, sweep = build()
    for name, (lo, hi, p, q), logistic in (("logistic", logistic_t, True), ("tanh", tanh_t, False)):
        if args.only and name != args.only:
            continue
        t0 = time.perf_counter()
        top = int(np.array([2 * hi], np.float32).view(np.uint32)[0]) + 1
        total = [0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0]
        count = 0
        for sign in (0, 1 << 31):
            r = sweep(sign, sign + top, args.stride, logistic, lo, hi, p, q)
            count += len(range(sign, sign + top, args.stride))
            total[0] += r[0]
            total[1] = max(total[1], r[1])
            if r[2] > total[2]:
                total[2], total[3] = r[2], r[3]
            if r[4] > total[4]:
                total[4], total[5] = r[4], r[5]
            if r[6] > total[6]:
                total[6], total[7] = r[6], r[7]
            total[8] += r[8]
        print(f"{name}: {count} float32 inputs with |x| <= {2 * float(hi):g}; emulated FMA differs on {total[0]}; "
              f"max abs error {total[1]:.3g}; max error {total[2]:.3g} ulp (at x = {total[3]!r}); "
              f"where |f(x)| >= 2^-10: {total[4]:.3g} ulp (at x = {total[5]!r}); harness tolerance (1e-7 + 1e-3 |f|): "
              f"at most {total[6]:.3g} times it (at x = {total[7]!r}), exceeded on {total[8]} inputs "
              f"[{time.perf_counter() - t0:.0f} s]",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
