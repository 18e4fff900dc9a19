"""The portable transformer kernels (Attention, RotaryEmbedding, TensorScatter,
CausalConvWithState, LinearAttention, SwiGLU) on both backends.

Each case runs on ``cpu`` (numpy) and ``gpu`` (torch; its CPU device without CUDA), is
checked against onnx's reference implementation, and on gpu must run on torch, not on the cpu
fallback.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("torch")
from one_node import BACKENDS, assert_close, build, outputs, reference  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402

RNG = np.random.default_rng(2323)


def check(backend, op, opset, inputs, attrs=None, n_out=1, rtol=1e-5, atol=1e-6) -> list:
    """The outputs on ``backend`` (on gpu, not a fallback), compared with onnx.reference."""
    got = outputs(backend, op, opset, inputs, attrs, n_out)
    assert_close(got, reference(op, opset, inputs, attrs, n_out), rtol, atol)
    return got


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# -- Attention ---------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_3d_grouped_heads_with_past_and_a_short_bool_mask(backend):
    q, k, v = randn(2, 3, 8 * 4), randn(2, 3, 2 * 4), randn(2, 3, 2 * 5)
    past_k, past_v = randn(2, 2, 4, 4), randn(2, 2, 4, 5)
    mask = RNG.random((3, 5)) > 0.3                    # 5 of the 7 keys: the last two padded as masked
    attrs = {"q_num_heads": 8, "kv_num_heads": 2}
    y, pk, pv = check(backend, "Attention", 23, [q, k, v, mask, past_k, past_v], attrs, n_out=3)
    assert pk.shape == (2, 2, 7, 4) and pv.shape == (2, 2, 7, 5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_attention_causal_softcap_scale_and_every_qk_output_mode(backend, mode):
    q, k, v = randn(1, 2, 4, 6), randn(1, 2, 4, 6), randn(1, 2, 4, 3)
    past_k, past_v = randn(1, 2, 2, 6), randn(1, 2, 2, 3)
    additive = randn(4, 6)
    attrs = {"is_causal": 1, "softcap": 2.0, "scale": 0.3, "qk_matmul_output_mode": mode}
    if mode:
        check(backend, "Attention", 23, [q, k, v, additive, past_k, past_v], attrs, n_out=4)
        return
    # mode 0 is the product itself, before the softcap (onnx.reference gives the softcapped one
    # there: its mode-0 output is compared on the same node without softcap)
    y = check(backend, "Attention", 23, [q, k, v, additive, past_k, past_v], attrs, n_out=3)
    model, feeds = build("Attention", 23, [q, k, v, additive, past_k, past_v], attrs, 4)
    got = InferenceSession(model, backend, validate=False).run(None, feeds)
    np.testing.assert_array_equal(got[0], y[0])
    raw = check(backend, "Attention", 23, [q, k, v, additive, past_k, past_v], dict(attrs, softcap=0.0), n_out=4)[3]
    np.testing.assert_allclose(got[3], raw, rtol=1e-6)
    assert np.abs(got[3]).max() > 2.0                  # not capped


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_fully_masked_rows_give_zeros_and_softmax_precision(backend):
    q, k, v = randn(1, 1, 3, 4, dtype=np.float16), randn(1, 1, 3, 4, dtype=np.float16), randn(1, 1, 3, 4,
                                                                                             dtype=np.float16)
    mask = np.array([[True, False, True], [False, False, False], [True, True, True]])
    y = check(backend, "Attention", 23, [q, k, v, mask], {"softmax_precision": 1}, rtol=2e-3, atol=2e-3)[0]
    assert not y[0, 0, 1].any()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_24_nonpad_kv_seqlen(backend, causal):
    q, k, v = randn(2, 2, 3, 4), randn(2, 2, 6, 4), randn(2, 2, 6, 4)
    lens = np.array([5, 3], np.int64)
    check(backend, "Attention", 24, [q, k, v, None, None, None, lens], {"is_causal": causal})


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("window", [(1, -1), (-1, 1), (2, 0)])
def test_attention_25_windows(backend, window):
    q, k, v = randn(1, 2, 5, 4), randn(1, 2, 5, 4), randn(1, 2, 5, 4)
    attrs = {"left_window_size": window[0], "right_window_size": window[1]}
    check(backend, "Attention", 25, [q, k, v], attrs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attention_refusals_name_the_node(backend):
    q = randn(1, 2, 3, 4)
    with pytest.raises(OnnxkitError, match="'n0'.*past_key and past_value"):
        check(backend, "Attention", 23, [q, q, q, None, randn(1, 2, 1, 4)])
    with pytest.raises(OnnxkitError, match="'n0'.*must not be given for 4-D"):
        check(backend, "Attention", 25, [q, q, q], {"q_num_heads": 2, "kv_num_heads": 2})
    with pytest.raises(OnnxkitError, match="'n0'.*cannot attend"):
        check(backend, "Attention", 23, [randn(1, 3, 3, 4), q, q])


# -- RotaryEmbedding, TensorScatter --------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding(backend, interleaved):
    x4 = randn(2, 3, 5, 8)                                 # (B, H, S, D)
    cos, sin = randn(10, 3), randn(10, 3)                  # partial rotation: 6 of the 8
    pid = RNG.integers(0, 10, (2, 5)).astype(np.int64)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": 6}
    check(backend, "RotaryEmbedding", 23, [x4, cos, sin, pid], attrs)
    x3 = randn(2, 5, 3 * 8)
    check(backend, "RotaryEmbedding", 23, [x3, randn(2, 5, 4), randn(2, 5, 4)],
          {"interleaved": interleaved, "num_heads": 3})
    with pytest.raises(OnnxkitError, match="'n0'.*outside the caches"):
        check(backend, "RotaryEmbedding", 23, [x4, cos, sin, pid + 10], attrs)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter(backend, mode):
    cache, update = randn(3, 2, 6, 4), randn(3, 2, 2, 4)
    idx = np.array([0, 4, 5] if mode == "circular" else [0, 4, 2], np.int64)
    check(backend, "TensorScatter", 24, [cache, update, idx], {"mode": mode})
    check(backend, "TensorScatter", 24, [randn(2, 5, 3), randn(2, 5, 2), None], {"mode": mode, "axis": -1})
    if mode == "linear":
        with pytest.raises(OnnxkitError, match="'n0'.*exceeds"):
            check(backend, "TensorScatter", 24, [cache, update, np.array([0, 5, 1], np.int64)])


# -- CausalConvWithState, LinearAttention, SwiGLU --------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("activation", ["none", "silu"])
def test_causal_conv_with_state(backend, activation):
    x, w, b = randn(2, 3, 7), randn(3, 1, 4), randn(3)
    check(backend, "CausalConvWithState", 27, [x, w, b, randn(2, 3, 3)], {"activation": activation}, n_out=2)
    check(backend, "CausalConvWithState", 27, [x, randn(3, 1, 1)], {"activation": activation}, n_out=2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
def test_linear_attention(backend, rule):
    b, t, hq, hk, dk, dv = 2, 4, 4, 2, 3, 5
    q, k, v = randn(b, t, hq * dk), randn(b, t, hk * dk), randn(b, t, hk * dv)
    decay = -np.abs(randn(b, t, hk)) if rule.startswith("gated") else None
    beta = np.abs(randn(b, t, hk)) if "delta" in rule else None
    inputs = [q, k, v, randn(b, hk, dk, dv), decay, beta]
    while inputs[-1] is None:
        inputs.pop()
    check(backend, "LinearAttention", 27, inputs, {"update_rule": rule, "q_num_heads": hq, "kv_num_heads": hk},
          n_out=2, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_swiglu(backend):
    check(backend, "SwiGLU", 28, [randn(3, 4), randn(3, 4)], {"alpha": 1.5})
    with pytest.raises(OnnxkitError, match="'n0'.*same shape"):
        check(backend, "SwiGLU", 28, [randn(3, 4), randn(3, 5)])
