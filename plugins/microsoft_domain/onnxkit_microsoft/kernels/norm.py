"""The fused normalizations: SkipLayerNormalization, SkipSimplifiedLayerNormalization,
EmbedLayerNormalization (com.microsoft 1).

* SkipLayerNormalization — ``s = input + skip (+ bias)`` (skip of input's shape, or
  ``(1, S, H)`` / ``(S, H)`` broadcast over the batch), then layer normalization of ``s`` over
  its last axis with ``gamma`` (and ``beta``).  Optional outputs: the mean and the inverse
  standard deviation (extent 1 on the last axis) and ``s`` itself.
* SkipSimplifiedLayerNormalization — the same with the root-mean-square normalization (no
  mean removed, no beta); its ``mean`` output is zeros, as onnxruntime writes it.
* EmbedLayerNormalization — ``word_embedding[input_ids] + position_embedding[position_ids]
  (+ segment_embedding[segment_ids])`` (``position_ids`` of shape ``(B, S)`` or ``(1, S)``,
  default ``0..S-1``), layer-normalized over the hidden axis; ``mask_index`` is the sum of each
  row of ``mask`` (int32; zeros without a mask); ``embedding_sum`` the sum before normalization.
  An index out of its table's range is an error naming the table.

Statistics are computed in float32 (float64 for float64 inputs).
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable, declares_output_bytes

from ._common import DOMAIN, cast, check_float, shape_of, widen

KERNELS = KernelTable()


def _skip_sum(ctx, xp, x, skip, bias):
    check_float(ctx, x, "input")
    if x.ndim not in (2, 3):
        ctx.fail(f"input must be 2-D or 3-D, got shape {shape_of(x)}")
    xs, ss = shape_of(x), shape_of(skip)
    if ss != xs and ss != [1] + xs[1:] and ss != xs[1:]:
        ctx.fail(f"skip has shape {ss}; it must be input's {xs}, or that without the batch axis")
    s = widen(xp, x) + widen(xp, skip)
    if bias is not None:
        s = s + widen(xp, bias)
    return s


def skip_norm_bytes(x, skip, *_):
    """The bytes of a skip normalization's four outputs (Y and the sum of x's type, mean and
    inverse deviation float32 per row): its declared sizes (no inference per run)."""
    if type(x) is np.ndarray and type(skip) is np.ndarray:  # the host's arrays: their sizes at hand
        n = max(x.size, skip.size)
    else:
        n = max(math.prod(int(d) for d in x.shape), math.prod(int(d) for d in skip.shape))
    h = max(int(x.shape[-1]), 1)
    return 2 * n * x.dtype.itemsize + 8 * (n // h)


#: whether SkipSimplifiedLayerNormalization takes its plain-numpy body for float32 host arrays
#: (:func:`_host_f32`; the tests compare both)
HOST_F32 = True
_F32 = np.dtype(np.float32)


def host_f32(x, skip, gamma, bias) -> bool:
    """Whether the inputs are float32 numpy arrays of the common form (input 2-D or 3-D, skip of
    its shape, gamma and bias vectors of the hidden size): the portable checks would all pass and
    its namespace calls reduce to these numpy calls."""
    if type(x) is not np.ndarray or x.dtype != _F32 or x.ndim not in (2, 3) or type(skip) is not np.ndarray \
            or skip.dtype != _F32 or skip.shape != x.shape or type(gamma) is not np.ndarray or gamma.dtype != _F32:
        return False
    h = (x.shape[-1],)
    return gamma.shape == h and (bias is None or (type(bias) is np.ndarray and bias.dtype == _F32 and bias.shape == h))


_host_f32 = host_f32


def _check_vec(ctx, v, h: int, what: str):
    if v is not None and shape_of(v) != [h]:
        ctx.fail(f"{what} must have shape [{h}] (the hidden size), got {shape_of(v)}")


@KERNELS.register("SkipLayerNormalization", 1, domain=DOMAIN)
def skip_layer_norm(ctx):
    xp = ctx.xp
    eps = float(ctx.attr("epsilon"))

    def run(x, skip, gamma, beta=None, bias=None):
        h = int(x.shape[-1])
        for v, what in ((gamma, "gamma"), (beta, "beta"), (bias, "bias")):
            _check_vec(ctx, v, h, what)
        s = _skip_sum(ctx, xp, x, skip, bias)
        m = xp.mean(s, axis=-1, keepdims=True)
        d = s - m
        inv = 1 / xp.sqrt(xp.mean(d * d, axis=-1, keepdims=True) + eps)
        y = d * inv * widen(xp, gamma)
        if beta is not None:
            y = y + widen(xp, beta)
        return cast(xp, y, x.dtype), cast(xp, m, xp.float32), cast(xp, inv, xp.float32), cast(xp, s, x.dtype)

    return declares_output_bytes(run, skip_norm_bytes)


@KERNELS.register("SkipSimplifiedLayerNormalization", 1, domain=DOMAIN)
def skip_simplified_layer_norm(ctx):
    xp = ctx.xp
    eps = float(ctx.attr("epsilon"))

    def run(x, skip, gamma, bias=None):
        if HOST_F32 and _host_f32(x, skip, gamma, bias):  # the same operations on plain numpy
            s = x + skip
            if bias is not None:
                s = s + bias
            inv = 1 / np.sqrt(np.mean(s * s, axis=-1, keepdims=True) + eps)
            return s * inv * gamma, np.zeros(inv.shape, np.float32), inv, s
        h = int(x.shape[-1])
        for v, what in ((gamma, "gamma"), (bias, "bias")):
            _check_vec(ctx, v, h, what)
        s = _skip_sum(ctx, xp, x, skip, bias)
        inv = 1 / xp.sqrt(xp.mean(s * s, axis=-1, keepdims=True) + eps)
        y = s * inv * widen(xp, gamma)
        return (cast(xp, y, x.dtype), xp.zeros(tuple(inv.shape), dtype=xp.float32, device=_dev(inv)),
                cast(xp, inv, xp.float32), cast(xp, s, x.dtype))

    return declares_output_bytes(run, skip_norm_bytes)


def _dev(x):
    from ._common import device_of

    return device_of(x)


def _lookup(ctx, xp, table, ids, what: str):
    n = int(table.shape[0])
    host = ctx.to_host(ids)
    if host.size and (int(host.min()) < 0 or int(host.max()) >= n):
        ctx.fail(f"{what} holds an index outside [0, {n - 1}] (the rows of its table)")
    return xp.take(table, xp.reshape(cast(xp, ids, xp.int64), (-1,)), axis=0)


@KERNELS.register("EmbedLayerNormalization", 1, domain=DOMAIN)
def embed_layer_norm(ctx):
    xp = ctx.xp
    eps = float(ctx.attr("epsilon"))

    def run(input_ids, segment_ids, word, position, segment, gamma, beta, mask=None, position_ids=None):
        check_float(ctx, word, "word_embedding")
        if input_ids.ndim != 2:
            ctx.fail(f"input_ids must be 2-D (batch, sequence), got shape {shape_of(input_ids)}")
        b, s = shape_of(input_ids)
        h = int(word.shape[1])
        for t, what in ((position, "position_embedding"), (segment, "segment_embedding")):
            if t is not None and (t.ndim != 2 or int(t.shape[1]) != h):
                ctx.fail(f"{what} must be 2-D with {h} columns, got shape {shape_of(t)}")
        for ids, what in ((segment_ids, "segment_ids"), (mask, "mask"), (position_ids, "position_ids")):
            if ids is not None and shape_of(ids) != [b, s] and not (what == "position_ids" and shape_of(ids) == [1, s]):
                ctx.fail(f"{what} has shape {shape_of(ids)}, input_ids {[b, s]}")
        if (segment_ids is None) != (segment is None):
            ctx.fail("segment_ids and segment_embedding go together")
        _check_vec(ctx, gamma, h, "gamma")
        _check_vec(ctx, beta, h, "beta")
        e = xp.reshape(widen(xp, _lookup(ctx, xp, word, input_ids, "input_ids")), (b, s, h))
        if position_ids is None:
            if s > int(position.shape[0]):
                ctx.fail(f"the sequence length {s} exceeds position_embedding's {int(position.shape[0])} rows")
            pos = xp.reshape(widen(xp, position[:s, ...]), (1, s, h))
        else:
            pos = xp.reshape(widen(xp, _lookup(ctx, xp, position, position_ids, "position_ids")),
                             (int(position_ids.shape[0]), s, h))
        e = e + pos
        if segment_ids is not None:
            e = e + xp.reshape(widen(xp, _lookup(ctx, xp, segment, segment_ids, "segment_ids")), (b, s, h))
        m = xp.mean(e, axis=-1, keepdims=True)
        d = e - m
        y = d / xp.sqrt(xp.mean(d * d, axis=-1, keepdims=True) + eps) * widen(xp, gamma) + widen(xp, beta)
        if mask is None:
            index = xp.zeros((b,), dtype=xp.int32, device=_dev(y))
        else:
            index = cast(xp, xp.sum(cast(xp, mask, xp.int64), axis=1), xp.int32)
        return cast(xp, y, word.dtype), index, cast(xp, e, word.dtype)

    return run
