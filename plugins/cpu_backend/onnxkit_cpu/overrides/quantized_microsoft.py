"""cpu fast paths of the com.microsoft quantized operators of onnxruntime's QOperator format
and its optimizer: QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QGemm
(``onnxkit_microsoft/kernels/quantized.py``), MatMulIntegerToFloat, DynamicQuantizeMatMul and
QLinearConcat (``.../kernels/qlinear_ops.py``); their portable kernels stay the reference.

The portable kernels dequantize to float64, compute and requantize through the array API
namespace; here the same float64 operations run in the same order on plain numpy (or one
compiled pass), so the results are bit-identical:

* **QLinearAdd / QLinearMul** with A and B of one 8-bit type (broadcasting: an operand whose
  broadcast repeats it whole, such as a bias row, is read in place, the other copied out to the
  result's shape first: the same element pairs the portable kernel combines), finite
  scales and a nonzero C scale: one compiled pass
  (:data:`onnxkit_cpu.compiled.quantized.qlinear_binary`).  Everything else takes the portable
  kernel.
* **QLinearGlobalAveragePool**: the portable kernel's numpy calls (``(x - zp) * scale``, the
  mean over the spatial axes, ``round(m / y_scale) + y_zp``, clip), without its namespace
  wrappers.
* **QGemm** (2-D 8-bit A and B, one A zero point of A's type, B zero point and scale one or one
  per column): B' minus its zero point is made once as float32 while the same B comes back
  where the plan holds it (:class:`~._plans.Held`: a constant the planner declares,
  ``ctx.is_constant``, or its own default), and ``(A' - a_zp)(B' - b_zp)`` is one float32 BLAS
  product where it is exact — the bound of :mod:`.quantization` (``amax * max_n L1_n <= 2^24``)
  — else the sum in float64 of the exact float32 products over K ranges within that bound
  (:func:`~.quantization.chunked_matmul`); then C, alpha, the scales and the requantization as the portable kernel applies them, in
  float64.
* **MatMulIntegerToFloat** (A of rank >= 2, 2-D B, one a_scale and A zero point, B's one or per
  column) and **DynamicQuantizeMatMul** (float32 A quantized to uint8 by the portable kernel's
  float32 formulas — the range by one compiled pass, A by the quantize pass; a NaN, an infinity or
  an all-zero A takes the portable kernel): the exact float32 product of :mod:`.quantization`
  (:func:`~.quantization.exact_product`, B centered once), then ``acc * (a_scale * b_scale)``
  and the bias in float64 as the portable kernels compute them.
* **QLinearConcat** (8-bit inputs of Y's type, one float32 scale and zero point each, one rank,
  compiled loops on): each input's codes through a 256-entry table made by the portable kernel
  itself on that input's 256 codes (requantization is a function of one code), looked up by one
  compiled pass, then one ``concatenate``: the same bits.

Where the host has AVX-512 VNNI the products of QGemm, MatMulIntegerToFloat and
DynamicQuantizeMatMul are the VNNI integer product (:mod:`onnxkit_cpu.compiled.quantized_vnni`),
the same exact sums.  QLinearAdd / QLinearMul keep their parameters' float64 values while the plan
holds them; QLinearAdd, QLinearMul, QGemm and QLinearGlobalAveragePool declare their output bytes.
Where every input of QGemm but A is a constant of the plan or absent, the run loop binds the node
(:func:`~._plans.bodies_by_layout`): its checks, B' and the finish's parameters are decided once
per A shape and dtype.

Float results equal the portable kernels' (a zero's sign aside, where the two BLAS routines
form an exact zero sum differently).

Where onnxkit-microsoft is not installed this module registers nothing.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable, binds_constants, declares_output_bytes

from ..compiled import quantized as loops
from ..compiled import quantized_vnni as vnni
from ._plans import Held, bodies_by_layout, decided_each_call
from .quantization import (F32, RANGES, CenteredB, b_zero_point_ok, centered_b, exact_product,
                           zero_point_key, zero_point_value)

KERNELS = KernelTable()

try:
    from onnxkit_microsoft.api import qlinear_ops as portable_ops
    from onnxkit_microsoft.api import quantized as portable
except ImportError:  # onnxkit-microsoft absent: no com.microsoft operators to serve
    portable = portable_ops = None

DOMAIN = "com.microsoft"


def _nd(a) -> bool:
    return type(a) is np.ndarray


def _one(v) -> bool:
    return _nd(v) and v.size == 1


def _f64(v) -> float:
    """The single value of a scale or zero point as float64 (the portable ``astype(float64)``)."""
    return float(np.asarray(v, dtype=np.float64).reshape(-1)[0])


def _repeats_shape(dims, shape) -> bool:
    """Whether an operand of extents ``dims`` broadcast to ``shape`` is its values repeated whole:
    ``dims`` (right aligned) are ``shape``'s trailing extents after leading 1s, none of them 0."""
    lead = len(shape) - len(dims)
    k = 0
    while k < len(dims) and dims[k] == 1:
        k += 1
    return tuple(dims[k:]) == tuple(shape[lead + k:]) and 0 not in dims


def _binary(ctx, op: int, other):
    loop = loops.qlinear_binary.get()
    if loop is None:
        return other
    params_held = [Held(ctx, i) for i in (1, 2, 4, 5, 6, 7)]
    kept = [None]           # (the six parameter arrays, their checks and values) while the plan holds them
    layouts = {}            # (a.shape, b.shape) -> how the operands pair up (shapes are all it depends on)

    def parameters(a_scale, a_zp, b_scale, b_zp, c_scale, c_zp):
        """``(za, sa, zb, sb, sc, zc)`` as float64, or None (not one finite value each, sc zero)."""
        given = (a_scale, a_zp, b_scale, b_zp, c_scale, c_zp)
        k = kept[0]
        if k is not None and all(x is y for x, y in zip(k[0], given)):
            return k[1]
        got = None
        if (_one(a_scale) and _one(b_scale) and _one(c_scale) and all(z is None or _one(z) for z in (a_zp, b_zp))
                and (c_zp is None or (_one(c_zp) and c_zp.dtype in RANGES))):
            za, zb = 0.0 if a_zp is None else _f64(a_zp), 0.0 if b_zp is None else _f64(b_zp)
            sa, sb, sc = _f64(a_scale), _f64(b_scale), _f64(c_scale)
            if math.isfinite(sa) and math.isfinite(sb) and math.isfinite(sc) and sc != 0:
                got = (za, sa, zb, sb, sc, 0.0 if c_zp is None else _f64(c_zp))
        if all(h(v) for h, v in zip(params_held, given) if v is not None):
            kept[0] = (given, got)
        return got

    def layout(a_shape, b_shape):
        """``(shape, mode)``: mode 0 same shapes, 1 b repeated along a, 2 a repeated along b (the
        operands exchanged), 3 both copied out; None where they do not broadcast."""
        key = (a_shape, b_shape)
        got = layouts.get(key, False)
        if got is False:
            if a_shape == b_shape:
                got = (a_shape, 0)
            else:
                try:
                    shape = np.broadcast_shapes(a_shape, b_shape)
                except ValueError:
                    shape = None
                if shape is None:
                    got = None
                elif b_shape != shape and a_shape == shape and _repeats_shape(b_shape, shape):
                    got = (shape, 1)
                elif a_shape != shape and b_shape == shape and _repeats_shape(a_shape, shape):
                    got = (shape, 2)
                else:
                    got = (shape, 3)
            if len(layouts) > 64:
                layouts.clear()
            layouts[key] = got
        return got

    def run(a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp=None):
        args = (a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp)
        if not (_nd(a) and _nd(b) and a.dtype in RANGES and b.dtype == a.dtype and a.size and b.size):
            return other(*args)
        values = parameters(a_scale, a_zp, b_scale, b_zp, c_scale, c_zp)
        pairing = None if values is None else layout(a.shape, b.shape)
        if pairing is None:
            return other(*args)
        za, sa, zb, sb, sc, zc = values
        shape, mode = pairing
        if mode == 2:       # a repeated along b: exchanged (u + v and u * v are commutative in float64)
            a, za, sa, b, zb, sb = b, zb, sb, a, za, sa
        elif mode == 3:     # each element's operands, copied out (6.6.2)
            a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
        out = (c_zp if c_zp is not None else a).dtype
        lo, hi = RANGES[out]
        y = np.empty(shape, out)
        loop(np.ascontiguousarray(a).reshape(-1), za, sa, np.ascontiguousarray(b).reshape(-1), zb, sb, sc, zc,
             float(lo), float(hi), op, y.reshape(-1))
        return y

    return run


#: (A's shape, B's shape) -> their broadcast shape's elements, for :func:`_binary_bytes` (emptied when full)
_BROADCAST_SIZES: dict = {}


def _binary_bytes(a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp=None) -> int:
    """QLinearAdd / QLinearMul's output bytes: the broadcast shape's elements of C's type
    (a ValueError where the shapes do not broadcast: the kernel reports them); the elements
    kept per pair of shapes (a node meets the same shapes run after run)."""
    key = (a.shape, b.shape)
    size = _BROADCAST_SIZES.get(key)
    if size is None:
        size = math.prod(np.broadcast_shapes(a.shape, b.shape))
        if len(_BROADCAST_SIZES) >= 256:
            _BROADCAST_SIZES.clear()
        _BROADCAST_SIZES[key] = size
    return size * (a if c_zp is None else c_zp).dtype.itemsize


def _declared(run, predict):
    """``run`` with its outputs' bytes declared by ``predict`` (the run loop's size guard then asks
    no inference per call), the portable kernel as it is."""
    return declares_output_bytes(run, predict)


def _gap(ctx, other):
    channels_last = bool(ctx.attr("channels_last"))

    def run(x, x_scale, x_zp, y_scale, y_zp):
        args = (x, x_scale, x_zp, y_scale, y_zp)
        if not (_nd(x) and x.dtype in RANGES and x.ndim >= 3 and _one(x_scale) and _one(y_scale)
                and (x_zp is None or _one(x_zp)) and (y_zp is None or (_one(y_zp) and y_zp.dtype in RANGES))):
            return other(*args)
        axes = tuple(range(1, x.ndim - 1)) if channels_last else tuple(range(2, x.ndim))
        d = x.astype(np.float64)
        if x_zp is not None:
            d = d - np.asarray(x_zp, dtype=np.float64).reshape(())
        d = d * np.asarray(x_scale, dtype=np.float64).reshape(())
        m = np.mean(d, axis=axes, keepdims=True)
        r = np.round(m / np.asarray(y_scale, dtype=np.float64).reshape(()))
        if y_zp is not None:
            r = r + np.asarray(y_zp, dtype=np.float64).reshape(())
        target = y_zp if y_zp is not None else x
        lo, hi = RANGES[target.dtype]
        return np.clip(r, lo, hi).astype(target.dtype)

    return run


def _positive_scale(v) -> bool:
    """One float32 value, finite, normal and positive (a dequantization that keeps the codes' order)."""
    return _one(v) and v.dtype == F32 and 1e-30 < float(v.reshape(-1)[0]) < 1e30


def _softmax(ctx, other):
    """QLinearSoftmax by one compiled pass over the rows
    (:data:`onnxkit_cpu.compiled.quantized.qlinear_softmax`: the portable steps, the row sums in
    order, within one step of the portable kernel): 8-bit X, positive finite scales, zero points
    of X's type (or none), the softmax's axes the last ones (opset 13 on: ``axis`` the last axis;
    before: every axis from ``axis`` on, taken together); everything else the portable kernel."""
    loop = loops.qlinear_softmax.get()
    opset = int(ctx.attr("opset", 13))
    axis = int(ctx.attr("axis", -1 if opset >= 13 else 1))
    if loop is None:
        return other

    def run(x, x_scale, x_zp, y_scale, y_zp=None):
        if not (_nd(x) and x.dtype in RANGES and x.ndim >= 1 and x.size and _positive_scale(x_scale)
                and _positive_scale(y_scale) and (x_zp is None or (_one(x_zp) and x_zp.dtype == x.dtype))
                and (y_zp is None or (_one(y_zp) and y_zp.dtype == x.dtype))):
            return other(x, x_scale, x_zp, y_scale, y_zp)
        r = x.ndim
        if not -r <= axis < r or (opset >= 13 and axis % r != r - 1):
            return other(x, x_scale, x_zp, y_scale, y_zp)
        n = x.shape[-1] if opset >= 13 else math.prod(x.shape[axis % r:])
        lo, hi = RANGES[x.dtype]
        y = np.empty(x.shape, x.dtype)
        loop(np.ascontiguousarray(x).reshape(-1, n), 0.0 if x_zp is None else _f64(x_zp), _f64(x_scale), lo,
             _f64(y_scale), 0.0 if y_zp is None else _f64(y_zp), float(lo), float(hi), y.reshape(-1, n))
        return y

    return run


#: the largest magnitude of alpha and the scales for which QGemm's compiled finish runs (every
#: value it forms is then finite: no NaN, no infinity, whose clip it does not repeat)
FINISH_LIMIT = 1e20


def _finishes(c, n: int, alpha: float, a_scale, b_scale, y_scale) -> bool:
    """Whether :data:`~onnxkit_cpu.compiled.quantized.qgemm_finish` takes QGemm's float64 steps:
    C absent, one value or one per column (N or (1, N)) of a numeric type, float32 scales of
    finite magnitude below :data:`FINISH_LIMIT`, alpha too, y_scale (if given) nonzero."""
    if c is not None and not (c.dtype.kind in "iuf" and (c.size == 1 or c.shape in ((n,), (1, n)))):
        return False
    if c is not None and c.dtype.kind == "f" and not np.isfinite(c).all():
        return False
    scales = [a_scale, b_scale] + ([] if y_scale is None else [y_scale])
    if not all(_nd(v) and v.dtype == F32 for v in scales) or not abs(alpha) < FINISH_LIMIT:
        return False
    if not all(np.all(np.abs(v) < FINISH_LIMIT) for v in scales):
        return False
    return y_scale is None or float(y_scale.reshape(-1)[0]) != 0.0


class _KeptB:
    """The centered B' of one B (as given, before transB), kept where the plan holds B."""

    __slots__ = ("b", "zp", "centered")

    def __init__(self, b, zp, trans_b: bool):
        self.b, self.zp = b, zero_point_key(zp)
        self.centered = CenteredB(b.T if trans_b else b, zp)


def _qgemm(ctx, other):
    alpha = float(ctx.attr("alpha"))
    ta, tb = bool(ctx.attr("transA")), bool(ctx.attr("transB"))
    kept = [None]
    b_held = Held(ctx, 3)        # where the plan holds B: B' is kept
    fast = vnni.get()
    finish = loops.qgemm_finish.get()

    def centered(b, zp):
        k = kept[0]
        if k is not None and k.b is b and k.zp == zero_point_key(zp):
            return k.centered
        made = _KeptB(b, zp, tb)
        if b_held(b):
            kept[0] = made
        return made.centered

    def decide(a, a_scale, a_zp, b, b_scale, b_zp=None, c=None, y_scale=None, y_zp=None):
        """The body computing Y from an A of this A's shape and dtype with these other inputs (the
        checks, B' and the finish's parameters decided here), or None where the portable kernel
        serves them."""
        if not (_nd(a) and _nd(b) and a.dtype in RANGES and b.dtype in RANGES and a.ndim == 2 and b.ndim == 2
                and a.size and b.size and _one(a_scale) and (y_scale is None or _one(y_scale))
                and (y_zp is None or (_one(y_zp) and y_zp.dtype in RANGES)) and (c is None or _nd(c))):
            return None
        k, n = (b.shape[1], b.shape[0]) if tb else b.shape
        if (a.shape[0] if ta else a.shape[1]) != k or not _nd(b_scale) or b_scale.size not in (1, n):
            return None
        if b_zp is not None and not (_nd(b_zp) and b_zp.dtype == b.dtype and (b_zp.size == 1 or (
                b_zp.ndim == 1 and b_zp.size == n))):
            return None
        za = zero_point_value(a_zp, a.dtype)
        if za is None:
            return None
        prepared = centered(b, b_zp)
        if not (finish is not None and _finishes(c, n, alpha, a_scale, b_scale, y_scale)):
            return lambda a: unfinished(exact_product(a.T if ta else a, za, prepared, fast).astype(np.float64),
                                        a, a_scale, a_zp, b, b_scale, b_zp, c, y_scale, y_zp)
        # one compiled pass: the float64 operations of ``unfinished`` in their order (qgemm_finish)
        flat_c = np.zeros(1) if c is None else c.reshape(-1).astype(np.float64)
        sb = b_scale.reshape(-1).astype(np.float64)
        a_s = float(a_scale.reshape(-1)[0])
        if y_scale is None:
            parameters = (flat_c, alpha, a_s, sb, 1.0, 0.0, 0.0, 0.0, False)
            ydtype = np.dtype(np.float32)
        else:
            ydtype = (y_zp if y_zp is not None else a).dtype
            lo_y, hi_y = RANGES[ydtype]
            parameters = (flat_c, alpha, a_s, sb, float(y_scale.reshape(-1)[0]),
                          0.0 if y_zp is None else float(y_zp.reshape(-1)[0]), float(lo_y), float(hi_y), True)

        def body(a):
            acc = exact_product(a.T if ta else a, za, prepared, fast).astype(np.float64, copy=False)
            y = np.empty((acc.shape[0], n), ydtype)
            finish(acc, *parameters, y)
            return y
        return body

    def unfinished(acc, a, a_scale, a_zp, b, b_scale, b_zp, c, y_scale, y_zp):
        """C, alpha, the scales and the requantization on the exact sums ``acc`` (float64), the
        portable kernel's numpy operations (where the compiled finish does not take them)."""
        n = acc.shape[1]
        if c is not None:
            try:
                acc = acc + c.astype(np.float64)
            except ValueError:
                return other(a, a_scale, a_zp, b, b_scale, b_zp, c, y_scale, y_zp)
        acc = acc * alpha
        sb = b_scale.reshape(()) if b_scale.size == 1 else b_scale.reshape(n)
        y = acc * np.asarray(a_scale, dtype=np.float64).reshape(()) * sb.astype(np.float64)
        if y_scale is None:
            return y.astype(np.float32)
        r = np.round(y / np.asarray(y_scale, dtype=np.float64).reshape(()))
        if y_zp is not None:
            r = r + np.asarray(y_zp, dtype=np.float64).reshape(())
        target = y_zp if y_zp is not None else a
        lo_y, hi_y = RANGES[target.dtype]
        return np.clip(r, lo_y, hi_y).astype(target.dtype)

    run = decided_each_call(decide, other)
    # every input but A a constant of the plan or absent: the bodies kept per A layout
    return binds_constants(run, bodies_by_layout(decide, other), 1, 2, 3, 4, 5, 6, 7, 8)


def _scaled(acc, a_scale, b_scale, bias, n: int, out_dtype):
    """``acc * (a_scale * b_scale) + bias`` in float64, cast to ``out_dtype`` (the portable order)."""
    sb = b_scale.reshape(()) if b_scale.size == 1 else b_scale.reshape(n)
    y = acc.astype(np.float64) * (np.asarray(a_scale, dtype=np.float64).reshape(()) * sb.astype(np.float64))
    if bias is not None:
        y = y + bias.astype(np.float64)
    return y.astype(out_dtype)


def _float_operands_ok(a, b, b_scale, b_zp, bias) -> bool:
    """B 2-D 8-bit with A's last extent, b_scale one or N values, b_zp as
    :func:`~.quantization.b_zero_point_ok`, bias absent or of shape (N,)."""
    if not (_nd(b) and b.dtype in RANGES and b.ndim == 2 and b.size and a.ndim >= 2 and a.shape[-1] == b.shape[0]):
        return False
    n = b.shape[1]
    return (_nd(b_scale) and b_scale.size in (1, n) and (b_scale.size == 1 or b_scale.ndim == 1)
            and b_zero_point_ok(b_zp, b) and (bias is None or (_nd(bias) and bias.shape == (n,))))


def _matmul_integer_to_float(ctx, other):
    cache = [None]
    b_held = Held(ctx, 1)
    fast = vnni.get()

    def run(a, b, a_scale, b_scale, a_zp=None, b_zp=None, bias=None):
        args = (a, b, a_scale, b_scale, a_zp, b_zp, bias)
        if not (_nd(a) and a.dtype in RANGES and a.size and _one(a_scale)
                and _float_operands_ok(a, b, b_scale, b_zp, bias)):
            return other(*args)
        za = zero_point_value(a_zp, a.dtype)
        acc = None if za is None else exact_product(a, za, centered_b(cache, b, b_zp, b_held), fast)
        if acc is None:
            return other(*args)
        return _scaled(acc, a_scale, b_scale, bias, b.shape[1], a_scale.dtype)

    return run


def _dynamic_quantize_matmul(ctx, other):
    cache = [None]
    b_held = Held(ctx, 1)
    loop, span = loops.quantize.get(), loops.finite_range.get()
    if loop is None or span is None:
        return other
    fast = vnni.get()

    def run(a, b, b_scale, b_zp=None, bias=None):
        args = (a, b, b_scale, b_zp, bias)
        if not (_nd(a) and a.dtype == F32 and a.size and _float_operands_ok(a, b, b_scale, b_zp, bias)):
            return other(*args)
        flat = np.ascontiguousarray(a).reshape(-1)
        lo_x, hi_x, finite = span(flat)
        if not finite:
            return other(*args)
        # the portable kernel's dynamic_uint8, in float32: range including 0, scale (hi - lo) / 255
        lo, hi = np.float32(min(float(lo_x), 0.0)), np.float32(max(float(hi_x), 0.0))
        scale = np.float32(hi - lo) / np.float32(255.0)
        if not (0.0 < float(scale) < math.inf):
            return other(*args)
        zp = np.uint8(min(max(round(float(np.float32(-lo) / scale)), 0), 255))
        q = np.empty(a.shape, np.uint8)
        loop(flat.reshape(1, 1, -1), np.full(1, scale, F32), np.full(1, zp, np.uint8), np.float32(0),
             np.float32(255), q.reshape(1, 1, -1))
        acc = exact_product(q, int(zp), centered_b(cache, b, b_zp, b_held), fast)
        return _scaled(acc, scale, b_scale, bias, b.shape[1], F32)

    return run


#: the most lookup tables one QLinearConcat node keeps (one per distinct input parameters)
CONCAT_TABLES = 64


def _concat(ctx, other):
    """QLinearConcat: each input's codes requantized by a 256-entry table per input (the portable
    kernel run once on the 256 codes of that input's type with its scale and zero point: each
    output element a function of its input element alone, so the same bits), then one
    ``concatenate``; tables kept by parameter values.  Anything else (a missing or non-scalar
    parameter, types that differ, ranks that differ, an empty input) goes to the portable kernel."""
    loop = loops.lookup.get()
    if loop is None:
        return other
    axis_attr = int(ctx.attr("axis", 0))
    tables: dict = {}

    def table(x_dtype, rank, s, z, y_scale, y_zp):
        key = (x_dtype, float(s.reshape(-1)[0]), int(z.reshape(-1)[0]), float(y_scale.reshape(-1)[0]),
               int(y_zp.reshape(-1)[0]))
        found = tables.get(key)
        if found is None:
            codes = np.arange(256, dtype=np.uint8).view(x_dtype).reshape((256,) + (1,) * (rank - 1))
            found = np.ascontiguousarray(other(y_scale, y_zp, codes, s, z)).reshape(-1)
            if len(tables) >= CONCAT_TABLES:
                tables.clear()
            tables[key] = found
        return found

    def run(y_scale, y_zp, *inputs):
        if not (inputs and len(inputs) % 3 == 0 and _one(y_scale) and y_scale.dtype == F32 and _one(y_zp)
                and y_zp.dtype in RANGES):
            return other(y_scale, y_zp, *inputs)
        xs = inputs[0::3]
        if not all(_nd(x) and x.dtype == y_zp.dtype and x.ndim == xs[0].ndim and x.ndim and x.size for x in xs) \
                or not all(_one(v) for v in inputs[1::3] + inputs[2::3]) \
                or not all(v.dtype == F32 for v in inputs[1::3]) or not all(v.dtype == y_zp.dtype for v in inputs[2::3]):
            return other(y_scale, y_zp, *inputs)
        rank = xs[0].ndim
        if not -rank <= axis_attr < rank or any(x.shape[:axis_attr % rank] + x.shape[axis_attr % rank + 1:]
                                                 != xs[0].shape[:axis_attr % rank] + xs[0].shape[axis_attr % rank + 1:]
                                                 for x in xs):
            return other(y_scale, y_zp, *inputs)
        parts = []
        for k in range(0, len(inputs), 3):
            x, s, z = inputs[k:k + 3]
            t = table(x.dtype, rank, s, z, y_scale, y_zp)
            y = np.empty(x.shape, y_zp.dtype)
            loop(np.ascontiguousarray(x).reshape(-1).view(np.uint8), t, y.reshape(-1))
            parts.append(y)
        return np.concatenate(parts, axis=axis_attr % rank)

    return run


if portable is not None:
    @KERNELS.register("QLinearConcat", 1, domain=DOMAIN)
    def qlinear_concat(ctx):
        return _concat(ctx, portable_ops.qlinear_concat(ctx))

    @KERNELS.register("MatMulIntegerToFloat", 1, domain=DOMAIN)
    def matmul_integer_to_float(ctx):
        return _matmul_integer_to_float(ctx, portable_ops.matmul_integer_to_float(ctx))

    @KERNELS.register("DynamicQuantizeMatMul", 1, domain=DOMAIN)
    def dynamic_quantize_matmul(ctx):
        return _dynamic_quantize_matmul(ctx, portable_ops.dynamic_quantize_matmul(ctx))


    @KERNELS.register("QLinearAdd", 1, domain=DOMAIN)
    def qlinear_add(ctx):
        return _declared(_binary(ctx, 0, portable.qlinear_add(ctx)), _binary_bytes)

    @KERNELS.register("QLinearMul", 1, domain=DOMAIN)
    def qlinear_mul(ctx):
        return _declared(_binary(ctx, 1, portable.qlinear_mul(ctx)), _binary_bytes)

    @KERNELS.register("QLinearGlobalAveragePool", 1, domain=DOMAIN)
    def qlinear_global_average_pool(ctx):
        last = bool(ctx.attr("channels_last"))
        return _declared(_gap(ctx, portable.qlinear_global_average_pool(ctx)),
                         lambda x, x_scale, x_zp, y_scale, y_zp: x.shape[0] * x.shape[-1 if last else 1]
                         * (x if y_zp is None else y_zp).dtype.itemsize)

    @KERNELS.register("QLinearSoftmax", 1, domain=DOMAIN)
    def qlinear_softmax(ctx):
        return _softmax(ctx, portable_ops.qlinear_softmax(ctx))

    @KERNELS.register("QGemm", 1, domain=DOMAIN)
    def qgemm(ctx):
        ta, tb = bool(ctx.attr("transA")), bool(ctx.attr("transB"))
        return _declared(_qgemm(ctx, portable.qgemm(ctx)),
                         lambda a, a_scale, a_zp, b, b_scale, b_zp=None, c=None, y_scale=None, y_zp=None:
                         a.shape[1 if ta else 0] * b.shape[0 if tb else 1]
                         * (4 if y_scale is None else (a if y_zp is None else y_zp).dtype.itemsize))
