"""Linear algebra operators of ai.onnx.

Operators and the definitions (since_versions) implemented:

* Gemm 1, 6 (``broadcast`` attribute: 0 = C must already be (M, N), 1 = C broadcasts),
  7, 9, 11 (C optional), 13 - ``alpha``, ``beta``, ``transA``, ``transB``.
* MatMul 1, 9, 13 (numpy-style: 1-D operands promoted, batch dimensions broadcast).
* MatMulInteger 10 (zero points: scalar, per row of A, per column of B; int32 output).
* Einsum 12, 28 (explicit and implicit forms, ellipsis, spaces, upper/lower case labels).
* Det 11, 22.

float16 and bfloat16 are computed in float32 (numpy has no BLAS path for them) and rounded
once; float32/float64 go through numpy's BLAS.  Integer products stay integer.
"""

from __future__ import annotations

import numpy as np

from onnxkit.runtime import KernelTable

from .nn_conv import compute_dtype

KERNELS = KernelTable()


def _work(a):
    """``a`` in the dtype products are computed in (ints unchanged, narrow floats -> float32)."""
    if a.dtype.kind in "iub":
        return a
    return a.astype(compute_dtype(a.dtype), copy=False)


@KERNELS.register("Gemm", 1, 6, 7, 9, 11, 13)
def gemm(ctx):
    alpha = float(ctx.attr("alpha", 1.0))
    beta = float(ctx.attr("beta", 1.0))
    trans_a = bool(ctx.attr("transA", 0))
    trans_b = bool(ctx.attr("transB", 0))
    strict_c = ctx.since_version < 7 and not ctx.attr("broadcast", 0)

    def scaled(v, k):
        if k == 1.0:
            return v
        if v.dtype.kind in "iu":
            return (v * np.float64(k)).astype(v.dtype)
        return v * v.dtype.type(k)

    def run(a, b, c=None):
        if a.ndim != 2 or b.ndim != 2:
            ctx.fail(f"A and B must be 2-D, got shapes {a.shape} and {b.shape}")
        aw, bw = _work(a), _work(b)
        if trans_a:
            aw = aw.T
        if trans_b:
            bw = bw.T
        if aw.shape[1] != bw.shape[0]:
            ctx.fail(f"inner dimensions differ: A' is {aw.shape}, B' is {bw.shape}")
        y = scaled(aw @ bw, alpha)
        if c is not None and beta != 0.0:
            m, n = y.shape
            if strict_c and c.shape != (m, n):
                ctx.fail(f"C has shape {c.shape}; with broadcast = 0 it must be {(m, n)}")
            try:
                ok = np.broadcast_shapes(c.shape, y.shape) == y.shape
            except ValueError:
                ok = False
            if not ok:
                ctx.fail(f"C of shape {c.shape} does not broadcast to {(m, n)}")
            y = y + scaled(_work(c).astype(y.dtype, copy=False), beta)
        return y.astype(a.dtype, copy=False)

    return run


@KERNELS.register("MatMul", 1, 9, 13)
def matmul(ctx):
    def run(a, b):
        if a.ndim == 0 or b.ndim == 0:
            ctx.fail("MatMul operands must have rank 1 or more")
        try:
            y = np.matmul(_work(a), _work(b))
        except ValueError as exc:
            ctx.fail(f"shapes {a.shape} and {b.shape} do not multiply: {exc}")
        return np.asarray(y).astype(a.dtype, copy=False)

    return run


@KERNELS.register("MatMulInteger", 10)
def matmul_integer(ctx):
    def run(a, b, a_zero_point=None, b_zero_point=None):
        af = a.astype(np.float64)
        bf = b.astype(np.float64)
        if a_zero_point is not None:
            zp = a_zero_point.astype(np.float64).reshape(-1)
            if zp.size == 1:
                af -= zp[0]
            elif af.ndim >= 2 and zp.size == af.shape[-2]:
                af -= zp.reshape(-1, 1)
            else:
                ctx.fail(f"a_zero_point has {zp.size} values for A of shape {a.shape}")
        if b_zero_point is not None:
            zp = b_zero_point.astype(np.float64).reshape(-1)
            if zp.size == 1:
                bf -= zp[0]
            elif bf.ndim >= 2 and zp.size == bf.shape[-1]:
                bf -= zp
            else:
                ctx.fail(f"b_zero_point has {zp.size} values for B of shape {b.shape}")
        try:
            y = np.matmul(af, bf)
        except ValueError as exc:
            ctx.fail(f"shapes {a.shape} and {b.shape} do not multiply: {exc}")
        return np.rint(y).astype(np.int64).astype(np.int32)

    return run


@KERNELS.register("Einsum", 12, 28)
def einsum(ctx):
    eq = ctx.attr_str("equation").replace(" ", "")
    lhs = eq.split("->")[0]
    n_terms = len(lhs.split(","))
    if eq.count("->") > 1:
        ctx.fail(f"equation {eq!r} has more than one '->'")
    allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ,.->")
    if not set(eq) <= allowed:
        ctx.fail(f"equation {eq!r} has characters other than letters, ',', '...' and '->'")

    def run(*inputs):
        if len(inputs) != n_terms:
            ctx.fail(f"the equation has {n_terms} terms but {len(inputs)} inputs were given")
        dt = inputs[0].dtype
        ops = [_work(x) for x in inputs]
        try:
            y = np.einsum(eq, *ops, optimize=len(ops) > 2)
        except ValueError as exc:
            ctx.fail(f"equation {eq!r} does not apply to shapes {[x.shape for x in inputs]}: {exc}")
        return np.asarray(y).astype(dt, copy=False)

    return run


@KERNELS.register("Det", 11, 22)
def det(ctx):
    def run(x):
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            ctx.fail(f"X must be (..., M, M), got {x.shape}")
        return np.asarray(np.linalg.det(x.astype(compute_dtype(x.dtype), copy=False))).astype(x.dtype)

    return run
