"""Linear quantization, written once (onnxkit_default_domain.kernels.quantization), on both backends.

The int8/uint8/int16 paths run on torch on ``gpu`` (not on the cpu fallback) and give exactly
the cpu backend's values: rounding half to even, saturation to the type's range, NaN to the
zero point.  The 8-bit float paths run on the gpu backend's cpu fallback (torch has no such
types here), decided by element type.  Expected values are hand-computed.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from onnxkit import ir
from onnxkit.errors import EvaluationError
from onnxkit.runtime import InferenceSession
from one_node import BACKENDS

pytest.importorskip("torch")
A = ir.Attribute.make
F32, U8, I8, I16, I32, F8 = 1, 2, 3, 5, 6, 17


def vi(name, elem, shape=None):
    return ir.ValueInfo(name, ir.tensor_type(elem, shape))


def run(op, inputs, feeds, out_types, backend, opset=21, fallback=False, **attrs):
    """Run one node; ``inputs``: [(name, elem, shape)]; asserts where it ran."""
    outs = [f"y{i}" for i in range(len(out_types))]
    n = ir.Node([i[0] for i in inputs], outs, name="q", op_type=op, attribute=[A(k, v) for k, v in attrs.items()])
    g = ir.Graph(node=[n], name="g", input=[vi(*i) for i in inputs], output=[vi(o, *t) for o, t in zip(outs, out_types)])
    sess = InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", opset)], graph=g), backend)
    if backend == "gpu":
        assert [f.op_type for f in sess.fallbacks] == ([op] if fallback else []), sess.fallbacks
    return sess.run(None, feeds)


@pytest.mark.parametrize("backend", BACKENDS)
def test_quantize_rounds_half_to_even_and_saturates(backend):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 300.0, -300.0, np.nan, 1.25], np.float32)
    for elem, dtype, want in (
            (U8, np.uint8, [10, 12, 12, 10, 8, 255, 0, 10, 11]),            # zero point 10
            (I8, np.int8, [10, 12, 12, 10, 8, 127, -128, 10, 11]),
            (I16, np.int16, [10, 12, 12, 10, 8, 310, -290, 10, 11])):
        (y,) = run("QuantizeLinear", [("x", F32, [9]), ("s", F32, []), ("z", elem, [])],
                   {"x": x, "s": np.array(1.0, np.float32), "z": np.array(10, dtype)}, [(elem, [9])], backend)
        assert y.dtype == dtype and y.tolist() == want, (elem, y)
    # scale 0.5: x / 0.5 = 1, 3, 5, ... exactly; no zero point: uint8, NaN -> 0
    (y,) = run("QuantizeLinear", [("x", F32, [9]), ("s", F32, [])], {"x": x, "s": np.array(0.5, np.float32)},
               [(U8, [9])], backend)
    assert y.dtype == np.uint8 and y.tolist() == [1, 3, 5, 0, 0, 255, 0, 0, 2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_quantize_per_axis_and_blocked(backend):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    s = np.array([1.0, 2.0, 4.0], np.float32)
    (y,) = run("QuantizeLinear", [("x", F32, [3, 4]), ("s", F32, [3]), ("z", I8, [3])],
               {"x": x, "s": s, "z": np.array([0, 1, -1], np.int8)}, [(I8, [3, 4])], backend, axis=0)
    assert y.tolist() == [[0, 1, 2, 3], [3, 3, 4, 5], [1, 1, 1, 2]]   # 5/2 = 2.5 -> 2, +1; 10/4 = 2.5 -> 2, -1
    sb = np.array([[1.0, 2.0], [1.0, 2.0], [4.0, 4.0]], np.float32)      # blocks of 2 along axis 1
    (y,) = run("QuantizeLinear", [("x", F32, [3, 4]), ("s", F32, [3, 2])], {"x": x, "s": sb}, [(U8, [3, 4])],
               backend, axis=1, block_size=2)
    assert y.tolist() == [[0, 1, 1, 2], [4, 5, 3, 4], [2, 2, 2, 3]]
    with pytest.raises(EvaluationError, match="does not fit blocked quantization"):
        run("QuantizeLinear", [("x", F32, [3, 4]), ("s", F32, [3, 3])], {"x": x, "s": np.ones((3, 3), np.float32)},
            [(U8, [3, 4])], backend, axis=1, block_size=2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_quantize_matches_cpu_on_random_data(backend):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 5, 6)) * 100).astype(np.float32)
    x[0, 0, :3] = [0.5, 2.5, -3.5]
    feeds = {"x": x, "s": np.array([0.5, 1.0, 0.25, 2.0, 1.5], np.float32), "z": np.array([0, 3, -3, 100, -100], np.int8)}
    args = ("QuantizeLinear", [("x", F32, [4, 5, 6]), ("s", F32, [5]), ("z", I8, [5])], feeds, [(I8, [4, 5, 6])])
    (want,) = run(*args, "cpu", axis=1)
    (got,) = run(*args, backend, axis=1)
    assert got.dtype == want.dtype == np.int8
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dequantize_int8_and_int32(backend):
    (y,) = run("DequantizeLinear", [("x", I8, [4]), ("s", F32, []), ("z", I8, [])],
               {"x": np.array([-128, 0, 5, 127], np.int8), "s": np.array(0.5, np.float32), "z": np.array(-2, np.int8)},
               [(F32, [4])], backend)
    assert y.dtype == np.float32 and y.tolist() == [-63.0, 1.0, 3.5, 64.5]
    (y,) = run("DequantizeLinear", [("x", I32, [2]), ("s", F32, [])],
               {"x": np.array([2 ** 30, -7], np.int32), "s": np.array(0.25, np.float32)}, [(F32, [2])], backend)
    assert y.tolist() == [2.0 ** 28, -1.75]


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_quantize_linear(backend):
    x = np.array([0.0, 2.0, -3.0, -2.5, 1.34, 0.5], np.float32)
    y, scale, zp = run("DynamicQuantizeLinear", [("x", F32, [6])], {"x": x}, [(U8, [6]), (F32, []), (U8, [])], backend)
    # range [-3, 2]: scale 5/255, zero point rint(3 / scale) = 153
    assert scale.dtype == np.float32 and float(scale) == np.float32(np.float32(5.0) / np.float32(255))
    assert zp.dtype == np.uint8 and int(zp) == 153
    want = np.clip(np.rint(x / scale) + np.float32(153), 0, 255).astype(np.uint8)
    assert y.dtype == np.uint8 and y.tolist() == want.tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_qlinear_matmul(backend):
    a = np.array([[10, 20], [30, 40]], np.uint8)
    b = np.array([[1, 2], [3, 4]], np.uint8)
    f = {"a": a, "as": np.array(0.5, np.float32), "az": np.array(10, np.uint8), "b": b, "bs": np.array(1.0, np.float32),
         "bz": np.array(1, np.uint8), "ys": np.array(2.0, np.float32), "yz": np.array(5, np.uint8)}
    ins = [("a", U8, [2, 2]), ("as", F32, []), ("az", U8, []), ("b", U8, [2, 2]), ("bs", F32, []), ("bz", U8, []),
           ("ys", F32, []), ("yz", U8, [])]
    (y,) = run("QLinearMatMul", ins, f, [(U8, [2, 2])], backend)
    # (a-10) @ (b-1) = [[0,10],[20,30]] @ [[0,1],[2,3]] = [[20, 30], [60, 110]]; * 0.25 + 5, half to even
    assert y.dtype == np.uint8 and y.tolist() == [[10, 12], [20, 32]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_float8_quantization_runs_on_the_cpu_fallback_on_gpu(backend):
    x = np.array([0.3, 500.0, -1000.0], np.float32)
    z = np.zeros((), ml_dtypes.float8_e4m3fn)
    (y,) = run("QuantizeLinear", [("x", F32, [3]), ("s", F32, []), ("z", F8, [])],
               {"x": x, "s": np.array(1.0, np.float32), "z": z}, [(F8, [3])], backend, fallback=True)
    assert y.dtype == ml_dtypes.float8_e4m3fn and y.astype(np.float32).tolist() == [0.3125, 448.0, -448.0]
