"""The portable resize family (Resize, Upsample, GridSample, AffineGrid) on both backends, and
the one output-extent function shape inference and the kernels share.

Each kernel case runs on ``cpu`` (numpy) and ``gpu`` (torch; its CPU device without CUDA), is
checked against onnx's reference implementation, and on gpu must run on torch, not on the cpu
fallback.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("torch")
from one_node import BACKENDS, assert_close, outputs, reference  # noqa: E402

from onnxkit import ir  # noqa: E402
from onnxkit.dtypes import DataType  # noqa: E402
from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.inference import infer_model  # noqa: E402
from onnxkit_default_domain.inference.resize import resize_extents  # noqa: E402

RNG = np.random.default_rng(1818)


def run(backend, op, opset, inputs, attrs=None):
    """The one output on ``backend`` (on gpu, not a fallback)."""
    return outputs(backend, op, opset, inputs, attrs)[0]


def check(backend, op, opset, inputs, attrs=None, rtol=1e-5, atol=1e-6):
    """The one output, compared with onnx.reference."""
    got = run(backend, op, opset, inputs, attrs)
    assert_close([got], reference(op, opset, inputs, attrs), rtol, atol)
    return got


def scales(*v):
    return np.array(v, np.float32)


# -- the shared extent function ------------------------------------------------------------------
def test_resize_extents_from_scales_floor_and_keep_unknown_extents_under_scale_one():
    assert resize_extents([1, 3, 5, 7], range(4), scales=[1, 1, 1.5, 0.4]) == ([1.0, 1.0, 1.5, 0.4], [1, 3, 7, 2])
    sc, ext = resize_extents(["N", None, 5, "W"], [0, 1, 2, 3], scales=[1, 2, 2, 2])
    assert ext == ["N", None, 10, None] and sc == [1.0, 2.0, 2.0, 2.0]
    assert resize_extents([4, 4], [1], scales=[0.0])[1] == [4, None]          # refused by the kernel


def test_resize_extents_from_sizes_with_every_policy():
    assert resize_extents([1, 3, 4, 8], [2, 3], sizes=[2, 2]) == ([1.0, 1.0, 0.5, 0.25], [1, 3, 2, 2])
    assert resize_extents([1, 3, 4, 8], [2, 3], sizes=[2, 2], policy="not_larger")[1] == [1, 3, 1, 2]
    assert resize_extents([1, 3, 4, 8], [2, 3], sizes=[2, 2], policy="not_smaller") == \
        ([1.0, 1.0, 0.5, 0.5], [1, 3, 2, 4])
    assert resize_extents([1, 3, "H", 8], [2, 3], sizes=[2, 2], policy="not_larger")[1] == [1, 3, None, None]
    assert resize_extents([1, 3, "H", 8], [2, 3], sizes=[2, 2])[1] == [1, 3, 2, 2]
    assert resize_extents([0, 3], [0], sizes=[0]) == ([1.0, 1.0], [0, 3])


def _inferred(op, opset, x_shape, inputs: dict, attrs: dict):
    """The output shape inference gives for a one-node model whose inputs after X are constants."""
    names = ["x"] + [n if n in inputs else "" for n in ("roi", "scales", "sizes")]
    while not names[-1]:
        names.pop()
    node = ir.Node(input=names, output=["y"], op_type=op, attribute=[ir.Attribute.make(k, v) for k, v in attrs.items()])
    inits = [ir.Tensor.from_numpy(np.asarray(v), name=n) for n, v in inputs.items()]
    g = ir.Graph(node=[node], name="g", input=[ir.ValueInfo(name="x", type=ir.TensorType(int(DataType.FLOAT), x_shape))],
                 output=[ir.ValueInfo(name="y", type=None)], initializer=inits)
    t = infer_model(ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", opset)], graph=g)).type_of("y")
    return list(t.shape.values)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("given", [
    {"scales": scales(1, 1, 1.7, 0.45)},
    {"sizes": np.array([1, 2, 5, 3], np.int64)},
    {"sizes": np.array([5, 3], np.int64), "axes": [2, 3], "policy": "not_larger"},
    {"sizes": np.array([5, 3], np.int64), "axes": [3, 2], "policy": "not_smaller"},
])
def test_inference_and_kernel_give_the_same_extents(backend, given):
    given = dict(given)
    attrs = {"mode": "linear"}
    if "axes" in given:
        attrs["axes"] = given.pop("axes")
    if "policy" in given:
        attrs["keep_aspect_ratio_policy"] = given.pop("policy")
    x = RNG.standard_normal((1, 2, 7, 9)).astype(np.float32)
    inferred = _inferred("Resize", 19, [1, 2, 7, 9], given, attrs)
    inputs = [x, None, given.get("scales"), given.get("sizes")]
    while inputs[-1] is None:
        inputs.pop()
    got = check(backend, "Resize", 19, inputs, attrs, rtol=1e-4, atol=1e-5)
    assert list(got.shape) == inferred


# -- Resize / Upsample ---------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("coord", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                   "half_pixel_symmetric"])
def test_resize_modes_and_coordinates(backend, mode, coord):
    x = RNG.standard_normal((1, 2, 5, 6)).astype(np.float32)
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    for sc in (scales(1, 1, 1.6, 2.5), scales(1, 1, 0.5, 0.7)):
        check(backend, "Resize", 19, [x, None, sc], attrs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_resize_crop_antialias_axes_and_cubic_options(backend):
    x = RNG.standard_normal((1, 2, 6, 7)).astype(np.float32)
    roi = np.array([0, 0, 0.2, -0.1, 1, 1, 0.9, 1.3], np.float32)
    check(backend, "Resize", 13, [x, roi, scales(1, 1, 1.5, 0.8)],
          {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -3.0},
          rtol=1e-4, atol=1e-5)
    for mode in ("linear", "cubic"):
        check(backend, "Resize", 18, [x, None, scales(0.4, 0.6)], {"mode": mode, "antialias": 1, "axes": [3, 2]},
              rtol=1e-4, atol=1e-5)
    check(backend, "Resize", 13, [x, None, scales(1, 1, 0.8, 1.9)],
          {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}, rtol=1e-4, atol=1e-5)
    for nm in ("round_prefer_ceil", "floor", "ceil"):
        check(backend, "Resize", 13, [x, None, scales(1, 1, 1.7, 0.6)], {"mode": "nearest", "nearest_mode": nm})


@pytest.mark.parametrize("backend", BACKENDS)
def test_resize_integers_round_half_even_and_saturate_and_narrow_floats_keep_their_type(backend):
    x = np.array([[[[0, 255, 0, 255], [255, 0, 255, 0]]]], np.uint8)
    y = run(backend, "Resize", 13, [x, None, scales(1, 1, 2, 2)], {"mode": "cubic"})
    assert y.dtype == np.uint8 and y.min() == 0 and y.max() == 255        # cubic overshoot saturates
    ref = run("cpu", "Resize", 13, [x.astype(np.float64), None, scales(1, 1, 2, 2)], {"mode": "cubic"})
    np.testing.assert_array_equal(y, np.clip(np.round(ref), 0, 255).astype(np.uint8))
    h = RNG.standard_normal((1, 1, 3, 4)).astype(np.float16)
    y16 = run(backend, "Resize", 13, [h, None, scales(1, 1, 2, 1.5)], {"mode": "linear"})
    ref = run("cpu", "Resize", 13, [h.astype(np.float32), None, scales(1, 1, 2, 1.5)], {"mode": "linear"})
    assert y16.dtype == np.float16
    np.testing.assert_array_equal(y16, ref.astype(np.float16))
    b = run(backend, "Resize", 13, [x > 100, None, scales(1, 1, 1.5, 0.5)], {"mode": "nearest"})
    assert b.dtype == np.bool_ and b.shape == (1, 1, 3, 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_resize_10_and_every_upsample_form(backend):
    x = RNG.standard_normal((1, 2, 4, 5)).astype(np.float32)
    for mode in ("nearest", "linear"):
        for sc in (scales(1, 1, 2, 3), scales(1, 1, 1.7, 0.8)):
            want = run(backend, "Resize", 10, [x, sc], {"mode": mode})
            if mode == "linear" or sc.min() >= 1:   # the Upsample rule as Resize-13 spells it
                same = check(backend, "Resize", 13, [x, None, sc], {"mode": mode, "nearest_mode": "floor",
                                                                   "coordinate_transformation_mode": "asymmetric"})
                np.testing.assert_array_equal(want, same)
            np.testing.assert_array_equal(run(backend, "Upsample", 9, [x, sc], {"mode": mode}), want)
            np.testing.assert_array_equal(
                run(backend, "Upsample", 7, [x], {"mode": mode, "scales": [float(s) for s in sc]}), want)
    up1 = run(backend, "Upsample", 1, [x], {"mode": "bilinear", "height_scale": 2.0, "width_scale": 3.0})
    np.testing.assert_array_equal(up1, run("cpu", "Resize", 10, [x, scales(1, 1, 2, 3)], {"mode": "linear"}))


@pytest.mark.parametrize("backend", BACKENDS)
def test_resize_refusals_name_the_node(backend):
    x = RNG.standard_normal((1, 1, 2, 2)).astype(np.float32)
    with pytest.raises(OnnxkitError, match="'n0'.*complex64"):
        run(backend, "Resize", 13, [x.astype(np.complex64), None, scales(1, 1, 2, 2)])
    with pytest.raises(OnnxkitError, match="'n0'.*half_pixel_symmetric"):
        run(backend, "Resize", 18, [x, None, scales(1, 1, 2, 2)], {"coordinate_transformation_mode": "half_pixel_symmetric"})
    with pytest.raises(OnnxkitError, match="'n0'.*one of scales and sizes"):
        run(backend, "Resize", 13, [x, None, scales(1, 1, 2, 2), np.array([1, 1, 4, 4], np.int64)])
    with pytest.raises(OnnxkitError, match="'n0'.*scales must be positive"):
        run(backend, "Resize", 13, [x, None, scales(1, 1, -2, 2)])
    with pytest.raises(OnnxkitError, match="'n0'.*nearest_mode"):
        run(backend, "Resize", 13, [x, None, scales(1, 1, 2, 2)], {"mode": "linear", "nearest_mode": "nope"})
    with pytest.raises(OnnxkitError, match="'n0'.*scales has 3 values"):
        run(backend, "Resize", 13, [x, None, scales(1, 2, 2)])


# -- GridSample / AffineGrid -----------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample(backend, mode, padding):
    x = RNG.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = RNG.uniform(-1.4, 1.4, (2, 4, 3, 2)).astype(np.float32)
    grid[0, 0, 0] = (0.0, 0.25)
    for align in (0, 1):
        check(backend, "GridSample", 20, [x, grid], {"mode": mode, "padding_mode": padding, "align_corners": align},
              rtol=1e-4, atol=1e-5)
    if mode != "cubic":
        grid3 = RNG.uniform(-1.2, 1.2, (1, 2, 3, 4, 3)).astype(np.float32)
        check(backend, "GridSample", 22, [RNG.standard_normal((1, 2, 3, 4, 5)).astype(np.float32), grid3],
              {"mode": mode, "padding_mode": padding}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_affine_grid_and_grid_sample_refusals(backend):
    for align in (0, 1):
        check(backend, "AffineGrid", 20, [RNG.standard_normal((2, 2, 3)).astype(np.float32), np.array([2, 3, 4, 5])],
              {"align_corners": align}, rtol=1e-5)
        check(backend, "AffineGrid", 20, [RNG.standard_normal((1, 3, 4)).astype(np.float32), np.array([1, 1, 2, 3, 4])],
              {"align_corners": align}, rtol=1e-5)
    with pytest.raises(OnnxkitError, match="'n0'.*int32"):
        run(backend, "GridSample", 20, [np.ones((1, 1, 2, 2), np.int32), np.zeros((1, 1, 1, 2), np.float32)])
    with pytest.raises(OnnxkitError, match="'n0'.*affine grid"):
        run(backend, "AffineGrid", 20, [np.zeros((1, 2, 3), np.float32), np.array([1, 1, 2, 3, 4])])
