"""Kernels of ai.onnxkit, onnxkit's fused operators (:mod:`onnxkit_default_domain.fused`): each
the kernel of the ai.onnx definition it repeats (a backend's override of that definition also
registers the fused one, so both compute alike on every backend)."""

from __future__ import annotations

import math

import numpy as np
from ._common import device_of

from onnxkit.plugin import KernelTable, calls_blas

from ..fused import FUSED_DOMAIN
from . import activation, attention

KERNELS = KernelTable()

KERNELS.register("Gelu", 1, domain=FUSED_DOMAIN)(activation.KERNELS[("", "Gelu", 20)])
KERNELS.register("HardSwish", 1, domain=FUSED_DOMAIN)(activation.KERNELS[("", "HardSwish", 14)])


# -- Attention-2 (ai.onnx Attention-23 + nan_to_zero) -------------------------------------------
# the optimizer's attention fusion (onnxkit.runtime.optimizer.attention) targets this operator

#: attributes of Attention-23 whose non-default value the nan_to_zero=1 kernel does not take
_GUARDED_DEFAULTS = {"is_causal": 0, "qk_matmul_output_mode": 0, "softcap": 0.0, "softmax_precision": None,
                     "q_num_heads": None, "kv_num_heads": None}


def guarded_softmax(xp, x, guard: bool = True):
    """Softmax over the last axis, with ``guard`` a NaN probability taken as 0 (what
    ``Where(IsNaN(p), 0, p)`` after a plain ``Softmax`` computes: a row of -inf, or holding NaN or
    +inf, gives zeros); without, the plain Softmax (such a row gives NaN); an empty last axis
    gives the empty array."""
    if x.shape[-1] == 0:       # no key/value positions (max would have no identity)
        return x
    with np.errstate(invalid="ignore", over="ignore"):   # -inf - -inf: the NaN the definition gives
        e = xp.exp(x - xp.max(x, axis=-1, keepdims=True))
        p = e / xp.sum(e, axis=-1, keepdims=True)
    return xp.where(xp.isnan(p), xp.zeros_like(p), p) if guard else p


@KERNELS.register("Attention", 2, domain=FUSED_DOMAIN)
@calls_blas
def attention_fused(ctx):
    """ai.onnxkit Attention-2: ``softmax((Q sqrt(scale)) (K sqrt(scale))^T + mask) V`` for 4-D Q,
    K, V, no past, an optional mask (additive of Q's type, added as Add broadcasts; boolean as
    Attention-23), the batch and head axes of the products broadcast as MatMul's (the pattern the
    fusion rewrites), the softmax :func:`guarded_softmax`, guarded where ``nan_to_zero`` = 1 and
    plain (a row of -inf gives NaN, as the unfused Softmax) where 0.  With ``nan_to_zero`` = 0 and
    any other Attention-23 attribute set, an output but Y requested or a past given, ai.onnx
    Attention-23's kernel; with ``nan_to_zero`` = 1 those are refused naming the node."""
    guard = bool(int(ctx.attr("nan_to_zero", 0)))
    extra = [name for name, default in _GUARDED_DEFAULTS.items() if ctx.attr(name, default) != default]
    if not guard and (extra or any(ctx.output_requested(i) for i in (1, 2, 3))):
        return attention.KERNELS[("", "Attention", 23)](ctx)
    xp = ctx.xp
    for name in extra:
        ctx.fail(f"Attention with nan_to_zero=1 does not take {name}")
    if ctx.output_requested(1) or ctx.output_requested(2) or ctx.output_requested(3):
        ctx.fail("Attention with nan_to_zero=1 gives Y only")
    scale_attr = ctx.attr("scale")
    general = None if guard else attention.KERNELS[("", "Attention", 23)](ctx)

    def run(q, k, v, attn_mask=None, past_key=None, past_value=None):
        if past_key is not None or past_value is not None:
            if general is not None:
                return general(q, k, v, attn_mask, past_key, past_value)
            ctx.fail("Attention with nan_to_zero=1 does not take past_key / past_value")
        if not q.ndim == k.ndim == v.ndim == 4:
            if general is not None:
                return general(q, k, v, attn_mask)
            ctx.fail(f"Attention with nan_to_zero=1 needs 4-D Q, K, V, got shapes "
                     f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
        t = q.dtype
        scale = (1 / math.sqrt(int(q.shape[3]))) if scale_attr is None else float(scale_attr)
        sq = xp.asarray(math.sqrt(scale), dtype=t, device=device_of(q))
        scores = attention._matmul(xp, q * sq, xp.permute_dims(k, (0, 1, 3, 2)) * sq)
        if attn_mask is not None:
            scores = scores + (attn_mask if attn_mask.dtype == t else
                               attention._additive_mask(ctx, attn_mask, int(k.shape[2]), t))
        return attention._matmul(xp, guarded_softmax(xp, scores, guard), v)

    return run


# -- LookupTable-3 (an 8-bit function of one 8-bit tensor, by its table) ------------------------
# the optimizer's lookup-table fusion (onnxkit.runtime.optimizer.qlut) targets this operator

#: the element types of X whose codes the table is indexed by (through their uint8 view)
_CODES = {np.dtype(np.uint8): np.arange(256, dtype=np.uint8), np.dtype(np.int8): np.arange(256, dtype=np.uint8).view(np.int8)}
_TAGS = {2: np.dtype(np.uint8), 3: np.dtype(np.int8)}


def lookup_table(ctx, dtype) -> np.ndarray:
    """The 256 values of LookupTable's ``body`` (planned as the node's subgraph, with the session's
    kernels) at the codes of the 8-bit ``dtype``, indexed by each code's uint8 view: one body
    run.  Fails naming the node where ``dtype`` is not 8-bit or the body does not give 256 8-bit
    values."""
    dtype = np.dtype(dtype)
    if dtype not in _CODES:
        ctx.fail(f"LookupTable takes uint8 or int8 X, not {dtype}")
    out = ctx.subgraph("body").run([ctx.from_host(_CODES[dtype])])
    table = np.ascontiguousarray(ctx.to_host(out[0])).reshape(-1) if out else None
    if table is None or table.shape != (256,) or table.dtype not in _CODES:
        ctx.fail("LookupTable's body must give one 8-bit value per code (256 uint8 / int8 values), got "
                 + ("nothing" if table is None else f"{table.shape} {table.dtype}"))
    return table


def planned_table(ctx):
    """``(table, dtype)`` made at planning where X's type is known there, else ``(None, None)``
    (the kernel makes it at its first call, from the X it is given)."""
    t = ctx.input_type(0)
    dtype = _TAGS.get(int(getattr(t, "elem_type", 0) or 0))
    return (None, None) if dtype is None else (lookup_table(ctx, dtype), dtype)


@KERNELS.register("LookupTable", 3, domain=FUSED_DOMAIN)
def lookup_table_kernel(ctx):
    """ai.onnxkit LookupTable-3: the body evaluated once on the 256 codes (:func:`lookup_table`),
    then ``Y[i] = table[uint8 view of X[i]]``."""
    tables = {}
    table, dtype = planned_table(ctx)
    if table is not None:
        tables[dtype] = table

    def run(x):
        host = np.asarray(ctx.to_host(x))
        found = tables.get(host.dtype)
        if found is None:
            found = tables[host.dtype] = lookup_table(ctx, host.dtype)
        return ctx.from_host(found[host.view(np.uint8)])
    return run


# -- Elementwise-4 (a region of elementwise operators, by its body) ------------------------------
# the optimizer's elementwise-region fusion (onnxkit.runtime.optimizer.elementwise) targets this operator

@KERNELS.register("Elementwise", 4, domain=FUSED_DOMAIN)
def elementwise_region(ctx):
    """ai.onnxkit Elementwise-4: the body's nodes run as they are (planned as the node's subgraph,
    with the session's kernels) on the node's inputs; its one result is Y."""
    body = ctx.subgraph("body")

    def run(*xs):
        return body.run(list(xs))[0]
    return run
