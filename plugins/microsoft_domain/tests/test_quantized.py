"""QLinearAdd, QLinearMul, QLinearGlobalAveragePool and QGemm, one node each, against onnxruntime
(8-bit results within one quantization step: onnxruntime's fixed-point paths may round a tie
differently)."""

from __future__ import annotations

import numpy as np
import pytest

from ms_harness import build, run_onnxkit, run_ort

RNG = np.random.default_rng(5)


def q8(shape, dtype):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def close_q(op, inputs, attrs=None, step=1):
    model, feed = build(op, inputs, attrs)
    [want] = run_ort(model, feed)
    for backend in ("cpu", "gpu"):
        [got] = run_onnxkit(model, feed, backend)
        assert got.dtype == want.dtype and got.shape == want.shape, (backend, got.dtype, got.shape, want.shape)
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        assert diff.max() <= step, (op, backend, diff.max())
    return want


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((3, 1), (1, 5))])
def test_qlinear_binary(op, dtype, shapes):
    zp = lambda v: np.array(v, dtype)  # noqa: E731
    s = lambda v: np.array(v, np.float32)  # noqa: E731
    a, b = q8(shapes[0], dtype), q8(shapes[1], dtype)
    zc = 128 if dtype == np.uint8 else 0
    close_q(op, [a, s(0.05), zp(3), b, s(0.02), zp(-2 if dtype == np.int8 else 7), s(0.08 if op == "QLinearAdd" else 1.5),
                 zp(zc)])


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(dtype, channels_last):
    x = q8((2, 3, 5, 4), dtype)
    close_q("QLinearGlobalAveragePool", [x, np.array(0.1, np.float32), np.array(2, dtype), np.array(0.05, np.float32),
                                         np.array(1, dtype)], {"channels_last": channels_last})


@pytest.mark.parametrize("quantized_out", [True, False])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("attrs", [{}, {"transB": 1, "alpha": 0.5}])
def test_qgemm(quantized_out, per_column, attrs):
    m, k, n = 3, 8, 5
    a = q8((m, k), np.uint8)
    b = q8((n, k) if attrs.get("transB") else (k, n), np.int8)
    bs = (RNG.random(n).astype(np.float32) * 0.02 + 0.01) if per_column else np.array(0.02, np.float32)
    bz = np.zeros(n, np.int8) if per_column else np.array(0, np.int8)
    c = RNG.integers(-500, 500, (n,)).astype(np.int32)
    tail = [np.array(0.5, np.float32), np.array(128, np.uint8)] if quantized_out else []
    out = close_q("QGemm", [a, np.array(0.03, np.float32), np.array(120, np.uint8), b, bs, bz, c, *tail], attrs,
                  step=1 if quantized_out else 1e-4)
    assert out.dtype == (np.uint8 if quantized_out else np.float32)
