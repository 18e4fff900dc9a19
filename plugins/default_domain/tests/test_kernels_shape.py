"""The shape, layout, indexing and selection kernels (written once) on both backends.

Each test builds a one-node model, runs it on ``cpu`` (numpy) and ``gpu`` (torch; its CPU
device here) and compares with numpy's own answer; errors must name the node.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("torch")
from onnx import TensorProto, helper  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402

BACKENDS = ["cpu", "gpu"]
_TAG = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
        np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL,
        np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(np.uint8): TensorProto.UINT8}


def session(backend, op, inputs, attrs=None, opset=18, outs=("float32",), name="n0"):
    """A one-node model over ``inputs`` (arrays) with outputs of the given element types."""
    ins = [helper.make_tensor_value_info(f"x{k}", _TAG[np.asarray(v).dtype], list(np.shape(v)))
           for k, v in enumerate(inputs)]
    outputs = [helper.make_tensor_value_info(f"y{k}", _TAG[np.dtype(t)], None) for k, t in enumerate(outs)]
    node = helper.make_node(op, [f"x{k}" for k in range(len(inputs))], [f"y{k}" for k in range(len(outs))],
                            name=name, **(attrs or {}))
    m = helper.make_model(helper.make_graph([node], "g", ins, outputs), opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    sess = InferenceSession(m.SerializeToString(), backend, validate=False)
    return sess, {f"x{k}": np.asarray(v) for k, v in enumerate(inputs)}


def run(backend, op, inputs, attrs=None, opset=18, outs=("float32",)):
    sess, feed = session(backend, op, inputs, attrs, opset, outs)
    got = sess.run(None, feed)
    return got if len(outs) > 1 else got[0]


def i64(*v):
    return np.array(v, dtype=np.int64)


X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_reshape_zero_minus_one_and_allowzero(backend):
    np.testing.assert_array_equal(run(backend, "Reshape", [X, i64(0, -1)]), X.reshape(2, 12))
    empty = np.zeros((0, 3), np.float32)
    assert run(backend, "Reshape", [empty, i64(3, 0)], {"allowzero": 1}).shape == (3, 0)
    with pytest.raises(OnnxkitError, match=r"node 'n0' \(Reshape\).*cannot reshape"):
        run(backend, "Reshape", [X, i64(5, -1)])
    with pytest.raises(OnnxkitError, match="n0.*more than one -1"):
        run(backend, "Reshape", [X, i64(-1, -1)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_transpose_concat_split_squeeze(backend):
    np.testing.assert_array_equal(run(backend, "Transpose", [X], {"perm": [2, 0, 1]}), X.transpose(2, 0, 1))
    np.testing.assert_array_equal(run(backend, "Transpose", [X]), X.T)
    with pytest.raises(OnnxkitError, match="n0.*not a permutation"):
        run(backend, "Transpose", [X], {"perm": [0, 0, 1]})
    np.testing.assert_array_equal(run(backend, "Concat", [X, X[:, :1]], {"axis": 1}), np.concatenate([X, X[:, :1]], 1))
    with pytest.raises(OnnxkitError, match="n0.*cannot be joined"):
        run(backend, "Concat", [X, X[:1, :1]], {"axis": 1})
    parts = run(backend, "Split", [np.arange(7, dtype=np.float32)], {"num_outputs": 3}, outs=("float32",) * 3)
    assert [p.tolist() for p in parts] == [[0, 1, 2], [3, 4, 5], [6]]
    np.testing.assert_array_equal(run(backend, "Squeeze", [X[:1], i64(0)]), X[0])
    assert run(backend, "Unsqueeze", [X, i64(-1, 0)]).shape == (1, 2, 3, 4, 1)
    with pytest.raises(OnnxkitError, match="n0.*cannot squeeze axis 1"):
        run(backend, "Squeeze", [X, i64(1)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_expand_tile_shape_size_flatten(backend):
    np.testing.assert_array_equal(run(backend, "Expand", [X[:, :1], i64(3, 1)]), np.broadcast_to(X[:, :1], (2, 3, 4)))
    with pytest.raises(OnnxkitError, match="n0.*cannot expand"):
        run(backend, "Expand", [X, i64(5, 1)])
    np.testing.assert_array_equal(run(backend, "Tile", [X, i64(1, 2, 1)]), np.tile(X, (1, 2, 1)))
    assert run(backend, "Shape", [X], {"start": -2}, outs=("int64",)).tolist() == [3, 4]
    assert run(backend, "Size", [X], outs=("int64",)).tolist() == 24
    assert run(backend, "Flatten", [X], {"axis": -1}).shape == (6, 4)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_and_negative_pads(backend, mode):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    pads = i64(1, 2, 2, 1)
    want = np.pad(x, [(1, 2), (2, 1)], mode={"edge": "edge", "wrap": "wrap", "reflect": "reflect"}.get(mode, "constant"))
    np.testing.assert_array_equal(run(backend, "Pad", [x, pads], {"mode": mode}, opset=19), want)
    np.testing.assert_array_equal(run(backend, "Pad", [x, i64(-1, 0, 0, -2)], {"mode": mode}, opset=19), x[1:, :2])


@pytest.mark.parametrize("backend", BACKENDS)
def test_depth_space_trilu_reverse_sequence_center_crop(backend):
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2)
    y = run(backend, "DepthToSpace", [x], {"blocksize": 2, "mode": "CRD"})
    np.testing.assert_array_equal(run(backend, "SpaceToDepth", [y], {"blocksize": 2}, opset=13).shape, (1, 4, 2, 2))
    np.testing.assert_array_equal(y, x.reshape(1, 1, 2, 2, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(1, 1, 4, 4))
    m = np.arange(9, dtype=np.float32).reshape(3, 3)
    np.testing.assert_array_equal(run(backend, "Trilu", [m, np.array(1, np.int64)], {"upper": 0}), np.tril(m, 1))
    seq = np.arange(6, dtype=np.float32).reshape(3, 2)   # [time, batch]
    got = run(backend, "ReverseSequence", [seq, i64(2, 3)], {"batch_axis": 1, "time_axis": 0})
    np.testing.assert_array_equal(got, [[2, 5], [0, 3], [4, 1]])
    np.testing.assert_array_equal(run(backend, "CenterCropPad", [m, i64(1, 5)]), [[0, 3, 4, 5, 0]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_slice_negative_steps_and_clamping(backend):
    x = np.arange(30, dtype=np.float32).reshape(5, 6)
    for starts, ends, steps in [((-1, 0), (-100, 6), (-1, 2)), ((4, 5), (0, -7), (-2, -3)), ((0, 10), (5, 20), (1, 1)),
                                ((-10, 1), (-20, 5), (-1, 1))]:
        got = run(backend, "Slice", [x, i64(*starts), i64(*ends), i64(0, 1), i64(*steps)])
        want = x[slice(starts[0], ends[0], steps[0]), slice(starts[1], ends[1], steps[1])]
        np.testing.assert_array_equal(got, want, err_msg=str((starts, ends, steps)))
    with pytest.raises(OnnxkitError, match="n0.*step of 0"):
        run(backend, "Slice", [x, i64(0), i64(1), i64(0), i64(0)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_gather_family_and_out_of_range_indices_name_the_node(backend):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(run(backend, "Gather", [x, i64(-1, 0)], {"axis": 1}), x[:, [3, 0]])
    np.testing.assert_array_equal(run(backend, "Gather", [x, np.array(-3, np.int64)]), x[0])
    with pytest.raises(OnnxkitError, match=r"node 'n0' \(Gather\).*indices value 4 is out of range"):
        run(backend, "Gather", [x, i64(4)])
    idx = np.array([[0, -1], [2, 1], [1, 0]], np.int64)
    np.testing.assert_array_equal(run(backend, "GatherElements", [x, idx], {"axis": 1}),
                                  np.take_along_axis(x, idx % 4, 1))
    with pytest.raises(OnnxkitError, match=r"node 'n0' \(GatherElements\).*out of range"):
        run(backend, "GatherElements", [x, idx * 5], {"axis": 1})
    nd = np.array([[[0, 1]], [[2, -1]]], np.int64)
    np.testing.assert_array_equal(run(backend, "GatherND", [x, nd]), [[1], [11]])
    with pytest.raises(OnnxkitError, match=r"node 'n0' \(GatherND\).*out of range"):
        run(backend, "GatherND", [x, nd * 3])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_reductions_combine_duplicates(backend, reduction):
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    idx = np.array([[0, 0, 2], [1, 1, 1]], np.int64)
    upd = np.array([[2, 3, 4], [5, 6, 7]], np.float32)
    want = x.copy()
    op = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}.get(reduction)
    for i in range(2):
        for j in range(3):
            t = (i, idx[i, j])
            want[t] = upd[i, j] if op is None else op(want[t], upd[i, j])
    if reduction == "none":   # duplicates are unspecified without a reduction: use distinct targets
        idx = np.array([[0, 1, 2], [2, 0, 1]], np.int64)
        want = x.copy()
        np.put_along_axis(want, idx, upd, 1)
    np.testing.assert_array_equal(run(backend, "ScatterElements", [x, idx, upd], {"axis": 1, "reduction": reduction}), want)
    rows = np.array([[1], [-1], [0]], np.int64)
    upd_nd = np.ones((3, 3), np.float32) * 2
    want_nd = x.copy()
    for r in rows[:, 0]:
        want_nd[r] = upd_nd[0] if op is None else op(want_nd[r], upd_nd[0])
    if reduction != "none":
        np.testing.assert_array_equal(run(backend, "ScatterND", [x, rows, upd_nd], {"reduction": reduction}), want_nd)
    with pytest.raises(OnnxkitError, match=r"node 'n0' \(ScatterND\).*out of range"):
        run(backend, "ScatterND", [x, rows * 4, upd_nd], {"reduction": reduction})


@pytest.mark.parametrize("backend", BACKENDS)
def test_compress_one_hot_non_zero(backend):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run(backend, "Compress", [x, np.array([0, 1], bool)], {"axis": 1}), x[:, [1]])
    np.testing.assert_array_equal(run(backend, "Compress", [x, np.array([1, 0, 1], bool)]), [0, 2])
    got = run(backend, "OneHot", [i64(0, -1, 5), np.array(3, np.int64), np.array([0, 1], np.float32)])
    np.testing.assert_array_equal(got, [[1, 0, 0], [0, 0, 1], [0, 0, 0]])
    nz = run(backend, "NonZero", [np.array([[0, 1], [2, 0]], np.float32)], outs=("int64",))
    np.testing.assert_array_equal(nz, [[0, 1], [1, 0]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_topk_argmax_cumsum_unique(backend):
    x = np.array([[3, 1, 3, 2], [0, 5, 5, 5]], np.float32)
    vals, idx = run(backend, "TopK", [x, i64(2)], outs=("float32", "int64"))
    np.testing.assert_array_equal(idx, [[0, 2], [1, 2]])       # ties by the lower index
    vals, idx = run(backend, "TopK", [x, i64(2)], {"largest": 0}, outs=("float32", "int64"))
    np.testing.assert_array_equal(vals, [[1, 2], [0, 5]])
    got = run(backend, "ArgMax", [x], {"axis": 1, "select_last_index": 1}, outs=("int64",))
    np.testing.assert_array_equal(got, [[2], [3]])
    c = run(backend, "CumSum", [x, np.array(1, np.int64)], {"exclusive": 1, "reverse": 1})
    np.testing.assert_array_equal(c, [[6, 5, 2, 0], [15, 10, 5, 0]])
    y, first, inv, cnt = run(backend, "Unique", [np.array([2, 1, 2, 3], np.float32)], {"sorted": 0},
                             outs=("float32", "int64", "int64", "int64"))
    assert (y.tolist(), first.tolist(), inv.tolist(), cnt.tolist()) == ([2, 1, 3], [0, 1, 3], [0, 1, 0, 2], [2, 1, 1])


def test_on_gpu_these_nodes_run_on_gpu_not_on_the_fallback():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    cases = [("Reshape", [x, i64(4, 3)]), ("Gather", [x, i64(1)]), ("Slice", [x, i64(-1), i64(-5), i64(0), i64(-1)]),
             ("ScatterND", [x, i64(0).reshape(1, 1), x[:1]]), ("Pad", [x, i64(1, 1, 1, 1)])]
    for op, inputs in cases:
        sess, feed = session("gpu", op, inputs)
        assert sess.fallbacks == [], (op, sess.fallbacks)
        sess.run(None, feed)
