"""Compiled loop of GroupQueryAttention over S new rows of one sequence (overrides/gqa.py): a
prompt or a decoding step, float32, the geometry decided by ``onnxkit_microsoft``'s
``gqa_token.chunk_case``.

:data:`chunk_step` ``(q, k, v, past_k, past_v, p, t, causal, window, scale, half, cos, sin, pk,
pv, y)``: ``q`` (S, N, H), ``k`` and ``v`` (S, Nkv, H) the new rows' query, key and value (not
rotated); ``past_k``/``past_v`` (1, Nkv, buf, H); ``pk``/``pv`` (1, Nkv, length, H) the presents
to write, ``y`` (S, N * H) the output.  Row ``s`` sits at position ``p + s``.  With ``half`` > 0
the first ``2 half`` features of q and k are rotated by halves by the angles of row ``p + s`` of
``cos``/``sin``: ``a c - b s``, ``b c + a s``, each product and difference rounded to float32 as
numpy rounds them (no contraction).  The presents get the past's rows ``[0, p)``, the new rows
at ``[p, p + S)``, and after them the past's rows where ``buf`` equals ``length`` (a shared
buffer), zeros otherwise.  Query head ``i`` reads K/V head ``i // (N / Nkv)``; row ``s`` sees
keys ``j < t``, with ``causal`` also ``j <= p + s`` and, with ``window`` > 0, ``j > p + s -
window``.  Scores are float32 dot products times ``scale``, softmax ``exp(x - max) / sum``
(float32), the output the probabilities' float32 sum over the values.  The exponential of
``x - max`` (<= 0) is computed here so that its loop vectorizes (numba's ``np.exp`` is one libm
call per element): in float64, ``2^n 2^f`` with ``n = round(x log2 e)``, ``2^f`` by the Taylor
polynomial of ``e^(f ln 2)`` to degree 8 (relative error below 1e-8 for ``|f| <= 1/2``), ``2^n``
from a table (0 below ``2^-160``), rounded once to float32: within an ulp or so of a correctly
rounded float32 exp.  Fastmath ``reassoc``
only: the dot products and sums are summed in the order the vectorized loop takes (as the
general kernel's BLAS products take their own), so results agree with it to float32 rounding;
no other arithmetic changes.  Allocates only its scratch (the rotated rows and one row of
scores).
"""

from __future__ import annotations

import numpy as np

from onnxkit_cpu.compiled import kernel

#: ``2^-i`` for ``i`` in ``[0, 160]`` (the scale of the exponential below; a module constant of
#: the compiled loop)
_POW2_NEG = np.array([2.0 ** -i for i in range(161)], np.float64)
_LN2 = 0.6931471805599453
_LOG2E = 1.4426950408889634


@kernel(fastmath={"reassoc"})
def chunk_step(q, k, v, past_k, past_v, p, t, causal, window, scale, half, cos, sin, pk, pv, y):
    s_rows, n, h = q.shape
    nkv = k.shape[1]
    group = n // nkv
    length = pk.shape[2]
    buf = past_k.shape[2]
    qr = np.empty((s_rows, n, h), np.float32)
    kr = np.empty((s_rows, nkv, h), np.float32)
    for r in range(s_rows):
        for i in range(n):
            for j in range(h):
                qr[r, i, j] = q[r, i, j]
        for i in range(nkv):
            for j in range(h):
                kr[r, i, j] = k[r, i, j]
        if half > 0:
            c = cos[p + r]
            sn = sin[p + r]
            for i in range(n):
                for j in range(half):
                    a = q[r, i, j]
                    b = q[r, i, half + j]
                    qr[r, i, j] = a * c[j] - b * sn[j]
                    qr[r, i, half + j] = b * c[j] + a * sn[j]
            for i in range(nkv):
                for j in range(half):
                    a = k[r, i, j]
                    b = k[r, i, half + j]
                    kr[r, i, j] = a * c[j] - b * sn[j]
                    kr[r, i, half + j] = b * c[j] + a * sn[j]
    shared = buf == length
    end = p + s_rows
    for g in range(nkv):
        for r in range(p):
            for j in range(h):
                pk[0, g, r, j] = past_k[0, g, r, j]
                pv[0, g, r, j] = past_v[0, g, r, j]
        for r in range(s_rows):
            for j in range(h):
                pk[0, g, p + r, j] = kr[r, g, j]
                pv[0, g, p + r, j] = v[r, g, j]
        if shared:
            for r in range(end, length):
                for j in range(h):
                    pk[0, g, r, j] = past_k[0, g, r, j]
                    pv[0, g, r, j] = past_v[0, g, r, j]
        else:
            for r in range(end, length):
                for j in range(h):
                    pk[0, g, r, j] = 0.0
                    pv[0, g, r, j] = 0.0
    sc = np.float32(scale)
    e = np.empty(max(t, 1), np.float32)
    acc = np.empty(h, np.float32)
    for r in range(s_rows):
        pos = p + r
        hi = min(t, pos + 1) if causal else t
        lo = max(0, pos + 1 - window) if causal and window > 0 else 0
        for i in range(n):
            g = i // group
            top = np.float32(-np.inf)
            for m in range(lo, hi):
                d = np.float32(0.0)
                for j in range(h):
                    d += qr[r, i, j] * pk[0, g, m, j]
                d = d * sc
                e[m - lo] = d
                if d > top:
                    top = d
            total = np.float32(0.0)
            for m in range(hi - lo):
                # exp(x) for x = e - top <= 0 (module docstring): 2^n 2^f, n = round(x log2 e)
                z = max(np.float64(e[m] - top) * _LOG2E, -160.0)
                nf = np.floor(z + 0.5)
                u = (z - nf) * _LN2
                poly = 1.0 + u * (1.0 + u * (0.5 + u * (1.0 / 6 + u * (1.0 / 24 + u * (1.0 / 120 + u * (
                    1.0 / 720 + u * (1.0 / 5040 + u * (1.0 / 40320))))))))
                x = np.float32(poly * _POW2_NEG[np.int64(-nf)])
                e[m] = x
                total += x
            for j in range(h):
                acc[j] = 0.0
            for m in range(hi - lo):
                w = e[m] / total
                for j in range(h):
                    acc[j] += w * pv[0, g, lo + m, j]
            for j in range(h):
                y[r, i * h + j] = acc[j]
