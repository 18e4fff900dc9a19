"""The remaining operators of ai.onnx and ai.onnx.preview (those no other family covers).

The losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (later definitions only add
element types), CumProd and BitCast (26), and ai.onnx.preview FlexAttention (``score_mod`` /
``prob_mod`` subgraphs, grouped-query heads).  The losses, CumProd and FlexAttention run on
every backend; BitCast is host_only (it reinterprets octets with numpy views and the narrow
types' codes, :mod:`onnxkit.narrow`).  Gradient is in ``gradient.py``.

Documented choices: the losses accumulate in double precision; ``mean`` divides by the total
weight of the targets not equal to ``ignore_index`` (their count when there is no ``weight``),
which is NaN when every target is ignored.  BitCast to BOOL gives True for any non-zero byte.
FlexAttention computes in float32 (double for DOUBLE inputs or ``softmax_precision``) and
rounds the result to V's element type.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import DataType, KernelTable, arrays, element_type, from_numpy_dtype, needs_scope
from onnxkit.plugin.narrow import from_codes, to_codes

from ._common import shape_of

KERNELS = KernelTable()


# ----------------------------------------------------------------------------------- losses

def _nll(ctx, logp, target, weight, ignore_index, reduction, dtype):
    """Negative log-likelihood of float64 log-probabilities ``logp`` (N, C, d...) at ``target`` (N, d...)."""
    xp = ctx.xp
    if logp.ndim < 2:
        ctx.fail(f"input must have shape (N, C, ...), got {shape_of(logp)}")
    lshape = shape_of(logp)
    if shape_of(target) != [lshape[0]] + lshape[2:]:
        ctx.fail(f"target shape {shape_of(target)} does not fit input shape {lshape}")
    c = lshape[1]
    t = xp.astype(target, xp.int64)
    ignored = (t == ignore_index) if ignore_index is not None else xp.zeros_like(t, dtype=xp.bool)
    bad = ~ignored & ((t < 0) | (t >= c))
    if bool(xp.any(bad)):
        ctx.fail(f"target value {int(ctx.to_host(t)[ctx.to_host(bad)][0])} is outside [0, {c - 1}]")
    tc = xp.where(ignored, 0, t)
    picked = xp.take_along_axis(logp, xp.expand_dims(tc, axis=1), axis=1)[:, 0, ...]
    if weight is not None:
        if shape_of(weight) != [c]:
            ctx.fail(f"weight must have shape [{c}], got {shape_of(weight)}")
        w = xp.reshape(xp.take(xp.astype(weight, xp.float64), xp.reshape(tc, (-1,))), tuple(shape_of(t)))
    else:
        w = xp.ones_like(picked)
    w = xp.where(ignored, 0.0, w)
    loss = -picked * w
    if reduction == "none":
        return xp.astype(loss, dtype)
    if reduction == "sum":
        return xp.astype(xp.sum(loss), dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        return xp.astype(xp.sum(loss) / xp.sum(w), dtype)


def _loss_attrs(ctx):
    reduction = ctx.attr_str("reduction")
    if reduction not in ("none", "sum", "mean"):
        ctx.fail(f"reduction must be 'none', 'sum' or 'mean', got {reduction!r}")
    ii = ctx.attr("ignore_index")
    return reduction, None if ii is None else int(ii)


@KERNELS.register("NegativeLogLikelihoodLoss", 12, 13, 22)
def negative_log_likelihood_loss(ctx):
    xp = ctx.xp
    reduction, ignore_index = _loss_attrs(ctx)

    def fn(x, target, weight=None):
        return _nll(ctx, xp.astype(x, xp.float64), target, weight, ignore_index, reduction, x.dtype)

    return fn


@KERNELS.register("SoftmaxCrossEntropyLoss", 12, 13)
def softmax_cross_entropy_loss(ctx):
    xp = ctx.xp
    reduction, ignore_index = _loss_attrs(ctx)
    want_log_prob = ctx.output_requested(1)

    def fn(scores, labels, weights=None):
        if scores.ndim < 2:
            ctx.fail(f"scores must have shape (N, C, ...), got {shape_of(scores)}")
        s = xp.astype(scores, xp.float64)
        m = xp.max(s, axis=1, keepdims=True)
        log_prob = s - m - xp.log(xp.sum(xp.exp(s - m), axis=1, keepdims=True))
        loss = _nll(ctx, log_prob, labels, weights, ignore_index, reduction, scores.dtype)
        if want_log_prob:
            return loss, xp.astype(log_prob, scores.dtype)
        return loss

    return fn


# ---------------------------------------------------------------------------------- CumProd

@KERNELS.register("CumProd", 26)
def cum_prod(ctx):
    xp = ctx.xp
    exclusive = bool(ctx.attr("exclusive"))
    reverse = bool(ctx.attr("reverse"))

    def fn(x, axis):
        a = ctx.to_host(axis)
        if a.ndim != 0 and a.size != 1:
            ctx.fail(f"axis must be a scalar, got shape {list(a.shape)}")
        ax = int(a.reshape(-1)[0])
        r = max(x.ndim, 1)
        if not -r <= ax < r:
            ctx.fail(f"axis {ax} is out of range for rank {x.ndim}")
        ax %= r
        data = xp.reshape(x, (1,)) if x.ndim == 0 else x
        acc = xp.float64 if arrays.is_float(data.dtype) else data.dtype
        d = xp.astype(data, acc, copy=False)
        if reverse:
            d = xp.flip(d, axis=ax)
        y = xp.cumulative_prod(d, axis=ax, dtype=acc)
        if exclusive:
            lead = (slice(None),) * ax
            ones = xp.ones_like(y[(*lead, slice(0, 1))])
            y = xp.concat([ones, y[(*lead, slice(0, int(y.shape[ax]) - 1))]], axis=ax)
        if reverse:
            y = xp.flip(y, axis=ax)
        return xp.reshape(xp.astype(y, x.dtype), tuple(shape_of(x)))

    return fn


# ----------------------------------------------------------------------------------- BitCast

@KERNELS.register("BitCast", 26, host_only=True)
def bit_cast(ctx):
    to = ctx.attr("to")
    if to is None:
        ctx.fail("the 'to' attribute is required")
    target = element_type(int(to))
    if target.tag == DataType.STRING:
        ctx.fail("BitCast to STRING is not defined")

    def fn(x):
        src = from_numpy_dtype(x.dtype)
        if src.tag == DataType.STRING:
            ctx.fail("BitCast from STRING is not defined")
        if src.bits != target.bits:
            ctx.fail(f"{src.name} ({src.bits} bits) and {target.name} ({target.bits} bits) differ in width")
        if src.tag == target.tag:
            return x.copy()
        if target.tag == DataType.BOOL:
            return to_codes(x) != 0
        if src.bits < 8 or src.tag == DataType.BOOL:
            return from_codes(to_codes(x), target.tag) if target.bits < 8 or target.tag == DataType.BOOL \
                else to_codes(x).view(target.dtype)
        a = np.array(x, order="C", dtype=np.dtype(x.dtype).newbyteorder("<"), copy=True)
        y = a.view(np.dtype(target.dtype).newbyteorder("<")).astype(target.dtype, copy=False)
        return y.reshape(x.shape)

    return fn


# ------------------------------------------------------------------- preview FlexAttention

_SOFTMAX_TYPES = {DataType.FLOAT, DataType.FLOAT16, DataType.BFLOAT16, DataType.DOUBLE}


@KERNELS.register("FlexAttention", 1, domain="ai.onnx.preview")
def flex_attention(ctx):
    xp = ctx.xp
    scale_attr = ctx.attr("scale")
    precision = ctx.attr("softmax_precision")
    if precision is not None and int(precision) not in _SOFTMAX_TYPES:
        ctx.fail(f"softmax_precision must be FLOAT, FLOAT16, BFLOAT16 or DOUBLE, got {precision}")
    score_mod = ctx.subgraph("score_mod") if ctx.has_attr("score_mod") else None
    prob_mod = ctx.subgraph("prob_mod") if ctx.has_attr("prob_mod") else None
    fixed = None if precision is None else ctx.dtype(element_type(int(precision)).dtype)

    def modify(plan, value, scope, name):
        outs = plan.run([value], scope)
        if len(outs) != 1 or outs[0] is None or shape_of(outs[0]) != shape_of(value):
            ctx.fail(f"{name} must return one tensor of shape {shape_of(value)}")
        return xp.astype(outs[0], value.dtype, copy=False)

    @needs_scope
    def fn(scope, q, k, v):
        if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
            ctx.fail(f"Q, K, V must have rank 4, got {shape_of(q)}, {shape_of(k)}, {shape_of(v)}")
        b, h, _, e = shape_of(q)
        kb, hkv, s, ke = shape_of(k)
        vb, vh, vs, _ = shape_of(v)
        if kb != b or vb != b or vh != hkv or vs != s or ke != e:
            ctx.fail(f"Q {shape_of(q)}, K {shape_of(k)} and V {shape_of(v)} do not agree")
        if hkv <= 0 or h % hkv:
            ctx.fail(f"q_num_heads {h} must be a multiple of kv_num_heads {hkv}")
        if fixed is not None:
            cdt = fixed
        else:
            cdt = xp.float64 if arrays.dtype_name(q.dtype) == "float64" else xp.float32
        acc = xp.float64 if cdt == xp.float64 else xp.float32
        scale = float(scale_attr) if scale_attr is not None else 1.0 / np.sqrt(e)
        if acc == xp.float32:
            scale = float(np.float32(scale))
        if h != hkv:
            k = xp.repeat(k, h // hkv, axis=1)
            v = xp.repeat(v, h // hkv, axis=1)
        scores = xp.astype(xp.matmul(xp.astype(q, acc), xp.matrix_transpose(xp.astype(k, acc))) * scale, cdt)
        if score_mod is not None:
            scores = modify(score_mod, scores, scope, "score_mod")
        sf = xp.astype(scores, acc)
        with np.errstate(invalid="ignore", over="ignore"):
            ex = xp.exp(sf - xp.max(sf, axis=-1, keepdims=True))
            probs = xp.astype(ex / xp.sum(ex, axis=-1, keepdims=True), cdt)
        if prob_mod is not None:
            probs = modify(prob_mod, probs, scope, "prob_mod")
        return xp.astype(xp.matmul(xp.astype(probs, acc), xp.astype(v, acc)), v.dtype)

    return fn
