"""The compiled depthwise loop's one-pass 3x3 kernel (onnxkit_cpu.compiled.conv.planes).

* A 3x3 depthwise convolution on the compiled path sums its nine taps from zero in the order
  ``(kh, kw)`` in float32, then adds B, as the row passes it replaces did: a float32 numpy
  reference written here in that order gives the same bits (``assert_array_equal``).
* Every case also agrees with onnxruntime and with the numpy body (planned under
  ``compiled.disabled()``) to float rounding, and the compiled loop is counted (the planes loop,
  or the channel blocks of a small map: the same sums, test_conv_channel_blocks.py), so a case
  that silently stops taking it fails.
* Near misses: odd channel counts, stride 2 on odd maps, asymmetric and cropping pads,
  dilation, a 1x1 map, small maps (7x7, 8x8), a channel multiplier, a batch, stride 2 along
  one axis, and the kernels beside 3x3 (3x1, 1x3, 3x5, 5x3: the row passes) in one model.
* One, two and three intra-op threads give the same bits.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

from onnxkit.runtime import InferenceSession, SessionOptions  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import conv as loops, conv_channels as channel_loops  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies"),
              pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")]

RNG = np.random.default_rng(4403)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def model(x_shape, w, b, attrs) -> bytes:
    inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(b, "b")] if b is not None else [])
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if b is not None else []), ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def padded(x, pads):
    """X zero-padded on its two spatial axes (negative pads crop), float32."""
    for i in range(2):
        lo, hi = pads[i], pads[2 + i]
        x = x[(slice(None),) * (2 + i) + (slice(max(0, -lo), x.shape[2 + i] - max(0, -hi)),)]
        widths = [(0, 0)] * 4
        widths[2 + i] = (max(0, lo), max(0, hi))
        x = np.pad(x, widths)
    return x


def tap_ordered(x, w, b, attrs):
    """Depthwise Conv in float32: the taps summed from zero in the order (kh, kw), then + B."""
    sh, sw = attrs.get("strides", [1, 1])
    dh, dw = attrs.get("dilations", [1, 1])
    xp = padded(x, attrs.get("pads", [0] * 4))
    m, _, kh, kw = w.shape
    xp = np.repeat(xp, m // x.shape[1], axis=1)             # output channel c * mg + j reads channel c
    oh = (xp.shape[2] - (kh - 1) * dh - 1) // sh + 1
    ow = (xp.shape[3] - (kw - 1) * dw - 1) // sw + 1
    acc = np.zeros((x.shape[0], m, oh, ow), np.float32)
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
            acc = acc + w[:, 0, i, j].reshape(1, m, 1, 1) * win
    return acc if b is None else acc + b.reshape(1, m, 1, 1)


def run(data, x, threads=1):
    so = SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.split_kernels", "1")
    return InferenceSession(data, so).run(None, {"x": x})[0]


CASES = [   # depthwise (x shape, w shape, attributes)
    ((1, 7, 9, 11), (7, 1, 3, 3), dict(pads=[1, 1, 1, 1], group=7)),                         # odd channels
    ((1, 5, 15, 13), (5, 1, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2], group=5)),         # stride 2, odd map
    ((1, 6, 14, 14), (6, 1, 3, 3), dict(pads=[0, 0, 1, 1], strides=[2, 2], group=6)),         # asymmetric
    ((1, 3, 10, 12), (3, 1, 3, 3), dict(pads=[-1, 2, 1, -1], group=3)),                       # cropping
    ((1, 3, 13, 17), (3, 1, 3, 3), dict(pads=[2, 2, 2, 2], dilations=[2, 2], group=3)),       # dilation
    ((1, 3, 12, 17), (3, 1, 3, 3), dict(pads=[2, 1, 2, 1], strides=[2, 2], dilations=[2, 1], group=3)),
    ((1, 9, 1, 1), (9, 1, 3, 3), dict(pads=[1, 1, 1, 1], group=9)),                           # a 1x1 map
    ((1, 33, 7, 7), (33, 1, 3, 3), dict(pads=[1, 1, 1, 1], group=33)),                        # small maps
    ((2, 16, 8, 8), (16, 1, 3, 3), dict(pads=[1, 1, 1, 1], group=16)),
    ((1, 4, 11, 16), (8, 1, 3, 3), dict(pads=[1, 1, 1, 1], strides=[1, 2], group=4)),         # multiplier 2
    ((1, 3, 5, 4), (3, 1, 3, 3), dict(group=3)),                                              # no pads
    ((1, 4, 9, 9), (4, 1, 3, 1), dict(pads=[1, 0, 1, 0], group=4)),                           # beside 3x3
    ((1, 4, 9, 9), (4, 1, 1, 3), dict(pads=[0, 1, 0, 1], group=4)),
    ((1, 4, 9, 9), (4, 1, 3, 5), dict(pads=[1, 2, 1, 2], group=4)),
    ((1, 4, 9, 9), (4, 1, 5, 3), dict(pads=[2, 1, 2, 1], strides=[2, 2], group=4)),
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape,w_shape,attrs", CASES)
def test_depthwise_3x3_one_pass_gives_the_tap_ordered_sum(x_shape, w_shape, attrs, bias, count_calls):
    x, w = randn(*x_shape), randn(*w_shape)
    b = randn(w_shape[0]) if bias else None
    data = model(x.shape, w, b, attrs)
    spy = count_calls(loops, "planes")
    blocks = [count_calls(channel_loops, n) for n in channel_loops.LOOPS.values()]   # small maps: channel blocks
    got = run(data, x)
    assert spy.calls + sum(b.calls for b in blocks) == 1, "the compiled loop was not used"
    np.testing.assert_array_equal(got, tap_ordered(x, w, b, attrs))
    with compiled.disabled():
        body = run(data, x)
    pads = attrs.get("pads", [0] * 4)
    crop = padded(x, [min(0, p) for p in pads])          # onnxruntime refuses negative pads: X cropped instead
    peer = model(crop.shape, w, b, {**attrs, "pads": [max(0, p) for p in pads]})
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(peer, so, providers=["CPUExecutionProvider"]).run(None, {"x": crop})[0]
    scale = max(1.0, float(np.abs(want).max()))
    assert got.shape == want.shape == body.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * scale)
    np.testing.assert_allclose(got, body, rtol=2e-5, atol=2e-5 * scale)


def test_signed_zero_and_non_finite_values_as_the_row_passes():
    """The sum starts from +0 (a tap product of -0 alone gives +0); NaN and inf propagate."""
    x, w = randn(1, 4, 6, 6), randn(4, 1, 3, 3)
    x[0, 0] = 0.0
    w[0] = -1.0                                  # channel 0: every product -0 (or +0 at the pads)
    x[0, 1, 2, 3], x[0, 2, 4, 4], w[3, 0, 1, 1] = np.nan, np.inf, np.inf
    attrs = dict(pads=[1, 1, 1, 1], group=4)
    with np.errstate(invalid="ignore"):
        got = run(model(x.shape, w, None, attrs), x)
        want = tap_ordered(x, w, None, attrs)
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got[0, 0]).any()
    assert np.isnan(got[0, 1]).any() and np.isinf(got[0, 2]).any()


@pytest.mark.parametrize("x_shape,attrs", [
    ((1, 48, 40, 40), dict(pads=[1, 1, 1, 1])),
    ((1, 37, 61, 59), dict(pads=[1, 1, 1, 1], strides=[2, 2])),
    ((3, 8, 48, 48), dict(pads=[1, 0, 0, 1])),
])
def test_one_two_three_intra_op_threads_give_the_same_bits(x_shape, attrs, count_calls):
    c = x_shape[1]
    x, w, b = randn(*x_shape), randn(c, 1, 3, 3), randn(c)
    data = model(x.shape, w, b, {**attrs, "group": c})
    one = run(data, x, 1)
    np.testing.assert_array_equal(one, tap_ordered(x, w, b, attrs))
    for threads in (2, 3):
        spy = count_calls(loops, "planes")
        np.testing.assert_array_equal(run(data, x, threads), one)
        assert spy.calls >= 2, "the loop was not split across intra-op threads"
