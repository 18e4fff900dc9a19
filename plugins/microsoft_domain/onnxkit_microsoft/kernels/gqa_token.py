"""GroupQueryAttention's decoding step on the host: one new token of one sequence, float32.

:func:`token_step` computes what ``gqa.py``'s general kernel computes for the case a decoder's
per-token run is (batch 1, sequence length 1, a float32 query, past and caches, as numpy arrays),
with no per-row bookkeeping: the query's K/V group reshaped in place, the rotary angles of the
one position ``P = seqlens_k`` read as two rows, the present buffers written once (the past's
rows ``[0, P)``, the new row at ``P``, zeros after -- the past's rows
there when it is a shared buffer of the present's length), one score product and one value product
over the keys the token sees (``[0, T)``, or the last ``local_window_size`` of them), softmax
over those only.  The arithmetic is the general kernel's, term for term (the rotation
``a cos - b sin``, ``b cos + a sin``; the scores ``Q Kᵀ`` times the scale; ``exp(x - max) /
sum``): the unseen keys it leaves out contribute exact zeros there.

:func:`case` decides whether a step is that case and gives its geometry; :func:`chunk_case`
gives the geometry of a wider case (S rows of one sequence: a prompt, or S tokens after the
cached ones) that a backend's compiled step, onnxkit-cpu's, computes from; :func:`token_step` returns None wherever the case is not
that one (another dtype or device, a batch or a chunk,
a prompt run, interleaved rotary, position_ids, attention_bias, head_sink, query_seqlens, a
window cache, a quantized cache, softcap, smooth softmax, qk_output) or an input is malformed:
the general kernel then computes, or refuses by name.  :data:`ENABLED` switches it off (the
differential tests compare both).
"""

from __future__ import annotations

import math

import numpy as np

#: whether GroupQueryAttention takes :func:`token_step` where it applies (tests turn it off)
ENABLED = True

_F32 = np.dtype(np.float32)


def applies(a: dict, num_outputs: int) -> bool:
    """Whether a node with the parsed attributes ``a`` (``gqa._attrs``) can take the token step."""
    return not (a["windowed"] or a["bits"] or a["softcap"] > 0 or a["smooth"] or a["qk"] or a["interleaved"]
                or num_outputs > 3)


def _f32(x) -> bool:
    return type(x) is np.ndarray and x.dtype == _F32


def _rows(a: dict, query, key, value, past_key, past_value, seqlens_k, total_sequence_length, s: int):
    """The S new rows of a batch-1 run: ``(q, k, v, h, t, total, buf)`` with ``q`` (S, N, H), ``k``
    and ``v`` (S, Nkv, H) float32 views of the inputs (packed QKV or separate), ``h`` the head
    size, ``t`` = ``seqlens_k + 1``, ``total`` the total sequence length, ``buf`` the pasts'
    length; None where a form or a shape is not the served one (``query`` is float32, 3-D, batch 1:
    the caller's check)."""
    n, nkv = a["n"], a["nkv"]
    d = int(query.shape[2])
    if key is None:
        if value is not None or d % (n + 2 * nkv):
            return None
        h = d // (n + 2 * nkv)
        qkv = query.reshape(s, n + 2 * nkv, h)
        q, k, v = qkv[:, :n], qkv[:, n:n + nkv], qkv[:, n + nkv:]
    else:
        h = d // n
        if d % n or not (_f32(key) and _f32(value)) or key.shape != (1, s, nkv * h) or value.shape != key.shape:
            return None
        q, k, v = query.reshape(s, n, h), key.reshape(s, nkv, h), value.reshape(s, nkv, h)
    if past_key.ndim != 4 or past_key.shape != past_value.shape or past_key.shape[:2] != (1, nkv) \
            or past_key.shape[3] != h:
        return None
    if type(seqlens_k) is not np.ndarray or seqlens_k.shape != (1,) or seqlens_k.dtype.kind not in "iu" \
            or type(total_sequence_length) is not np.ndarray or total_sequence_length.size != 1:
        return None
    return q, k, v, h, int(seqlens_k[0]) + 1, int(total_sequence_length.reshape(-1)[0]), int(past_key.shape[2])


def _rotary_half(a: dict, cos_cache, sin_cache, h: int, end: int):
    """The rotated half-width (0: no rotary), or None where the caches do not serve positions
    below ``end`` for head size ``h``."""
    if not a["rotary"]:
        return 0
    if not (_f32(cos_cache) and _f32(sin_cache)) or cos_cache.ndim != 2 or sin_cache.shape != cos_cache.shape:
        return None
    half = int(cos_cache.shape[1])
    if 2 * half > h or end > int(cos_cache.shape[0]) or not half:
        return None
    return half


class Case:
    """One decoding step's geometry (:func:`case`): ``q`` (N, H), ``k`` and ``v`` (Nkv, H) float32
    views of the inputs (not rotated), ``p`` the cached tokens (the new row's position), ``t`` =
    ``p + 1`` the keys seen, ``length`` the presents' length, ``buf`` the pasts', ``start`` the
    first key seen (``local_window_size``), ``scale``, ``half`` the rotated half-width (0: no
    rotary) with ``c`` and ``s`` the angles' cos and sin rows at ``p``."""

    __slots__ = ("q", "k", "v", "p", "t", "length", "buf", "start", "scale", "half", "c", "s")


def case(a: dict, query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache,
         sin_cache):
    """The :class:`Case` of a decoding step the module serves, or None (see the module docstring)."""
    if not (_f32(query) and _f32(past_key) and _f32(past_value)) or query.shape[:2] != (1, 1):
        return None
    got = _rows(a, query, key, value, past_key, past_value, seqlens_k, total_sequence_length, 1)
    if got is None:
        return None
    q, k, v, h, t, total, buf = got
    q, k, v, p = q[0], k[0], v[0], t - 1
    if total == 1 or not 1 <= t <= total or p > buf:  # a prompt run, or lengths the general kernel refuses
        return None
    half = _rotary_half(a, cos_cache, sin_cache, h, p + 1)
    if half is None:
        return None
    c, s = (cos_cache[p], sin_cache[p]) if half else (None, None)
    window = a["window"]
    r = Case()
    r.q, r.k, r.v, r.p, r.t, r.length, r.buf = q, k, v, p, t, max(total, buf), buf
    r.start = max(0, t - window) if window > 0 else 0  # keys j with P - W < j <= P
    r.scale = a["scale"] or 1.0 / math.sqrt(h)
    r.half, r.c, r.s = half, c, s
    return r


class Chunk:
    """The geometry of S new rows of one sequence (:func:`chunk_case`): ``q`` (S, N, H), ``k`` and
    ``v`` (S, Nkv, H) float32 views of the inputs (not rotated), ``p`` the cached tokens (row
    ``s`` sits at position ``p + s``), ``t`` the keys after the step, ``length`` the presents'
    length, ``causal``, ``window`` (``local_window_size``; <= 0: none), ``scale``, ``half`` the
    rotated half-width (0: no rotary) with the whole ``cos`` and ``sin`` caches."""

    __slots__ = ("q", "k", "v", "p", "t", "length", "causal", "window", "scale", "half", "cos", "sin")


def chunk_case(a: dict, query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache,
               sin_cache):
    """The :class:`Chunk` of a run of one sequence (batch 1) whose rows are all real: a prompt
    (``S == total_sequence_length == seqlens_k + 1``, nothing cached) or S new tokens after
    ``P = seqlens_k + 1 - S`` cached ones (a decoding step: S = 1), float32 numpy arrays, the
    past given (possibly of length 0); None otherwise (a padded prompt, a batch, another dtype,
    lengths the general kernel refuses: it computes or names them).  The forms
    :func:`applies` excludes are the caller's to exclude, as are position_ids, attention_bias,
    head_sink and query_seqlens (the run reads them from the positions ``P + s``)."""
    if not (_f32(query) and _f32(past_key) and _f32(past_value)) or query.ndim != 3 or query.shape[0] != 1:
        return None
    s = int(query.shape[1])
    got = _rows(a, query, key, value, past_key, past_value, seqlens_k, total_sequence_length, s) if s else None
    if got is None:
        return None
    q, k, v, h, t, total, buf = got
    if not 1 <= t <= total or s > total or (s == total and t != s):
        return None  # lengths the general kernel refuses, or a padded prompt
    p = 0 if s == total else t - s
    length = max(total, buf)
    if p < 0 or p > buf or p + s > length:
        return None
    half = _rotary_half(a, cos_cache, sin_cache, h, p + s)
    if half is None:
        return None
    r = Chunk()
    r.q, r.k, r.v, r.p, r.t, r.length = q, k, v, p, t, length
    r.causal, r.window = bool(a["causal"]), a["window"]
    r.scale = a["scale"] or 1.0 / math.sqrt(h)
    r.half, r.cos, r.sin = half, cos_cache, sin_cache
    return r


def token_step(a: dict, query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache,
               sin_cache):
    """``(output, present_key, present_value)`` of one decoding step, or None (see the module docstring)."""
    g = case(a, query, key, value, past_key, past_value, seqlens_k, total_sequence_length, cos_cache, sin_cache)
    if g is None:
        return None
    n, nkv = a["n"], a["nkv"]
    q, k, v, p, t, length, buf = g.q, g.k, g.v, g.p, g.t, g.length, g.buf
    h = int(q.shape[1])
    if g.half:
        q, k = _rotate(q, g.c, g.s, g.half), _rotate(k, g.c, g.s, g.half)
    pk = np.empty((1, nkv, length, h), np.float32)
    pv = np.empty((1, nkv, length, h), np.float32)
    for out, past, new in ((pk, past_key, k), (pv, past_value, v)):
        out[0, :, :p] = past[0, :, :p]
        out[0, :, p] = new
        out[0, :, p + 1:] = past[0, :, p + 1:] if buf == length else 0  # a shared buffer's rows stay (gqa.py)
    group = n // nkv
    keys, vals = pk[0, :, g.start:t], pv[0, :, g.start:t]
    scores = np.matmul(q.reshape(nkv, group, h), keys.transpose(0, 2, 1)) * np.float32(g.scale)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs = e / e.sum(axis=-1, keepdims=True)
    y = np.matmul(probs, vals)
    return y.reshape(1, 1, n * h), pk, pv


def _rotate(x, c, s, half: int):
    """The first ``2 half`` features of each row of ``x`` rotated by halves (``rotate`` of attention.py)."""
    a, b = x[:, :half], x[:, half:2 * half]
    out = np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    return out if 2 * half == int(x.shape[1]) else np.concatenate([out, x[:, 2 * half:]], axis=-1)
