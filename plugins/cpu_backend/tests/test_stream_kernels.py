"""The small-input paths a streaming model's cold plan runs (issue 44: silero VAD's call on its
numpy bodies): each gives what the general body gives, and onnxruntime's result.

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
