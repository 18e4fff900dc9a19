"""The ``onehot`` plan pass: ``MatMul(Cast(Equal(ids, 0..K-1)), W)`` read as the rows of W the ids
select; equal to the unfused plan and to onnxruntime, out-of-range ids giving zero rows, other
inputs running the original kernels, size limits as the MatMul's."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer_cases import TP, helper, init, model, off, only, ort

from onnxkit import InferenceSession, SessionOptions
from onnxkit.errors import LimitExceeded
from onnxkit.limits import Limits
from onnxkit.runtime.options import GraphOptimizationLevel

RNG = np.random.default_rng(11)
K, N = 10, 4
W = RNG.standard_normal((K, N)).astype(np.float32)


def build(ids_type=TP.INT32, iota=None, w=W, swap=False, extra_output=False, ids_shape=("B", "S", "L")):
    """ids -> Equal(ids, iota) -> Cast(float) -> MatMul(W) -> y (the graph's only output)."""
    dtype = {TP.INT32: np.int32, TP.INT64: np.int64, TP.UINT8: np.uint8}[ids_type]
    iota = np.arange(K, dtype=dtype).reshape(1, 1, K) if iota is None else iota
    pair = ["iota", "ids"] if swap else ["ids", "iota"]
    nodes = [helper.make_node("Equal", pair, ["e"]),
             helper.make_node("Cast", ["e"], ["c"], to=TP.FLOAT if w.dtype == np.float32 else TP.DOUBLE),
             helper.make_node("MatMul", ["c", "w"], ["y"])]
    lead = list(np.broadcast_shapes((1,) * (len(ids_shape) - 1), iota.shape[:-1])) if len(ids_shape) < iota.ndim \
        else list(ids_shape[:-1])
    outs = [helper.make_tensor_value_info("y", TP.FLOAT if w.dtype == np.float32 else TP.DOUBLE, lead + [w.shape[1]])]
    if extra_output:
        outs.append(helper.make_tensor_value_info("e", TP.BOOL, list(ids_shape[:-1]) + [None]))
    return model(nodes, [helper.make_tensor_value_info("ids", ids_type, list(ids_shape))], outs,
                 [init("iota", iota), init("w", w)]).SerializeToString()


def ops(s):
    return [st.op for st in s.plan.steps]


def check(proto, feed, fused: bool):
    """The pass alone fuses (or not); results equal the pass-off plan, the optimizer-off run and
    onnxruntime (one-hot products are exact: equal, a zero's sign aside)."""
    s = InferenceSession(proto, only("onehot"))
    assert ops(s) == (["MatMul"] if fused else ["Equal", "Cast", "MatMul"])
    got = s.run(None, feed)[0]
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "onehot")
    for ref in (InferenceSession(proto, so).run(None, feed)[0], InferenceSession(proto, off()).run(None, feed)[0],
                ort.InferenceSession(proto, providers=["CPUExecutionProvider"]).run(None, feed)[0]):
        assert got.dtype == ref.dtype and got.shape == ref.shape
        assert np.array_equal(got, ref, equal_nan=True)
    return got


@pytest.mark.parametrize("ids_type", [TP.INT32, TP.INT64, TP.UINT8])
def test_ids_become_rows_and_out_of_range_ids_zeros(ids_type):
    dtype = {TP.INT32: np.int32, TP.INT64: np.int64, TP.UINT8: np.uint8}[ids_type]
    ids = RNG.integers(0, K, (2, 6, 1)).astype(dtype)
    ids[0, 0, 0], ids[1, 5, 0] = K, 200                      # past the end: no match, a row of zeros
    if dtype != np.uint8:
        ids[0, 3, 0] = -1
    got = check(build(ids_type), {"ids": ids}, fused=True)
    flat = ids.reshape(-1).astype(np.int64)
    want = np.where(((flat >= 0) & (flat < K))[:, None], W[np.clip(flat, 0, K - 1)], 0).reshape(2, 6, N)
    assert np.array_equal(got, want)


def test_iota_first_and_float64():
    w = RNG.standard_normal((K, N))
    check(build(swap=True, w=w), {"ids": RNG.integers(-2, K + 2, (3, 6, 1)).astype(np.int32)}, fused=True)


def test_ids_compared_elementwise_run_the_original_kernels():
    # a last extent of K: Equal compares elementwise, the Cast gives 0/1 rows with many ones
    check(build(), {"ids": RNG.integers(0, 3, (2, 6, K)).astype(np.int32)}, fused=True)


def test_one_dimensional_ids():
    proto = build(iota=np.arange(K, dtype=np.int32), ids_shape=[1])
    got = check(proto, {"ids": np.array([3], np.int32)}, fused=True)
    assert got.shape == (N,) and np.array_equal(got, W[3])


def test_left_alone_where_it_would_not_be_exact_or_safe():
    ids = {"ids": RNG.integers(0, K, (2, 6, 1)).astype(np.int32)}
    w = W.copy()
    w[2, 1] = np.inf                                          # 0 * inf is NaN in every row
    check(build(w=w), ids, fused=False)
    check(build(iota=np.arange(K, dtype=np.int32)[::-1].reshape(1, 1, K).copy()), ids, fused=False)
    check(build(iota=np.tile(np.arange(K, dtype=np.int32), (2, 1, 1))), ids, fused=False)   # a leading axis of 2
    s = InferenceSession(build(extra_output=True), only("onehot"))
    assert ops(s) == ["Equal", "Cast", "MatMul"]


def test_switched_off_by_level_and_by_name():
    so = SessionOptions()
    so.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_BASIC
    assert ops(InferenceSession(build(), so)) == ["Equal", "Cast", "MatMul"]
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "onehot")
    assert ops(InferenceSession(build(), so)) == ["Equal", "Cast", "MatMul"]
    assert ops(InferenceSession(build())) == ["MatMul"]


@pytest.mark.parametrize("last", [1, K])
def test_a_product_over_the_limit_is_refused_before_it_is_made(last):
    # a (64, 64, N) float result is 64 KiB, the one-hot it replaces (64, 64, K) bools 40 KiB: the
    # fused rows are refused by the MatMul's guard, the original kernels (another last extent,
    # or the pass off) by the Equal's, each before anything is allocated
    feed = {"ids": np.zeros((64, 64, last), np.int32)}
    limits = Limits(max_value_bytes=32 << 10, max_run_bytes=1 << 30)
    for so, op in ((only("onehot"), "MatMul" if last == 1 else "Equal"), (off(), "Equal")):
        with pytest.raises(LimitExceeded, match=rf"\({op}\) requests outputs of"):
            InferenceSession(build(), so, limits=limits).run(None, feed)
