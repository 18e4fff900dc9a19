"""DynamicQuantizeLSTM one node against onnxruntime on cpu and gpu, and against ai.onnx LSTM run by
onnxruntime on the dequantized weights.

onnxruntime quantizes X and each step's H to uint8 on the fly; onnxkit computes in float with the
dequantized weights.  Against onnxruntime the outputs (tanh-bounded, in [-1, 1]) agree within
``ORT_TOL``, that rounding noise; against ai.onnx LSTM on the same float weights within 1e-5."""

from __future__ import annotations

import numpy as np
import pytest

from ms_harness import assert_same, build, run_onnxkit, run_ort

RNG = np.random.default_rng(7)
ORT_TOL = 0.03


def _case(direction, wtype, per_column, seq_lens, states, hidden=5, in_size=4, T=6, Bt=3):
    D = 2 if direction == "bidirectional" else 1
    info = np.iinfo(wtype)
    W = RNG.integers(info.min, info.max + 1, (D, in_size, 4 * hidden)).astype(wtype)
    R = RNG.integers(info.min, info.max + 1, (D, hidden, 4 * hidden)).astype(wtype)
    shape = (D, 4 * hidden) if per_column else (D,)
    mid = 0 if wtype == np.int8 else 128
    ws = (RNG.random(shape) * 0.004 + 0.002).astype(np.float32)
    rs = (RNG.random(shape) * 0.004 + 0.002).astype(np.float32)
    # onnxruntime takes int8 zero points of 0 only, and uint8 ones as initializers only when per column
    shift = (lambda: 0) if wtype == np.int8 or per_column else (lambda: RNG.integers(-3, 4, shape))
    wz = (mid + shift() + np.zeros(shape, np.int64)).astype(wtype)
    rz = (mid + shift() + np.zeros(shape, np.int64)).astype(wtype)
    X = RNG.standard_normal((T, Bt, in_size)).astype(np.float32)
    B = (RNG.standard_normal((D, 8 * hidden)) * 0.1).astype(np.float32)
    sl = np.array([T, 2, 4][:Bt], np.int32) if seq_lens else None
    h0 = RNG.standard_normal((D, Bt, hidden)).astype(np.float32) * 0.5 if states else None
    c0 = RNG.standard_normal((D, Bt, hidden)).astype(np.float32) * 0.5 if states else None
    P = (RNG.standard_normal((D, 3 * hidden)) * 0.1).astype(np.float32) if states else None
    return [X, W, R, B, sl, h0, c0, P, ws, wz, rs, rz], {"hidden_size": hidden, "direction": direction}


def _float_weights(q, scale, zp):
    s = scale.reshape(scale.shape[0], 1, -1)
    z = zp.reshape(zp.shape[0], 1, -1).astype(np.float32)
    return np.transpose((q.astype(np.float32) - z) * s, (0, 2, 1)).copy()


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("wtype,per_column,seq_lens,states", [(np.int8, False, False, False),
                                                              (np.uint8, False, True, True),
                                                              (np.int8, True, True, True)])
def test_dynamic_quantize_lstm(direction, wtype, per_column, seq_lens, states):
    ins, attrs = _case(direction, wtype, per_column, seq_lens, states)
    model, feed = build("DynamicQuantizeLSTM", ins, attrs, n_out=3)
    want = run_ort(model, feed)
    X, W, R, B, sl, h0, c0, P, ws, wz, rs, rz = ins
    fmodel, ffeed = build("LSTM", [X, _float_weights(W, ws, wz), _float_weights(R, rs, rz), B, sl, h0, c0, P],
                          attrs, n_out=3, domain="")
    exact = run_ort(fmodel, ffeed)
    for backend in ("cpu", "gpu"):
        got = run_onnxkit(model, feed, backend)
        assert_same(got, exact, 1e-5, 1e-5, f"{backend} vs float LSTM")
        assert_same(got, want, 0, ORT_TOL, f"{backend} vs onnxruntime")
    assert np.abs(want[0]).max() > 0.1  # not a degenerate all-zero case


def test_missing_scale_is_a_clear_error():
    from onnxkit.errors import OnnxkitError

    ins, attrs = _case("forward", np.int8, False, False, False)
    ins[9] = None
    model, feed = build("DynamicQuantizeLSTM", ins, attrs, n_out=3)
    for backend in ("cpu", "gpu"):
        with pytest.raises(OnnxkitError, match="W_zero_point"):
            run_onnxkit(model, feed, backend)
