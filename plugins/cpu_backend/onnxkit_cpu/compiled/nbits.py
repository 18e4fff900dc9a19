"""Compiled loops of MatMulNBits' 4-bit weights at accuracy_level 4 (overrides/nbits.py).

The weight is kept in a tiled layout (:func:`onnxkit_cpu.overrides.nbits.tile_weights` makes it
from the node's constants, once per constant): :data:`TILE` consecutive output columns side by
side, so that the innermost loop runs across output columns (vectorized by LLVM) where the
packed layout runs along K (a horizontal sum per block):

* ``w`` (NT, KP, TILE) uint8, ``NT = ceil(N / TILE)``, ``KP = KB * block / 2``:
  ``w[t, p, i] = q[t*TILE + i, 2p] | q[t*TILE + i, 2p + 1] << 4``, ``q`` the 4-bit values
  (columns past N: zeros);
* ``scales``, ``zp`` (NT, KB, TILE) float32: each block's scale and zero point (0 past N).

:data:`int4_product` ``(a, block, w, scales, zp, out, t0, t1)``: ``a`` (M, K) float32,
``block`` the weight's block size (at most 256), ``out`` (M, N) float32 written for the column
tiles ``[t0, t1)``.  First ``a`` is quantized per row and block of ``block`` columns as
onnxruntime's CPU kernel (and the portable kernel's ``quantize_a``) quantizes A:
``q = round_half_even(a * (127 / amax))``, scale ``sa = amax / 127`` (0 where ``amax`` is 0),
columns past K zeros; each call quantizes all of A (a split call repeats that small part).
Then per row and column ``out[m, n] = sum over blocks of (dot_b - zp_nb * qsum_b) * (sa_b *
scale_nb)`` with ``dot_b = sum_k q_k w_nk`` over the block and ``qsum_b`` the block's sum of
``q``.
Every term of ``dot_b`` and ``zp * qsum`` is an integer below 2^24 in magnitude (|q| <= 127,
w and zp <= 15, blocks <= 256): the float32 sums are exact, the integer dot product
onnxruntime accumulates in int32.  The 4-bit halves are taken in float arithmetic
(``hi = floor(x / 16)``, ``lo = x - 16 hi``, exact): numba widens integer operations to 64
bits, which LLVM then does not vectorize.  No fastmath; allocates only its scratch (A's quantized
copy, 2 TILE values).
"""

from __future__ import annotations

import numpy as np

from onnxkit_cpu.compiled import kernel

#: output columns a tile holds side by side (the vectorized inner loop's trip count)
TILE = 64


@kernel
def int4_product(a, block, w, scales, zp, out, t0, t1):
    m_rows, k = a.shape
    k_blocks = scales.shape[1]
    # A quantized per row and block (columns past K: 0)
    qa = np.empty((m_rows, k_blocks * block), np.float32)
    sa = np.empty((m_rows, k_blocks), np.float32)
    qsum = np.empty((m_rows, k_blocks), np.float32)
    for m in range(m_rows):
        for kb in range(k_blocks):
            lo = kb * block
            hi = min(lo + block, k)
            amax = np.float32(0.0)
            for j in range(lo, hi):
                v = abs(a[m, j])
                if v > amax:
                    amax = v
            inv = np.float32(127.0) / amax if amax > 0 else np.float32(0.0)
            sa[m, kb] = amax / np.float32(127.0)
            total = np.float32(0.0)
            for j in range(lo, hi):
                q = np.float32(np.round(a[m, j] * inv))
                qa[m, j] = q
                total += q
            for j in range(hi, lo + block):
                qa[m, j] = np.float32(0.0)
            qsum[m, kb] = total
    # the column tiles [t0, t1)
    half = block // 2
    n = out.shape[1]
    blk = np.empty(TILE, np.float32)
    acc = np.empty(TILE, np.float32)
    for t in range(t0, t1):
        for m in range(m_rows):
            for i in range(TILE):
                acc[i] = 0.0
            for kb in range(k_blocks):
                for i in range(TILE):
                    blk[i] = 0.0
                for p in range(kb * half, kb * half + half):
                    q0 = qa[m, 2 * p]
                    q1 = qa[m, 2 * p + 1]
                    for i in range(TILE):
                        x = np.float32(w[t, p, i])
                        hi = np.floor(x * np.float32(0.0625))
                        lo = x - np.float32(16.0) * hi
                        blk[i] += q0 * lo + q1 * hi
                s = sa[m, kb]
                qs = qsum[m, kb]
                for i in range(TILE):
                    acc[i] += (blk[i] - zp[t, kb, i] * qs) * (s * scales[t, kb, i])
            base = t * TILE
            for i in range(min(TILE, n - base)):
                out[m, base + i] = acc[i]
