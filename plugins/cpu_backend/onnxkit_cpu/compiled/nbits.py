"""Compiled loop of MatMulNBits' 4-bit weights at accuracy_level 4 (overrides/nbits.py).

:data:`int4_rows` ``(a, b, scales, zp, out)``: ``a`` (M, K) float32, ``b`` (N, KB, blob) uint8
(two 4-bit values a byte, the even column in the low nibble; ``K = KB * 2 blob``), ``scales``
(N, KB) float32, ``zp`` (N, KB) int32 zero points, ``out`` (M, N) float32.  Per row of A and
block of K (one block of ``2 blob`` columns, at most 256): A quantized symmetrically to int8 as
onnxruntime's CPU kernel (and the portable kernel's ``quantize_a``) quantizes it:
``q = round_half_even(a * (127 / amax))``, scale ``amax / 127`` (0 where ``amax`` is 0); then
``out[m, n] = sum over blocks of float32(sum_k q_k (w_nk - zp_nb)) * (scale_a * scale_nb)``:
the integer dot product of each block is exact (int32), as onnxruntime accumulates it; the
portable kernel forms the same sum from the dequantized float32 values in one BLAS product, so
the two differ by float32 rounding only (plugins/microsoft_domain/tests/test_decoder_fast_paths.py
bounds it).  No fastmath; it allocates only its scratch (K + 2 KB values).
"""

from __future__ import annotations

import numpy as np

from onnxkit_cpu.compiled import kernel


@kernel
def int4_rows(a, b, scales, zp, out):
    m_rows, _ = a.shape
    n_rows, k_blocks, blob = b.shape
    block = 2 * blob
    lo = np.empty((k_blocks, blob), np.int32)
    hi = np.empty((k_blocks, blob), np.int32)
    sa = np.empty(k_blocks, np.float32)
    qsum = np.empty(k_blocks, np.int32)
    for m in range(m_rows):
        for kb in range(k_blocks):
            amax = np.float32(0.0)
            for j in range(block):
                v = abs(a[m, kb * block + j])
                if v > amax:
                    amax = v
            inv = np.float32(127.0) / amax if amax > 0 else np.float32(0.0)
            sa[kb] = amax / np.float32(127.0)
            total = 0
            for j in range(blob):
                x0 = np.int32(np.round(a[m, kb * block + 2 * j] * inv))
                x1 = np.int32(np.round(a[m, kb * block + 2 * j + 1] * inv))
                lo[kb, j] = x0
                hi[kb, j] = x1
                total += x0 + x1
            qsum[kb] = total
        for n in range(n_rows):
            acc = np.float32(0.0)
            for kb in range(k_blocks):
                s = 0
                for j in range(blob):
                    byte = np.int32(b[n, kb, j])
                    s += lo[kb, j] * (byte & 15) + hi[kb, j] * (byte >> 4)
                s -= zp[n, kb] * qsum[kb]
                acc += np.float32(s) * (sa[kb] * scales[n, kb])
            out[m, n] = acc
