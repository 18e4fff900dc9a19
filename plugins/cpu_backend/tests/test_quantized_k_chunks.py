"""The integer products split along K where one float32 product would not be exact
(``overrides/quantization.py``: :func:`k_chunks`, :func:`chunked_matmul`; ``quantized_conv.py``'s
``exact_conv``; ``quantized_microsoft.py``'s QGemm).

Each case is past the float32 bound (``amax * max L1 > 2^24``), so the fast path splits K; its
result is compared with an int64 product written here (exact), with the portable kernel (bit for
bit, the float64 reference) and with onnxruntime 1.32 (integer outputs exactly, requantized
outputs within one step: its float32 requantization).  Near misses: zero points at the ends of
their types (``amax`` = 255 for uint8 at 0 or 255, 128 / 127 for int8's), requantization
multipliers that put results on rounding ties (``acc * 0.5``: every odd sum a tie, rounded half to
even) and saturation at both ends.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402

from quantized_harness import count_products, identical, three_ways, within_one_step  # noqa: E402

from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.overrides import quantization as fast_matmul  # noqa: E402
from onnxkit_cpu.overrides import quantized_conv as fast_conv  # noqa: E402
from onnxkit_cpu.overrides.quantization import FLOAT32_EXACT, k_chunks  # noqa: E402

needs_numba = pytest.mark.skipif(not compiled.available(), reason="numba is not installed (the portable kernel runs)")


@pytest.fixture(autouse=True)
def float32_products(monkeypatch):
    """These tests are the float32 / K-split products' (the hosts without AVX-512 VNNI): the VNNI
    product (test_quantized_vnni.py) is switched off while they plan."""
    from onnxkit_cpu.compiled import quantized_vnni

    monkeypatch.setattr(quantized_vnni, "ENABLED", False)


def ints(dtype, shape, lo=None, hi=None):
    """Random integers of ``dtype`` seeded by the call's arguments (the same values whichever tests run)."""
    info = np.iinfo(dtype)
    lo, hi = info.min if lo is None else lo, info.max if hi is None else hi
    rng = np.random.default_rng(zlib.crc32(repr((np.dtype(dtype).str, shape, lo, hi)).encode()))
    return rng.integers(lo, hi + 1, shape).astype(dtype)


@pytest.mark.parametrize("amax", [1, 127, 128, 255])
def test_k_chunks_are_within_the_bound_and_greedy(amax):
    """Every range fits (``amax * column L1 <= 2^24`` for every column), the ranges tile 0..K, and
    no range could take the next row (the split is the greedy one: as few ranges as that allows)."""
    cols = np.random.default_rng(1).integers(-255, 256, (3000, 7)).astype(np.float32)
    cols[100] = 255.0                          # a row of the largest magnitude
    l1 = float(np.abs(cols).sum(axis=0).max())
    bounds = k_chunks(cols, l1, amax)
    assert bounds[0] == 0 and bounds[-1] == cols.shape[0] and all(b > a for a, b in zip(bounds, bounds[1:]))
    absolute = np.abs(cols.astype(np.float64))
    for s, e in zip(bounds[:-1], bounds[1:]):
        assert amax * absolute[s:e].sum(axis=0).max() <= FLOAT32_EXACT
        if e < cols.shape[0]:
            assert amax * absolute[s:e + 1].sum(axis=0).max() > FLOAT32_EXACT
    if amax * l1 <= FLOAT32_EXACT:
        assert bounds == (0, cols.shape[0])
    else:
        assert len(bounds) > 2


@pytest.mark.parametrize("k,n,seed", [(200, 3, 0), (257, 1, 1), (1000, 40, 2), (5000, 2, 3)])
def test_k_chunks_equal_a_row_by_row_greedy_split(k, n, seed):
    """The blocked search equals the plain greedy split (rows added while every column fits),
    whatever the block boundaries (K below, just above and far above the block)."""
    rng = np.random.default_rng(seed)
    cols = (rng.integers(-255, 256, (k, n)) * (rng.random((k, 1)) < 0.7)).astype(np.float32)
    amax = 255
    want, running = [0], np.zeros(n)
    for r in range(k):
        row = np.abs(cols[r].astype(np.float64))
        if (amax * (running + row) > FLOAT32_EXACT).any():
            want.append(r)
            running = np.zeros(n)
        running += row
    want.append(k)
    l1 = float(np.abs(cols).sum(axis=0).max())
    got = k_chunks(cols, l1, amax)
    assert got == (tuple(want) if len(want) > 2 else (0, k))


@pytest.mark.parametrize("a_type,a_zp", [(np.uint8, 0), (np.uint8, 255), (np.int8, -128), (np.int8, 127)])
@pytest.mark.parametrize("b_type", [np.int8, np.uint8])
@pytest.mark.parametrize("per_column", [False, True])
def test_matmul_integer_split_k_is_exact(a_type, a_zp, b_type, per_column, monkeypatch):
    """K = 1500 of full-range values: sums past 2^24 (a float32 product is off), the split exact."""
    paths = count_products(monkeypatch, fast_matmul)
    k, n = 1500, 6
    info_a = np.iinfo(a_type)
    a = ints(a_type, (2, 3, k), info_a.min, info_a.max)
    a[0, 0] = info_a.max if a_zp == info_a.min else info_a.min    # the largest |a - a_zp| met
    b = ints(b_type, (k, n))
    b_zp = ints(b_type, (n,)) if per_column else np.array(np.iinfo(b_type).min + 3, b_type)
    inputs = [a, b, np.array(a_zp, a_type), b_zp]
    fast, ref, theirs = three_ways("MatMulInteger", inputs, opset=13, out_types=[TP.INT32], constants=(1, 3))
    want = (a.astype(np.int64) - a_zp) @ (b.astype(np.int64) - b_zp.astype(np.int64))
    np.testing.assert_array_equal(fast[0], want)
    identical(fast[0], ref[0])
    np.testing.assert_array_equal(fast[0], theirs[0])
    assert paths == {"exact": 1, "wide": 0}
    prepared = fast_matmul.CenteredB(b, b_zp)
    assert len(prepared.chunks(max(a_zp - info_a.min, info_a.max - a_zp))) > 2


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
@pytest.mark.parametrize("y_type", [np.uint8, np.int8])
def test_qlinear_matmul_split_k_ties_and_saturation(y_type, monkeypatch):
    """``acc * 0.5 + y_zp``: odd sums are ties (half to even); large sums saturate at both ends."""
    paths = count_products(monkeypatch, fast_matmul)
    k = 1200
    a = ints(y_type, (4, k))                          # onnxruntime: A and Y of one type
    b = ints(np.int8, (k, 9))
    a[0] = 1                                        # row 0: the column sums of B
    b[:, 1:3] = 0
    b[0, 1], b[0, 2] = 7, 5                         # row 0, columns 1 and 2: 3.5 and 2.5 (ties) before the zero point
    inputs = [a, np.float32(1.0), np.array(0, y_type), b, np.float32(1.0), np.int8(0), np.float32(2.0),
              np.array(3 if y_type == np.uint8 else -5, y_type)]
    fast, ref, theirs = three_ways("QLinearMatMul", inputs, opset=10, out_types=[TP.UINT8 if y_type == np.uint8
                                                                                  else TP.INT8], constants=(3,))
    acc = a.astype(np.int64) @ b.astype(np.int64)
    info = np.iinfo(y_type)
    want = np.clip(np.rint(acc * 0.5 + float(inputs[-1])), info.min, info.max).astype(y_type)
    np.testing.assert_array_equal(fast[0], want)
    identical(fast[0], ref[0])
    within_one_step(fast[0], theirs[0])
    assert (want == info.min).any() and (want == info.max).any()       # saturation met at both ends
    zp = int(inputs[-1])                                               # ties to even: 3.5 + zp, 2.5 + zp
    assert (int(fast[0][0, 1]), int(fast[0][0, 2])) == ((6, 6) if zp == 3 else (-2, -2))
    assert paths == {"exact": 1, "wide": 0}


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
@pytest.mark.parametrize("x_type,x_zp", [(np.uint8, 0), (np.uint8, 255), (np.int8, -128)])
@pytest.mark.parametrize("group", [1, 2])
def test_qlinear_conv_split_k_per_channel(x_type, x_zp, group, monkeypatch):
    """160 channels (per group) of 3x3 full-range int8 weights per output, per-channel scales, a bias:
    past the bound, the split equals the int64 convolution requantized in float64."""
    paths = count_products(monkeypatch, fast_conv, "exact_conv")
    c, m = 160 * group, 4 * group
    info = np.iinfo(x_type)
    x = ints(x_type, (1, c, 6, 6))
    w = ints(np.int8, (m, c // group, 3, 3))
    w_scale = np.random.default_rng(2).uniform(0.5, 1.5, m).astype(np.float32)
    bias = ints(np.int32, (m,), -3000, 3000)
    y_scale = np.float32(200.0)
    y_zp = np.array(128 if x_type == np.uint8 else 0, x_type)      # onnxruntime: X and Y of one type
    inputs = [x, np.float32(0.5), np.array(x_zp, x_type), w, w_scale, np.zeros(m, np.int8), y_scale, y_zp, bias]
    attrs = {"pads": [1, 1, 1, 1], "group": group}
    fast, ref, theirs = three_ways("QLinearConv", inputs, attrs, opset=13, out_types=[TP.UINT8 if x_type == np.uint8
                                                                                     else TP.INT8],
                                   constants=(3, 4, 8))
    identical(fast[0], ref[0])
    within_one_step(fast[0], theirs[0])
    assert paths == {"exact": 1, "wide": 0}
    prepared = fast_conv.CenteredW(w, None)
    amax = max(x_zp - info.min, info.max - x_zp)
    assert amax * prepared.l1 > FLOAT32_EXACT and len(prepared.chunks(amax)) > 2
    # the int64 reference: per group, im2col by loops
    xc = np.pad(x.astype(np.int64) - x_zp, [(0, 0), (0, 0), (1, 1), (1, 1)])
    cg, mg = c // group, m // group
    acc = np.zeros((m, 6, 6), np.int64)
    for o in range(m):
        g = o // mg
        for i in range(3):
            for j in range(3):
                acc[o] += np.einsum("chw,c->hw", xc[0, g * cg:(g + 1) * cg, i:i + 6, j:j + 6], w[o, :, i, j].astype(np.int64))
    mult = (np.float32(0.5) * w_scale / y_scale).astype(np.float32).astype(np.float64)
    want = np.clip(np.rint((acc + bias[:, None, None]) * mult[:, None, None] + int(y_zp)), info.min, info.max)
    assert (want == info.min).any() and (want == info.max).any()       # saturation met at both ends
    np.testing.assert_array_equal(fast[0][0], want.astype(x_type))


def test_conv_integer_split_k_is_exact(monkeypatch):
    """ConvInteger past the bound with int8 data at its zero point's end: the split's int32 sums."""
    paths = count_products(monkeypatch, fast_conv, "exact_conv")
    x = ints(np.int8, (2, 40, 4, 4))
    w = ints(np.int8, (3, 40, 3, 3))
    fast, ref, theirs = three_ways("ConvInteger", [x, w, np.int8(127), np.int8(-128)], {}, opset=13,
                                   out_types=[TP.INT32], constants=(1, 3))
    identical(fast[0], ref[0])
    np.testing.assert_array_equal(fast[0], theirs[0])
    assert paths == {"exact": 1, "wide": 0}
    assert np.abs(fast[0].astype(np.int64)).max() > FLOAT32_EXACT / 4


def test_qgemm_split_k_per_column():
    """com.microsoft QGemm, transB, per-column int8 B past the bound: the int64 product, scaled
    (float32 products of these operands would be off)."""
    pytest.importorskip("onnxkit_microsoft")
    a = ints(np.uint8, (3, 2000))
    b = ints(np.int8, (5, 2000), 100, 127)          # one sign: the sums reach past 2^24
    b_scale = np.random.default_rng(3).uniform(0.5, 2.0, 5).astype(np.float32)
    inputs = [a, np.float32(0.25), np.uint8(255), b, b_scale, np.zeros(5, np.int8)]
    fast, ref, theirs = three_ways("QGemm", inputs, {"transB": 1}, domain="com.microsoft", out_types=[TP.FLOAT],
                                   constants=(3, 4, 5))
    identical(fast[0], ref[0])
    acc = (a.astype(np.int64) - 255) @ b.astype(np.int64).T
    assert np.abs(acc).max() > FLOAT32_EXACT
    want = (acc.astype(np.float64) * 0.25 * b_scale.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(fast[0], want)
    np.testing.assert_allclose(fast[0], theirs[0], rtol=1e-5)


def test_conv_integer_three_spatial_axes_past_the_bound_runs_the_portable_kernel(monkeypatch):
    """Three spatial axes (no compiled columns, so no split): past the bound the portable float64
    kernel runs, and its sums (past 2^24, where float32 would round) are the int64 convolution."""
    paths = count_products(monkeypatch, fast_conv, "exact_conv")
    x = ints(np.int8, (1, 64, 3, 3, 3))
    w = ints(np.int8, (2, 64, 3, 3, 3), 100, 127)
    fast, ref, theirs = three_ways("ConvInteger", [x, w, np.int8(-128)], {}, opset=13, out_types=[TP.INT32],
                                   constants=(1,))
    want = np.einsum("cijk,mcijk->m", x[0].astype(np.int64) + 128, w.astype(np.int64)).reshape(1, 2, 1, 1, 1)
    assert want.max() > FLOAT32_EXACT
    np.testing.assert_array_equal(fast[0], want)
    identical(fast[0], ref[0])
    np.testing.assert_array_equal(fast[0], theirs[0])
    assert paths == {"exact": 0, "wide": 1}


# ------------------------------------------------------------- stacked B (attention's products)
@pytest.mark.parametrize("a_type,a_zp,b_type,b_zp", [(np.uint8, 0, np.uint8, 255), (np.int8, -128, np.int8, 127),
                                                      (np.uint8, 131, np.int8, 0)])
@pytest.mark.parametrize("shapes", [((2, 3, 5, 16), (2, 3, 16, 7)), ((5, 16), (4, 16, 7)), ((2, 1, 5, 8), (3, 8, 4))])
def test_matmul_integer_stacked_b(a_type, a_zp, b_type, b_zp, shapes, monkeypatch):
    """A stack of B matrices (an activation): one batched float32 product, equal to int64's."""
    paths = count_products(monkeypatch, fast_matmul, "batched_product")
    a, b = ints(a_type, shapes[0]), ints(b_type, shapes[1])
    fast, ref, theirs = three_ways("MatMulInteger", [a, b, np.array(a_zp, a_type), np.array(b_zp, b_type)], opset=13,
                                   out_types=[TP.INT32])
    want = np.matmul(a.astype(np.int64) - a_zp, b.astype(np.int64) - b_zp)
    np.testing.assert_array_equal(fast[0], want)
    identical(fast[0], ref[0])
    np.testing.assert_array_equal(fast[0], theirs[0])
    assert paths == {"exact": 1, "wide": 0}


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
@pytest.mark.parametrize("y_type", [np.uint8, np.int8])
def test_qlinear_matmul_stacked_b_ties_and_saturation(y_type, monkeypatch):
    """Stacked operands requantized by ``acc * 0.5 + y_zp``: ties (half to even) and both ends."""
    paths = count_products(monkeypatch, fast_matmul, "batched_product")
    a = ints(y_type, (2, 4, 6, 32))
    b = ints(np.int8, (2, 4, 32, 5))
    a[0, 0, 0] = 1
    b[0, 0, :, :2] = 0
    b[0, 0, 0, 0], b[0, 0, 0, 1] = 7, -3                              # 3.5 and -1.5 before the zero point
    zp = 3 if y_type == np.uint8 else -5
    inputs = [a, np.float32(1.0), np.array(0, y_type), b, np.float32(1.0), np.int8(0), np.float32(2.0),
              np.array(zp, y_type)]
    fast, ref, theirs = three_ways("QLinearMatMul", inputs, opset=10,
                                   out_types=[TP.UINT8 if y_type == np.uint8 else TP.INT8])
    acc = np.matmul(a.astype(np.int64), b.astype(np.int64))
    info = np.iinfo(y_type)
    want = np.clip(np.rint(acc * 0.5 + zp), info.min, info.max).astype(y_type)
    np.testing.assert_array_equal(fast[0], want)
    identical(fast[0], ref[0])
    within_one_step(fast[0], theirs[0])
    # ties to even: 3.5 + 3 -> 6, -1.5 + 3 -> 2; 3.5 - 5 -> -2, -1.5 - 5 -> -6
    assert (int(fast[0][0, 0, 0, 0]), int(fast[0][0, 0, 0, 1])) == ((6, 2) if zp == 3 else (-2, -6))
    assert (want == info.min).any() and (want == info.max).any()
    assert paths == {"exact": 1, "wide": 0}


def test_matmul_integer_stacked_b_past_the_bound_and_bad_shapes_take_the_portable_kernel(monkeypatch):
    """K = 1500 of full-range stacked values: past the bound, the portable kernel's exact sums;
    batch extents that do not broadcast: the portable kernel's error."""
    from onnxkit.errors import OnnxkitError

    paths = count_products(monkeypatch, fast_matmul, "batched_product")
    a, b = ints(np.uint8, (2, 3, 1500)), ints(np.uint8, (2, 1500, 4), 200, 255)
    fast, ref, theirs = three_ways("MatMulInteger", [a, b], opset=13, out_types=[TP.INT32])
    want = np.matmul(a.astype(np.int64), b.astype(np.int64))
    np.testing.assert_array_equal(fast[0], want)
    identical(fast[0], ref[0])
    assert paths == {"exact": 0, "wide": 1}
    with pytest.raises(OnnxkitError, match="broadcast"):
        three_ways("MatMulInteger", [ints(np.uint8, (3, 2, 4)), ints(np.uint8, (2, 4, 5))], opset=13,
                   out_types=[TP.INT32], ort=False)
