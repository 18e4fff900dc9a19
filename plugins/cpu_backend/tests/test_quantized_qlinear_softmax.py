"""QLinearSoftmax's compiled pass (onnxkit_cpu/overrides/quantized_microsoft.py ``_softmax``,
compiled/quantized.py ``qlinear_softmax``) against the portable kernel, a float64 softmax written
here and onnxruntime: within one quantization step of each (the row sums' order differs from
numpy's pairwise sums; onnxruntime uses a float32 table), and equal on nearly every element;
uint8 and int8, zero points absent or at the ends, rows shorter than the codes they hold (one exp
per element) and longer (one exp per code), the opset-12 form over the trailing axes; near misses
(another axis, a zero scale, a zero point of another type) keep the portable kernel, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxkit_microsoft")
from onnx import TensorProto as TP  # noqa: E402
from quantized_harness import MS, identical, three_ways, within_one_step  # noqa: E402

from onnxkit_cpu.compiled import quantized as loops  # noqa: E402

RNG = np.random.default_rng(5151)


@pytest.fixture
def served(monkeypatch):
    """The row counts the compiled pass was called with."""
    seen = []
    real = loops.qlinear_softmax.get()
    assert real is not None

    def counted(x, *args):
        seen.append(x.shape)
        return real(x, *args)
    class Stub:
        @staticmethod
        def get():
            return counted
    monkeypatch.setattr(loops, "qlinear_softmax", Stub)
    return seen


def _softmax_reference(x, x_scale, x_zp, y_scale, y_zp, axes):
    d = (x.astype(np.float64) - x_zp) * float(np.float32(x_scale))
    e = np.exp(d - d.max(axis=axes, keepdims=True))
    y = e / e.sum(axis=axes, keepdims=True)
    info = np.iinfo(x.dtype)
    return np.clip(np.rint(y / float(np.float32(y_scale))) + y_zp, info.min, info.max).astype(x.dtype)


def _equal_nearly_everywhere(a, b):
    within_one_step(a, b)
    assert np.mean(a == b) > 0.97


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shape", [(2, 3, 5, 40), (3, 700)])        # short rows; rows longer than their codes
@pytest.mark.parametrize("x_zp", ["min", "mid", "none"])
def test_softmax_rows(dtype, shape, x_zp, served):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max + 1, shape).astype(dtype)
    zx = {"min": info.min, "mid": (info.min + info.max) // 2, "none": 0}[x_zp]
    zy = 0 if dtype == np.uint8 else -128
    y_scale = np.float32(40 / (256 * shape[-1]))        # a long row's small values still spread over codes
    inputs = [x, np.float32(0.05), None if x_zp == "none" else dtype(zx), y_scale, dtype(zy)]
    types = [TP.UINT8 if dtype == np.uint8 else TP.INT8]
    fast, ref, theirs = three_ways("QLinearSoftmax", inputs, {"opset": 13}, domain=MS, out_types=types,
                                   constants=(1, 2, 3, 4), ort=x_zp != "none")
    assert served
    _equal_nearly_everywhere(fast[0], ref[0])
    _equal_nearly_everywhere(fast[0], _softmax_reference(x, 0.05, zx, y_scale, zy, -1))
    if theirs is not None:
        within_one_step(fast[0], theirs[0])
    assert len(np.unique(fast[0])) > 10


def test_opset_12_takes_the_trailing_axes_together(served):
    x = RNG.integers(0, 256, (2, 3, 4, 5)).astype(np.uint8)
    inputs = [x, np.float32(0.1), np.uint8(128), np.float32(1 / 256), np.uint8(0)]
    fast, ref, theirs = three_ways("QLinearSoftmax", inputs, {"opset": 12, "axis": 1}, domain=MS,
                                   out_types=[TP.UINT8], constants=(1, 2, 3, 4))
    assert served == [(2, 60)]
    _equal_nearly_everywhere(fast[0], ref[0])
    _equal_nearly_everywhere(fast[0], _softmax_reference(x, 0.1, 128, 1 / 256, 0, (1, 2, 3)))
    within_one_step(fast[0], theirs[0])


@pytest.mark.parametrize("case", ["axis_1", "x_scale_zero", "y_scale_negative"])
def test_near_misses_take_the_portable_kernel(case, served):
    x = RNG.integers(0, 256, (2, 6, 7)).astype(np.uint8)
    inputs = [x, np.float32(0.0 if case == "x_scale_zero" else 0.1), np.uint8(100),
              np.float32(-1 / 256 if case == "y_scale_negative" else 1 / 256), np.uint8(0)]
    attrs = {"opset": 13, "axis": 1 if case == "axis_1" else -1}
    with np.errstate(all="ignore"):
        fast, ref, _ = three_ways("QLinearSoftmax", inputs, attrs, domain=MS, out_types=[TP.UINT8],
                                  constants=(1, 2, 3, 4), ort=False)
    assert not served
    identical(fast[0], ref[0])
