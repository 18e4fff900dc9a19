"""TopK and NonZero on the cpu backend: the overrides' fast paths (overrides/selection.py: the
compiled bounded heap and the value partition; overrides/indexing.py: the compiled NonZero)
against the portable kernels (the same node planned under ``compiled.disabled()``) and
onnxruntime 1.32 (one thread), exactly: random sizes, both axes, largest and smallest, k from 1
to n, heavy ties (ties by the lower index), integer, float and bool inputs, -0.0 and 0.0, inf,
NaN (the portable sort), empty tensors.  Spies count the compiled loops' calls.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import selection as loops  # noqa: E402
from onnxkit_cpu.overrides import selection as override  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.available(), reason="numba is not installed"),
              pytest.mark.usefixtures("warm_bodies")]

RNG = np.random.default_rng(3141)


def sessions(op, inputs, outputs, attrs, opset=13):
    vis = [helper.make_tensor_value_info(n, t, None) for n, t in inputs]
    outs = [helper.make_tensor_value_info(n, t, None) for n, t in outputs]
    node = helper.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], **attrs)
    data = helper.make_model(helper.make_graph([node], op, vis, outs), opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=8).SerializeToString()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = InferenceSession(data, validate=False)
        with compiled.disabled():
            portable = InferenceSession(data, validate=False)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    return fast, portable, ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def agree(trio, feeds):
    want = trio[2].run(None, feeds)
    for s in trio[:2]:
        for g, w in zip(s.run(None, feeds), want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)
            if g.dtype.kind == "f":
                np.testing.assert_array_equal(np.signbit(g), np.signbit(w))
    return want


ELEM = {np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.int64: TP.INT64, np.int32: TP.INT32, np.uint8: TP.UINT8}


def top_k_trio(dtype, axis, largest):
    t = ELEM[dtype]
    return sessions("TopK", [("x", t), ("k", TP.INT64)], [("v", t), ("i", TP.INT64)],
                    {"axis": axis, "largest": largest}, opset=11)


def data(dtype, shape, trial):
    if trial % 3 == 0:                      # heavy ties
        x = RNG.integers(-3, 4, shape)
    elif trial % 3 == 1:
        x = RNG.integers(-1000, 1000, shape)
    else:
        x = RNG.standard_normal(shape) * 100
    x = x.astype(dtype)
    if dtype in (np.float32, np.float64) and trial % 4 == 0:
        x.reshape(-1)[RNG.random(x.size) < 0.05] = -0.0
        x.reshape(-1)[RNG.random(x.size) < 0.02] = np.inf
        x.reshape(-1)[RNG.random(x.size) < 0.02] = -np.inf
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.uint8])
def test_top_k_matches_onnxruntime_and_the_portable_kernel(dtype, count_calls):
    spy = count_calls(loops, "_TOP_K")
    trios = {(a, lg): top_k_trio(dtype, a, lg) for a in (-1, 0) for lg in (0, 1)}
    for trial in range(24):
        axis, largest = (-1, 0)[trial % 2], (trial // 2) % 2
        n = int(RNG.integers(64, 3000))
        other = int(RNG.integers(1, 5))
        shape = (other, n) if axis == -1 else (n, other)
        k = int((1, 5, 17, n // 8, n // 5, n // 2, n, 0)[trial % 8])
        agree(trios[(axis, largest)], {"x": data(dtype, shape, trial), "k": np.int64([k])})
    assert spy.calls > 0


def test_top_k_large_axis_ties_straddle_the_cut():
    """A partition whose k-th value is tied with values outside the k (the value partition's
    tie rule) and a heap filled with ties."""
    trio = top_k_trio(np.float32, -1, 1)
    x = RNG.integers(0, 10, (3, 5000)).astype(np.float32)
    for k in (1, 7, 100, 499, 501, 1000, 1250, 2400):
        agree(trio, {"x": x, "k": np.int64([k])})


def test_top_k_nan_takes_the_portable_sort():
    trio = top_k_trio(np.float32, -1, 1)
    x = RNG.standard_normal((2, 500)).astype(np.float32)
    x[0, ::7] = np.nan
    got = trio[0].run(None, {"x": x, "k": np.int64([20])})
    want = trio[1].run(None, {"x": x, "k": np.int64([20])})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_top_k_partition_ties_by_the_lower_index():
    key = np.float32([[5, 1, 5, 5, 0, 5, 2, 5, 5, 3] * 8])
    order = override._partition(key, 20, True)
    np.testing.assert_array_equal(order, np.argsort(-key, axis=-1, kind="stable")[:, :20])
    order = override._partition(key, 20, False)
    np.testing.assert_array_equal(order, np.argsort(key, axis=-1, kind="stable")[:, :20])


@pytest.mark.parametrize("dtype,elem", [(np.float32, TP.FLOAT), (np.int64, TP.INT64), (np.bool_, TP.BOOL),
                                        (np.int32, TP.INT32), (np.uint8, TP.UINT8)])
def test_non_zero_matches_onnxruntime_and_the_portable_kernel(dtype, elem, count_calls):
    spy = count_calls(loops, "_NON_ZERO")
    trio = sessions("NonZero", [("x", elem)], [("y", TP.INT64)], {})
    shapes = [(1, 80, 840), (7,), (3, 0, 4), (2, 3, 4, 5), (1, 1), (50, 61)]
    for shape in shapes:
        for density in (0.0, 0.1, 0.9, 1.0):
            x = (RNG.random(shape) < density) * RNG.integers(1, 5, shape)
            x = x.astype(dtype)
            if dtype == np.float32 and x.size:
                x.reshape(-1)[0] = -0.0                       # zero
                x.reshape(-1)[-1] = np.nan                    # nonzero
            agree(trio, {"x": x})
    assert spy.calls == len(shapes) * 4


def test_top_k_unsorted_selects_the_same_elements_in_index_order(count_calls):
    """sorted = 0 (the order left open): the value partition returns the selection in index
    order; the same elements, ties by the lower index, as onnxruntime and the portable kernel."""
    t = ELEM[np.float32]
    trio = sessions("TopK", [("x", t), ("k", TP.INT64)], [("v", t), ("i", TP.INT64)], {"sorted": 0}, opset=11)
    for trial in range(6):
        x = data(np.float32, (3, 4000), trial)
        k = np.int64([(900, 1000, 100)[trial % 3]])     # 64k > n: the value partition
        got = trio[0].run(None, {"x": x, "k": k})
        assert (np.diff(got[1], axis=-1) > 0).all()
        np.testing.assert_array_equal(got[0], np.take_along_axis(x, got[1], -1))
        for other in (trio[1].run(None, {"x": x, "k": k}), trio[2].run(None, {"x": x, "k": k})):
            np.testing.assert_array_equal(got[1], np.sort(other[1], axis=-1))
