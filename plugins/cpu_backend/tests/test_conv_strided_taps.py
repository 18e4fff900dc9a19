"""The compiled Conv loop's stride-2 fill, its seven-tap passes and the rule that sends small
tiling windows to it (onnxkit_cpu.compiled.conv.planes, overrides/conv.py ``PATCH_RUN``).

* A depthwise convolution on the compiled path sums its taps in the order ``(kh, kw)`` from
  zero in the compute dtype, then adds B: a float32 numpy reference written here in that order
  gives the same bits (``assert_array_equal``), whatever the passes group the taps into
  and however the fill splits a stride-2 row into its two phases.
* Every case also agrees with onnxruntime and with the numpy body (planned under
  ``compiled.disabled()``) to float rounding, and the compiled loop is counted, so a case
  that silently stops taking it fails.
* Near misses: odd and even widths, one or two interior columns, cropping and asymmetric pads,
  dilation with stride 2, stride 2 along one axis only, a channel multiplier, two groups,
  a batch, one spatial axis.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit.runtime.bodies import session_bodies  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import conv as loops  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies"),
              pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")]

RNG = np.random.default_rng(4402)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def model(x, w, b, attrs) -> bytes:
    inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(b, "b")] if b is not None else [])
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if b is not None else []), ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def padded(x, pads):
    """X zero-padded (negative pads crop), float32."""
    nd = x.ndim - 2
    for i in range(nd):
        lo, hi = pads[i], pads[nd + i]
        x = x[(slice(None),) * (2 + i) + (slice(max(0, -lo), x.shape[2 + i] - max(0, -hi)),)]
        widths = [(0, 0)] * x.ndim
        widths[2 + i] = (max(0, lo), max(0, hi))
        x = np.pad(x, widths)
    return x


def tap_ordered(x, w, b, attrs):
    """Depthwise Conv in float32, the taps summed from zero in the order (kh, kw), then + B."""
    nd = x.ndim - 2
    strides, dil = attrs.get("strides", [1] * nd), attrs.get("dilations", [1] * nd)
    xp = padded(x, attrs.get("pads", [0] * 2 * nd))
    m, _, *k = w.shape
    xp = np.repeat(xp, m // x.shape[1], axis=1)                  # output channel c * mg + j reads channel c
    out = [(xp.shape[2 + i] - (k[i] - 1) * dil[i] - 1) // strides[i] + 1 for i in range(nd)]
    acc = np.zeros((x.shape[0], m, *out), np.float32)
    for off in np.ndindex(*k):
        win = xp[(slice(None), slice(None)) + tuple(
            slice(o * d, o * d + (n - 1) * s + 1, s) for o, d, n, s in zip(off, dil, out, strides))]
        acc = acc + w[(slice(None), 0) + off].reshape((1, m) + (1,) * nd) * win
    return acc if b is None else acc + b.reshape((1, m) + (1,) * nd)


def check(x, w, b, attrs, count_calls, exact):
    """Compiled (counted) vs onnxruntime vs the numpy body; ``exact``: vs :func:`tap_ordered` bit for bit."""
    spy = count_calls(loops, "planes")
    data = model(x, w, b, attrs)
    got = InferenceSession(data).run(None, {"x": x})[0]
    assert spy.calls == 1, "the compiled loop was not used"
    with compiled.disabled():
        body = InferenceSession(data).run(None, {"x": x})[0]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    pads = attrs.get("pads", [0] * 2 * (x.ndim - 2))
    crop = padded(x, [min(0, p) for p in pads])         # onnxruntime refuses negative pads: X cropped instead
    peer = model(crop, w, b, {**attrs, "pads": [max(0, p) for p in pads]})
    want = ort.InferenceSession(peer, so, providers=["CPUExecutionProvider"]).run(None, {"x": crop})[0]
    assert got.shape == want.shape == body.shape and got.dtype == np.float32
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * scale)
    np.testing.assert_allclose(got, body, rtol=2e-5, atol=2e-5 * scale)
    if exact:
        np.testing.assert_array_equal(got, tap_ordered(x, w, b, attrs))
    return got


STRIDE_2 = [   # depthwise (x shape, w shape, attributes)
    ((1, 6, 14, 14), (6, 1, 3, 3), dict(pads=[0, 0, 1, 1], strides=[2, 2], group=6)),        # even width
    ((1, 5, 15, 13), (5, 1, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2], group=5)),        # odd widths
    ((2, 4, 9, 1), (4, 1, 3, 1), dict(pads=[1, 0, 1, 0], strides=[2, 2], group=4)),          # one column
    ((1, 3, 7, 2), (3, 1, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2], group=3)),          # two columns
    ((1, 4, 12, 11), (4, 1, 5, 5), dict(pads=[2, 1, 2, 3], strides=[2, 2], group=4)),        # asymmetric
    ((1, 3, 10, 12), (3, 1, 3, 3), dict(pads=[-1, -2, 1, 0], strides=[2, 2], group=3)),      # cropping pads
    ((1, 3, 13, 17), (3, 1, 3, 3), dict(pads=[2, 2, 2, 2], strides=[2, 2], dilations=[2, 2], group=3)),
    ((1, 4, 11, 16), (8, 1, 3, 3), dict(pads=[1, 1, 1, 1], strides=[1, 2], group=4)),        # multiplier 2
    ((1, 4, 11, 16), (4, 1, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 1], group=4)),        # rows only
    ((2, 6, 31), (6, 1, 5), dict(pads=[2, 2], strides=[2], group=6)),                         # one axis
]

SEVEN_TAPS = [  # kernel rows of 7, 8 (7 + 1), 9 (7 + 1 + 1), 12 (7 + 5), 14 (7 + 7) taps
    ((1, 5, 9, 11), (5, 1, 7, 7), dict(pads=[3, 3, 3, 3], group=5)),
    ((1, 3, 10, 16), (3, 1, 2, 8), dict(pads=[1, 3, 0, 4], group=3)),
    ((2, 4, 8, 15), (8, 1, 3, 9), dict(pads=[1, 4, 1, 4], strides=[1, 2], group=4)),
    ((1, 2, 6, 30), (2, 1, 1, 12), dict(pads=[0, 5, 0, 6], dilations=[1, 2], group=2)),
    ((1, 3, 4, 20), (3, 1, 3, 14), dict(pads=[1, 6, 1, 7], group=3)),
    ((1, 4, 40), (4, 1, 7), dict(pads=[3, 3], strides=[2], group=4)),
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape,w_shape,attrs", STRIDE_2 + SEVEN_TAPS)
def test_depthwise_strided_and_wide_kernels_give_the_tap_ordered_sum(x_shape, w_shape, attrs, bias, count_calls):
    check(randn(*x_shape), randn(*w_shape), randn(w_shape[0]) if bias else None, attrs, count_calls, exact=True)


def test_non_finite_values_propagate_through_the_stride_2_fill(count_calls):
    x, w, b = randn(1, 4, 9, 13), randn(4, 1, 3, 3), randn(4)
    x[0, 1, 4, 5], x[0, 2, 3, 6], x[0, 3, 0, 0] = np.nan, np.inf, -np.inf
    with np.errstate(invalid="ignore"):
        got = check(x, w, b, dict(pads=[1, 1, 1, 1], strides=[2, 2], group=4), count_calls, exact=True)
    assert np.isnan(got[0, 1]).any() and np.isinf(got[0, 2]).any() and not np.isnan(got[0, 0]).any()


@pytest.mark.parametrize("x_shape,w_shape,attrs", [
    ((1, 3, 15, 16), (8, 3, 3, 3), dict(pads=[0, 0, 1, 1], strides=[2, 2])),                # a stem
    ((2, 4, 9, 11), (6, 2, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2], group=2)),         # two groups
    ((1, 3, 12, 13), (4, 3, 3, 7), dict(pads=[1, 3, 1, 3], strides=[2, 2])),                 # seven taps
])
def test_products_whose_columns_the_loop_fills(x_shape, w_shape, attrs, count_calls):
    check(randn(*x_shape), randn(*w_shape), randn(w_shape[0]), attrs, count_calls, exact=False)


@pytest.mark.parametrize("x_shape,w_shape,strides,body", [
    ((1, 3, 16, 16), (8, 3, 4, 4), [4, 4], "planes"),          # ConvNeXt's / Swin's stem
    ((2, 6, 10, 9), (12, 6, 2, 2), [2, 2], "planes"),          # a downsampling (a row no window reads)
    ((1, 2, 8, 12), (4, 2, 2, 4), [2, 4], "planes"),
    ((1, 3, 16, 16), (4, 3, 8, 8), [8, 8], "patches"),         # ViT's: rows of PATCH_RUN
    ((1, 2, 6, 24), (3, 2, 3, 12), [3, 12], "patches"),
])
def test_tiling_windows_take_the_loop_where_their_rows_are_short(x_shape, w_shape, strides, body, count_calls):
    x, w, b = randn(*x_shape), randn(*w_shape), randn(w_shape[0])
    data = model(x, w, b, dict(strides=strides))
    sess = InferenceSession(data)
    got = sess.run(None, {"x": x})[0]
    [node] = session_bodies(sess)
    assert list(node.bodies.values()) == [body]
    with compiled.disabled():
        slow = InferenceSession(data)
        want = slow.run(None, {"x": x})[0]
    assert [list(n.bodies.values()) for n in session_bodies(slow)] == [["patches"]]
    peer = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * float(np.abs(want).max()))
    np.testing.assert_allclose(got, peer, rtol=2e-5, atol=2e-5 * float(np.abs(peer).max()))
