"""Attention, MultiHeadAttention, RotaryEmbedding, GroupQueryAttention and MatMulNBits, one node
each, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from ms_harness import check, rand

RNG = np.random.default_rng(11)
B, S, D, N = 2, 5, 16, 2


def _mask(kind, p=0):
    t = p + S
    if kind is None:
        return None
    if kind == "lengths":
        return np.array([t, t - 2], np.int32)
    if kind == "ends_starts":
        return np.array([t, t - 1, 0, 1], np.int32)
    if kind == "2d":
        m = np.ones((B, t), np.int32)
        m[1, -2:] = 0
        return m
    if kind == "3d":
        return (RNG.random((B, S, t)) < 0.8).astype(np.int32)
    raise AssertionError(kind)


@pytest.mark.parametrize("mask", [None, "lengths", "ends_starts", "2d", "3d"])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention(mask, causal):
    x, w, bias = rand(RNG, (B, S, D)), rand(RNG, (D, 3 * D), scale=0.3), rand(RNG, (3 * D,))
    check("Attention", [x, w, bias, _mask(mask)], {"num_heads": N, "unidirectional": causal}, rtol=1e-4, atol=1e-5)


def test_attention_past_present_bias_and_sizes():
    x, w, bias = rand(RNG, (B, S, D)), rand(RNG, (D, 3 * D), scale=0.3), rand(RNG, (3 * D,))
    past = rand(RNG, (2, B, N, 3, D // N))
    check("Attention", [x, w, bias, _mask("2d", 3), past], {"num_heads": N, "unidirectional": 1}, n_out=2,
          rtol=1e-4, atol=1e-5)
    check("Attention", [x, w, bias, _mask("lengths"), None, rand(RNG, (1, N, S, S))], {"num_heads": N},
          rtol=1e-4, atol=1e-5)
    w2, b2 = rand(RNG, (D, 8 + 8 + 12), scale=0.3), rand(RNG, (28,))
    check("Attention", [x, w2, b2], {"num_heads": 4, "qkv_hidden_sizes": [8, 8, 12], "scale": 0.3},
          rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["self", "cross_bias_mask", "bnsh_kv", "past", "causal_attn_bias"])
def test_multi_head_attention(case):
    q = rand(RNG, (B, S, D))
    attrs = {"num_heads": N}
    if case == "self":
        inputs = [q, rand(RNG, (B, S, D)), rand(RNG, (B, S, D))]
    elif case == "cross_bias_mask":
        m = np.ones((B, 7), np.int32)
        m[0, -3:] = 0
        inputs = [q, rand(RNG, (B, 7, D)), rand(RNG, (B, 7, D)), rand(RNG, (3 * D,)), m]
    elif case == "bnsh_kv":
        inputs = [q, rand(RNG, (B, N, 7, D // N)), rand(RNG, (B, N, 7, D // N)), None,
                  np.array([7, 4], np.int32)]
    elif case == "past":
        inputs = [q, rand(RNG, (B, S, D)), rand(RNG, (B, S, D)), rand(RNG, (3 * D,)), None, None,
                  rand(RNG, (B, N, 3, D // N)), rand(RNG, (B, N, 3, D // N))]
        attrs["unidirectional"] = 1
        check("MultiHeadAttention", inputs, attrs, n_out=3, rtol=1e-4, atol=1e-5)
        return
    else:
        inputs = [q, rand(RNG, (B, S, D)), rand(RNG, (B, S, D)), None, None, rand(RNG, (B, N, S, S))]
        attrs.update(unidirectional=1, scale=0.2)
    check("MultiHeadAttention", inputs, attrs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("layout", ["bsd", "bnsh"])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("pids", ["offset", "bs"])
def test_rotary_embedding(layout, interleaved, pids):
    h = 8
    x = rand(RNG, (B, S, N * h)) if layout == "bsd" else rand(RNG, (B, N, S, h))
    pos = np.array([3], np.int64) if pids == "offset" else RNG.integers(0, 16, (B, S)).astype(np.int64)
    ang = RNG.random((16, h // 2)).astype(np.float32) * 6
    check("RotaryEmbedding", [x, pos, np.cos(ang), np.sin(ang)], {"interleaved": interleaved}, rtol=1e-5, atol=1e-5)


def test_rotary_embedding_partial():
    x = rand(RNG, (B, S, N * 8))
    ang = RNG.random((16, 2)).astype(np.float32) * 6
    check("RotaryEmbedding", [x, np.array([0], np.int64), np.cos(ang), np.sin(ang)],
          {"num_heads": N, "rotary_embedding_dim": 4}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lens", [[S, S], [S, 3]])
def test_group_query_attention_prompt(lens):
    n, nkv, h = 4, 2, 8
    q, k, v = rand(RNG, (B, S, n * h)), rand(RNG, (B, S, nkv * h)), rand(RNG, (B, S, nkv * h))
    seqlens = np.array(lens, np.int32) - 1
    check("GroupQueryAttention", [q, k, v, None, None, seqlens, np.array(S, np.int32)],
          {"num_heads": n, "kv_num_heads": nkv}, n_out=3, rtol=1e-4, atol=1e-5, outputs=[0])


def test_group_query_attention_with_past():
    n, nkv, h, p = 4, 2, 8, 3
    q, k, v = rand(RNG, (B, 1, n * h)), rand(RNG, (B, 1, nkv * h)), rand(RNG, (B, 1, nkv * h))
    pk, pv = rand(RNG, (B, nkv, p, h)), rand(RNG, (B, nkv, p, h))
    check("GroupQueryAttention", [q, k, v, pk, pv, np.array([p, p], np.int32), np.array(p + 1, np.int32)],
          {"num_heads": n, "kv_num_heads": nkv}, n_out=3, rtol=1e-4, atol=1e-5)


def _pack(q, bits):
    per = 8 // bits
    q = q.reshape(q.shape[:-1] + (q.shape[-1] // per, per)).astype(np.uint8)
    return np.bitwise_or.reduce(q << (np.arange(per, dtype=np.uint8) * bits), axis=-1).astype(np.uint8)


# (onnxruntime's CPU kernel refuses 8-bit weights with float zero points)
@pytest.mark.parametrize("bits,zp", [(b, z) for b in (2, 4, 8) for z in ("none", "packed", "float")
                                     if (b, z) != (8, "float")])
@pytest.mark.parametrize("k", [32, 40])
def test_matmul_nbits(bits, zp, k):
    n, block = 6, 16
    kb = -(-k // block)
    q = RNG.integers(0, 2 ** bits, (n, kb, block))
    b = _pack(q, bits)
    scales = (RNG.random((n, kb)) * 0.1 + 0.01).astype(np.float32)
    zps = None
    if zp == "packed":
        z = RNG.integers(0, 2 ** bits, (n, -(-kb * bits // 8) * (8 // bits)))
        zps = _pack(z, bits)
    elif zp == "float":
        zps = RNG.random((n, kb)).astype(np.float32) * 2 ** bits
    a = rand(RNG, (3, 2, k))
    bias = rand(RNG, (n,))
    check("MatMulNBits", [a, b, scales.reshape(-1), zps if zps is None else zps.reshape(-1), None, bias],
          {"K": k, "N": n, "bits": bits, "block_size": block}, rtol=1e-4, atol=1e-4)
