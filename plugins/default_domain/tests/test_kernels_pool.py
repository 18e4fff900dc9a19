"""The portable pool kernels (kernels/pool.py, pool_roi.py) on both backends: values against a
direct definition, the geometry shared with inference, the attributes a definition declares,
element types from the type constraints, and the gpu backend running them itself."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

pytest.importorskip("torch")

import onnxkit  # noqa: E402
from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.inference import infer_model  # noqa: E402
from one_node import BACKENDS, build, run_outputs  # noqa: E402

RNG = np.random.default_rng(7)


def run(backend, op, opset, inputs, attrs=None, n_out=1):
    outs, _ = run_outputs(backend, op, opset, inputs, attrs, n_out)
    return outs if n_out > 1 else outs[0]


def naive_pool(x, kernel, strides, pads, dil, ceil, kind, include_pad=False):
    """2-D pooling by its definition: one loop per output pixel over the window's taps."""
    n, c, h, w = x.shape
    out = []
    for i, size in enumerate((h, w)):
        span = size + pads[i] + pads[i + 2] - (kernel[i] - 1) * dil[i] - 1
        o = (-(-span // strides[i]) if ceil else span // strides[i]) + 1
        if ceil and (o - 1) * strides[i] >= size + pads[i]:
            o -= 1
        out.append(o)
    y = np.zeros((n, c, *out))
    arg = np.zeros((n, c, *out), dtype=np.int64)
    for oi, oj in itertools.product(range(out[0]), range(out[1])):
        vals, flat, counted = [], [], 0
        for ki, kj in itertools.product(range(kernel[0]), range(kernel[1])):
            r = oi * strides[0] - pads[0] + ki * dil[0]
            q = oj * strides[1] - pads[1] + kj * dil[1]
            inside_pad = -pads[0] <= r < h + pads[2] and -pads[1] <= q < w + pads[3]
            if 0 <= r < h and 0 <= q < w:
                vals.append(x[:, :, r, q])
                flat.append(r * w + q)
                counted += 1
            elif include_pad and inside_pad:
                counted += 1
        v = np.stack(vals, axis=-1).astype(np.float64)
        if kind == "max":
            y[:, :, oi, oj] = v.max(axis=-1)
            arg[:, :, oi, oj] = np.asarray(flat)[v.argmax(axis=-1)]
        else:
            y[:, :, oi, oj] = v.sum(axis=-1) / counted
    arg += (np.arange(n * c) * h * w).reshape(n, c, 1, 1)
    return y, arg


CASES = [
    dict(kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], dil=[1, 1], ceil=0),
    dict(kernel=[3, 2], strides=[2, 3], pads=[1, 0, 0, 1], dil=[1, 1], ceil=1),
    dict(kernel=[2, 3], strides=[1, 2], pads=[0, 2, 1, 0], dil=[2, 1], ceil=1),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_max_pool_values_and_indices_follow_the_definition(backend, case):
    x = RNG.standard_normal((2, 3, 7, 8)).astype(np.float32)
    attrs = dict(kernel_shape=case["kernel"], strides=case["strides"], pads=case["pads"], dilations=case["dil"],
                 ceil_mode=case["ceil"])
    y, idx = run(backend, "MaxPool", 12, [x], attrs, n_out=2)
    want, want_idx = naive_pool(x, case["kernel"], case["strides"], case["pads"], case["dil"], case["ceil"], "max")
    np.testing.assert_array_equal(y, want.astype(np.float32))
    np.testing.assert_array_equal(idx, want_idx)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("case", CASES)
def test_average_pool_follows_the_definition(backend, case, include_pad):
    x = RNG.standard_normal((1, 2, 7, 8)).astype(np.float32)
    attrs = dict(kernel_shape=case["kernel"], strides=case["strides"], pads=case["pads"], dilations=case["dil"],
                 ceil_mode=case["ceil"], count_include_pad=include_pad)
    y = run(backend, "AveragePool", 19, [x], attrs)
    want, _ = naive_pool(x, case["kernel"], case["strides"], case["pads"], case["dil"], case["ceil"], "avg",
                         bool(include_pad))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_attributes_a_definition_does_not_declare_are_not_read(backend):
    # ceil_mode and dilations exist from MaxPool-10 (Part 2): an older node carrying them is
    # evaluated with their defaults, by inference and kernels alike.
    x = RNG.standard_normal((1, 1, 7, 7)).astype(np.float32)
    attrs = dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, dilations=[2, 2])
    old = run(backend, "MaxPool", 8, [x], attrs, n_out=2)
    plain = run(backend, "MaxPool", 8, [x], dict(kernel_shape=[3, 3], strides=[2, 2]), n_out=2)
    assert old[0].shape == (1, 1, 3, 3)
    np.testing.assert_array_equal(old[0], plain[0])
    np.testing.assert_array_equal(old[1], plain[1])
    assert run(backend, "MaxPool", 10, [x], attrs).shape == (1, 1, 2, 2)    # declared from 10: read
    avg = dict(kernel_shape=[2, 2], ceil_mode=1, strides=[3, 3])
    assert run(backend, "AveragePool", 7, [x], avg).shape == (1, 1, 2, 2)   # ceil_mode from AveragePool-10
    assert run(backend, "AveragePool", 10, [x], avg).shape == (1, 1, 3, 3)


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, pads=[1, 0, 0, 1]),
    dict(kernel_shape=[2, 3], strides=[3, 2], auto_pad="SAME_LOWER"),
    dict(kernel_shape=[5, 5], pads=[0, 0, 0, 0]),          # no window fits a 4 x 9 input along H: extent 0
])
def test_inference_and_kernels_agree_on_the_output_extents(attrs):
    x = RNG.standard_normal((1, 2, 4, 9)).astype(np.float32)
    b, _ = build("MaxPool", 12, [x], attrs)
    inferred = infer_model(onnxkit.load(b)).type_of("y")
    dims = list(inferred.shape.values)
    for backend in BACKENDS:
        assert list(run(backend, "MaxPool", 12, [x], attrs).shape) == dims


@pytest.mark.parametrize("backend", BACKENDS)
def test_element_types_come_from_the_type_constraints(backend):
    xi = np.arange(2 * 3 * 4 * 4, dtype=np.int8).reshape(2, 3, 4, 4)
    y = run(backend, "MaxPool", 12, [xi], dict(kernel_shape=[2, 2], pads=[1, 1, 1, 1]))
    assert y.dtype == np.int8 and y[0, 0, 0, 0] == 0 and y[1, 2, 4, 4] == xi[1, 2, 3, 3]
    with pytest.raises(OnnxkitError, match="int8.*MaxPool-11 does not take"):     # 8-bit integers from 12
        run(backend, "MaxPool", 11, [xi], dict(kernel_shape=[2, 2]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_global_and_lp_pools(backend):
    x = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
    np.testing.assert_allclose(run(backend, "GlobalAveragePool", 22, [x]), x.mean(axis=(2, 3), keepdims=True),
                               rtol=1e-6)
    np.testing.assert_array_equal(run(backend, "GlobalMaxPool", 22, [x]), x.max(axis=(2, 3), keepdims=True))
    want = np.sqrt((x.astype(np.float64) ** 2).sum(axis=(2, 3), keepdims=True))
    np.testing.assert_allclose(run(backend, "GlobalLpPool", 2, [x], dict(p=2)), want, rtol=1e-5)
    np.testing.assert_allclose(run(backend, "GlobalLpPool", 2, [x[:, :, 0, 0]], dict(p=3)), np.abs(x[:, :, 0, 0]),
                               rtol=1e-5)                                       # rank 2: |x|
    lp = run(backend, "LpPool", 18, [x], dict(kernel_shape=[2, 2], p=1, ceil_mode=1, strides=[2, 2]))
    assert lp.shape == (2, 3, 3, 2)
    np.testing.assert_allclose(lp[:, :, 2, 1], np.abs(x[:, :, 4, 2:]).sum(axis=-1), rtol=1e-5)
    with pytest.raises(OnnxkitError, match="order of an Lp norm"):
        run(backend, "LpPool", 18, [x], dict(kernel_shape=[2, 2], p=0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_unpool_inverts_max_pool_and_refuses_stray_indices(backend):
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    y, idx = run(backend, "MaxPool", 12, [x], dict(kernel_shape=[2, 2], strides=[2, 2]), n_out=2)
    up = run(backend, "MaxUnpool", 22, [y, idx], dict(kernel_shape=[2, 2], strides=[2, 2]))
    assert up.shape == x.shape
    np.testing.assert_array_equal(up.reshape(-1)[idx.reshape(-1)], y.reshape(-1))
    assert np.count_nonzero(up) == y.size
    shaped = run(backend, "MaxUnpool", 22, [y, idx, np.array([1, 2, 5, 5], np.int64)],
                 dict(kernel_shape=[2, 2], strides=[2, 2]))
    assert shaped.shape == (1, 2, 5, 5)
    np.testing.assert_array_equal(shaped[:, :, :4, :4], up)
    with pytest.raises(OnnxkitError, match="outside the unpooled tensor"):
        run(backend, "MaxUnpool", 22, [y, idx + 100], dict(kernel_shape=[2, 2], strides=[2, 2]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_roi_pools(backend):
    x = np.arange(1 * 2 * 6 * 6, dtype=np.float32).reshape(1, 2, 6, 6)
    rois = np.array([[0, 0, 0, 3, 3], [0, 2, 2, 5, 5]], dtype=np.float32)
    y = run(backend, "MaxRoiPool", 22, [x, rois], dict(pooled_shape=[2, 2]))
    assert y.shape == (2, 2, 2, 2)
    np.testing.assert_array_equal(y[0, 0], [[7, 9], [19, 21]])        # bins of 2 x 2 over rows/cols 0..3
    np.testing.assert_array_equal(y[1, 1], x[0, 1, 3::2, 3::2])
    ra = run(backend, "RoiAlign", 16, [x, rois[:, 1:], np.zeros(2, np.int64)],
             dict(output_height=2, output_width=2, sampling_ratio=2, coordinate_transformation_mode="output_half_pixel"))
    # x is linear in (row, col): a bilinear average of samples is x at the mean sample position
    np.testing.assert_allclose(ra[0, 0], [[0.75 * 6 + 0.75, 0.75 * 6 + 2.25], [2.25 * 6 + 0.75, 2.25 * 6 + 2.25]],
                               rtol=1e-5)
    with pytest.raises(OnnxkitError, match="batch index 3"):
        run(backend, "RoiAlign", 16, [x, rois[:, 1:], np.array([0, 3], np.int64)], dict(output_height=2))


def test_pools_run_on_the_gpu_backend_itself():
    x = RNG.standard_normal((1, 2, 6, 6)).astype(np.float32)
    for op, opset, attrs, n_out in (("MaxPool", 22, dict(kernel_shape=[2, 2]), 2),
                                    ("AveragePool", 22, dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), 1),
                                    ("GlobalAveragePool", 22, None, 1), ("LpPool", 22, dict(kernel_shape=[2, 2]), 1)):
        _, sess = run_outputs("gpu", op, opset, [x], attrs, n_out)
        assert sess.backend_name == "gpu"
        assert "n0" not in [f.node for f in sess.fallbacks], (op, sess.fallbacks)
