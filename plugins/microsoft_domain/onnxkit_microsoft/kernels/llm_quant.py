"""The weight-quantized operators onnxruntime's LLM tools write beside MatMulNBits:
GatherBlockQuantized (a quantized embedding table gathered, then dequantized) and MatMulBnb4
(bitsandbytes' FP4 / NF4 weights).

**GatherBlockQuantized** (com.microsoft 1): ``output = Gather(dequantize(data), indices,
gather_axis)`` with data quantized blockwise along ``quantize_axis`` in blocks of ``block_size``.
``data`` is uint8 holding ``8 / bits`` values per octet along its last axis (least significant
first; ``bits`` 2, 4 or 8: then gather_axis must be 0 and quantize_axis the last axis, as in
onnxruntime), int4 / uint4 (one value per element; zero point default 0), or float8 / float4e2m1
(``value * scale``, no zero point, ``block_size`` 0 meaning one block over the whole axis and
scales of extent 1 broadcast on the other axes).  ``scales`` has data's rank with
``ceil(extent / block_size)`` along quantize_axis; ``zero_points`` (integer data only) the same,
packed like data for uint8.  ``W = (q - zp) * scale`` in float32, rounded to scales' type.  An
index outside ``[-extent, extent)`` gives a slice of zeros, as onnxruntime 1.32's CPU kernel does.
Only the gathered slices are unpacked and dequantized (an embedding table stays packed), or the
table once where more slices are gathered than it holds.

**MatMulBnb4** (com.microsoft 1): ``Y = A @ Wᵀ``, W ``(N, K)`` row-major, its ``N * K`` values
flattened and quantized in blocks of ``block_size`` (each block's ``absmax`` one float), two
values an octet, the first in the high nibble; ``quant_type`` 0 is FP4 and 1 NF4, the codes'
values bitsandbytes' tables.  ``transB`` must be 1 (onnxruntime's CPU kernel multiplies by Wᵀ
whatever it says); ``training_mode`` changes nothing at inference.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, arrays

from ._common import DOMAIN, cast, check_float, shape_of, widen
from .nbits import unpack

KERNELS = KernelTable()

#: bitsandbytes' FP4 code values (sign bit 8) and NF4 code values (the 16 quantiles of a normal)
FP4_VALUES = np.array([0.0, 0.005208333333, 0.66666667, 1.0, 0.33333333, 0.5, 0.16666667, 0.25,
                       -0.0, -0.005208333333, -0.66666667, -1.0, -0.33333333, -0.5, -0.16666667, -0.25],
                      np.float32)
NF4_VALUES = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                       -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                       0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                       0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], np.float32)

#: the element types of float-coded data (the backend's dtype names)
_FLOAT_CODES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn")


def _kind(ctx, data) -> str:
    name = arrays.dtype_name(data.dtype)
    if name in ("uint8", "int4", "uint4") or name in _FLOAT_CODES:
        return name
    ctx.fail(f"data has element type {name}; GatherBlockQuantized takes uint8, int4, uint4, float8 or float4e2m1")


@KERNELS.register("GatherBlockQuantized", 1, domain=DOMAIN)
def gather_block_quantized(ctx):
    bits, block = int(ctx.attr("bits")), int(ctx.attr("block_size"))
    gather_axis, quantize_axis = int(ctx.attr("gather_axis")), int(ctx.attr("quantize_axis"))
    if block != 0 and (block < 16 or block & (block - 1)):
        ctx.fail(f"block_size must be a power of two, at least 16, got {block}")

    def run(data, indices, scales, zero_points=None):
        kind = _kind(ctx, data)
        floating = kind in _FLOAT_CODES
        if block == 0 and not floating:
            ctx.fail("block_size 0 (one block per axis) is for float8 / float4 data only")
        host = ctx.to_host(data)
        rank = host.ndim
        ga = gather_axis + rank if gather_axis < 0 else gather_axis
        qa = quantize_axis + rank if quantize_axis < 0 else quantize_axis
        if not (0 <= ga < rank and 0 <= qa < rank):
            ctx.fail(f"gather_axis {gather_axis} / quantize_axis {quantize_axis} out of range for rank {rank}")
        if ga == qa:
            ctx.fail("gather_axis and quantize_axis must differ")
        if kind == "uint8":
            if bits not in (2, 4, 8):
                ctx.fail(f"bits must be 2, 4 or 8 with uint8 data, got {bits}")
            if ga != 0 or qa != rank - 1:
                ctx.fail("with uint8 data gather_axis must be 0 and quantize_axis the last axis")
        elif not floating and bits != 4:
            ctx.fail(f"bits must be 4 with {kind} data, got {bits}")
        per = 8 // bits if kind == "uint8" else 1
        # the logical shape (uint8: the last axis holds `per` values an octet); the table stays
        # packed, and only what is gathered is unpacked, converted and dequantized
        lshape = list(host.shape[:-1]) + [int(host.shape[-1]) * per]
        s = ctx.to_host(scales)
        check_float(ctx, scales, "scales", ("float32", "float16", "bfloat16"))
        extent = int(lshape[qa])
        blk = block or max(extent, 1)
        if s.ndim != rank:
            ctx.fail(f"scales has rank {s.ndim}, data {rank}")
        for ax in range(rank):
            want = -(-extent // blk) if ax == qa else int(lshape[ax])
            if int(s.shape[ax]) != want and not (floating and ax != qa and s.shape[ax] == 1):
                ctx.fail(f"scales has shape {list(s.shape)}; data {lshape} with block_size {blk} "
                         f"along axis {qa} needs extent {want} on axis {ax}")
        if zero_points is not None and floating:
            ctx.fail("zero_points must not be given with float8 / float4 data")
        idx = ctx.to_host(indices).astype(np.int64)
        dim = int(lshape[ga])
        valid = (idx >= -dim) & (idx < dim)
        flat = np.where(valid, np.where(idx < 0, idx + dim, idx), 0).reshape(-1)
        col = np.arange(extent) // blk
        zh = None
        nb = int(s.shape[qa])
        if zero_points is not None and not floating:
            zh = ctx.to_host(zero_points)
            if kind == "uint8":
                if list(zh.shape[:-1]) != list(s.shape[:-1]) or int(zh.shape[-1]) != -(-nb // per):
                    ctx.fail(f"zero_points has shape {list(zh.shape)}, scales {list(s.shape)}: packed "
                             f"{per} a byte along the last axis it needs {-(-nb // per)} there")
            elif list(zh.shape) != list(s.shape):
                ctx.fail(f"zero_points has shape {list(zh.shape)}, scales {list(s.shape)}")

        def rows_of(table, picked, packed_values: int, count: int):
            """``table``'s slices ``picked`` along gather_axis, unpacked to ``count`` values on its last
            axis where it holds ``packed_values`` an octet, as float32."""
            rows = np.take(table, picked, axis=ga)
            if packed_values > 1:
                rows = unpack(rows, bits)[..., :count]
            return rows.astype(np.float32)

        def dequantized(picked):
            """The slices ``picked`` (indices along gather_axis) dequantized, in scales' type."""
            sel = rows_of(host, picked, per, extent)
            scale_rows = picked if s.shape[ga] != 1 or dim == 1 else np.zeros(1, np.int64)
            ss = np.take(rows_of(s, scale_rows, 1, nb), col, axis=qa)
            if floating:
                return (sel * ss).astype(s.dtype)
            if zh is None:
                z = np.float32(1 << (bits - 1)) if kind == "uint8" else np.float32(0)
            else:
                z = np.take(rows_of(zh, picked, per if kind == "uint8" else 1, nb), col, axis=qa)
            return ((sel - z) * ss).astype(s.dtype)

        # more slices gathered than the table holds: dequantize the table once, then gather it
        out = (np.take(dequantized(np.arange(dim)), flat, axis=ga) if flat.size > dim else dequantized(flat))
        if not valid.all():
            mask = valid.reshape(-1).reshape((1,) * ga + (-1,) + (1,) * (rank - ga - 1))
            out = np.where(mask, out, np.zeros((), out.dtype))
        shape = lshape[:ga] + list(idx.shape) + lshape[ga + 1:]
        out = out.reshape(shape)
        return ctx.from_host(out)

    return run


@KERNELS.register("MatMulBnb4", 1, domain=DOMAIN)
def matmul_bnb4(ctx):
    xp = ctx.xp
    n, k, block = int(ctx.attr("N")), int(ctx.attr("K")), int(ctx.attr("block_size"))
    quant_type = int(ctx.attr("quant_type"))
    if quant_type not in (0, 1):
        ctx.fail(f"quant_type must be 0 (FP4) or 1 (NF4), got {quant_type}")
    if block < 16 or block & (block - 1):
        ctx.fail(f"block_size must be a power of two, at least 16, got {block}")
    if int(ctx.attr("transB")) != 1:
        ctx.fail("transB 0 is not supported (onnxruntime's CPU kernel multiplies by the transposed weight only)")
    table = NF4_VALUES if quant_type else FP4_VALUES
    cache: dict = {}

    def weight(b, absmax):
        keep = all(ctx.is_constant(i) or ctx.default(i) is v or ctx.holds(v) for i, v in ((1, b), (2, absmax)))
        hit = cache.get("w")
        if keep and hit is not None and hit[0] is b and hit[1] is absmax:
            return hit[2]
        bh, mh = ctx.to_host(b).reshape(-1), ctx.to_host(absmax).astype(np.float32).reshape(-1)
        numel, blocks = n * k, -(-(n * k) // block)
        if bh.size != (numel + 1) // 2:
            ctx.fail(f"B has {bh.size} octets, N * K = {numel} values need {(numel + 1) // 2}")
        if mh.size != blocks:
            ctx.fail(f"absmax has {mh.size} values, expected ceil(N * K / block_size) = {blocks}")
        codes = np.stack([bh >> 4, bh & 0x0F], axis=1).reshape(-1)[:numel]
        w = table[codes] * np.repeat(mh, block)[:numel]
        wt = xp.permute_dims(xp.asarray(ctx.from_host(np.ascontiguousarray(w.reshape(n, k)))), (1, 0))
        cache.clear()
        if keep:
            cache["w"] = (b, absmax, wt)
        return wt

    def run(a, b, absmax):
        check_float(ctx, a, "A", ("float32", "float16", "bfloat16"))
        if a.ndim < 1 or int(a.shape[-1]) != k:
            ctx.fail(f"A's last extent must be K = {k}, got shape {shape_of(a)}")
        x = widen(xp, a)
        y = xp.matmul(x, cast(xp, weight(b, absmax), x.dtype))
        return cast(xp, y, a.dtype)

    return run
