"""Tensor manipulation, indexing, generator and reduction kernels of the cpu backend.

Behaviour the ONNX node vectors do not cover: the old operator versions (attribute forms of
Reshape-1, Split-1/2, Squeeze-1, Unsqueeze-1, Pad-1/2, Slice-1, TopK-1, Tile-1, the reduction
axes attribute), defaults that changed between versions, the reduction and mode sets each
version allows, negative pads, empty reductions, dtype preservation, and errors that must name
the node.  Expected values are hand-computed, or come from ``onnx.reference`` used as an
oracle (test-only import).
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from onnxkit.api import load  # noqa: E402
from onnxkit.errors import EvaluationError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402


def _elem(a: np.ndarray) -> int:
    if a.dtype == object:
        return TensorProto.STRING
    return helper.np_dtype_to_tensor_dtype(a.dtype)


def build(op, opset, inputs, attrs=None, n_out=1, out_rank=None):
    """A one-node model: ``inputs`` is a list of arrays (None = omitted optional input).

    Graph outputs must be typed with a rank: element type and rank come from onnx's type
    inference (extents left unknown), or ``out_rank`` where inference cannot tell.
    """
    names = [f"i{k}" if v is not None else "" for k, v in enumerate(inputs)]
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph_inputs = [helper.make_tensor_value_info(n, _elem(v), list(v.shape))
                    for n, v in zip(names, inputs) if v is not None]
    opsets = [helper.make_opsetid("", opset)]
    probe = helper.make_model(helper.make_graph([node], "g", graph_inputs, []), opset_imports=opsets, ir_version=7)
    try:
        inferred = {vi.name: vi.type.tensor_type for vi in onnx.shape_inference.infer_shapes(probe).graph.value_info}
    except Exception:   # inputs the tests make invalid on purpose
        inferred = {}
    first = next((v for v in inputs if v is not None), None)
    outputs = []
    for k, o in enumerate(outs):
        t = inferred.get(o)
        elem = t.elem_type if t is not None and t.elem_type else (_elem(first) if first is not None else TensorProto.FLOAT)
        rank = len(t.shape.dim) if t is not None and t.HasField("shape") else None
        if out_rank is not None:
            rank = out_rank[k] if isinstance(out_rank, (list, tuple)) else out_rank
        if rank is None:
            rank = first.ndim if first is not None else 0
        outputs.append(helper.make_tensor_value_info(o, elem, [None] * rank))
    graph = helper.make_graph([node], "g", graph_inputs, outputs)
    model = helper.make_model(graph, opset_imports=opsets, ir_version=7)
    return model, {n: v for n, v in zip(names, inputs) if v is not None}


def run(op, opset, inputs, attrs=None, n_out=1, out_rank=None):
    model, feed = build(op, opset, inputs, attrs, n_out, out_rank)
    # validate=False: the harness guesses the declared output rank; validation is tested in tests/checker
    outs = InferenceSession(load(model.SerializeToString()), validate=False).run(None, feed)
    return outs if n_out > 1 else outs[0]


def oracle(op, opset, inputs, attrs=None, n_out=1):
    from onnx.reference import ReferenceEvaluator

    model, feed = build(op, opset, inputs, attrs, n_out)
    outs = ReferenceEvaluator(model).run(None, feed)
    return outs if n_out > 1 else outs[0]


def same(got, want):
    want = np.asarray(want)
    assert isinstance(got, np.ndarray)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    else:
        np.testing.assert_array_equal(got, want)


f32 = lambda *a: np.array(*a, dtype=np.float32)  # noqa: E731
i64 = lambda *a: np.array(*a, dtype=np.int64)  # noqa: E731
X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# -- Reshape / Transpose / Concat / Flatten ----------------------------------------------------
def test_reshape_v1_shape_attribute():
    same(run("Reshape", 1, [X], {"shape": [4, 0, -1]}), X.reshape(4, 3, 2))


def test_reshape_zero_copies_unless_allowzero():
    empty = np.zeros((0, 3), dtype=np.float32)
    with pytest.raises(EvaluationError):        # the 0 copies extent 3: 9 elements wanted, 0 held
        run("Reshape", 13, [empty, i64([3, 0])])
    same(run("Reshape", 14, [empty, i64([3, 0])], {"allowzero": 1}), np.zeros((3, 0), np.float32))
    same(run("Reshape", 5, [X, i64([0, -1])]), X.reshape(2, 12))


def test_reshape_rejects_bad_shapes():
    with pytest.raises(EvaluationError, match="Reshape"):
        run("Reshape", 13, [X, i64([5, -1])])
    with pytest.raises(EvaluationError):
        run("Reshape", 13, [X, i64([-1, -1])])


def test_transpose_default_reverses_axes():
    same(run("Transpose", 1, [X]), X.transpose(2, 1, 0))
    same(run("Transpose", 13, [X], {"perm": [1, 0, 2]}), X.transpose(1, 0, 2))


def test_concat_v1_default_axis_is_one():
    a, b = f32([[1, 2]]), f32([[3]])
    same(run("Concat", 1, [a, b]), f32([[1, 2, 3]]))
    same(run("Concat", 4, [a, f32([[5, 6]])], {"axis": 0}), f32([[1, 2], [5, 6]]))


def test_concat_strings():
    a = np.array(["a", "b"], dtype=object)
    got = run("Concat", 13, [a, np.array(["c"], dtype=object)], {"axis": 0})
    assert [v.decode() if isinstance(v, bytes) else v for v in got.tolist()] == ["a", "b", "c"]


def test_flatten_axis_zero_and_end():
    same(run("Flatten", 1, [X], {"axis": 0}), X.reshape(1, 24))
    same(run("Flatten", 13, [X], {"axis": 3}), X.reshape(24, 1))
    same(run("Flatten", 11, [X], {"axis": -1}), X.reshape(6, 4))


# -- Split -------------------------------------------------------------------------------------
def test_split_v1_lengths_from_second_input():
    x = np.arange(6, dtype=np.float32)
    a, b = run("Split", 1, [x, f32([2, 4])], {"axis": 0}, n_out=2)   # Split-1 types the lengths as T
    same(a, x[:2])
    same(b, x[2:])


def test_split_v2_attribute_and_equal_parts():
    x = np.arange(6, dtype=np.float32)
    parts = run("Split", 2, [x], {"split": [1, 5]}, n_out=2)
    same(parts[1], x[1:])
    parts = run("Split", 11, [x], {}, n_out=3)
    same(parts[2], x[4:])


def test_split_uneven_needs_opset18():
    x = np.arange(5, dtype=np.float32)
    with pytest.raises(EvaluationError, match="equal"):
        run("Split", 13, [x], {}, n_out=2)
    a, b = run("Split", 18, [x], {"num_outputs": 2}, n_out=2)
    same(a, x[:3])
    same(b, x[3:])


# -- Squeeze / Unsqueeze -----------------------------------------------------------------------
def test_squeeze_attribute_and_input_forms():
    x = np.zeros((1, 3, 1, 2), dtype=np.float32)
    assert run("Squeeze", 1, [x], {"axes": [0]}).shape == (3, 1, 2)
    assert run("Squeeze", 11, [x], {"axes": [-2]}).shape == (1, 3, 2)
    assert run("Squeeze", 13, [x]).shape == (3, 2)
    assert run("Squeeze", 13, [x, i64([2])]).shape == (1, 3, 2)
    with pytest.raises(EvaluationError):
        run("Squeeze", 13, [x, i64([1])])


def test_unsqueeze_attribute_and_input_forms():
    x = np.zeros((3, 4), dtype=np.float32)
    assert run("Unsqueeze", 1, [x], {"axes": [0, 3]}).shape == (1, 3, 4, 1)
    assert run("Unsqueeze", 11, [x], {"axes": [-1]}).shape == (3, 4, 1)
    assert run("Unsqueeze", 13, [x, i64([1, 0])]).shape == (1, 1, 3, 4)
    with pytest.raises(EvaluationError):
        run("Unsqueeze", 13, [x, i64([0, 0])])


# -- Expand / Tile -----------------------------------------------------------------------------
def test_expand_shape_may_be_smaller():
    x = f32([[1], [2]])
    same(run("Expand", 8, [x, i64([3])]), f32([[1, 1, 1], [2, 2, 2]]))
    same(run("Expand", 13, [x, i64([2, 1, 1])]), np.broadcast_to(x, (2, 2, 1)))
    with pytest.raises(EvaluationError):
        run("Expand", 13, [x, i64([3, 3])])


def test_tile_v1_tiles_and_axis_inputs():
    x = f32([[1, 2]])
    same(run("Tile", 1, [x, f32(3), f32(0)]), f32([[1, 2], [1, 2], [1, 2]]))   # Tile-1 types tiles/axis as T
    same(run("Tile", 6, [x, i64([2, 2])]), f32([[1, 2, 1, 2], [1, 2, 1, 2]]))


# -- Pad ---------------------------------------------------------------------------------------
P = f32([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]])


def test_pad_v1_paddings_and_value():
    got = run("Pad", 1, [P], {"paddings": [0, 2, 0, 0], "value": 1.5})
    same(got, f32([[1.5, 1.5, 1.0, 1.2], [1.5, 1.5, 2.3, 3.4], [1.5, 1.5, 4.5, 5.7]]))


def test_pad_v2_reflect_and_edge():
    same(run("Pad", 2, [P], {"pads": [0, 2, 0, 0], "mode": "reflect"}),
         f32([[1.0, 1.2, 1.0, 1.2], [2.3, 3.4, 2.3, 3.4], [4.5, 5.7, 4.5, 5.7]]))
    same(run("Pad", 2, [P], {"pads": [1, 0, 0, 0], "mode": "edge"}), np.vstack([P[:1], P]))


def test_pad_negative_pads_remove():
    got = run("Pad", 11, [P, i64([-1, 1, 0, -1])], {"mode": "constant"})
    same(got, f32([[0, 2.3], [0, 4.5]]))


def test_pad_constant_value_and_axes():
    x = np.array([[1, 2]], dtype=np.int32)
    same(run("Pad", 11, [x, i64([0, 1, 0, 0]), np.array(7, dtype=np.int32)]), np.array([[7, 1, 2]], np.int32))
    same(run("Pad", 18, [x, i64([2, 0]), np.array(9, np.int32), i64([-1])]), np.array([[9, 9, 1, 2]], np.int32))


def test_pad_wrap_only_from_v19():
    x = f32([[1, 2, 3]])
    same(run("Pad", 19, [x, i64([0, 2, 0, 1])], {"mode": "wrap"}), f32([[2, 3, 1, 2, 3, 1]]))
    with pytest.raises(EvaluationError, match="wrap"):
        run("Pad", 18, [x, i64([0, 2, 0, 1])], {"mode": "wrap"})


def test_pad_bool_and_string_defaults():
    b = np.array([True], dtype=bool)
    same(run("Pad", 18, [b, i64([1, 0])]), np.array([False, True]))
    s = np.array(["x"], dtype=object)
    got = run("Pad", 18, [s, i64([0, 1])])
    assert [v.decode() if isinstance(v, bytes) else v for v in got.tolist()] == ["x", ""]


# -- Shape / Size / DepthToSpace / SpaceToDepth -------------------------------------------------
def test_shape_start_end_only_from_v15():
    same(run("Shape", 15, [X], {"start": -2, "end": 10}), i64([3, 4]))
    same(run("Shape", 1, [X]), i64([2, 3, 4]))
    same(run("Size", 1, [X]), i64(24))


def test_depth_space_roundtrip_crd():
    x = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
    for mode in ("DCR", "CRD"):
        y = run("DepthToSpace", 13, [x], {"blocksize": 2, "mode": mode})
        assert y.shape == (2, 2, 4, 6)
        same(run("SpaceToDepth", 28, [y], {"blocksize": 2, "mode": mode}), x)
    same(run("DepthToSpace", 1, [x], {"blocksize": 2}), run("DepthToSpace", 11, [x], {"blocksize": 2, "mode": "DCR"}))
    same(run("SpaceToDepth", 28, [x[:, :, :, :2]], {"blocksize": 2, "mode": "CRD"}),
         oracle("SpaceToDepth", 28, [x[:, :, :, :2]], {"blocksize": 2, "mode": "CRD"}))


# -- CenterCropPad / ReverseSequence / Trilu / Compress -----------------------------------------
def test_center_crop_pad_odd_sizes():
    x = np.arange(5, dtype=np.int32)
    same(run("CenterCropPad", 18, [x, i64([2])]), np.array([1, 2], np.int32))     # crop start rounds down
    # odd padding: the extra element goes to the right
    same(run("CenterCropPad", 18, [x, i64([8])]), np.array([0, 0, 1, 2, 3, 4, 0, 0], np.int32))


def test_reverse_sequence_time_major():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)   # time 4, batch 3
    got = run("ReverseSequence", 10, [x, i64([4, 1, 2])], {"time_axis": 0, "batch_axis": 1})
    want = x.copy()
    want[:, 0] = x[::-1, 0]
    want[:2, 2] = x[1::-1, 2]
    same(got, want)


def test_trilu_k():
    x = np.arange(1, 13, dtype=np.int64).reshape(3, 4)
    same(run("Trilu", 14, [x, i64(1)]), np.triu(x, 1))
    same(run("Trilu", 14, [x, i64(-1)], {"upper": 0}), np.tril(x, -1))
    same(run("Trilu", 14, [np.ones((2, 2, 2), bool)], {"upper": 0}), np.tril(np.ones((2, 2, 2), bool)))


def test_compress_short_condition_and_flatten():
    x = f32([[1, 2], [3, 4], [5, 6]])
    same(run("Compress", 11, [x, np.array([False, True])], {"axis": 0}), f32([[3, 4]]))
    same(run("Compress", 9, [x, np.array([True, False, True])]), f32([1, 3]))
    with pytest.raises(EvaluationError):
        run("Compress", 11, [x, np.array([True] * 4)], {"axis": 0})


# -- Slice -------------------------------------------------------------------------------------
def test_slice_v1_attributes():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    same(run("Slice", 1, [x], {"starts": [0, 1], "ends": [-1, 1000]}), x[0:1, 1:])
    same(run("Slice", 1, [x], {"starts": [1], "ends": [3], "axes": [1]}), x[:, 1:3])


def test_slice_negative_steps_clamp():
    x = np.arange(5, dtype=np.int32)
    big = np.iinfo(np.int64)
    same(run("Slice", 10, [x, i64([big.max]), i64([big.min]), i64([0]), i64([-1])]), x[::-1])
    same(run("Slice", 13, [x, i64([-1]), i64([-6]), None, i64([-2])]), x[::-2])
    same(run("Slice", 13, [x, i64([-10]), i64([3]), None, i64([-1])]), x[:0])
    with pytest.raises(EvaluationError, match="step"):
        run("Slice", 13, [x, i64([0]), i64([3]), i64([0]), i64([0])])


# -- Gather family -----------------------------------------------------------------------------
def test_gather_out_of_range_names_the_node():
    with pytest.raises(EvaluationError, match="Gather.*out of range"):
        run("Gather", 13, [X, i64([2])])
    same(run("Gather", 1, [X, i64([[-1, 0]])], {"axis": 2}), X[:, :, [[3, 0]]])


def test_gather_elements_smaller_indices():
    x = np.arange(9, dtype=np.int32).reshape(3, 3)
    idx = i64([[2, -3]])
    same(run("GatherElements", 11, [x, idx], {"axis": 1}), np.array([[2, 0]], np.int32))


def test_gather_nd_batch_dims():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = i64([[[1, 2], [0, -1]], [[2, 0], [1, 1]]])
    same(run("GatherND", 12, [x, idx], {"batch_dims": 1}), oracle("GatherND", 12, [x, idx], {"batch_dims": 1}))
    idx0 = i64([[1], [0]])
    same(run("GatherND", 11, [x, idx0]), x[[1, 0]])


# -- Scatter family ----------------------------------------------------------------------------
def test_scatter_v9_is_scatter_elements():
    data = np.zeros((3, 3), dtype=np.float32)
    idx = i64([[1, 0, 2], [0, 2, 1]])
    upd = f32([[1.0, 1.1, 1.2], [2.0, 2.1, 2.2]])
    want = f32([[2.0, 1.1, 0.0], [1.0, 0.0, 2.2], [0.0, 2.1, 1.2]])
    same(run("Scatter", 9, [data, idx, upd]), want)
    same(run("ScatterElements", 11, [data, idx, upd]), want)


def test_scatter_elements_reduction_versions():
    data = f32([[1, 2, 3, 4, 5]])
    idx, upd = i64([[1, 1]]), f32([[10, 20]])
    same(run("ScatterElements", 16, [data, idx, upd], {"axis": 1, "reduction": "add"}), f32([[1, 32, 3, 4, 5]]))
    same(run("ScatterElements", 16, [data, idx, upd], {"axis": 1, "reduction": "mul"}), f32([[1, 400, 3, 4, 5]]))
    same(run("ScatterElements", 18, [data, idx, upd], {"axis": 1, "reduction": "min"}), data)
    # max/min come with version 18; computed at 16 too, as onnxruntime does (a checker warning, refused under strict)
    same(run("ScatterElements", 16, [data, idx, upd], {"axis": 1, "reduction": "max"}), f32([[1, 20, 3, 4, 5]]))
    with pytest.raises(EvaluationError, match="reduction 'max'"):   # before 16 no reduction at all
        run("ScatterElements", 13, [data, idx, upd], {"axis": 1, "reduction": "max"})


def test_scatter_nd_slices_and_duplicates_add():
    data = np.arange(8, dtype=np.int64).reshape(4, 2)
    same(run("ScatterND", 11, [data, i64([[3], [0]]), i64([[9, 9], [7, 7]])]), i64([[7, 7], [2, 3], [4, 5], [9, 9]]))
    same(run("ScatterND", 16, [data, i64([[0, 1], [0, 1]]), i64([5, 6])], {"reduction": "add"}),
         i64([[0, 12], [2, 3], [4, 5], [6, 7]]))
    with pytest.raises(EvaluationError, match="out of range"):
        run("ScatterND", 13, [data, i64([[4]]), i64([[1, 1]])])


# -- OneHot / NonZero --------------------------------------------------------------------------
def test_one_hot_float_indices_and_axis():
    got = run("OneHot", 9, [f32([1.7, -1, 5]), f32(3), f32([0, 2])], {"axis": 0})
    same(got, f32([[0, 0, 0], [2, 0, 0], [0, 2, 0]]))


def test_non_zero():
    same(run("NonZero", 9, [np.array([[1, 0], [0, 3]], np.int32)]), i64([[0, 1], [0, 1]]))
    same(run("NonZero", 13, [np.array([False, True])]), i64([[1]]))


# -- TopK / ArgMax / ArgMin --------------------------------------------------------------------
def test_top_k_v1_attribute_k():
    x = f32([[3, 1, 3, 2]])
    v, i = run("TopK", 1, [x], {"k": 2}, n_out=2)
    same(v, f32([[3, 3]]))
    same(i, i64([[0, 2]]))


def test_top_k_v10_input_and_v11_smallest():
    v, i = run("TopK", 10, [f32([[5, 1, 1, 7]]), i64([3])], n_out=2)
    same(v, f32([[7, 5, 1]]))
    same(i, i64([[3, 0, 1]]))
    x = np.array([[5, 1, 1, 7]], dtype=np.uint64)
    v, i = run("TopK", 11, [x, i64([2])], {"largest": 0}, n_out=2)
    same(v, np.array([[1, 1]], np.uint64))
    same(i, i64([[1, 2]]))
    with pytest.raises(EvaluationError):
        run("TopK", 11, [x, i64([5])], n_out=2)


def test_arg_max_min_versions():
    x = f32([[1, 5, 5], [7, 0, 7]])
    same(run("ArgMax", 1, [x]), i64([[1, 0, 1]]))
    same(run("ArgMax", 11, [x], {"axis": -1, "keepdims": 0}), i64([1, 0]))
    same(run("ArgMax", 12, [x], {"axis": 1, "select_last_index": 1}), i64([[2], [2]]))
    same(run("ArgMin", 13, [x], {"axis": 1, "select_last_index": 1, "keepdims": 0}), i64([0, 1]))


# -- Unique / CumSum ---------------------------------------------------------------------------
def test_unique_first_occurrence_order():
    x = np.array([2, 1, 1, 3, 4, 3], dtype=np.int32)
    y, idx, inv, cnt = run("Unique", 11, [x], {"sorted": 0}, n_out=4)
    same(y, np.array([2, 1, 3, 4], np.int32))
    same(idx, i64([0, 1, 3, 4]))
    same(inv, i64([0, 1, 1, 2, 3, 2]))
    same(cnt, i64([1, 2, 2, 1]))


def test_cumsum_keeps_int32_and_reverse_exclusive():
    x = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    same(run("CumSum", 11, [x, np.array(1, np.int32)], {"exclusive": 1, "reverse": 1}),
         np.array([[5, 3, 0], [11, 6, 0]], np.int32))
    same(run("CumSum", 14, [x, i64(-2)]), np.array([[1, 2, 3], [5, 7, 9]], np.int32))


# -- Constant / ConstantOfShape / Range / EyeLike -----------------------------------------------
def test_constant_every_form():
    t = helper.make_tensor("t", TensorProto.DOUBLE, [2], [4, 5])
    same(run("Constant", 1, [], {"value": t}), np.array([4, 5], np.float64))
    t = helper.make_tensor("t", TensorProto.INT32, [2], [4, 5])
    same(run("Constant", 9, [], {"value": t}), np.array([4, 5], np.int32))
    same(run("Constant", 12, [], {"value_float": 2.5}), np.array(2.5, np.float32))
    same(run("Constant", 12, [], {"value_floats": [1.0, 2.0]}), f32([1, 2]))
    same(run("Constant", 13, [], {"value_int": 7}), i64(7))
    same(run("Constant", 13, [], {"value_ints": [7, 8]}), i64([7, 8]))
    got = run("Constant", 19, [], {"value_strings": ["ab", "c"]})
    assert got.shape == (2,) and [v.decode() if isinstance(v, bytes) else v for v in got.tolist()] == ["ab", "c"]
    got = run("Constant", 12, [], {"value_string": "z"})
    assert got.shape == () and got.item() in ("z", b"z")
    sp = helper.make_sparse_tensor(helper.make_tensor("v", TensorProto.FLOAT, [2], [1.5, 2.5]),
                                   helper.make_tensor("i", TensorProto.INT64, [2], [1, 4]), [2, 3])
    same(run("Constant", 11, [], {"sparse_value": sp}), f32([[0, 1.5, 0], [0, 2.5, 0]]))


def test_constant_of_shape():
    same(run("ConstantOfShape", 9, [i64([2, 0])]), np.zeros((2, 0), np.float32))
    v = helper.make_tensor("v", TensorProto.INT32, [1], [3])
    same(run("ConstantOfShape", 20, [i64([2])], {"value": v}), np.array([3, 3], np.int32))


def test_range_exact_counts():
    same(run("Range", 11, [np.array(10, np.int32), np.array(4, np.int32), np.array(-3, np.int32)]),
         np.array([10, 7], np.int32))
    same(run("Range", 11, [f32(0), f32(1), f32(0.25)]), f32([0, 0.25, 0.5, 0.75]))
    h = np.float16
    got = run("Range", 27, [np.array(2048, h), np.array(2052, h), np.array(1, h)])
    assert got.dtype == np.float16 and got.shape == (4,)


def test_eye_like_dtype_and_k():
    same(run("EyeLike", 9, [np.zeros((2, 3), np.int32)], {"k": 1}), np.eye(2, 3, 1, dtype=np.int32))
    same(run("EyeLike", 22, [np.zeros((2, 2), np.float32)], {"dtype": TensorProto.DOUBLE}), np.eye(2))


# -- Reductions --------------------------------------------------------------------------------
def test_reduce_axes_attribute_versions():
    same(run("ReduceSum", 1, [X], {"axes": [0, 2]}), X.sum(axis=(0, 2), keepdims=True))
    same(run("ReduceSum", 11, [X], {"axes": [-1], "keepdims": 0}), X.sum(axis=-1))
    same(run("ReduceMean", 13, [X], {"axes": [1]}), X.mean(axis=1, keepdims=True))
    same(run("ReduceMax", 12, [X.astype(np.int8)]), np.full((1, 1, 1), 23, np.int8))


def test_reduce_axes_input_and_noop():
    same(run("ReduceSum", 13, [X, i64([1])], {"keepdims": 0}), X.sum(axis=1))
    same(run("ReduceSum", 13, [X, i64([])], {"noop_with_empty_axes": 1}), X)
    same(run("ReduceSumSquare", 18, [X], {"noop_with_empty_axes": 1}), X * X)
    same(run("ReduceLogSum", 18, [X + 1, None], {"noop_with_empty_axes": 1}), np.log(X + 1))
    same(run("ReduceProd", 18, [X], {"keepdims": 0}), np.array(0, np.float32))


def test_reduce_empty_sets():
    e = np.zeros((2, 0), dtype=np.int32)
    same(run("ReduceMin", 18, [e, i64([1])]), np.full((2, 1), np.iinfo(np.int32).max, np.int32))
    same(run("ReduceMax", 13, [np.zeros((0, 2), np.float32)], {"axes": [0], "keepdims": 0}), f32([-np.inf, -np.inf]))
    same(run("ReduceProd", 18, [np.zeros((0,), np.float32)]), f32([1]))
    same(run("ReduceLogSumExp", 18, [np.zeros((0,), np.float32)], {"keepdims": 0}), f32(-np.inf))
    same(run("ReduceMin", 20, [np.zeros((0,), bool)]), np.array([True]))


def test_reduce_bool_v20_and_dtypes():
    b = np.array([[True, False], [False, False]])
    same(run("ReduceMax", 20, [b, i64([1])], {"keepdims": 0}), np.array([True, False]))
    same(run("ReduceMin", 20, [b, i64([0])], {"keepdims": 0}), np.array([False, False]))
    xi = np.array([[3, 4]], dtype=np.int32)
    same(run("ReduceL2", 18, [xi]), np.array([[5]], np.int32))
    same(run("ReduceSum", 13, [xi]), np.array([[7]], np.int32))
    xh = np.full(4096, 0.1, dtype=np.float16)
    got = run("ReduceSum", 13, [xh])
    assert got.dtype == np.float16 and abs(float(got[0]) - 409.6) < 0.5   # float16 accumulation would stall at 256


def test_reduce_log_sum_exp_stable():
    x = f32([[1000, 1000], [-np.inf, 0]])
    got = run("ReduceLogSumExp", 13, [x], {"axes": [1], "keepdims": 0})
    same(got, f32([1000 + np.log(2), 0]))


def test_reduce_repeated_axis_fails():
    with pytest.raises(EvaluationError, match="repeats"):
        run("ReduceSum", 13, [X, i64([1, -2])])


# -- the fast paths agree with the plain definitions --------------------------------------------
@pytest.mark.parametrize("k", [3, 40, 150])          # k passes of argmax / argpartition / full sort
@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_paths_break_ties_by_lower_index(k, largest):
    x = np.random.default_rng(k).integers(0, 10, size=(2, 200)).astype(np.int32)   # many ties
    v, i = run("TopK", 11, [x, i64([k])], {"largest": largest}, n_out=2)
    for row in range(2):
        want = sorted(range(200), key=lambda j: (-x[row, j] if largest else x[row, j], j))[:k]
        same(i[row], i64(want))
        same(v[row], x[row, want])


def test_scatter_nd_add_wide_slices_with_duplicates():
    data = np.zeros((4, 32), dtype=np.float32)
    idx = i64([[1], [3], [1], [1]])
    upd = np.arange(4 * 32, dtype=np.float32).reshape(4, 32)
    want = data.copy()
    for j, r in enumerate([1, 3, 1, 1]):
        want[r] += upd[j]
    same(run("ScatterND", 16, [data, idx, upd], {"reduction": "add"}), want)
    want_mul = np.ones_like(data)
    for j, r in enumerate([1, 3, 1, 1]):
        want_mul[r] *= upd[j]
    same(run("ScatterND", 16, [np.ones_like(data), idx, upd], {"reduction": "mul"}), want_mul)


@pytest.mark.parametrize("axes", [[2, 3], [0, 1], [1], [1, 2, 3]])
def test_reduce_sum_mean_contiguous_blocks(axes):
    x = np.random.default_rng(0).standard_normal((2, 16, 7, 7)).astype(np.float32)
    wide = x.astype(np.float64)
    got = run("ReduceMean", 18, [x, i64(axes)], {"keepdims": 0})
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, wide.mean(axis=tuple(axes)), rtol=1e-5, atol=1e-6)
    got = run("ReduceSum", 13, [x, i64(axes)])
    np.testing.assert_allclose(got, wide.sum(axis=tuple(axes), keepdims=True), rtol=1e-5, atol=1e-5)
