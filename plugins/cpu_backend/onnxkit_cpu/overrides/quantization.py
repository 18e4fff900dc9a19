"""cpu fast paths of the 8-bit quantization kernels of ai.onnx: QuantizeLinear,
DequantizeLinear, DynamicQuantizeLinear (``onnxkit_default_domain/kernels/quantization.py``),
MatMulInteger (``.../kernels/linalg.py``) and QLinearMatMul; and ai.onnxkit LookupTable (the
optimizer's lookup-table fusion, ``onnxkit.runtime.optimizer.qlut``).

Each override takes the common case and hands everything else, unchanged, to the portable
kernel (which stays the reference, and gives the errors of bad input):

* **QuantizeLinear / DequantizeLinear**: float32 X (Y) with a float32 scale, an int8 / uint8
  quantized side, per tensor or per axis (no blocks, no ``precision`` other than float32, no
  ``output_dtype`` other than the 8-bit types / float32), non-empty: one compiled pass
  (:mod:`onnxkit_cpu.compiled.quantized`) doing the portable kernel's float32 operations in
  its order — bit-identical, NaN and saturation included (``rint`` is round half to even, as
  ``xp.round``).  Where compiled loops are off, the portable kernel.
* **DynamicQuantizeLinear**: the range by one compiled pass, the scale and zero point by the
  portable kernel's float32 scalar formulas, Y by the quantize pass; an input holding a NaN or
  an infinity, or whose scale underflows to 0, takes the portable kernel.
* **MatMulInteger / QLinearMatMul** with a stacked B (rank > 2, such as attention's products of
  two activations; one zero point and scale each): both operands centered as float32 at each
  call and one batched float32 product where the bound below holds for every matrix of the
  stack (``amax`` times the largest column L1 norm of ``B - b_zp``, measured at the call), else
  the portable kernel.
* **MatMulInteger / QLinearMatMul** with a 2-D B (and A of rank >= 2, one zero point for A, one
  or one per column for B; QLinearMatMul: float32 scales, one a_scale and y_scale, one or N
  b_scale values): B minus its zero point is made once as float32 and kept while the same
  array comes back where the plan holds it (:class:`~._plans.Held`: a constant the planner
  declares, ``ctx.is_constant``, such as an initializer, or its own default), and the product
  is one float32 BLAS call when it is **exact**.  Proof: every entry of ``A - a_zp`` lies in
  ``[-amax, amax]`` with ``amax = max(a_zp - lo, hi - a_zp)`` over A's type range ``[lo, hi]``;
  a partial sum BLAS forms for output ``(i, n)`` (in whatever order, fused multiply-adds
  included) is a sum of a subset of the integer products ``(a_ik - a_zp)(b_kn - b_zp)``, so its
  magnitude is at most ``amax * L1_n`` with ``L1_n = sum_k |b_kn - b_zp|``.  Every integer of
  magnitude up to 2^24 is a float32, so where ``amax * max_n L1_n <= 2^24`` every step is
  exact and the float32 result equals the portable kernel's exact float64 one (for K = 64 and
  full-range weights the bound is 64 * 255 * 255 < 2^22; it is crossed from K ~ 258 on with
  full-range values, later for real weights).  Past the bound the product is **split along K**
  (:func:`k_chunks`): consecutive row ranges of B, each within the bound for every column
  (``amax * max_n sum_{k in chunk} |b_kn - b_zp| <= 2^24``; one row always fits, ``255 * 255 <
  2^24``), one float32 BLAS product each — exact by the same proof — summed in float64, exact
  while the total stays below 2^53 (``K * 255 * 255`` does for any K below 2^37).  The bounds
  are found once per B and ``amax`` (kept with the centered B).  The int32 result is then the
  exact sum (MatMulInteger); QLinearMatMul
  requantizes it by the portable kernel's float64 operations (``acc * mult + y_zp``, round,
  clip), the multiplier ``a_scale * b_scale / y_scale`` in float32 as it computes it: one
  compiled pass (:data:`onnxkit_cpu.compiled.quantized.requantize_rows`, QLinearConv's operations, its bias 0:
  ``acc + 0`` is ``acc``, a zero's sign aside, which rounding and the cast to an integer drop).
  Where the host has AVX-512 VNNI (:func:`onnxkit_cpu.compiled.quantized_vnni.get`), the 2-D B
  products are the VNNI integer product instead — the same exact sums, for any K up to
  :data:`~onnxkit_cpu.compiled.quantized_vnni.K_LIMIT`, B packed once per held B — and
  QLinearMatMul's requantization (the same float64 operations) runs in its last pass, the
  multiplier kept while the plan holds the scales.  Where every input of QLinearMatMul but A is a
  constant of the plan, the run loop binds the node (:func:`~._plans.bodies_by_layout`): its
  checks and path are decided once per A shape and dtype, not at each call.
* **LookupTable**: the portable kernel's table (its body run once on the 256 codes at planning,
  :func:`onnxkit_default_domain.api.lookup_table`), each element looked up by one compiled pass
  (:data:`onnxkit_cpu.compiled.quantized.lookup`) where compiled loops are on, else by numpy's
  ``take``: the same values either way.
"""

from __future__ import annotations

import math

import numpy as np
from onnxkit_default_domain.api import linalg as portable_linalg
from onnxkit_default_domain.api import quantization as portable
from onnxkit_default_domain.api import FUSED_DOMAIN

from onnxkit.plugin import KernelTable, binds_constants

from ..compiled import quantized as loops
from ..compiled import quantized_vnni as vnni
from ._plans import Held, bodies_by_layout, decided_each_call

KERNELS = KernelTable()

F32 = np.dtype(np.float32)
#: the 8-bit types of the fast paths and their ranges
RANGES = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127)}
#: the largest integer up to which every integer is a float32 (see the module docstring)
FLOAT32_EXACT = 1 << 24
_TAGS = {np.dtype(np.uint8): 2, np.dtype(np.int8): 3}   # ONNX element types UINT8, INT8


def _nd(a) -> bool:
    return type(a) is np.ndarray


def param_layout(p, z, shape, axis: int, per_axis: bool):
    """``(outer, channels, inner)`` of a per-tensor (``p`` and ``z`` of one value) or per-axis
    (1-D of the axis' extent, ``z`` of ``p``'s shape) scale / zero point, or None: the portable
    kernel's :func:`~onnxkit_default_domain.kernels.quantization.expand_param` decides (blocks,
    other shapes, errors)."""
    size = math.prod(shape)
    if p.size == 1 and (z is None or z.size == 1):
        return 1, 1, size
    rank = len(shape)
    if not per_axis or rank == 0 or p.ndim != 1 or (z is not None and z.shape != p.shape):
        return None
    a = 0 if rank == 1 else axis + rank if -rank <= axis < 0 else axis
    if not 0 <= a < rank or shape[a] != p.shape[0]:
        return None
    return math.prod(shape[:a]), shape[a], math.prod(shape[a + 1:])


#: the zero point of a QuantizeLinear / DequantizeLinear without one
NO_ZERO_POINT = np.zeros(1, np.int8)


def _flat(v):
    """A scale / zero point as a 1-D view (its one value, or one per channel)."""
    return NO_ZERO_POINT if v is None else v.reshape(-1)


# ---------------------------------------------------------------------------- QuantizeLinear
@KERNELS.register("QuantizeLinear", 10, 13, 19, 21, 23, 24, 25, 28)
def quantize_linear(ctx):
    other = portable.quantize_linear(ctx)
    loop = loops.quantize.get()
    v = ctx.since_version
    axis = int(ctx.attr("axis", 1)) if v >= 13 else 1
    block = int(ctx.attr("block_size", 0)) if v >= 21 else 0
    out_tag = int(ctx.attr("output_dtype", 0)) if v >= 21 else 0
    precision = int(ctx.attr("precision", 0)) if v >= 23 else 0
    if loop is None or block != 0 or precision not in (0, 1) or out_tag not in (0, 2, 3):
        return other

    def run(x, y_scale, y_zero_point=None):
        if not (_nd(x) and _nd(y_scale) and x.dtype == F32 and y_scale.dtype == F32 and x.size):
            return other(x, y_scale, y_zero_point)
        if y_zero_point is None:
            out = np.dtype(np.int8) if out_tag == 3 else np.dtype(np.uint8)
        else:
            out = y_zero_point.dtype if _nd(y_zero_point) else None
            if out not in RANGES or (out_tag and _TAGS[out] != out_tag):
                return other(x, y_scale, y_zero_point)
        layout = param_layout(y_scale, y_zero_point, x.shape, axis, v >= 13)
        if layout is None:
            return other(x, y_scale, y_zero_point)
        lo, hi = RANGES[out]
        y = np.empty(x.shape, out)
        loop(np.ascontiguousarray(x).reshape(layout), _flat(y_scale), _flat(y_zero_point), np.float32(lo),
             np.float32(hi), y.reshape(layout))
        return y

    return run


# -------------------------------------------------------------------------- DequantizeLinear
@KERNELS.register("DequantizeLinear", 10, 13, 19, 21, 23, 24, 25, 28)
def dequantize_linear(ctx):
    other = portable.dequantize_linear(ctx)
    loop = loops.dequantize.get()
    v = ctx.since_version
    axis = int(ctx.attr("axis", 1)) if v >= 13 else 1
    block = int(ctx.attr("block_size", 0)) if v >= 21 else 0
    out_tag = int(ctx.attr("output_dtype", 0)) if v >= 23 else 0
    if loop is None or block != 0 or out_tag not in (0, 1):
        return other

    def run(x, x_scale, x_zero_point=None):
        if not (_nd(x) and _nd(x_scale) and x.dtype in RANGES and x_scale.dtype == F32 and x.size):
            return other(x, x_scale, x_zero_point)
        if x_zero_point is not None and not (_nd(x_zero_point) and x_zero_point.dtype == x.dtype):
            return other(x, x_scale, x_zero_point)
        layout = param_layout(x_scale, x_zero_point, x.shape, axis, v >= 13)
        if layout is None:
            return other(x, x_scale, x_zero_point)
        y = np.empty(x.shape, F32)
        loop(np.ascontiguousarray(x).reshape(layout), _flat(x_scale), _flat(x_zero_point), y.reshape(layout))
        return y

    return run


# --------------------------------------------------------------------- DynamicQuantizeLinear
def dynamic_parameters(lo_x, hi_x):
    """``(scale, zero point)`` as float32 scalars from X's float32 minimum and maximum: the
    portable kernel's formulas, operation for operation (the range adjusted to include 0), or
    ``(scale, None)`` where the scale is not a positive finite float32 (the caller then takes the
    portable kernel).  The zero point's ``rint(clip(0 - lo / scale, 0, 255))`` is taken on the
    float32 quotient by Python's ``min``/``max`` and ``round`` (which rounds half to even, as
    ``rint``): the same value, without numpy's scalar overhead."""
    hi = np.float32(max(0.0, float(hi_x)))
    lo = np.float32(min(0.0, float(lo_x)))
    rng = np.float32(1.0) if hi == lo else np.float32(hi - lo)
    scale = np.float32(rng / np.float32(255))
    if not (0.0 < float(scale) < math.inf):
        return scale, None
    q = float(np.float32(0) - lo / scale)      # |lo| <= rng: the quotient is finite, at most ~255
    return scale, np.float32(round(min(max(q, 0.0), 255.0)))


@KERNELS.register("DynamicQuantizeLinear", 11)
def dynamic_quantize_linear(ctx):
    other = portable.dynamic_quantize_linear(ctx)
    loop, span = loops.quantize.get(), loops.finite_range.get()
    if loop is None or span is None:
        return other

    def run(x):
        if not (_nd(x) and x.dtype == F32 and x.size):
            return other(x)
        flat = np.ascontiguousarray(x).reshape(-1)
        lo_x, hi_x, finite = span(flat)
        if not finite:
            return other(x)
        scale, zp = dynamic_parameters(lo_x, hi_x)
        if zp is None:
            return other(x)
        y = np.empty(x.shape, np.uint8)
        y_scale, y_zero_point = np.array(scale, dtype=F32), np.array(zp, dtype=np.uint8)
        loop(flat.reshape(1, 1, -1), y_scale.reshape(1), y_zero_point.reshape(1), np.float32(0), np.float32(255),
             y.reshape(1, 1, -1))
        return y, y_scale, y_zero_point

    return run


# ------------------------------------------------------------ MatMulInteger / QLinearMatMul
def zero_point_value(z, dtype):
    """A per-tensor zero point as a Python int (0 where absent), or None: not one value of
    ``dtype`` (the portable kernel decides)."""
    if z is None:
        return 0
    if not _nd(z) or z.dtype != dtype or z.size != 1:
        return None
    return int(z.reshape(-1)[0])


def zero_point_key(zp):
    """What a kept centered weight remembers of its zero point: its type, shape and values (a
    zero point is a few values, compared at each call; it may be a writeable array)."""
    return None if zp is None else (zp.dtype, zp.shape, zp.tobytes())


#: rows of the weight whose running column sums :func:`k_chunks` holds at once (its memory: this
#: many rows of N float64 values, whatever K)
K_BLOCK = 256


def k_chunks(columns, l1: float, amax: int) -> tuple:
    """``(0, k1, ..., K)``: the shortest greedy split of the K rows of ``columns`` (K, N), an
    exact float32 matrix of centered weights (one column per output), into consecutive ranges
    whose largest column L1 norm times ``amax`` is at most 2^24 (module docstring); ``l1`` is
    the largest whole-column norm (one range where ``amax * l1`` fits).  A range closes before
    the first row that would take some column's sum past the limit (one row alone never does:
    ``255 * 255 < 2^24``)."""
    k = columns.shape[0]
    if amax * l1 <= FLOAT32_EXACT or k <= 1:
        return (0, k)
    limit = FLOAT32_EXACT / amax
    bounds, pos, running = [0], 0, np.zeros(columns.shape[1])
    while pos < k:
        # the open range's column sums through each row of this block: nondecreasing down the rows
        cum = np.cumsum(np.abs(columns[pos:pos + K_BLOCK]), axis=0, dtype=np.float64)
        cum += running
        over = cum.max(axis=1) > limit
        if over.any():
            end = pos + int(np.argmax(over))      # > bounds[-1]: the range's first row fits alone
            bounds.append(end)
            pos, running = end, np.zeros(columns.shape[1])
        else:
            pos, running = pos + cum.shape[0], cum[-1]
    if bounds[-1] != k:
        bounds.append(k)
    return tuple(bounds)


class CenteredB:
    """B minus its zero point as float32 (K, N), and ``max_n sum_k |b_kn - b_zp|``, made once
    per B while the same B, held by the plan, comes back with the same zero point values
    (module docstring); the K splits of :func:`k_chunks` per ``amax``, found once each."""

    __slots__ = ("b", "zp", "matrix", "l1", "splits", "zp_value", "packed")

    def __init__(self, b, zp):
        self.b, self.zp = b, zero_point_key(zp)
        self.zp_value, self.packed = (None if zp is None else np.array(zp)), None
        m = b.astype(F32)
        if zp is not None:
            m -= np.reshape(zp, (-1,)).astype(F32) if zp.size > 1 else F32.type(zp.reshape(-1)[0])
        self.matrix = m
        self.l1 = float(np.abs(m).sum(axis=0, dtype=np.float64).max()) if m.size else 0.0
        self.splits = {}

    def fits(self, b, zp) -> bool:
        return b is self.b and zero_point_key(zp) == self.zp

    def chunks(self, amax: int) -> tuple:
        """The K bounds of :func:`k_chunks` for an operand of largest magnitude ``amax``."""
        got = self.splits.get(amax)
        if got is None:
            got = self.splits[amax] = k_chunks(self.matrix, self.l1, amax)
        return got

    def vnni_packed(self, impl):
        """B in the VNNI layout (:class:`~onnxkit_cpu.compiled.quantized_vnni.PackedW`), made once."""
        if self.packed is None:
            self.packed = vnni.PackedW(impl, self.b, self.zp_value)
        return self.packed


def kept_centered(cache: list, centered, weight, zp, held):
    """``centered(weight, zp)`` (a :class:`CenteredB` or the convolutions' ``CenteredW``), reused
    from ``cache[0]`` while it ``fits`` the same weight object and zero point values, kept there
    where the plan holds the weight (``held``: its :class:`~._plans.Held`, made by the kernel's
    factory); made again each call otherwise."""
    kept = cache[0]
    if kept is not None and kept.fits(weight, zp):
        return kept
    made = centered(weight, zp)
    if held(weight):
        cache[0] = made
    return made


def centered_b(cache: list, b, zp, held):
    """The :class:`CenteredB` of ``b`` (cached in ``cache[0]`` where the plan holds ``b``: ``held``)."""
    return kept_centered(cache, CenteredB, b, zp, held)


def b_zero_point_ok(z, b) -> bool:
    """One zero point of B's type, or one per column (a 1-D vector of N)."""
    return z is None or (_nd(z) and z.dtype == b.dtype and (z.size == 1 or (z.ndim == 1 and z.size == b.shape[1])))


def chunked_matmul(af, matrix, bounds: tuple):
    """``af @ matrix`` (2-D float32 operands of exact integers) as the sum over the K ranges
    ``bounds`` of their float32 products, in float64 (one range: the float32 product itself)."""
    if len(bounds) == 2:
        return np.matmul(af, matrix)
    out = np.zeros((af.shape[0], matrix.shape[1]))
    for s, e in zip(bounds[:-1], bounds[1:]):
        out += np.matmul(af[:, s:e], matrix[s:e])
    return out


def exact_product(a, a_zp: int, prepared: CenteredB, fast=None):
    """``(A - a_zp) @ (B - b_zp)`` as exact integers (float32, or float64 where K is split:
    module docstring); ``fast``: the VNNI product's implementation
    (:func:`onnxkit_cpu.compiled.quantized_vnni.get`, exact float64 integers) or None."""
    k = a.shape[-1]
    if fast is not None and k <= vnni.K_LIMIT:
        out = vnni.product(fast, a.reshape(-1, k), a_zp, prepared.vnni_packed(fast))
        return out.reshape(a.shape[:-1] + (out.shape[1],))
    lo, hi = RANGES[a.dtype]
    bounds = prepared.chunks(max(a_zp - lo, hi - a_zp))
    af = a.astype(F32)
    if a_zp:
        af -= F32.type(a_zp)
    out = chunked_matmul(af.reshape(-1, k), prepared.matrix, bounds)
    return out.reshape(a.shape[:-1] + (prepared.matrix.shape[1],))


def eight_bit(names) -> frozenset:
    """The 8-bit numpy dtypes among a definition's type names (a set of dtypes: ``dtype.name``
    costs microseconds per call)."""
    return frozenset(d for d in RANGES if d.name in names)


def _operands_ok(a, b) -> bool:
    return (_nd(a) and _nd(b) and a.dtype in RANGES and b.dtype in RANGES and a.ndim >= 2 and b.ndim == 2
            and a.shape[-1] == b.shape[0] and a.size and b.size)


def _batched_ok(a, b, b_zero_point) -> bool:
    """A of rank >= 2 and B of rank > 2 (a stack of matrices, such as attention's), 8-bit, one
    B zero point of B's type or none, the contracted extents equal."""
    return (_nd(a) and _nd(b) and a.dtype in RANGES and b.dtype in RANGES and a.ndim >= 2 and b.ndim > 2
            and a.shape[-1] == b.shape[-2] and a.size and b.size
            and zero_point_value(b_zero_point, b.dtype) is not None)


def batched_product(a, a_zp: int, b, b_zp: int):
    """``(A - a_zp) @ (B - b_zp)`` for a stacked B (:func:`_batched_ok`; centered at each call:
    such a B is an activation) as exact float32 integers, or None where the bound of the module
    docstring fails for some matrix of the stack (``amax`` times the largest column L1 norm of
    ``B - b_zp``) or the batch extents do not broadcast (the portable kernel then decides)."""
    lo, hi = RANGES[a.dtype]
    bf = b.astype(F32)
    if b_zp:
        bf -= F32.type(b_zp)
    amax = max(a_zp - lo, hi - a_zp)
    b_lo, b_hi = RANGES[b.dtype]
    # the bound for any B of this K and zero point (each |b - b_zp| at most its range's far end)
    # spares the measurement
    if (amax * b.shape[-2] * max(b_zp - b_lo, b_hi - b_zp) > FLOAT32_EXACT
            and amax * float(np.abs(bf).sum(axis=-2, dtype=np.float64).max()) > FLOAT32_EXACT):
        return None
    af = a.astype(F32)
    if a_zp:
        af -= F32.type(a_zp)
    try:
        return np.matmul(af, bf)
    except ValueError:
        return None


@KERNELS.register("MatMulInteger", 10)
def matmul_integer(ctx):
    other = portable_linalg.matmul_integer(ctx)
    allowed_a = eight_bit(portable_linalg.schema_types(ctx, "T1"))
    allowed_b = eight_bit(portable_linalg.schema_types(ctx, "T2"))
    cache = [None]
    b_held = Held(ctx, 1)
    fast = vnni.get()

    def run(a, b, a_zero_point=None, b_zero_point=None):
        if _batched_ok(a, b, b_zero_point) and a.dtype in allowed_a and b.dtype in allowed_b:
            za = zero_point_value(a_zero_point, a.dtype)
            acc = None if za is None else batched_product(a, za, b, zero_point_value(b_zero_point, b.dtype))
            return other(a, b, a_zero_point, b_zero_point) if acc is None else acc.astype(np.int32)
        if not (_operands_ok(a, b) and a.dtype in allowed_a and b.dtype in allowed_b
                and b_zero_point_ok(b_zero_point, b)):
            return other(a, b, a_zero_point, b_zero_point)
        za = zero_point_value(a_zero_point, a.dtype)
        if za is None:
            return other(a, b, a_zero_point, b_zero_point)
        return exact_product(a, za, centered_b(cache, b, b_zero_point, b_held), fast).astype(np.int32)

    return run


def _one_float32(v) -> bool:
    return _nd(v) and v.dtype == F32 and v.size == 1


@KERNELS.register("QLinearMatMul", 10, 21)
def qlinear_matmul(ctx):
    other = portable.qlinear_matmul(ctx)
    cache = [None]
    b_held = Held(ctx, 3)
    requantize = loops.requantize_rows.get()     # None: compiled loops off (the float64 numpy requantization)
    fast = vnni.get()
    scales_held = [Held(ctx, i) for i in (1, 4, 6, 7)]
    kept = [None]

    def vnni_body(args, za, n):
        """The VNNI product with the requantization in its last pass, as a function of A."""
        mult, zy = requantization(args[1], args[4], args[6], args[7], n)
        lo, hi = RANGES[args[7].dtype]
        lo, hi, ydtype, zeros = float(lo), float(hi), args[7].dtype, np.zeros(n)
        packed = centered_b(cache, args[3], args[5], b_held).vnni_packed(fast)

        def body(a):
            out = np.empty(a.shape[:-1] + (n,), ydtype)
            vnni.product(fast, a.reshape(-1, a.shape[-1]), za, packed,
                         requantized=(zeros, mult, zy, lo, hi, out.reshape(-1, n)))
            return out
        return body

    def requantization(a_scale, b_scale, y_scale, y_zero_point, n: int):
        """``(mult, y_zp)``: the multiplier ``a_scale * b_scale / y_scale`` in float32 (the portable
        kernel's), as N float64 values, and the zero point as a float; kept while the plan holds
        the four arrays and they come back."""
        given = (a_scale, b_scale, y_scale, y_zero_point)
        k = kept[0]
        if k is not None and k[2] == n and all(x is y for x, y in zip(k[0], given)):
            return k[1]
        sb = b_scale.reshape(-1) if b_scale.size > 1 else b_scale.reshape(())
        mult = np.ascontiguousarray(np.broadcast_to(np.asarray(a_scale.reshape(()) * sb / y_scale.reshape(()))
                                                    .astype(np.float64), (n,)))
        got = (mult, float(y_zero_point.reshape(-1)[0]))
        if all(h(v) for h, v in zip(scales_held, given)):
            kept[0] = (given, got, n)
        return got

    def decide(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
        """The body computing Y from an A of this A's shape and dtype with these other inputs, or
        None where the portable kernel serves them."""
        args = (a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point)
        if not (_nd(a) and a.dtype in RANGES and _one_float32(a_scale) and _one_float32(y_scale) and _nd(b_scale)
                and b_scale.dtype == F32
                and _nd(y_zero_point) and y_zero_point.dtype in RANGES and y_zero_point.size == 1):
            return None
        za = zero_point_value(a_zero_point, a.dtype)
        if za is None:
            return None
        if (fast is not None and requantize is not None and _operands_ok(a, b) and b_zero_point_ok(b_zero_point, b)
                and (b_scale.size == 1 or (b_scale.ndim == 1 and b_scale.size == b.shape[1]))
                and b.shape[0] <= vnni.K_LIMIT):
            # the VNNI product with the requantization in its last pass (the same float64 operations)
            return vnni_body(args, za, b.shape[1])
        if _batched_ok(a, b, b_zero_point) and b_scale.size == 1:
            return lambda a: general(a, za, True, *args[1:])
        if (_operands_ok(a, b) and b_zero_point_ok(b_zero_point, b)
                and (b_scale.size == 1 or (b_scale.ndim == 1 and b_scale.size == b.shape[1]))):
            return lambda a: general(a, za, False, *args[1:])
        return None

    def general(a, za, batched, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
        """The float32 products (stacked B, or a 2-D B off the VNNI path) and the requantization."""
        if batched:
            acc = batched_product(a, za, b, zero_point_value(b_zero_point, b.dtype))
            if acc is None:
                return other(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point)
        else:
            acc = exact_product(a, za, centered_b(cache, b, b_zero_point, b_held), fast)
        # the multiplier in float32, as the portable kernel computes it (its ``a_s * b_scale / y_scale``)
        sb = b_scale.reshape(-1) if b_scale.size > 1 else b_scale.reshape(())
        mult = np.asarray(a_scale.reshape(()) * sb / y_scale.reshape(()))
        lo, hi = RANGES[y_zero_point.dtype]
        if requantize is not None:      # one compiled pass: ``(acc + 0) * mult + y_zp``, rint, clip
            n = acc.shape[-1]
            rows = acc.size // n
            out = np.empty(acc.shape, y_zero_point.dtype)
            requantize(np.ascontiguousarray(acc).reshape(rows, n), np.zeros(n), np.ascontiguousarray(
                np.broadcast_to(mult.astype(np.float64), (n,))), float(y_zero_point.reshape(-1)[0]), float(lo),
                float(hi), out.reshape(rows, n))
            return out
        r = acc.astype(np.float64)
        r *= mult.astype(np.float64)
        r += float(y_zero_point.reshape(-1)[0])
        np.rint(r, out=r)
        np.clip(r, lo, hi, out=r)
        return r.astype(y_zero_point.dtype)

    run = decided_each_call(decide, other)
    # every input but A a constant of the plan: the bodies kept per A layout
    return binds_constants(run, bodies_by_layout(decide, other), 1, 2, 3, 4, 5, 6, 7)


# ------------------------------------------------------------------ ai.onnxkit LookupTable
@KERNELS.register("LookupTable", 3, domain=FUSED_DOMAIN)
def lookup_table_kernel(ctx):
    """LookupTable-3: the body's 256 values made at planning where X's type is known there (else at
    the first call), each element of X looked up through its uint8 view (module docstring)."""
    from onnxkit_default_domain.api import lookup_table, planned_table

    tables = {}
    table, dtype = planned_table(ctx)
    if table is not None:
        tables[dtype] = table
    loop = loops.lookup.get()

    def run(x):
        x = np.asarray(x)
        found = tables.get(x.dtype)
        if found is None:
            found = tables[x.dtype] = lookup_table(ctx, x.dtype)
        codes = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
        y = np.empty(x.shape, found.dtype)
        if loop is None:
            np.take(found, codes, out=y.reshape(-1))
        else:
            loop(codes, found, y.reshape(-1))
        return y
    return run
