"""The compiled InstanceNormalization / GroupNormalization loop of the cpu backend
(overrides/group_norm.py, onnxkit_cpu.compiled.group_norm).

Each model is planned twice: with compiled loops (a spy counts the loop's calls, so a test fails
if the fast path silently stops being taken, or is taken where it must not be) and under
``compiled.disabled()`` (the portable numpy kernel).  Results must agree bit for bit (compared as
unsigned integers), and with onnxruntime within float32 rounding; near misses (float32 with
``stash_type`` 11, a NaN in scale, float16, groups not dividing C) keep the portable kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper, numpy_helper  # noqa: E402

from onnxkit import SessionOptions  # noqa: E402
from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import group_norm as loops  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies")]  # the compiled loops, from the first run

RNG = np.random.default_rng(4242)
UINT = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64, np.dtype(np.float16): np.uint16}


@pytest.fixture
def spy(count_calls):
    return count_calls(loops, "_ROWS")


def build(x_shape, dtype, scale, bias, op="InstanceNormalization", opset=17, constants=True, **attrs):
    """One normalization node; scale and B initializers where ``constants``, else graph inputs."""
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node(op, ["x", "s", "b"], ["y"], **attrs)
    inputs = [helper.make_tensor_value_info("x", t, list(x_shape))]
    inits = []
    for name, p in (("s", scale), ("b", bias)):
        if constants:
            inits.append(numpy_helper.from_array(p, name))
        else:
            inputs.append(helper.make_tensor_value_info(name, t, list(p.shape)))
    graph = helper.make_graph([node], "norm", inputs, [helper.make_tensor_value_info("y", t, list(x_shape))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model.SerializeToString()


def options(threads=1):
    so = SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.split_kernels", "1")
    return so


def both(model, feed, threads=1):
    """``(compiled result, numpy-body result)``."""
    fast = InferenceSession(model, options(threads)).run(None, feed)[0]
    with compiled.disabled():
        slow = InferenceSession(model, options(threads)).run(None, feed)[0]
    return fast, slow


def same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    u = UINT[a.dtype]
    np.testing.assert_array_equal(a.view(u), b.view(u))


def params(n, dtype):
    return ((RNG.standard_normal(n) * 2).astype(dtype), RNG.standard_normal(n).astype(dtype))


def data(shape, dtype, offset=3.0):
    return (RNG.standard_normal(shape) * 5 + offset).astype(dtype)


INSTANCE = [(1, 3, 7), (2, 5, 9, 11), (1, 32, 3136), (1, 1, 65536 + 3), (2, 3, 4, 5, 6), (1, 7, 129), (3, 2, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", INSTANCE)
def test_instance_norm_is_the_numpy_body_bit_for_bit(spy, shape, dtype):
    s, b = params(shape[1], dtype)
    x = data(shape, dtype)
    fast, slow = both(build(shape, dtype, s, b), {"x": x})
    assert spy.calls == 1
    same_bits(fast, slow)


@pytest.mark.parametrize("opset,groups,shape", [(18, 3, (2, 6, 5, 30)), (21, 3, (2, 6, 5, 30)), (21, 1, (1, 64, 9)),
                                                (18, 4, (1, 4, 1000)), (21, 2, (3, 10, 7, 7))])
def test_group_norm_is_the_numpy_body_bit_for_bit(spy, opset, groups, shape):
    n = groups if opset < 21 else shape[1]
    s, b = params(n, np.float32)
    x = data(shape, np.float32)
    fast, slow = both(build(shape, np.float32, s, b, "GroupNormalization", opset, num_groups=groups), {"x": x})
    assert spy.calls == 1
    same_bits(fast, slow)


def test_against_onnxruntime(spy):
    shape = (2, 8, 12, 13)
    s, b = params(8, np.float32)
    x = data(shape, np.float32)
    model = build(shape, np.float32, s, b)
    got = InferenceSession(model, options()).run(None, {"x": x})[0]
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    s, b = params(4, np.float32)
    model = build(shape, np.float32, np.repeat(s, 2), np.repeat(b, 2), "GroupNormalization", 21, num_groups=4)
    got = InferenceSession(model, options()).run(None, {"x": x})[0]
    # the reference: numpy in float64, written here from the definition (Clause 4: GroupNormalization-21)
    x64 = x.astype(np.float64).reshape(2, 4, -1)
    d = x64 - x64.mean(axis=2, keepdims=True)
    ref = (d / np.sqrt((d * d).mean(axis=2, keepdims=True) + 1e-5)).reshape(shape)
    ref = ref * np.repeat(s, 2).reshape(1, 8, 1, 1) + np.repeat(b, 2).reshape(1, 8, 1, 1)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert spy.calls == 2


@pytest.mark.parametrize("op,opset,attrs,n", [("InstanceNormalization", 17, {}, 64),
                                               ("GroupNormalization", 21, {"num_groups": 8}, 64),
                                               ("GroupNormalization", 18, {"num_groups": 8}, 8)])
def test_intra_op_threads_give_the_same_bits(spy, op, opset, attrs, n):
    shape = (2, 64, 16, 32)
    s, b = params(n, np.float32)
    x = data(shape, np.float32)
    model = build(shape, np.float32, s, b, op, opset, **attrs)
    one = InferenceSession(model, options(1)).run(None, {"x": x})[0]
    calls = spy.calls
    for k in (2, 3):
        same_bits(InferenceSession(model, options(k)).run(None, {"x": x})[0], one)
    assert spy.calls > calls + 2          # the rows were split: more than one call a run


def test_specials_in_x_keep_their_bits(spy):
    shape = (1, 4, 40)
    s, b = params(4, np.float32)
    x = data(shape, np.float32)
    x[0, 0, 3] = np.nan
    x[0, 1, 5] = np.inf
    x[0, 2, :] = -0.0
    x[0, 3, 7] = np.float32(3e38)
    fast, slow = both(build(shape, np.float32, s, b), {"x": x})
    assert spy.calls == 1
    same_bits(fast, slow)


def test_runtime_parameters_changed_between_runs(spy):
    shape = (1, 3, 50)
    s, b = params(3, np.float32)
    x = data(shape, np.float32)
    sess = InferenceSession(build(shape, np.float32, s, b, constants=False), options())
    first = sess.run(None, {"x": x, "s": s, "b": b})[0]
    s[1] = 7.0                        # the same array object, written in place
    second = sess.run(None, {"x": x, "s": s, "b": b})[0]
    with compiled.disabled():
        want = InferenceSession(build(shape, np.float32, s, b), options()).run(None, {"x": x})[0]
    same_bits(second, want)
    assert not np.array_equal(first, second)
    assert spy.calls == 2


@pytest.mark.parametrize("case", ["stash64", "nan_scale", "float16"])
def test_near_misses_keep_the_portable_kernel(spy, case):
    shape = (1, 4, 30)
    dtype = np.float16 if case == "float16" else np.float32
    s, b = params(4, dtype)
    if case == "nan_scale":
        s[2] = np.nan
    x = data(shape, dtype)
    if case == "stash64":
        model = build(shape, dtype, s, b, "GroupNormalization", 21, num_groups=2, stash_type=11)
    else:
        model = build(shape, dtype, s, b)
    fast, slow = both(model, {"x": x})
    assert spy.calls == 0
    same_bits(fast, slow)


def test_groups_not_dividing_the_channels_fail_as_the_portable_kernel(spy):
    shape = (1, 6, 10)
    s, b = params(6, np.float32)
    model = build(shape, np.float32, s, b, "GroupNormalization", 21, num_groups=4)
    x = data(shape, np.float32)
    with pytest.raises(OnnxkitError, match="num_groups 4 must divide the channel count 6"):
        InferenceSession(model, options()).run(None, {"x": x})
    assert spy.calls == 0
