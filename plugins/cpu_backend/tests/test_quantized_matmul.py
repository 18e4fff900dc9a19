"""The cpu overrides of MatMulInteger and QLinearMatMul (overrides/quantization.py) against the
portable kernels (bit for bit) and onnxruntime (MatMulInteger exactly, QLinearMatMul within one
quantization step), over shapes, zero points per tensor and per column, uint8 / int8 operands,
constant and runtime B, and K on both sides of the float32 exactness bound (the bound crossed:
the product split along K into exact float32 parts, where one float32 product would have been
wrong; test_quantized_k_chunks.py has more).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402

from quantized_harness import (build, count_products, identical, onnxkit_outputs, portable_kernels,  # noqa: E402
                               three_ways, within_one_step)

from onnxkit_cpu.overrides import quantization as fast_module  # noqa: E402


@pytest.fixture(autouse=True, params=["vnni", "float32"])
def product_path(request, monkeypatch):
    """Each test twice: with the VNNI products where the host has them, and with them off (the
    float32 / K-split products of the hosts without AVX-512 VNNI)."""
    from onnxkit_cpu.compiled import quantized_vnni

    if request.param == "float32":
        monkeypatch.setattr(quantized_vnni, "ENABLED", False)
    elif quantized_vnni.get() is None:
        pytest.skip("no AVX-512 VNNI here: the float32 products run (the float32 case covers them)")
    return request.param

RNG = np.random.default_rng(3233)


def ints(dtype, shape, lo=None, hi=None):
    info = np.iinfo(dtype)
    return RNG.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dtype)


@pytest.fixture
def paths(monkeypatch):
    """Counts of products taken in float32 (``exact``) and handed to the portable kernel (``wide``);
    QLinearMatMul's VNNI product with its requantization fused (which bypasses ``exact_product``)
    counts as ``exact``."""
    seen = count_products(monkeypatch, fast_module)
    real = fast_module.vnni.product

    def fused(*args, **kwargs):
        if kwargs.get("requantized") is not None:
            seen["exact"] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(fast_module.vnni, "product", fused)
    return seen


CASES = [((3, 9, 64), (64, 64)), ((5, 7), (7, 3)), ((2, 3, 4, 16), (16, 8)), ((1, 300), (300, 2))]


@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("a_shape,b_shape", CASES)
@pytest.mark.parametrize("zps", ["none", "tensor", "column"])
@pytest.mark.parametrize("b_constant", [True, False])
def test_matmul_integer(a_type, b_type, a_shape, b_shape, zps, b_constant, paths):
    a, b = ints(a_type, a_shape), ints(b_type, b_shape)
    inputs = [a, b]
    if zps != "none":
        n = b_shape[1] if zps == "column" else 1
        inputs += [ints(a_type, ()), ints(b_type, (n,) if zps == "column" else ())]
    fast, ref, theirs = three_ways("MatMulInteger", inputs, opset=13, out_types=[TP.INT32],
                                   constants=(1, 3) if b_constant else ())
    identical(fast[0], ref[0])
    want = np.matmul(a.astype(np.int64) - (int(inputs[2]) if zps != "none" else 0),
                     b.astype(np.int64) - (inputs[3].astype(np.int64) if zps != "none" else 0))
    np.testing.assert_array_equal(fast[0], want)
    if not (a_type == np.int8 and b_type == np.uint8):
        np.testing.assert_array_equal(fast[0], theirs[0])
    assert paths["exact"] + paths["wide"] == 1


def test_matmul_integer_past_the_float32_bound_is_exact(paths):
    """K = 2048 of values near 255: sums near 1.1e8, past 2^24; a float32 product is off there."""
    a = ints(np.uint8, (4, 2048), 200, 255)
    b = ints(np.uint8, (2048, 3), 200, 255)
    fast, ref, theirs = three_ways("MatMulInteger", [a, b], opset=13, out_types=[TP.INT32], constants=(1,))
    want = a.astype(np.int64) @ b.astype(np.int64)
    np.testing.assert_array_equal(fast[0], want)
    np.testing.assert_array_equal(fast[0], theirs[0])
    identical(fast[0], ref[0])
    assert paths == {"exact": 1, "wide": 0}      # split along K (k_chunks), exact
    assert not np.array_equal((a.astype(np.float32) @ b.astype(np.float32)).astype(np.int64), want)


def test_matmul_integer_bound_uses_the_weights_own_range(paths):
    """K = 1024 with small weights (|b - zp| <= 8): 255 * 8 * 1024 < 2^24, so float32, exactly."""
    a = ints(np.uint8, (6, 1024))
    b = ints(np.int8, (1024, 5), -8, 8)
    fast, ref, _ = three_ways("MatMulInteger", [a, b, np.uint8(3), np.int8(0)], opset=13, out_types=[TP.INT32],
                              constants=(1, 3), ort=False)
    identical(fast[0], ref[0])
    np.testing.assert_array_equal(fast[0], (a.astype(np.int64) - 3) @ b.astype(np.int64))
    assert paths == {"exact": 1, "wide": 0}


def test_matmul_integer_runtime_b_changing_between_runs():
    """B a graph input: what the override derived from one B is not reused for the next."""
    a = ints(np.uint8, (3, 8))
    b1, b2 = ints(np.int8, (8, 4)), ints(np.int8, (8, 4))
    data, _ = build("MatMulInteger", [a, b1], opset=13, out_types=[TP.INT32])
    from onnxkit.runtime import InferenceSession

    s = InferenceSession(data, validate=False)
    for b in (b1, b2, b1):
        got = s.run(None, {"x0": a, "x1": b})[0]
        np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))
    b3 = b1.copy()
    got = s.run(None, {"x0": a, "x1": b3})[0]
    b3[0, 0] += 1          # the same object changed in place between runs
    got2 = s.run(None, {"x0": a, "x1": b3})[0]
    np.testing.assert_array_equal(got2, a.astype(np.int64) @ b3.astype(np.int64))
    assert not np.array_equal(got, got2)


def test_matmul_integer_per_row_a_zero_point_and_errors_match_the_portable_kernel(paths):
    a, b = ints(np.uint8, (4, 6)), ints(np.int8, (6, 3))
    fast, ref, _ = three_ways("MatMulInteger", [a, b, ints(np.uint8, (4,))], opset=13, out_types=[TP.INT32], ort=False)
    identical(fast[0], ref[0])
    assert paths["exact"] == 0
    data, feed = build("MatMulInteger", [a, ints(np.int8, (5, 3))], opset=13, out_types=[TP.INT32])
    from onnxkit.errors import OnnxkitError

    msgs = []
    for portable in (False, True):
        try:
            with portable_kernels("MatMulInteger") if portable else _Nothing():
                with pytest.raises(OnnxkitError) as info:
                    onnxkit_outputs(data, feed)
        finally:
            pass
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("a_shape,b_shape", CASES)
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("opset", [10, 21])
def test_qlinear_matmul(a_type, b_type, a_shape, b_shape, per_column, opset, paths):
    a, b = ints(a_type, a_shape), ints(b_type, b_shape)
    n = b_shape[1] if per_column else 1
    shape = (n,) if per_column else ()
    k = a_shape[-1]
    a_scale, b_scale = np.float32(0.02), RNG.uniform(0.005, 0.02, shape).astype(np.float32)
    y_scale = np.float32(0.02 * 0.01 * 40 * np.sqrt(k))
    a_zp = ints(a_type, (), -10 if a_type == np.int8 else 100, 10 if a_type == np.int8 else 140)
    b_zp = ints(b_type, shape, -5 if b_type == np.int8 else 120, 5 if b_type == np.int8 else 130)
    y_zp = ints(a_type, (), -3 if a_type == np.int8 else 125, 3 if a_type == np.int8 else 130)
    inputs = [a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp]
    out = TP.INT8 if a_type == np.int8 else TP.UINT8
    use_ort = not (opset == 10 and per_column)   # onnxruntime's QLinearMatMul-10 takes per-tensor B only
    fast, ref, theirs = three_ways("QLinearMatMul", inputs, opset=opset, out_types=[out],
                                   constants=(1, 2, 3, 4, 5, 6, 7), ort=use_ort)
    identical(fast[0], ref[0])
    assert paths["exact"] == 1
    if use_ort:
        within_one_step(fast[0], theirs[0])
    # saturation is reached in these cases at both ends or not: the output spans a range
    assert fast[0].size < 16 or np.ptp(fast[0].astype(np.int64)) > 0


def test_qlinear_matmul_past_the_bound(paths):
    a = ints(np.uint8, (3, 2048), 200, 255)
    b = ints(np.uint8, (2048, 4), 200, 255)
    inputs = [a, np.float32(0.01), np.uint8(0), b, np.float32(0.01), np.uint8(0), np.float32(120.0), np.uint8(0)]
    fast, ref, theirs = three_ways("QLinearMatMul", inputs, opset=10, out_types=[TP.UINT8], constants=(3,))
    identical(fast[0], ref[0])
    within_one_step(fast[0], theirs[0])
    assert paths == {"exact": 1, "wide": 0}      # split along K (k_chunks), exact


def test_matmul_integer_constant_b_with_a_changing_zero_point():
    """B an initializer, its per-column zero point a graph input that changes between runs."""
    from onnxkit.runtime import InferenceSession

    a, b = ints(np.uint8, (3, 8)), ints(np.int8, (8, 4))
    data, _ = build("MatMulInteger", [a, b, np.uint8(0), np.zeros(4, np.int8)], opset=13, out_types=[TP.INT32],
                    constants=(1,))
    s = InferenceSession(data, validate=False)
    zb = np.zeros(4, np.int8)
    for step in range(3):
        if step == 2:
            zb[1] = -9             # the same array, written in place
        else:
            zb = ints(np.int8, (4,), -20, 20)
        got = s.run(None, {"x0": a, "x2": np.uint8(5), "x3": zb})[0]
        np.testing.assert_array_equal(got, (a.astype(np.int64) - 5) @ (b.astype(np.int64) - zb.astype(np.int64)))
