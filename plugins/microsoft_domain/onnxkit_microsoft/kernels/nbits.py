"""MatMulNBits (com.microsoft 1): ``A @ dequantize(B)ᵀ (+ bias)`` with a weight of N rows and K
columns quantized blockwise along K to ``bits`` (2, 4 or 8) bits.

B is ``(N, k_blocks, blob)`` uint8 (``k_blocks = ceil(K / block_size)``, ``blob = block_size *
bits / 8``), the values of a block packed from the least significant bits of each octet up.
``scales`` has ``N * k_blocks`` values (``(N, k_blocks)`` or flat); ``zero_points`` is either
packed uint8 (``ceil(k_blocks * bits / 8)`` octets per row, the same packing), or of A's type,
one per block; without it the zero point is ``2^(bits-1)``.  ``W[n, k] = (q - zp) * scale``
for the block of ``k``; with ``g_idx`` (int32, K values, deprecated) the block of column ``k``
is ``g_idx[k]`` instead of ``k // block_size`` (its scale and zero point; onnxruntime 1.32's CPU
kernel ignores packed uint8 zero points there, onnxkit applies them: docs/architecture.md).

``accuracy_level`` 4 (int8 compute) is onnxruntime's CPU computation where it quantizes A
(:func:`int8_block`): each row of A, as float32, is cut along K into blocks of ``min(block_size,
256)`` (the last one zero-padded), each block quantized symmetrically to int8 with scale
``amax / 127`` (``amax`` the block's largest magnitude) by ``round_half_even(a * (127 / amax))``
(0 where ``amax`` is 0), and the product is that of the dequantized int8 A with W: the int8
dot products onnxruntime accumulates in int32 equal those of the float product of the
dequantized values up to float rounding.  onnxruntime takes this path only with a constant B
(an initializer it prepacks), no ``g_idx``, zero points absent or packed uint8, and a
(bits, block_size) its MLAS int8 kernels serve (x86-64: 4 and 8 bits at every block size, 2 bits
at 32, 64 and 128); otherwise, as at every other level, A is used as it is (float32 product).

The dequantized weight is made once per constant B / scales / zero points / g_idx, shared by
every kernel made for equal values while one of them holds it (the cold, warm and
shape-specialized plans of a session; per call otherwise).  Prepacked weights (``weight_prepacked``) are refused by name.  The product is
computed in float32 (A is float, float16 or bfloat16; float16 inputs as float32, the result
rounded to A's type).
"""

from __future__ import annotations

import hashlib
import math
import weakref

import numpy as np

from onnxkit.plugin import KernelTable, arrays, declares_output_bytes

from ._common import DOMAIN, cast, check_float, shape_of, widen

KERNELS = KernelTable()

_F32 = np.dtype(np.float32)
#: the largest block of A onnxruntime's int8 path quantizes with one scale
A_BLOCK_MAX = 256


def int8_block(bits: int, block: int):
    """The block length along K in which onnxruntime 1.32's CPU kernel quantizes A to int8 at
    accuracy_level 4 for weights of ``bits`` bits in blocks of ``block``, or None where it has
    no int8 kernel for them (the float path)."""
    if bits == 2 and not 32 <= block <= 128:
        return None
    return min(block, A_BLOCK_MAX)


def unpack(octets: np.ndarray, bits: int) -> np.ndarray:
    """The ``bits``-bit values of uint8 ``octets`` along their last axis, least significant first."""
    per = 8 // bits
    shifts = (np.arange(per, dtype=np.uint8) * bits).astype(np.uint8)
    vals = (octets[..., None] >> shifts) & np.uint8((1 << bits) - 1)
    return vals.reshape(octets.shape[:-1] + (octets.shape[-1] * per,))


def dequantize(ctx, b, scales, zero_points, n: int, k: int, block: int, bits: int, g_idx=None) -> np.ndarray:
    """``(N, K)`` float32 weight of the host arrays of B, scales, zero points and g_idx."""
    k_blocks = -(-k // block)
    blob = block * bits // 8
    if list(b.shape) != [n, k_blocks, blob]:
        ctx.fail(f"B has shape {list(b.shape)}; N {n}, K {k}, block_size {block} and bits {bits} give "
                 f"{[n, k_blocks, blob]}")
    if scales.size != n * k_blocks:
        ctx.fail(f"scales has {scales.size} values, expected N * k_blocks = {n * k_blocks}")
    s = scales.astype(np.float32).reshape(n, k_blocks)
    if zero_points is None:
        zp = np.full((n, k_blocks), 1 << (bits - 1), np.float32)
    elif zero_points.dtype == np.uint8:
        width = -(-k_blocks * bits // 8)
        if zero_points.size != n * width:
            ctx.fail(f"zero_points (packed uint8) has {zero_points.size} values, expected {n * width}")
        zp = unpack(zero_points.reshape(n, width), bits)[:, :k_blocks].astype(np.float32)
    else:
        if zero_points.size != n * k_blocks:
            ctx.fail(f"zero_points has {zero_points.size} values, expected N * k_blocks = {n * k_blocks}")
        zp = zero_points.astype(np.float32).reshape(n, k_blocks)
    if g_idx is None:
        return _dequantize_blocks(b.astype(np.uint8, copy=False), s, zp, n, k, block, bits)
    q = unpack(b.astype(np.uint8), bits).reshape(n, k_blocks * block)[:, :k].astype(np.float32)
    col = g_idx.reshape(-1).astype(np.int64)
    if col.size != k:
        ctx.fail(f"g_idx has {col.size} values, expected K = {k}")
    if col.size and (col.min() < 0 or col.max() >= k_blocks):
        ctx.fail(f"g_idx holds a block index outside [0, {k_blocks}): {int(col.min())}..{int(col.max())}")
    return np.ascontiguousarray((q - zp[:, col]) * s[:, col])


#: values of a weight the dequantization handles at once (its temporaries stay in a core's cache)
_CHUNK = 1 << 16


def _dequantize_blocks(b, s, zp, n: int, k: int, block: int, bits: int) -> np.ndarray:
    """``(q - zp) * scale`` per block, ``(N, K)`` float32, without ``g_idx``: the same float32
    operations per value as the column-wise form (an exact difference of small integers, then
    one product), taken over a few rows at a time through a table of each octet's values."""
    k_blocks, blob = b.shape[1], b.shape[2]
    per = 8 // bits
    table = unpack(np.arange(256, dtype=np.uint8)[:, None], bits).astype(np.float32)  # (256, per)
    out = np.empty((n, k), np.float32)
    rows = max(1, _CHUNK // max(1, k_blocks * block))
    whole = k == k_blocks * block
    for lo in range(0, n, rows):
        hi = min(n, lo + rows)
        if whole:  # the values land in the result's rows, then are scaled there
            q = out[lo:hi].reshape(hi - lo, k_blocks, blob, per)
            np.take(table, b[lo:hi], axis=0, out=q, mode="clip")  # octets index all 256 rows: no clipping
        else:
            q = np.take(table, b[lo:hi], axis=0, mode="clip")
        q = q.reshape(hi - lo, k_blocks, block)
        q -= zp[lo:hi, :, None]
        q *= s[lo:hi, :, None]
        if not whole:
            out[lo:hi] = q.reshape(hi - lo, k_blocks * block)[:, :k]
    return out


#: dequantized weights of constant B / scales / zero points / g_idx, shared by every kernel made
#: for the same values (a session's cold and warm plans and its shape-specialized plans make their
#: own kernels, over their own copies of the constants): ``{digest: (weak reference to the
#: weight, attributes key)}``, the digest of the attributes and the parts' bytes (:func:`_digest`); an entry goes
#: when its weight is collected
_SHARED: dict = {}


def _digest(parts: list, key: tuple) -> bytes:
    """A digest of ``key`` and the host arrays ``parts`` (types, shapes and bytes)."""
    h = hashlib.sha256(repr(key).encode())  # SHA-256: the hashing instructions of x86-64 and arm64 hosts serve it
    for p in parts:
        if p is None:
            h.update(b"|none")
            continue
        c = np.ascontiguousarray(p)
        h.update(f"|{c.dtype.str}{c.shape}".encode())
        h.update(c.view(np.uint8).reshape(-1).data if c.size else b"")
    return h.digest()


def _shared(digest: bytes):
    """The weight an earlier kernel made from equal parts, or None."""
    entry = _SHARED.get(digest)
    return None if entry is None else entry[0]()


def _adopt(ctx, key: tuple, cache: dict) -> None:
    """Hold, from the kernel's making, the weight another kernel made from equal constants (a
    plan made while an earlier one lives, as a warm plan beside the cold one it replaces, keeps
    the weight once that plan is gone: a later prompt on it does not dequantize again)."""
    if not (ctx.is_constant(1) and ctx.is_constant(2)) or not any(r[1] == key for r in list(_SHARED.values())):
        return
    parts = tuple(ctx.constant(i) if ctx.is_constant(i) else None for i in range(1, 5))
    if any(p is None and i < ctx.num_inputs and ctx.node.input[i] for i, p in enumerate(parts, start=1)):
        return  # an input that is not a constant: derived per call
    host = [None if v is None else ctx.to_host(v) for v in parts]
    weight = _shared(_digest(host, key))
    if weight is not None:
        cache["w"] = (parts, weight)


def _share(digest: bytes, key: tuple, weight) -> None:
    def gone(ref, d=digest):
        if _SHARED.get(d, (None,))[0] is ref:
            _SHARED.pop(d, None)

    try:
        _SHARED[digest] = (weakref.ref(weight, gone), key)
    except TypeError:  # a weight that takes no weak reference: not shared
        pass


def quantize_a(xp, a, k: int, a_block: int):
    """float32 ``a`` (..., K) as onnxruntime's int8 path sees it: blockwise symmetric int8
    quantization along K (blocks of ``a_block``, scale ``amax / 127``, half-to-even rounding of
    ``a * (127 / amax)``), dequantized."""
    lead = tuple(int(d) for d in a.shape[:-1])
    blocks = -(-k // a_block)
    rows = xp.reshape(a, (-1, k))
    if blocks * a_block != k:
        pad = xp.zeros((int(rows.shape[0]), blocks * a_block - k), dtype=rows.dtype)
        rows = xp.concat([rows, pad], axis=1)
    p = xp.reshape(rows, (-1, blocks, a_block))
    amax = xp.max(xp.abs(p), axis=2, keepdims=True)
    zero = xp.zeros_like(amax)
    nonzero = amax != zero
    inv = xp.where(nonzero, 127.0 / xp.where(nonzero, amax, zero + 1.0), zero)
    q = xp.round(p * inv)
    d = xp.reshape(q * (amax / 127.0), (-1, blocks * a_block))[:, :k]
    return xp.reshape(d, lead + (k,))


def quantize_a_host(a: np.ndarray, k: int, a_block: int) -> np.ndarray:
    """:func:`quantize_a` of a float32 numpy ``a``, in fewer numpy calls: the same float32
    operations (``127 / amax``, ``round_half_even(a * inv)``, ``q * (amax / 127)``), the same bits."""
    blocks = -(-k // a_block)
    rows = a.reshape(-1, k)
    if blocks * a_block != k:
        padded = np.zeros((rows.shape[0], blocks * a_block), np.float32)
        padded[:, :k] = rows
        rows = padded
    p = rows.reshape(-1, blocks, a_block)
    amax = np.abs(p).max(axis=2, keepdims=True)
    inv = np.zeros_like(amax)
    np.divide(np.float32(127.0), amax, out=inv, where=amax != 0)
    q = np.rint(p * inv)
    q *= amax / np.float32(127.0)
    q = q.reshape(-1, blocks * a_block)
    if blocks * a_block != k:
        q = q[:, :k]
    return q.reshape(a.shape)


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
    level = int(ctx.attr("accuracy_level"))
    key = (n, k, bits, block, getattr(ctx.backend, "name", None), id(xp))  # the weight lives on the backend
    a_block = int8_block(bits, block) if level == 4 and ctx.is_constant(1) else None
    cache: dict = {}
    _adopt(ctx, key, cache)

    def kept(i, v) -> bool:
        return v is None or ctx.is_constant(i) or ctx.default(i) is v or ctx.holds(v)

    def weight(b, scales, zp, g_idx):
        parts = (b, scales, zp, g_idx)
        keep = all(kept(i, v) for i, v in enumerate(parts, start=1))
        hit = cache.get("w")
        if keep and hit is not None and all(x is y for x, y in zip(hit[0], parts)):
            return hit[1]
        host = [None if v is None else ctx.to_host(v) for v in parts]
        digest = _digest(host, key) if keep else None
        wt = _shared(digest) if keep else None
        if wt is None:
            w = dequantize(ctx, host[0], host[1], host[2], n, k, block, bits, host[3])
            wt = xp.permute_dims(xp.asarray(ctx.from_host(w)), (1, 0))
            if keep:
                _share(digest, key, wt)
        cache.clear()
        if keep:
            cache["w"] = (parts, wt)
        return wt

    def run(a, b, scales, zero_points=None, g_idx=None, bias=None):
        if type(a) is np.ndarray and a.dtype == _F32 and a.ndim and a.shape[-1] == k and k \
                and (bias is None or type(bias) is np.ndarray and bias.dtype == _F32):
            wt = weight(b, scales, zero_points, g_idx)
            if type(wt) is np.ndarray:  # the host's arrays: numpy's calls, without the namespace's
                int8 = a_block is not None and g_idx is None and (zero_points is None or zero_points.dtype == np.uint8)
                y = np.matmul(quantize_a_host(a, k, a_block) if int8 else a, wt)
                return y if bias is None else y + bias
        check_float(ctx, a, "A", ("float32", "float16", "bfloat16"))
        if a.ndim < 1 or int(a.shape[-1]) != k:
            ctx.fail(f"A's last extent must be K = {k}, got shape {shape_of(a)}")
        wt = weight(b, scales, zero_points, g_idx)
        x = widen(xp, a)
        int8 = (a_block is not None and g_idx is None
                and (zero_points is None or arrays.dtype_name(zero_points.dtype) == "uint8"))
        if int8 and k:
            x = quantize_a_host(x, k, a_block) if type(x) is np.ndarray and x.dtype == np.float32 \
                else quantize_a(xp, x, k, a_block)
        y = xp.matmul(x, cast(xp, wt, x.dtype))
        if bias is not None:
            y = y + widen(xp, bias)
        return cast(xp, y, a.dtype)

    def size(a, *_):  # Y (..., N) of A's type
        if type(a) is np.ndarray:  # the host's array: its shape holds ints
            return math.prod(a.shape[:-1]) * n * a.dtype.itemsize
        return math.prod(int(d) for d in a.shape[:-1]) * n * a.dtype.itemsize

    return declares_output_bytes(run, size)
