"""The small-input paths a streaming model's cold plan runs (issue 44: silero VAD's call on its
numpy bodies): each gives what the general body gives, and onnxruntime's result.

* LSTM's step body for one step of one direction in the default layout (silero's cell): the
  general step body's bits, onnxruntime's within tolerance; near misses: two steps, two
  directions, layout 1, sequence_lens given take the general body.
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
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info(n, elem, None) for n in ("y", "yh", "yc")], inits)
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
