"""The compiled inference path of BatchNormalization on the cpu backend (overrides/norm.py,
onnxkit_cpu.compiled.norm.channel_affine), with and without a fused Relu.

Each case is a small model planned twice: with compiled loops (a spy counts the loop's calls,
so a test fails if the fast path silently stops being taken) and under
``compiled.disabled()`` (the numpy body, the kernel as it was).  Results must agree bit for
bit (compared as unsigned integers: NaN payloads and signed zeros included), over ranks 2..5,
float32 / float64, every version's inference mode, specials in X and in the parameters, and
parameters fed as runtime inputs that change between runs.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

from onnxkit import SessionOptions  # noqa: E402
from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import norm as loops  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies")]  # the compiled loops, from the first run

RNG = np.random.default_rng(2718)
NAMES = ("s", "b", "m", "v")
UINT = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}

#: per version, the attributes of its inference modes (BatchNormalization-1 requires consumed_inputs);
#: before 7 ``is_test`` 0, its default, is training even with Y alone (onnxkit.operator_modes.batch_norm_mode)
MODES = {
    1: [{"consumed_inputs": [0, 0, 0, 1, 1], "is_test": 1}],
    6: [{"is_test": 1}, {"is_test": 1, "spatial": 1}],
    7: [{}, {"spatial": 1, "momentum": 0.5}],
    9: [{}],
    14: [{}, {"training_mode": 0}],
    15: [{}, {"training_mode": 0, "epsilon": 1e-3}],
}


@pytest.fixture
def spy(count_calls):
    return count_calls(loops, "channel_affine")


def tensor_type(dt):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dt))


def build(x, params, opset=15, attrs=None, relu=False, constants=True, outputs=1, dims=None):
    """A BatchNormalization (+ Relu) model; the parameters initializers where ``constants``,
    else graph inputs (of symbolic extents); X (and Y) of ``dims`` (default: X's shape)."""
    dims = list(x.shape) if dims is None else dims
    nodes = [helper.make_node("BatchNormalization", ["x", *NAMES], ["t" if relu else "y"]
                              + [f"o{k}" for k in range(1, outputs)], **(attrs or {}))]
    if relu:
        nodes.append(helper.make_node("Relu", ["t"], ["y"]))
    inputs = [helper.make_tensor_value_info("x", tensor_type(x.dtype), dims)]
    inits = []
    for n, p in zip(NAMES, params):
        if constants:
            inits.append(numpy_helper.from_array(p, n))
        else:
            inputs.append(helper.make_tensor_value_info(n, tensor_type(p.dtype), [f"{n}{k}" for k in range(p.ndim)]))
    outs = [helper.make_tensor_value_info("y", tensor_type(x.dtype), dims)]
    outs += [helper.make_tensor_value_info(f"o{k}", tensor_type(x.dtype), [x.shape[1]]) for k in range(1, outputs)]
    graph = helper.make_graph(nodes, "bn", inputs, outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def options(epilogue=True):
    so = SessionOptions()
    so.intra_op_num_threads = 1
    if not epilogue:
        so.add_session_config_entry("session.disable_passes", "epilogue")
    return so


def both(proto, epilogue=True):
    """``(compiled session, numpy-body session)``."""
    fast = InferenceSession(proto, options(epilogue))
    with compiled.disabled():
        slow = InferenceSession(proto, options(epilogue))
    return fast, slow


def same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    u = UINT[a.dtype]
    assert np.array_equal(np.ascontiguousarray(a).view(u), np.ascontiguousarray(b).view(u))


def params_for(c, dt=np.float32, specials=False, types=None):
    s = RNG.standard_normal(c)
    b = RNG.standard_normal(c)
    m = RNG.standard_normal(c)
    v = RNG.random(c) * 2
    if specials and c >= 6:
        v[0] = 0.0                      # var 0: 1 / sqrt(eps)
        s[1], b[1] = -0.0, -0.0         # a -0 scale and shift
        m[2] = np.inf                   # shift -inf * sign
        v[3] = np.inf                   # inv 0
        s[4] = -np.inf                  # inv -inf: x * inv NaN where x is 0
        v[5] = 1e-30                    # var far below eps
    types = types or (dt,) * 4
    return [a.astype(t) for a, t in zip((s, b, m, v), types)]


def x_for(shape, dt=np.float32, specials=False):
    x = RNG.standard_normal(shape).astype(dt)
    if specials:
        f = x.reshape(-1)
        u = f.view(UINT[np.dtype(dt)])
        k = min(8, f.size)
        f[:k] = [np.nan, np.inf, -np.inf, -0.0, 0.0, -np.nan, 1e-38, -1e-38][:k]
        u[0] |= 0x1234                  # a NaN payload
        f[-1] = -0.0
        if shape[1] > 4:                # a NaN (another payload) in the channel of the infinite scale
            x[(0, 4) + (0,) * (x.ndim - 2)] = np.nan
            u[np.ravel_multi_index((0, 4) + (0,) * (x.ndim - 2), shape)] |= 0x5678
    return x


SHAPES = [(3, 6), (2, 6, 5), (1, 7, 4, 5), (2, 6, 3, 2, 4), (1, 6, 1, 1)]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("specials", [False, True])
def test_bit_identical_to_numpy_body(spy, dt, shape, specials):
    x = x_for(shape, dt, specials)
    params = params_for(shape[1], dt, specials)
    fast, slow = both(build(x, params))
    before = spy.calls
    got = fast.run(None, {"x": x})[0]
    assert spy.calls == before + 1
    same_bits(got, slow.run(None, {"x": x})[0])
    assert fast.run(None, {"x": x})[0] is not got          # a fresh output each run
    if specials:
        assert np.isnan(got).any() and np.isinf(got).any()


@pytest.mark.parametrize("opset", sorted(MODES))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_every_versions_inference_mode(spy, opset, dt):
    for attrs in MODES[opset]:
        for shape in ((2, 6), (2, 6, 3, 3), (1, 6, 2, 3, 2)):
            x = x_for(shape, dt, True)
            params = params_for(shape[1], dt, True)
            fast, slow = both(build(x, params, opset, attrs))
            before = spy.calls
            got = fast.run(None, {"x": x})[0]
            assert spy.calls == before + 1, (opset, attrs)
            same_bits(got, slow.run(None, {"x": x})[0])


@pytest.mark.parametrize("opset,types", [(14, (np.float32, np.float32, np.float64, np.float64)),
                                         (15, (np.float16, np.float16, np.float64, np.float64)),
                                         (15, (np.float64, np.float64, np.float32, np.float32))])
def test_parameters_of_other_types(spy, opset, types):
    x = x_for((2, 6, 4, 4), np.float32, True)
    params = params_for(6, specials=True, types=types)
    fast, slow = both(build(x, params, opset))
    same_bits(fast.run(None, {"x": x})[0], slow.run(None, {"x": x})[0])
    assert spy.calls == 1


def test_non_contiguous_x_and_several_shapes(spy):
    params = params_for(6, specials=True)
    x = x_for((2, 6, 5, 4))
    fast, slow = both(build(x, params, dims=["N", 6, "H", "W"]))
    for shape in ((2, 6, 5, 4), (1, 6, 5, 4), (3, 6, 2, 9), (2, 6, 5, 4)):
        x = x_for(shape, specials=True)
        for feed in (x, np.ascontiguousarray(np.swapaxes(x, 2, 3)).swapaxes(2, 3)):
            assert feed.shape == x.shape
            same_bits(fast.run(None, {"x": feed})[0], slow.run(None, {"x": feed})[0])
    assert spy.calls == 8


def test_parameters_as_runtime_inputs_that_change(spy):
    x = x_for((2, 6, 3, 3), specials=True)
    params = params_for(6)
    fast, slow = both(build(x, params, constants=False))

    def check(ps):
        feed = {"x": x, **dict(zip(NAMES, ps))}
        got = fast.run(None, feed)[0]
        same_bits(got, slow.run(None, feed)[0])
        return got

    first = check(params)
    for k in range(4):                         # each parameter written in place, in turn
        params[k][1] += 1.5
        changed = check(params)
        assert not np.array_equal(changed, first, equal_nan=True)
        first = changed
    check(params_for(6, specials=True))        # new arrays
    frozen = params_for(6)
    for p in frozen:
        p.flags.writeable = False
    a = check(frozen)
    b = check([p.copy() for p in frozen])      # equal values, other (writeable) arrays
    same_bits(a, b)
    check(params_for(6))                       # read-only ones, then new ones again
    assert spy.calls == 9


def test_fallbacks_keep_the_portable_kernel(spy):
    """float16, spatial = 0 and training take the portable kernel (same results, no loop)."""
    x16 = x_for((2, 6, 3, 3)).astype(np.float16)
    p16 = params_for(6, np.float16)
    fast, slow = both(build(x16, p16))
    same_bits16 = fast.run(None, {"x": x16})[0].view(np.uint16), slow.run(None, {"x": x16})[0].view(np.uint16)
    assert np.array_equal(*same_bits16)
    x = x_for((2, 6, 3, 3))
    per_activation = [np.abs(RNG.standard_normal((6, 3, 3))).astype(np.float32) for _ in NAMES]
    fast, slow = both(build(x, per_activation, 7, {"spatial": 0}))
    same_bits(fast.run(None, {"x": x})[0], slow.run(None, {"x": x})[0])
    fast, slow = both(build(x, params_for(6), 15, {"training_mode": 1}, outputs=3))
    for a, b in zip(fast.run(None, {"x": x}), slow.run(None, {"x": x})):
        same_bits(a, b)
    empty = np.zeros((0, 6, 3, 3), np.float32)
    fast, slow = both(build(empty, params_for(6)))
    assert fast.run(None, {"x": empty})[0].shape == (0, 6, 3, 3)
    assert spy.calls == 0


def test_bad_parameters_fail_as_before(spy):
    x = x_for((2, 6, 3, 3))
    params = params_for(6)
    fast, slow = both(build(x, params, constants=False, dims=["N", "C", 3, 3]))
    bad = [params[0], params[1][:5], params[2], params[3]]
    messages = []
    for s in (fast, slow):
        with pytest.raises(OnnxkitError) as e:
            s.run(None, {"x": x, **dict(zip(NAMES, bad))})
        messages.append(str(e.value))
    assert messages[0] == messages[1] and "B has shape" in messages[0]
    same_bits(fast.run(None, {"x": x, **dict(zip(NAMES, params))})[0],
              slow.run(None, {"x": x, **dict(zip(NAMES, params))})[0])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_relu_fused_bit_identical(spy, dt, shape):
    x = x_for(shape, dt, True)
    params = params_for(shape[1], dt, True)
    proto = build(x, params, relu=True)
    fused, slow = both(proto)
    unfused, _ = both(proto, epilogue=False)
    assert [st.op for st in fused.plan.steps] == ["BatchNormalization"]
    assert [st.op for st in unfused.plan.steps] == ["BatchNormalization", "Relu"]
    assert [st.op for st in slow.plan.steps] == ["BatchNormalization", "Relu"]     # no offer without the loop
    got = fused.run(None, {"x": x})[0]
    assert spy.calls == 1
    same_bits(got, unfused.run(None, {"x": x})[0])
    same_bits(got, slow.run(None, {"x": x})[0])
    assert not np.signbit(got[~np.isnan(got)]).any()          # -0 -> +0
    assert np.isnan(got).any()


def test_relu_fused_fallback_runs_the_relu(spy):
    """A fused step whose input the pass does not take (float16) runs the Relu's own kernel."""
    x16 = x_for((2, 6, 3, 3), specials=True).astype(np.float16)
    p16 = params_for(6, np.float16, True)
    proto = build(x16, p16, relu=True)
    fused, slow = both(proto)
    assert [st.op for st in fused.plan.steps] == ["BatchNormalization"]
    a, b = fused.run(None, {"x": x16})[0], slow.run(None, {"x": x16})[0]
    assert np.array_equal(a.view(np.uint16), b.view(np.uint16)) and spy.calls == 0


@pytest.mark.parametrize("where", [0, 1, 2, 3])
def test_nan_parameters_take_the_numpy_body(spy, where):
    """A NaN in inv or shift: x * inv (or + shift) may meet two NaNs, whose result's payload is
    the first operand's on x86, and LLVM may order a product's operands either way: such a
    node keeps the numpy body (the same bits); the parameters' next values take the loop again."""
    x = x_for((2, 6, 3, 3), specials=True)
    params = params_for(6, specials=True)
    fast, slow = both(build(x, params, constants=False))
    params[where][4] = np.nan
    params[where].view(np.uint32)[4] |= 0x2a
    feed = {"x": x, **dict(zip(NAMES, params))}
    got = fast.run(None, feed)[0]
    same_bits(got, slow.run(None, feed)[0])
    assert np.isnan(got[:, 4]).all() and spy.calls == 0
    params[where][4] = 0.5
    feed = {"x": x, **dict(zip(NAMES, params))}
    same_bits(fast.run(None, feed)[0], slow.run(None, feed)[0])
    assert spy.calls == 1
