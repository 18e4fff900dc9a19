"""Exact 8-bit integer products on AVX-512 VNNI: the products of QLinearConv, ConvInteger,
QLinearMatMul, MatMulInteger, QGemm, MatMulIntegerToFloat and DynamicQuantizeMatMul
(``overrides/quantization.py``, ``overrides/quantized_conv.py``, ``overrides/quantized_microsoft.py``)
where the host has the instruction.

**What is computed.**  ``S[p, n] = sum_k (x[p, k] - x_zp) * (w[k, n] - w_zp[n])`` for 8-bit ``x``
(uint8 or int8, one zero point) and ``w`` (uint8 or int8, one zero point or one per column), the
exact integer sums the portable kernels compute in float64.  ``vpdpbusd`` multiplies a uint8 by
an int8, so the operands are shifted to those types first: ``x' = x`` (uint8) or ``x + 128``
(int8: the bit pattern with its top bit flipped), ``w' = w`` (int8) or ``w - 128`` (uint8), and
the zero points with them (``x_zp' = x_zp + 128`` for int8 x, ``w_zp' = w_zp - 128`` for uint8 w),
which leaves every difference ``x - x_zp = x' - x_zp'`` and ``w - w_zp = w' - w_zp'`` unchanged.
Expanding the product,

``S[p, n] = sum_k x'w' - w_zp'[n] * sum_k x'[p, k] - x_zp' * sum_k w'[k, n] + K * x_zp' * w_zp'[n]``

The first sum is the VNNI product (:mod:`.quantized_vnni_impl`), exact in int32 while
``K * 255 * 128 < 2^31`` (:data:`K_LIMIT`); the row sums are taken while the rows are packed,
the column terms once per weight; the correction is int64 arithmetic, exact.  A convolution's
padding is packed as ``x_zp'`` (so that ``x' - x_zp' = 0`` there, as the portable kernel's zero
padding of ``x - x_zp``), and ``K`` counts every window position.  The sums are therefore
identical to the portable kernels' (and to the float32 / K-split paths they replace), whatever
the operands' values: zero points at the types' ends, saturated values, per-column zero points.

**When.**  :func:`get` returns the compiled functions where compiled loops are on (and not
deferred by a cold plan, :mod:`onnxkit_cpu.compiled`), numba's target machine reports
``avx512vnni`` and :data:`ENABLED` is true (tests switch it to compare the paths); else None, and
the callers keep their float32 products.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from onnxkit_cpu.compiled import host, kernel

#: the largest K whose int32 sums cannot overflow (``K * 255 * 128 < 2^31``)
K_LIMIT = (1 << 31) // (255 * 128) - 4
#: False: :func:`get` returns None (the float32 products run); for tests and A/B runs
ENABLED = True


def _probe():  # the compiled-loop gate of :mod:`onnxkit_cpu.compiled` (deferral, switches)
    return 0


_PROBE = kernel(_probe)


def get():
    """The implementation module (:mod:`.quantized_vnni_impl`), or None (module docstring)."""
    if not ENABLED or _PROBE.get() is None or not host.has("avx512vnni"):
        return None
    from . import quantized_vnni_impl

    return quantized_vnni_impl


_local = threading.local()
#: the largest scratch buffer kept between calls (bytes; a larger one is made and dropped per call)
SCRATCH_MAX = 64 << 20
#: the scratch arrays kept per thread for reuse (the table is emptied when full)
SCRATCH_VIEWS = 512


def scratch(name: str, shape: tuple, dtype):
    """An uninitialized array of ``shape`` and ``dtype`` for one call's intermediate values,
    carved from a buffer kept per thread and ``name`` between calls (grown as needed): fresh
    allocations of this size are mapped and unmapped each call, and their pages faulted in
    again, which costs more than the products on a loaded machine.  The caller neither returns
    it nor keeps it past the call; two arrays used at once need two names.  The array made for
    a ``(name, shape, dtype)`` is handed out again while ``name``'s buffer is the same (a node
    calls with the same shapes run after run)."""
    views = getattr(_local, "views", None)
    if views is None:
        views = _local.views = {}
        _local.pool = {}
    key = (name, shape, dtype)
    got = views.get(key)
    if got is not None and _local.pool.get(name) is got[0]:
        return got[1]
    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    if nbytes > SCRATCH_MAX:
        return np.empty(shape, dtype)
    pool = _local.pool
    buf = pool.get(name)
    if buf is None or buf.size < nbytes:
        buf = pool[name] = np.empty(max(nbytes, 4096), np.uint8)
    view = buf[:nbytes].view(dtype).reshape(shape)
    if len(views) >= SCRATCH_VIEWS:
        views.clear()
    views[key] = (buf, view)
    return view


class PackedW:
    """A weight ``w`` (K, N) of 8-bit integers with its zero point ``zp`` (None, one, or one per
    column) in the VNNI layout: ``wp`` the int8 ``w'`` panels, ``wzp`` the int64 ``w_zp'`` per
    column, and the column terms ``- x_zp' * sum_k w' + K * x_zp' * w_zp'`` per ``x_zp'``
    (:meth:`colterm`, made once each)."""

    __slots__ = ("wp", "wzp", "wsum", "k", "n", "terms")

    def __init__(self, impl, w, zp):
        k, n = w.shape
        nr = impl.NR
        k4, panels = (k + 3) // 4, (n + nr - 1) // nr
        shifted = w.view(np.int8) if w.dtype == np.int8 else (w.view(np.int8) ^ np.int8(-128))
        pad = np.zeros((k4 * 4, panels * nr), np.int8)
        pad[:k, :n] = shifted
        self.wp = np.ascontiguousarray(pad.reshape(k4, 4, panels, nr).transpose(2, 0, 3, 1)).view(np.int32)
        self.wp = self.wp.reshape(panels, k4, nr)
        z = np.zeros(n, np.int64) if zp is None else np.broadcast_to(np.reshape(zp, (-1,)).astype(np.int64), (n,))
        self.wzp = np.ascontiguousarray(z - (128 if w.dtype == np.uint8 else 0))
        self.wsum = shifted.sum(axis=0, dtype=np.int64)
        self.k, self.n, self.terms = k, n, {}

    def colterm(self, xzp: int):
        got = self.terms.get(xzp)
        if got is None:
            got = self.terms[xzp] = np.ascontiguousarray(-xzp * self.wsum + self.k * xzp * self.wzp)
        return got


def shifted_zero_point(dtype, zp: int):
    """``(flip, x_zp')``: the bit flip taking ``dtype`` values to uint8 and the shifted zero point."""
    return (0x80, zp + 128) if dtype == np.int8 else (0, zp)


def product(impl, a, a_zp: int, packed: PackedW, out_dtype=np.float64, requantized=None):
    """``S`` (module docstring) for ``a`` (P, K) 8-bit, as ``out_dtype`` (P, N); ``requantized``:
    ``(bias, mult, zp, lo, hi, y)``, the sums requantized into ``y`` (P, N) instead
    (:func:`~.quantized_vnni_impl.finish_rows_requantized`), which is returned."""
    p = a.shape[0]
    flip, xzp = shifted_zero_point(a.dtype, a_zp)
    k4 = packed.wp.shape[1]
    rows = (p + impl.MR - 1) // impl.MR * impl.MR
    xp = scratch("rows", (rows, k4 * 4), np.uint8)
    sums = scratch("sums", (rows,), np.int64)
    impl.pack_rows(np.ascontiguousarray(a), flip, xp, sums)
    c = scratch("sums32", (rows, packed.wp.shape[0] * impl.NR), np.int32)
    impl.gemm(xp, packed.wp, c)
    if requantized is not None:
        impl.finish_rows_requantized(c, sums, packed.wzp, packed.colterm(xzp), *requantized)
        return requantized[-1]
    out = np.empty((p, packed.n), out_dtype)
    impl.finish_rows(c, sums, packed.wzp, packed.colterm(xzp), out)
    return out


def conv_weights(w):
    """The (M, kh * kw * C/group) matrix of conv weights ``w`` (M, C/group, *kernel): the order of
    :func:`conv`'s packed rows (kernel positions outer, channels inner)."""
    return np.moveaxis(w, 1, -1).reshape(w.shape[0], -1)


def planar(x, plan) -> tuple:
    """A convolution of one or two spatial axes as one of two: ``(kh, kw, sh, sw, dh, dw, top,
    left, oh, ow, x4)`` from ``plan``'s geometry, a 1-D input ``x`` (N, C, W) viewed as
    ``x4`` (N, C, 1, W) with a kernel row of one."""
    nd = x.ndim - 2
    one = (1,) if nd == 1 else ()
    kh, kw = one + plan.kernel
    sh, sw = one + plan.strides
    dh, dw = one + plan.dil
    top, left = (0,) * (2 - nd) + plan.begin
    oh, ow = one + plan.out_shape
    x4 = x if nd == 2 else x.reshape(plan.n, plan.c, 1, x.shape[2])
    return kh, kw, sh, sw, dh, dw, top, left, oh, ow, x4


def conv(impl, x, x_zp: int, groups: list, plan, requantized=None):
    """``S`` of the convolution (N, M, *out) as float64, for ``x`` (N, C, H, W) 8-bit (one or two
    spatial axes: a 1-D input as (N, C, 1, W)) and ``groups`` the :class:`PackedW` of each
    group's weights (``(kh * kw * C/group, M/group)``: rows in the order kernel row, kernel
    column, channel, :func:`conv_weights`).  ``requantized``: ``(bias, mult, zp, lo, hi, y)``,
    the sums requantized into ``y`` (N, M, L) instead
    (:func:`~.quantized_vnni_impl.finish_conv_requantized`), which is returned."""
    kh, kw, sh, sw, dh, dw, top, left, oh, ow, x4 = planar(x, plan)
    n, c, m, group = plan.n, plan.c, plan.m, plan.group
    flip, xzp = shifted_zero_point(x.dtype, x_zp)
    xt = scratch("channels_last", (n, x4.shape[2], x4.shape[3], c), np.uint8)
    impl.channels_last(x4, flip, xt)
    cg, mg = c // group, m // group
    length = oh * ow
    rows = (n * length + impl.MR - 1) // impl.MR * impl.MR
    out = np.empty((n, m, length)) if requantized is None else requantized[-1].reshape(n, m, length)
    xp = sums = None
    for g, packed in enumerate(groups):
        if xp is None:
            xp = scratch("rows", (rows, packed.wp.shape[1] * 4), np.uint8)
            sums = scratch("sums", (rows,), np.int64)
        impl.conv_rows(xt, xzp, kh, kw, sh, sw, dh, dw, top, left, oh, ow, g * cg, cg, xp, sums)
        c_out = scratch("sums32", (rows, packed.wp.shape[0] * impl.NR), np.int32)
        impl.gemm(xp, packed.wp, c_out)
        if requantized is None:
            impl.finish_conv(c_out, sums, packed.wzp, packed.colterm(xzp), n, length, g * mg, out)
        else:
            impl.finish_conv_requantized(c_out, sums, packed.wzp, packed.colterm(xzp), n, length, g * mg,
                                         *requantized[:-1], out)
    if requantized is not None:
        return requantized[-1]
    return out.reshape((n, m) + plan.out_shape)


class PackedRows:
    """One group's conv weights ``w`` (M/group, K) of 8-bit integers (rows in the order of
    :func:`conv_weights`) with their zero point ``zp`` (None, one, or one per row) as the u8
    operand of the planar convolution (:func:`conv_planar`): ``wr`` the rows ``w''`` (``w`` for
    uint8, ``w + 128`` for int8), ``wzp`` the shifted zero points ``w_zp''`` per row (int64),
    ``rsum`` the row sums of ``w''``; the per-row terms per shifted x zero point (:meth:`rowterm`,
    made once each)."""

    __slots__ = ("wr", "wzp", "rsum", "k", "m", "terms")

    def __init__(self, impl, w, zp):
        m, k = w.shape
        rows = (m + impl.MR - 1) // impl.MR * impl.MR
        self.wr = np.empty((rows, (k + 3) // 4 * 4), np.uint8)
        self.rsum = np.zeros(rows, np.int64)
        impl.pack_weight_rows(np.ascontiguousarray(w), 0x80 if w.dtype == np.int8 else 0, self.wr, self.rsum)
        z = np.zeros(m, np.int64) if zp is None else np.broadcast_to(np.reshape(zp, (-1,)).astype(np.int64), (m,))
        self.wzp = np.ascontiguousarray(z + (128 if w.dtype == np.int8 else 0))
        self.k, self.m, self.terms = k, m, {}

    def rowterm(self, xzp: int):
        """``(base, factor)`` of :func:`~.quantized_vnni_impl.finish_planar` for the shifted x
        zero point ``xzp``: ``base[m] = - xzp * rsum[m] + K * w_zp''[m] * xzp``, ``factor = w_zp''``."""
        got = self.terms.get(xzp)
        if got is None:
            got = self.terms[xzp] = (np.ascontiguousarray(-xzp * self.rsum[:self.m] + self.k * xzp * self.wzp),
                                     self.wzp)
        return got


def signed_zero_point(dtype, zp: int):
    """``(flip, x_zp'')``: the bit flip taking ``dtype`` values to int8 (uint8 ``x - 128``) and the
    zero point shifted with them."""
    return (0x80, zp - 128) if dtype == np.uint8 else (0, zp)


#: the most positions, relative to the output's, that the planar convolution may compute
#: (stride 1: rows ``pitch`` wide, the last panel filled up); past it the rows orientation runs
PLANAR_WASTE = 1.15


#: the longest product (``C/group * kh * kw``) the planar convolution takes: past it the
#: product outweighs the transposes it spares and its unused positions cost more
PLANAR_MAX_K = 1024


def prefers_planar(impl, x, plan) -> bool:
    """Whether :func:`conv_planar` takes this convolution rather than :func:`conv`: stride 1
    (its columns are runs of the padded planes), products of at most :data:`PLANAR_MAX_K`, and
    a layout of positions, the padded rows and the last panel's unused lanes included, within
    :data:`PLANAR_WASTE` of the output's."""
    kh, kw, sh, sw, dh, dw, top, left, oh, ow, x4 = planar(x, plan)
    if sh != 1 or sw != 1 or oh * ow == 0 or plan.c // plan.group * kh * kw > PLANAR_MAX_K:
        return False
    pitch = max(x4.shape[3] + left, ow + (kw - 1) * dw)
    return (oh * pitch + impl.NR - 1) // impl.NR * impl.NR <= PLANAR_WASTE * oh * ow


def conv_planar(impl, x, x_zp: int, groups: list, plan, requantized=None):
    """``S`` of the convolution (N, M, *out) as float64 for ``x`` (N, C, H, W) 8-bit (one or two
    spatial axes, as :func:`conv`) with the product taken the other way round: the weights the
    u8 rows operand (``groups``: each group's :class:`PackedRows`), the input's im2col columns
    the s8 one (``x''`` = ``x - 128`` for uint8, ``x`` for int8, the zero point with it), so that
    the sums come out channel-first, as the output is laid out, with no transposes:

    ``S[m, l] = sum_k w''x'' - x_zp'' * sum_k w''[m] - w_zp''[m] * sum_k x''[l] + K * w_zp''[m] * x_zp''``

    (the algebra of the module docstring with the operands' roles exchanged; padding packed as
    ``x_zp''``).  ``requantized``: ``(bias, mult, zp, lo, hi, y)``, the sums requantized into ``y``
    (N, M, L) instead, which is returned."""
    kh, kw, sh, sw, dh, dw, top, left, oh, ow, x4 = planar(x, plan)
    n, c, m, group = plan.n, plan.c, plan.m, plan.group
    flip, xzp = signed_zero_point(x.dtype, x_zp)
    cg, mg = c // group, m // group
    length = oh * ow
    out = np.empty((n, m, length)) if requantized is None else requantized[-1].reshape(n, m, length)
    if requantized is None:
        bias, mult, zp, lo, hi, requant = np.zeros(m), np.ones(m), 0.0, 0.0, 0.0, False
    else:
        bias, mult, zp, lo, hi = requantized[:-1]
        requant = True
    x4 = np.ascontiguousarray(x4)
    unit = sh == 1 and sw == 1
    # stride 1: positions laid out ``pitch`` a row (the padded width), each im2col row one run
    pitch = max(x4.shape[3] + left, ow + (kw - 1) * dw) if unit else ow
    panels = (oh * pitch + impl.NR - 1) // impl.NR
    sums = scratch("column_sums", (panels * impl.NR,), np.int32)
    for i in range(n):
        for g, packed in enumerate(groups):
            k4 = packed.wr.shape[1] // 4
            xq = scratch("panels", (panels, k4, impl.NR), np.int32)
            if unit:
                hp = max(x4.shape[2] + top, oh + (kh - 1) * dh)
                buf = scratch("planes", (cg * hp * pitch + panels * impl.NR + pitch + 64,), np.int8)
                impl.pack_planes(x4[i], flip, xzp, kh, kw, dh, dw, top, left, oh, pitch, g * cg, cg, buf, xq, sums)
            else:
                cols = scratch("columns", (k4 * 4, length), np.int8)
                impl.pack_columns(x4[i], flip, xzp, kh, kw, sh, sw, dh, dw, top, left, oh, ow, g * cg, cg, cols, xq,
                                  sums)
            c_out = scratch("sums32", (packed.wr.shape[0], panels * impl.NR), np.int32)
            impl.gemm(packed.wr, xq, c_out)
            base, factor = packed.rowterm(xzp)
            rows = slice(g * mg, (g + 1) * mg)
            impl.finish_planar(c_out, sums, pitch, ow, base, factor, bias[rows], mult[rows], zp, lo, hi, requant,
                               out[i, rows])
    if requantized is not None:
        return requantized[-1]
    return out.reshape((n, m) + plan.out_shape)
