"""Linear algebra of ai.onnx, for every backend: Gemm, MatMul, MatMulInteger, Einsum, Det.

Products follow numpy's rules (MatMul: 1-D operands promoted, batch dimensions broadcast);
the output shapes and their checks are the inference functions' own
(:func:`~onnxkit_default_domain.inference.nn.matmul_dims`, :func:`~.inference.nn.gemm_dims`).
Element types are checked against the definition the node binds to (its type constraints:
integer types from MatMul/Gemm-9, bfloat16 from 13, Det bfloat16 from 22...).

float16 and bfloat16 are computed in float32 and rounded once; float32/float64 through the
namespace's matmul (BLAS for numpy).  Integer products stay integer and wrap as two's
complement; where the device has no integer matrix product (torch on CUDA) they are one
broadcast multiply and a sum, exact.  Gemm-6 and older honour ``broadcast`` (0: C must
already be (M, N)); C is optional from Gemm-11.  MatMulInteger takes zero points per
tensor, per row of A or per column of B, and computes exactly in float64 (|products| < 2^16).
"""

from __future__ import annotations

import math


from onnxkit.plugin import KernelTable, arrays, calls_blas, size_guard

from ..inference.nn import gemm_dims, matmul_dims
from ._common import check_dtype, compute_dtype, device_of, schema_types, shape_of

KERNELS = KernelTable()

def work(xp, a):
    """``a`` in the dtype products are computed in: integers and float32/64 as they are, the
    narrow floats in float32."""
    if arrays.is_integer(a.dtype) or arrays.is_bool(a.dtype):
        return a
    return xp.astype(a, compute_dtype(xp, a.dtype), copy=False)


def native_integer_products(x) -> bool:
    """True where the namespace multiplies integer matrices itself (the host CPU: numpy, torch)."""
    dev = device_of(x)
    return getattr(dev, "type", dev) == "cpu"


def int_matmul(a, b, force_broadcast: bool = False):
    """Exact, wrapping integer matmul with numpy's 1-D promotion rules; a broadcast multiply
    and sum (accumulated in int64) where the device has no integer product, or when
    ``force_broadcast``."""
    import array_api_compat  # imported where a kernel first needs it (not on the import path)

    xp = array_api_compat.array_namespace(a, b)
    if native_integer_products(a) and not force_broadcast:
        return xp.matmul(a, b)
    a1 = a[None, :] if a.ndim == 1 else a
    b1 = b[:, None] if b.ndim == 1 else b
    y = xp.sum(a1[..., :, :, None] * b1[..., None, :, :], axis=-2, dtype=xp.int64)
    y = xp.astype(y, a.dtype)
    if b.ndim == 1:
        y = y[..., 0]
    if a.ndim == 1:
        y = y[..., 0] if b.ndim == 1 else y[..., 0, :]
    return y


def remember(checked: set, key) -> None:
    """Note the input signature ``key`` as checked (at most a few hundred kept)."""
    if len(checked) > 256:
        checked.clear()
    checked.add(key)


def product(xp, a, b):
    """``a @ b`` (both already in the compute dtype)."""
    if arrays.is_integer(a.dtype):
        return int_matmul(a, b)
    return xp.matmul(a, b)


# -- Gemm --------------------------------------------------------------------------------------
def gemm_attrs(ctx) -> tuple:
    """Gemm's ``(alpha, beta, transA, transB, strict_c)``; ``strict_c``: C must already be
    (M, N) (Gemm-6 and older without ``broadcast``)."""
    return (float(ctx.attr("alpha")), float(ctx.attr("beta")), bool(ctx.attr("transA")),
            bool(ctx.attr("transB")), ctx.since_version < 7 and not ctx.attr("broadcast", 0))


def gemm_checker(ctx, trans_a: bool, trans_b: bool, strict_c: bool):
    """``check(a, b, c)``: fails naming the node unless the element types and shapes are a
    Gemm's (``c`` None: no C); each checked signature is remembered."""
    allowed = schema_types(ctx, "T")
    checked = set()

    def check(a, b, c):
        key = (a.shape, b.shape, a.dtype, b.dtype, None if c is None else (c.shape, c.dtype))
        if key not in checked:
            check_dtype(ctx, a, allowed, "A")
            check_dtype(ctx, b, (arrays.dtype_name(a.dtype),), "B")
            if c is not None:
                check_dtype(ctx, c, (arrays.dtype_name(a.dtype),), "C")
            gemm_dims(ctx, shape_of(a), shape_of(b), None if c is None else shape_of(c), trans_a, trans_b, strict_c)
            remember(checked, key)

    return check


@KERNELS.register("Gemm", 1, 6, 7, 9, 11, 13)
@size_guard("gemm")
@calls_blas
def gemm(ctx):
    xp = ctx.xp
    alpha, beta, trans_a, trans_b, strict_c = gemm_attrs(ctx)
    check = gemm_checker(ctx, trans_a, trans_b, strict_c)

    def scaled(v, k):
        if k == 1.0:
            return v
        if arrays.is_integer(v.dtype):   # scaled in float64, truncated toward zero
            return xp.astype(xp.astype(v, xp.float64) * k, v.dtype)
        return v * k

    def run(a, b, c=None):
        c = c if beta != 0.0 else None
        check(a, b, c)
        narrow = arrays.is_narrow_float(a.dtype)
        aw, bw = (work(xp, a), work(xp, b)) if narrow else (a, b)
        y = scaled(product(xp, aw.T if trans_a else aw, bw.T if trans_b else bw), alpha)
        if c is not None:   # C has A's type: the product's, or widened like it
            y = y + scaled(work(xp, c) if narrow else c, beta)
        return xp.astype(y, a.dtype) if narrow else y

    return run


# -- MatMul ------------------------------------------------------------------------------------
def plain_product(sa: tuple, sb: tuple) -> bool:
    """Whether extents ``sa`` @ ``sb`` are a MatMul's without its inference's help: both of rank
    2 or more, the inner extents equal, the batch extents broadcasting (equal, or one of them
    1, Clause 6.6.2); anything else is for :func:`matmul_dims`, which also says why not."""
    if len(sa) < 2 or len(sb) < 2 or sa[-1] != sb[-2]:
        return False
    return all(p == q or p == 1 or q == 1 for p, q in zip(reversed(sa[:-2]), reversed(sb[:-2])))


def matmul_checker(ctx):
    """``check(a, b)``: fails naming the node unless the element types and shapes are a
    MatMul's; each checked signature is remembered (the element types apart: a decoder's
    attention brings new extents every token, of the same types)."""
    allowed = schema_types(ctx, "T")
    checked = set()
    typed = set()

    def check(a, b):
        key = (a.shape, b.shape, a.dtype, b.dtype)
        if key not in checked:
            types = key[2:]
            if types not in typed:
                check_dtype(ctx, a, allowed, "A")
                check_dtype(ctx, b, (arrays.dtype_name(a.dtype),), "B")
                remember(typed, types)
            if not plain_product(key[0], key[1]):
                matmul_dims(ctx, shape_of(a), shape_of(b))
            remember(checked, key)

    return check


@KERNELS.register("MatMul", 1, 9, 13)
@size_guard("matmul")
@calls_blas
def matmul(ctx):
    xp = ctx.xp
    check = matmul_checker(ctx)

    def run(a, b):
        check(a, b)
        if arrays.is_narrow_float(a.dtype):
            return xp.astype(xp.asarray(xp.matmul(work(xp, a), work(xp, b))), a.dtype)
        y = int_matmul(a, b) if arrays.is_integer(a.dtype) else xp.matmul(a, b)
        return y if a.ndim + b.ndim > 2 else xp.asarray(y)    # numpy gives a scalar for 1-D by 1-D

    return run


# -- MatMulInteger -----------------------------------------------------------------------------
def _minus_zero_point(ctx, xp, v, zp, axis: int, what: str):
    """``v`` (float64) minus a zero point given per tensor or per entry along ``axis``
    (-2: rows of A, -1: columns of B)."""
    z = xp.reshape(xp.astype(zp, xp.float64), (-1,))
    count = int(z.shape[0])
    if count == 1:
        return v - z[0]
    if v.ndim >= 2 and count == v.shape[axis]:
        return v - (xp.reshape(z, (-1, 1)) if axis == -2 else z)
    ctx.fail(f"{what} has {count} values for an operand of shape {shape_of(v)}")


@KERNELS.register("MatMulInteger", 10)
@size_guard("matmul")
@calls_blas
def matmul_integer(ctx):
    xp = ctx.xp
    allowed = {"A": schema_types(ctx, "T1"), "B": schema_types(ctx, "T2")}

    def run(a, b, a_zero_point=None, b_zero_point=None):
        check_dtype(ctx, a, allowed["A"], "A")
        check_dtype(ctx, b, allowed["B"], "B")
        matmul_dims(ctx, shape_of(a), shape_of(b))
        # exact in float64: |products| < 2^16, sums far below 2^53
        af, bf = xp.astype(a, xp.float64), xp.astype(b, xp.float64)
        if a_zero_point is not None:
            check_dtype(ctx, a_zero_point, (arrays.dtype_name(a.dtype),), "a_zero_point")
            af = _minus_zero_point(ctx, xp, af, a_zero_point, -2, "a_zero_point")
        if b_zero_point is not None:
            check_dtype(ctx, b_zero_point, (arrays.dtype_name(b.dtype),), "b_zero_point")
            bf = _minus_zero_point(ctx, xp, bf, b_zero_point, -1, "b_zero_point")
        return xp.astype(xp.astype(xp.round(xp.asarray(xp.matmul(af, bf))), xp.int64), xp.int32)

    return run


# -- Einsum ------------------------------------------------------------------------------------
def parse_einsum(eq: str, ranks) -> tuple:
    """``(labels per operand, output labels)`` of a space-free equation over operands of
    ``ranks``: '...' expanded to ``('.', k)`` tokens, right-aligned; the implicit output is
    the broadcast axes then the labels used once, in alphabetical order.  ValueError if a
    term does not fit its operand."""
    lhs, arrow, rhs = eq.partition("->")
    parsed, ell = [], 0
    for term, rank in zip(lhs.split(","), ranks):
        head, dots, tail = term.partition("...")
        if "." in head or "." in tail:
            raise ValueError(f"term {term!r} has a malformed ellipsis")
        k = rank - len(head) - len(tail)
        if k < 0 or (k and not dots):
            raise ValueError(f"term {term!r} does not fit an operand of rank {rank}")
        parsed.append((list(head), k, list(tail)))
        ell = max(ell, k)
    labels = [h + [(".", ell - k + j) for j in range(k)] + t for h, k, t in parsed]
    if arrow:
        head, dots, tail = rhs.partition("...")
        out = list(head) + ([(".", j) for j in range(ell)] if dots else []) + list(tail)
    else:
        letters = [c for h, _, t in parsed for c in h + t]
        out = [(".", j) for j in range(ell)] + sorted(c for c in set(letters) if letters.count(c) == 1)
    return labels, out


def einsum_broadcast(eq: str, ops):
    """Einsum as one broadcast product and a sum over the array API (exact for integers,
    accumulated in int64; any device)."""
    import array_api_compat

    xp = array_api_compat.array_namespace(*ops)
    labels, out = parse_einsum(eq, [o.ndim for o in ops])
    prepared = []
    for t, lab in zip(ops, labels):
        lab = list(lab)
        while True:   # a label repeated within an operand: take its diagonal
            dup = next(((i, j) for i in range(len(lab)) for j in range(i + 1, len(lab)) if lab[i] == lab[j]), None)
            if dup is None:
                break
            i, j = dup
            rest = [k for k in range(len(lab)) if k not in (i, j)]
            t = xp.linalg.diagonal(xp.permute_dims(t, tuple(rest + [i, j])))
            lab = [lab[k] for k in rest] + [lab[i]]
        prepared.append((t, lab))
    order = list(out)
    for _, lab in prepared:
        order += [x for x in lab if x not in order]
    if any(x not in order for x in out) or len(set(out)) != len(out):
        raise ValueError("the output names a label twice or one no operand has")
    prod = None
    for t, lab in prepared:
        perm = sorted(range(len(lab)), key=lambda k: order.index(lab[k]))
        t = xp.permute_dims(t, tuple(perm))
        have = [lab[k] for k in perm]
        shape, it = [], iter(t.shape)
        for x in order:
            shape.append(int(next(it)) if x in have else 1)
        t = xp.reshape(t, tuple(shape))
        prod = t if prod is None else prod * t
    dt = ops[0].dtype
    extra = tuple(range(len(out), len(order)))
    if extra:
        prod = xp.sum(prod, axis=extra, dtype=xp.int64 if arrays.is_integer(prod.dtype) else None)
    return xp.astype(prod, dt)


def _diagonals(xp, t, lab: list):
    """``(t, labels)`` with each label repeated within the operand reduced to its diagonal."""
    while True:
        dup = next(((i, j) for i in range(len(lab)) for j in range(i + 1, len(lab)) if lab[i] == lab[j]), None)
        if dup is None:
            return t, lab
        i, j = dup
        rest = [k for k in range(len(lab)) if k not in (i, j)]
        t = xp.linalg.diagonal(xp.permute_dims(t, tuple(rest + [i, j])))
        lab = [lab[k] for k in rest] + [lab[i]]


def einsum_pairwise(xp, eq: str, ops):
    """Einsum as a chain of batched matrix products (BLAS), left to right: each operand's
    repeated labels reduced to their diagonal, a label no later term needs summed out at once,
    then each pair contracted as ``(batch, M, K) @ (batch, K, N)`` (batch: labels both hold that
    are still needed, K: those no longer needed, M and N: each side's own), and the result
    permuted to the output's labels.  None where a label has different extents in two operands
    (broadcast ellipsis axes): the caller's einsum then runs."""
    labels, out = parse_einsum(eq, [o.ndim for o in ops])
    terms = [_diagonals(xp, t, list(lab)) for t, lab in zip(ops, labels)]
    extent = {}
    for t, lab in terms:
        for x, n in zip(lab, t.shape):
            if extent.setdefault(x, int(n)) != int(n):
                return None

    def needed(i):          # labels the output or a term after the i-th still holds
        keep = set(out)
        for _, lab in terms[i + 1:]:
            keep.update(lab)
        return keep

    def sum_out(t, lab, keep):
        drop = [k for k, x in enumerate(lab) if x not in keep]
        if drop:
            t = xp.sum(t, axis=tuple(drop))
            lab = [x for x in lab if x in keep]
        return t, lab

    acc, lab = sum_out(*terms[0], needed(0))
    for i in range(1, len(terms)):
        keep = needed(i)
        t, lb = sum_out(*terms[i], keep | set(lab))
        acc, lab = sum_out(acc, lab, keep | set(lb))
        batch = [x for x in lab if x in lb and x in keep]
        inner = [x for x in lab if x in lb and x not in keep]
        left = [x for x in lab if x not in lb]
        right = [x for x in lb if x not in lab]
        size = lambda group: math.prod(extent[x] for x in group)   # noqa: E731
        a = xp.reshape(xp.permute_dims(acc, tuple(lab.index(x) for x in batch + left + inner)),
                       (size(batch), size(left), size(inner)))
        b = xp.reshape(xp.permute_dims(t, tuple(lb.index(x) for x in batch + inner + right)),
                       (size(batch), size(inner), size(right)))
        acc = xp.reshape(xp.matmul(a, b), tuple(extent[x] for x in batch + left + right))
        lab = batch + left + right
    acc, lab = sum_out(acc, lab, set(out))
    return xp.permute_dims(acc, tuple(lab.index(x) for x in out)) if lab != list(out) else acc


def _numpy_pairwise(xp, eq: str, ops):
    """:func:`einsum_pairwise` on numpy arrays, its floating-point warnings off (an inf times a
    zero is a NaN result, as numpy's einsum gives it silently)."""
    import numpy as np

    with np.errstate(all="ignore"):
        return einsum_pairwise(xp, eq, ops)


_EINSUM_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ,.->")


@KERNELS.register("Einsum", 12, 28)
@size_guard("product")
@calls_blas
def einsum(ctx):
    xp = ctx.xp
    eq = ctx.attr_str("equation").replace(" ", "")
    n_terms = len(eq.split("->")[0].split(","))
    if eq.count("->") > 1:
        ctx.fail(f"equation {eq!r} has more than one '->'")
    if not set(eq) <= _EINSUM_CHARS:
        ctx.fail(f"equation {eq!r} has characters other than letters, ',', '...' and '->'")
    allowed = schema_types(ctx, "T")
    native = getattr(xp, "einsum", None)
    import array_api_compat

    # numpy contracts three or more operands pairwise (through BLAS) only when asked to
    options = {"optimize": True} if n_terms > 2 and array_api_compat.is_numpy_namespace(xp) else {}
    # numpy's einsum of floats loops in C without BLAS, even for two operands: matrix products instead
    # (one operand: numpy's einsum, a sum and a view)
    pairwise = array_api_compat.is_numpy_namespace(xp) and n_terms > 1

    def run(*inputs):
        if len(inputs) != n_terms:
            ctx.fail(f"the equation has {n_terms} terms but {len(inputs)} inputs were given")
        dt = inputs[0].dtype
        for i, x in enumerate(inputs):
            check_dtype(ctx, x, allowed if i == 0 else (arrays.dtype_name(dt),), f"input {i}")
        ops = [work(xp, x) for x in inputs]
        try:
            parse_einsum(eq, [x.ndim for x in ops])
            if native is None or (arrays.is_integer(dt) and not native_integer_products(ops[0])):
                y = einsum_broadcast(eq, ops)
            else:
                y = _numpy_pairwise(xp, eq, ops) if pairwise and arrays.is_float(ops[0].dtype) else None
                if y is None:
                    y = native(eq, *ops, **options)
        except (RuntimeError, ValueError) as exc:
            ctx.fail(f"equation {eq!r} does not apply to shapes {[shape_of(x) for x in inputs]}: {exc}")
        return xp.astype(xp.asarray(y), dt, copy=False)

    return run


# -- Det ---------------------------------------------------------------------------------------
@KERNELS.register("Det", 11, 22)
@calls_blas
def det(ctx):
    xp = ctx.xp
    allowed = schema_types(ctx, "T")

    def run(x):
        check_dtype(ctx, x, allowed, "X")
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            ctx.fail(f"X must be (..., M, M), got {shape_of(x)}")
        return xp.astype(xp.asarray(xp.linalg.det(work(xp, x))), x.dtype, copy=False)

    return run
