"""QGemm's compiled finish (onnxkit_cpu/compiled/quantized.py ``qgemm_finish``: C, alpha, the
scales and the requantization in one float64 pass) against the portable kernel (bit for bit),
an int64 / float64 reference written here and onnxruntime (within one step); outputs saturated at
both ends, float and int8 / uint8 results; its near misses (a 2-D C, a zero or non-finite
y_scale, a huge alpha) keep the numpy steps with the same results.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxkit_microsoft")
from onnx import TensorProto as TP  # noqa: E402
from quantized_harness import MS, identical, three_ways, within_one_step  # noqa: E402

from onnxkit_cpu.compiled import quantized as loops  # noqa: E402
from onnxkit_cpu.overrides import quantized_microsoft as fast_module  # noqa: E402

RNG = np.random.default_rng(4417)


@pytest.fixture
def finishes(monkeypatch):
    """How many calls the compiled finish served."""
    seen = []
    real = fast_module._finishes

    def counted(*args):
        got = real(*args)
        seen.append(got)
        return got
    monkeypatch.setattr(fast_module, "_finishes", counted)
    return seen


def _reference(a, a_zp, b, b_zp, c, alpha, a_scale, b_scale):
    acc = (a.astype(np.int64) - a_zp) @ (b.astype(np.int64) - b_zp.astype(np.int64)) + (0 if c is None else c)
    return acc * alpha * float(a_scale) * b_scale.astype(np.float64)


@pytest.mark.parametrize("out_type", [np.uint8, np.int8, None])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("c_shape", [None, (1,), (12,), (1, 12)])
def test_finish_is_the_portable_steps(out_type, per_column, c_shape, finishes):
    assert loops.qgemm_finish.get() is not None
    m, k, n = 7, 40, 12
    # onnxruntime's QGemm writes A's type: an int8 result comes from an int8 A
    a_type, a_zp = (np.int8, -5) if out_type == np.int8 else (np.uint8, 131)
    a = RNG.integers(np.iinfo(a_type).min, np.iinfo(a_type).max + 1, (m, k)).astype(a_type)
    b = RNG.integers(-128, 128, (k, n)).astype(np.int8)
    b_scale = RNG.uniform(0.002, 0.02, (n,) if per_column else ()).astype(np.float32)
    b_zp = np.zeros((n,) if per_column else (), np.int8)
    c = None if c_shape is None else RNG.integers(-40000, 40000, c_shape).astype(np.int32)
    inputs = [a, np.float32(0.04), a_type(a_zp), b, b_scale, b_zp, c]
    types = [TP.FLOAT]
    if out_type is not None:
        zp = out_type(3 if out_type == np.int8 else 128)
        inputs += [np.float32(0.05), zp]     # a small y_scale: both ends of the range are met
        types = [TP.UINT8 if out_type == np.uint8 else TP.INT8]
    fast, ref, theirs = three_ways("QGemm", inputs, {"alpha": 1.5}, domain=MS, out_types=types, constants=(3, 4, 5, 6))
    assert finishes and all(finishes)
    identical(fast[0], ref[0])
    y = _reference(a, a_zp, b, b_zp, None if c is None else c.reshape(-1), 1.5, np.float32(0.04), b_scale)
    if out_type is None:
        np.testing.assert_array_equal(fast[0], y.astype(np.float32))
        np.testing.assert_allclose(fast[0], theirs[0], rtol=1e-5, atol=1e-4)
    else:
        lo, hi = np.iinfo(out_type).min, np.iinfo(out_type).max
        want = np.clip(np.rint(y / float(np.float32(0.05))) + int(zp), lo, hi).astype(out_type)
        np.testing.assert_array_equal(fast[0], want)
        assert (want == lo).any() and (want == hi).any()
        within_one_step(fast[0], theirs[0])


@pytest.mark.parametrize("case", ["c_2d", "y_scale_zero", "y_scale_nan", "alpha_huge"])
def test_near_misses_keep_the_numpy_steps(case, finishes):
    m, k, n = 3, 16, 5
    a, b = RNG.integers(0, 256, (m, k)).astype(np.uint8), RNG.integers(-128, 128, (k, n)).astype(np.int8)
    c = RNG.integers(-500, 500, (m, n) if case == "c_2d" else (n,)).astype(np.int32)
    y_scale = {"y_scale_zero": 0.0, "y_scale_nan": np.nan}.get(case, 0.5)
    alpha = 1e25 if case == "alpha_huge" else 1.0
    inputs = [a, np.float32(0.04), np.uint8(131), b, np.float32(0.01), np.int8(0), c, np.float32(y_scale), np.uint8(9)]
    with np.errstate(all="ignore"):
        fast, ref, _ = three_ways("QGemm", inputs, {"alpha": alpha}, domain=MS, out_types=[TP.UINT8],
                                  constants=(3, 4, 5), ort=False)
    assert finishes and not any(finishes)
    identical(fast[0], ref[0])
