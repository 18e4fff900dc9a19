"""The cpu Resize override (overrides/resize.py, compiled/resize.py) against the portable kernel
(the same node planned under ``compiled.disabled()``: kernels/resize.py) — bit for bit, as the
loop module's docstring promises — and against onnxruntime within Clause 11's tolerance (float32:
its cpu Resize has no float64), over
every mode, coordinate transformation, nearest rounding, antialias, exclude_outside, cubic
coefficient, scales or sizes, the ``axes`` attribute and the aspect policies, up- and
downsampling, odd extents and NaN/inf data.  Tests that expect the fast path count its runs (a
spy around the compiled loops and the plan), so they fail if it silently stops being taken.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit.tolerances import tolerance_for  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.overrides import resize as override  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.available(), reason="numba is not installed"),
              pytest.mark.usefixtures("warm_bodies")]  # the compiled loops, from the first run

RNG = np.random.default_rng(1618)
COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@pytest.fixture
def spy(monkeypatch):
    """``spy["fast"]``: runs of the fast path (its compiled loops and its ``take``)."""
    count = {"fast": 0}
    real = override.resize_loops

    def counted_loops():
        loops = real()
        if loops is None:
            return None
        def counted(loop):
            def run(*a):
                count["fast"] += 1
                return loop(*a)
            return run
        return tuple(counted(loop) for loop in loops)

    take = np.take

    def counted_take(*a, **k):
        if k.get("mode") == "clip":
            count["fast"] += 1
        return take(*a, **k)

    monkeypatch.setattr(override, "resize_loops", counted_loops)
    monkeypatch.setattr(override.np, "take", counted_take)
    return count


def model(x, opset=19, scales=None, sizes=None, roi=None, **attrs) -> bytes:
    t = helper.np_dtype_to_tensor_dtype(x.dtype)
    inits, names = [], ["x"]
    for name, value, dt in (("roi", roi, TP.FLOAT), ("scales", scales, TP.FLOAT), ("sizes", sizes, TP.INT64)):
        if opset == 10 and name != "scales":
            continue
        if value is None:
            names.append("")
            continue
        inits.append(helper.make_tensor(name, dt, [len(value)], list(value)))
        names.append(name)
    while names[-1] == "":
        names.pop()
    node = helper.make_node("Resize", names, ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", t, list(x.shape))],
                          [helper.make_tensor_value_info("y", t, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()


def kit(data, x, portable=False):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # the output's unstated shape
        if portable:
            with compiled.disabled():
                s = InferenceSession(data)
        else:
            s = InferenceSession(data)
    return s.run(None, {"x": x})[0]


def onnxruntime(data, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def identical(a, b) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True) and \
        np.array_equal(np.signbit(a), np.signbit(b))


def close(a, b) -> bool:
    tol = tolerance_for(b.dtype)
    return a.shape == b.shape and bool(np.all(np.abs(a.astype(np.float64) - b) <= tol.atol + tol.rtol * np.abs(b)))


def image(shape, t=np.float32):
    return RNG.standard_normal(shape).astype(t)


CASES = [  # (mode, coordinate mode, extra attributes)
    *[("linear", c, {}) for c in COORDS],
    *[("cubic", c, {}) for c in COORDS],
    *[("nearest", c, {"nearest_mode": n}) for c, n in itertools.product(COORDS, NEAREST)],
    ("cubic", "half_pixel", {"cubic_coeff_a": -0.5}),
    ("cubic", "half_pixel", {"exclude_outside": 1}),
    ("linear", "align_corners", {"exclude_outside": 1}),
]
GEOMETRIES = [  # (input shape, scales or None, sizes or None)
    ((2, 3, 7, 9), [1, 1, 2, 2], None),
    ((1, 2, 8, 6), [1, 1, 0.5, 0.75], None),          # downsampling
    ((2, 1, 5, 5), None, [2, 1, 13, 3]),               # odd sizes, one axis down, one up
    ((3, 4, 11), [1, 1, 1.7], None),                   # a signal (N, C, L)
]
#: geometries whose scale times extent is an integer on every axis: onnxruntime computes the
#: coordinates from the integer output extent, the ONNX reference and onnxkit from scale x
#: extent (18.7 for 11 x 1.7), so they differ where the two differ, and are compared only here
INTEGRAL = (0, 2)
#: (case, geometry) where onnxruntime differs from the portable kernel (and so the fast path)
#: on an integral geometry: cubic align_corners upsampling, half_pixel_symmetric nearest 'floor'
#: at sizes [13, 3]
ORT_DIFFERS = {(7, 0), (28, 2)}
#: the case onnxruntime refuses at session creation (exclude_outside on a linear Resize)
ORT_REFUSES = len(CASES) - 1


@pytest.mark.parametrize("t", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", range(len(GEOMETRIES)))
@pytest.mark.parametrize("case", range(len(CASES)))
def test_fast_path_is_bit_identical_to_portable_and_close_to_onnxruntime(spy, case, geometry, t):
    mode, coord, extra = CASES[case]
    shape, scales, sizes = GEOMETRIES[geometry]
    x = image(shape, t)
    data = model(x, scales=scales, sizes=sizes, mode=mode, coordinate_transformation_mode=coord, **extra)
    got = kit(data, x)
    assert spy["fast"] >= 1
    assert identical(got, kit(data, x, portable=True))
    if case == ORT_REFUSES and t == np.float32:
        with pytest.raises(Exception, match="UpsampleBase"):
            onnxruntime(data, x)
    elif case != ORT_REFUSES and t == np.float32 and geometry in INTEGRAL:      # onnxruntime's cpu Resize has no float64
        assert close(got, onnxruntime(data, x)) != ((case, geometry) in ORT_DIFFERS)


def test_the_differences_from_onnxruntime_are_the_listed_ones():
    assert len(ORT_DIFFERS) == 2 and all(g in INTEGRAL for _, g in ORT_DIFFERS)
    assert [CASES[c][:2] for c, _ in sorted(ORT_DIFFERS)] == [("cubic", "align_corners"), ("nearest", "half_pixel_symmetric")]
    assert CASES[ORT_REFUSES] == ("linear", "align_corners", {"exclude_outside": 1})


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 0.5, 0.3], [1, 1, 0.8, 1.5]])
def test_antialias(spy, mode, scales):
    x = image((2, 2, 12, 10))
    data = model(x, opset=18, scales=scales, mode=mode, antialias=1)
    got = kit(data, x)
    assert spy["fast"] >= 1 and identical(got, kit(data, x, portable=True))
    assert close(got, onnxruntime(data, x))


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
def test_axes_and_aspect_policy(spy, policy):
    x = image((2, 3, 9, 7))
    data = model(x, opset=18, sizes=[20, 12], mode="linear", axes=[2, 3], keep_aspect_ratio_policy=policy)
    got = kit(data, x)
    assert spy["fast"] >= 1 and identical(got, kit(data, x, portable=True))
    assert close(got, onnxruntime(data, x))


def test_tf_crop_and_resize_inside_the_image_is_fast_outside_portable(spy):
    x = image((1, 2, 10, 10))
    inside = model(x, opset=13, roi=[0, 0, 0.1, 0.2, 1, 1, 0.9, 0.7], sizes=[1, 2, 7, 5], mode="linear",
                   coordinate_transformation_mode="tf_crop_and_resize")
    got = kit(inside, x)
    assert spy["fast"] >= 1 and identical(got, kit(inside, x, portable=True))
    assert close(got, onnxruntime(inside, x))
    spy["fast"] = 0
    outside = model(x, opset=13, roi=[0, 0, -0.2, 0.0, 1, 1, 1.3, 1.0], sizes=[1, 2, 7, 5], mode="linear",
                    coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0)
    got = kit(outside, x)
    assert spy["fast"] == 0 and identical(got, kit(outside, x, portable=True))
    assert close(got, onnxruntime(outside, x)) and (got == -3.0).any()


def test_resize_10_and_11(spy):
    x = image((1, 2, 4, 5))
    for data in (model(x, opset=10, scales=[1, 1, 2, 3], mode="linear"),
                 model(x, opset=11, roi=[], scales=[1, 1, 2, 3], mode="nearest",
                       coordinate_transformation_mode="tf_half_pixel_for_nn")):
        got = kit(data, x)
        assert identical(got, kit(data, x, portable=True)) and close(got, onnxruntime(data, x))
    assert spy["fast"] >= 2


def test_nan_inf_and_negative_zero_pass_as_the_portable_kernel(spy):
    x = image((1, 1, 6, 6))
    x[0, 0, 2, 3], x[0, 0, 4, 1], x[0, 0, 0, 0], x[0, 0, 5, 5] = np.nan, np.inf, -0.0, -np.inf
    for mode in ("nearest", "linear", "cubic"):
        data = model(x, scales=[1, 1, 2, 1.5], mode=mode)
        got = kit(data, x)
        assert identical(got, kit(data, x, portable=True)), mode
        assert np.isnan(got).any() and np.isinf(got).any()
    assert spy["fast"] >= 3


def test_what_the_fast_path_does_not_take_is_the_portable_kernel(spy):
    cases = [(np.arange(24, dtype=np.int32).reshape(1, 2, 3, 4), [1, 1, 2, 2]),    # integers
             (image((2, 3, 4, 4)), [1, 2, 1, 1]),                                   # a channel axis resized
             (image((2, 3, 4, 4)).astype(np.float16), [1, 1, 2, 2]),                # narrow float
             (image((0, 3, 4, 4)), [1, 1, 2, 2])]                                   # empty
    for x, scales in cases:
        data = model(x, scales=scales, mode="linear")
        got = kit(data, x)
        assert identical(got, kit(data, x, portable=True))
        if x.dtype == np.float32:
            assert close(got, onnxruntime(data, x))
    assert spy["fast"] == 0


def test_errors_are_the_portable_kernels():
    x = image((1, 1, 4, 4))
    data = model(x, scales=[1, 1, 2], mode="linear")
    with pytest.raises(Exception, match="scales has 3 values, expected 4"):
        kit(data, x)


def test_non_contiguous_input_and_a_second_shape(spy):
    x = image((2, 3, 8, 6))
    data = model(x, scales=[1, 1, 1.5, 2], mode="linear")
    got = kit(data, x)
    assert identical(got, kit(data, x, portable=True))
    x2 = image((2, 3, 6, 8)).transpose(0, 1, 3, 2)         # same shape, not contiguous
    assert identical(kit(data, x2), kit(data, np.ascontiguousarray(x2), portable=True))
    assert spy["fast"] >= 4
