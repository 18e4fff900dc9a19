"""The cpu Conv's work across a run's intra-op threads (issue 44, default threads): the compiled
path's row blocks (:class:`onnxkit_cpu.overrides.conv_blocks.RowBlocks`) and Winograd's tile
blocks, and the column blocks of few-row products (1x1 of few channels, 3-channel stems), split
across the threads with BLAS at one thread inside them
(:func:`onnxkit.runtime.threads.parallel_for` with ``blas``), an image that would be one
Winograd block made in two, and the one-pass epilogue and the Swish's product split by rows /
elements.

What must hold: 1, 2 and 3 threads give the same bits; the split happens (the blocks a run
made, ``threads.observer``); BLAS runs one thread inside the blocks and its count is back after
(read inside a block through the BLAS libraries' own entry points); onnxruntime 1.32's result
within Clause 11's tolerance.  No timing asserts.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

import onnxkit.runtime.threads as threads  # noqa: E402
from onnxkit.runtime import InferenceSession, SessionOptions  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.overrides import conv_blocks, conv_epilogue, conv_winograd  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.available(), reason="numba is not installed"),
              pytest.mark.usefixtures("warm_bodies")]

RNG = np.random.default_rng(4404)
F = TP.FLOAT


def _conv(x_shape, w_shape, post=None, bias=True, **attrs):
    """A Conv model (W, B initializers) with an optional epilogue (``relu``, ``add``, ``swish``)."""
    w = (RNG.standard_normal(w_shape) * 0.2).astype(np.float32)
    inits = [helper.make_tensor("w", F, list(w_shape), w)]
    ins = ["x", "w"]
    if bias:
        inits.append(helper.make_tensor("b", F, [w_shape[0]], RNG.standard_normal(w_shape[0]).astype(np.float32)))
        ins.append("b")
    out = "c" if post else "y"
    nodes = [helper.make_node("Conv", ins, [out], **attrs)]
    feeds = {"x": RNG.standard_normal(x_shape).astype(np.float32)}
    inputs = [helper.make_tensor_value_info("x", F, x_shape)]
    if post == "relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif post == "add":
        nodes += [helper.make_node("Add", ["c", "r"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    elif post == "swish":
        nodes += [helper.make_node("Sigmoid", ["c"], ["g"]), helper.make_node("Mul", ["c", "g"], ["y"])]
    if post == "add":
        inputs.append(helper.make_tensor_value_info("r", F, None))
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    return m, feeds


def _run(data, feeds, n):
    so = SessionOptions()
    so.intra_op_num_threads = n
    so.add_session_config_entry("session.intra_op.split_kernels", "1")
    s = InferenceSession(data, so, validate=False)
    seen = {}

    def observe(name, k):
        seen[name] = max(seen.get(name, 0), k)
    threads.observer = observe
    try:
        return s.run(None, feeds)[0], seen
    finally:
        threads.observer = None


def _oracle(data, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


CASES = [   # (id, x shape, w shape, Conv attributes, epilogue, the split that must run)
    ("row_blocks_stem", (1, 3, 200, 200), (16, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]), None,
     "conv.row_blocks"),
    ("row_blocks_one_output", (1, 16, 120, 130), (1, 16, 3, 3), dict(pads=[1, 1, 1, 1]), None, "conv.row_blocks"),
    ("row_blocks_k7_s4_relu", (1, 3, 256, 256), (32, 3, 7, 7), dict(strides=[4, 4], pads=[3, 3, 3, 3]), "relu",
     "conv.row_blocks"),
    ("row_blocks_batch", (2, 8, 90, 90), (12, 8, 3, 3), dict(pads=[0, 1, 2, 1]), "add", "conv.row_blocks"),
    ("winograd_blocks", (1, 40, 96, 90), (32, 40, 3, 3), dict(pads=[1, 1, 1, 1]), None, "conv.winograd"),
    ("winograd_two_halves", (1, 64, 32, 32), (48, 64, 3, 3), dict(pads=[1, 1, 1, 1]), "relu", "conv.winograd"),
    ("winograd_odd_halves", (1, 32, 33, 31), (24, 32, 3, 3), dict(pads=[1, 1, 1, 1]), "add", "conv.winograd"),
    ("pointwise_epilogue", (1, 24, 64, 64), (40, 24, 1, 1), {}, "add", "conv.epilogue"),
    ("pointwise_epilogue_batch", (3, 24, 32, 32), (40, 24, 1, 1), {}, "relu", "conv.epilogue"),
    ("planes_epilogue_no_bias", (1, 8, 64, 64), (16, 8, 3, 3), dict(pads=[1, 1, 1, 1]), "relu", "conv.epilogue"),
    ("swish_product", (1, 16, 64, 64), (48, 16, 1, 1), {}, "swish", "conv.swish"),
    ("pointwise_column_blocks", (1, 16, 64, 70), (24, 16, 1, 1), {}, None, "conv.columns_blocks"),
    ("pointwise_column_blocks_batch", (2, 8, 48, 50), (12, 8, 1, 1), {}, "relu", "conv.columns_blocks"),
    ("stem_column_blocks", (1, 3, 128, 130), (16, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]), "swish",
     "conv.columns_blocks"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_one_two_and_three_threads_give_the_same_bits(case):
    name, xs, ws, attrs, post, split = case
    data, feeds = _conv(xs, ws, post, **attrs)
    if post == "add":
        y_shape = _oracle(_conv(xs, ws, None, **attrs)[0], feeds).shape
        feeds["r"] = RNG.standard_normal(y_shape).astype(np.float32)
    got = {}
    for n in (1, 2, 3):
        got[n], seen = _run(data, feeds, n)
        assert split in seen, f"{name}: {split} did not run ({sorted(seen)})"
        assert (seen[split] == 1) if n == 1 else (seen[split] >= 2), f"{name}: {seen[split]} blocks at {n} threads"
    assert got[2].tobytes() == got[1].tobytes() and got[3].tobytes() == got[1].tobytes()
    want = _oracle(data, feeds)
    np.testing.assert_allclose(got[1], want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def _blas_counts():
    return [lib.get_num_threads() for lib in threads._blas_controllers()]


@pytest.mark.parametrize("module,case", [(conv_blocks, "row_blocks_stem"), (conv_winograd, "winograd_blocks"),
                                         (conv_blocks, "pointwise_column_blocks")])
def test_blas_runs_one_thread_inside_the_blocks_and_its_count_comes_back(module, case, monkeypatch):
    """Each block of a 2-thread run sees every BLAS library at one thread (products of their own:
    no BLAS threads on the cores the blocks hold); the run's count is there before and after."""
    if not threads._blas_controllers():
        pytest.skip("no BLAS library whose thread count can be read")
    real = threads.parallel_for
    inside, outside = [], []

    def spying(fn, n, grain=1, name="", blas=False):
        def block(lo, hi):
            inside.append(_blas_counts())
            return fn(lo, hi)
        outside.append(_blas_counts())
        k = real(block, n, grain, name, blas)
        outside.append(_blas_counts())
        return k

    monkeypatch.setattr(module, "parallel_for", spying)
    _, xs, ws, attrs, post, _ = next(c for c in CASES if c[0] == case)
    data, feeds = _conv(xs, ws, post, **attrs)
    _run(data, feeds, 2)
    assert len(inside) >= 2 and all(c == [1] * len(c) for c in inside), inside
    assert outside and all(c == [2] * len(c) for c in outside), outside


def test_parallel_for_with_blas_sets_one_thread_only_for_several_blocks_and_restores_on_error():
    if not threads._blas_controllers():
        pytest.skip("no BLAS library whose thread count can be read")
    seen = []
    with threads.blas_limit(2):
        threads.parallel_for(lambda lo, hi: seen.append(_blas_counts()), 4, blas=True)
        assert all(c == [1] * len(c) for c in seen) and len(seen) == 2
        seen.clear()
        threads.parallel_for(lambda lo, hi: seen.append(_blas_counts()), 4)     # blas not declared
        assert all(c == [2] * len(c) for c in seen)
        seen.clear()
        threads.parallel_for(lambda lo, hi: seen.append(_blas_counts()), 1, blas=True)    # one block: untouched
        assert seen == [[2] * len(seen[0])]

        def fail(lo, hi):
            raise ValueError("block")
        with pytest.raises(ValueError, match="block"):
            threads.parallel_for(fail, 4, blas=True)
        assert all(c == 2 for c in _blas_counts())


def test_an_image_that_would_be_one_winograd_block_is_two_halves():
    """The halves depend on the shape alone (two where each half has MIN_BLOCK_TILES tiles)."""

    class Plan:
        n, c, m, group = 1, 64, 48, 1
        kernel, strides, dil = (3, 3), (1, 1), (1, 1)
        begin, end = (1, 1), (1, 1)

    def blocks(h, w):
        p = Plan()
        p.out_shape = (h, w)
        return conv_winograd.Winograd(p, (h, w), np.float32, None, (None, None)).blocks

    assert blocks(32, 32) == [(0, 8), (8, 16)]          # 256 tiles: two of 128 (13 + 3 by the bytes alone)
    assert blocks(34, 30) == [(0, 9), (9, 17)]          # odd tile rows: 9 + 8
    assert blocks(24, 24) == [(0, 12)]                  # 144 tiles: halves under 128
    assert blocks(30, 30) == [(0, 8), (8, 15)]          # two by the bytes (14 + 1), balanced
    assert len(blocks(2, 1024)) == 1                    # one tile row
    assert blocks(44, 44) == [(0, 6), (6, 12), (12, 18), (18, 22)]     # three by the bytes (9 rows): four
    assert blocks(96, 96) == [(t, t + 4) for t in range(0, 48, 4)]     # twelve by the bytes: kept
