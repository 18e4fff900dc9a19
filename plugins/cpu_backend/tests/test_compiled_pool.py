"""The compiled path of MaxPool / AveragePool (onnxkit_cpu.compiled.pool.windows through
overrides/pool.py).

Every case runs a one-node model three ways: planned with the compiled loop, planned under
``compiled.disabled()`` (the numpy body), and an independent float64 reference written here
(plain loops over the windows).  The compiled loop folds the numpy body's terms in its order
(see the module docstring): the two agree bit for bit, the sign of zero included, for max
(NaN bits too) and average (where two NaNs meet in a sum, which one it keeps is LLVM's: NaN
either way); the reference to float rounding (the sign of zero aside).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import pool as loops  # noqa: E402

# numba missing or ONNXKIT_CPU_COMPILED=0: nothing to test here (test_compiled.py fails then)
pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies")]  # the compiled loops, from the first run

RNG = np.random.default_rng(2718)


@pytest.fixture
def counter(count_calls):
    return count_calls(loops, "windows")


def session(op, attrs, dtype, rank):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    x = helper.make_tensor_value_info("x", elem, [None] * rank)
    y = helper.make_tensor_value_info("y", elem, None)
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    return InferenceSession(model.SerializeToString(), validate=False)


def data(shape, dtype, special=True):
    """Normal values with ties, -0 / +0, NaNs of both signs and infinities sprinkled in, and a
    corner of -0 only (the sign of a zero sum, of a max of zeros)."""
    x = RNG.standard_normal(shape)
    if special:
        pick = RNG.random(shape)
        x[pick < 0.15] = np.round(x[pick < 0.15])            # ties: -1, 0, 1, 2 ...
        x[(pick >= 0.15) & (pick < 0.2)] = -0.0
        x[(pick >= 0.2) & (pick < 0.25)] = 0.0
        x[(pick >= 0.25) & (pick < 0.26)] = np.nan
        x[(pick >= 0.26) & (pick < 0.27)] = -np.nan
        x[(pick >= 0.27) & (pick < 0.28)] = np.inf
        x[(pick >= 0.28) & (pick < 0.29)] = -np.inf
        x[..., :3, :3] = -0.0
    return x.astype(dtype)


def bits(a):
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def pads_of(attrs, spatial):
    """``(begin, end)`` per axis as ONNX defines them (explicit pads or auto_pad SAME_*)."""
    nd = len(spatial)
    k, s, d = attrs["kernel_shape"], attrs.get("strides", [1] * nd), attrs.get("dilations", [1] * nd)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(nd):
            total = max(0, (-(-spatial[i] // s[i]) - 1) * s[i] + (k[i] - 1) * d[i] + 1 - spatial[i])
            lo = total // 2 if auto == "SAME_UPPER" else total - total // 2
            begin.append(lo)
            end.append(total - lo)
        return begin, end
    pads = attrs.get("pads", [0] * 2 * nd)
    return list(pads[:nd]), list(pads[nd:])


def reference(op, x, attrs, out_spatial, include_pad):
    """float64 pool by plain loops over every window (its output extents the session's)."""
    nd = x.ndim - 2
    spatial = list(x.shape[2:])
    k, s, d = attrs["kernel_shape"], attrs.get("strides", [1] * nd), attrs.get("dilations", [1] * nd)
    begin, end = pads_of(attrs, spatial)
    x64 = x.astype(np.float64)
    y = np.empty(x.shape[:2] + tuple(out_spatial))
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*(range(v) for v in out_spatial)):
            vals, counted = [], 0
            for t in itertools.product(*(range(v) for v in k)):
                idx = [o[i] * s[i] + t[i] * d[i] - begin[i] for i in range(nd)]
                inside = all(0 <= idx[i] < spatial[i] for i in range(nd))
                if inside:
                    vals.append(float(x64[(n, c, *idx)]))
                if inside or (include_pad and all(-begin[i] <= idx[i] < spatial[i] + end[i] for i in range(nd))):
                    counted += 1
            if op == "MaxPool":
                y[(n, c, *o)] = (np.nan if any(math.isnan(v) for v in vals) else max(vals)) if vals else -np.inf
            else:
                y[(n, c, *o)] = math.fsum(vals) / counted if counted and not any(map(math.isinf, vals)) else (
                    sum(vals) / counted if counted else np.nan)
    return y


def check(op, x, attrs, counter, include_pad=False, reference_too=True):
    """Compiled (taken: counted) vs numpy body bit for bit, and vs the reference."""
    if op == "AveragePool":
        attrs = {**attrs, "count_include_pad": int(include_pad)}
    fast = session(op, attrs, x.dtype, x.ndim)
    with compiled.disabled():
        slow = session(op, attrs, x.dtype, x.ndim)
    before = counter.calls
    got = fast.run(None, {"x": x})[0]
    assert counter.calls - before == 1, "the compiled loop was not used"
    body = slow.run(None, {"x": x})[0]
    assert counter.calls - before == 1          # the numpy body does not call it
    assert got.dtype == x.dtype and got.shape == body.shape and got.flags.c_contiguous
    if op == "MaxPool":
        assert np.array_equal(bits(got), bits(body)), (attrs, np.argwhere(bits(got) != bits(body))[:5])
    else:       # which of two NaNs a sum keeps is LLVM's (fadd commutes): NaN either way
        nan = np.isnan(body)
        assert np.array_equal(np.isnan(got), nan), attrs
        assert np.array_equal(bits(got)[~nan], bits(body)[~nan]), (attrs, np.argwhere((bits(got) != bits(body)) & ~nan)[:5])
    if reference_too:
        ref = reference(op, x, attrs, got.shape[2:], include_pad)
        tol = 1e-12 if x.dtype == np.float64 else 1e-5
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=tol, atol=tol, equal_nan=True)
    return got


def geometries():
    """A grid: kernel 1..5, stride 1..3, dilation 1..2, pads none / symmetric / asymmetric, ceil_mode."""
    for k, s, dl in itertools.product(range(1, 6), range(1, 4), (1, 2)):
        reach = (k - 1) * dl + 1
        for pads in ((0, 0, 0, 0), (1, 1, 1, 1), (0, 1, 2, 0), (2, 0, 1, 1)):
            if max(pads) >= reach:
                continue
            for ceil in (0, 1):
                yield {"kernel_shape": [k, k if k < 4 else k - 2], "strides": [s, s % 3 + 1], "dilations": [dl, 1],
                       "pads": list(pads), "ceil_mode": ceil}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_grid_bit_identical(dtype, counter):
    x = data((2, 3, 11, 12), dtype)
    for attrs in geometries():
        check("MaxPool", x, attrs, counter, reference_too=attrs["kernel_shape"][0] in (1, 3, 4))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("include_pad", [False, True])
def test_average_grid(dtype, include_pad, counter):
    x = data((2, 2, 10, 11), dtype)
    for attrs in geometries():
        check("AveragePool", x, attrs, counter, include_pad, reference_too=attrs["kernel_shape"][0] in (2, 3, 5))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_auto_pad(op, auto_pad, counter):
    x = data((1, 3, 9, 10), np.float32)
    for k, s in ((3, 2), (2, 2), (4, 3)):
        check(op, x, {"kernel_shape": [k, k], "strides": [s, s], "auto_pad": auto_pad}, counter, include_pad=True)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_axis(op, dtype, counter):
    x = data((2, 3, 37), dtype, special=False)
    x[0, 0, 5] = np.nan
    x[1, 2, 8:12] = -0.0
    for k, s, d, pads, ceil in ((3, 2, 1, (1, 1), 0), (2, 2, 1, (0, 0), 1), (5, 1, 2, (0, 3), 0), (1, 3, 1, (0, 0), 1)):
        check(op, x, {"kernel_shape": [k], "strides": [s], "dilations": [d], "pads": list(pads), "ceil_mode": ceil},
              counter, include_pad=bool(ceil))


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_model_shapes(op, counter):
    """Rows longer than the loop's vector runs (its junk slack at the end of X and Y)."""
    for shape, k, s, pads in (((1, 5, 111, 111), 3, 2, (0, 0, 0, 0)), ((1, 4, 112, 112), 3, 2, (1, 1, 1, 1)),
                              ((2, 3, 27, 27), 3, 2, (0, 0, 0, 0)), ((1, 2, 40, 70), 3, 1, (1, 1, 1, 1)),
                              ((1, 3, 14, 14), 2, 2, (0, 0, 0, 0)), ((1, 2, 7, 7), 6, 1, (0, 0, 0, 0))):
        x = data(shape, np.float32)
        check(op, x, {"kernel_shape": [k, k], "strides": [s, s], "pads": list(pads)}, counter,
              reference_too=shape[2] < 50)


def test_a_nan_gives_nan_and_zero_signs():
    """ONNX MaxPool: a NaN anywhere in a window gives NaN; zeros keep the numpy body's sign."""
    x = np.array([[[[1.0, np.nan, 3.0, 0.0], [-0.0, 2.0, -0.0, 0.0], [-0.0, -0.0, 5.0, -np.nan], [-0.0, -0.0, 1.0, 1.0]]]],
                 np.float32)
    y = session("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}, np.float32, 4).run(None, {"x": x})[0]
    assert np.isnan(y[0, 0, 0, 0]) and np.isnan(y[0, 0, 1, 1])
    assert y[0, 0, 0, 1] == 3.0 and y[0, 0, 1, 0] == 0.0 and np.signbit(y[0, 0, 1, 0])


def test_compiled_path_is_taken_for_float32_max(counter):
    """The spy: a float32 2-D MaxPool runs the compiled loop (once per call), float16 too (on its
    values widened: test_half_pool.py); 3-D inputs keep the numpy body."""
    x = data((1, 4, 15, 15), np.float32, special=False)
    s = session("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2]}, np.float32, 4)
    for i in range(3):
        s.run(None, {"x": x})
        assert counter.calls == i + 1, "the compiled MaxPool loop was not used"
    session("MaxPool", {"kernel_shape": [3, 3]}, np.float16, 4).run(None, {"x": x.astype(np.float16)})
    assert counter.calls == 4
    session("MaxPool", {"kernel_shape": [2, 2, 2]}, np.float32, 5).run(None, {"x": data((1, 2, 4, 4, 4), np.float32)})
    assert counter.calls == 4


def test_threads_share_a_session(counter):
    from concurrent.futures import ThreadPoolExecutor
    s = session("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, np.float32, 4)
    xs = [data((1, 3, 20 + i % 3, 21), np.float32, special=False) for i in range(12)]
    want = [s.run(None, {"x": x})[0] for x in xs]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda x: s.run(None, {"x": x})[0], xs))
    for g, w in zip(got, want):
        assert np.array_equal(bits(g), bits(w))
