"""The cpu overrides of com.microsoft QLinearAdd, QLinearMul, QLinearGlobalAveragePool and QGemm
(overrides/quantized_microsoft.py) against the portable kernels of onnxkit-microsoft (bit for
bit), values written out here, and onnxruntime (within one quantization step)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxkit_microsoft")
from onnx import TensorProto as TP  # noqa: E402

from quantized_harness import MS, count_products, identical, three_ways, within_one_step  # noqa: E402

from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import quantized as loops  # noqa: E402
from onnxkit_cpu.overrides import quantized_microsoft as fast_module  # noqa: E402

RNG = np.random.default_rng(3235)
TYPES = {np.uint8: TP.UINT8, np.int8: TP.INT8}
needs_numba = pytest.mark.skipif(not compiled.available(), reason="numba is not installed (the portable kernel runs)")


def ints(dtype, shape, lo=None, hi=None):
    info = np.iinfo(dtype)
    return RNG.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dtype)


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shape", [(3, 16, 8, 8), (7,), (2, 5)])
@pytest.mark.parametrize("with_c_zp", [True, False])
def test_qlinear_binary(op, dtype, shape, with_c_zp, count_calls):
    spy = count_calls(loops, "qlinear_binary")
    a, b = ints(dtype, shape), ints(dtype, shape)
    mid = 0 if dtype == np.int8 else 128
    za, zb, zc = (np.asarray(mid + RNG.integers(-6, 7), dtype) for _ in range(3))
    sc = np.float32(0.03 if op == "QLinearAdd" else 0.4)
    inputs = [a, np.float32(0.02), za, b, np.float32(0.015), zb, sc] + ([zc] if with_c_zp else [])
    fast, ref, theirs = three_ways(op, inputs, domain=MS, out_types=[TYPES[dtype]], constants=(1, 2, 4, 5, 6, 7))
    assert spy.calls == 1
    identical(fast[0], ref[0])
    within_one_step(fast[0], theirs[0])
    # the definition in float64, written out
    u = (a.astype(np.float64) - float(za)) * float(np.float32(0.02))
    v = (b.astype(np.float64) - float(zb)) * float(np.float32(0.015))
    w = u + v if op == "QLinearAdd" else u * v
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    want = np.clip(np.rint(w / float(sc)) + (float(zc) if with_c_zp else 0.0), lo, hi).astype(dtype)
    np.testing.assert_array_equal(fast[0], want)


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
@pytest.mark.parametrize("shapes", [((2, 3, 4), (3, 1)), ((4,), (2, 3, 4)), ((2, 1, 4), (1, 3, 1)),
                                    ((2, 3, 4), (1, 1, 4)), ((1, 3, 4), (2, 3, 4)), ((5, 6), (6,))])
def test_qlinear_binary_broadcast_runs_the_compiled_pass_bit_identically(shapes, count_calls):
    spy = count_calls(loops, "qlinear_binary")
    a, b = ints(np.uint8, shapes[0]), ints(np.uint8, shapes[1])
    inputs = [a, np.float32(0.02), np.uint8(128), b, np.float32(0.03), np.uint8(120), np.float32(0.05), np.uint8(128)]
    fast, ref, theirs = three_ways("QLinearAdd", inputs, domain=MS, out_types=[TP.UINT8], constants=(1, 2, 4, 5, 6, 7))
    identical(fast[0], ref[0])
    within_one_step(fast[0], theirs[0])
    assert spy.calls == 1
    want = np.clip(np.rint(((a.astype(np.float64) - 128) * float(np.float32(0.02)) + (b.astype(np.float64) - 120)
                            * float(np.float32(0.03))) / float(np.float32(0.05))) + 128, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(fast[0], want)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shape,channels_last", [((3, 16, 4, 4), 0), ((2, 5, 7), 0), ((2, 3, 3, 6), 1)])
def test_qlinear_global_average_pool(dtype, shape, channels_last):
    x = ints(dtype, shape)
    mid = 0 if dtype == np.int8 else 128
    inputs = [x, np.float32(0.05), np.asarray(mid + 3, dtype), np.float32(0.02), np.asarray(mid - 2, dtype)]
    fast, ref, theirs = three_ways("QLinearGlobalAveragePool", inputs, {"channels_last": channels_last}, domain=MS,
                                   out_types=[TYPES[dtype]], constants=(1, 2, 3, 4))
    identical(fast[0], ref[0])
    within_one_step(fast[0], theirs[0])
    axes = tuple(range(1, x.ndim - 1)) if channels_last else tuple(range(2, x.ndim))
    m = ((x.astype(np.float64) - (mid + 3)) * float(np.float32(0.05))).mean(axis=axes, keepdims=True)
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    np.testing.assert_array_equal(fast[0], np.clip(np.rint(m / float(np.float32(0.02))) + mid - 2, lo, hi)
                                  .astype(dtype))


@pytest.mark.parametrize("b_type", [np.int8, np.uint8])
@pytest.mark.parametrize("trans", [(0, 0), (0, 1), (1, 0)])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("quantized_out", [False, True])
@pytest.mark.parametrize("with_c", [False, True])
def test_qgemm(b_type, trans, per_column, quantized_out, with_c, monkeypatch):
    made = []

    class Counted(fast_module.CenteredB):
        def __init__(self, *args):
            made.append(1)
            super().__init__(*args)
    monkeypatch.setattr(fast_module, "CenteredB", Counted)
    m, k, n = 3, 16, 10
    ta, tb = trans
    a = ints(np.uint8, (k, m) if ta else (m, k))
    b = ints(b_type, (n, k) if tb else (k, n))
    shape = (n,) if per_column else ()
    b_scale = RNG.uniform(0.005, 0.02, shape).astype(np.float32)
    b_zp = np.zeros(shape, b_type) if b_type == np.int8 else ints(b_type, shape, 120, 136)
    c = RNG.integers(-2000, 2000, (n,)).astype(np.int32) if with_c else None
    inputs = [a, np.float32(0.03), np.uint8(130), b, b_scale, b_zp, c]
    types = [TP.FLOAT]
    if quantized_out:
        inputs += [np.float32(0.05), np.uint8(128)]
        types = [TP.UINT8]
    attrs = {"transA": ta, "transB": tb, "alpha": 0.75}
    use_ort = not ta   # onnxruntime's QGemm does not implement transA
    fast, ref, theirs = three_ways("QGemm", inputs, attrs, domain=MS, out_types=types,
                                   constants=(1, 2, 3, 4, 5, 6, 7, 8), ort=use_ort)
    identical(fast[0], ref[0])
    assert len(made) == 1          # the fast path ran (B centered once)
    at = a.T if ta else a
    bt = b.T if tb else b
    acc = (at.astype(np.int64) - 130) @ (bt.astype(np.int64) - b_zp.astype(np.int64)) + (0 if c is None else c)
    y = acc * 0.75 * float(np.float32(0.03)) * b_scale.astype(np.float64)
    if quantized_out:
        want = np.clip(np.rint(y / float(np.float32(0.05))) + 128, 0, 255).astype(np.uint8)
        np.testing.assert_array_equal(fast[0], want)
        if use_ort:
            within_one_step(fast[0], theirs[0])
    else:
        np.testing.assert_array_equal(fast[0], y.astype(np.float32))
        if use_ort:
            np.testing.assert_allclose(fast[0], theirs[0], rtol=1e-5, atol=1e-5)


def test_qgemm_past_the_bound_is_exact():
    a = ints(np.uint8, (2, 2048), 200, 255)
    b = ints(np.uint8, (2048, 3), 200, 255)
    inputs = [a, np.float32(1.0), np.uint8(0), b, np.float32(1.0), np.uint8(0)]
    fast, ref, _ = three_ways("QGemm", inputs, {}, domain=MS, out_types=[TP.FLOAT], constants=(3,), ort=False)
    identical(fast[0], ref[0])
    np.testing.assert_array_equal(fast[0], (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32))


@pytest.fixture
def paths(monkeypatch):
    """Counts of products taken in float32 (``exact``) and handed to the portable kernel (``wide``)."""
    return count_products(monkeypatch, fast_module)


def _float_reference(acc, a_scale, b_scale, bias):
    y = acc.astype(np.float64) * (float(a_scale) * b_scale.astype(np.float64))
    return (y if bias is None else y + bias.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("a_shape,n", [((3, 9, 64), 32), ((5, 7), 3), ((1, 300), 4)])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matmul_integer_to_float(a_type, b_type, a_shape, n, per_column, with_bias, paths):
    k = a_shape[-1]
    a, b = ints(a_type, a_shape), ints(b_type, (k, n))
    shape = (n,) if per_column else ()
    b_scale = RNG.uniform(0.001, 0.01, shape).astype(np.float32)
    a_zp = ints(a_type, ())
    b_zp = ints(b_type, shape)
    bias = RNG.standard_normal(n).astype(np.float32) if with_bias else None
    inputs = [a, b, np.float32(0.02), b_scale, a_zp, b_zp, bias]
    fast, ref, theirs = three_ways("MatMulIntegerToFloat", inputs, domain=MS, out_types=[TP.FLOAT],
                                   constants=(1, 2, 3, 4, 5, 6), ort=a_type == np.uint8)
    assert paths == {"exact": 1, "wide": 0}
    np.testing.assert_array_equal(fast[0], ref[0])
    acc = (a.astype(np.int64) - int(a_zp)) @ (b.astype(np.int64) - b_zp.astype(np.int64))
    np.testing.assert_array_equal(fast[0], _float_reference(acc, np.float32(0.02), b_scale, bias))
    if theirs is not None:
        np.testing.assert_allclose(fast[0], theirs[0], rtol=1e-5, atol=1e-5 * float(np.abs(fast[0]).max()))


@pytest.mark.usefixtures("warm_bodies")
@pytest.mark.parametrize("b_type", [np.int8, np.uint8])
@pytest.mark.parametrize("kind", ["normal", "positive", "negative", "ties"])
@pytest.mark.parametrize("per_column", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_dynamic_quantize_matmul(b_type, kind, per_column, with_bias, paths):
    k, n = 64, 16
    a = {"normal": lambda: RNG.standard_normal((3, 9, k)),
         "positive": lambda: RNG.uniform(0.5, 2.0, (4, k)),
         "negative": lambda: -RNG.uniform(0.5, 2.0, (4, k)),
         # range [-100.5, 154.5] / 8: scale 1/8, -lo / scale = 100.5 (a tie), and x / scale = j + 0.5 ties
         "ties": lambda: np.concatenate([[-100.5 / 8, 154.5 / 8], (np.arange(-100, 154) + 0.5) / 8]
                                        ).reshape(2, -1)[:, :k]}[kind]().astype(np.float32)
    b = ints(b_type, (k, n))
    shape = (n,) if per_column else ()
    b_scale = RNG.uniform(0.001, 0.01, shape).astype(np.float32)
    b_zp = ints(b_type, shape)
    bias = RNG.standard_normal(n).astype(np.float32) if with_bias else None
    inputs = [a, b, b_scale, b_zp, bias]
    fast, ref, theirs = three_ways("DynamicQuantizeMatMul", inputs, domain=MS, out_types=[TP.FLOAT],
                                   constants=(1, 2, 3, 4))
    assert paths == {"exact": 1, "wide": 0}
    np.testing.assert_array_equal(fast[0], ref[0])
    np.testing.assert_allclose(fast[0], theirs[0], rtol=1e-4, atol=2e-3 * float(np.abs(fast[0]).max()))


def test_dynamic_quantize_matmul_special_inputs_take_the_portable_kernel(paths):
    b = ints(np.int8, (4, 3))
    for a in (np.zeros((2, 4), np.float32), np.float32([[1, np.nan, 2, 3], [0, 1, 2, 3]]),
              np.float32([[1, np.inf, 2, 3], [0, 1, 2, 3]])):
        with np.errstate(all="ignore"):
            fast, ref, _ = three_ways("DynamicQuantizeMatMul", [a, b, np.float32(0.01), np.int8(0)], domain=MS,
                                      out_types=[TP.FLOAT], constants=(1, 2, 3), ort=False)
        np.testing.assert_array_equal(fast[0], ref[0])
    assert paths["exact"] == 0


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
def test_qlinear_add_fed_scales_are_read_at_each_call():
    """The parameters are kept only while the plan holds them: fed scales and zero points that
    change between two runs of one session give each run's own result (the portable kernel's)."""
    from quantized_harness import build, onnxkit_outputs, portable_kernels

    from onnxkit.runtime import InferenceSession

    a, b = ints(np.uint8, (3, 8)), ints(np.uint8, (8,))
    first = [a, np.float32(0.02), np.uint8(128), b, np.float32(0.03), np.uint8(120), np.float32(0.05), np.uint8(128)]
    data, feed = build("QLinearAdd", first, domain=MS, out_types=[TP.UINT8])
    sess = InferenceSession(data, validate=False)
    feed = dict(feed, x1=np.array(0.02, np.float32), x2=np.array(128, np.uint8), x7=np.array(127, np.uint8))
    for scale, zp in ((0.02, 128), (0.07, 3), (0.02, 128)):
        # the same arrays each run, their values changed in place (a caller reusing its buffers)
        feed["x1"][...], feed["x2"][...], feed["x7"][...] = scale, zp, 255 - zp
        got = sess.run(None, feed)[0]
        with portable_kernels("QLinearAdd", MS):
            want = onnxkit_outputs(data, feed)[0]
        identical(got, want)


def _bound(session) -> bool:
    """Whether the run loop calls a function the one node's kernel bound to its constants."""
    plan = session.plan
    (laid,) = plan._layout(0, plan.constants, plan.steps).laid_steps()
    return laid.call is not laid.step.fn


@pytest.mark.usefixtures("warm_bodies")
@needs_numba
@pytest.mark.parametrize("fed", [None, 6, 7])
def test_qgemm_bound_to_its_constants_and_fed_inputs_read_each_call(fed):
    """QGemm with every input but A a constant is bound (a body per A shape and dtype): A changes
    run after run, then its shape, then back; with C or y_scale fed instead, the node is not bound
    and each run follows the fed value (a new array, then written in place).  Each output equals
    the portable kernel's bit for bit and an int64 reference written here."""
    from quantized_harness import build, portable_kernels

    from onnxkit.runtime import InferenceSession

    k, n = 40, 24
    b = ints(np.int8, (n, k))
    b_scale = RNG.uniform(0.005, 0.02, (n,)).astype(np.float32)
    c = RNG.integers(-2000, 2000, (n,)).astype(np.int32)
    inputs = [ints(np.uint8, (6, k)), np.float32(0.03), np.uint8(131), b, b_scale, np.zeros(n, np.int8), c,
              np.float32(0.05), np.uint8(128)]
    constants = tuple(i for i in range(1, 9) if i != fed)
    data, feed = build("QGemm", inputs, {"transB": 1, "alpha": 0.75}, domain=MS, out_types=[TP.UINT8],
                       constants=constants)
    import onnx

    model = onnx.load_from_string(data)
    model.graph.input[0].type.tensor_type.ClearField("shape")        # A of any extents
    data = model.SerializeToString()
    fast = InferenceSession(data, validate=False)
    with portable_kernels("QGemm", MS):
        ref = InferenceSession(data, validate=False)
    assert _bound(fast) == (fed is None)
    value = None if fed is None else np.array(inputs[fed])
    outs = []
    for step, m in enumerate([6, 6, 3, 6]):
        feed = {"x0": ints(np.uint8, (m, k))}
        if fed is not None:
            if step == 1:
                value = value.copy()
                value[...] = value + (np.float32(0.02) if value.dtype == np.float32 else 500)
            elif step == 3:
                value[...] = value - (np.float32(0.01) if value.dtype == np.float32 else 300)
            feed[f"x{fed}"] = value
        got = fast.run(None, feed)[0]
        identical(got, ref.run(None, feed)[0])
        cc = c if fed != 6 else value
        ys = np.float32(0.05) if fed != 7 else value
        acc = (feed["x0"].astype(np.int64) - 131) @ b.T.astype(np.int64) + cc
        y = acc * 0.75 * float(np.float32(0.03)) * b_scale.astype(np.float64)
        np.testing.assert_array_equal(got, np.clip(np.rint(y / float(ys)) + 128, 0, 255).astype(np.uint8))
        outs.append(got)
    assert len(np.unique(outs[0])) > 10
