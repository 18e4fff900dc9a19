"""Recurrent operators (RNN, GRU, LSTM) of the cpu backend against onnxruntime: the options the
ONNX node vectors leave out (activations and their alpha/beta, clip, sequence_lens, initial
states, peepholes, input_forget, layout, both directions).  onnxruntime is the oracle (a
test-only import)."""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit.errors import EvaluationError
from onnxkit.runtime import InferenceSession


def session(model, **kw):
    return InferenceSession(model, **kw)

_RNN_INPUTS = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]


def rnn_onnx_model(op, opset, inputs, n_out, elem=1, **attrs):
    """An onnx ModelProto of one recurrent node (inputs: arrays or None by position)."""
    from onnx import TensorProto, helper

    names = [n if v is not None else "" for n, v in zip(_RNN_INPUTS, inputs)]
    outs = ["Y", "Y_h", "Y_c"][:n_out]
    gi = [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "sequence_lens" else elem, list(v.shape))
          for n, v in zip(names, inputs) if n]
    go = [helper.make_tensor_value_info(n, elem, [None] * (4 if n == "Y" else 3)) for n in outs]
    m = helper.make_model(helper.make_graph([helper.make_node(op, names, outs, **attrs)], "g", gi, go),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return m, {n: v for n, v in zip(names, inputs) if n}


def run_onnxkit(m, feed):
    import onnxkit

    return session(onnxkit.load(m.SerializeToString())).run(None, feed)


def assert_like_onnxruntime(op, inputs, n_out, opset=14, **attrs):
    ort = pytest.importorskip("onnxruntime")
    m, feed = rnn_onnx_model(op, opset, inputs, n_out, **attrs)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
    got = run_onnxkit(m, feed)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return got


_rng = np.random.default_rng(1234)
T, BATCH, IN, HID = 5, 3, 4, 3
LENS = np.array([5, 2, 1], dtype=np.int32)


def rand(*shape, scale=1.0):
    return (_rng.standard_normal(shape) * scale).astype(np.float32)


def lstm_inputs(D, layout=0):
    x = rand(BATCH, T, IN) if layout else rand(T, BATCH, IN)
    st = (BATCH, D, HID) if layout else (D, BATCH, HID)
    return [x, rand(D, 4 * HID, IN), rand(D, 4 * HID, HID), rand(D, 8 * HID), LENS, rand(*st), rand(*st),
            rand(D, 3 * HID)]


def gru_inputs(D, layout=0):
    x = rand(BATCH, T, IN) if layout else rand(T, BATCH, IN)
    return [x, rand(D, 3 * HID, IN), rand(D, 3 * HID, HID), rand(D, 6 * HID), LENS,
            rand(*((BATCH, D, HID) if layout else (D, BATCH, HID)))]


def rnn_inputs(D):
    return [rand(T, BATCH, IN), rand(D, HID, IN), rand(D, HID, HID), rand(D, 2 * HID), LENS, rand(D, BATCH, HID)]


DIRECTIONS = [("forward", 1), ("reverse", 1), ("bidirectional", 2)]


@pytest.mark.parametrize("direction,D", DIRECTIONS)
def test_lstm_peepholes_sequence_lens_initial_states_clip_input_forget(direction, D):
    ins = lstm_inputs(D)
    assert_like_onnxruntime("LSTM", ins, 3, direction=direction, hidden_size=HID)
    assert_like_onnxruntime("LSTM", ins, 3, direction=direction, hidden_size=HID, clip=0.5)
    assert_like_onnxruntime("LSTM", ins, 3, direction=direction, hidden_size=HID, input_forget=1)
    # alpha/beta are consumed in order by the functions that take them
    assert_like_onnxruntime("LSTM", ins, 3, direction=direction, hidden_size=HID,
                            activations=["HardSigmoid", "Tanh", "Softsign"] * D,
                            activation_alpha=[0.3] * D, activation_beta=[0.4] * D)


@pytest.mark.parametrize("direction,D", DIRECTIONS)
@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_linear_before_reset_sequence_lens_clip(direction, D, lbr):
    ins = gru_inputs(D)
    assert_like_onnxruntime("GRU", ins, 2, direction=direction, hidden_size=HID, linear_before_reset=lbr)
    assert_like_onnxruntime("GRU", ins, 2, direction=direction, hidden_size=HID, linear_before_reset=lbr, clip=0.3)
    assert_like_onnxruntime("GRU", ins, 2, direction=direction, hidden_size=HID, linear_before_reset=lbr,
                            activations=["LeakyRelu", "ScaledTanh"] * D, activation_alpha=[0.1, 0.7] * D,
                            activation_beta=[1.3] * D)


@pytest.mark.parametrize("direction,D", DIRECTIONS)
@pytest.mark.parametrize("acts", [None, (["Relu"], [], []), (["Affine"], [0.5], [0.1]), (["Elu"], [0.5], []),
                                  (["ThresholdedRelu"], [0.2], []), (["Softplus"], [], [])])
def test_rnn_activations(direction, D, acts):
    attrs = {} if acts is None else {"activations": acts[0] * D, "activation_alpha": acts[1] * D,
                                     "activation_beta": acts[2] * D}
    attrs = {k: v for k, v in attrs.items() if v}
    assert_like_onnxruntime("RNN", rnn_inputs(D), 2, direction=direction, hidden_size=HID, clip=1.0, **attrs)


def test_zero_length_sequences_give_zero_final_states():
    ins = lstm_inputs(1)
    ins[4] = np.array([3, 0, 1], dtype=np.int32)
    y, y_h, y_c = assert_like_onnxruntime("LSTM", ins, 3, hidden_size=HID)
    assert not y[:, :, 1].any() and not y_h[:, 1].any() and not y_c[:, 1].any()


def _swap01(a):
    return np.ascontiguousarray(np.swapaxes(a, 0, 1))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_layout_1_is_batch_first(op):
    ins = {"RNN": rnn_inputs, "GRU": gru_inputs, "LSTM": lstm_inputs}[op](2)
    n_out = 3 if op == "LSTM" else 2
    m0, feed0 = rnn_onnx_model(op, 14, ins, n_out, direction="bidirectional")
    want = run_onnxkit(m0, feed0)
    batch_first = [_swap01(v) if n in ("X", "initial_h", "initial_c") else v for n, v in zip(_RNN_INPUTS, ins)]
    m1, feed1 = rnn_onnx_model(op, 14, batch_first, n_out, direction="bidirectional", layout=1)
    got = run_onnxkit(m1, feed1)
    np.testing.assert_allclose(got[0], np.transpose(want[0], (2, 0, 1, 3)), rtol=1e-6)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, _swap01(w), rtol=1e-6)


@pytest.mark.parametrize("op,old", [("RNN", 1), ("GRU", 1), ("GRU", 3), ("LSTM", 1)])
def test_old_versions_compute_like_version_7(op, old):
    ins = {"RNN": rnn_inputs, "GRU": gru_inputs, "LSTM": lstm_inputs}[op](2)
    n_out = 3 if op == "LSTM" else 2
    extra = {"linear_before_reset": 1} if (op, old) == ("GRU", 3) else {}
    m7, feed = rnn_onnx_model(op, 7, ins, n_out, direction="bidirectional", hidden_size=HID, **extra)
    mo, _ = rnn_onnx_model(op, 6 if old > 1 else old, ins, n_out, direction="bidirectional", hidden_size=HID,
                           output_sequence=1, **extra)
    want, got = run_onnxkit(m7, feed), run_onnxkit(mo, feed)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    if (op, old) == ("GRU", 3):  # linear_before_reset really changes the result
        m7b, _ = rnn_onnx_model(op, 7, ins, n_out, direction="bidirectional", hidden_size=HID)
        assert not np.allclose(run_onnxkit(m7b, feed)[1], got[1])


def gru_by_hand(x, w, r, b, lens, h0):
    """A forward GRU with the defaults of GRU-14 (f = Sigmoid, g = Tanh, linear_before_reset 0),
    written out from its definition in numpy, in the inputs' own precision:
    z = f(Xt Wz' + H Rz' + Wbz + Rbz), r = f(Xt Wr' + H Rr' + Wbr + Rbr),
    h = g(Xt Wh' + (r * H) Rh' + Rbh + Wbh), H = (1 - z) * h + z * H; past a batch entry's
    sequence length its Y rows are 0 and its H stays.  Returns (Y [T, 1, B, H], Y_h [1, B, H])."""
    def sigmoid(v):
        return 1 / (1 + np.exp(-v))

    (wz, wr, wh), (rz, rr, rh) = np.split(w[0], 3), np.split(r[0], 3)
    wbz, wbr, wbh, rbz, rbr, rbh = np.split(b[0], 6)
    h = h0[0].copy()
    y = np.zeros((x.shape[0], 1) + h.shape, x.dtype)
    for step, xt in enumerate(x):
        z = sigmoid(xt @ wz.T + h @ rz.T + wbz + rbz)
        reset = sigmoid(xt @ wr.T + h @ rr.T + wbr + rbr)
        candidate = np.tanh(xt @ wh.T + (reset * h) @ rh.T + rbh + wbh)
        live = (step < lens)[:, None]
        h = np.where(live, (1 - z) * candidate + z * h, h)
        y[step, 0] = np.where(live, h, 0)
    return y, h[None]


def test_gru_by_hand_agrees_with_onnxruntime():
    """The hand-written reference below is itself checked against onnxruntime (float32)."""
    ins = gru_inputs(1)
    want_y, want_h = assert_like_onnxruntime("GRU", ins, 2, hidden_size=HID)
    y, y_h = gru_by_hand(*ins)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y_h, want_h, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("elem,dtype,rtol", [(10, np.float16, 1e-2), (11, np.float64, 1e-12)])
def test_half_and_double_keep_their_type(elem, dtype, rtol):
    """float16 and float64 GRU keep their type and agree with the definition computed by hand in
    float64 (float16: within its own precision; float64: to rounding)."""
    ins = [v if n == "sequence_lens" else v.astype(dtype) for n, v in zip(_RNN_INPUTS, gru_inputs(1))]
    m, feed = rnn_onnx_model("GRU", 14, ins, 2, elem=elem, hidden_size=HID)
    y, y_h = run_onnxkit(m, feed)
    assert y.dtype == dtype and y_h.dtype == dtype
    want_y, want_h = gru_by_hand(*[v if n == "sequence_lens" else v.astype(np.float64)
                                   for n, v in zip(_RNN_INPUTS, ins)])
    np.testing.assert_allclose(y.astype(np.float64), want_y, rtol=rtol, atol=rtol * 1e-1)
    np.testing.assert_allclose(y_h.astype(np.float64), want_h, rtol=rtol, atol=rtol * 1e-1)


def test_bad_activation_count_and_shapes_are_reported():
    m, feed = rnn_onnx_model("RNN", 14, rnn_inputs(2)[:3], 2, direction="bidirectional", activations=["Tanh"])
    with pytest.raises(EvaluationError, match="activations"):
        run_onnxkit(m, feed)
    ins = rnn_inputs(1)[:3]
    ins[1] = rand(1, HID + 1, IN)
    m, feed = rnn_onnx_model("RNN", 14, ins, 2)
    with pytest.raises(Exception, match="W must have shape"):
        run_onnxkit(m, feed)
