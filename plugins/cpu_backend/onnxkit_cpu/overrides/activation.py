"""numpy fast paths for the activations of ``onnxkit_default_domain.kernels.activation``.

Only the bodies differ from the portable family: in-place numpy arithmetic (``out=`` into
arrays made here) where the portable body makes one array per step, ``np.clip`` where the
namespace's ``maximum``/``clip`` are slower, products with masks where numpy's ``where`` is
slow, ``put_along_axis`` for Hardmax.  The definitions served, the attributes
(:func:`float_attrs`, :func:`gelu_mode`), the type rules (:func:`in_float`), PRelu's slope
geometry and the softmax family's axis handling (:func:`normalizer`) are the portable
family's, and so is every input a fast path does not take (integers, float64 Gelu).

Per call, a fast path costs one type test: a float32/float64 X of rank 1 or more goes straight
to the numpy body, with numpy's floating-point warnings off (:func:`_lean`); anything else
(narrow floats, 0-d, integers) takes the portable wrapper :func:`~onnxkit_default_domain.
kernels.activation.in_float` around the same body.  Relu is one ufunc call (``np.maximum(x,
0)``, as the portable kernel and the reference: -0 gives +0).  The softmax family from 13
decides its axis once per rank and computes in place.

float32 Sigmoid and Tanh are onnxruntime's, bit for bit: MLAS's rational approximations
(``onnxkit_default_domain.api.mlas_logistic`` / ``mlas_tanh``, docs/decisions.md), not the
correctly rounded functions; float64 keeps ``1 / (1 + exp(-x))`` and numpy's tanh.

Where compiled loops are on (:mod:`onnxkit_cpu.compiled`, decided at planning), Sigmoid, Tanh
(float32: the MLAS loops), HardSigmoid, HardSwish and Gelu run as one compiled pass per
element, and the
softmax family as one compiled loop over its rows where the axis is the last (from 13) or the
rows are the trailing block (before 13): float32 rows of any length, float64 rows of up to
:data:`SOFTMAX_COMPILED_ROW` elements (numpy's exp wins on longer ones).  float32 Gelu and
softmax rows are computed in float32 (within a few ulp of the definitions), the float64 loops in
float64 and rounded once, HardSigmoid and HardSwish bit-identical to the numpy bodies:
:mod:`onnxkit_cpu.compiled.activation` states each loop's precision.
A float16 / bfloat16 Gelu ('none', rank >= 1) runs the float32 loop on X widened, Y rounded once
(:class:`.half.Narrowed`; the portable wrapper rounds the numpy body's float32 result once too).
A non-contiguous X is made contiguous first.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable
from onnxkit.plugin import threads
from onnxkit.plugin import blocks, parallel_for, splits_across_threads
from onnxkit_default_domain.api import activation as portable
from onnxkit_default_domain.api import ERFC32_CLIP, ERFC32_P, ERFC32_Q, FUSED_DOMAIN, quiet
from onnxkit_default_domain.api import mlas_logistic, mlas_tanh
from onnxkit_cpu.compiled import activation as loops
from onnxkit_cpu.overrides.elementwise_math import powers_buffer
from onnxkit_cpu.overrides._plans import remember
from onnxkit_cpu.overrides.half import Halves, Narrowed, is_half
from onnxkit_cpu.overrides.linalg import rectify

KERNELS = KernelTable()
#: elements of a compiled pass worth a block on a thread of its own
#: (:func:`onnxkit.runtime.threads.parallel_for`; fewer cost more to hand over than they save)
ELEMENT_WORK = 32768

_FLOATS = frozenset(np.dtype(t) for t in (np.float32, np.float64))


def _lean(fn, other, compiled=None):
    """``fn(x)`` (warnings off) for a float32/float64 ``x`` of rank >= 1, else ``other(x)``;
    ``compiled(x)`` instead of ``fn`` where given (it raises no warning).  ``fn`` is elementwise
    and keeps X's type; on the numpy body a large X is split across the run's intra-op threads
    (:func:`_split_numpy`)."""
    quiet_fn = _split_numpy(quiet(fn)) if compiled is None else compiled

    def run(x):
        if x.dtype in _FLOATS and x.ndim:
            return quiet_fn(x)
        return other(x)
    return run


#: elements of a numpy block: blocks start on multiples of it (whole 64-byte lines and SIMD
#: vectors, so an element's lane, and the ufunc's arithmetic for it, do not depend on the split)
_LINE = 64


def _split_numpy(fn):
    """``fn`` (elementwise, X's type kept) on blocks of a large X across the run's intra-op
    threads, each block's result copied into Y; where one block is made, ``fn(x)`` itself."""
    def run(x):
        units = -(-x.size // _LINE)
        if blocks(units, ELEMENT_WORK // _LINE) <= 1:
            if threads.observer is not None:
                threads.observer("activation.numpy", 1)
            return fn(x)
        xf = np.ascontiguousarray(x).reshape(-1)
        y = np.empty(x.size, x.dtype)

        def block(lo, hi):
            a, b = lo * _LINE, min(x.size, hi * _LINE)
            y[a:b] = fn(xf[a:b])

        parallel_for(block, units, grain=ELEMENT_WORK // _LINE, name="activation.numpy")
        return y.reshape(x.shape)
    return run


def _elementwise(loop, consts=None):
    """``f(x)``: ``loop(x, y, *consts[x.dtype])`` over the flat contiguous X into a fresh Y of
    X's shape and type (``consts``: per float type, the loop's extra arguments), or None when
    ``loop`` is (compiled loops off)."""
    if loop is None:
        return None
    consts = consts or {np.dtype(np.float32): (), np.dtype(np.float64): ()}

    def f(x):
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        y = np.empty(x.shape, x.dtype)
        xf, yf, c = x.reshape(-1), y.reshape(-1), consts[x.dtype]

        def block(lo, hi):      # elements split across the run's intra-op threads (each alike)
            loop(xf[lo:hi], yf[lo:hi], *c)

        parallel_for(block, xf.shape[0], grain=ELEMENT_WORK, name="activation.elements")
        return y
    return f


def _fast(name, native16=False, fused=False, compiled=None):
    """Register ``make(*float_attrs) -> fn(x)`` (a numpy body on float32/float64) for every
    definition of ``name`` the portable family implements, with its type rules (``fused``: and
    for ai.onnxkit's definition of ``name``, the same operator).  ``compiled(*float_attrs)``:
    the compiled body of float32/float64 X (:func:`_elementwise`), or None for the numpy one."""
    def deco(make):
        def factory(ctx):
            attrs = portable.float_attrs(ctx)
            fn = make(*attrs)
            return _lean(fn, portable.in_float(ctx.xp, fn, native16), compiled and compiled(*attrs))
        factory.__name__ = make.__name__
        KERNELS.register(name, *portable.versions(name))(factory)
        if fused:
            KERNELS.register(name, 1, domain=FUSED_DOMAIN)(factory)
        splits_across_threads(("", name), *([(FUSED_DOMAIN, name)] if fused else []))
        return make
    return deco


def _sigmoid(x):
    t = np.negative(x)
    np.exp(t, out=t)        # exp(-x) overflows to inf for very negative x: 1/(1+inf) = 0, exact
    t += 1
    return np.divide(1, t, out=t)


def _softplus(x):
    t = np.abs(x)
    np.negative(t, out=t)
    np.exp(t, out=t)
    np.log1p(t, out=t)
    t += np.clip(x, 0, np.inf)
    return t


def _negative_part_scaled(x, slope):
    """max(x, 0) + min(x, 0) * slope, without the masked selects numpy runs slowly."""
    r = np.clip(x, -np.inf, 0)
    r *= slope
    r += np.clip(x, 0, np.inf)
    return r


# ----------------------------------------------------------------------------- rectifiers
_NATIVE = _FLOATS | frozenset(np.dtype(t) for t in (np.float16, np.int8, np.int16, np.int32, np.int64))


@KERNELS.register("Relu", *portable.versions("Relu"))
def relu(ctx):
    other = portable.in_float(ctx.xp, portable.relu(ctx, ctx.xp), native16=True)

    def run(x):                 # maximum raises no floating-point flag (NaN stays NaN, -0 gives +0)
        return rectify(x) if x.dtype in _NATIVE else other(x)
    return run


def _tanh(x):
    """float32: onnxruntime's tanh (:func:`mlas_tanh`); float64: numpy's."""
    return mlas_tanh(np, x) if x.dtype == np.float32 else np.tanh(x)


def _mlas_loop(name, numpy_body):
    """A float32 MLAS loop ('mlas_logistic' or 'mlas_tanh') for float32 X, ``numpy_body``
    (split across threads) for float64 X; None where compiled loops are off."""
    fast = _elementwise(loops.loop(name))
    if fast is None:
        return None
    other = _split_numpy(quiet(numpy_body))
    return lambda x: fast(x) if x.dtype == np.float32 else other(x)


@KERNELS.register("Tanh", *portable.versions("Tanh"))
def tanh(ctx):
    other = portable.in_float(ctx.xp, _tanh)
    fast = _mlas_loop("mlas_tanh", np.tanh) or _split_numpy(_tanh)

    def run(x):                 # neither body raises a floating-point flag
        return fast(x) if x.dtype in _FLOATS and x.ndim else other(x)
    return run


splits_across_threads(("", "Tanh"))


@_fast("LeakyRelu")
def leaky_relu(alpha):
    if not 0.0 <= alpha <= 1.0:
        return lambda x: _negative_part_scaled(x, x.dtype.type(alpha))

    def fn(x):                          # max(x, alpha*x) is exact for 0 <= alpha <= 1
        r = x * x.dtype.type(alpha)
        return np.maximum(r, x, out=r)
    return fn


@KERNELS.register("PRelu", *portable.versions("PRelu"))
def prelu(ctx):
    xp = ctx.xp
    other = portable.prelu(ctx)

    def run(x, slope):
        if x.dtype.kind != "f":
            return other(x, slope)
        slope = slope.reshape(portable.prelu_slope(ctx, x.shape, slope.shape))
        return portable.in_float(xp, lambda v: _negative_part_scaled(v, slope.astype(v.dtype, copy=False)))(x)
    return run


@_fast("ThresholdedRelu")
def thresholded_relu(alpha):
    def fn(x):
        r = x * (x > x.dtype.type(alpha))  # a product, not np.where: numpy's select is slow
        r += 0                             # -0 -> +0
        if not np.isfinite(r.sum()):
            r[np.isnan(r)] = 0             # NaN is not > alpha: 0
        return r
    return fn


@_fast("Elu")
def elu(alpha):
    def fn(x):
        neg = np.expm1(np.clip(x, -np.inf, 0))
        neg *= x.dtype.type(alpha)
        neg += np.clip(x, 0, np.inf)
        return neg
    return fn


@_fast("Selu")
def selu(alpha, gamma):
    def fn(x):
        r = elu(alpha)(x)
        r *= x.dtype.type(gamma)
        return r
    return fn


@_fast("Celu")
def celu(alpha):
    def fn(x):
        a = x.dtype.type(alpha)
        neg = np.expm1(x / a)
        neg *= a
        np.clip(neg, -np.inf, 0, out=neg)
        neg += np.clip(x, 0, np.inf)
        return neg
    return fn


# ----------------------------------------------------------------------------- smooth
def _sigmoid_compiled():
    """float32: the MLAS loop; float64: the loop rounding ``1 / (1 + exp(-x))`` once."""
    fast32, fast64 = _elementwise(loops.loop("mlas_logistic")), _elementwise(loops.loop("sigmoid"))
    if fast32 is None or fast64 is None:
        return None
    return lambda x: fast32(x) if x.dtype == np.float32 else fast64(x)


def _sigmoid_any(x):
    """float32: onnxruntime's sigmoid (:func:`mlas_logistic`); float64: :func:`_sigmoid`."""
    return mlas_logistic(np, x) if x.dtype == np.float32 else _sigmoid(x)


@_fast("Sigmoid", compiled=_sigmoid_compiled)
def sigmoid():
    return _sigmoid_any


def _hard_sigmoid_loop(alpha, beta, swish):
    """The compiled HardSigmoid (``swish``: HardSwish) body, alpha and beta in X's type."""
    return _elementwise(loops.loop("hard_sigmoid"),
                        {dt: (dt.type(alpha), dt.type(beta), swish) for dt in _FLOATS})


@_fast("HardSigmoid", compiled=lambda alpha, beta: _hard_sigmoid_loop(alpha, beta, False))
def hard_sigmoid(alpha, beta):
    def fn(x):
        r = x * x.dtype.type(alpha)
        r += x.dtype.type(beta)
        return np.clip(r, 0, 1, out=r)
    return fn


@_fast("HardSwish", fused=True, compiled=lambda: _hard_sigmoid_loop(1.0 / 6.0, 0.5, True))
def hard_swish():
    def fn(x):
        r = hard_sigmoid(1.0 / 6.0, 0.5)(x)
        r *= x
        return r
    return fn


@_fast("Softplus")
def softplus():
    return _softplus


@_fast("Softsign")
def softsign():
    def fn(x):
        d = np.abs(x)
        d += 1
        return np.divide(x, d, out=d)
    return fn


@_fast("Mish")
def mish():
    def fn(x):                  # float32: onnxruntime's tanh, as its expansion Softplus, Tanh, Mul
        t = _softplus(x)
        t = mlas_tanh(np, t) if x.dtype == np.float32 else np.tanh(t, out=t)
        t *= x
        return t
    return fn


@_fast("Swish")
def swish(alpha):
    def fn(x):                  # float32: onnxruntime's sigmoid, as its expansion Mul, Sigmoid, Mul
        s = _sigmoid_any(x * x.dtype.type(alpha))
        s *= x
        return s
    return fn


def _gelu32_rows(dtype=np.float32):
    """Rows ``(P~, Q~)``, lowest power of ``b = |x|`` first: with ``s = 1 / sqrt 2`` and the
    portable erfc's rational ``P(a) / Q(a)`` (``a = b s``), ``P~(b) = 0.5 b P(b s)`` (degree 5)
    and ``Q~(b) = Q(b s)``, so that ``0.5 |x| erfc(|x| s) = exp(-x^2 / 2) P~(b) / Q~(b)``."""
    s = 1.0 / math.sqrt(2.0)
    p = (0.0,) + tuple(0.5 * c * s ** k for k, c in enumerate(ERFC32_P))
    q = tuple(c * s ** k for k, c in enumerate(ERFC32_Q))
    return np.array([p, q], dtype=dtype)


_GELU32_PQ = _gelu32_rows()
#: |x| where exp(-x^2 / 2) is 0 in float32 (the portable erfc's cap on |x| / sqrt 2)
_GELU32_CAP = np.float32(ERFC32_CLIP * math.sqrt(2.0))


def _gelu32(x):
    """Gelu 'none' of float32 ``x`` (rank >= 1): ``x Phi(x) = max(x, 0) - q`` with ``q = 0.5 |x|
    erfc(|x| / sqrt 2) >= 0`` (x < 0: ``x Phi(x) = -q``; x >= 0: ``x Phi(x) = x - x Phi(-x) =
    x - q``), ``q = exp(-b^2 / 2) P~(b) / Q~(b)`` on ``b = min(|x|, cap)`` (:func:`_gelu32_rows`: the
    portable erfc's rational with the 1/sqrt 2 and the 0.5 |x| folded into the coefficients),
    both polynomials as one matrix product of the rows b^0 .. b^5 (all coefficients positive: as
    well conditioned as Horner's rule).  No cancellation: the negative tail keeps erfc's relative
    accuracy.  ``max(x, 0)`` is evaluated as ``x - min(x, 0)``, exact, and NaN for -inf as the
    definition's ``0.5 x (1 + erf(x / sqrt 2))``; +inf gives +inf, NaN gives NaN."""
    flat = x.reshape(-1)
    powers = powers_buffer(_GELU32_PQ.shape[1], flat.shape[0])
    b = np.abs(flat, out=powers[1])
    np.minimum(b, _GELU32_CAP, out=b)                          # NaN passes
    for k in range(2, powers.shape[0]):
        np.multiply(powers[k - 1], b, out=powers[k])
    pq = np.matmul(_GELU32_PQ, powers)
    q = np.divide(pq[0], pq[1], out=pq[0])
    r = np.multiply(powers[2], np.float32(-0.5), out=pq[1])
    np.exp(r, out=r)
    q *= r
    np.minimum(flat, 0, out=r)
    np.subtract(flat, r, out=r)                                 # max(x, 0); -inf - -inf = NaN
    r -= q
    return r.reshape(x.shape)


#: Gelu 'tanh' as x / (1 + exp(-2u)): -2u = x * (-2c * cubic * x^2 - 2c), c = sqrt(2 / pi)
_GELU_TANH_A = -portable.GELU_TANH_2C * portable.GELU_TANH_CUBIC
_GELU_TANH_B = portable.GELU_TANH_2C
def _gelu_tanh(x):
    """``0.5 x (1 + tanh u) = x sigmoid(2u) = x / (1 + exp(-2u))`` in 7 numpy passes (the
    constants folded: one product less for ``2u``, the sigmoid's negation and reciprocal
    folded into ``-2u`` and the final division).  exp(-2u) overflowing to inf (x very
    negative) gives -0; -inf gives NaN, as the definition's ``-inf * 0``.  Not onnxruntime's
    float32 sequence ``(0.5 x) (tanh u + 1)`` with its MLAS tanh: that one cancels in the
    negative tail beyond Clause 11's tolerance (docs/decisions.md)."""
    dt = x.dtype.type
    t = np.multiply(x, x)
    t *= dt(_GELU_TANH_A)
    t -= dt(_GELU_TANH_B)
    t *= x
    np.exp(t, out=t)
    t += 1
    return np.divide(x, t, out=t)


@KERNELS.register("Gelu", 1, domain=FUSED_DOMAIN)     # ai.onnxkit Gelu-1 is ai.onnx Gelu-20
@KERNELS.register("Gelu", *portable.versions("Gelu"))
def gelu(ctx):
    xp = ctx.xp
    if portable.gelu_mode(ctx) == "tanh":
        tanh32, tanh64 = _elementwise(loops.loop("gelu_tanh32")), _elementwise(loops.loop("gelu_tanh"))
        return _lean(_gelu_tanh, portable.in_float(xp, _gelu_tanh),
                     tanh64 and (lambda x: tanh32(x) if x.dtype == np.float32 else tanh64(x)))
    other = portable.gelu(ctx, xp)

    def body(x):
        return _gelu32(x) if x.dtype == np.float32 else other(x)
    gelu32, gelu64 = loops.loop("gelu_erf32"), loops.loop("gelu64")
    if gelu32 is None:
        return _lean(body, portable.in_float(xp, body))
    fast32 = _elementwise(gelu32, {np.dtype(np.float32): (_GELU32_PQ, _GELU32_CAP)})
    fast64 = _elementwise(gelu64)
    # float16 / bfloat16 X of rank >= 1: the float32 loop on X widened, Y rounded once (.half)
    half32 = Narrowed(fast32, Halves.of(ctx))
    narrow_or = portable.in_float(xp, body)
    return _lean(body, lambda x: half32(x) if x.ndim and is_half(x.dtype) else narrow_or(x),
                 lambda x: fast32(x) if x.dtype == np.float32 else fast64(x))


# ----------------------------------------------------------------------------- softmax family
def _softmax(x, axis, m=None):
    """Softmax of ``x`` along ``axis`` (``m``: ``x``'s maximum along it, keepdims, if known)."""
    if m is None:
        m = np.maximum.reduce(x, axis=axis, keepdims=True)
    e = np.subtract(x, m)
    np.exp(e, out=e)
    return np.divide(e, np.add.reduce(e, axis=axis, keepdims=True), out=e)


def _log_softmax(x, axis, m=None):
    """LogSoftmax of ``x`` along ``axis`` (``m`` as for :func:`_softmax`)."""
    if m is None:
        m = np.maximum.reduce(x, axis=axis, keepdims=True)
    e = np.subtract(x, m)
    s = np.add.reduce(np.exp(e), axis=axis, keepdims=True)
    np.log(s, out=s)
    return np.subtract(e, s, out=e)


def _hardmax(x, axis):
    y = np.zeros_like(x)
    np.put_along_axis(y, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis=axis)
    return y


class _LastAxisMax:
    """``np.maximum.reduce(x, axis=-1, keepdims=True)`` as one ``np.maximum.reduceat`` over the
    flattened rows (the same values: a maximum does not depend on the order; NaN propagates
    either way), which numpy runs with far less overhead per row: faster on many short rows,
    never slower on long ones.  The row starts are made once per shape (at most
    64 kept)."""

    def __init__(self):
        self.shapes = {}        # x.shape -> (row starts, the keepdims shape)

    def __call__(self, x):
        p = self.shapes.get(x.shape)
        if p is None:
            p = remember(self.shapes, x.shape, (np.arange(0, x.size, x.shape[-1]), x.shape[:-1] + (1,)))
        return np.maximum.reduceat(x.reshape(-1), p[0]).reshape(p[1])


#: The longest float64 row the softmax family's compiled float64 loop takes: on longer rows
#: numpy's exp and its per-row cost win over it (float32 rows of any length take the float32 loop).
SOFTMAX_COMPILED_ROW = 128


def _normalizer(ctx, body, shifted=False, log=None):
    """``body(x, axis)`` on float32/float64 X (warnings off) with the axis of its rank decided
    once (definitions from 13; an empty X and other types take the portable normalizer).
    ``shifted``: ``body`` takes X's maximum along the axis as a third argument, computed by
    :class:`_LastAxisMax` where the axis is the last.  ``log`` (Softmax False, LogSoftmax True):
    the compiled rows loop where compiled loops are on, on rows along the last axis (from 13)
    or of the trailing block (before 13): float32 rows of any length take the float32 loop
    (:mod:`onnxkit_cpu.compiled.activation`'s 'softmax32'), float64 rows of at most :data:`SOFTMAX_COMPILED_ROW`
    elements the float64 one."""
    other = portable.normalizer(ctx, portable.in_float(ctx.xp, body, native16=True))
    legacy = ctx.since_version < 13
    rows32 = None if log is None else loops.loop("softmax32")
    rows_loop = None if log is None else loops.loop("softmax")     # asked last: the body noted is "activation"
    if legacy and rows_loop is None:
        return other
    axis_attr = int(ctx.attr("axis"))
    quiet_body = quiet(body)
    axes = {}                   # rank -> the non-negative axis
    last_max = _LastAxisMax() if shifted else None

    def compiled(x, n, rows_loop):
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        y = np.empty(x.shape, x.dtype)
        rows = x.size // n
        x2, y2 = x.reshape(rows, n), y.reshape(rows, n)

        def block(lo, hi):      # rows split across the run's intra-op threads (each alike)
            rows_loop(x2[lo:hi], y2[lo:hi], log)

        parallel_for(block, rows, grain=max(1, ELEMENT_WORK // (4 * n)), name="softmax.rows")
        return y

    def run(x):
        if x.dtype in _FLOATS and x.size:
            r = x.ndim
            a = axes.get(r)
            if a is None:
                a = axis_attr + r if axis_attr < 0 else axis_attr
                a = axes[r] = a if 0 <= a < r or (legacy and a == r) else None
            if a is not None:
                if rows_loop is not None:
                    n = x.size // math.prod(x.shape[:a]) if legacy else x.shape[-1] if a == r - 1 else 0
                    if n > 0 and x.dtype == np.float32:
                        return compiled(x, n, rows32)
                    if 0 < n <= SOFTMAX_COMPILED_ROW:
                        return compiled(x, n, rows_loop)
                if legacy:      # the trailing block as rows of a matrix (what the portable kernel does)
                    x2 = np.ascontiguousarray(x).reshape(-1, x.size // math.prod(x.shape[:a]))
                    y2 = quiet_body(x2, 1, last_max(x2)) if last_max is not None else quiet_body(x2, 1)
                    return y2.reshape(x.shape)
                if last_max is not None and a == r - 1:
                    return quiet_body(x, a, last_max(x))
                return quiet_body(x, a)
        return other(x)                       # also fails naming the node for a bad axis
    return run


splits_across_threads(("", "Gelu"), (FUSED_DOMAIN, "Gelu"), ("", "Softmax"), ("", "LogSoftmax"))
for _name, _body, _shifted, _log in (("Softmax", _softmax, True, False), ("LogSoftmax", _log_softmax, True, True),
                                     ("Hardmax", _hardmax, False, None)):
    KERNELS.register(_name, *portable.versions(_name))(
        lambda ctx, body=_body, shifted=_shifted, log=_log: _normalizer(ctx, body, shifted, log))
