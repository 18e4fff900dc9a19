"""cpu overrides of Gemm and MatMul (``onnxkit_default_domain/kernels/linalg.py``).

float32 / float64 products call ``np.matmul`` itself (BLAS) with the portable family's checks
(:func:`~onnxkit_default_domain.kernels.linalg.gemm_checker`, ``matmul_checker``: once per
signature); initializers arrive aligned (the planner copies unaligned ones once, see
``Planner._owned``).  Gemm scales and adds C in place into the product it made: the same
operations on the same values as the portable kernel (bit-identical).  Other element types
run the portable kernels, but float16 and bfloat16, which run the float32 body on their values
widened to float32 (a held weight widened once: :class:`~.half.Wide`) and round the result once
(:mod:`.half`: Clause 11.4).  MatMul of float32 / float64 takes the portable check once per
element type, then passes extents the plain rule passes (:func:`plain_extents`) without
remembering them (a decoder's attention has new extents every token).  A float32 / float64
MatMul of a C-contiguous A of rank 3 or more by a W of rank 2 whose slices are short (fewer than
:data:`FLAT_ROWS` rows) and whose W is large (at least :data:`FLAT_WEIGHT` elements) is made as
one product over A's rows flattened (:func:`flat_rows`): numpy's stacked product makes one BLAS
call per slice, each packing all of W again.  That is a different BLAS call than the stacked
one: each element is still one dot product over K, but BLAS may block and sum it in another
order, so the result agrees with the stacked product within float rounding, not bit for bit
(and is the same bits at any thread count).  A MatMul whose B is a constant float32 / float64
matrix is bound to it at planning (:func:`~onnxkit.runtime.kernel.binds_constants`): an A of
B's type (once the portable check passed that type) of rank 2 or more with B's inner extent
takes the same product with the plain rule's checks decided for that B (nothing to broadcast
against a matrix), any other A the general path.  MatMul offers the plan's epilogue
(:mod:`onnxkit.runtime.optimizer.epilogue`): a following Add whose other operand is a numpy
array of the product's float32 / float64 type broadcasting to the product's shape is added in
place into the product it just made (``np.add`` with the operands in the graph's order: the
Add kernel's bits, without its fresh array), and a Relu after it or after the product likewise
in place (``np.maximum(y, 0)``, the cpu Relu's operation); any other operand, and a Clip, run
their own kernels on the product (:func:`epilogue`).  A fused step whose B is a constant
float32 / float64 matrix is bound to it as the product is.  Both run with numpy's
floating-point warnings off (``quiet``, as the cpu Add): an inf times a zero in a product is a
NaN result, not a warning.
"""

from __future__ import annotations

import numpy as np
from onnxkit_default_domain.api import linalg as portable
from onnxkit_default_domain.api import gemm_attrs, gemm_checker, matmul_checker, quiet

from onnxkit.plugin import KernelTable, binds_constants, offers_epilogue

from .half import Halves, Wide, is_half, narrow


KERNELS = KernelTable()
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@KERNELS.register("Gemm", 1, 6, 7, 9, 11, 13)
def gemm(ctx):
    alpha, beta, trans_a, trans_b, strict_c = gemm_attrs(ctx)
    check = gemm_checker(ctx, trans_a, trans_b, strict_c)
    other = portable.gemm(ctx)
    h = Halves.of(ctx)
    wa, wb, wc = Wide.of(ctx, 0, h), Wide.of(ctx, 1, h), Wide.of(ctx, 2, h)

    def run(a, b, c=None):
        if a.dtype not in _FLOATS:
            if is_half(a.dtype) and b.dtype == a.dtype and (c is None or c.dtype == a.dtype):
                return narrow(run(wa(a), wb(b), wc(c)), a.dtype, h)
            return other(a, b, c)
        c = c if beta != 0.0 else None
        check(a, b, c)
        y = np.matmul(a.T if trans_a else a, b.T if trans_b else b)
        if alpha != 1.0:
            np.multiply(y, alpha, out=y)
        if c is not None:
            np.add(y, c if beta == 1.0 else c * beta, out=y)
        return y

    return quiet(run)


def plain_extents(sa: tuple, sb: tuple) -> bool:
    """Whether ``sa`` @ ``sb`` are a MatMul's extents by the plain rule alone: both of rank 2 or
    more, the inner extents equal, the batch extents broadcasting (equal, or one of them 1,
    Clause 6.6.2) — the portable check's own rule, under which it asks nothing more."""
    if len(sa) < 2 or len(sb) < 2 or sa[-1] != sb[-2]:
        return False
    for p, q in zip(reversed(sa[:-2]), reversed(sb[:-2])):
        if p != q and p != 1 and q != 1:
            return False
    return True


#: slices of fewer rows than this are flattened into one product (with a large W)
FLAT_ROWS = 64
#: the fewest elements of W for which short slices are flattened into one product
FLAT_WEIGHT = 1 << 16


def flat_rows(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a @ b`` (extents already checked) is made as one product of ``a``'s rows
    flattened: ``b`` of rank 2 with at least :data:`FLAT_WEIGHT` elements, ``a`` C-contiguous
    (the flattening is a view) of rank 3 or more, more than one slice, each of fewer than
    :data:`FLAT_ROWS` rows."""
    return (b.ndim == 2 and a.ndim > 2 and a.shape[-2] < FLAT_ROWS and b.size >= FLAT_WEIGHT
            and a.size > a.shape[-2] * a.shape[-1] and a.flags.c_contiguous)


@KERNELS.register("MatMul", 1, 9, 13)
def matmul(ctx):
    check = matmul_checker(ctx)
    other = portable.matmul(ctx)
    h = Halves.of(ctx)
    wa, wb = Wide.of(ctx, 0, h), Wide.of(ctx, 1, h)
    passed: set = set()   # float element types a signature of which passed the portable check

    def run(a, b):
        dt = a.dtype
        if dt not in _FLOATS:
            if is_half(dt) and b.dtype == dt:
                return narrow(run(wa(a), wb(b)), dt, h)
            return other(a, b)
        # the portable check once per element type; after it, both of that type and extents the
        # plain rule passes are all it would check (a decoder's new extents: no signature kept)
        if not (dt in passed and b.dtype == dt and plain_extents(a.shape, b.shape)):
            check(a, b)
            passed.add(dt)
        if flat_rows(a, b):
            return np.matmul(a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + b.shape[1:])
        y = np.matmul(a, b)
        return y if a.ndim + b.ndim > 2 else np.asarray(y)    # numpy gives a scalar for 1-D by 1-D

    def fuse_epilogue(ops):
        """MatMul + Add (then Relu / Clip) as one step, itself bound to a constant B as the
        product is (:func:`weight_product`); declines a Swish."""
        if any(o[0] not in ("Add", "Relu", "Clip") for o in ops):
            return None

        def bind_fused(w):
            product = weight_product(w)
            return None if product is None else quiet(epilogue(product, ops))

        return binds_constants(quiet(epilogue(run, ops)), bind_fused, 1)

    def bind(w):
        """``run`` for a constant B (see :func:`weight_product`), numpy's warnings off."""
        product = weight_product(w)
        return None if product is None else quiet(product)

    def weight_product(w):
        """``run`` for a constant B: a float32 / float64 numpy matrix (else None: ``run`` serves)."""
        if type(w) is not np.ndarray or w.ndim != 2 or w.dtype not in _FLOATS:
            return None
        wt, k, large = w.dtype, w.shape[0], w.size >= FLAT_WEIGHT

        def with_weight(a, b):
            # what ``run`` decides for this B, in fewer steps: an A of B's type after the portable
            # check passed that type, of rank 2 or more with B's inner extent, is the plain rule
            # (no batch extents of B to broadcast); flat rows only where B is large; any other A,
            # or a B that is not the bound one, goes through ``run`` (its checks, its failures)
            if b is not w or type(a) is not np.ndarray or a.dtype != wt or wt not in passed or a.ndim < 2 \
                    or a.shape[-1] != k:
                return run(a, b)
            if large and flat_rows(a, b):
                return np.matmul(a.reshape(-1, k), b).reshape((*a.shape[:-1], b.shape[1]))
            return np.matmul(a, b)

        return with_weight

    return binds_constants(offers_epilogue(quiet(run), fuse_epilogue, 2), bind, 1)


#: (extent, dtype) -> a read-only row of zeros (the in-place Relu's second operand)
_ZEROS: dict = {}


def zero_row(y: np.ndarray):
    """Zeros along ``y``'s last axis (0 where ``y`` is 0-d), of ``y``'s type, to ``np.maximum``
    ``y`` with: the same results as the scalar 0 — NaN keeps its bits, -0 gives +0 — and numpy's
    vectorized two-array loop, where a scalar operand takes a slower one."""
    if y.ndim == 0:
        return 0
    key = (y.shape[-1], y.dtype)
    z = _ZEROS.get(key)
    if z is None:
        if len(_ZEROS) >= 256:
            _ZEROS.clear()
        z = _ZEROS[key] = np.zeros(key[0], key[1])
        z.flags.writeable = False
    return z


#: a C-contiguous array of at least this many elements, whose last axis holds at least
#: :data:`RELU_ROW_MIN_LAST`, is rectified against a row of zeros (:func:`rectify`): numpy's
#: two-array loop, faster there than its loop with a scalar operand (slower on short rows)
RELU_ROW_MIN_SIZE = 4096
RELU_ROW_MIN_LAST = 32


def rectify(x: np.ndarray, out=...):
    """``np.maximum(x, 0, out=out)`` (the cpu Relu: NaN keeps its bits, -0 gives +0), against
    :func:`zero_row` where ``x`` is large and C-contiguous with long rows (the same results)."""
    if x.size >= RELU_ROW_MIN_SIZE and x.shape[-1] >= RELU_ROW_MIN_LAST and x.flags.c_contiguous:
        return np.maximum(x, zero_row(x), out=out)
    return np.maximum(x, 0, out=out)


def epilogue(product, ops):
    """``product``'s result then ``ops`` (the epilogue protocol's tuple) applied to it: an Add of
    a numpy operand of the result's float32 / float64 type whose shape broadcasts to the
    result's is ``np.add`` into the result in place, in the graph's operand order (the result is
    the fresh array the product made), and a Relu on a float32 / float64 result ``np.maximum(y,
    0)`` in place (the cpu Relu's operation, :func:`rectify`); any other Add, a
    Relu of another type and a Clip, the consumer's own kernel."""
    def fused(a, b, r=None):
        direct = a.dtype in _FLOATS
        y = product(a, b)
        for kind, fn, side in ops:
            if kind == "Relu" and direct:
                rectify(y, out=y)
            elif kind != "Add":
                y = fn(y)
            elif direct and type(r) is np.ndarray and r.dtype == y.dtype and r.ndim <= y.ndim \
                    and all(p == q or p == 1 for p, q in zip(r.shape[::-1], y.shape[::-1])):
                np.add(y, r, out=y) if side == 0 else np.add(r, y, out=y)
            else:
                y = fn(y, r) if side == 0 else fn(r, y)
        return y
    return fused
