"""MatMulNBits (com.microsoft 1): ``A @ dequantize(B)ᵀ (+ bias)`` with a weight of N rows and K
columns quantized blockwise along K to ``bits`` (2, 4 or 8) bits.

B is ``(N, k_blocks, blob)`` uint8 (``k_blocks = ceil(K / block_size)``, ``blob = block_size *
bits / 8``), the values of a block packed from the least significant bits of each octet up.
``scales`` has ``N * k_blocks`` values (``(N, k_blocks)`` or flat); ``zero_points`` is either
packed uint8 (``ceil(k_blocks * bits / 8)`` octets per row, the same packing), or of A's type,
one per block; without it the zero point is ``2^(bits-1)``.  ``W[n, k] = (q - zp) * scale``
for the block of ``k``.  The dequantized weight is made once per constant B (and whenever B is
not a constant, per call).  ``g_idx`` (deprecated) and prepacked weights are refused by name.
The product is computed in float32 (float64 never occurs: A is float, float16 or bfloat16).
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable

from ._common import DOMAIN, cast, check_float, shape_of, widen

KERNELS = KernelTable()


def unpack(octets: np.ndarray, bits: int) -> np.ndarray:
    """The ``bits``-bit values of uint8 ``octets`` along their last axis, least significant first."""
    per = 8 // bits
    shifts = (np.arange(per, dtype=np.uint8) * bits).astype(np.uint8)
    vals = (octets[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return vals.reshape(octets.shape[:-1] + (octets.shape[-1] * per,))


def dequantize(ctx, b, scales, zero_points, n: int, k: int, block: int, bits: int) -> np.ndarray:
    """``(N, K)`` float32 weight of the host arrays of B, scales and zero points."""
    k_blocks = -(-k // block)
    blob = block * bits // 8
    if list(b.shape) != [n, k_blocks, blob]:
        ctx.fail(f"B has shape {list(b.shape)}; N {n}, K {k}, block_size {block} and bits {bits} give "
                 f"{[n, k_blocks, blob]}")
    q = unpack(b.astype(np.uint8), bits).reshape(n, k_blocks, block).astype(np.float32)
    if scales.size != n * k_blocks:
        ctx.fail(f"scales has {scales.size} values, expected N * k_blocks = {n * k_blocks}")
    s = scales.astype(np.float32).reshape(n, k_blocks, 1)
    if zero_points is None:
        zp = np.float32(1 << (bits - 1))
    elif zero_points.dtype == np.uint8:
        width = -(-k_blocks * bits // 8)
        if zero_points.size != n * width:
            ctx.fail(f"zero_points (packed uint8) has {zero_points.size} values, expected {n * width}")
        zp = unpack(zero_points.reshape(n, width), bits)[:, :k_blocks].astype(np.float32).reshape(n, k_blocks, 1)
    else:
        if zero_points.size != n * k_blocks:
            ctx.fail(f"zero_points has {zero_points.size} values, expected N * k_blocks = {n * k_blocks}")
        zp = zero_points.astype(np.float32).reshape(n, k_blocks, 1)
    w = ((q - zp) * s).reshape(n, k_blocks * block)
    return np.ascontiguousarray(w[:, :k])


@KERNELS.register("MatMulNBits", 1, domain=DOMAIN)
def matmul_nbits(ctx):
    xp = ctx.xp
    n, k = int(ctx.attr("N")), int(ctx.attr("K"))
    bits, block = int(ctx.attr("bits")), int(ctx.attr("block_size"))
    if bits not in (2, 4, 8):
        ctx.fail(f"bits must be 2, 4 or 8, got {bits}")
    if block < 16 or block & (block - 1):
        ctx.fail(f"block_size must be a power of two, at least 16, got {block}")
    if int(ctx.attr("weight_prepacked")):
        ctx.fail("prepacked weights (weight_prepacked != 0) are an execution provider's layout: not supported")
    cache: dict = {}

    def weight(b, scales, zp, dtype):
        key = (id(b), id(scales), id(zp))
        hit = cache.get(key)
        if hit is not None and hit[0] is b and hit[1] is scales and hit[2] is zp:
            return hit[3]
        host = None if zp is None else ctx.to_host(zp)
        w = dequantize(ctx, ctx.to_host(b), ctx.to_host(scales), host, n, k, block, bits)
        wt = xp.permute_dims(xp.asarray(ctx.from_host(w)), (1, 0))
        cache.clear()
        cache[key] = (b, scales, zp, wt)
        return wt

    def run(a, b, scales, zero_points=None, g_idx=None, bias=None):
        check_float(ctx, a, "A", ("float32", "float16", "bfloat16"))
        if g_idx is not None:
            ctx.fail("g_idx (deprecated) is not supported")
        if a.ndim < 1 or int(a.shape[-1]) != k:
            ctx.fail(f"A's last extent must be K = {k}, got shape {shape_of(a)}")
        wt = weight(b, scales, zero_points, a.dtype)
        y = xp.matmul(widen(xp, a), cast(xp, wt, widen(xp, a).dtype))
        if bias is not None:
            y = y + widen(xp, bias)
        return cast(xp, y, a.dtype)

    return run
