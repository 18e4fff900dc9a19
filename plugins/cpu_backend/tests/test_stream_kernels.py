"""The small-input paths a streaming model's cold plan runs (issue 44: silero VAD's call on its
numpy bodies): each gives what the general body gives, and onnxruntime's result.

* LSTM's step body for one step of one direction in the default layout (silero's cell): the
  general step body's bits, onnxruntime's within tolerance; near misses: two steps, two
  directions, layout 1, sequence_lens given take the general body.
* a small 1-D convolution of one image and one group: columns by one gather, the columns
  body's bits, onnxruntime's within tolerance; near misses: two images, two groups, two
  spatial axes, too many columns.
* MLAS's logistic / tanh on at most ``_mlas.SMALL`` float32 elements run the same sequence on
  Python floats: bit for bit the block path's result (a dense sweep of float32 patterns, each
  element alone and in small groups) and onnxruntime 1.32's Sigmoid and Tanh; near misses: one
  element more than ``SMALL`` and an array holding a NaN take the block path.
"""

from __future__ import annotations

import platform

import numpy as np
import pytest

from onnxkit_default_domain.kernels import _mlas

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402

X86 = platform.machine().lower() in ("x86_64", "amd64")
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 1.1754944e-38, 9.0, -9.0, 18.0, -18.0, 17.631031,
                     -17.631031, 8.999999, 40.0, -40.0, 3.4028235e38, -3.4028235e38, 0.5, -10.4, -12.0], np.float32)


def patterns():
    """Every 65537th float32 bit pattern (every binade, both signs, subnormals), NaNs left out, and
    the special values."""
    bits = np.arange(0, 1 << 32, 65537, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([SPECIALS, bits[~np.isnan(bits)]])


def _bits(a):
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("fn,table,logistic", [(_mlas.logistic, _mlas.LOGISTIC, True), (_mlas.tanh, _mlas.TANH, False)])
def test_small_path_is_the_block_paths_bits(fn, table, logistic):
    x = patterns()
    want = _mlas._rational_numpy(x, table)
    if logistic:
        want = np.maximum(want + np.float32(0.5), np.float32(0.0))
    got = np.array(_mlas._rational_small(x.tolist(), table, logistic), np.float32)
    assert np.array_equal(_bits(got), _bits(want))
    for n in (1, 3, _mlas.SMALL):                      # through the public function, shapes kept
        for start in range(0, 400 * n, n):
            part = x[start:start + n].reshape((1,) * (3 - (n > 1)) + ((n,) if n > 1 else ()))
            r = fn(np, part)
            assert r.shape == part.shape and r.dtype == np.float32
            assert np.array_equal(_bits(r).reshape(-1), _bits(want[start:start + n]))


def _ort(op, x):
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 1, None])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [1, 1, None])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return m.SerializeToString(), ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("op", ["Sigmoid", "Tanh"])
def test_small_inputs_on_the_numpy_body_are_onnxruntimes(op):
    """Sigmoid / Tanh of a [1, 1, 1] input (silero's decoder) on the cold plan's numpy body, element
    by element over the specials and a sweep, against onnxruntime's bits (x86-64), and the near
    misses: ``SMALL + 1`` elements and NaNs (the block path) give onnxruntime's too."""
    data, ref = _ort(op, None)
    with compiled.disabled():
        sess = InferenceSession(data, "cpu")
    x = np.concatenate([SPECIALS, patterns()[::37]])
    calls = []
    small = _mlas._rational_small

    def counted(*a):
        calls.append(len(a[0]))
        return small(*a)

    _mlas._rational_small = counted
    try:
        got = np.concatenate([sess.run(None, {"x": v.reshape(1, 1, 1)})[0].reshape(-1) for v in x])
        assert len(calls) == len(x)
        del calls[:]
        n = _mlas.SMALL + 1
        big = x[:n].reshape(1, 1, n)
        nans = np.array([[[0.25, np.nan, -np.nan]]], np.float32)
        over = sess.run(None, {"x": big})[0]
        with_nan = sess.run(None, {"x": nans})[0]
        assert calls == []                              # both took the block path
    finally:
        _mlas._rational_small = small
    want = ref.run(None, {"x": x.reshape(1, 1, -1)})[0].reshape(-1)
    if X86:
        assert np.array_equal(_bits(got), _bits(want))
        assert np.array_equal(_bits(over), _bits(ref.run(None, {"x": big})[0]))
        assert np.array_equal(_bits(with_nan), _bits(ref.run(None, {"x": nans})[0]))
    else:
        np.testing.assert_allclose(got, want, rtol=0, atol=5e-7)


# ------------------------------------------------------------------------------------- LSTM
def _lstm_model(H, I, T, Bn, direction="forward", layout=0, states=True, lens=False, elem=TP.FLOAT):
    D = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(H + I + T)
    dt = np.float32 if elem == TP.FLOAT else np.float64
    W, R, B = ((rng.standard_normal(s) * 0.3).astype(dt) for s in ((D, 4 * H, I), (D, 4 * H, H), (D, 8 * H)))
    names = ["x", "W", "R", "B", "lens" if lens else "", "h" if states else "", "c" if states else ""]
    node = helper.make_node("LSTM", names, ["y", "yh", "yc"], hidden_size=H, direction=direction, layout=layout)
    xs = (Bn, T, I) if layout else (T, Bn, I)
    ss = (Bn, D, H) if layout else (D, Bn, H)
    ins = [helper.make_tensor_value_info("x", elem, xs)]
    feeds = {"x": rng.standard_normal(xs).astype(dt)}
    if states:
        ins += [helper.make_tensor_value_info(n, elem, ss) for n in ("h", "c")]
        feeds.update(h=rng.standard_normal(ss).astype(dt) * 0.5, c=rng.standard_normal(ss).astype(dt))
    if lens:
        ins.append(helper.make_tensor_value_info("lens", TP.INT32, (Bn,)))
        feeds["lens"] = np.full(Bn, T, np.int32)
    inits = [helper.make_tensor(n, elem, a.shape, a.ravel()) for n, a in (("W", W), ("R", R), ("B", B))]
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info(n, elem, [None] * r) for n, r in (("y", 4), ("yh", 3), ("yc", 3))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m.SerializeToString(), feeds


LSTM_CASES = [  # (H, I, T, Bn, direction, layout, states, lens, elem), whether the one-step path takes it
    ((128, 128, 1, 1, "forward", 0, True, False, TP.FLOAT), True),       # silero's
    ((16, 8, 1, 1, "reverse", 0, True, False, TP.FLOAT), True),
    ((16, 8, 1, 1, "forward", 0, False, False, TP.FLOAT), True),        # no initial states
    ((16, 8, 1, 1, "forward", 0, True, False, TP.DOUBLE), True),
    ((16, 8, 2, 1, "forward", 0, True, False, TP.FLOAT), False),        # near misses: two steps,
    ((16, 8, 2, 3, "reverse", 0, False, False, TP.FLOAT), False),
    ((16, 8, 1, 3, "forward", 0, True, False, TP.FLOAT), True),         # batch 3
    ((16, 8, 1, 1, "bidirectional", 0, True, False, TP.FLOAT), False),  # two directions,
    ((16, 8, 1, 1, "forward", 1, True, False, TP.FLOAT), False),        # batch-major layout,
    ((16, 8, 1, 1, "forward", 0, True, True, TP.FLOAT), False),         # sequence_lens given
]


@pytest.mark.parametrize("case,taken", LSTM_CASES)
def test_lstm_one_step_is_the_step_bodys_result_and_onnxruntimes(case, taken, monkeypatch):
    """On the numpy body: the one-step path's Y, Y_h, Y_c equal (bit for bit) the general step
    body's on the same session (the path replaced by a call of it), are onnxruntime's within
    Clause 11's float tolerance, and are taken exactly where stated."""
    from onnxkit_cpu.overrides import rnn

    data, feeds = _lstm_model(*case)
    with compiled.disabled():
        sess = InferenceSession(data, "cpu")
    taken_calls = []
    one = rnn._lstm_one_step

    def spy(*a):
        taken_calls.append(1)
        return one(*a)

    monkeypatch.setattr(rnn, "_lstm_one_step", spy)
    fast = sess.run(None, feeds)
    assert bool(taken_calls) == taken
    monkeypatch.setattr(rnn, "_lstm_one_step",
                        lambda layer, X, W, R, B, h, c: layer.run(X, W, R, B, None, [h, c], rnn._lstm_steps))
    body = sess.run(None, feeds)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    # onnxruntime has no float64 LSTM and no layout 1: those cases are held to its float32,
    # layout 0 result (at batch 1 and one step the layouts' arrays are the same)
    H, I, T, Bn, direction, _, states, lens, _ = case
    data32, feeds32 = _lstm_model(H, I, T, Bn, direction, 0, states, lens, TP.FLOAT)
    want = ort.InferenceSession(data32, so, providers=["CPUExecutionProvider"]).run(None, feeds32)
    for f, b, w in zip(fast, body, want):
        assert f.dtype == feeds["x"].dtype and f.shape == w.shape
        assert np.array_equal(f, b)
        np.testing.assert_allclose(f, w, rtol=1e-5, atol=1e-5)
    y, yh, yc = fast
    assert not np.shares_memory(y, yh) and not np.shares_memory(yh, yc)


# ----------------------------------------------------------------------------------- Conv 1-D
def _conv_model(xs, ws, bias=True, **attrs):
    rng = np.random.default_rng(sum(xs) + sum(ws))
    w = rng.standard_normal(ws).astype(np.float32) * 0.2
    inits = [helper.make_tensor("w", TP.FLOAT, ws, w.ravel())]
    names = ["x", "w"]
    if bias:
        inits.append(helper.make_tensor("b", TP.FLOAT, [ws[0]], rng.standard_normal(ws[0]).astype(np.float32)))
        names.append("b")
    g = helper.make_graph([helper.make_node("Conv", names, ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TP.FLOAT, xs)],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [None] * len(xs))],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString(), {"x": rng.standard_normal(xs).astype(np.float32)}


CONV_CASES = [  # (X shape, W shape, bias, attributes), whether the gather (kind "line") takes it
    (((1, 1, 576), (258, 1, 256), False, dict(strides=[128])), True),                  # silero's STFT
    (((1, 129, 3), (128, 129, 3), True, dict(pads=[1, 1])), True),                     # its encoder
    (((1, 128, 3), (64, 128, 3), True, dict(pads=[1, 1], strides=[2])), True),
    (((1, 64, 1), (128, 64, 3), True, dict(pads=[1, 1])), True),
    (((1, 6, 17), (5, 6, 4), True, dict(pads=[3, 0], dilations=[2], strides=[3])), True),
    (((1, 6, 17), (5, 6, 4), False, dict(auto_pad="SAME_UPPER", strides=[2])), True),
    (((2, 6, 17), (5, 6, 3), True, dict(pads=[1, 1])), False),       # near misses: two images,
    (((1, 6, 17), (4, 3, 3), True, dict(group=2)), False),            # two groups,
    (((1, 6, 9, 9), (5, 6, 3, 3), True, dict(pads=[1, 1, 1, 1])), False),   # two spatial axes,
    (((1, 64, 400), (32, 64, 3), True, dict(pads=[1, 1])), False),   # more columns than LINE_ELEMENTS
]


@pytest.mark.parametrize("case,taken", CONV_CASES)
def test_small_conv1d_gather_is_the_columns_bodys_result_and_onnxruntimes(case, taken, monkeypatch):
    """On the numpy body: the gather's result equals the columns body's bit for bit (the same
    session's kinds with the gather turned off), is onnxruntime's within the float32 tolerance,
    and the gather is taken exactly where stated; a fused Relu after it (silero's encoder) too."""
    from onnxkit_cpu.overrides import conv_line

    xs, ws, bias, attrs = case
    data, feeds = _conv_model(xs, ws, bias, **attrs)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    calls = []
    call = conv_line.Line.__call__

    def spy(self, *a):
        calls.append(1)
        return call(self, *a)

    monkeypatch.setattr(conv_line.Line, "__call__", spy)
    with compiled.disabled():
        got = InferenceSession(data, "cpu").run(None, feeds)[0]
        assert bool(calls) == taken
        monkeypatch.setattr(conv_line, "LINE_ELEMENTS", -1)
        columns = InferenceSession(data, "cpu").run(None, feeds)[0]
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.array_equal(_bits(got), _bits(columns))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_conv1d_gather_with_a_fused_relu_and_threads(monkeypatch):
    """Conv + Relu (fused by the optimizer into the convolution's epilogue) through the gather
    gives onnxruntime's result, on two intra-op threads and again (the per-thread buffer reused)."""
    from onnxkit import SessionOptions

    rng = np.random.default_rng(7)
    w = rng.standard_normal((16, 8, 3)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1]), helper.make_node("Relu", ["c"], ["y"])],
                          "g", [helper.make_tensor_value_info("x", TP.FLOAT, [1, 8, 5])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [None] * 3)],
                          [helper.make_tensor("w", TP.FLOAT, w.shape, w.ravel())])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    opts = SessionOptions()
    opts.intra_op_num_threads = 2
    opts.add_session_config_entry("session.intra_op.split_kernels", "1")
    with compiled.disabled():
        sess = InferenceSession(data, opts, backend="cpu")
    for _ in range(3):
        x = rng.standard_normal((1, 8, 5)).astype(np.float32)
        got = sess.run(None, {"x": x})[0]
        np.testing.assert_allclose(got, ref.run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
        assert got.min() >= 0
