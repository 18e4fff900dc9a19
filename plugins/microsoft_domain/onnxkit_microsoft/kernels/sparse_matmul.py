"""SparseToDenseMatMul (com.microsoft 1): ``Y = alpha * op(A) @ op(B)``, A a rank-2 sparse tensor
(``op`` transposes where ``transA`` / ``transB`` say), B and Y dense rank-2 tensors of A's
element type (float, double, int32, int64, uint32, uint64).

A comes as the runtime carries a sparse value (:mod:`onnxkit.runtime.sparse`: COO with indices
``[nnz, 2]`` or linear, or CSR), or dense where the model's sparse initializer was expanded when
the session was planned.  The product adds ``a * b`` (times alpha) over A's stored values only,
so its cost is ``nnz * N``.  ``alpha`` scales float32 products only: onnxruntime 1.32's CPU
kernel ignores it for every other element type, and onnxkit does as it does (docs/architecture.md).
Batched (rank > 2) operands are refused by name, as onnxruntime refuses them.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable

from ._common import DOMAIN

KERNELS = KernelTable()

_TYPES = ("float32", "float64", "int32", "int64", "uint32", "uint64")


def _coo(ctx, a):
    """``(dense shape, rows, cols, values)`` of sparse or dense ``a`` (host arrays)."""
    if not hasattr(a, "dense_shape"):
        dense = ctx.to_host(a)
        if dense.ndim != 2:
            ctx.fail(f"A must be a rank-2 matrix, got shape {list(dense.shape)}")
        rows, cols = np.nonzero(dense)
        return list(dense.shape), rows, cols, dense[rows, cols]
    shape = [int(d) for d in a.dense_shape()]
    if len(shape) != 2:
        ctx.fail(f"A must be a rank-2 sparse matrix, got dense shape {shape}")
    values = np.asarray(a.values()).reshape(-1)
    fmt = a.format() if callable(a.format) else a.format
    fmt = int(fmt)
    if fmt == 1:  # COO
        idx = np.asarray(a.as_coo_view().indices()).astype(np.int64)
        if idx.ndim == 2 and idx.shape == (values.size, 2):
            rows, cols = idx[:, 0], idx[:, 1]
        elif idx.ndim == 1 and idx.size == values.size:
            rows, cols = np.divmod(idx, max(shape[1], 1))
        else:
            ctx.fail(f"A's COO indices have shape {list(idx.shape)} for {values.size} values: expected "
                     f"[{values.size}, 2] or [{values.size}]")
    elif fmt == 2:  # CSR
        view = a.as_csrc_view()
        inner, outer = np.asarray(view.inner()).astype(np.int64), np.asarray(view.outer()).astype(np.int64)
        if inner.size != values.size or outer.size != shape[0] + 1:
            ctx.fail(f"A's CSR indices do not fit: {inner.size} inner for {values.size} values, {outer.size} outer "
                     f"for {shape[0]} rows (expected {shape[0] + 1})")
        rows, cols = np.repeat(np.arange(shape[0]), np.diff(outer)), inner
    else:
        ctx.fail(f"A's sparse format {fmt} is not supported (COO and CSR are)")
    if rows.size and (rows.min() < 0 or rows.max() >= shape[0] or cols.min() < 0 or cols.max() >= shape[1]):
        ctx.fail(f"A's indices fall outside its dense shape {shape}")
    return shape, rows, cols, values


@KERNELS.register("SparseToDenseMatMul", 1, domain=DOMAIN)
def sparse_to_dense_matmul(ctx):
    alpha = float(ctx.attr("alpha"))
    trans_a, trans_b = bool(ctx.attr("transA")), bool(ctx.attr("transB"))

    def run(a, b):
        shape, rows, cols, values = _coo(ctx, a)
        bh = ctx.to_host(b)
        if bh.ndim != 2:
            ctx.fail(f"B must be a rank-2 matrix, got shape {list(bh.shape)}")
        if bh.dtype.name not in _TYPES:
            ctx.fail(f"B has element type {bh.dtype.name}; SparseToDenseMatMul takes {', '.join(_TYPES)}")
        if values.dtype != bh.dtype:
            ctx.fail(f"A's values are {values.dtype.name} and B is {bh.dtype.name}: they must agree")
        if trans_a:
            rows, cols, shape = cols, rows, shape[::-1]
        bop = bh.T if trans_b else bh
        if shape[1] != bop.shape[0]:
            ctx.fail(f"op(A) is {shape} and op(B) {list(bop.shape)}: inner extents differ")
        y = np.zeros((shape[0], bop.shape[1]), bh.dtype)
        if values.size:
            a_vals = values * np.float32(alpha) if bh.dtype == np.float32 else values
            np.add.at(y, rows, a_vals[:, None] * bop[cols])
        return ctx.from_host(y)

    return run
