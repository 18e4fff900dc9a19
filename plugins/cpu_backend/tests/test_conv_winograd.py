"""The Winograd F(2x2, 3x3) path of the cpu Conv (overrides/conv_winograd.py, compiled/winograd.py).

Each case runs a Conv model with the path (the test counts the input transform's calls, so it
fails if the path silently stops being taken) against an independent float64 correlation written
here and against the im2col path (the path switched off): results agree to float rounding.
Data the path may not take (inf, NaN, huge values; such weights) must give exactly what the
im2col path gives."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402

from onnxkit import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import winograd as loops  # noqa: E402
from onnxkit_cpu.overrides import conv_winograd  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies")]  # the compiled loops, from the first run

RNG = np.random.default_rng(3141)


@pytest.fixture
def spy(count_calls):
    return count_calls(loops, "input_tiles")


def build(x_shape, w, b, pads, dtype=np.float32, relu=False, runtime_w=False, **attrs):
    tp = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inits = [] if runtime_w else [numpy_helper.from_array(w.astype(dtype), "w")]
    inputs = [helper.make_tensor_value_info("x", tp, list(x_shape))]
    if runtime_w:
        inputs.append(helper.make_tensor_value_info("w", tp, list(w.shape)))
    names = ["x", "w"]
    if b is not None:
        inits.append(numpy_helper.from_array(b.astype(dtype), "b"))
        names.append("b")
    nodes = [helper.make_node("Conv", names, ["c" if relu else "y"], pads=pads, **attrs)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", tp, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def reference(x, w, b, pads):
    """The 3x3 correlation in float64, written out: padded X sliced per kernel offset."""
    n, c, h, wd = x.shape
    top, left, bottom, right = pads
    xp = np.zeros((n, c, h + top + bottom, wd + left + right))
    xp[:, :, top:top + h, left:left + wd] = x
    oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
    y = np.zeros((n, w.shape[0], oh, ow))
    for i in range(3):
        for j in range(3):
            y += np.einsum("mc,nchw->nmhw", w[:, :, i, j].astype(np.float64), xp[:, :, i:i + oh, j:j + ow])
    return y if b is None else y + b.astype(np.float64)[None, :, None, None]


CASES = [
    ((1, 32, 11, 11), 16, [1, 1, 1, 1]),
    ((2, 40, 10, 13), 24, [0, 1, 2, 0]),        # asymmetric pads, odd output width
    ((1, 33, 11, 12), 17, [0, 0, 0, 0]),        # no pads: odd output height
    ((1, 64, 30, 30), 32, [1, 1, 1, 1]),
]


@pytest.mark.parametrize("x_shape, m, pads", CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_winograd_matches_reference_and_im2col(x_shape, m, pads, bias, spy, monkeypatch):
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal((m, x_shape[1], 3, 3)).astype(np.float32)
    b = RNG.standard_normal(m).astype(np.float32) if bias else None
    proto = build(x_shape, w, b, pads)
    got = InferenceSession(proto, validate=False).run(None, {"x": x})[0]
    assert spy.calls >= 1
    want = reference(x, w, b, pads)
    scale = np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * scale)
    before = spy.calls
    monkeypatch.setattr(conv_winograd, "MIN_CHANNELS", 1 << 30)
    other = InferenceSession(proto, validate=False).run(None, {"x": x})[0]
    assert spy.calls == before                   # the im2col path
    np.testing.assert_allclose(got, other, rtol=0, atol=2e-6 * scale)


def test_float64(spy):
    x = RNG.standard_normal((1, 32, 12, 12))
    w = RNG.standard_normal((20, 32, 3, 3))
    b = RNG.standard_normal(20)
    got = InferenceSession(build(x.shape, w, b, [1] * 4, dtype=np.float64), validate=False).run(None, {"x": x})[0]
    assert spy.calls >= 1 and got.dtype == np.float64
    want = reference(x, w, b, [1] * 4)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13 * np.abs(want).max())


def test_several_blocks_of_tile_rows(spy, monkeypatch):
    monkeypatch.setattr(conv_winograd, "BLOCK_BYTES", 1)
    monkeypatch.setattr(conv_winograd, "MIN_BLOCK_TILES", 1)
    x = RNG.standard_normal((2, 32, 13, 10)).astype(np.float32)
    w = RNG.standard_normal((16, 32, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(16).astype(np.float32)
    got = InferenceSession(build(x.shape, w, b, [1, 0, 1, 2]), validate=False).run(None, {"x": x})[0]
    assert spy.calls == 2 * 7                     # one call per tile row (7) per image
    want = reference(x, w, b, [1, 0, 1, 2])
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * np.abs(want).max())


@pytest.mark.parametrize("attrs, x_shape, k", [
    (dict(strides=[2, 2]), (1, 32, 12, 12), 3), (dict(dilations=[2, 2]), (1, 32, 12, 12), 3),
    (dict(group=2), (1, 32, 12, 12), 3), ({}, (1, 32, 12, 12), 5), ({}, (1, 16, 12, 12), 3),    # too few channels
    ({}, (1, 32, 7, 7), 3),                                                                    # 16 tiles
])
def test_shapes_that_keep_the_im2col_path(attrs, x_shape, k, spy):
    g = attrs.get("group", 1)
    x = RNG.standard_normal(x_shape).astype(np.float32)
    w = RNG.standard_normal((16, x_shape[1] // g, k, k)).astype(np.float32)
    InferenceSession(build(x_shape, w, None, [1] * 4, **attrs), validate=False).run(None, {"x": x})
    assert spy.calls == 0


@pytest.mark.parametrize("special", [np.inf, -np.inf, np.nan, 3e38])
def test_data_the_path_declines_gives_the_im2col_result(special, spy, monkeypatch):
    x = RNG.standard_normal((1, 32, 10, 10)).astype(np.float32)
    w = RNG.standard_normal((16, 32, 3, 3)).astype(np.float32)
    x[0, 3, 4, 5] = special
    proto = build(x.shape, w, None, [1] * 4, relu=True)
    got = InferenceSession(proto, validate=False).run(None, {"x": x})[0]
    assert spy.calls == 0                         # declined before transforming anything
    monkeypatch.setattr(conv_winograd, "MIN_CHANNELS", 1 << 30)
    want = InferenceSession(proto, validate=False).run(None, {"x": x})[0]
    assert np.array_equal(got, want, equal_nan=True) and not np.isfinite(got).all()
    w[0, 0, 1, 1] = np.nan                       # weights likewise
    clean = RNG.standard_normal(x.shape).astype(np.float32)
    got = InferenceSession(build(x.shape, w, None, [1] * 4), validate=False).run(None, {"x": clean})[0]
    want = InferenceSession(build(x.shape, w, None, [1] * 4), validate=False).run(None, {"x": clean})[0]
    assert spy.calls == 0 and np.array_equal(got, want, equal_nan=True)


def test_runtime_weights_changed_in_place(spy):
    x = RNG.standard_normal((1, 32, 10, 10)).astype(np.float32)
    w = RNG.standard_normal((16, 32, 3, 3)).astype(np.float32)
    s = InferenceSession(build(x.shape, w, None, [1] * 4, runtime_w=True), validate=False)
    first = s.run(None, {"x": x, "w": w})[0]
    w *= -2.0                                     # the same array object, new values
    second = s.run(None, {"x": x, "w": w})[0]
    assert spy.calls == 2
    np.testing.assert_allclose(second, -2.0 * first, rtol=1e-5, atol=1e-4)


def test_fused_relu_and_two_threads(spy):
    x = [RNG.standard_normal((1, 48, 16, 16)).astype(np.float32) for _ in range(2)]
    w = RNG.standard_normal((32, 48, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(32).astype(np.float32)
    s = InferenceSession(build(x[0].shape, w, b, [1] * 4, relu=True), validate=False)
    assert [st.op for st in s.plan.steps] == ["Conv"]
    want = [np.maximum(reference(v, w, b, [1] * 4), 0) for v in x]

    def work(k):
        for _ in range(50):
            np.testing.assert_allclose(s.run(None, {"x": x[k]})[0], want[k], rtol=0,
                                       atol=2e-6 * np.abs(want[k]).max())

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(work, [0, 1]))
    assert spy.calls == 100


def test_weight_transform():
    # U = G g G^T with G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]], written out
    g = RNG.standard_normal((3, 3))
    G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    u = loops.weight_tiles(g.reshape(1, 1, 3, 3), np.float64)
    assert u.shape == (16, 1, 1)
    np.testing.assert_allclose(u.reshape(4, 4), G @ g @ G.T, rtol=1e-15)
    assert u[0, 0, 0] == g[0, 0] and u[15, 0, 0] == g[2, 2]


def test_scratch_bounded_by_the_shared_buffer(monkeypatch, spy):
    # a block's transforms of MIN_BLOCK_TILES tiles must fit the thread's shared buffer, else im2col
    from onnxkit_cpu.overrides import conv_depthwise

    x = RNG.standard_normal((1, 32, 24, 24)).astype(np.float32)
    w = RNG.standard_normal((32, 32, 3, 3)).astype(np.float32)
    proto = build(x.shape, w, None, [1] * 4)
    fewest = 16 * (32 + 32) * 132 * 4            # 11 whole tile rows of 12 tiles: 128 at least
    monkeypatch.setattr(conv_depthwise, "SHARED_BYTES", fewest - 4)
    InferenceSession(proto, validate=False).run(None, {"x": x})
    assert spy.calls == 0
    monkeypatch.setattr(conv_depthwise, "SHARED_BYTES", fewest)
    InferenceSession(proto, validate=False).run(None, {"x": x})
    assert spy.calls == 1


def test_input_a_transposed_view(spy):
    # X produced by a Transpose (a strided view): the band copy reads any layout
    x = RNG.standard_normal((1, 12, 14, 32)).astype(np.float32)          # NHWC
    w = RNG.standard_normal((16, 32, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["xt", "w"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TP.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TP.FLOAT, None)], initializer=[numpy_helper.from_array(w, "w")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    got = InferenceSession(proto, validate=False).run(None, {"x": x})[0]
    assert spy.calls == 1
    want = reference(x.transpose(0, 3, 1, 2), w, None, [1] * 4)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * np.abs(want).max())
