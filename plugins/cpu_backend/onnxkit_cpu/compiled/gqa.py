"""Compiled loop of GroupQueryAttention's decoding step (overrides/gqa.py): one new token of one
sequence, float32, the geometry decided by ``onnxkit_microsoft``'s ``gqa_token.case``.

:data:`token_step` ``(q, k, v, past_k, past_v, p, t, start, scale, half, c, s, pk, pv, y)``:
``q`` (N, H), ``k`` and ``v`` (Nkv, H) the step's query, key and value rows (not rotated);
``past_k``/``past_v`` (1, Nkv, buf, H); ``pk``/``pv`` (1, Nkv, length, H) the presents to
write, ``y`` (N * H) the output.  With ``half`` > 0 the first ``2 half`` features of q and k are
rotated by halves by the angles ``c``/``s`` (``half`` values each): ``a c - b s``, ``b c + a s``,
each product and difference rounded to float32 as numpy rounds them (no contraction).  The presents get the past's rows ``[0, p)``, the new row at ``p``, and after it the
past's rows where ``buf`` equals ``length`` (a shared buffer), zeros otherwise.  Query head
``i`` reads K/V head ``i // (N / Nkv)``: scores over keys ``[start, t)`` are float32 dot products
times ``scale``, softmax ``exp(x - max) / sum`` (float32), the output the probabilities' float32
sum over the values.  Fastmath ``reassoc`` only: the dot products and sums are summed in the
order the vectorized loop takes (as the general kernel's BLAS products take their own), so
results agree with it to float32 rounding; no other arithmetic changes.  Allocates only its scratch (the rotated rows and
one row of scores).
"""

from __future__ import annotations

import numpy as np

from onnxkit_cpu.compiled import kernel


@kernel(fastmath={"reassoc"})
def token_step(q, k, v, past_k, past_v, p, t, start, scale, half, c, s, pk, pv, y):
    n, h = q.shape
    nkv = k.shape[0]
    group = n // nkv
    length = pk.shape[2]
    buf = past_k.shape[2]
    qr = np.empty((n, h), np.float32)
    kr = np.empty((nkv, h), np.float32)
    for i in range(n):
        for j in range(h):
            qr[i, j] = q[i, j]
    for i in range(nkv):
        for j in range(h):
            kr[i, j] = k[i, j]
    if half > 0:
        for i in range(n):
            for j in range(half):
                a = q[i, j]
                b = q[i, half + j]
                qr[i, j] = a * c[j] - b * s[j]
                qr[i, half + j] = b * c[j] + a * s[j]
        for i in range(nkv):
            for j in range(half):
                a = k[i, j]
                b = k[i, half + j]
                kr[i, j] = a * c[j] - b * s[j]
                kr[i, half + j] = b * c[j] + a * s[j]
    shared = buf == length
    for g in range(nkv):
        for r in range(p):
            for j in range(h):
                pk[0, g, r, j] = past_k[0, g, r, j]
                pv[0, g, r, j] = past_v[0, g, r, j]
        for j in range(h):
            pk[0, g, p, j] = kr[g, j]
            pv[0, g, p, j] = v[g, j]
        if shared:
            for r in range(p + 1, length):
                for j in range(h):
                    pk[0, g, r, j] = past_k[0, g, r, j]
                    pv[0, g, r, j] = past_v[0, g, r, j]
        else:
            for r in range(p + 1, length):
                for j in range(h):
                    pk[0, g, r, j] = 0.0
                    pv[0, g, r, j] = 0.0
    sc = np.float32(scale)
    width = t - start
    e = np.empty(width, np.float32)
    acc = np.empty(h, np.float32)
    for i in range(n):
        g = i // group
        top = np.float32(-np.inf)
        for r in range(width):
            d = np.float32(0.0)
            for j in range(h):
                d += qr[i, j] * pk[0, g, start + r, j]
            d = d * sc
            e[r] = d
            if d > top:
                top = d
        total = np.float32(0.0)
        for r in range(width):
            x = np.exp(e[r] - top)
            e[r] = x
            total += x
        for j in range(h):
            acc[j] = 0.0
        for r in range(width):
            w = e[r] / total
            for j in range(h):
                acc[j] += w * pv[0, g, start + r, j]
        for j in range(h):
            y[i * h + j] = acc[j]
