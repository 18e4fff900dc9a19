"""The remaining kernels of ai.onnx and ai.onnx.preview (those no other family covers).

Operators and the definitions (since_versions) implemented:

* NegativeLogLikelihoodLoss 12, 13, 22; SoftmaxCrossEntropyLoss 12, 13 (later versions only
  add element types).
* CumProd 26; BitCast 26.
* ai.onnx.preview FlexAttention 1 (``score_mod`` / ``prob_mod`` subgraphs, GQA).

Not implemented: ai.onnx.preview.training Gradient 1 (see ``training.py``).

Documented choices: the losses accumulate in double precision; ``mean`` divides by the total
weight of the targets not equal to ``ignore_index`` (their count when there is no
``weight``), which is NaN when every target is ignored.  BitCast to BOOL gives True for any
non-zero byte.  FlexAttention computes in float32 (double for DOUBLE inputs or
``softmax_precision``) and rounds the result to V's element type.
"""

from __future__ import annotations

import numpy as np

from onnxkit.dtypes import DataType, element_type, from_numpy_dtype
from onnxkit.narrow import from_codes, to_codes
from onnxkit.runtime import KernelTable, needs_scope

KERNELS = KernelTable()


# ----------------------------------------------------------------------------------- losses

def _nll(ctx, logp, target, weight, ignore_index, reduction, dtype):
    """Negative log-likelihood of log-probabilities ``logp`` (N, C, d...) at ``target`` (N, d...)."""
    if logp.ndim < 2:
        ctx.fail(f"input must have shape (N, C, ...), got {list(logp.shape)}")
    if target.shape != (logp.shape[0],) + logp.shape[2:]:
        ctx.fail(f"target shape {list(target.shape)} does not fit input shape {list(logp.shape)}")
    c = logp.shape[1]
    t = target.astype(np.int64)
    ignored = (t == ignore_index) if ignore_index is not None else np.zeros(t.shape, dtype=bool)
    bad = ~ignored & ((t < 0) | (t >= c))
    if bad.any():
        ctx.fail(f"target value {int(t[bad][0])} is outside [0, {c - 1}]")
    tc = np.where(ignored, 0, t)
    picked = np.take_along_axis(logp, tc[:, None, ...], axis=1)[:, 0]
    if weight is not None:
        if weight.shape != (c,):
            ctx.fail(f"weight must have shape [{c}], got {list(weight.shape)}")
        w = weight.astype(np.float64)[tc]
    else:
        w = np.ones(t.shape, dtype=np.float64)
    w = np.where(ignored, 0.0, w)
    loss = -picked * w
    if reduction == "none":
        return loss.astype(dtype)
    if reduction == "sum":
        return np.array(loss.sum(), dtype=dtype)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.array(loss.sum() / w.sum(), dtype=dtype)


def _loss_attrs(ctx):
    reduction = ctx.attr_str("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        ctx.fail(f"reduction must be 'none', 'sum' or 'mean', got {reduction!r}")
    ii = ctx.attr("ignore_index")
    return reduction, None if ii is None else int(ii)


@KERNELS.register("NegativeLogLikelihoodLoss", 12, 13, 22)
def negative_log_likelihood_loss(ctx):
    reduction, ignore_index = _loss_attrs(ctx)

    def fn(x, target, weight=None):
        return _nll(ctx, x.astype(np.float64), target, weight, ignore_index, reduction, x.dtype)

    return fn


@KERNELS.register("SoftmaxCrossEntropyLoss", 12, 13)
def softmax_cross_entropy_loss(ctx):
    reduction, ignore_index = _loss_attrs(ctx)
    want_log_prob = ctx.output_requested(1)

    def fn(scores, labels, weights=None):
        if scores.ndim < 2:
            ctx.fail(f"scores must have shape (N, C, ...), got {list(scores.shape)}")
        s = scores.astype(np.float64)
        m = np.max(s, axis=1, keepdims=True)
        log_prob = s - m - np.log(np.sum(np.exp(s - m), axis=1, keepdims=True))
        loss = _nll(ctx, log_prob, labels, weights, ignore_index, reduction, scores.dtype)
        if want_log_prob:
            return loss, log_prob.astype(scores.dtype)
        return loss

    return fn


# ---------------------------------------------------------------------------------- CumProd

@KERNELS.register("CumProd", 26)
def cum_prod(ctx):
    exclusive = bool(ctx.attr("exclusive", 0))
    reverse = bool(ctx.attr("reverse", 0))

    def fn(x, axis):
        a = np.asarray(axis)
        if a.ndim != 0 and a.size != 1:
            ctx.fail(f"axis must be a scalar, got shape {list(a.shape)}")
        ax = int(a.reshape(-1)[0])
        r = max(x.ndim, 1)
        if not -r <= ax < r:
            ctx.fail(f"axis {ax} is out of range for rank {x.ndim}")
        ax %= r
        data = x.reshape(1) if x.ndim == 0 else x
        acc = np.float64 if from_numpy_dtype(data.dtype).is_float else data.dtype
        d = data.astype(acc, copy=False)
        if reverse:
            d = np.flip(d, axis=ax)
        y = np.cumprod(d, axis=ax, dtype=acc)
        if exclusive:
            ones = np.ones_like(np.take(y, [0], axis=ax))
            y = np.concatenate([ones, np.take(y, np.arange(y.shape[ax] - 1), axis=ax)], axis=ax)
        if reverse:
            y = np.flip(y, axis=ax)
        return y.astype(x.dtype).reshape(x.shape)

    return fn


# ----------------------------------------------------------------------------------- BitCast

@KERNELS.register("BitCast", 26)
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
    scale_attr = ctx.attr("scale")
    precision = ctx.attr("softmax_precision")
    if precision is not None and int(precision) not in _SOFTMAX_TYPES:
        ctx.fail(f"softmax_precision must be FLOAT, FLOAT16, BFLOAT16 or DOUBLE, got {precision}")
    score_mod = ctx.subgraph("score_mod") if ctx.has_attr("score_mod") else None
    prob_mod = ctx.subgraph("prob_mod") if ctx.has_attr("prob_mod") else None

    def modify(plan, value, scope, name):
        outs = plan.run([value], scope)
        if len(outs) != 1 or np.shape(outs[0]) != value.shape:
            ctx.fail(f"{name} must return one tensor of shape {list(value.shape)}")
        return np.asarray(outs[0]).astype(value.dtype, copy=False)

    @needs_scope
    def fn(scope, q, k, v):
        if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
            ctx.fail(f"Q, K, V must have rank 4, got {list(q.shape)}, {list(k.shape)}, {list(v.shape)}")
        b, h, _, e = q.shape
        hkv, s = k.shape[1], k.shape[2]
        if k.shape[0] != b or v.shape[0] != b or v.shape[1] != hkv or v.shape[2] != s or k.shape[3] != e:
            ctx.fail(f"Q {list(q.shape)}, K {list(k.shape)} and V {list(v.shape)} do not agree")
        if hkv <= 0 or h % hkv:
            ctx.fail(f"q_num_heads {h} must be a multiple of kv_num_heads {hkv}")
        if precision is not None:
            cdt = element_type(int(precision)).dtype
        else:
            cdt = np.dtype(np.float64) if q.dtype == np.float64 else np.dtype(np.float32)
        acc = np.float64 if cdt == np.float64 else np.float32
        scale = float(scale_attr) if scale_attr is not None else 1.0 / np.sqrt(e)
        if h != hkv:
            k = np.repeat(k, h // hkv, axis=1)
            v = np.repeat(v, h // hkv, axis=1)
        scores = (np.matmul(q.astype(acc), np.swapaxes(k.astype(acc), -1, -2)) * acc(scale)).astype(cdt)
        if score_mod is not None:
            scores = modify(score_mod, scores, scope, "score_mod")
        sf = scores.astype(acc)
        with np.errstate(invalid="ignore", over="ignore"):
            ex = np.exp(sf - np.max(sf, axis=-1, keepdims=True))
            probs = (ex / np.sum(ex, axis=-1, keepdims=True)).astype(cdt)
        if prob_mod is not None:
            probs = modify(prob_mod, probs, scope, "prob_mod")
        return np.matmul(probs.astype(acc), v.astype(acc)).astype(v.dtype)

    return fn
