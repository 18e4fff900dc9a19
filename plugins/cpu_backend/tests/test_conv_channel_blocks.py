"""Depthwise convolutions on small maps in blocks of channels (onnxkit_cpu.overrides.conv_channels,
onnxkit_cpu.compiled.conv_channels).

* A case the channel blocks take gives the bits of the tap-ordered float32 sum written here (the
  taps from zero in the order ``(kh, kw)``, then + B) and the bits of the planes loop (the same
  model planned with ``WIDTH`` emptied); it agrees with onnxruntime and with the numpy body to
  float rounding.  Which loop ran is counted, so a case that silently changes path fails.
* Near misses: odd channel counts and counts not a multiple of the block, stride 2 on odd maps,
  asymmetric and cropping pads, row dilation, a batch, 1x1 and 2x2 maps, output widths at the
  threshold and one past it, and the shapes the blocks decline (column dilation, 7x7 stride 2,
  non-square kernels, too few channels, a channel multiplier, float64).
* One, two and three intra-op threads give the same bits (the items split across threads).
* NaN and inf propagate as in the planes loop; W given as a graph input (not held) is read
  again each run; Relu / Add epilogues give the separate nodes' bits.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnxkit.runtime import InferenceSession, SessionOptions  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import conv as plane_loops, conv_channels as channel_loops  # noqa: E402
from onnxkit_cpu.overrides import conv_channels  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies"),
              pytest.mark.filterwarnings("ignore::onnxkit.errors.ConformanceWarning")]

RNG = np.random.default_rng(4405)
W3, W5, W7 = conv_channels.WIDTH[3], conv_channels.WIDTH[5], conv_channels.WIDTH[7]


class Blocks:
    """The calls of every channel-block loop (:data:`onnxkit_cpu.compiled.conv_channels.LOOPS`)."""

    def __init__(self, count_calls):
        self.spies = [count_calls(channel_loops, name) for name in channel_loops.LOOPS.values()]

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.spies)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def model(x_shape, w, b, attrs, after=None, w_input=False, elem=TensorProto.FLOAT) -> bytes:
    inits = [] if w_input else [numpy_helper.from_array(w, "w")]
    inits += [numpy_helper.from_array(b, "b")] if b is not None else []
    if w_input:         # the kernel known at planning only from the attribute (W not a constant)
        attrs = {**attrs, "kernel_shape": list(w.shape[2:])}
    nodes = [helper.make_node("Conv", ["x", "w"] + (["b"] if b is not None else []), ["c" if after else "y"], **attrs)]
    inputs = [helper.make_tensor_value_info("x", elem, x_shape)]
    if w_input:
        inputs.append(helper.make_tensor_value_info("w", elem, w.shape))
    if after == "Relu":
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    elif after == "Add":
        nodes.append(helper.make_node("Add", ["c", "x"], ["y"]))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", elem, None)], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def padded(x, pads):
    """X zero-padded on its two spatial axes (negative pads crop)."""
    for i in range(2):
        lo, hi = pads[i], pads[2 + i]
        x = x[(slice(None),) * (2 + i) + (slice(max(0, -lo), x.shape[2 + i] - max(0, -hi)),)]
        widths = [(0, 0)] * 4
        widths[2 + i] = (max(0, lo), max(0, hi))
        x = np.pad(x, widths)
    return x


def tap_ordered(x, w, b, attrs):
    """Depthwise Conv (multiplier 1) in X's dtype: the taps summed from zero in (kh, kw) order, + B."""
    sh, sw = attrs.get("strides", [1, 1])
    dh, dw = attrs.get("dilations", [1, 1])
    xp = padded(x, attrs.get("pads", [0] * 4))
    m, _, kh, kw = w.shape
    oh = (xp.shape[2] - (kh - 1) * dh - 1) // sh + 1
    ow = (xp.shape[3] - (kw - 1) * dw - 1) // sw + 1
    acc = np.zeros((x.shape[0], m, oh, ow), x.dtype)
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw]
            acc = acc + w[:, 0, i, j].reshape(1, m, 1, 1) * win
    return acc if b is None else acc + b.reshape(1, m, 1, 1)


def run(data, feeds, threads=1):
    so = SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.split_kernels", "1")
    return InferenceSession(data, so).run(None, feeds)[0]


def peer(x, w, b, attrs):
    """onnxruntime's result (X cropped where pads are negative: it refuses those)."""
    pads = attrs.get("pads", [0] * 4)
    crop = padded(x, [min(0, p) for p in pads])
    data = model(crop.shape, w, b, {**attrs, "pads": [max(0, p) for p in pads]})
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, {"x": crop})[0]


def geometry(c, size, k, stride=1, pads=None, dil=(1, 1), n=1, width=None):
    """(x shape, w shape, attributes) of a depthwise convolution; ``width``: the input width
    (default ``size``)."""
    attrs = dict(group=c, strides=[stride, stride], dilations=list(dil),
                 pads=pads if pads is not None else [k // 2 * dil[0], k // 2 * dil[1]] * 2)
    return (n, c, size, width or size), (c, 1, k, k), attrs


TAKEN = [
    geometry(16, 7, 3),                                   # one full block
    geometry(40, 7, 3),                                   # 40 = 2 blocks + 8 channels
    geometry(17, 9, 5, 2),                                # odd channels, stride 2 on an odd map
    geometry(33, 13, 3, 2),
    geometry(24, 7, 7),                                   # ConvNeXt-like 7x7
    geometry(96, 6, 5),                                   # EfficientNet-like 5x5 on 6x6
    geometry(20, 8, 3, pads=[0, 0, 1, 1]),                # asymmetric pads
    geometry(20, 8, 3, 2, pads=[0, 1, 1, 0]),
    geometry(18, 8, 3, pads=[-1, 2, 1, -1]),              # cropping pads
    geometry(18, 11, 5, pads=[2, -1, -2, 3]),
    geometry(16, 12, 3, pads=[2, 1, 2, 1], dil=(2, 1), width=7),  # row dilation
    geometry(32, 7, 3, n=3),                              # a batch
    geometry(16, 1, 3),                                   # a 1x1 map
    geometry(16, 2, 3),                                   # a 2x2 map
    geometry(16, 2, 7),
    geometry(19, 6, 3, width=W3),                         # output width at the threshold
    geometry(19, 5, 5, 2, width=2 * W5 - 1),
    geometry(16, 4, 7, width=W7),
    geometry(16, 6, 5, pads=[0, 0, 0, 0]),                # no pads
]

DECLINED = [
    geometry(19, 6, 3, width=W3 + 1),                     # one past the threshold
    geometry(19, 5, 5, 2, width=2 * W5 + 1),
    geometry(16, 4, 7, width=W7 + 1),
    geometry(15, 7, 3),                                   # fewer channels than a block
    geometry(16, 9, 3, pads=[2, 2, 2, 2], dil=(1, 2)),    # column dilation
    geometry(16, 13, 7, 2),                               # 7x7 stride 2
    ((1, 16, 7, 7), (16, 1, 3, 5), dict(group=16, pads=[1, 2, 1, 2])),      # not square
    ((1, 16, 7, 7), (16, 1, 1, 1), dict(group=16, pads=[0, 0, 0, 0])),      # 1x1 (pointwise)
    ((1, 8, 7, 7), (16, 1, 3, 3), dict(group=8, pads=[1, 1, 1, 1])),        # channel multiplier 2
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape,w_shape,attrs", TAKEN)
def test_taken_cases_give_the_planes_bits(x_shape, w_shape, attrs, bias, count_calls, monkeypatch):
    x, w = randn(*x_shape), randn(*w_shape)
    b = randn(w_shape[0]) if bias else None
    data = model(x.shape, w, b, attrs)
    blocks, planes = Blocks(count_calls), count_calls(plane_loops, "planes")
    got = run(data, {"x": x})
    assert (blocks.calls, planes.calls) == (1, 0), "the channel blocks were not used"
    np.testing.assert_array_equal(got, tap_ordered(x, w, b, attrs))
    monkeypatch.setattr(conv_channels, "WIDTH", {})           # the same model on the planes loop
    np.testing.assert_array_equal(run(data, {"x": x}), got)
    assert (blocks.calls, planes.calls) == (1, 1)
    with compiled.disabled():
        body = run(data, {"x": x})
    want = peer(x, w, b, attrs)
    scale = max(1.0, float(np.abs(want).max()))
    assert got.shape == want.shape == body.shape
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * scale)
    np.testing.assert_allclose(got, body, rtol=2e-5, atol=2e-5 * scale)


@pytest.mark.parametrize("x_shape,w_shape,attrs", DECLINED)
def test_declined_cases_keep_the_planes_loop(x_shape, w_shape, attrs, count_calls):
    x, w, b = randn(*x_shape), randn(*w_shape), randn(w_shape[0])
    blocks, planes = Blocks(count_calls), count_calls(plane_loops, "planes")
    got = run(model(x.shape, w, b, attrs), {"x": x})
    assert blocks.calls == 0
    assert planes.calls == (0 if w_shape[2:] == (1, 1) else 1)
    want = peer(x, w, b, attrs)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(want).max())))


def test_float64_keeps_the_planes_loop(count_calls):
    x, w, b = randn(1, 16, 7, 7, dtype=np.float64), randn(16, 1, 3, 3, dtype=np.float64), randn(16, dtype=np.float64)
    attrs = dict(group=16, pads=[1, 1, 1, 1])
    blocks = Blocks(count_calls)
    got = run(model(x.shape, w, b, attrs, elem=TensorProto.DOUBLE), {"x": x})
    assert blocks.calls == 0
    np.testing.assert_allclose(got, tap_ordered(x, w, b, attrs), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("x_shape,w_shape,attrs", [geometry(72, 7, 3), geometry(50, 9, 5, 2, n=2), geometry(40, 14, 7)])
def test_one_two_three_intra_op_threads_give_the_same_bits(x_shape, w_shape, attrs, count_calls, monkeypatch):
    monkeypatch.setattr(conv_channels, "CHANNEL_WORK", 1)     # one item is worth a thread here
    x, w, b = randn(*x_shape), randn(*w_shape), randn(w_shape[0])
    data = model(x.shape, w, b, attrs)
    one = run(data, {"x": x}, 1)
    np.testing.assert_array_equal(one, tap_ordered(x, w, b, attrs))
    for threads in (2, 3):
        spy = Blocks(count_calls)
        np.testing.assert_array_equal(run(data, {"x": x}, threads), one)
        assert spy.calls >= 2, "the items were not split across intra-op threads"


def test_non_finite_values_and_signed_zero_as_the_planes_loop(monkeypatch):
    x, w = randn(1, 20, 6, 6), randn(20, 1, 3, 3)
    x[0, 0] = 0.0
    w[0] = -1.0                                  # channel 0: every product -0 (or +0 at the pads)
    x[0, 1, 2, 3], x[0, 2, 4, 4], w[3, 0, 1, 1], w[19, 0, 0, 0] = np.nan, np.inf, np.inf, np.nan
    attrs = dict(pads=[1, 1, 1, 1], group=20)
    data = model(x.shape, w, None, attrs)
    with np.errstate(invalid="ignore"):
        got = run(data, {"x": x})
        want = tap_ordered(x, w, None, attrs)
    np.testing.assert_array_equal(got, want)
    assert not np.signbit(got[0, 0]).any()
    assert np.isnan(got[0, 1]).any() and np.isinf(got[0, 2]).any() and np.isnan(got[0, 19]).all()
    monkeypatch.setattr(conv_channels, "WIDTH", {})
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(run(data, {"x": x}), got)


@pytest.mark.parametrize("mode", ["readonly_view", "broadcast", "new_arrays"])
def test_w_as_a_graph_input_is_read_each_run(mode, count_calls):
    """W fed as the same object whose memory changes between runs (a read-only view, a
    broadcast), or as new arrays: every run computes with the values fed."""
    x, b = randn(1, 24, 7, 7), randn(24)
    attrs = dict(pads=[1, 1, 1, 1], group=24)
    base = randn(1, 1, 3, 3) if mode == "broadcast" else randn(24, 1, 3, 3)
    fed = np.broadcast_to(base, (24, 1, 3, 3)) if mode == "broadcast" else base.view()
    fed.flags.writeable = False
    so = SessionOptions()
    so.intra_op_num_threads = 1
    spy = Blocks(count_calls)
    sess = InferenceSession(model(x.shape, np.ascontiguousarray(fed), b, attrs, w_input=True), so)
    for _ in range(3):
        w = np.ascontiguousarray(fed)
        np.testing.assert_array_equal(sess.run(None, {"x": x, "w": fed})[0], tap_ordered(x, w, b, attrs))
        if mode == "new_arrays":
            fed = randn(24, 1, 3, 3)
        else:
            base[...] = randn(*base.shape)              # the same fed object, new values
    assert spy.calls == 3


@pytest.mark.parametrize("after", ["Relu", "Add"])
def test_epilogues_give_the_separate_nodes_bits(after, count_calls):
    x, w, b = randn(1, 32, 7, 7), randn(32, 1, 5, 5), randn(32)
    attrs = dict(pads=[2, 2, 2, 2], group=32)
    spy = Blocks(count_calls)
    got = run(model(x.shape, w, b, attrs, after=after), {"x": x})
    assert spy.calls == 1
    y = tap_ordered(x, w, b, attrs)
    np.testing.assert_array_equal(got, np.maximum(y, 0) if after == "Relu" else y + x)


def test_a_non_contiguous_input(count_calls):
    x = np.swapaxes(randn(1, 12, 40, 40), 1, 3)[:, :, :, :12]          # (1, 40, 40, 12): not C-contiguous
    assert not x.flags.c_contiguous
    w, b = randn(40, 1, 5, 5), randn(40)
    attrs = dict(pads=[2, 2, 2, 2], group=40)
    spy = Blocks(count_calls)
    np.testing.assert_array_equal(run(model(x.shape, w, b, attrs), {"x": x}), tap_ordered(x, w, b, attrs))
    assert spy.calls == 1


def test_w_fed_without_kernel_shape_keeps_the_planes_loop(count_calls):
    """The plan picks the loop by the kernel it knows at planning: W fed at run time and no
    ``kernel_shape`` attribute leave the planes loop (the same bits)."""
    x, w, b = randn(1, 24, 7, 7), randn(24, 1, 3, 3), randn(24)
    attrs = dict(pads=[1, 1, 1, 1], group=24)
    blocks, planes = Blocks(count_calls), count_calls(plane_loops, "planes")
    data = model(x.shape, w, b, attrs, w_input=True)
    proto = onnx.load_from_string(data)
    del proto.graph.node[0].attribute[[a.name for a in proto.graph.node[0].attribute].index("kernel_shape")]
    got = run(proto.SerializeToString(), {"x": x, "w": w})
    assert (blocks.calls, planes.calls) == (0, 1)
    np.testing.assert_array_equal(got, tap_ordered(x, w, b, attrs))
