"""Linear algebra operators of ai.onnx on the gpu backend (torch).

Operators and the definitions (since_versions) implemented:

* Gemm 1, 6 (``broadcast`` attribute: 0 = C must already be (M, N), 1 = C broadcasts),
  7, 9 (integer types), 11 (C optional), 13 (bfloat16) - ``alpha``, ``beta``, ``transA``,
  ``transB``.
* MatMul 1, 9 (integer types), 13 (bfloat16): numpy-style, 1-D operands promoted, batch
  dimensions broadcast.
* MatMulInteger 10 (zero points: scalar, per row of A, per column of B; int32 output).
* Einsum 12, 28 (explicit and implicit forms, ellipsis, spaces, upper/lower case labels).
* Det 11, 22.

float16 and bfloat16 are computed in float32 and rounded once (as the cpu backend does);
float32 products run with TF32 disabled on CUDA.  Integer products stay integer and wrap as
two's complement: torch's integer matmul on the CPU device; CUDA has no integer GEMM, so
there the product is a broadcast multiply and sum (exact, at the cost of memory).
Unsigned 32/64-bit types have no torch dtype and are refused when the values are made.
"""

from __future__ import annotations

from onnxkit.runtime import KernelTable

from .nn_conv import check_dtype, compute_dtype, full_precision

KERNELS = KernelTable()


def _torch():
    import torch

    return torch


def _is_int(t):
    torch = _torch()
    return not (t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool)


def _work(a):
    """``a`` in the dtype products are computed in (ints unchanged, narrow floats -> float32)."""
    if _is_int(a):
        return a
    return a.to(compute_dtype(a.dtype))


def _types(ctx, ints, bf16):
    torch = _torch()
    allowed = [torch.float16, torch.float32, torch.float64]
    if ints:
        allowed += [torch.int32, torch.int64]
    if bf16:
        allowed.append(torch.bfloat16)
    return tuple(allowed)


def int_matmul(a, b, force_broadcast=False):
    """Exact (wrapping) integer matmul with numpy's 1-D promotion rules."""
    torch = _torch()
    if a.device.type == "cpu" and not force_broadcast:
        return torch.matmul(a, b)
    dt = a.dtype
    a1 = a.unsqueeze(0) if a.dim() == 1 else a
    b1 = b.unsqueeze(-1) if b.dim() == 1 else b
    if a1.shape[-1] != b1.shape[-2]:
        raise RuntimeError(f"inner dimensions {a1.shape[-1]} and {b1.shape[-2]} differ")
    y = (a1.unsqueeze(-1) * b1.unsqueeze(-3)).sum(dim=-2, dtype=torch.int64).to(dt)
    if b.dim() == 1:
        y = y.squeeze(-1)
    if a.dim() == 1:
        y = y.squeeze(-2 if b.dim() != 1 else -1)
    return y


def _matmul(a, b):
    torch = _torch()
    if _is_int(a):
        return int_matmul(a, b)
    with full_precision(a):
        return torch.matmul(a, b)


@KERNELS.register("Gemm", 1, 6, 7, 9, 11, 13)
def gemm(ctx):
    torch = _torch()
    alpha = float(ctx.attr("alpha", 1.0))
    beta = float(ctx.attr("beta", 1.0))
    trans_a = bool(ctx.attr("transA", 0))
    trans_b = bool(ctx.attr("transB", 0))
    strict_c = ctx.since_version < 7 and not ctx.attr("broadcast", 0)
    allowed = _types(ctx, ctx.since_version >= 9, ctx.since_version >= 13)

    def scaled(v, k):
        if k == 1.0:
            return v
        if _is_int(v):
            return (v.to(torch.float64) * k).to(v.dtype)  # truncated toward zero
        return v * k

    def run(a, b, c=None):
        check_dtype(ctx, a, allowed, "A")
        check_dtype(ctx, b, (a.dtype,), "B")
        if a.dim() != 2 or b.dim() != 2:
            ctx.fail(f"A and B must be 2-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
        aw, bw = _work(a), _work(b)
        if trans_a:
            aw = aw.t()
        if trans_b:
            bw = bw.t()
        if aw.shape[1] != bw.shape[0]:
            ctx.fail(f"inner dimensions differ: A' is {tuple(aw.shape)}, B' is {tuple(bw.shape)}")
        y = scaled(_matmul(aw, bw), alpha)
        if c is not None and beta != 0.0:
            check_dtype(ctx, c, (a.dtype,), "C")
            m, n = y.shape
            if strict_c and tuple(c.shape) != (m, n):
                ctx.fail(f"C has shape {tuple(c.shape)}; with broadcast = 0 it must be {(m, n)}")
            try:
                ok = tuple(torch.broadcast_shapes(c.shape, y.shape)) == tuple(y.shape)
            except RuntimeError:
                ok = False
            if not ok:
                ctx.fail(f"C of shape {tuple(c.shape)} does not broadcast to {(m, n)}")
            y = y + scaled(_work(c).to(y.dtype), beta)
        return y.to(a.dtype)

    return run


@KERNELS.register("MatMul", 1, 9, 13)
def matmul(ctx):
    allowed = _types(ctx, ctx.since_version >= 9, ctx.since_version >= 13)

    def run(a, b):
        check_dtype(ctx, a, allowed, "A")
        check_dtype(ctx, b, (a.dtype,), "B")
        if a.dim() == 0 or b.dim() == 0:
            ctx.fail("MatMul operands must have rank 1 or more")
        try:
            y = _matmul(_work(a), _work(b))
        except RuntimeError as exc:
            ctx.fail(f"shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply: {exc}")
        return y.to(a.dtype)

    return run


@KERNELS.register("MatMulInteger", 10)
def matmul_integer(ctx):
    torch = _torch()
    eight_bit = (torch.int8, torch.uint8)

    def run(a, b, a_zero_point=None, b_zero_point=None):
        check_dtype(ctx, a, eight_bit, "A")
        check_dtype(ctx, b, eight_bit, "B")
        # exact in float64: |products| < 2^16, sums far below 2^53
        af = a.to(torch.float64)
        bf = b.to(torch.float64)
        if a_zero_point is not None:
            check_dtype(ctx, a_zero_point, (a.dtype,), "a_zero_point")
            zp = a_zero_point.to(torch.float64).reshape(-1)
            if zp.numel() == 1:
                af = af - zp[0]
            elif af.dim() >= 2 and zp.numel() == af.shape[-2]:
                af = af - zp.reshape(-1, 1)
            else:
                ctx.fail(f"a_zero_point has {zp.numel()} values for A of shape {tuple(a.shape)}")
        if b_zero_point is not None:
            check_dtype(ctx, b_zero_point, (b.dtype,), "b_zero_point")
            zp = b_zero_point.to(torch.float64).reshape(-1)
            if zp.numel() == 1:
                bf = bf - zp[0]
            elif bf.dim() >= 2 and zp.numel() == bf.shape[-1]:
                bf = bf - zp
            else:
                ctx.fail(f"b_zero_point has {zp.numel()} values for B of shape {tuple(b.shape)}")
        try:
            y = torch.matmul(af, bf)
        except RuntimeError as exc:
            ctx.fail(f"shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply: {exc}")
        return torch.round(y).to(torch.int64).to(torch.int32)

    return run


# -- Einsum -------------------------------------------------------------------------------------

def _parse_einsum(eq, shapes):
    """Operand label lists and output labels, '...' expanded to ('.', k) tokens (right-aligned)."""
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    ell = 0
    parsed = []
    for term, shape in zip(terms, shapes):
        if "..." in term:
            head, tail = term.split("...", 1)
            if "." in head or "." in tail:
                raise ValueError(f"term {term!r} has a malformed ellipsis")
            k = len(shape) - len(head) - len(tail)
            if k < 0:
                raise ValueError(f"term {term!r} has more labels than its operand has axes ({len(shape)})")
            parsed.append((list(head), k, list(tail)))
            ell = max(ell, k)
        else:
            if "." in term or len(term) != len(shape):
                raise ValueError(f"term {term!r} does not match an operand of rank {len(shape)}")
            parsed.append((list(term), 0, []))
    labels = [h + [(".", ell - k + j) for j in range(k)] + t for h, k, t in parsed]
    if arrow:
        if "..." in rhs:
            head, tail = rhs.split("...", 1)
            out = list(head) + [(".", j) for j in range(ell)] + list(tail)
        else:
            out = list(rhs)
    else:
        letters = [c for h, _, t in parsed for c in h + t]
        out = [(".", j) for j in range(ell)] + sorted(c for c in set(letters) if letters.count(c) == 1)
    return labels, out


def einsum_broadcast(eq, ops):
    """Einsum as one broadcast product and a sum (exact for integers, any device)."""
    torch = _torch()
    labels, out = _parse_einsum(eq, [tuple(o.shape) for o in ops])
    prepared = []
    for t, lab in zip(ops, labels):
        lab = list(lab)
        while True:  # repeated labels within an operand: its diagonal
            dup = next(((i, j) for i in range(len(lab)) for j in range(i + 1, len(lab)) if lab[i] == lab[j]), None)
            if dup is None:
                break
            i, j = dup
            t = torch.diagonal(t, dim1=i, dim2=j)
            lab = [x for k, x in enumerate(lab) if k not in (i, j)] + [lab[i]]
        prepared.append((t, lab))
    order = list(out)
    for _, lab in prepared:
        order += [x for x in lab if x not in order]
    if any(x not in order for x in out) or len(set(out)) != len(out):
        raise ValueError("the output names a label twice or one no operand has")
    prod = None
    for t, lab in prepared:
        perm = sorted(range(len(lab)), key=lambda k: order.index(lab[k]))
        t = t.permute(perm)
        have = [lab[k] for k in perm]
        shape, it = [], iter(t.shape)
        for x in order:
            shape.append(next(it) if x in have else 1)
        t = t.reshape(shape)
        prod = t if prod is None else prod * t
    dt = ops[0].dtype
    extra = tuple(range(len(out), len(order)))
    if extra:
        prod = prod.sum(dim=extra, dtype=torch.int64 if _is_int(prod) else None)
    return prod.to(dt)


@KERNELS.register("Einsum", 12, 28)
def einsum(ctx):
    torch = _torch()
    eq = ctx.attr_str("equation").replace(" ", "")
    lhs = eq.split("->")[0]
    n_terms = len(lhs.split(","))
    if eq.count("->") > 1:
        ctx.fail(f"equation {eq!r} has more than one '->'")
    allowed_chars = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ,.->")
    if not set(eq) <= allowed_chars:
        ctx.fail(f"equation {eq!r} has characters other than letters, ',', '...' and '->'")
    allowed = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8, torch.int16,
               torch.int32, torch.int64)

    def run(*inputs):
        if len(inputs) != n_terms:
            ctx.fail(f"the equation has {n_terms} terms but {len(inputs)} inputs were given")
        dt = inputs[0].dtype
        for i, x in enumerate(inputs):
            check_dtype(ctx, x, allowed if i == 0 else (dt,), f"input {i}")
        ops = [_work(x) for x in inputs]
        try:
            if _is_int(ops[0]) and ops[0].device.type != "cpu":
                y = einsum_broadcast(eq, ops)
            else:
                with full_precision(ops[0]):
                    y = torch.einsum(eq, *ops)
        except (RuntimeError, ValueError) as exc:
            ctx.fail(f"equation {eq!r} does not apply to shapes {[tuple(x.shape) for x in inputs]}: {exc}")
        return y.to(dt)

    return run


@KERNELS.register("Det", 11, 22)
def det(ctx):
    torch = _torch()
    allowed = (torch.float16, torch.float32, torch.float64) + ((torch.bfloat16,) if ctx.since_version >= 22 else ())

    def run(x):
        check_dtype(ctx, x, allowed, "X")
        if x.dim() < 2 or x.shape[-1] != x.shape[-2]:
            ctx.fail(f"X must be (..., M, M), got {tuple(x.shape)}")
        with full_precision(x):
            return torch.linalg.det(x.to(compute_dtype(x.dtype))).to(x.dtype)

    return run
