"""cpu fast paths of the 8-bit convolutions of ai.onnx: ConvInteger
(``onnxkit_default_domain/kernels/conv.py``) and QLinearConv (``.../kernels/quantization.py``).

Both compute ``(X - x_zp) * (W - w_zp)`` — the zero points subtracted from the data, so a
padded position contributes 0 — and the portable kernels do it exactly in float64.  Here W
minus its zero point is made once as float32 (kept while the same W and zero point come back
where the plan holds W, :class:`~._plans.Held`: a constant the planner declares,
``ctx.is_constant``, such as an initializer, or its own default), X minus its zero point is one float32
pass, and the convolution is the portable im2col product
(:func:`onnxkit_default_domain.kernels.conv.conv_nd`, the columns by one strided copy) in
float32, **where it is exact**: every entry of ``X - x_zp`` lies in ``[-amax, amax]``
(``amax = max(x_zp - lo, hi - x_zp)`` over X's type range), and a partial sum of output channel
``m`` is a sum of a subset of the integer products of its window, at most
``amax * L1_m`` in magnitude, ``L1_m = sum |w_m - w_zp_m|`` over the channel's ``C/group * K``
weights.  Where ``amax * max_m L1_m <= 2^24`` every integer met is a float32 and every BLAS step
is exact, whatever its order (fused multiply-adds included), so the sums equal the portable
kernel's.  (Full-range 8-bit weights reach the bound at ``C/group * K`` ~ 258, e.g. 29 channels
of 3x3; real weights, whose L1 norms are far smaller, later: a ResNet-18's last 3x3 layers, 4,608
weights per channel, reach it with per-channel int8 weights.)  Past the bound, on the compiled
columns (one or two spatial axes), the product is split along the ``C/group * K`` axis into
consecutive ranges within the bound for every output channel
(:func:`~.quantization.k_chunks`, found once per W and ``amax``), each an exact float32 product,
summed in float64 (exact below 2^53); elsewhere the portable float64 kernel runs.

* **ConvInteger**: the exact sums as int32 (the portable kernel's ``round`` and cast of an exact
  integer give the same).
* **QLinearConv**: the sums requantized by one compiled pass
  (:data:`onnxkit_cpu.compiled.quantized.requantize`) doing the portable kernel's float64
  operations in its order — ``(acc + B) * mult + y_zp``, round half to even, clip — with the
  multiplier ``x_scale * w_scale / y_scale`` computed in float32 as it does: bit-identical.

Two more bodies give the same exact sums: where the host has AVX-512 VNNI, convolutions of one or
two spatial axes with at least :data:`VNNI_MIN_CHANNELS` output channels per group run the VNNI
integer product (:mod:`onnxkit_cpu.compiled.quantized_vnni`: channels-last im2col rows, the
zero points applied from row and column sums); depthwise convolutions (``group == C == M``, two
spatial axes, within the float32 bound) run a compiled loop
(:data:`onnxkit_cpu.compiled.quantized.depthwise`).  Both do QLinearConv's requantization in their
last pass, the requantize loop's operations.  QLinearConv declares its output bytes (the run
loop's size guard reads the geometry, not inference).  Where every input but X is a constant of
the plan or absent (weights, scales, zero points and bias as initializers), the run loop binds
the node (:func:`~onnxkit.runtime.kernel.binds_constants`, :func:`~._plans.bodies_by_layout`):
the checks, geometry, requantization parameters and path are decided once per X shape and dtype,
and each X of that layout runs the body decided for it; otherwise they are decided at each call.

Taken for: X and W (and y_zero_point) int8 / uint8 of the definition's types, rank >= 3, one x
zero point, one or one-per-output-channel w zero point and (QLinearConv) w_scale, float32
scales, an int32 B of M values, no negative pads, compiled loops on for QLinearConv.  Everything
else — and every error — is the portable kernel's.
"""

from __future__ import annotations

import math

import numpy as np
from onnxkit_default_domain.api import conv as portable_conv
from onnxkit_default_domain.api import quantization as portable_q
from onnxkit_default_domain.api import schema_types

from onnxkit.plugin import KernelTable, binds_constants, declares_output_bytes

from ..compiled import quantized as loops
from ..compiled import quantized_vnni as vnni
from ._plans import Held, bodies_by_layout, decided_each_call
from .conv import strided_columns
from .quantization import (F32, FLOAT32_EXACT, RANGES, eight_bit, k_chunks, kept_centered, zero_point_key,
                           zero_point_value)

KERNELS = KernelTable()


def _nd(a) -> bool:
    return type(a) is np.ndarray


class CenteredW:
    """W minus its zero point (one, or one per output channel) as float32, and the largest
    per-output-channel L1 norm of it (module docstring), for one W and zero point values."""

    __slots__ = ("w", "zp", "weights", "l1", "splits", "zp_value", "packed", "rows")

    def __init__(self, w, zp):
        self.w, self.zp = w, zero_point_key(zp)
        self.zp_value, self.packed, self.rows = (None if zp is None else np.array(zp)), None, None
        m = w.astype(F32)
        if zp is not None:
            z = np.reshape(zp, (-1,)).astype(F32)
            m -= z[0] if z.size == 1 else z.reshape((-1,) + (1,) * (w.ndim - 1))
        self.weights = m
        self.l1 = float(np.abs(m).reshape(m.shape[0], -1).sum(axis=1, dtype=np.float64).max()) if m.size else 0.0
        self.splits = {}

    def fits(self, w, zp) -> bool:
        return w is self.w and zero_point_key(zp) == self.zp

    def chunks(self, amax: int) -> tuple:
        """The bounds of :func:`~.quantization.k_chunks` along the ``C/group * K`` axis (each
        output channel a column) for an operand of largest magnitude ``amax``."""
        got = self.splits.get(amax)
        if got is None:
            got = self.splits[amax] = k_chunks(self.weights.reshape(self.weights.shape[0], -1).T, self.l1, amax)
        return got

    def vnni_groups(self, impl, group: int) -> list:
        """Each group's weights ``(C/group * K, M/group)`` in the VNNI layout
        (:class:`~onnxkit_cpu.compiled.quantized_vnni.PackedW`), made once."""
        if self.packed is None:
            m = self.w.shape[0]
            mg = m // group
            flat = vnni.conv_weights(self.w)
            z = self.zp_value
            self.packed = [vnni.PackedW(impl, flat[g * mg:(g + 1) * mg].T,
                                        None if z is None else (z.reshape(-1) if z.size == 1 else
                                                                z.reshape(-1)[g * mg:(g + 1) * mg]))
                           for g in range(group)]
        return self.packed

    def vnni_rows(self, impl, group: int) -> list:
        """Each group's weights ``(M/group, C/group * K)`` as the rows operand of the planar
        convolution (:class:`~onnxkit_cpu.compiled.quantized_vnni.PackedRows`), made once."""
        if self.rows is None:
            mg = self.w.shape[0] // group
            flat = vnni.conv_weights(self.w)
            z = self.zp_value
            self.rows = [vnni.PackedRows(impl, flat[g * mg:(g + 1) * mg],
                                         None if z is None else (z.reshape(-1) if z.size == 1 else
                                                                 z.reshape(-1)[g * mg:(g + 1) * mg]))
                         for g in range(group)]
        return self.rows

    def vnni_conv(self, impl, x, x_zp: int, plan, requantized=None):
        """The VNNI convolution of ``x`` by these weights: the planar orientation where
        :func:`~onnxkit_cpu.compiled.quantized_vnni.prefers_planar`, else the rows one; the
        same exact sums (``requantized`` as :func:`~onnxkit_cpu.compiled.quantized_vnni.conv`)."""
        if vnni.prefers_planar(impl, x, plan):
            return vnni.conv_planar(impl, x, x_zp, self.vnni_rows(impl, plan.group), plan, requantized)
        return vnni.conv(impl, x, x_zp, self.vnni_groups(impl, plan.group), plan, requantized)


def centered_w(cache: list, w, zp, held) -> CenteredW:
    """The :class:`CenteredW` of ``w`` (cached in ``cache[0]`` where the plan holds ``w``: ``held``)."""
    return kept_centered(cache, CenteredW, w, zp, held)


def w_zero_point_ok(z, w) -> bool:
    """None, one value of W's type, or a 1-D vector of one per output channel."""
    return z is None or (_nd(z) and z.dtype == w.dtype and (z.size == 1 or (z.ndim == 1 and z.size == w.shape[0])))


#: the fewest output channels per group for which the VNNI product runs (its tiles are
#: :data:`~onnxkit_cpu.compiled.quantized_vnni_impl.NR` channels wide)
VNNI_MIN_CHANNELS = 8


def vnni_applies(fast, x, plan, prepared) -> bool:
    """Whether the VNNI product (``fast``) takes this convolution (:func:`exact_conv`)."""
    return (fast is not None and x.ndim <= 4 and plan.n > 0 and math.prod(plan.out_shape) > 0
            and plan.m // plan.group >= VNNI_MIN_CHANNELS and prepared.weights[0].size <= vnni.K_LIMIT)


def depthwise_applies(dw_loop, x, x_zp: int, plan, prepared) -> bool:
    """Whether the compiled depthwise loop (``dw_loop``) takes this convolution: two spatial axes,
    one input channel per output channel (``group == C == M``), non-empty, and the float32 sums
    exact (``amax * max_m L1_m <= 2^24``, the module docstring's bound)."""
    if dw_loop[0] is None or dw_loop[1] is None or x.ndim != 4 or not (plan.group == plan.c == plan.m) or plan.n == 0:
        return False
    lo, hi = RANGES[x.dtype]
    return math.prod(plan.out_shape) > 0 and max(x_zp - lo, hi - x_zp) * prepared.l1 <= FLOAT32_EXACT


#: output rows narrower than this take the channels-last depthwise loop (its vectors run along
#: the channels; the planar loop's along a row)
DEPTHWISE_PLANAR_MIN_WIDTH = 12


def depthwise(dw_loop, x, x_zp: int, prepared, plan, requantized=None):
    """The depthwise convolution by the compiled loop (:data:`onnxkit_cpu.compiled.quantized.depthwise`,
    or :data:`~onnxkit_cpu.compiled.quantized.depthwise_channels_last` for outputs narrower than
    :data:`DEPTHWISE_PLANAR_MIN_WIDTH`; ``dw_loop`` is the pair): the exact sums as int32
    (N, M, *out), or requantized (``(bias, mult, zp, lo, hi, y)``) into ``y``."""
    dw_loop = dw_loop[0] if plan.out_shape[1] >= DEPTHWISE_PLANAR_MIN_WIDTH else dw_loop[1]
    m = plan.m
    w = prepared.weights.reshape(m, plan.kernel[0], plan.kernel[1])
    if requantized is None:
        y = np.empty((plan.n, m) + plan.out_shape, np.int32)
        bias, mult, zp, lo, hi = np.zeros(m), np.ones(m), 0.0, 0.0, 0.0
    else:
        bias, mult, zp, lo, hi, y = requantized
    dw_loop(np.ascontiguousarray(x), np.float32(x_zp), w, plan.strides[0], plan.strides[1], plan.dil[0], plan.dil[1],
            plan.begin[0], plan.begin[1], bias, mult, zp, lo, hi, requantized is not None, y)
    return y


def depthwise_body(dw_loop, x_zp: int, prepared, plan, requantized: tuple, ydtype):
    """:func:`depthwise` requantized (``requantized`` ``(bias, mult, zp, lo, hi)``) as a function of
    X, its loop, weights and arguments chosen once (a body of :func:`bodies_by_layout`)."""
    fn = dw_loop[0] if plan.out_shape[1] >= DEPTHWISE_PLANAR_MIN_WIDTH else dw_loop[1]
    w = prepared.weights.reshape(plan.m, plan.kernel[0], plan.kernel[1])
    shape = (plan.n, plan.m) + plan.out_shape
    zp = np.float32(x_zp)
    (sh, sw), (dh, dw), (top, left) = plan.strides, plan.dil, plan.begin
    bias, mult, yzp, lo, hi = requantized

    def body(x):
        y = np.empty(shape, ydtype)
        fn(x if x.flags.c_contiguous else np.ascontiguousarray(x), zp, w, sh, sw, dh, dw, top, left, bias, mult, yzp,
           lo, hi, True, y)
        return y
    return body


def exact_conv(x, x_zp: int, prepared: CenteredW, plan, columns=None, fast=None):
    """The convolution of ``x - x_zp`` by the prepared weights as exact float32 sums
    ``(N, M, *out)``, or None where the module docstring's bound does not hold.  ``columns``:
    the compiled im2col (:data:`onnxkit_cpu.compiled.quantized.centered_columns`) for one or two
    spatial axes, else the portable product on ``x - x_zp``; ``fast``: the VNNI product
    (:func:`onnxkit_cpu.compiled.quantized_vnni.get`, exact float64 sums) for one or two spatial
    axes where each group has at least :data:`VNNI_MIN_CHANNELS` output channels."""
    lo, hi = RANGES[x.dtype]
    amax = max(x_zp - lo, hi - x_zp)
    nd = x.ndim - 2
    if vnni_applies(fast, x, plan, prepared):
        return prepared.vnni_conv(fast, x, x_zp, plan)
    if columns is None or nd > 2 or plan.n == 0 or math.prod(plan.out_shape) == 0:
        if amax * prepared.l1 > FLOAT32_EXACT:
            return None
        xf = x.astype(F32)
        if x_zp:
            xf -= F32.type(x_zp)
        return portable_conv.conv_nd(np, xf, prepared.weights, plan, strided_columns)
    kh, kw, sh, sw, dh, dw, top, left, oh, ow, x4 = vnni.planar(x, plan)
    n, c, m, group = plan.n, plan.c, plan.m, plan.group
    kp = kh * kw
    cols = np.empty((n, c * kp, oh * ow), F32)
    columns(np.ascontiguousarray(x4), np.float32(x_zp), kh, kw, sh, sw, dh, dw, top, left, oh, ow, cols)
    cg, mg = c // group, m // group
    w = prepared.weights.reshape(group, mg, cg * kp)
    cols = cols.reshape(n, group, cg * kp, oh * ow)
    bounds = prepared.chunks(amax)
    if len(bounds) == 2:
        y = np.matmul(w, cols)
    else:       # K split: exact float32 products summed in float64 (module docstring)
        y = np.zeros((n, group, mg, oh * ow))
        for s, e in zip(bounds[:-1], bounds[1:]):
            y += np.matmul(w[:, :, s:e], cols[:, :, s:e])
    return y.reshape((n, m) + plan.out_shape)


def _operands_ok(x, w) -> bool:
    return (_nd(x) and _nd(w) and x.dtype in RANGES and w.dtype in RANGES and x.ndim >= 3 and w.ndim == x.ndim
            and x.size and w.size)


# -------------------------------------------------------------------------------- ConvInteger
@KERNELS.register("ConvInteger", 10)
def conv_integer(ctx):
    other = portable_conv.conv_integer(ctx)
    group = int(ctx.attr("group"))
    plans = portable_conv.Plans(ctx, lambda c, xs, ws: portable_conv.conv_plan(c, group, xs, ws))
    allowed_x, allowed_w = eight_bit(schema_types(ctx, "T1")), eight_bit(schema_types(ctx, "T2"))
    cache = [None]
    w_held = Held(ctx, 1)                       # where the plan holds W: its centered form is kept
    columns = loops.centered_columns.get()      # None: compiled loops off (the float32 portable product)
    fast = vnni.get()
    dw_loop = (loops.depthwise.get(), loops.depthwise_channels_last.get())

    def run(x, w, x_zero_point=None, w_zero_point=None):
        if not (_operands_ok(x, w) and x.dtype in allowed_x and w.dtype in allowed_w
                and w_zero_point_ok(w_zero_point, w)):
            return other(x, w, x_zero_point, w_zero_point)
        zx = zero_point_value(x_zero_point, x.dtype)
        if zx is None:
            return other(x, w, x_zero_point, w_zero_point)
        plan = plans(x, w)        # the portable checks and geometry (its errors)
        if any(b < 0 for b in plan.begin + plan.end):
            return other(x, w, x_zero_point, w_zero_point)
        prepared = centered_w(cache, w, w_zero_point, w_held)
        if depthwise_applies(dw_loop, x, zx, plan, prepared):
            return depthwise(dw_loop, x, zx, prepared, plan)
        acc = exact_conv(x, zx, prepared, plan, columns, fast)
        if acc is None:
            return other(x, w, x_zero_point, w_zero_point)
        return acc.astype(np.int32)

    return run


# -------------------------------------------------------------------------------- QLinearConv
def _float32_values(v, counts) -> bool:
    return _nd(v) and v.dtype == F32 and (v.size in counts) and (v.size == 1 or v.ndim == 1)


def requant_parameters(kept: list, x_scale, w_scale, y_scale, B, m: int, constant: bool):
    """``(mult, bias)`` as float64 (M,) vectors: the multiplier ``x_scale * w_scale / y_scale``
    computed in float32 as the portable kernel does, and B (0 where absent); kept in ``kept[0]``
    where the plan holds the scales and B (``constant``; B may be absent), while the same
    arrays come back."""
    given = (x_scale, w_scale, y_scale, B)
    k = kept[0]
    if k is not None and all(a is b for a, b in zip(k[0], given)):
        return k[1], k[2]
    mult = np.asarray(x_scale.reshape(()) * w_scale.reshape(-1) / y_scale.reshape(()), dtype=F32)
    mult = np.ascontiguousarray(np.broadcast_to(mult, (m,)), dtype=np.float64)
    bias = np.zeros(m) if B is None else B.reshape(-1).astype(np.float64)
    if constant:
        kept[0] = (given, mult, bias)
    return mult, bias


@KERNELS.register("QLinearConv", 10)
def qlinear_conv(ctx):
    other = portable_q.qlinear_conv(ctx)
    loop, columns = loops.requantize.get(), loops.centered_columns.get()
    if loop is None or columns is None:
        return other
    fast = vnni.get()
    dw_loop = (loops.depthwise.get(), loops.depthwise_channels_last.get())
    group = int(ctx.attr("group"))
    auto_pad = ctx.attr_str("auto_pad")
    cache = [None]
    kept = [None]
    geometry = {}
    # where the plan holds W, and the scales and B (Held): what is derived from them is kept
    w_held = Held(ctx, 3)
    scales_held = [Held(ctx, i) for i in (1, 4, 6)]
    b_held = Held(ctx, 8)

    def plan_of(x, w):
        """The portable kernel's attributes and geometry as a ConvPlan (its errors), or None."""
        key = (x.shape, w.shape)
        plan = geometry.get(key)
        if plan is None:
            c, m = x.shape[1], w.shape[0]
            if group <= 0 or c % group or m % group or w.shape[1] != c // group:
                return None
            nd = x.ndim - 2
            kernel, strides, dilations, pads = portable_q.conv_attributes(ctx, w.shape, nd)
            out_spatial, pads = portable_q.conv_geometry(ctx, x.shape[2:], kernel, strides, dilations, pads, auto_pad)
            if any(p < 0 for p in pads):
                return None
            plan = portable_conv.ConvPlan(x.shape[0], c, m, group, tuple(kernel), tuple(strides), tuple(dilations),
                                          tuple(pads[:nd]), tuple(pads[nd:]), tuple(out_spatial))
            if len(geometry) > 64:
                geometry.clear()
            geometry[key] = plan
        return plan

    def decide(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=None):
        """The body computing Y from an X of this X's shape and dtype with these other inputs (the
        checks, the geometry, the requantization parameters and the path decided here), or None
        where the portable kernel serves them."""
        args = (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B)
        if not (_operands_ok(x, w) and w_zero_point_ok(w_zero_point, w) and _nd(y_zero_point)
                and y_zero_point.dtype in RANGES and y_zero_point.size == 1
                and _float32_values(x_scale, (1,)) and _float32_values(y_scale, (1,))
                and _float32_values(w_scale, (1, w.shape[0]))
                and (B is None or (_nd(B) and B.dtype == np.int32 and B.size == w.shape[0]))):
            return None
        zx = zero_point_value(x_zero_point, x.dtype)
        plan = None if zx is None else plan_of(x, w)
        if plan is None:
            return None
        prepared = centered_w(cache, w, w_zero_point, w_held)
        m = plan.m
        held = all(h(v) for h, v in zip(scales_held, (x_scale, w_scale, y_scale))) and (B is None or b_held(B))
        mult, bias = requant_parameters(kept, x_scale, w_scale, y_scale, B, m, held)
        lo, hi = RANGES[y_zero_point.dtype]
        zy = float(y_zero_point.reshape(-1)[0])
        shape, ydtype, lo, hi = (plan.n, m) + plan.out_shape, y_zero_point.dtype, float(lo), float(hi)
        if depthwise_applies(dw_loop, x, zx, plan, prepared):
            return depthwise_body(dw_loop, zx, prepared, plan, (bias, mult, zy, lo, hi), ydtype)
        if vnni_applies(fast, x, plan, prepared):     # the exact sums requantized in the same pass
            def body(x):
                return prepared.vnni_conv(fast, x, zx, plan, (bias, mult, zy, lo, hi, np.empty(shape, ydtype)))
            return body

        def body(x):
            acc = exact_conv(x, zx, prepared, plan, columns)
            if acc is None:
                return other(x, *args[1:])
            out = np.empty(acc.shape, ydtype)
            n = acc.shape[0]
            length = math.prod(acc.shape[2:])
            loop(acc.reshape(n, m, length), bias, mult, zy, lo, hi, out.reshape(n, m, length))
            return out
        return body

    run = decided_each_call(decide, other)
    def output_bytes(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=None):
        """Y's bytes from the geometry (kept per shape), or 0 where it cannot be read (the
        kernel then reports the inputs): the run loop's size guard asks no inference per call."""
        plan = plan_of(x, w) if _nd(x) and _nd(w) and x.ndim >= 3 and w.ndim == x.ndim else None
        return 0 if plan is None else plan.n * plan.m * math.prod(plan.out_shape) * y_zero_point.dtype.itemsize

    # every input but X a constant of the plan (or absent): the bodies kept per X layout
    return binds_constants(declares_output_bytes(run, output_bytes), bodies_by_layout(decide, other),
                           1, 2, 3, 4, 5, 6, 7, 8)
