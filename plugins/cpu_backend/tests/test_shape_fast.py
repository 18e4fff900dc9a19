"""The per-key plans of the cpu shape, indexing, reduction and linalg overrides.

One session runs many times with different extents and different shape / axes / pads / split
values fed as inputs: each run must give what an independent numpy computation gives (no
stale plan), and a bad value must fail naming the node on every run, also after good runs.
Unaligned operands (as a model file's bytes give them) give the same results as aligned ones.
Expected values are numpy's own (np.pad, np.broadcast_to, float64 sums...), never the kernels'.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnxkit.api import load  # noqa: E402
from onnxkit.errors import EvaluationError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402

F, I = TensorProto.FLOAT, TensorProto.INT64


def session(op, opset, inputs, attrs=None, n_out=1, out_rank=None, inits=()):
    """A session of one node over graph inputs ``inputs`` ([(name, elem, rank)]), initializers
    ``inits`` ([(name, array)]) and ``n_out`` outputs of rank ``out_rank`` (unknown extents)."""
    names = [n for n, _, _ in inputs] + [n for n, _ in inits]
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, name=f"the_{op.lower()}", **(attrs or {}))
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, e, [None] * r) for n, e, r in inputs],
        [helper.make_tensor_value_info(o, F, None if out_rank is None else [None] * out_rank) for o in outs],
        initializer=[numpy_helper.from_array(v, n) for n, v in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    return InferenceSession(load(model.SerializeToString()), validate=False)


def i64(*v):
    return np.array(v, dtype=np.int64)


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def exact(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)


# -- shape family ----------------------------------------------------------------------------
def test_reshape_follows_the_fed_shape_each_run_and_keeps_failing_on_a_bad_one():
    s = session("Reshape", 14, [("x", F, 2), ("s", I, 1)])
    x = rand(4, 6)
    for target in ((3, 8), (2, -1), (0, 2, 3), (3, 8), (24,)):
        exact(s.run(None, {"x": x, "s": i64(*target)})[0], x.reshape(tuple(d if d else 4 for d in target)))
    exact(s.run(None, {"x": rand(2, 6), "s": i64(3, 4)})[0], rand(2, 6).reshape(3, 4))
    for _ in range(2):
        with pytest.raises(EvaluationError, match="the_reshape"):
            s.run(None, {"x": x, "s": i64(5, -1)})
    exact(s.run(None, {"x": x, "s": i64(6, 4)})[0], x.reshape(6, 4))


def test_squeeze_unsqueeze_flatten_per_shape():
    x = rand(1, 3, 1, 2)
    sq = session("Squeeze", 13, [("x", F, 4), ("a", I, 1)])
    exact(sq.run(None, {"x": x, "a": i64(0)})[0], x.reshape(3, 1, 2))
    exact(sq.run(None, {"x": x, "a": i64(-2, 0)})[0], x.reshape(3, 2))
    with pytest.raises(EvaluationError, match="the_squeeze"):
        sq.run(None, {"x": x, "a": i64(1)})
    un = session("Unsqueeze", 13, [("x", F, 4), ("a", I, 1)])
    exact(un.run(None, {"x": x, "a": i64(0, -1)})[0], x.reshape(1, 1, 3, 1, 2, 1))
    exact(un.run(None, {"x": x, "a": i64(2)})[0], x.reshape(1, 3, 1, 1, 2))
    un11 = session("Unsqueeze", 11, [("x", F, 2)], {"axes": [1]})
    for shape in ((2, 3), (4, 1)):
        v = rand(*shape)
        exact(un11.run(None, {"x": v})[0], v[:, None])
    fl = session("Flatten", 13, [("x", F, 4)], {"axis": 2})
    for v in (x, rand(2, 2, 3, 1)):
        exact(fl.run(None, {"x": v})[0], v.reshape(v.shape[0] * v.shape[1], -1))


def test_expand_gives_a_fresh_writeable_array_and_fails_on_incompatible_shapes():
    s = session("Expand", 13, [("x", F, 4), ("s", I, 1)])
    x = rand(3, 1, 9, 9)
    for target in ((3, 2, 9, 9), (2, 1, 1, 1, 1), (3, 2, 9, 9)):
        y = s.run(None, {"x": x, "s": i64(*target)})[0]
        exact(y, np.broadcast_to(x, np.broadcast_shapes(x.shape, target)).copy())
        assert y.flags.writeable and y.flags.c_contiguous
    for _ in range(2):
        with pytest.raises(EvaluationError, match="the_expand"):
            s.run(None, {"x": x, "s": i64(3, 4, 8, 9)})


def test_concat_and_split_per_key():
    c = session("Concat", 13, [("a", F, 2), ("b", F, 2)], {"axis": -1})
    for sa, sb in (((2, 3), (2, 1)), ((1, 1), (1, 4))):
        a, b = rand(*sa), rand(*sb, seed=1)
        exact(c.run(None, {"a": a, "b": b})[0], np.concatenate([a, b], axis=1))
    with pytest.raises(EvaluationError, match="the_concat"):
        c.run(None, {"a": rand(2, 3), "b": rand(3, 3)})
    sp = session("Split", 13, [("x", F, 2), ("s", I, 1)], {"axis": 1}, n_out=2)
    x = rand(2, 7)
    for n in (3, 1, 3, 7):
        p, q = sp.run(None, {"x": x, "s": i64(n, 7 - n)})
        exact(p, x[:, :n])
        exact(q, x[:, n:])
    with pytest.raises(EvaluationError, match="the_split"):
        sp.run(None, {"x": x, "s": i64(3, 3)})


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_per_key_against_np_pad(mode):
    s = session("Pad", 13, [("x", F, 2), ("p", I, 1)], {"mode": mode})
    x = rand(3, 512)
    for pads in ((0, 32, 0, 32), (1, 0, 2, 5), (0, 32, 0, 32), (0, -2, 1, 3)):
        b, e = pads[:2], pads[2:]
        want = x[:, 2:] if pads[1] < 0 else x
        widths = [(max(b[0], 0), max(e[0], 0)), (max(b[1], 0), max(e[1], 0))]
        exact(s.run(None, {"x": x, "p": i64(*pads)})[0], np.pad(want, widths, mode=mode))
    with pytest.raises(EvaluationError, match="the_pad"):
        s.run(None, {"x": x, "p": i64(0, 1)})


def test_pad_constant_value_is_read_each_run():
    s = session("Pad", 13, [("x", F, 2), ("p", I, 1), ("v", F, 0)])
    x = rand(2, 3)
    for v in (1.5, -2.0):
        exact(s.run(None, {"x": x, "p": i64(1, 0, 0, 2), "v": np.float32(v)})[0],
              np.pad(x, [(1, 0), (0, 2)], constant_values=v))


# -- indexing --------------------------------------------------------------------------------
def test_slice_per_key_with_negative_steps():
    s = session("Slice", 13, [("x", F, 3), ("st", I, 1), ("en", I, 1), ("ax", I, 1), ("sp", I, 1)])
    x = rand(4, 5, 6)
    cases = [((1,), (3,), (0,), (1,)), ((-1, 0), (-6, 6), (2, 1), (-2, 2)), ((1,), (3,), (0,), (1,))]
    for st, en, ax, sp in cases:
        index = [slice(None)] * 3
        for a, b, c, d in zip(ax, st, en, sp):
            index[a] = slice(b, c, d)
        got = s.run(None, {"x": x, "st": i64(*st), "en": i64(*en), "ax": i64(*ax), "sp": i64(*sp)})[0]
        exact(got, x[tuple(index)])
    with pytest.raises(EvaluationError, match="the_slice"):
        s.run(None, {"x": x, "st": i64(0), "en": i64(1), "ax": i64(0), "sp": i64(0)})


def test_gather_of_a_table_and_bad_indices():
    table = rand(1000, 64)
    s = session("Gather", 13, [("w", F, 2), ("i", I, 2)], out_rank=3)
    idx = np.array([[3, -1, 999], [0, 5, 7]], dtype=np.int64)
    exact(s.run(None, {"w": table, "i": idx})[0], table[idx])
    with pytest.raises(EvaluationError, match="the_gather"):
        s.run(None, {"w": table, "i": i64(1000)[None]})


def _unaligned(a: np.ndarray) -> np.ndarray:
    """A read-only copy of ``a`` starting one byte into its buffer (as a model file's bytes can)."""
    buf = np.zeros(a.nbytes + 1, dtype=np.uint8)
    v = np.ndarray(a.shape, a.dtype, buffer=buf, offset=1)
    v[...] = a
    v.flags.writeable = False
    return v


def test_gemm_matmul_and_gather_of_unaligned_initializers():
    a, w, c = rand(27, 64), rand(64, 192, seed=1), rand(192, seed=2)
    s = session("Gemm", 13, [("a", F, 2), ("w", F, 2), ("c", F, 1)], {"alpha": 0.5, "beta": 2.0})
    want = (a.astype(np.float64) @ w.astype(np.float64)) * 0.5 + 2.0 * c
    for _ in range(2):
        got = s.run(None, {"a": a, "w": _unaligned(w), "c": _unaligned(c)})[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    m = session("MatMul", 13, [("a", F, 3), ("w", F, 2)])
    x = rand(1, 20, 120)
    big = rand(120, 300, seed=3)
    np.testing.assert_allclose(m.run(None, {"a": x, "w": _unaligned(big)})[0],
                               x.astype(np.float64) @ big.astype(np.float64), rtol=1e-4, atol=1e-4)
    g = session("Gather", 13, [("w", F, 2), ("i", I, 2)], out_rank=3)
    table = rand(50, 8)
    idx = np.array([[1, 2], [49, -50]], dtype=np.int64)
    exact(g.run(None, {"w": _unaligned(table), "i": idx})[0], table[idx])


# -- reductions ------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axes,keep", [((2, 512, 256), (1,), 0), ((2, 512), (1,), 0), ((1, 1), (1,), 0),
                                              ((3, 4, 5), (0, 1), 1), ((3, 4, 5), (0, 2), 1), ((2, 3), (), 1)])
def test_sum_and_mean_against_float64(shape, axes, keep):
    x = rand(*shape)
    for op in ("ReduceSum", "ReduceMean"):
        s = session(op, 18, [("x", F, len(shape)), ("a", I, 1)], {"keepdims": keep})
        for _ in range(2):
            got = s.run(None, {"x": x, "a": i64(*axes)})[0]
            ref = getattr(x.astype(np.float64), "sum" if op == "ReduceSum" else "mean")(
                axis=axes or None, keepdims=bool(keep))
            assert got.dtype == np.float32 and got.shape == np.shape(ref)
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)


def test_max_min_exact_nan_and_bad_axes():
    x = rand(2, 214)
    x[1, 7] = np.nan
    for op, ref in (("ReduceMax", np.max), ("ReduceMin", np.min)):
        s = session(op, 18, [("x", F, 2), ("a", I, 1)], {"keepdims": 0})
        exact(s.run(None, {"x": x, "a": i64(1)})[0], ref(x, axis=1))
        exact(s.run(None, {"x": x, "a": i64(-2)})[0], ref(x, axis=0))
        for _ in range(2):
            with pytest.raises(EvaluationError, match=op.lower()):
                s.run(None, {"x": x, "a": i64(2)})


def test_mean_of_a_transposed_view_and_the_axes_attribute():
    s = session("ReduceMean", 13, [("x", F, 3)], {"axes": [-1]})
    x = rand(1, 120, 20).transpose(0, 2, 1)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], x.astype(np.float64).mean(-1, keepdims=True),
                               rtol=1e-5, atol=1e-6)
    y = rand(3, 7)
    np.testing.assert_allclose(s.run(None, {"x": y[None]})[0], y[None].astype(np.float64).mean(-1, keepdims=True),
                               rtol=1e-5, atol=1e-6)
