"""The portable normalization kernels (kernels/norm.py) and Dropout on both backends: values
against direct formulas, the version rules, element types from the type constraints, and the
gpu backend running them itself."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from onnxkit.errors import OnnxkitError  # noqa: E402
from one_node import BACKENDS, run_outputs  # noqa: E402

RNG = np.random.default_rng(11)


def run(backend, op, opset, inputs, attrs=None, n_out=1):
    outs, _ = run_outputs(backend, op, opset, inputs, attrs, n_out)
    return outs if n_out > 1 else outs[0]


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def close(a, b, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol, atol=atol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_inference_and_training(backend):
    x, s, b, m = randn(2, 3, 4, 5), randn(3), randn(3), randn(3)
    v = np.abs(randn(3)) + 0.5
    bc = (1, 3, 1, 1)
    want = (x - m.reshape(bc)) / np.sqrt(v.reshape(bc) + 1e-5) * s.reshape(bc) + b.reshape(bc)
    close(run(backend, "BatchNormalization", 15, [x, s, b, m, v]), want)
    y, rm, rv = run(backend, "BatchNormalization", 15, [x, s, b, m, v], dict(training_mode=1, momentum=0.8), n_out=3)
    bm, bv = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    close(y, (x - bm.reshape(bc)) / np.sqrt(bv.reshape(bc) + 1e-5) * s.reshape(bc) + b.reshape(bc))
    close(rm, m * 0.8 + bm * 0.2)
    close(rv, v * 0.8 + bv * 0.2)
    # before 9, spatial 0 keeps the parameters per activation (shape X[1:])
    p = [randn(3, 4, 5) for _ in range(3)] + [np.abs(randn(3, 4, 5)) + 0.5]
    want0 = (x - p[2]) / np.sqrt(p[3] + 1e-5) * p[0] + p[1]
    close(run(backend, "BatchNormalization", 7, [x, *p], dict(spatial=0)), want0)
    with pytest.raises(OnnxkitError, match="scale has shape"):
        run(backend, "BatchNormalization", 15, [x, randn(4), b, m, v])


@pytest.mark.parametrize("backend", BACKENDS)
def test_layer_group_instance_rms_norms(backend):
    x = randn(2, 4, 3, 5)
    s, b = randn(3, 5), randn(3, 5)
    y, mean, inv = run(backend, "LayerNormalization", 17, [x, s, b], dict(axis=2), n_out=3)
    mu = x.mean(axis=(2, 3), keepdims=True)
    sd = np.sqrt(x.var(axis=(2, 3), keepdims=True) + 1e-5)
    close(y, (x - mu) / sd * s + b)
    close(mean, mu)
    close(inv, 1 / sd)
    assert mean.shape == (2, 4, 1, 1) and mean.dtype == np.float32
    g = x.reshape(2, 2, -1)
    gy = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    sc, bi = randn(4), randn(4)
    close(run(backend, "GroupNormalization", 21, [x, sc, bi], dict(num_groups=2)),
          gy * sc.reshape(1, 4, 1, 1) + bi.reshape(1, 4, 1, 1))
    sg, bg = randn(2), randn(2)         # version 18: one scale / bias per group
    close(run(backend, "GroupNormalization", 18, [x, sg, bg], dict(num_groups=2)),
          gy * np.repeat(sg, 2).reshape(1, 4, 1, 1) + np.repeat(bg, 2).reshape(1, 4, 1, 1))
    ii = (x - x.mean(axis=(2, 3), keepdims=True)) / np.sqrt(x.var(axis=(2, 3), keepdims=True) + 1e-5)
    close(run(backend, "InstanceNormalization", 22, [x, sc, bi]), ii * sc.reshape(1, 4, 1, 1) + bi.reshape(1, 4, 1, 1))
    rs = randn(5)
    close(run(backend, "RMSNormalization", 23, [x, rs]), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * rs)
    with pytest.raises(OnnxkitError, match="num_groups 3 must divide"):
        run(backend, "GroupNormalization", 21, [x, sc, bi], dict(num_groups=3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_lp_normalization_lrn_mvn(backend):
    x = randn(2, 5, 3, 4)
    x[0, :, 0, 0] = 0.0                              # a zero norm gives 0, not nan
    y = run(backend, "LpNormalization", 22, [x], dict(axis=1, p=2))
    norm = np.sqrt((x * x).sum(axis=1, keepdims=True))
    close(y, np.where(norm == 0, 0, x / np.where(norm == 0, 1, norm)))
    assert np.isfinite(y).all()
    sq = np.pad(x * x, ((0, 0), (1, 1), (0, 0), (0, 0)))
    den = (1.0 + 1e-3 / 3 * sum(sq[:, t:t + 5] for t in range(3))) ** 0.6
    close(run(backend, "LRN", 13, [x], dict(size=3, alpha=1e-3, beta=0.6)), x / den)
    mu = x.mean(axis=(0, 2, 3), keepdims=True)
    close(run(backend, "MeanVarianceNormalization", 13, [x]), (x - mu) / (x.std(axis=(0, 2, 3), keepdims=True) + 1e-9),
          rtol=1e-4, atol=1e-4)
    with pytest.raises(OnnxkitError, match="p must be 1 or 2"):
        run(backend, "LpNormalization", 22, [x], dict(p=3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_masks_are_the_same_on_every_backend(backend):
    x = randn(4, 50)
    y, mask = run(backend, "Dropout", 13, [x, np.array(0.3, np.float32), np.array(True)], dict(seed=5), n_out=2)
    keep = np.random.RandomState(5).uniform(0, 1.0, x.shape) >= 0.3
    np.testing.assert_array_equal(mask, keep)
    close(y, np.where(keep, x / 0.7, 0))
    yi, mi = run(backend, "Dropout", 13, [x], n_out=2)                       # inference: identity
    np.testing.assert_array_equal(yi, x)
    assert mi.dtype == np.bool_ and mi.all()
    assert run(backend, "Dropout", 7, [x], dict(ratio=0.5), n_out=2)[1].dtype == np.float32   # mask of type T


@pytest.mark.parametrize("backend", BACKENDS)
def test_parameter_types_must_agree_with_the_constraints(backend):
    x, s = randn(2, 3, 4), randn(4)
    with pytest.raises(OnnxkitError, match="same element type"):           # X and Scale are both T
        run(backend, "LayerNormalization", 17, [x, s.astype(np.float64)])
    with pytest.raises(OnnxkitError, match="int64"):
        run(backend, "LpNormalization", 22, [np.ones((2, 3), np.int64)])


def test_normalizations_run_on_the_gpu_backend_itself():
    x = randn(2, 4, 3, 5)
    for op, opset, ins, attrs in (("LayerNormalization", 17, [x, randn(5)], None),
                                  ("BatchNormalization", 15, [x] + [np.abs(randn(4)) + 0.5] * 4, None),
                                  ("InstanceNormalization", 22, [x, randn(4), randn(4)], None),
                                  ("LRN", 13, [x], dict(size=3))):
        _, sess = run_outputs("gpu", op, opset, ins, attrs)
        assert sess.backend_name == "gpu"
        assert "n0" not in [f.node for f in sess.fallbacks], (op, sess.fallbacks)
