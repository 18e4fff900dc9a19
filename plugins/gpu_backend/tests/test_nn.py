"""The gpu backend (torch) against the cpu backend (numpy) and onnx.reference for the kernels of
nn_conv.py, nn_pool.py, nn_norm.py, linalg.py and resize.py of onnxkit_gpu.

Each test builds one-node models (``onnx.helper``, tests only) and evaluates them on both
backends and on onnx's ReferenceEvaluator, an independent oracle (gpu_oracle.py names the
comparisons where it is none).
Covered beyond the node vectors: old operator versions (``is_test``/``spatial``/``broadcast``
attributes, Upsample, Resize-10, MaxPool-1/8, AveragePool-1/7, LpPool-1 float ``p``), 1-D and
3-D windows, asymmetric and negative pads, groups, ceil-mode tails, Indices with
``storage_order``, integer and narrow types, training-mode outputs, Dropout masks drawn from a
seed, every Resize coordinate mode, the code paths only CUDA takes (forced on the CPU device),
and the types the gpu backend refuses.  On a machine without CUDA the gpu backend runs on
torch's CPU device.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

import gpu_oracle  # noqa: E402
from gpu_parity import ir_version, tag  # noqa: E402
from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402

RNG = np.random.default_rng(20250301)
BF16 = np.dtype(ml_dtypes.bfloat16)


def build(op, opset, inputs, attrs=None, n_out=1):
    """A one-node model (untyped outputs) and its feeds; None in ``inputs`` = omitted optional input."""
    names = [f"x{k}" if v is not None else "" for k, v in enumerate(inputs)]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph_inputs = [helper.make_tensor_value_info(n, tag(v), list(np.shape(v)))
                    for n, v in zip(names, inputs) if v is not None]
    graph_outputs = [helper.make_empty_tensor_value_info(o) for o in outs]
    m = helper.make_model(helper.make_graph([node], "g", graph_inputs, graph_outputs),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version(opset)
    return m.SerializeToString(), {n: np.asarray(v) for n, v in zip(names, inputs) if v is not None}


def run(backend, op, opset, inputs, attrs=None, n_out=1, seed=None):
    model, feed = build(op, opset, inputs, attrs, n_out)
    return InferenceSession(model, backend, validate=False, seed=seed).run(None, feed)


def same(op, opset, inputs, attrs=None, n_out=1, rtol=1e-5, atol=1e-6, seed=None):
    """Run on both backends; assert equal dtypes and shapes, and values within tolerance
    (integers and booleans exactly), then that the gpu outputs agree with onnx.reference
    (gpu_oracle.py; not for a seeded random draw).  Returns the gpu outputs."""
    want = run("cpu", op, opset, inputs, attrs, n_out, seed)
    got = run("gpu", op, opset, inputs, attrs, n_out, seed)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        r = max(rtol, 1e-2) if w.dtype in (np.float16, BF16) else rtol
        gpu_oracle.assert_close(g, w, r, atol)
    if seed is None and not (attrs or {}).get("seed"):
        model, feed = build(op, opset, inputs, attrs, n_out)
        gpu_oracle.check_against_reference(model, feed, got, op, opset, rtol, atol)
    return got


@pytest.fixture(autouse=True)
def _seeded():
    """The same random inputs for a test however the suite is selected or ordered (the reference
    comparisons that are named in the figures depend on them)."""
    global RNG
    RNG = np.random.default_rng(20250301)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ============================================================================ Conv

@pytest.mark.parametrize("opset", [1, 11, 22])
@pytest.mark.parametrize("case", [
    dict(c=4, m=6, k=(3, 3), strides=(1, 1), pads=(1, 1, 1, 1), dil=(1, 1), group=1),
    dict(c=4, m=6, k=(3, 2), strides=(2, 1), pads=(2, 0, 1, 3), dil=(2, 2), group=2),     # asymmetric
    dict(c=6, m=6, k=(3, 3), strides=(1, 1), pads=(1, 1, 1, 1), dil=(1, 1), group=6),     # depthwise
    dict(c=3, m=6, k=(3, 3), strides=(2, 2), pads=(1, 0, 0, 1), dil=(1, 2), group=3),     # multiplier 2
    dict(c=4, m=5, k=(1, 1), strides=(2, 3), pads=(0, 0, 0, 0), dil=(1, 1), group=1),     # 1x1 strided
    dict(c=2, m=3, k=(2, 2), strides=(1, 1), pads=(-1, 1, 0, -2), dil=(1, 1), group=1),   # negative pads crop
])
def test_conv_2d(opset, case):
    x = randn(2, case["c"], 7, 8)
    w = randn(case["m"], case["c"] // case["group"], *case["k"])
    b = randn(case["m"])
    attrs = dict(kernel_shape=list(case["k"]), strides=list(case["strides"]), pads=list(case["pads"]),
                 dilations=list(case["dil"]), group=case["group"])
    same("Conv", opset, [x, w, b], attrs)
    same("Conv", opset, [x, w], attrs)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET"])
def test_conv_auto_pad(auto_pad):
    y, = same("Conv", 11, [randn(1, 2, 6, 7), randn(3, 2, 2, 4)], {"auto_pad": auto_pad, "strides": [2, 1]})
    assert y.shape == ((1, 3, 3, 7) if auto_pad.startswith("SAME") else (1, 3, 3, 4))


def test_conv_1d_3d_and_types():
    same("Conv", 11, [randn(2, 4, 11), randn(6, 2, 3)], {"pads": [2, 1], "strides": [2], "dilations": [2], "group": 2})
    same("Conv", 11, [randn(1, 2, 5, 6, 4), randn(3, 2, 2, 3, 2)], {"pads": [1, 0, 1, 0, 1, 1], "strides": [1, 2, 1]})
    same("Conv", 11, [randn(1, 3, 4, 5, 6), randn(3, 1, 3, 3, 3)], {"pads": [1] * 6, "group": 3})
    x, w = randn(1, 2, 5, 5), randn(3, 2, 3, 3)
    same("Conv", 11, [x.astype(np.float16), w.astype(np.float16)], {"pads": [1, 1, 1, 1]})
    same("Conv", 1, [x.astype(np.float64), w.astype(np.float64)], rtol=1e-12)
    same("Conv", 22, [x.astype(BF16), w.astype(BF16)])


def test_conv_empty_output_and_errors():
    y, = same("Conv", 11, [randn(1, 2, 2, 2), randn(3, 2, 3, 3)])
    assert y.shape == (1, 3, 0, 0)
    with pytest.raises(OnnxkitError, match="group"):
        run("gpu", "Conv", 11, [randn(1, 4, 5, 5), randn(2, 3, 3, 3)], {"group": 2})
    with pytest.raises(OnnxkitError, match="spatial axes"):
        run("gpu", "ConvTranspose", 11, [randn(1, 1, 2, 2, 2, 2), randn(1, 1, 1, 1, 1, 1)])


def test_conv_over_four_and_five_spatial_axes():
    same("Conv", 11, [randn(2, 4, 5, 4, 3, 6), randn(6, 2, 3, 2, 2, 3), randn(6)],
         {"group": 2, "strides": [2, 1, 1, 2], "dilations": [1, 2, 1, 1], "pads": [1, 0, 1, 0, 0, 1, 1, 2]},
         rtol=1e-4, atol=1e-5)
    same("Conv", 22, [randn(1, 2, 3, 3, 4, 3, 3), randn(3, 2, 2, 1, 2, 2, 2)], {"auto_pad": "SAME_LOWER"},
         rtol=1e-4, atol=1e-5)
    same("ConvInteger", 10, [RNG.integers(0, 255, (1, 2, 3, 4, 3, 4)).astype(np.uint8),
                             RNG.integers(0, 255, (2, 2, 2, 2, 2, 2)).astype(np.uint8), np.array(100, np.uint8)],
         {"pads": [1, 0, 0, 1, 0, 1, 1, 0]})
    with pytest.raises(OnnxkitError, match="bfloat16"):      # bfloat16 only from Conv-22
        run("gpu", "Conv", 11, [randn(1, 1, 3, 3, dtype=BF16), randn(1, 1, 1, 1, dtype=BF16)])


# ============================================================================ ConvTranspose

@pytest.mark.parametrize("opset", [1, 11, 22])
@pytest.mark.parametrize("attrs", [
    {"strides": [2, 3], "output_padding": [1, 2], "pads": [1, 0, 0, 1], "dilations": [1, 2]},
    {"strides": [2, 2], "auto_pad": "SAME_LOWER"},
    {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
    {"strides": [2, 2], "output_shape": [15, 18]},                        # larger than natural: zeros around
    {"strides": [3, 1], "output_shape": [1, 2, 17, 9], "output_padding": [1, 0]},
    {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},  # torch's own padding path
    {"strides": [2, 2], "pads": [0, 1, 1, 2], "output_padding": [1, 1]},
    {"strides": [1, 1], "pads": [1, 2, 1, 2], "output_padding": [2, 0], "dilations": [2, 1]},
    {"strides": [2, 1], "pads": [0, 0, 0, 0], "output_padding": [3, 0]},  # output_padding >= stride
])
def test_conv_transpose_2d(opset, attrs):
    x, w, b = randn(2, 3, 5, 6), randn(3, 2, 3, 3), randn(2)
    same("ConvTranspose", opset, [x, w, b], attrs)
    same("ConvTranspose", opset, [x, w], attrs)


def test_conv_transpose_groups_1d_3d_types():
    same("ConvTranspose", 11, [randn(1, 4, 5, 5), randn(4, 3, 2, 2), randn(6)], {"group": 2, "strides": [2, 2]})
    same("ConvTranspose", 11, [randn(2, 2, 7), randn(2, 3, 4)], {"strides": [3], "pads": [1, 2]})
    same("ConvTranspose", 11, [randn(1, 2, 3, 4, 3), randn(2, 2, 2, 3, 2)],
         {"strides": [2, 1, 2], "dilations": [1, 2, 1]})
    x, w = randn(1, 2, 4, 4), randn(2, 2, 3, 3)
    same("ConvTranspose", 11, [x.astype(np.float16), w.astype(np.float16)], {"strides": [2, 2]})
    same("ConvTranspose", 22, [x.astype(BF16), w.astype(BF16)], {"strides": [2, 2]})
    same("ConvTranspose", 11, [x.astype(np.float64), w.astype(np.float64)], {"strides": [2, 2]}, rtol=1e-12)


# ============================================================================ MaxPool

@pytest.mark.parametrize("opset", [10, 11, 12, 22])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 0, 0, 2], "ceil_mode": 1},
    {"kernel_shape": [3, 2], "strides": [1, 2], "dilations": [2, 2], "pads": [1, 1, 2, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"},
    {"kernel_shape": [2, 2], "strides": [3, 3], "auto_pad": "SAME_UPPER", "ceil_mode": 1},
    {"kernel_shape": [2, 2], "pads": [2, 2, 2, 2]},                     # windows wholly in the padding
])
@pytest.mark.parametrize("storage_order", [0, 1])
def test_maxpool_values_and_indices(opset, attrs, storage_order):
    x = randn(2, 3, 7, 8)
    a = dict(attrs, storage_order=storage_order)
    same("MaxPool", opset, [x], a)
    same("MaxPool", opset, [x], a, n_out=2)


def test_maxpool_old_versions_ranks_types():
    x = randn(2, 3, 6, 7)
    same("MaxPool", 1, [x], {"kernel_shape": [2, 2], "pads": [1, 0, 0, 1]})
    same("MaxPool", 8, [x], {"kernel_shape": [3, 3], "strides": [2, 1]}, n_out=2)
    same("MaxPool", 8, [x], {"kernel_shape": [3, 3], "storage_order": 1}, n_out=2)
    same("MaxPool", 11, [randn(2, 3, 9)], {"kernel_shape": [3], "strides": [2], "ceil_mode": 1}, n_out=2)
    same("MaxPool", 11, [randn(1, 2, 5, 4, 6)], {"kernel_shape": [2, 3, 2], "dilations": [1, 1, 2]}, n_out=2)
    same("MaxPool", 11, [randn(1, 2, 3, 4, 3, 4)], {"kernel_shape": [2, 2, 2, 2]})   # 4 spatial axes
    for dt in (np.int8, np.uint8):
        xi = RNG.integers(np.iinfo(dt).min, np.iinfo(dt).max, (1, 2, 5, 5)).astype(dt)
        same("MaxPool", 12, [xi], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, n_out=2)
        same("MaxPool", 12, [xi], {"kernel_shape": [2, 2], "pads": [2, 2, 2, 2]})
    same("MaxPool", 12, [x.astype(np.float16)], {"kernel_shape": [2, 2]}, n_out=2)
    same("MaxPool", 22, [x.astype(BF16)], {"kernel_shape": [2, 2]})
    same("MaxPool", 12, [x.astype(np.float64)], {"kernel_shape": [2, 2]})
    with pytest.raises(OnnxkitError, match="int8"):       # integer inputs only from MaxPool-12
        run("gpu", "MaxPool", 11, [np.zeros((1, 1, 3, 3), np.int8)], {"kernel_shape": [2, 2]})


def test_maxpool_indices_flatten_over_batch_and_channels():
    x = np.arange(2 * 3 * 4 * 4, dtype=np.float32).reshape(2, 3, 4, 4)
    y, i = run("gpu", "MaxPool", 12, [x], {"kernel_shape": [2, 2], "strides": [2, 2]}, n_out=2)
    np.testing.assert_array_equal(i, x[:, :, 1::2, 1::2].astype(np.int64))   # x is its own flat index
    _, ic = run("gpu", "MaxPool", 12, [x], {"kernel_shape": [2, 2], "strides": [2, 2], "storage_order": 1}, n_out=2)
    hw = np.array([[5, 13], [7, 15]])      # column-major offsets of (1, 1), (1, 3), (3, 1), (3, 3) in 4x4
    np.testing.assert_array_equal(ic[0, 0], hw)
    np.testing.assert_array_equal(ic[1, 2], hw + 5 * 16)


def test_maxpool_cuda_native_path_forced(monkeypatch):
    from onnxkit_gpu.overrides import pool as nn_pool

    monkeypatch.setattr(nn_pool, "_use_native", lambda x: True)
    x = randn(2, 3, 9, 8)
    for attrs in ({"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 0, 0, 1]},
                  {"kernel_shape": [3, 2], "dilations": [2, 1], "auto_pad": "SAME_UPPER"}):
        same("MaxPool", 12, [x], attrs)
    same("MaxPool", 12, [randn(1, 2, 9)], {"kernel_shape": [4], "strides": [3], "ceil_mode": 1})
    same("MaxPool", 12, [randn(1, 2, 4, 5, 6)], {"kernel_shape": [2, 2, 3], "pads": [1, 0, 1, 0, 1, 1]})


# ============================================================================ AveragePool / LpPool

@pytest.mark.parametrize("opset", [10, 11, 19, 22])
@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [3, 3], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 0, 0, 1]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1, "pads": [1, 0, 0, 1], "count_include_pad": 1},
    {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER", "count_include_pad": 1},
    {"kernel_shape": [2, 3], "strides": [3, 2], "auto_pad": "SAME_UPPER"},
    {"kernel_shape": [3, 3], "pads": [2, 1, 2, 1], "count_include_pad": 0},
])
def test_average_pool(opset, attrs):
    same("AveragePool", opset, [randn(2, 3, 7, 8)], attrs)


def test_average_pool_old_versions_dilations_ranks():
    x = randn(1, 2, 7, 6)
    same("AveragePool", 1, [x], {"kernel_shape": [3, 2], "pads": [1, 1, 0, 1]})       # pads never counted
    same("AveragePool", 7, [x], {"kernel_shape": [3, 2], "pads": [1, 1, 0, 1], "count_include_pad": 1})
    same("AveragePool", 19, [x], {"kernel_shape": [2, 2], "dilations": [2, 3], "pads": [1, 2, 1, 0],
                                  "ceil_mode": 1, "strides": [2, 2]})
    same("AveragePool", 19, [x], {"kernel_shape": [2, 2], "dilations": [2, 3], "count_include_pad": 1,
                                  "pads": [1, 2, 1, 0]})
    same("AveragePool", 11, [randn(2, 3, 10)], {"kernel_shape": [3], "strides": [2], "pads": [1, 2]})
    same("AveragePool", 11, [randn(1, 2, 4, 5, 6)], {"kernel_shape": [2, 2, 3], "ceil_mode": 1, "strides": [2, 2, 2]})
    same("AveragePool", 11, [x.astype(np.float16)], {"kernel_shape": [2, 2]})
    same("AveragePool", 22, [x.astype(BF16)], {"kernel_shape": [2, 2]})
    same("AveragePool", 11, [x.astype(np.float64)], {"kernel_shape": [2, 2]}, rtol=1e-12)


@pytest.mark.parametrize("opset, p", [(1, 2.0), (1, 3.0), (2, 3), (11, 2), (18, 1), (22, 2)])
def test_lp_pool(opset, p):
    attrs = {"kernel_shape": [2, 3], "strides": [1, 2], "pads": [1, 0, 0, 1], "p": p}
    if opset >= 18:
        attrs.update(ceil_mode=1, dilations=[2, 1])
    same("LpPool", opset, [randn(2, 3, 6, 7)], attrs, rtol=1e-4)


@pytest.mark.parametrize("op, opset, attrs", [
    ("GlobalAveragePool", 1, {}), ("GlobalAveragePool", 22, {}), ("GlobalMaxPool", 1, {}), ("GlobalMaxPool", 22, {}),
    ("GlobalLpPool", 1, {"p": 3.0}), ("GlobalLpPool", 2, {"p": 1}), ("GlobalLpPool", 22, {}),
])
def test_global_pools(op, opset, attrs):
    for x in (randn(2, 3, 4, 5), randn(2, 3, 6), randn(1, 2, 2, 3, 2)):
        same(op, opset, [x], attrs, rtol=1e-4)
    same(op, opset, [randn(2, 3, 4, 5, dtype=np.float16)], attrs)
    if opset == 22:
        same(op, opset, [randn(2, 3, 4, 5, dtype=BF16)], attrs)


# ============================================================================ normalization

@pytest.mark.parametrize("opset, attrs, n_out", [
    (1, {"is_test": 1, "consumed_inputs": [0, 0, 0, 1, 1]}, 1),
    (6, {"is_test": 1, "epsilon": 1e-3}, 1),
    (6, {"is_test": 1, "spatial": 0}, 1),
    (6, {"is_test": 0}, 5),                         # training: running stats, then batch stats
    (6, {"is_test": 0, "spatial": 0}, 5),
    (7, {}, 1), (7, {"spatial": 0, "momentum": 0.7}, 5), (9, {}, 1), (9, {"momentum": 0.8}, 5),
    (14, {}, 1), (14, {"training_mode": 1}, 3), (15, {"training_mode": 1, "momentum": 0.5}, 3), (15, {}, 1),
])
def test_batch_norm(opset, attrs, n_out):
    x = randn(3, 4, 5, 2)
    spatial = attrs.get("spatial", 1)
    pshape = (4,) if spatial else (4, 5, 2)
    params = [randn(*pshape), randn(*pshape), randn(*pshape), np.abs(randn(*pshape)) + 0.5]
    if opset == 1:
        # BatchNormalization-1 declares consumed_inputs; onnx helper needs it set on the node
        same("BatchNormalization", opset, [x] + params, attrs, n_out)
    else:
        same("BatchNormalization", opset, [x] + params, attrs, n_out, rtol=1e-4)
    if opset >= 14:
        same("BatchNormalization", opset, [x.astype(np.float16)] + [p.astype(np.float16) for p in params],
             attrs, n_out)
    if opset == 15:
        # scale/bias and mean/var in types other than X's
        mixed = [params[0].astype(np.float64), params[1].astype(np.float64)] + [p.astype(np.float16)
                                                                              for p in params[2:]]
        same("BatchNormalization", opset, [x] + mixed, attrs, n_out, rtol=1e-4)


def test_instance_layer_group_rms_norms():
    x = randn(2, 4, 3, 5)
    for opset in (1, 6, 22):
        same("InstanceNormalization", opset, [x, randn(4), randn(4)], {"epsilon": 1e-3}, rtol=1e-4)
    same("InstanceNormalization", 6, [x.astype(np.float16), randn(4, dtype=np.float16), randn(4, dtype=np.float16)])
    for axis in (-1, 1, 0, 3, -3):
        shape = x.shape[axis % 4:]
        same("LayerNormalization", 17, [x, randn(*shape), randn(*shape)], {"axis": axis}, n_out=3, rtol=1e-4)
    same("LayerNormalization", 17, [x, randn(5)], {"stash_type": 11, "epsilon": 1e-2}, n_out=3, rtol=1e-4)
    same("LayerNormalization", 17, [x.astype(np.float16), randn(5, dtype=np.float16)], n_out=3)
    # cpu rounds Y once (as onnxruntime), the portable kernel at the function body's rounding points
    # (the normalized X cast to X's type first): a unit of bfloat16 (2**-8 of terms near 1) apart
    same("LayerNormalization", 17, [x.astype(BF16), randn(5, dtype=BF16), randn(5, dtype=BF16)], n_out=3, atol=8e-3)
    same("GroupNormalization", 18, [x, randn(2), randn(2)], {"num_groups": 2}, rtol=1e-4)
    same("GroupNormalization", 21, [x, randn(4), randn(4)], {"num_groups": 2, "epsilon": 1e-2}, rtol=1e-4)
    same("GroupNormalization", 21, [x.astype(np.float16), randn(4, dtype=np.float16), randn(4, dtype=np.float16)],
         {"num_groups": 4})
    same("RMSNormalization", 23, [x, randn(5)], rtol=1e-4)
    same("RMSNormalization", 23, [x, randn(3, 5)], {"axis": 2}, rtol=1e-4)
    same("MeanVarianceNormalization", 9, [x], rtol=1e-4)
    same("MeanVarianceNormalization", 13, [x], {"axes": [1, 3]}, rtol=1e-4)


def test_lp_normalization_and_lrn():
    x = randn(2, 5, 3, 4)
    x[0, :, 1, 2] = 0.0                                   # a zero norm gives 0
    for opset in (1, 22):
        for p in (1, 2):
            for axis in (1, -1, 0):
                same("LpNormalization", opset, [x], {"p": p, "axis": axis}, rtol=1e-4)
    same("LpNormalization", 22, [x.astype(BF16)], {"p": 2})
    for opset in (1, 13):
        for attrs in ({"size": 3}, {"size": 4, "alpha": 0.01, "beta": 1.0, "bias": 2.0},
                      {"size": 5, "beta": 0.5}, {"size": 1}):
            same("LRN", opset, [x], attrs, rtol=1e-4)
    same("LRN", 13, [x.astype(BF16)], {"size": 3})


# ============================================================================ Dropout

@pytest.mark.parametrize("opset, attrs", [(1, {"is_test": 1}), (6, {"is_test": 1}), (7, {}), (10, {"ratio": 0.3}),
                                          (12, {}), (13, {}), (22, {})])
def test_dropout_inference_is_identity_with_a_mask_of_ones(opset, attrs):
    x = randn(3, 4)
    y, mask = same("Dropout", opset, [x], attrs, n_out=2)
    np.testing.assert_array_equal(y, x)
    assert mask.dtype == (np.bool_ if opset >= 10 else np.float32) and mask.all()
    y1, = same("Dropout", opset, [x], attrs)
    np.testing.assert_array_equal(y1, x)


def test_dropout_training_masks_match_the_cpu_backend_bit_for_bit():
    x = randn(4, 50)
    ratio, on = np.array(0.4, np.float32), np.array(True)
    y, mask = same("Dropout", 13, [x, ratio, on], {"seed": 7}, n_out=2)
    assert 0 < mask.sum() < mask.size and y[~mask].max() == 0
    np.testing.assert_allclose(y[mask], x[mask] / np.float32(0.6), rtol=1e-6)
    same("Dropout", 22, [x.astype(np.float16), ratio, on], {"seed": 3}, n_out=2)
    same("Dropout", 12, [x, np.array(0.5, np.float64), on], n_out=2, seed=11)       # the session's seed
    same("Dropout", 6, [x], {"is_test": 0, "ratio": 0.25}, n_out=2, seed=5)          # old training form
    y0, m0 = same("Dropout", 12, [x, np.array(0.0, np.float32), on], n_out=2)        # ratio 0: identity
    np.testing.assert_array_equal(y0, x)
    with pytest.raises(OnnxkitError, match="ratio"):
        run("gpu", "Dropout", 12, [x, np.array(1.0, np.float32), on], n_out=2)


# ============================================================================ Gemm / MatMul / Einsum

@pytest.mark.parametrize("opset", [1, 6, 7, 9, 11, 13])
@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.5, "beta": 2.0}, {"transA": 1, "transB": 1, "alpha": -1.5}])
def test_gemm(opset, attrs):
    ta, tb = attrs.get("transA", 0), attrs.get("transB", 0)
    a = randn(*((4, 3) if ta else (3, 4)))
    b = randn(*((5, 4) if tb else (4, 5)))
    a2 = dict(attrs, broadcast=1) if opset < 7 else attrs
    same("Gemm", opset, [a, b, randn(3, 5)], attrs, rtol=1e-4)
    same("Gemm", opset, [a, b, randn(5)], a2, rtol=1e-4)
    same("Gemm", opset, [a, b, randn(1, 1)], a2, rtol=1e-4)
    if opset >= 11:
        same("Gemm", opset, [a, b], attrs, rtol=1e-4)
    if opset >= 9:
        for dt in (np.int32, np.int64):
            ai, bi = RNG.integers(-9, 9, a.shape).astype(dt), RNG.integers(-9, 9, b.shape).astype(dt)
            same("Gemm", opset, [ai, bi, RNG.integers(-9, 9, (5,)).astype(dt)], a2)
    same("Gemm", opset, [a.astype(np.float16), b.astype(np.float16), randn(3, 5, dtype=np.float16)], attrs)
    if opset >= 13:
        same("Gemm", opset, [a.astype(BF16), b.astype(BF16), randn(3, 5, dtype=BF16)], attrs)


def test_gemm_strict_c_before_7():
    a, b = randn(3, 4), randn(4, 5)
    with pytest.raises(OnnxkitError, match="broadcast"):
        run("gpu", "Gemm", 6, [a, b, randn(5)])
    with pytest.raises(OnnxkitError, match="broadcast"):
        run("gpu", "Gemm", 7, [a, b, randn(2, 5)])


@pytest.mark.parametrize("sa, sb", [((4,), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((3, 4), (4, 5)),
                                    ((2, 1, 3, 4), (5, 4, 2)), ((1, 3, 4), (2, 4, 6))])
def test_matmul(sa, sb):
    for opset in (1, 9, 13):
        same("MatMul", opset, [randn(*sa), randn(*sb)], rtol=1e-4)
    for dt in (np.int32, np.int64):
        ai, bi = RNG.integers(-50, 50, sa).astype(dt), RNG.integers(-50, 50, sb).astype(dt)
        same("MatMul", 13, [ai, bi])
    same("MatMul", 13, [randn(*sa, dtype=BF16), randn(*sb, dtype=BF16)])
    same("MatMul", 1, [randn(*sa, dtype=np.float16), randn(*sb, dtype=np.float16)])


def test_integer_products_on_the_cuda_path_wrap_like_numpy():
    from onnxkit_default_domain.kernels.linalg import einsum_broadcast, int_matmul

    for sa, sb in (((4,), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((2, 1, 3, 4), (5, 4, 2))):
        a = RNG.integers(-2**31, 2**31 - 1, sa).astype(np.int32)
        b = RNG.integers(-2**31, 2**31 - 1, sb).astype(np.int32)
        got = int_matmul(torch.from_numpy(a), torch.from_numpy(b), force_broadcast=True).numpy()
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, np.matmul(a, b))                     # wraps modulo 2**32
    x = RNG.integers(-5, 5, (2, 3, 3)).astype(np.int64)
    y = RNG.integers(-5, 5, (3, 4)).astype(np.int64)
    z = RNG.integers(-5, 5, (3, 3)).astype(np.int64)
    for eq, ops in (("bij,jk->bik", (x, y)), ("bii->bi", (x,)), ("bii", (x,)), ("...ij,jk", (x, y)),
                    ("bij->", (x,)), ("bij,bij->b", (x, x)), ("ij,jk,bki->b", (z, z.T, x))):
        got = einsum_broadcast(eq, [torch.from_numpy(o) for o in ops]).numpy()
        np.testing.assert_array_equal(got, np.einsum(eq, *ops))


@pytest.mark.parametrize("eq, shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ii->i", [(4, 4)]),
    ("ij->", [(3, 4)]), ("...ij,...jk", [(2, 3, 4), (4, 5)]), ("i,i", [(5,), (5,)]), ("Bab->baB", [(2, 3, 4)]),
    ("ij, jk, kl -> il", [(2, 3), (3, 4), (4, 2)]), ("bii->bi", [(2, 3, 3)]),
])
def test_einsum(eq, shapes):
    for opset in (12, 28):
        same("Einsum", opset, [randn(*s) for s in shapes], {"equation": eq}, rtol=1e-4)
    same("Einsum", 12, [RNG.integers(-9, 9, s).astype(np.int32) for s in shapes], {"equation": eq})
    same("Einsum", 12, [randn(*s, dtype=np.float16) for s in shapes], {"equation": eq})


def test_matmul_integer_and_det():
    a = RNG.integers(0, 255, (2, 3, 4)).astype(np.uint8)
    b = RNG.integers(-128, 127, (4, 5)).astype(np.int8)
    same("MatMulInteger", 10, [a, b])
    same("MatMulInteger", 10, [a, b, np.array(7, np.uint8), np.array([1, -2, 3, 0, 5], np.int8)])
    same("MatMulInteger", 10, [a[0], b, np.array([1, 2, 3], np.uint8), np.array(-4, np.int8)])
    for opset in (11, 22):
        same("Det", opset, [randn(3, 3)], rtol=1e-4)
        same("Det", opset, [randn(2, 4, 4).astype(np.float64)], rtol=1e-10)


# ============================================================================ Resize / Upsample

def _scales(*v):
    return np.array(v, np.float32)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_10_and_upsample(mode):
    x = randn(1, 2, 4, 5)
    for sc in (_scales(1, 1, 2, 3), _scales(1, 1, 0.6, 0.5), _scales(1, 1, 1.7, 0.8)):
        same("Resize", 10, [x, sc], {"mode": mode})
        same("Upsample", 9, [x, sc], {"mode": mode})
        same("Upsample", 10, [x, sc], {"mode": mode})
        same("Upsample", 7, [x], {"mode": mode, "scales": [float(s) for s in sc]})
    same("Upsample", 1, [x], {"mode": "bilinear" if mode == "linear" else mode, "height_scale": 2.0,
                              "width_scale": 3.0})


COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]


@pytest.mark.parametrize("opset", [11, 13, 18, 19])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_modes(opset, mode):
    x = randn(1, 2, 5, 6)
    coords = COORDS + (["tf_half_pixel_for_nn"] if opset == 11 else []) + \
        (["half_pixel_symmetric"] if opset >= 19 else [])
    empty = np.zeros(0, np.float32)
    for coord in coords:
        attrs = {"mode": mode, "coordinate_transformation_mode": coord}
        for sc in (_scales(1, 1, 1.6, 2.5), _scales(1, 1, 0.5, 0.7)):
            same("Resize", opset, [x, empty, sc], attrs, rtol=1e-4, atol=1e-5)
        same("Resize", opset, [x, empty, None, np.array([1, 2, 3, 9], np.int64)], attrs, rtol=1e-4, atol=1e-5)
    if mode == "nearest":
        for nm in ("round_prefer_ceil", "floor", "ceil"):
            same("Resize", opset, [x, empty, _scales(1, 1, 1.7, 0.6)], {"mode": mode, "nearest_mode": nm})
    if mode == "cubic":
        same("Resize", opset, [x, empty, _scales(1, 1, 0.8, 1.9)],
             {"mode": mode, "cubic_coeff_a": -0.5, "exclude_outside": 1}, rtol=1e-4, atol=1e-5)


def test_resize_crop_axes_antialias_policies_and_types():
    x = randn(1, 2, 6, 7)
    roi = np.array([0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3], np.float32)
    for mode in ("nearest", "linear", "cubic"):
        same("Resize", 11, [x, roi, _scales(1, 1, 1.5, 0.8)],
             {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -3.0},
             rtol=1e-4, atol=1e-5)
        for aa in (0, 1):
            same("Resize", 18, [x, None, _scales(0.4, 0.6)], {"mode": mode, "antialias": aa, "axes": [3, 2]},
                 rtol=1e-4, atol=1e-5)
    for policy in ("stretch", "not_larger", "not_smaller"):
        same("Resize", 18, [x, None, None, np.array([4, 11], np.int64)],
             {"mode": "linear", "axes": [2, 3], "keep_aspect_ratio_policy": policy}, rtol=1e-4)
    same("Resize", 18, [x, np.array([0.1, 0.3, 0.8, 0.9], np.float32), _scales(2.0, 1.5)],
         {"mode": "linear", "axes": [2, 3], "coordinate_transformation_mode": "tf_crop_and_resize"}, rtol=1e-4)
    for dt in (np.uint8, np.int8, np.int32, np.int64):
        xi = RNG.integers(0 if dt == np.uint8 else -100, 100, (1, 1, 4, 5)).astype(dt)
        same("Resize", 13, [xi, None, _scales(1, 1, 1.5, 2.2)], {"mode": "cubic"})
        same("Resize", 13, [xi, None, _scales(1, 1, 0.5, 2.0)], {"mode": "nearest"})
    same("Resize", 13, [x.astype(np.float16), None, _scales(1, 1, 2, 2)], {"mode": "linear"})
    same("Resize", 19, [x.astype(BF16), None, _scales(1, 1, 0.5, 2)], {"mode": "cubic"})
    same("Resize", 13, [x.astype(np.float64), None, _scales(1, 1, 1.3, 2)], {"mode": "cubic"}, rtol=1e-10)
    same("Resize", 13, [x > 0, None, _scales(1, 1, 2, 2)], {"mode": "nearest"})
    same("Resize", 13, [randn(2, 3), None, _scales(2.0, 0.5)], {"mode": "linear"})       # rank 2


def test_resize_refusals():
    x = randn(1, 1, 2, 2)
    with pytest.raises(OnnxkitError, match="complex"):
        run("gpu", "Resize", 13, [x.astype(np.complex64), None, _scales(1, 1, 2, 2)], {"mode": "nearest"})
    with pytest.raises(OnnxkitError, match="half_pixel_symmetric"):
        run("gpu", "Resize", 18, [x, None, _scales(1, 1, 2, 2)],
            {"coordinate_transformation_mode": "half_pixel_symmetric"})
    with pytest.raises(OnnxkitError, match="one of scales and sizes"):
        run("gpu", "Resize", 13, [x, None, _scales(1, 1, 2, 2), np.array([1, 1, 4, 4], np.int64)])


# ============================================================================ the other kernels of these families

def test_conv_integer_col2im_deform_conv():
    x = RNG.integers(-128, 127, (2, 2, 5, 5)).astype(np.int8)
    w = RNG.integers(-128, 127, (3, 2, 2, 3)).astype(np.int8)
    same("ConvInteger", 10, [x, w], {"pads": [1, 0, 0, 1], "strides": [2, 1]})
    same("ConvInteger", 10, [x, w, np.array(-3, np.int8), np.array([1, -2, 5], np.int8)], {"pads": [1, 1, 1, 1]})
    xu = RNG.integers(0, 255, (1, 4, 6)).astype(np.uint8)
    same("ConvInteger", 10, [xu, RNG.integers(0, 255, (2, 2, 3)).astype(np.uint8), np.array(128, np.uint8)],
         {"group": 2, "auto_pad": "SAME_UPPER"})
    cols = randn(2, 2 * 6, 15)
    same("Col2Im", 18, [cols, np.array([5, 6]), np.array([2, 3])], {"strides": [2, 1], "pads": [1, 0, 0, 1]})
    same("Col2Im", 18, [randn(1, 4, 15), np.array([4, 7]), np.array([2, 2])], {"dilations": [1, 2]})
    same("Col2Im", 18, [randn(1, 8, 18), np.array([3, 4, 4]), np.array([2, 2, 2])])           # 3-D
    same("Col2Im", 18, [RNG.integers(-9, 9, (1, 4, 12)).astype(np.int32), np.array([4, 5]), np.array([2, 2])])
    xd, wd = randn(2, 4, 5, 6), randn(6, 2, 2, 2)
    off = randn(2, 2 * 4 * 2, 4, 3)
    same("DeformConv", 19, [xd, wd, off, randn(6), randn(2, 2 * 4, 4, 3)],
         {"group": 2, "offset_group": 2, "strides": [1, 2], "pads": [0, 0, 0, 1]}, rtol=1e-4, atol=1e-5)
    same("DeformConv", 22, [xd, wd[:, :, :1], randn(2, 2 * 2, 5, 5)], {"group": 2, "dilations": [2, 1]},
         rtol=1e-4, atol=1e-5)


def test_max_unpool_and_roi_pools():
    x = randn(2, 3, 6, 8)
    y, i = run("cpu", "MaxPool", 12, [x], {"kernel_shape": [2, 2], "strides": [2, 2]}, n_out=2)
    for opset in (9, 11, 22):
        same("MaxUnpool", opset, [y, i], {"kernel_shape": [2, 2], "strides": [2, 2]})
        same("MaxUnpool", opset, [y, i, np.array([2, 3, 7, 9])], {"kernel_shape": [2, 2], "strides": [2, 2]})
    with pytest.raises(OnnxkitError, match="outside"):
        run("gpu", "MaxUnpool", 11, [y, i + 1000], {"kernel_shape": [2, 2], "strides": [2, 2]})
    img = randn(2, 3, 10, 12)
    rois5 = np.array([[0, 1, 1, 6, 8], [1, -2.6, 0.5, 14, 3], [1, 4, 4, 4, 4]], np.float32)
    for opset in (1, 22):
        same("MaxRoiPool", opset, [img, rois5], {"pooled_shape": [3, 4], "spatial_scale": 0.7})
    rois = np.array([[1, 1, 6, 8], [-2.6, 0.5, 14, 3], [4, 4, 4.2, 4.1]], np.float32)
    bi = np.array([0, 1, 1], np.int64)
    for opset in (10, 16, 22):
        for attrs in ({}, {"mode": "max", "sampling_ratio": 2}, {"output_height": 3, "output_width": 2,
                                                                  "spatial_scale": 0.5},
                      {"mode": "max", "output_height": 2, "output_width": 3}):
            if opset >= 16:
                for ctm in ("half_pixel", "output_half_pixel"):
                    same("RoiAlign", opset, [img, rois, bi], dict(attrs, coordinate_transformation_mode=ctm),
                         rtol=1e-4, atol=1e-5)
            else:
                same("RoiAlign", opset, [img, rois, bi], attrs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [16, 20, 22])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample(opset, mode, padding):
    if opset == 16:
        mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode)
    x = randn(2, 3, 5, 6)
    grid = RNG.uniform(-1.4, 1.4, (2, 4, 3, 2)).astype(np.float32)
    grid[0, 0, 0] = (0.0, 0.25)                      # x (and y when aligned) exactly half-way: ties to even
    grid[1, 2, 1] = (0.0, 0.0)
    for align in (0, 1):
        same("GridSample", opset, [x, grid], {"mode": mode, "padding_mode": padding, "align_corners": align},
             rtol=1e-4, atol=1e-5)
    if opset >= 20 and mode != "cubic":
        grid3 = RNG.uniform(-1.2, 1.2, (1, 2, 3, 4, 3)).astype(np.float32)
        same("GridSample", opset, [randn(1, 2, 3, 4, 5), grid3], {"mode": mode, "padding_mode": padding},
             rtol=1e-4, atol=1e-5)


def test_affine_grid_and_refused_grid_sample_types():
    for align in (0, 1):
        same("AffineGrid", 20, [randn(2, 2, 3), np.array([2, 3, 4, 5])], {"align_corners": align}, rtol=1e-5)
        same("AffineGrid", 20, [randn(1, 3, 4), np.array([1, 1, 2, 3, 4])], {"align_corners": align}, rtol=1e-5)
        same("AffineGrid", 20, [randn(1, 2, 3).astype(np.float64), np.array([1, 1, 1, 5])], {"align_corners": align})
    with pytest.raises(OnnxkitError, match="int32"):
        run("gpu", "GridSample", 20, [np.ones((1, 1, 2, 2), np.int32), np.zeros((1, 1, 1, 2), np.float32)])
