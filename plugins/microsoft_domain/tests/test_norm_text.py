"""The fused normalizations, Tokenizer, MurmurHash3 and CDist, one node each, against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from ms_harness import check, rand

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("skip_shape,with_beta,with_bias,eps", [
    ((2, 3, 8), True, True, None), ((1, 3, 8), False, True, 1e-5), ((3, 8), True, False, None),
    ((2, 3, 8), False, False, 1e-3)])
def test_skip_layer_normalization(skip_shape, with_beta, with_bias, eps):
    x, skip, gamma = rand(RNG, (2, 3, 8)), rand(RNG, skip_shape), rand(RNG, (8,))
    beta, bias = (rand(RNG, (8,)) if f else None for f in (with_beta, with_bias))
    attrs = {} if eps is None else {"epsilon": eps}
    check("SkipLayerNormalization", [x, skip, gamma, beta, bias], attrs, n_out=4, rtol=1e-5, atol=1e-5)
    check("SkipSimplifiedLayerNormalization", [x, skip, gamma, bias], attrs, n_out=4, rtol=1e-5, atol=1e-5)


def test_skip_layer_normalization_float16():
    x, skip, gamma, beta = (rand(RNG, s, np.float16) for s in ((2, 4, 16), (2, 4, 16), (16,), (16,)))
    check("SkipLayerNormalization", [x, skip, gamma, beta], n_out=1, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("segments,mask,pids", [(True, True, None), (False, False, None), (True, True, "1S"),
                                               (True, False, "BS")])
def test_embed_layer_normalization(segments, mask, pids):
    b, s, h = 3, 5, 8
    ids = RNG.integers(0, 12, (b, s)).astype(np.int32)
    seg = RNG.integers(0, 2, (b, s)).astype(np.int32) if segments else None
    word, pos, segment = rand(RNG, (12, h)), rand(RNG, (16, h)), rand(RNG, (2, h)) if segments else None
    gamma, beta = rand(RNG, (h,)), rand(RNG, (h,))
    m = (RNG.random((b, s)) < 0.7).astype(np.int32) if mask else None
    p = None if pids is None else RNG.integers(0, 16, (1 if pids == "1S" else b, s)).astype(np.int32)
    check("EmbedLayerNormalization", [ids, seg, word, pos, segment, gamma, beta, m, p], {"epsilon": 1e-5},
          n_out=3, rtol=1e-5, atol=1e-5)


def test_embed_layer_normalization_index_out_of_range_is_named():
    from ms_harness import build, run_onnxkit
    from onnxkit.errors import OnnxkitError

    ids = np.array([[0, 12]], np.int32)
    model, feed = build("EmbedLayerNormalization", [ids, None, rand(RNG, (12, 4)), rand(RNG, (8, 4)), None,
                                                    rand(RNG, (4,)), rand(RNG, (4,))])
    with pytest.raises(OnnxkitError, match="input_ids holds an index outside"):
        run_onnxkit(model, feed, "cpu")


TEXT = np.array(["The quick brown fox.", "jumps, over the lazy-dog!", "", "  héllo   wörld  ", "a"], dtype=object)
SKL_SEPARATORS = [" ", "[.]", "\\?", ",", ";", ":", "!", "\\(", "\\)", "\n", '"', "'", "-", "\\[", "\\]", "@"]


@pytest.mark.parametrize("attrs", [
    {"mark": 0, "pad_value": "#", "mincharnum": 1, "separators": [" "]},
    {"mark": 1, "pad_value": "#", "mincharnum": 1, "separators": SKL_SEPARATORS},
    {"mark": 0, "pad_value": "", "mincharnum": 3, "separators": SKL_SEPARATORS},
    {"mark": 0, "pad_value": "#", "mincharnum": 1, "tokenexp": "[a-zA-Z0-9_]+"},
    {"mark": 1, "pad_value": "#", "mincharnum": 2, "tokenexp": "\\b\\w\\w+\\b"},
    {"mark": 0, "pad_value": "#", "mincharnum": 1, "separators": [""]},
])
def test_tokenizer(attrs):
    check("Tokenizer", [TEXT], attrs, host_only=True)
    check("Tokenizer", [TEXT[:4].reshape(2, 2)], attrs, host_only=True)


def test_tokenizer_without_any_token():
    check("Tokenizer", [np.array(["", " "], dtype=object)], {"mark": 1, "pad_value": "#", "mincharnum": 1,
                                                             "separators": [" "]}, host_only=True)


@pytest.mark.parametrize("x", [np.array(["a", "hello", "", "héllo wörld", "12345678"], dtype=object),
                               np.array([[1, -2, 3], [0, 7, 2**31 - 1]], np.int32),
                               np.array([1, -2, 2**40], np.int64), np.array([1, 2**32 - 1], np.uint32),
                               np.array([3, 2**63], np.uint64), np.array([1.5, -2, 0], np.float32),
                               np.array([1.5, -2, 1e300], np.float64)], ids=lambda x: str(x.dtype))
@pytest.mark.parametrize("attrs", [{}, {"positive": 0, "seed": 42}, {"positive": 1, "seed": 7}])
def test_murmur_hash3(x, attrs):
    check("MurmurHash3", [x], attrs, host_only=True)


@pytest.mark.parametrize("metric", ["sqeuclidean", "euclidean"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cdist(metric, dtype):
    a, b = rand(RNG, (6, 4), dtype), rand(RNG, (5, 4), dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    check("CDist", [a, b], {"metric": metric}, rtol=tol, atol=tol)
    check("CDist", [a, a], {"metric": metric}, rtol=tol, atol=1e-3 if dtype == np.float32 else 1e-6)
