"""GatherElements (the compiled pass), ScatterND / ScatterElements with a reduction over wide
slices (combined in place, one update at a time) and CumSum (numpy's running sum written into
the output through views) on the cpu backend, against the portable kernels (the same node planned
under ``compiled.disabled()``) and onnxruntime 1.32 (one thread): random ranks, axes, negative
indices, partial index extents (the portable kernel), duplicates in every order, exclusive and
reverse, integer, float, float16 and bool data, empty extents, an index out of range (the
portable kernel's error).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import selection as loops  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.available(), reason="numba is not installed"),
              pytest.mark.usefixtures("warm_bodies")]

RNG = np.random.default_rng(4242)
ELEM = {np.dtype(np.float32): TP.FLOAT, np.dtype(np.float64): TP.DOUBLE, np.dtype(np.int64): TP.INT64,
        np.dtype(np.int32): TP.INT32, np.dtype(np.float16): TP.FLOAT16, np.dtype(np.bool_): TP.BOOL,
        np.dtype(np.int8): TP.INT8}


def trio(op, feeds: dict, attrs, opset, out_type):
    vis = [helper.make_tensor_value_info(n, ELEM[v.dtype], None) for n, v in feeds.items()]
    node = helper.make_node(op, list(feeds), ["y"], **attrs)
    g = helper.make_graph([node], op, vis, [helper.make_tensor_value_info("y", out_type, None)])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = InferenceSession(data, validate=False)
        with compiled.disabled():
            portable = InferenceSession(data, validate=False)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    return fast, portable, ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def outputs(sessions, feeds):
    return [s.run(None, feeds)[0] for s in sessions]


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16, np.bool_, np.int8])
def test_gather_elements(dtype, count_calls):
    spy = count_calls(loops, "_GATHER_ELEMENTS")
    expected = 0
    for trial in range(12):
        rank = 1 + trial % 3
        shape = tuple(int(v) for v in RNG.integers(1, 9, rank))
        axis = int(RNG.integers(-rank, rank))
        a = axis % rank
        ishape = list(shape)
        ishape[a] = int(RNG.integers(1, 12))
        partial = trial % 4 == 3 and rank > 1                 # a smaller extent elsewhere: the portable kernel
        if partial:
            b = (a + 1) % rank
            ishape[b] = max(1, shape[b] - 1)
        x = (RNG.standard_normal(shape) * 10).astype(dtype)
        idx = RNG.integers(-shape[a], shape[a], ishape).astype(np.int64 if trial % 2 else np.int32)
        feeds = {"x": x, "i": idx}
        fast, port, want = outputs(trio("GatherElements", feeds, {"axis": axis}, 13, ELEM[np.dtype(dtype)]), feeds)
        np.testing.assert_array_equal(fast, want)
        np.testing.assert_array_equal(port, want)
        assert fast.dtype == want.dtype
        expected += not (partial and ishape != list(shape[:a]) + [ishape[a]] + list(shape[a + 1:]))
    assert spy.calls == expected


def test_gather_elements_out_of_range_is_the_portable_error():
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "i": np.int64([[0, 3], [4, 1], [1, 1]])}
    s = trio("GatherElements", feeds, {"axis": 1}, 13, TP.FLOAT)
    with pytest.raises(Exception):
        s[2].run(None, feeds)
    for k in s[:2]:
        with pytest.raises(OnnxkitError, match="out of range"):
            k.run(None, feeds)


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_nd_wide_slices_with_duplicates(reduction):
    for trial in range(4):
        x = RNG.standard_normal((6, 40, 32)).astype(np.float32)       # slices of 1,280 elements
        idx = RNG.integers(-6, 6, (int(RNG.integers(1, 20)), 1))
        u = RNG.standard_normal((idx.shape[0], 40, 32)).astype(np.float32)
        feeds = {"x": x, "i": idx, "u": u}
        fast, port, want = outputs(trio("ScatterND", feeds, {"reduction": reduction}, 18, TP.FLOAT), feeds)
        np.testing.assert_array_equal(fast, want)                     # in order, as onnxruntime
        np.testing.assert_allclose(port, want, rtol=1e-5, atol=1e-5)


def test_scatter_elements_wide_slices_and_int_data():
    x = RNG.integers(-5, 5, (4, 2048)).astype(np.int64)
    idx = np.zeros((3, 2048), np.int64)
    idx[1] = 2
    u = RNG.integers(-5, 5, (3, 2048)).astype(np.int64)
    feeds = {"x": x, "i": idx, "u": u}
    fast, port, want = outputs(trio("ScatterElements", feeds, {"reduction": "add", "axis": 0}, 18, TP.INT64), feeds)
    np.testing.assert_array_equal(fast, want)
    np.testing.assert_array_equal(port, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.float16])
def test_cum_sum(dtype):
    for trial in range(16):
        rank = 1 + trial % 3
        shape = tuple(int(v) for v in RNG.integers(0 if trial == 5 else 1, 40, rank))
        x = (RNG.standard_normal(shape) * 100).astype(dtype)
        attrs = {"exclusive": trial % 2, "reverse": (trial // 2) % 2}
        feeds = {"x": x, "a": np.array(int(RNG.integers(-rank, rank)), np.int64)}
        fast, port, want = outputs(trio("CumSum", feeds, attrs, 14, ELEM[np.dtype(dtype)]), feeds)
        assert fast.dtype == want.dtype and fast.shape == want.shape
        np.testing.assert_array_equal(fast, port)                    # the same additions in the same order
        if dtype in (np.int32, np.int64):
            np.testing.assert_array_equal(fast, want)
        else:
            np.testing.assert_allclose(fast.astype(np.float64), want.astype(np.float64), rtol=2e-3, atol=1e-3)
