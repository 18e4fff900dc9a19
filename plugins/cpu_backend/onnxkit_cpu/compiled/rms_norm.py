"""Compiled loop of the root-mean-square norms of com.microsoft's decoders (overrides/rms_norm.py):
SkipSimplifiedLayerNormalization and SimplifiedLayerNormalization over the last axis, float32.

:data:`rms_rows` ``(x, skip, bias, gamma, eps, with_skip, with_bias, y, inv, s)``: ``x`` (R, H)
float32, ``skip`` (R, H) (read where ``with_skip``), ``bias`` and ``gamma`` (H); per row the sum
``s = x + skip (+ bias)`` (each addition rounded to float32 as numpy rounds it; written to ``s``
where ``with_skip``), ``inv = 1 / sqrt(mean(s²) + eps)`` in float32 (written to ``inv``, R), and
``y = s * inv * gamma`` (two float32 products, in that order, as the portable kernels).  The
mean's sum of squares is summed in the order the vectorized loop takes (fastmath ``reassoc``
only; numpy sums pairwise, onnxruntime in order): results agree to float32 rounding.
Allocates nothing.
"""

from __future__ import annotations

import numpy as np

from onnxkit_cpu.compiled import kernel


@kernel(fastmath={"reassoc"})
def rms_rows(x, skip, bias, gamma, eps, with_skip, with_bias, y, inv, s):
    rows, h = x.shape
    e = np.float32(eps)
    for r in range(rows):
        acc = np.float32(0.0)
        if with_skip:
            for j in range(h):
                v = x[r, j] + skip[r, j]
                if with_bias:
                    v = v + bias[j]
                s[r, j] = v
                acc += v * v
        else:
            for j in range(h):
                v = x[r, j]
                acc += v * v
        iv = np.float32(1.0) / np.sqrt(acc / np.float32(h) + e)
        inv[r] = iv
        if with_skip:
            for j in range(h):
                y[r, j] = s[r, j] * iv * gamma[j]
        else:
            for j in range(h):
                y[r, j] = x[r, j] * iv * gamma[j]
