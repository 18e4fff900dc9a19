"""The portable elementwise and cast kernels (kernels/elementwise.py, elementwise_math.py,
cast.py) on both backends: the rules their docstrings state, the legacy broadcast rule shared
with inference, refusals naming the node, and that the gpu backend runs them on torch (no
per-node fallback) for the element types torch has.  The gpu backend runs on torch's CPU
device here; onnx builds the models (tests only)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("torch")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.dtypes import from_numpy_dtype  # noqa: E402
from onnxkit.errors import EvaluationError, OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_default_domain.inference.elementwise import legacy_b_shape  # noqa: E402

BACKENDS = ["cpu", "gpu"]
BF16 = np.dtype(ml_dtypes.bfloat16)


def _model(op, inputs, attrs=None, opset=17, name="the_node", n_in=None):
    names = [f"x{i}" for i in range(len(inputs))]
    vis = [helper.make_tensor_value_info(n, int(from_numpy_dtype(np.asarray(v).dtype).tag), list(np.shape(v)))
           for n, v in zip(names, inputs)]
    node = helper.make_node(op, names, ["y"], name=name, **(attrs or {}))
    g = helper.make_graph([node], "g", vis, [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 3 if opset < 7 else 8
    return m.SerializeToString(), {n: np.asarray(v) for n, v in zip(names, inputs)}


def run(backend, op, inputs, attrs=None, opset=17, session=False):
    data, feed = _model(op, inputs, attrs, opset)
    sess = InferenceSession(data, backend, validate=False)
    out = sess.run(None, feed)[0]
    return (out, sess) if session else out


# -- the legacy broadcast rule: one function for inference and kernels ---------------------------
def test_legacy_b_shape_over_extents():
    assert legacy_b_shape([2, 3, 4], [3], 1) == ((3, 1), 1)
    assert legacy_b_shape([2, 3, 4], [3, 4], None) == ((3, 4), 1)
    assert legacy_b_shape([2, 3, 4], [1, 1], None) == ((), None)              # one element: a scalar
    assert legacy_b_shape([2, 3, 4], [3], None) == (None, 2)                  # suffix 4 != 3
    assert legacy_b_shape([2, 3, 4], [3, 4], 2) == (None, 2)                  # runs past A's rank
    assert legacy_b_shape(["N", 3, None], ["M", 3], 0) == (("M", 3, 1), 0)    # symbolic: taken to fit
    assert legacy_b_shape([2, 3, 4], [3], -2) == ((3, 1), 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_legacy_broadcasting_in_the_kernel(backend):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.array([10, 20, 30], np.float32)
    got = run(backend, "Add", [a, b], {"broadcast": 1, "axis": 1}, opset=6)
    np.testing.assert_array_equal(got, a + b.reshape(3, 1))
    with pytest.raises(OnnxkitError, match="broadcast=0"):
        run(backend, "Mul", [a, b], opset=6)


def test_legacy_broadcasting_misfit_is_refused_by_inference():
    from onnxkit.runtime import InferenceSession as S

    data, feed = _model("Add", [np.zeros((2, 3, 4), np.float32), np.zeros((3,), np.float32)], {"broadcast": 1},
                        opset=6)
    with pytest.raises(OnnxkitError, match="legacy broadcasting"):
        S(data, "cpu").run(None, feed)


# -- arithmetic rules --------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["Div", "Mod"])
def test_integer_division_by_zero_names_the_node(backend, op):
    a, b = np.array([4, 5], np.int32), np.array([2, 0], np.int32)
    with pytest.raises(EvaluationError, match="the_node.*integer division by zero"):
        run(backend, op, [a, b])


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_div_and_mod_signs(backend):
    a = np.array([7, -7, 7, -7, -128], np.int8)
    b = np.array([2, 2, -2, -2, -1], np.int8)
    assert run(backend, "Div", [a, b]).tolist() == [3, -3, -3, 3, -128]
    assert run(backend, "Mod", [a[:4], b[:4]]).tolist() == [1, 1, -1, -1]
    assert run(backend, "Mod", [a[:4], b[:4]], {"fmod": 1}).tolist() == [1, -1, 1, -1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_float_mod_zero_takes_the_divisor_sign(backend):
    a = np.array([4.0, -4.0, 5.5, -5.5], np.float32)
    b = np.array([2.0, -2.0, -2.0, 2.0], np.float32)
    got = run(backend, "Mod", [a, b])
    assert got.tolist() == [0.0, 0.0, -0.5, 0.5] and np.signbit(got[:2]).tolist() == [False, True]


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_pow_wraps_and_negative_exponents_truncate(backend):
    x = np.array([2, 3, -2, 2, 0], np.int32)
    y = np.array([31, 2, 3, -1, -1], np.int32)
    assert run(backend, "Pow", [x, y]).tolist() == [-2 ** 31, 9, -8, 0, 0]   # 2**-1 -> 0; 0**-1 = inf -> 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_bitshift_out_of_width_gives_the_sign_fill(backend):
    x = np.array([-8, 8, -8, 1], np.int8)
    y = np.array([1, 8, 9, 7], np.int8)
    assert run(backend, "BitShift", [x, y], {"direction": "RIGHT"}, opset=28).tolist() == [-4, 0, -1, 0]
    assert run(backend, "BitShift", [x, y], {"direction": "LEFT"}, opset=28).tolist() == [-16, 0, 0, -128]


@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_min_above_max_gives_max_and_keeps_nan(backend):
    x = np.array([-5.0, 0.5, 5.0, np.nan], np.float32)
    got = run(backend, "Clip", [x, np.float32(2.0), np.float32(1.0)], opset=13)
    assert got[:3].tolist() == [1.0, 1.0, 1.0] and np.isnan(got[3])
    got = run(backend, "Clip", [x], {"max": 0.0}, opset=6)
    assert got[:3].tolist() == [-5.0, 0.0, 0.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_without_a_bound_clips_infinities_to_the_types_limits(backend):
    """Part 2: an absent min / max is numeric_limits::lowest() / max() (Clip-11 on), and Clip-6's
    attributes default to -3.402823e+38 / 3.402823e+38: an infinity becomes that limit, as
    onnxruntime gives; NaN stays NaN, integers are unchanged."""
    big = np.finfo(np.float32).max
    x = np.array([-np.inf, 1.5, np.nan, np.inf], np.float32)
    got = run(backend, "Clip", [x], opset=13)
    assert got[[0, 1, 3]].tolist() == [-big, 1.5, big] and np.isnan(got[2])
    got = run(backend, "Clip", [x, np.float32(0.0)], opset=13)          # max absent
    assert got[[0, 1, 3]].tolist() == [0.0, 1.5, big]
    assert run(backend, "Clip", [x], opset=6)[[0, 3]].tolist() == [-big, big]
    h = run(backend, "Clip", [x.astype(np.float16)], opset=13)
    assert h[[0, 3]].tolist() == [-65504.0, 65504.0]
    i = np.array([-(2 ** 31), 7, 2 ** 31 - 1], np.int32)
    np.testing.assert_array_equal(run(backend, "Clip", [i], opset=13), i)


@pytest.mark.parametrize("backend", BACKENDS)
def test_variadic_in_narrow_floats_rounds_once(backend):
    xs = [np.array([1.0, 2.0], BF16), np.array([2 ** -8, 1.0], BF16), np.array([2 ** -8, 1.0], BF16)]
    got = run(backend, "Sum", xs, opset=13)
    assert got.dtype == BF16 and got.astype(np.float32).tolist() == [1.0078125, 4.0]   # float32 sum, rounded once
    assert run(backend, "Mean", xs, opset=13).astype(np.float32).tolist() == [0.3359375, 1.3359375]


@pytest.mark.parametrize("backend", BACKENDS)
def test_unary_rules(backend):
    x = np.array([0.5, 1.5, 2.5, -0.5, np.nan], np.float32)
    assert run(backend, "Round", [x])[:4].tolist() == [0.0, 2.0, 2.0, -0.0]
    s = run(backend, "Sign", [x])
    assert s[:4].tolist() == [1.0, 1.0, 1.0, -1.0] and np.isnan(s[4])
    inf = np.array([np.inf, -np.inf, 1.0, np.nan], np.float32)
    assert run(backend, "IsInf", [inf], {"detect_positive": 0}).tolist() == [False, True, False, False]
    assert run(backend, "IsInf", [inf], {"detect_negative": 0, "detect_positive": 0}).tolist() == [False] * 4
    h = np.array([4.0, 2.0], np.float16)
    assert run(backend, "Sqrt", [h]).dtype == np.float16


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_rank_inputs_give_arrays(backend):
    got = run(backend, "Add", [np.float32(1.0), np.float32(2.0)])
    assert isinstance(got, np.ndarray) and got.shape == () and got == 3.0
    assert run(backend, "Sqrt", [np.float32(4.0)]).shape == ()


def test_erf_body_on_both_namespaces():
    """The portable erf (both shipped backends override Erf): float32 to ~5e-7, float64 to 1e-15."""
    import array_api_compat.numpy as xn
    import array_api_compat.torch as xt
    import torch

    from onnxkit_default_domain.kernels.elementwise_math import erf

    grid = np.concatenate([np.linspace(-7, 7, 2001), [0.0, 1e-300, -1e-30, np.inf, -np.inf]])
    want = np.array([math.erf(v) for v in grid])
    for xp, conv in ((xn, np.asarray), (xt, lambda a: torch.from_numpy(np.array(a)))):
        got64 = np.asarray(erf(xp, conv(grid)))
        np.testing.assert_allclose(got64, want, rtol=1e-15, atol=0)
        got32 = np.asarray(erf(xp, conv(grid.astype(np.float32))))
        np.testing.assert_allclose(got32, want, rtol=6e-7, atol=1e-37)
        assert np.isnan(np.asarray(erf(xp, conv(np.array([np.nan]))))).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_erf_on_integers_truncates(backend):
    assert run(backend, "Erf", [np.array([-9, 0, 9], np.int32)], opset=9).tolist() == [-1, 0, 1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_string_equal_compares_text(backend):
    a = np.array(["a", "b"], dtype=object)
    b = np.array(["a", "c"], dtype=object)
    assert run(backend, "Equal", [a, b], opset=19).tolist() == [True, False]


# -- Cast --------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_cast_float_to_int_wraps_and_nan_gives_zero(backend):
    x = np.array([2.9, -2.9, np.nan, np.inf, 300.0, -129.0], np.float32)
    assert run(backend, "Cast", [x], {"to": TP.INT8}).tolist() == [2, -2, 0, 0, 44, 127]
    big = np.array([1e19, -1e19, 2.0 ** 70 + 2.0 ** 20], np.float64)
    assert run(backend, "Cast", [big], {"to": TP.INT64}).tolist() == [10 ** 19 - 2 ** 64, 2 ** 64 - 10 ** 19, 2 ** 20]


@pytest.mark.parametrize("backend", BACKENDS)
def test_cast_to_half_types_rounds_once(backend):
    x = np.array([1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -8 + 2.0 ** -40, 65519.99, 65520.0, -1e-8, 2.0 ** -25],
                 np.float64)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)            # numpy rounds float64 -> float16 once
    assert run(backend, "Cast", [x], {"to": TP.FLOAT16}).view(np.uint16).tolist() == want.view(np.uint16).tolist()
    got = run(backend, "Cast", [x[:2]], {"to": TP.BFLOAT16}, opset=13)
    assert got.astype(np.float64).tolist() == [1.0, 1 + 2.0 ** -7]
    big = np.array([2 ** 31 - 1, -(2 ** 24) - 3], np.int32)
    assert run(backend, "Cast", [big], {"to": TP.BFLOAT16}, opset=13).astype(np.float64).tolist() == \
        [2.0 ** 31, -(2.0 ** 24)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_cast_narrow_and_string_targets(backend):
    x = np.array([2.5, 2.7, -2.7, 9.0], np.float32)
    got = run(backend, "Cast", [x], {"to": TP.INT4}, opset=21)
    assert got.astype(np.int64).tolist() == [2, 3, -3, -7]
    s = run(backend, "Cast", [np.array([1.5, 0.1, np.inf], np.float32)], {"to": TP.STRING}, opset=21)
    assert [v.decode() if isinstance(v, bytes) else v for v in s.tolist()] == ["1.5", "0.1", "INF"]
    f8 = run(backend, "Cast", [np.array([1000.0], np.float32)], {"to": TP.FLOAT8E4M3FN, "saturate": 0}, opset=21)
    assert np.isnan(f8.astype(np.float32)).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_cast1_names_the_type_and_bad_names_are_refused(backend):
    assert run(backend, "Cast", [np.array([1.7], np.float32)], {"to": "INT32"}, opset=1).tolist() == [1]
    with pytest.raises(OnnxkitError, match="the_node.*'to'"):
        run(backend, "Cast", [np.array([1.7], np.float32)], {"to": "NOPE"}, opset=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cast_like_takes_the_second_input_type(backend):
    got = run(backend, "CastLike", [np.array([1.5, -1.5], np.float32), np.zeros((1,), np.int16)], opset=21)
    assert got.dtype == np.int16 and got.tolist() == [1, -1]


# -- the gpu backend runs these on torch --------------------------------------------------------
def test_gpu_runs_the_family_on_torch_not_on_the_fallback():
    f = TP.FLOAT
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"),
             helper.make_node("Div", ["s", "b"], ["q"], name="div"),
             helper.make_node("Sqrt", ["q"], ["r"], name="sqrt"),
             helper.make_node("Erf", ["r"], ["e"], name="erf"),
             helper.make_node("Equal", ["a", "b"], ["eq"], name="equal"),
             helper.make_node("Where", ["eq", "a", "e"], ["w"], name="where"),
             helper.make_node("Cast", ["w"], ["h"], to=TP.FLOAT16, name="cast"),
             helper.make_node("Cast", ["w"], ["u"], to=TP.UINT32, name="cast_u32")]
    g = helper.make_graph(nodes, "g", [vi("a", f, [2, 3]), vi("b", f, [3])],
                          [vi("h", TP.FLOAT16, [2, 3]), vi("u", TP.UINT32, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    sess = InferenceSession(m.SerializeToString(), providers=["gpu"])
    away = {fb.node for fb in sess.fallbacks}
    assert away == {"cast_u32"}                                     # uint32: torch does not compute it
    a = np.abs(np.arange(6, dtype=np.float32).reshape(2, 3)) + 1
    b = np.array([1.0, 2.0, 4.0], np.float32)
    h, u = sess.run(None, {"a": a, "b": b})
    cpu_h, cpu_u = InferenceSession(m.SerializeToString(), "cpu").run(None, {"a": a, "b": b})
    np.testing.assert_allclose(h.astype(np.float32), cpu_h.astype(np.float32), rtol=1e-3)
    assert u.tolist() == cpu_u.tolist()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("exponent,shape", [(2.0, ()), (3.0, ()), (3.0, (1, 1)), (0.5, (1,)), (2.5, ()), (3.0, (4,))])
def test_pow_by_a_small_constant_exponent_matches_pow(backend, exponent, shape):
    """Exponents 2, 3 and 0.5 of one element are products / a square root: within the float32
    guarantee of pow, negatives and NaN included (0.5 of a negative is NaN either way)."""
    from one_node import run

    x = np.array([[-2.5, -1.0, 0.0, 1e-3], [0.5, 3.0, np.nan, 7.25]], np.float32)
    y = np.full(shape, exponent, np.float32)
    got, sess = run(backend, "Pow", 15, [x, y])
    with np.errstate(invalid="ignore"):
        want = np.power(x.astype(np.float64), np.float64(exponent))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-6, equal_nan=True)
    assert got.dtype == np.float32 and got.shape == np.broadcast_shapes(x.shape, shape)
    assert not sess.fallbacks
