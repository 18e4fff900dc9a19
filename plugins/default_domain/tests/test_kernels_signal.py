"""Signal processing, written once (onnxkit_default_domain.kernels.signal), on both backends.

STFT, the windows and MelWeightMatrix run on torch on ``gpu``; DFT is host_only and runs on the
gpu backend's cpu fallback.  Expected values are hand-computed or numpy's FFT in double precision.
"""

from __future__ import annotations

import numpy as np
import pytest

from onnxkit import ir
from onnxkit.errors import EvaluationError
from onnxkit.runtime import InferenceSession
from one_node import BACKENDS

pytest.importorskip("torch")
A = ir.Attribute.make
F32, F64, I64 = 1, 11, 7


def vi(name, elem, shape=None):
    return ir.ValueInfo(name, ir.tensor_type(elem, shape))


def run(op, inputs, feeds, out_type, backend, opset=20, **attrs):
    n = ir.Node([i[0] if i else "" for i in inputs], ["y"], name="s", op_type=op,
                attribute=[A(k, v) for k, v in attrs.items()])
    g = ir.Graph(node=[n], name="g", input=[vi(*i) for i in inputs if i], output=[vi("y", *out_type)])
    sess = InferenceSession(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", opset)], graph=g), backend)
    return sess, sess.run(None, feeds)[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_stft_frames_and_bins_match_numpy(backend):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 20, 1)).astype(np.float32)
    w = np.hanning(8).astype(np.float32)
    sess, y = run("STFT", [("x", F32, [2, 20, 1]), ("step", I64, []), ("w", F32, [8])],
                  {"x": x, "step": np.array(3), "w": w}, (F32, None), backend, opset=17)
    assert sess.fallbacks == []
    assert y.shape == (2, 5, 5, 2)  # (20 - 8) // 3 + 1 frames, 8 // 2 + 1 bins
    frames = np.stack([x[:, 3 * t:3 * t + 8, 0] * w for t in range(5)], axis=1).astype(np.float64)
    want = np.fft.rfft(frames, axis=-1)
    np.testing.assert_allclose(y[..., 0], want.real, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y[..., 1], want.imag, rtol=1e-5, atol=1e-5)
    with pytest.raises(EvaluationError, match="frame_step must be positive"):
        sess.run(None, {"x": x, "step": np.array(0), "w": w})


@pytest.mark.parametrize("backend", BACKENDS)
def test_windows_and_mel_matrix_on_the_backend(backend):
    sess, y = run("HannWindow", [("n", I64, [])], {"n": np.array(4)}, (F32, [None]), backend, opset=17)
    assert sess.fallbacks == [] and y.dtype == np.float32
    np.testing.assert_allclose(y, [0.0, 0.5, 1.0, 0.5], atol=1e-7)           # periodic
    _, y = run("BlackmanWindow", [("n", I64, [])], {"n": np.array(3)}, (F64, [None]), backend, opset=17,
               periodic=0, output_datatype=F64)
    np.testing.assert_allclose(y, [0.0, 1.0, 0.0], atol=1e-12)
    ins = [("m", I64, []), ("d", I64, []), ("r", I64, []), ("lo", F32, []), ("hi", F32, [])]
    feeds = {"m": np.array(3), "d": np.array(16), "r": np.array(8000), "lo": np.array(0, np.float32),
             "hi": np.array(4000, np.float32)}
    sess, y = run("MelWeightMatrix", ins, feeds, (F32, [None, None]), backend, opset=17)
    _, want = run("MelWeightMatrix", ins, feeds, (F32, [None, None]), "cpu", opset=17)
    assert sess.fallbacks == [] and y.shape == (9, 3)
    np.testing.assert_array_equal(y, want)
    assert (y.max(axis=0) == 1.0).all()  # each triangle peaks at 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_dft_runs_on_the_cpu_fallback_on_gpu(backend):
    x = np.zeros((1, 4, 1), np.float32)
    x[0, :, 0] = [1, 2, 3, 4]
    sess, y = run("DFT", [("x", F32, [1, 4, 1])], {"x": x}, (F32, None), backend, opset=17, onesided=1)
    assert [f.op_type for f in sess.fallbacks] == (["DFT"] if backend == "gpu" else [])
    assert y.shape == (1, 3, 2)
    np.testing.assert_allclose(y[0], [[10, 0], [-2, 2], [-2, 0]], atol=1e-6)
