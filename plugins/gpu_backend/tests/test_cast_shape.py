"""The gpu backend (torch) against the cpu backend (numpy) and onnx.reference for the kernels of
cast.py, shape.py and reduction.py of onnxkit_gpu, and the gpu kernel table.

As test_elementwise.py: one-node models (gpu_parity.py) on both backends and onnx's
ReferenceEvaluator (gpu_oracle.py names where it is none), old operator versions, integer and
half types, edge values; on a machine without CUDA the gpu backend runs on torch's CPU device.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import gpu_parity as parity  # noqa: E402
from gpu_parity import BF16, ir_version, rand, run, same, tag  # noqa: E402
from onnxkit.dtypes import from_numpy_dtype  # noqa: E402
from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402


@pytest.fixture(autouse=True)
def _seeded():
    parity.reseed()


# ============================================================================ Cast
_CASTABLE = [np.float32, np.float64, np.float16, BF16, np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_]


@pytest.mark.parametrize("src", _CASTABLE)
@pytest.mark.parametrize("dst", _CASTABLE)
def test_cast_pairs(src, dst):
    x = np.array([0, 1, -1, 2.5, -2.5, 100.7, -100.7, 3e4, 1e-3, 7], np.float64)
    x = x.astype(src) if np.dtype(src).kind != "u" else np.abs(x).astype(src)
    to = tag(np.zeros((), dst))
    same("Cast", [x], {"to": to}, opset=13, rtol=0)
    same("CastLike", [x, np.zeros((1,), dst)], opset=21, rtol=0)


def test_cast_double_to_half_rounds_once():
    # 1 + 2**-11 + 2**-40 is above the float16 tie: rounds up; via float32 it would be a tie -> even (down)
    x = np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -8 + 2.0 ** -40, 65519.99, 65520.0, -1e-8, 2.0 ** -25],
                 np.float64)
    got = run("gpu", "Cast", [x], {"to": TP.FLOAT16}, opset=13)
    with np.errstate(over="ignore"):
        assert got.view(np.uint16).tolist() == x.astype(np.float16).view(np.uint16).tolist()
    got = run("gpu", "Cast", [x[:2]], {"to": TP.BFLOAT16}, opset=13)
    assert got.astype(np.float64).tolist() == [1.0, 1 + 2.0 ** -7]
    big = np.array([2 ** 31 - 1, -(2 ** 24) - 3], np.int32)
    got = run("gpu", "Cast", [big], {"to": TP.BFLOAT16}, opset=13)
    assert got.astype(np.float64).tolist() == [2.0 ** 31, -(2.0 ** 24)]


def test_cast_float_to_int_and_bool_rules():
    x = np.array([2.9, -2.9, np.nan, np.inf, 300.0, -129.0, 0.0, -0.0], np.float32)
    finite = np.isfinite(x)
    same("Cast", [x[finite]], {"to": TP.INT8}, opset=13)
    same("Cast", [x[finite]], {"to": TP.UINT8}, opset=13)
    same("Cast", [x[finite]], {"to": TP.INT64}, opset=13)
    # undefined by ONNX: out of range gives the low bits of the truncated value, NaN and Inf 0
    assert run("gpu", "Cast", [x], {"to": TP.INT8}, opset=13).tolist() == [2, -2, 0, 0, 44, 127, 0, 0]
    assert run("gpu", "Cast", [x], {"to": TP.INT64}, opset=13).tolist() == [2, -2, 0, 0, 300, -129, 0, 0]
    big = np.array([1e19, -1e19, 2.0 ** 70 + 2.0 ** 20], np.float64)     # the low 64 bits of the integer
    assert run("gpu", "Cast", [big], {"to": TP.INT64}, opset=13).tolist() == [10 ** 19 - 2 ** 64, 2 ** 64 - 10 ** 19,
                                                                             2 ** 20]
    got = same("Cast", [x], {"to": TP.BOOL}, opset=13)
    assert got.tolist() == [True, True, True, True, True, True, False, False]
    same("Cast", [np.array([200, -200, 70000], np.int32)], {"to": TP.INT8}, opset=13)


def test_cast1_names_the_type_and_types_torch_does_not_compute_run_on_cpu():
    x = rand((3,))
    same("Cast", [x], {"to": "INT32"}, opset=1)
    same("Cast", [x], {"to": "DOUBLE"}, opset=1)
    x = np.array([1.0, 2.5, 7.0], np.float32)
    for to, want in ((TP.UINT32, [1, 2, 7]), (TP.FLOAT8E4M3FN, [1.0, 2.5, 7.0]), (TP.STRING, ["1.5", "2.5", "7.25"]),
                      (TP.INT4, [2, 2, 7])):  # a per-node fallback: the cpu backend's Cast, planned
        # (INT4 gets the STRING case's [1.5, 2.5, 7.25]: rounded half to even, 6.3.3)
        if to == TP.STRING:
            x = np.array([1.5, 2.5, 7.25], np.float32)
        got = run("gpu", "Cast", [x], {"to": to}, opset=21)
        assert isinstance(got, np.ndarray) and got.dtype == run("cpu", "Cast", [x], {"to": to}, opset=21).dtype
        values = [v.decode() if isinstance(v, bytes) else v for v in got.tolist()] if to == TP.STRING \
            else got.astype(np.float64).tolist()
        assert values == want, (to, values)
    assert run("gpu", "Cast", [np.array([1, 2], np.uint32)], {"to": TP.FLOAT}, opset=13).tolist() == [1.0, 2.0]


# ============================================================================ shape
def test_reshape_versions():
    x = rand((2, 3, 4))
    same("Reshape", [x], {"shape": [4, -1]}, opset=1)
    same("Reshape", [x, np.array([0, -1], np.int64)], opset=5)
    same("Reshape", [x, np.array([3, -1, 2], np.int64)], opset=13)
    same("Reshape", [x, np.array([0, 12], np.int64)], opset=14)
    same("Reshape", [x, np.array([0, 0, -1], np.int64)], opset=19)
    same("Reshape", [np.zeros((0, 3), np.float32), np.array([3, 0], np.int64)], {"allowzero": 1}, opset=14)
    with pytest.raises(OnnxkitError, match="cannot reshape"):
        run("gpu", "Reshape", [x, np.array([5, -1], np.int64)], opset=21)


def test_transpose_concat_flatten():
    x = rand((2, 3, 4))
    same("Transpose", [x], opset=1)
    same("Transpose", [x], {"perm": [1, 2, 0]}, opset=13)
    same("Transpose", [x.astype(np.int8)], {"perm": [2, 0, 1]}, opset=21)
    same("Concat", [x, rand((2, 2, 4))], opset=1)                    # default axis 1
    same("Concat", [x, rand((2, 3, 1)), rand((2, 3, 2))], {"axis": -1}, opset=13)
    same("Concat", [x, rand((1, 3, 4))], {"axis": 0}, opset=4)
    with pytest.raises(OnnxkitError, match="cannot be joined"):
        run("gpu", "Concat", [x, rand((2, 2, 5))], {"axis": 1}, opset=11)
    for axis in (0, 1, 2, 3, -1):
        same("Flatten", [x], {"axis": axis}, opset=13)
    same("Flatten", [x], opset=1)
    same("Flatten", [np.zeros((0, 3, 2), np.float32)], {"axis": 2}, opset=11)


def test_split_versions():
    x = rand((6, 4))
    same("Split", [x], {"axis": 0}, opset=1, n_out=3)
    same("Split", [x, np.array([1, 5], np.float32)], {"axis": 0}, opset=1, n_out=2)  # lengths as an input (T)
    same("Split", [x], {"axis": 0, "split": [2, 4]}, opset=2, n_out=2)
    same("Split", [x], {"axis": -1, "split": [1, 3]}, opset=11, n_out=2)
    same("Split", [x, np.array([3, 0, 3], np.int64)], {"axis": 0}, opset=13, n_out=3)
    same("Split", [rand((7, 2))], {"axis": 0, "num_outputs": 3}, opset=18, n_out=3)
    with pytest.raises(OnnxkitError, match="equal parts"):
        run("gpu", "Split", [rand((7, 2))], {"axis": 0}, opset=13, n_out=2)


def test_squeeze_unsqueeze_versions():
    x = rand((1, 3, 1, 2))
    same("Squeeze", [x], opset=1)
    same("Squeeze", [x], {"axes": [0]}, opset=1)
    same("Squeeze", [x], {"axes": [-2]}, opset=11)
    same("Squeeze", [x, np.array([0, 2], np.int64)], opset=13)
    same("Squeeze", [x], opset=21)
    with pytest.raises(OnnxkitError, match="cannot squeeze"):
        run("gpu", "Squeeze", [x, np.array([1], np.int64)], opset=13)
    y = rand((3, 2))
    same("Unsqueeze", [y], {"axes": [0, 3]}, opset=1)
    same("Unsqueeze", [y], {"axes": [-1]}, opset=11)
    same("Unsqueeze", [y, np.array([1, -1], np.int64)], opset=13)
    same("Unsqueeze", [np.array(5.0, np.float32), np.array([0], np.int64)], opset=25)


def test_expand_and_tile():
    x = rand((3, 1))
    same("Expand", [x, np.array([2, 1, 4], np.int64)], opset=8)
    same("Expand", [x, np.array([1, 1], np.int64)], opset=13)       # the shape may be smaller
    with pytest.raises(OnnxkitError, match="cannot expand"):
        run("gpu", "Expand", [x, np.array([2, 4], np.int64)], opset=13)
    y = rand((2, 3), np.int16)
    same("Tile", [y.astype(np.float32), np.array(3, np.int64), np.array(1, np.int64)], opset=1)
    same("Tile", [y, np.array([2, 3], np.int64)], opset=6)
    same("Tile", [y, np.array([0, 1], np.int64)], opset=13)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_attribute_forms(mode):
    x = rand((3, 4))
    same("Pad", [x], {"paddings": [1, 2, 0, 1], "mode": mode}, opset=1)
    attrs = {"pads": [2, 1, 3, 2], "mode": mode}
    if mode == "constant":
        attrs["value"] = 1.5
    same("Pad", [x], attrs, opset=2)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float16])
def test_pad_input_forms(mode, dtype):
    x = rand((3, 4, 2), dtype)
    opset = 19 if mode == "wrap" else 11
    pads = np.array([1, 0, 2, 2, 5, 1], np.int64)                   # 5 > extent: reflect / wrap repeat
    cv = np.array(1, dtype) if mode == "constant" else None
    same("Pad", [x, pads, cv] if cv is not None else [x, pads], {"mode": mode}, opset=opset)
    same("Pad", [x, np.array([-1, 1, 2, 0], np.int64), None, np.array([0, 2], np.int64)], {"mode": mode}, opset=19)
    same("Pad", [x, np.array([1, 0, 0, -1, -2, 0], np.int64)], {"mode": mode}, opset=max(opset, 13))


def test_pad_reflect_by_hand():
    x = np.array([1, 2, 3], np.float32)
    got = run("gpu", "Pad", [x, np.array([5, 4], np.int64)], {"mode": "reflect"}, opset=13)
    assert got.tolist() == [2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3]
    got = run("gpu", "Pad", [x, np.array([2, 4], np.int64)], {"mode": "wrap"}, opset=19)
    assert got.tolist() == [2, 3, 1, 2, 3, 1, 2, 3, 1]


def test_shape_and_size():
    x = rand((2, 3, 4, 5))
    same("Shape", [x], opset=1)
    for start, end in ((1, None), (-3, -1), (0, 10), (3, 1), (-10, 2)):
        attrs = {"start": start} if end is None else {"start": start, "end": end}
        same("Shape", [x], attrs, opset=15)
    same("Size", [x], opset=1)
    same("Size", [np.zeros((0, 3), np.int8)], opset=21)


def test_slice_versions():
    x = rand((5, 6, 7))
    same("Slice", [x], {"starts": [1, -4], "ends": [4, 100], "axes": [0, 2]}, opset=1)
    same("Slice", [x], {"starts": [1], "ends": [-1]}, opset=1)
    i64 = lambda *v: np.array(v, np.int64)   # noqa: E731
    same("Slice", [x, i64(4, 1), i64(0, 5)], opset=10)
    same("Slice", [x, i64(-1), i64(-100), i64(1), i64(-2)], opset=10)              # negative step
    same("Slice", [x, i64(10, 0), i64(-10, 7), i64(2, 0), i64(-3, 2)], opset=11)
    same("Slice", [x, i64(3), i64(3), i64(0), i64(-1)], opset=13)                  # empty
    same("Slice", [x, i64(0, 2**62), i64(2**62, -2**62), i64(0, 1), i64(2, -1)], opset=13)
    with pytest.raises(OnnxkitError, match="step of 0"):
        run("gpu", "Slice", [x, i64(0), i64(2), i64(0), i64(0)], opset=13)


def test_gather_and_gather_elements():
    x = rand((4, 5, 3))
    for axis in (0, 1, -1):
        n = x.shape[axis]
        idx = parity.RNG.integers(-n, n, size=(2, 3)).astype(np.int64)
        same("Gather", [x, idx], {"axis": axis}, opset=13)
        same("Gather", [x, idx.astype(np.int32)], {"axis": axis}, opset=1)
    same("Gather", [x, np.array(-1, np.int64)], {"axis": 1}, opset=11)
    with pytest.raises(OnnxkitError, match="out of range"):
        run("gpu", "Gather", [x, np.array([4], np.int64)], opset=13)
    idx = parity.RNG.integers(-5, 5, size=(3, 2, 3)).astype(np.int64)
    same("GatherElements", [x, idx], {"axis": 1}, opset=11)
    same("GatherElements", [x, idx[:, :, :2].astype(np.int32)], {"axis": 1}, opset=13)
    with pytest.raises(OnnxkitError, match="out of range"):
        run("gpu", "GatherElements", [x, np.full((1, 1, 1), 5, np.int64)], {"axis": 1}, opset=13)


def test_constant_forms_and_constant_of_shape():
    def both(attr, value, opset, et, rank):
        node = helper.make_node("Constant", [], ["y"], **{attr: value})
        g = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", et, ["d"] * rank)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = ir_version(opset)
        data = m.SerializeToString()
        w, gt = InferenceSession(data, "cpu").run(None, {})[0], InferenceSession(data, "gpu").run(None, {})[0]
        assert w.dtype == gt.dtype and np.array_equal(w, gt)
        return gt

    both("value", numpy_helper.from_array(rand((2, 2), np.int16)), 9, TP.INT16, 2)
    both("value", numpy_helper.from_array(rand((2,), np.float16)), 13, TP.FLOAT16, 1)
    both("value_floats", [1.5, 2.5], 12, TP.FLOAT, 1)
    both("value_int", 7, 13, TP.INT64, 0)
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([5.0, 6.0], np.float32)),
                                       numpy_helper.from_array(np.array([1, 4], np.int64)), [2, 3])
    assert both("sparse_value", sparse, 11, TP.FLOAT, 2).tolist() == [[0, 5, 0], [0, 6, 0]]
    node = helper.make_node("Constant", [], ["y"], value_strings=["a"])
    g = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", TP.STRING, [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    strings = InferenceSession(m.SerializeToString(), "gpu")  # a STRING constant: planned on cpu
    assert [(f.op_type, f.runs_on) for f in strings.fallbacks] == [("Constant", "cpu")]
    assert [v.decode() if isinstance(v, bytes) else v for v in strings.run(None, {})[0].tolist()] == ["a"]

    shp = np.array([2, 3], np.int64)
    same("ConstantOfShape", [shp], opset=9)
    for arr in (np.array([7], np.int64), np.array([1.25], np.float16), np.array([True]), np.array([-3], np.int8)):
        same("ConstantOfShape", [shp], {"value": numpy_helper.from_array(arr)}, opset=20)
    same("ConstantOfShape", [np.zeros((0,), np.int64)], {"value": numpy_helper.from_array(np.array([2.0]))}, opset=21)


def test_range():
    s = lambda v, dt: np.array(v, dt)   # noqa: E731
    for dt in (np.int32, np.int64, np.int16):
        same("Range", [s(-7, dt), s(20, dt), s(3, dt)], opset=11)
        same("Range", [s(10, dt), s(-3, dt), s(-4, dt)], opset=11)
        same("Range", [s(1, dt), s(1, dt), s(2, dt)], opset=11)
    for dt in (np.float32, np.float64):
        same("Range", [s(0.1, dt), s(2.35, dt), s(0.3, dt)], opset=11)
        same("Range", [s(1.0, dt), s(-1.0, dt), s(-0.25, dt)], opset=27)
    for dt in (np.float16, BF16):
        for stash in ({}, {"stash_type": TP.DOUBLE}, {"stash_type": int(from_numpy_dtype(dt).tag)}):
            same("Range", [s(0.1, dt), s(30, dt), s(0.7, dt)], stash, opset=27)
        same("Range", [s(0.1, dt), s(30, dt), s(0.7, dt)], opset=11)


# ============================================================================ reductions
_REDUCE_ALL = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
               "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
_INPUT_FROM = {"ReduceSum": 13}


@pytest.mark.parametrize("op", _REDUCE_ALL)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
def test_reductions_float(op, dtype):
    x = rand((3, 4, 5), dtype, 0.1 if op == "ReduceLogSum" else -2, 2)
    if op == "ReduceProd":
        x = rand((3, 4, 5), dtype, 0.5, 1.5)
    for opset in (1, 11):
        for attrs in ({}, {"axes": [1]}, {"axes": [0, 2], "keepdims": 0}, {"axes": [-1, 0]}, {"keepdims": 0}):
            same(op, [x], attrs, opset=opset)
    opset = _INPUT_FROM.get(op, 18)
    for axes in (None, [1], [0, -1], [2, 1, 0]):
        for kd in (0, 1):
            same(op, [x] if axes is None else [x, np.array(axes, np.int64)], {"keepdims": kd}, opset=opset)
    same(op, [x, np.zeros((0,), np.int64)], {"noop_with_empty_axes": 1}, opset=opset)
    same(op, [x, np.zeros((0,), np.int64)], {"noop_with_empty_axes": 0}, opset=opset)
    same(op, [x], {"noop_with_empty_axes": 1}, opset=opset)


@pytest.mark.parametrize("op", _REDUCE_ALL)
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8, np.uint8])
def test_reductions_int(op, dtype):
    x = rand((3, 4, 2), dtype, 0 if op == "ReduceLogSum" else -1, 1)
    if op == "ReduceLogSum":
        x = np.abs(x) + 1
    same(op, [x], {"axes": [1]}, opset=11)
    same(op, [x], {"keepdims": 0}, opset=13 if op != "ReduceSum" else 11)
    same(op, [x, np.array([0, 2], np.int64)], opset=_INPUT_FROM.get(op, 18))


@pytest.mark.filterwarnings("ignore:Mean of empty slice")
@pytest.mark.parametrize("op", _REDUCE_ALL)
def test_reductions_of_empty_sets(op):
    x = np.zeros((2, 0, 3), np.float32)
    opset = _INPUT_FROM.get(op, 18)
    for axes in ([1], [0, 1], [2]):
        same(op, [x, np.array(axes, np.int64)], {"keepdims": 1}, opset=opset)
        same(op, [x, np.array(axes, np.int64)], {"keepdims": 0}, opset=opset)
    same(op, [np.array(2.5, np.float32)], opset=opset)                      # a 0-d input


def test_reduce_max_min_bool_and_nan():
    b = rand((3, 4), np.bool_)
    same("ReduceMax", [b, np.array([1], np.int64)], opset=20)
    same("ReduceMin", [b], {"keepdims": 0}, opset=20)
    same("ReduceMin", [np.zeros((0, 2), np.bool_), np.array([0], np.int64)], opset=20)
    x = np.array([[1.0, np.nan], [2.0, 3.0]], np.float32)
    same("ReduceMax", [x], {"axes": [1]}, opset=13)
    same("ReduceLogSumExp", [np.array([[np.inf, 1.0], [-np.inf, -np.inf]], np.float32)], {"axes": [1]}, opset=13)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.int64, BF16])
def test_argmax_argmin(op, dtype):
    x = rand((4, 5, 3), dtype, -2, 2)          # small range: repeated values, first vs last index
    for opset in (1, 11, 12, 13):
        for attrs in ({}, {"axis": 1}, {"axis": -1, "keepdims": 0}):
            same(op, [x], attrs, opset=opset)
    same(op, [x], {"axis": 1, "select_last_index": 1}, opset=12)
    same(op, [x], {"axis": 0, "select_last_index": 1, "keepdims": 0}, opset=13)


# ============================================================================ kernel table
