"""Mixture of experts: MoE and QMoE (com.microsoft 1) as onnxruntime 1.32's CPU kernels compute them.

``input`` is ``(..., hidden)`` (its tokens the rows of the leading axes), ``router_probs``
``(tokens, num_experts)`` the router's logits.  Routing: the softmax of each token's logits in
float32, its ``k`` largest (ties: the higher expert index first); with
``normalize_routing_weights`` each weight divided by the sum of the k; a weight of 0 routes
nothing.  Each expert ``e`` computes ``fc2(act(fc1(x)))`` with ``fc1(x) = x @ W1[e]ᵀ + b1[e]``
(``W1`` ``(E, fc1_out, hidden)``) and ``fc2(h) = h @ W2[e]ᵀ + b2[e]`` (``W2`` ``(E, hidden,
inter)``); the output of a token is the sum of its experts' outputs times their weights, in
float32.  Activations (``activation_type``): relu, gelu (tanh approximation), silu, identity,
and swiglu with ``swiglu_fusion`` 1: fc1's outputs interleaved gate, linear (``fc1_out = 2 *
inter``), ``g = min(gate, limit)``, ``l = clamp(linear, -limit, limit)`` (``swiglu_limit``,
unbounded when absent), ``g * sigmoid(activation_alpha * g) * (l + activation_beta)``.

QMoE's weights are uint8, ``expert_weight_bits`` (2, 4 or 8) bits a value packed from the
least significant bits along the last axis; its scales ``(E, N)`` (one per row, ``block_size``
absent) or ``(E, N, ceil(K / block_size))``; zero points (optional, packed like the weights
along the last axis) default to ``2^(bits-1)``: ``W = (q - zp) * scale``.  Where onnxruntime
runs blockwise experts through MatMulNBits' int8 kernels (8 bits at every ``accuracy_level``, 4
bits at level 4; a product whose inner extent is a multiple of ``block_size``), each expert
product's input is first quantized to int8 as MatMulNBits' accuracy level 4 does
(:func:`onnxkit_microsoft.kernels.nbits.quantize_a`).  onnxruntime's T-MAC lookup-table kernel
for 2-bit blockwise experts of 128k rows quantizes partial sums of the activations its own way:
there onnxkit's float product agrees to within 1% of the output's range, not to float rounding
(tests/test_moe.py).  The dequantized weights of constant inputs are made once.  float16 /
bfloat16 inputs are computed in float32 and rounded once.

As onnxruntime 1.32's CPU kernels compute them (docs: the plugin's README): ``use_sparse_mixer``
(k must be 2) routes as plain top-2, since they implement no sparse mixer; QMoE normalizes
the routing weights whatever ``normalize_routing_weights`` says.  Refused by name, as those kernels
refuse them: fc3 (a third, gated projection), swiglu without ``swiglu_fusion`` 1, QMoE's
``quant_type`` other than "int", its global / activation scales, and prepacked weights.
"""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin import KernelTable, arrays

from ._common import DOMAIN
from .nbits import quantize_a, unpack

KERNELS = KernelTable()

_ACTIVATIONS = ("relu", "gelu", "silu", "identity", "swiglu")
_FLOATS = ("float32", "float16", "bfloat16")


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(np.float32)


class _Config:
    """The routing and activation attributes both operators share, checked once."""

    def __init__(self, ctx):
        self.k = int(ctx.attr("k"))
        if self.k < 1:
            ctx.fail(f"k must be at least 1, got {self.k}")
        self.act = ctx.attr_str("activation_type")
        if self.act not in _ACTIVATIONS:
            ctx.fail(f"activation_type {self.act!r} is not one of {', '.join(_ACTIVATIONS)}")
        # onnxruntime's CPU QMoE normalizes the k weights whatever normalize_routing_weights says
        self.normalize = bool(ctx.attr("normalize_routing_weights")) or ctx.op_type == "QMoE"
        if int(ctx.attr("use_sparse_mixer")) and self.k != 2:
            ctx.fail(f"use_sparse_mixer needs k 2, got {self.k}")
        fusion = int(ctx.attr("swiglu_fusion"))
        if self.act == "swiglu" and fusion != 1:
            ctx.fail(f"swiglu needs swiglu_fusion 1 (interleaved gate and linear), got {fusion}: "
                     "onnxruntime's CPU kernel computes no other layout")
        self.alpha = float(ctx.attr("activation_alpha"))
        self.beta = float(ctx.attr("activation_beta"))
        limit = ctx.attr("swiglu_limit")
        self.limit = math.inf if limit is None else float(limit)

    def activate(self, h):
        if self.act == "relu":
            return np.maximum(h, np.float32(0))
        if self.act == "gelu":
            return (np.float32(0.5) * h * (np.float32(1) + np.tanh(np.float32(0.7978845608) *
                                                                     (h + np.float32(0.044715) * h * h * h))))
        if self.act == "silu":
            return h * _sigmoid(h)
        if self.act == "identity":
            return h
        gate = np.minimum(h[:, 0::2], np.float32(self.limit))
        lin = np.clip(h[:, 1::2], np.float32(-self.limit), np.float32(self.limit))
        return gate * _sigmoid(np.float32(self.alpha) * gate) * (lin + np.float32(self.beta))

    def route(self, logits):
        """``(experts (tokens, k), weights (tokens, k))`` of float32 ``logits``."""
        m = logits.max(axis=1, keepdims=True)
        e = np.exp(logits - m)
        p = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        n = p.shape[1]
        # largest first, ties to the higher index: sort by (p, index) descending
        order = np.lexsort((-np.arange(n)[None, :].repeat(p.shape[0], 0), -p), axis=1)[:, :self.k]
        w = np.take_along_axis(p, order, axis=1)
        if self.normalize:
            w = w / w.sum(axis=1, keepdims=True, dtype=np.float32)
        return order, w


def _check(ctx, name, v, rank, dims):
    if v.ndim != rank or any(d is not None and int(s) != d for s, d in zip(v.shape, dims)):
        want = ["?" if d is None else d for d in dims]
        ctx.fail(f"{name} has shape {list(v.shape)}, expected {want}")


def _forward(ctx, cfg, x, router, w1, b1, w2, b2, experts, inter, q1=None, q2=None):
    """The mixture over host arrays: ``w1(e)`` / ``w2(e)`` give expert e's float32 weights;
    ``q1`` / ``q2``: the block length in which fc1's / fc2's input is quantized to int8 first
    (:func:`onnxkit_microsoft.kernels.nbits.quantize_a`), or None."""
    hidden = int(x.shape[-1])
    xs = x.reshape(-1, hidden).astype(np.float32)
    tokens = xs.shape[0]
    r = router.astype(np.float32)
    _check(ctx, "router_probs", r, 2, [tokens, experts])
    if cfg.k > experts:
        ctx.fail(f"k {cfg.k} exceeds the {experts} experts")
    chosen, weights = cfg.route(r)
    out = np.zeros((tokens, hidden), np.float32)
    for e in range(experts):
        rows, slots = np.nonzero((chosen == e) & (weights > 0))
        if rows.size == 0:
            continue
        a = xs[rows]
        h = (a if q1 is None else quantize_a(np, a, hidden, q1)) @ w1(e).T
        if b1 is not None:
            h = h + b1[e]
        h = cfg.activate(h)
        y = (h if q2 is None else quantize_a(np, h, int(h.shape[1]), q2)) @ w2(e).T
        if b2 is not None:
            y = y + b2[e]
        np.add.at(out, rows, weights[rows, slots][:, None] * y)
    return out.reshape(x.shape)


def _kept(ctx, i, v) -> bool:
    return v is None or ctx.is_constant(i) or ctx.default(i) is v or ctx.holds(v)


def _expert_cache(ctx, positions, make):
    """``get(values)``: ``make(*host arrays)`` remembered while the inputs at ``positions`` are
    the same constant (or default / held) objects, made again each call otherwise."""
    cache: dict = {}

    def get(values):
        keep = all(_kept(ctx, i, v) for i, v in zip(positions, values))
        hit = cache.get("v")
        if keep and hit is not None and all(a is b for a, b in zip(hit[0], values)):
            return hit[1]
        made = make(*[None if v is None else ctx.to_host(v) for v in values])
        cache.clear()
        if keep:
            cache["v"] = (tuple(values), made)
        return made

    return get


@KERNELS.register("MoE", 1, domain=DOMAIN)
def moe(ctx):
    cfg = _Config(ctx)

    def run(x, router, w1, b1=None, w2=None, b2=None, w3=None, b3=None):
        if w3 is not None or b3 is not None:
            ctx.fail("fc3 (fc3_experts_weights / fc3_experts_bias) is not supported (onnxruntime's CPU MoE has none)")
        name = arrays.dtype_name(x.dtype)
        if name not in _FLOATS:
            ctx.fail(f"input has element type {name}; MoE takes {', '.join(_FLOATS)}")
        xh = ctx.to_host(x)
        w1h, w2h = (np.asarray(ctx.to_host(w), np.float32) for w in (w1, w2))  # (no copy of float32 weights)
        hidden, experts = int(xh.shape[-1]), int(w1h.shape[0]) if w1h.ndim == 3 else -1
        _check(ctx, "fc2_experts_weights", w2h, 3, [experts, hidden, None])
        inter = int(w2h.shape[2])
        fc1_out = 2 * inter if cfg.act == "swiglu" else inter
        _check(ctx, "fc1_experts_weights", w1h, 3, [experts, fc1_out, hidden])
        b1h = None if b1 is None else ctx.to_host(b1).astype(np.float32).reshape(experts, fc1_out)
        b2h = None if b2 is None else ctx.to_host(b2).astype(np.float32).reshape(experts, hidden)
        out = _forward(ctx, cfg, xh, ctx.to_host(router), lambda e: w1h[e], b1h, lambda e: w2h[e], b2h,
                       experts, inter)
        return ctx.from_host(out.astype(xh.dtype))

    return run


def dequantize_experts(ctx, what, q, scales, zp, bits, block, rows, cols):
    """``(E, rows, cols)`` float32 of QMoE's packed weights ``q`` ``(E, rows, cols * bits / 8)``."""
    per = 8 // bits
    experts = int(q.shape[0])
    _check(ctx, f"{what}_experts_weights", q, 3, [experts, rows, -(-cols // per)])
    vals = (unpack(q.astype(np.uint8), bits) if per > 1 else q)[..., :cols].astype(np.float32)
    nb = 1 if block == 0 else -(-cols // block)
    s = scales.astype(np.float32)
    if block == 0:
        _check(ctx, f"{what}_scales", s, 2, [experts, rows])
        s = s[..., None]
    else:
        _check(ctx, f"{what}_scales", s, 3, [experts, rows, nb])
    if zp is None:
        z = np.float32(1 << (bits - 1))
    else:
        width = -(-nb // per)
        zq = zp.reshape(experts, rows, -1) if block else zp.reshape(experts, -1)
        if block:
            _check(ctx, f"{what}_zero_points", zq, 3, [experts, rows, width])
            z = (unpack(zq, bits) if per > 1 else zq)[..., :nb].astype(np.float32)
        else:  # one zero point a row, packed along the rows
            if zq.shape[1] != -(-rows // per):
                ctx.fail(f"{what}_zero_points has shape {list(zp.shape)}, expected [{experts}, {-(-rows // per)}]")
            z = (unpack(zq, bits) if per > 1 else zq)[:, :rows, None].astype(np.float32)
    col = np.arange(cols) // (block or cols or 1)
    z = z if np.ndim(z) == 0 else np.take(z, col, axis=2)
    return np.ascontiguousarray((vals - z) * np.take(s, col, axis=2))


@KERNELS.register("QMoE", 1, domain=DOMAIN)
def qmoe(ctx):
    cfg = _Config(ctx)
    if ctx.attr_str("quant_type") != "int":
        ctx.fail(f"quant_type {ctx.attr_str('quant_type')!r} is not supported (integer weights, quant_type 'int', are)")
    if int(ctx.attr("weights_prepacked")) > 0:
        ctx.fail("prepacked weights (weights_prepacked) are an execution provider's layout: not supported")
    bits = int(ctx.attr("expert_weight_bits"))
    per_fc = [ctx.attr(f"fc{i}_expert_weight_bits") for i in (1, 2)]
    bits1, bits2 = [bits if b is None else int(b) for b in per_fc]
    for b in (bits1, bits2):
        if b not in (2, 4, 8):
            ctx.fail(f"expert weight bits must be 2, 4 or 8, got {b}")
    block = ctx.attr("block_size")
    block = 0 if block is None else int(block)
    if block and (block < 16 or block & (block - 1)):
        ctx.fail(f"block_size must be a power of two, at least 16, got {block}")
    level = int(ctx.attr("accuracy_level"))
    # onnxruntime's blockwise 4 / 8-bit experts run MatMulNBits' kernels: int8 activations at
    # accuracy_level 4, and always for 8 bits (which have no float kernel there)
    # (when the product's inner extent is a multiple of block_size; dequantize + float product otherwise)
    int8 = [bool(block) and (b == 8 or (b == 4 and level == 4)) for b in (bits1, bits2)]
    shapes: dict = {}

    def fc1(q, s, zp):
        e, rows = int(q.shape[0]), int(q.shape[1])
        return dequantize_experts(ctx, "fc1", q, s, zp, bits1, block, rows, shapes["hidden"])

    def fc2(q, s, zp):
        per = 8 // bits2
        return dequantize_experts(ctx, "fc2", q, s, zp, bits2, block, int(q.shape[1]), int(q.shape[2]) * per)

    w1_of = _expert_cache(ctx, (2, 3, 11), fc1)
    w2_of = _expert_cache(ctx, (5, 6, 12), fc2)

    def run(x, router, w1, s1=None, b1=None, w2=None, s2=None, b2=None, w3=None, s3=None, b3=None,
            z1=None, z2=None, z3=None, router_weights=None, *extra):
        if any(v is not None for v in (w3, s3, b3, z3)):
            ctx.fail("fc3 (fc3_experts_weights / scales / bias / zero_points) is not supported "
                     "(onnxruntime's CPU QMoE has none)")
        if router_weights is not None or any(v is not None for v in extra):
            ctx.fail("router_weights and the global / activation scales are not supported (integer weights with "
                     "per-row or per-block scales are)")
        if s1 is None or s2 is None:
            ctx.fail("fc1_scales and fc2_scales are required with integer weights")
        name = arrays.dtype_name(x.dtype)
        if name not in _FLOATS:
            ctx.fail(f"input has element type {name}; QMoE takes {', '.join(_FLOATS)}")
        xh = ctx.to_host(x)
        shapes["hidden"] = int(xh.shape[-1])
        w2h = w2_of((w2, s2, z2))
        experts, hidden, inter = (int(d) for d in w2h.shape)
        if hidden != shapes["hidden"]:
            ctx.fail(f"fc2 gives {hidden} outputs, the input's hidden size is {shapes['hidden']}")
        w1h = w1_of((w1, s1, z1))
        fc1_out = 2 * inter if cfg.act == "swiglu" else inter
        _check(ctx, "fc1 (dequantized)", w1h, 3, [experts, fc1_out, hidden])
        b1h = None if b1 is None else ctx.to_host(b1).astype(np.float32).reshape(experts, fc1_out)
        b2h = None if b2 is None else ctx.to_host(b2).astype(np.float32).reshape(experts, hidden)
        out = _forward(ctx, cfg, xh, ctx.to_host(router), lambda e: w1h[e], b1h, lambda e: w2h[e], b2h,
                       experts, inter, *(min(block, 256) if on and k % block == 0 else None
                                         for on, k in zip(int8, (hidden, inter))))
        return ctx.from_host(out.astype(xh.dtype))

    return run
