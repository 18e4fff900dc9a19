"""One hostile case per guarded ai.onnx operator (issue 29: no test named Gemm, EyeLike, Col2Im, ...).

Every ai.onnx operator whose kernel declares a ``size_guard`` (the default domain's declarations,
implemented by :mod:`onnxkit.runtime.budget`) has a case here (the list is enumerated and its size
asserted: a guard declared without a case fails).  A case is a one-node
model, planned as a session plans it (so the guard is the one planning decided), and inputs
that request far more than ``max_value_bytes`` (1 MiB) or ``max_sequence_length`` (100).  The
node's guard is called as the run loop calls it, before the kernel, with those inputs — large
ones are broadcast views of a scalar, which cost no memory (sizes are logical) — and must
refuse naming the limit, the node and its op_type.  Nothing is allocated: each case takes
milliseconds.  (tests/hostile/ runs a subset end to end, each in a capped process.)
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit.errors import LimitExceeded  # noqa: E402
from onnxkit.limits import MiB, Limits  # noqa: E402
from onnxkit.runtime.budget import RunBudget, guarded_operators  # noqa: E402

#: the one-node models leave output shapes (and, here, types) to inference
pytestmark = pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")
LIMITS = Limits(max_value_bytes=MiB, max_run_bytes=64 * MiB, max_sequence_length=100)
N = 2048  # N x N float32 = 16 MiB


def big(shape, dtype=np.float32, fill=0):
    """A value of ``shape`` that takes no memory (a broadcast view of one element)."""
    return np.broadcast_to(np.asarray(fill, dtype=dtype), shape)


def i64(*v):
    return np.array(v, np.int64)


def f32(*v):
    return np.array(v, np.float32)


ELEM = {np.float32: T.FLOAT, np.int64: T.INT64, np.int32: T.INT32, np.uint8: T.UINT8, np.uint32: T.UINT32,
        np.bool_: T.BOOL, object: T.STRING}


def case(op, args, opset=21, n_out=1, **attributes):
    """(model bytes, args): one ``op`` node over graph inputs typed like ``args`` (None: absent)."""
    names = [f"x{k}" if a is not None else "" for k, a in enumerate(args)]
    inputs = [h.make_tensor_value_info(n, ELEM[a.dtype.type if a.dtype != object else object], list(a.shape))
              for n, a in zip(names, args) if a is not None]
    outs = [f"y{k}" for k in range(n_out)]
    node = h.make_node(op, names, outs, name=f"hostile_{op}", **attributes)
    seq = op in ("SplitToSequence", "SequenceConstruct", "SequenceInsert")
    outputs = [h.make_tensor_sequence_value_info(o, T.FLOAT, None) if seq else h.make_empty_tensor_value_info(o)
               for o in outs]
    graph = h.make_graph([node], "g", inputs, outputs)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=10).SerializeToString(), args


def _pair(dtype, fill=1):
    return [big((N, 1), dtype, fill), big((1, N), dtype, fill)]


def _broadcast(op, dtype=np.float32, **attributes):
    return lambda: case(op, _pair(dtype), **attributes)


def _sequence_insert():
    model, _ = case("SequenceInsert", [f32(1), f32(1)])
    return model, [[f32(1)] * 100, f32(1)]


def _sequence_insert_model():
    seq = h.make_tensor_sequence_value_info("s", T.FLOAT, None)
    node = h.make_node("SequenceInsert", ["s", "t"], ["y"], name="hostile_SequenceInsert")
    graph = h.make_graph([node], "g", [seq, h.make_tensor_value_info("t", T.FLOAT, [1])],
                         [h.make_tensor_sequence_value_info("y", T.FLOAT, None)])
    return (h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10).SerializeToString(),
            [[f32(1)] * 100, f32(1)])


def _concat_from_sequence():
    seq = h.make_tensor_sequence_value_info("s", T.FLOAT, None)
    node = h.make_node("ConcatFromSequence", ["s"], ["y"], name="hostile_ConcatFromSequence", axis=0)
    graph = h.make_graph([node], "g", [seq], [h.make_empty_tensor_value_info("y")])
    return (h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10).SerializeToString(),
            [[big((N, N)), big((N, N))]])


def _sequence_construct():
    x = f32(1)
    inputs = [h.make_tensor_value_info("x", T.FLOAT, [1])]
    node = h.make_node("SequenceConstruct", ["x"] * 101, ["y"], name="hostile_SequenceConstruct")
    graph = h.make_graph([node], "g", inputs, [h.make_tensor_sequence_value_info("y", T.FLOAT, None)])
    return (h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10).SerializeToString(),
            [x] * 101)


def _qlinear_matmul():
    u8, s = lambda shape: big(shape, np.uint8), f32(0.1)
    zp = np.array(0, np.uint8)
    return case("QLinearMatMul", [u8((N, 1)), s, zp, u8((1, N)), s, zp, s, zp])


CASES = {
    **{op: _broadcast(op) for op in "Add Sub Mul Div Pow Equal Less LessOrEqual Greater GreaterOrEqual Sum Mean "
                                    "Max Min".split()},
    "Mod": _broadcast("Mod", np.int64),
    "PRelu": lambda: case("PRelu", [big((N, N)), f32(0.5)]),
    **{op: _broadcast(op, np.bool_) for op in ("And", "Or", "Xor")},
    "BitShift": _broadcast("BitShift", np.uint32, direction="LEFT"),
    **{op: _broadcast(op, np.int32) for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor")},
    "Where": lambda: case("Where", [big((N, 1, 1), np.bool_, True), big((1, N, 1)), big((1, 1, N))]),
    "Concat": lambda: case("Concat", [big((N, N)), big((N, N))], axis=0),
    "MatMul": lambda: case("MatMul", _pair(np.float32)),
    "MatMulInteger": lambda: case("MatMulInteger", _pair(np.uint8)),
    "Gemm": lambda: case("Gemm", _pair(np.float32)),
    "Gather": lambda: case("Gather", [big((N, N)), big((N,), np.int64)], axis=0),
    "GatherND": lambda: case("GatherND", [big((N, N)), big((N, 1), np.int64)]),
    "GridSample": lambda: case("GridSample", [big((1, 1, 4, 4)), big((1, N, N, 2))]),
    "Einsum": lambda: case("Einsum", [big((N,)), big((N,))], equation="i,j->ij"),
    "QLinearMatMul": _qlinear_matmul,
    "ConstantOfShape": lambda: case("ConstantOfShape", [i64(N, N)]),
    "Expand": lambda: case("Expand", [f32(1), i64(N, N)]),
    "Tile": lambda: case("Tile", [np.ones((2, 2), np.float32), i64(N, N)]),
    "Range": lambda: case("Range", [np.array(0, np.int64), np.array(1 << 40, np.int64), np.array(1, np.int64)]),
    "Resize": lambda: case("Resize", [np.ones((1, 1, 4, 4), np.float32), None, f32(1, 1, 1000, 1000)]),
    "Upsample": lambda: case("Upsample", [np.ones((1, 1, 4, 4), np.float32), f32(1, 1, 1000, 1000)], opset=9),
    "Pad": lambda: case("Pad", [np.ones((4, 4), np.float32), i64(N, N, N, N)]),
    "OneHot": lambda: case("OneHot", [i64(0, 1), np.array(1 << 30, np.int64), f32(0, 1)]),
    "CenterCropPad": lambda: case("CenterCropPad", [np.ones((4, 4), np.float32), i64(N, N)]),
    "ConvTranspose": lambda: case("ConvTranspose", [np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 3, 3), np.float32)],
                                  strides=[1000, 1000]),
    "MaxUnpool": lambda: case("MaxUnpool", [np.ones((1, 1, 2, 2), np.float32), np.zeros((1, 1, 2, 2), np.int64),
                                            i64(1, 1, N, N)], kernel_shape=[2, 2]),
    "Col2Im": lambda: case("Col2Im", [big((1, 1, N * N)), i64(N, N), i64(1, 1)]),
    "DFT": lambda: case("DFT", [np.ones((1, 4, 1), np.float32), np.array(1 << 22, np.int64)], opset=20),
    "STFT": lambda: case("STFT", [big((1, 1 << 20, 1)), np.array(1, np.int64), None, np.array(16, np.int64)], opset=17),
    **{op: (lambda op=op: case(op, [np.array(1 << 22, np.int64)], opset=17))
       for op in ("HannWindow", "HammingWindow", "BlackmanWindow")},
    "MelWeightMatrix": lambda: case("MelWeightMatrix", [np.array(N, np.int64), np.array(2 * N, np.int64),
                                                        np.array(16000, np.int64), f32(0)[0], f32(8000)[0]], opset=17),
    "AffineGrid": lambda: case("AffineGrid", [np.zeros((1, 2, 3), np.float32), i64(1, 1, N, N)], opset=20),
    "RandomNormal": lambda: case("RandomNormal", [], shape=[N, N]),
    "RandomUniform": lambda: case("RandomUniform", [], shape=[N, N]),
    "Multinomial": lambda: case("Multinomial", [np.ones((N, 2), np.float32)], sample_size=N),
    "RoiAlign": lambda: case("RoiAlign", [np.ones((1, 1, 4, 4), np.float32), big((N, 4)), big((N,), np.int64)],
                             output_height=64, output_width=64),
    "TfIdfVectorizer": lambda: case("TfIdfVectorizer", [np.zeros((N, 1), np.int64)], mode="TF", min_gram_length=1,
                                    max_gram_length=1, max_skip_count=0, pool_int64s=[1], ngram_counts=[0],
                                    ngram_indexes=[1 << 22]),
    "EyeLike": lambda: case("EyeLike", [big((N, N))]),
    "NonZero": lambda: case("NonZero", [big((N, N), np.bool_, True)]),
    "Unique": lambda: case("Unique", [big((N, N))], n_out=4),
    "SplitToSequence": lambda: case("SplitToSequence", [np.ones(101, np.float32)], keepdims=0),
    "SequenceInsert": _sequence_insert_model,
    "SequenceConstruct": _sequence_construct,
    "ConcatFromSequence": _concat_from_sequence,
    "StringConcat": lambda: case("StringConcat", [big((N, 1), object, "ab"), big((1, N), object, "cd")], opset=20),
    "StringSplit": lambda: case("StringSplit", [np.array([" ".join(["a"] * N)] * N, dtype=object)], n_out=2,
                                opset=20),
}


def test_every_guarded_operator_has_a_hostile_case():
    guarded = guarded_operators()
    assert len(guarded) == 66  # a guard declared by a kernel needs a case here (and this count)
    assert set(CASES) == set(guarded)


def _guard_of(model: bytes, op: str):
    sess = onnxkit.InferenceSession(model, limits=LIMITS)
    steps = [s for s in sess.plan.steps if s.node.op_type == op]
    assert steps, f"{op} was folded or renamed at planning"
    assert steps[0].guard is not None, f"{op} has no size guard"
    return steps[0].guard


@pytest.mark.parametrize("op", sorted(CASES))
def test_guard_refuses_before_the_kernel(op):
    model, args = CASES[op]()
    guard = _guard_of(model, op)
    with pytest.raises(LimitExceeded) as info:
        guard(RunBudget(LIMITS), args)
    e = info.value
    assert e.limit in ("max_value_bytes", "max_sequence_length"), e
    assert e.value > e.maximum and f"'hostile_{op}' ({op})" in str(e), e


@pytest.mark.parametrize("op", ["Gemm", "EyeLike", "Col2Im", "HannWindow", "GatherND", "MatMulInteger", "Upsample",
                                "TfIdfVectorizer"])
def test_the_run_refuses_too(op):
    """The loop calls the same guard: inputs small enough to feed, a request past the limit."""
    small = {"Gemm": [np.ones((512, 1), np.float32), np.ones((1, 1024), np.float32)],
             "EyeLike": [np.ones((1024, 512), np.float32)], "Col2Im": [np.ones((1, 1, 512 * 1024), np.float32),
                                                                       i64(512, 1024), i64(1, 1)],
             "GatherND": [np.ones((4, 1024 * 512), np.float32), np.zeros((2, 1), np.int64)],
             "MatMulInteger": [np.ones((1024, 1), np.uint8), np.ones((1, 1024), np.uint8)]}
    model, args = CASES[op]()
    if op in small:
        model, args = case(op, small[op], **({"opset": 21}))
    sess = onnxkit.InferenceSession(model, limits=LIMITS)
    feeds = {i.name: a for i, a in zip(sess.get_inputs(), [a for a in args if a is not None])}
    with pytest.raises(LimitExceeded, match=f"'hostile_{op}' \\({op}\\)"):
        sess.run(None, feeds)
