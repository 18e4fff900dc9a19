"""cpu fast path of MatMulNBits (com.microsoft 1) for a decoder's token step: 4-bit weights at
accuracy_level 4, a few rows of float32 A (``onnxkit_microsoft/kernels/nbits.py`` stays the
reference and serves everything else).

Where the node's B and scales (and packed uint8 zero points, if any) are constants of the plan,
``bits`` is 4, ``block_size`` at most 256 (K need not be a whole number of blocks: the last
block's columns past K are zeros of A, as onnxruntime pads them), no ``g_idx`` and
``accuracy_level`` 4 (the portable kernel's int8 path: A quantized per block to int8), a run
with a float32 numpy A calls a compiled loop: where the host has AVX-512 VNNI
(:mod:`onnxkit_cpu.compiled.nbits_vnni`), A of any number of rows (``prod(A.shape[:-1])``: a
token's row or a prompt's) takes ``vpdpbusd``; elsewhere A of at most :data:`ROWS_MAX` rows takes
the float loop of :mod:`onnxkit_cpu.compiled.nbits`.  Both quantize A per block, then form the
product over the weight in a tiled layout (:func:`tile_weights`: the 4-bit values, as many
bytes as B, laid out so the loop runs across output columns), each block's int8 × int4 dot
product exact, as onnxruntime's CPU kernel computes it; the two give the same bits.  The tiled
weight is made on the first such run and kept while B lives: one per constant B for every plan
of the session that holds the same B, scales and zero points objects (:data:`_TILED`); no
float32 copy of the weight is made for those runs.  Column tiles are split across the run's
intra-op threads.  The bias, if any, is added in float32 after.  Results equal the portable
kernel's to float32 rounding (its float32 BLAS product of the same dequantized values sums in
another order).  More rows without VNNI (a prompt) take the portable kernel: its one BLAS
product over the dequantized weight, made once, is faster there than the float loop.  On a cold
first run the compiled loops are deferred (:mod:`onnxkit_cpu.compiled`); the portable kernel
serves.

Where onnxkit-microsoft is not installed this module registers nothing.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from onnxkit.plugin import KernelTable, declares_output_bytes, parallel_for, splits_across_threads, traits_of

from ..compiled import nbits as loops
from ..compiled import nbits_vnni

KERNELS = KernelTable()

try:
    from onnxkit_microsoft.api import nbits as portable
except ImportError:  # onnxkit-microsoft absent: no com.microsoft operators to serve
    portable = None

DOMAIN = "com.microsoft"
splits_across_threads((DOMAIN, "MatMulNBits"))
#: the most rows of A the compiled float loop takes (a decoder's token step has one per sequence;
#: the VNNI loop takes any number: a prompt too)
ROWS_MAX = 8
#: multiply-adds worth a block of column tiles on a thread of its own: many times what handing a
#: block to a pool thread costs (a token's projections at a small model's size stay one call on
#: the caller's thread; an LM head's or a prompt's products split)
TILE_WORK = 1 << 23
#: tiled weights by the identity of their constants: ``{(id(B), id(scales), id(zero points)):
#: (weak references to the three, the tiled weight)}``, an entry dropped when B is collected
_TILED: dict = {}
_F32 = np.dtype(np.float32)
_lock = threading.Lock()


def tile_weights(b: np.ndarray, scales: np.ndarray, zero_points, n: int, k: int, block: int, vnni: bool = False):
    """``(w, scales, zp)`` in the tiled layout of :mod:`onnxkit_cpu.compiled.nbits` (``vnni``:
    the weight in :mod:`onnxkit_cpu.compiled.nbits_vnni`'s) from B ``(N, KB, block / 2)`` uint8,
    scales (``N * KB`` floats) and packed uint8 zero points (or None: 8)."""
    tile = loops.TILE
    kb = b.shape[1]
    nt = -(-n // tile)
    if vnni:
        w = nbits_vnni.layout(b, n, block)
    else:
        w = np.zeros((nt * tile, kb * block // 2), np.uint8)
        w[:n] = b.reshape(n, -1)
        w = np.ascontiguousarray(w.reshape(nt, tile, -1).transpose(0, 2, 1))
    s = np.zeros((nt * tile, kb), np.float32)
    s[:n] = scales.reshape(n, kb)
    z = np.zeros((nt * tile, kb), np.float32)
    if zero_points is None:
        z[:n] = 8.0
    else:
        width = -(-kb * 4 // 8)
        z[:n] = portable.unpack(zero_points.reshape(n, width), 4)[:, :kb]
    return (w, np.ascontiguousarray(s.reshape(nt, tile, kb).transpose(0, 2, 1)),
            np.ascontiguousarray(z.reshape(nt, tile, kb).transpose(0, 2, 1)))


def tiled(b, scales, zero_points, n: int, k: int, block: int, vnni: bool = False):
    """The tiled weight of these constant arrays (``vnni``: :func:`tile_weights`), made once while
    ``b`` lives."""
    key = (id(b), id(scales), id(zero_points), vnni)
    entry = _TILED.get(key)
    if entry is not None and entry[0]() is b and entry[1]() is scales and entry[2]() is zero_points:
        return entry[3]
    made = tile_weights(b, scales, zero_points, n, k, block, vnni)

    def gone(_ref, key=key):
        with _lock:
            e = _TILED.get(key)
            if e is not None and e[0]() is None:
                del _TILED[key]

    zref = (lambda: None) if zero_points is None else weakref.ref(zero_points)
    with _lock:
        _TILED[key] = (weakref.ref(b, gone), weakref.ref(scales), zref, made)
    return made


def _packed(ctx, n: int, k: int, block: int):
    """(B, scales, zero points or None) of the node's constants, or None where they are not
    constants of the accepted form."""
    if not (ctx.is_constant(1) and ctx.is_constant(2)) or ctx.num_inputs > 4 and ctx.node.input[4]:
        return None
    b, scales = ctx.constant(1), ctx.constant(2)
    kb = -(-k // block)
    if type(b) is not np.ndarray or b.dtype != np.uint8 or b.shape != (n, kb, block // 2) \
            or type(scales) is not np.ndarray or scales.size != n * kb or scales.dtype.kind != "f":
        return None
    z = None
    if ctx.num_inputs > 3 and ctx.node.input[3]:
        z = ctx.constant(3)
        if not ctx.is_constant(3) or type(z) is not np.ndarray or z.dtype != np.uint8 \
                or z.size != n * -(-kb * 4 // 8):
            return None
    return b, scales, z


if portable is not None:

    @KERNELS.register("MatMulNBits", 1, domain=DOMAIN)
    def matmul_nbits(ctx):
        base = portable.matmul_nbits(ctx)
        n, k = int(ctx.attr("N")), int(ctx.attr("K"))
        bits, block = int(ctx.attr("bits")), int(ctx.attr("block_size"))
        if bits != 4 or int(ctx.attr("accuracy_level") or 0) != 4 or portable.int8_block(bits, block) != block \
                or not k:
            return base
        packed = _packed(ctx, n, k, block)
        if packed is None:
            return base
        impl = nbits_vnni.get() if block % 8 == 0 else None
        vnni = impl is not None
        product = impl.int4_product if vnni else loops.int4_product.get()
        if product is None:
            return base
        b0, s0, z0 = packed
        tiles = -(-n // loops.TILE)
        # column tiles worth a block of their own, by rows of A (one block below: one call, no split)
        grain_1 = max(1, TILE_WORK // (loops.TILE * k))
        held = []  # the tiled weight, once made

        def run(a, b_in, scales, zero_points=None, g_idx=None, bias=None):
            if type(a) is np.ndarray and a.dtype == _F32 and b_in is b0 and scales is s0 \
                    and zero_points is z0 and g_idx is None and a.ndim and a.shape[-1] == k:
                rows = a.size // k
                if rows <= ROWS_MAX or vnni:
                    if not held:
                        held.append(tiled(b0, s0, z0, n, k, block, vnni))
                    w, ws, wz = held[0]
                    a2 = a.reshape(rows, k) if a.flags.c_contiguous else np.ascontiguousarray(a).reshape(rows, k)
                    out = np.empty(a.shape[:-1] + (n,), np.float32)
                    o2 = out.reshape(rows, n)
                    grain = max(1, grain_1 // rows)
                    if tiles < 2 * grain:  # one block whatever the threads: the call itself
                        product(a2, block, w, ws, wz, o2, 0, tiles)
                    else:
                        parallel_for(lambda lo, hi: product(a2, block, w, ws, wz, o2, lo, hi), tiles, grain=grain,
                                     name="matmul_nbits.tiles")
                    if bias is not None:
                        out += bias.astype(np.float32, copy=False)
                    return out
            return base(a, b_in, scales, zero_points, g_idx, bias)

        return declares_output_bytes(run, traits_of(base).output_bytes)
