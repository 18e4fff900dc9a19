"""Tests of the cpu fast paths of Conv and the pools (overrides/conv.py, conv_depthwise.py, pool.py).

The fast paths keep per-shape plans, per-thread scratch buffers and cached weight layouts, so
besides the geometry (1-D / 2-D / 3-D, strides, dilations, asymmetric and negative pads,
``auto_pad``, groups, depthwise with a channel multiplier, bias or none, float16, batches) these
tests run a node several times with changing inputs, with W given as a runtime input that
changes between runs, with several input shapes on one session, and from two Python threads
at once.  Expected values come from float64 references written here (a loop over output
positions with an einsum over each window), independent of the kernels under test.
"""

from __future__ import annotations

import itertools
import math
import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402

RNG = np.random.default_rng(1414)


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def bodies(request):
    """Every test twice: as planned by default (the compiled Conv loop where numba is there:
    test_compiled_conv.py) and under ``compiled.disabled()`` (the numpy bodies)."""
    if request.param == "compiled":
        yield
        return
    with compiled.disabled():
        yield


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def session(op, inputs, attrs=None, opset=17, constants=()):
    """A one-node model over ``inputs`` (``{name: example array}``, None: omitted); names in
    ``constants`` are initializers holding the example."""
    names = [n if v is not None else "" for n, v in inputs.items()]
    node = helper.make_node(op, names, ["y"], **(attrs or {}))
    graph_inputs, inits = [], []
    for n, v in inputs.items():
        if v is None:
            continue
        elem = helper.np_dtype_to_tensor_dtype(v.dtype)
        if n in constants:
            inits.append(helper.make_tensor(n, elem, v.shape, v.reshape(-1).tolist()))
        else:
            graph_inputs.append(helper.make_tensor_value_info(n, elem, [None] * v.ndim))
    first = next(v for v in inputs.values() if v is not None)
    out = helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(first.dtype), None)
    graph = helper.make_graph([node], "g", graph_inputs, [out], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return InferenceSession(model.SerializeToString(), validate=False)


# -- references (float64) -----------------------------------------------------------------------

def same_pads(in_shape, kernel, strides, dil, mode):
    """``(begin, end)`` of auto_pad SAME_UPPER / SAME_LOWER: output ceil(in / stride)."""
    begin, end = [], []
    for d, k, s, dl in zip(in_shape, kernel, strides, dil):
        total = max(0, (math.ceil(d / s) - 1) * s + (k - 1) * dl + 1 - d)
        small = total // 2
        begin.append(small if mode == "SAME_UPPER" else total - small)
        end.append(total - begin[-1])
    return begin, end


def padded(x, begin, end, fill=0.0):
    """``x`` (float64) with its spatial axes padded (negative: cropped)."""
    x = x.astype(np.float64)
    crop = tuple(slice(max(0, -b), x.shape[2 + i] - max(0, -e)) for i, (b, e) in enumerate(zip(begin, end)))
    x = x[(slice(None), slice(None)) + crop]
    return np.pad(x, [(0, 0), (0, 0)] + [(max(0, b), max(0, e)) for b, e in zip(begin, end)], constant_values=fill)


def windows(xp, kernel, strides, dil, out):
    """``(output position, window (N, C, *K))`` over the padded input."""
    for pos in itertools.product(*(range(o) for o in out)):
        idx = np.ix_(*(p * s + np.arange(k) * d for p, s, k, d in zip(pos, strides, kernel, dil)))
        yield pos, xp[(Ellipsis,) + idx]


def ref_conv(x, w, b, strides, dil, begin, end, group):
    n, c, *sp = x.shape
    m, cg, *kernel = w.shape
    xp = padded(x, begin, end)
    out = [(d - (k - 1) * dl - 1) // s + 1 for d, k, dl, s in zip(xp.shape[2:], kernel, dil, strides)]
    y = np.zeros((n, m, *out))
    mg = m // group
    wf = w.astype(np.float64)
    for pos, win in windows(xp, kernel, strides, dil, out):
        for g in range(group):
            y[(slice(None), slice(g * mg, (g + 1) * mg)) + pos] = np.einsum(
                "nk,mk->nm", win[:, g * cg:(g + 1) * cg].reshape(n, -1), wf[g * mg:(g + 1) * mg].reshape(mg, -1))
    if b is not None:
        y += b.astype(np.float64).reshape((1, m) + (1,) * len(out))
    return y


def close(got, want, dtype=np.float32):
    assert got.shape == want.shape, (got.shape, want.shape)
    tol = 2e-3 if dtype == np.float16 else 2e-5
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * scale)


def two_threads(s, feeds, want, runs):
    """Session ``s`` run ``runs`` times by each of two threads at once, thread ``k`` on
    ``{"x": feeds[k]}``, every result compared with ``want[k]``."""
    errors, start = [], threading.Barrier(2)

    def work(k):
        try:
            start.wait()
            for _ in range(runs):
                close(s.run(None, {"x": feeds[k]})[0], want[k])
        except BaseException as exc:  # noqa: BLE001 (reported by the main thread)
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


# -- Conv ---------------------------------------------------------------------------------------

CASES = [
    # (X shape, W shape, attributes); pads as ONNX lists (begins, then ends)
    ((3, 8, 8, 8), (8, 8, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((2, 3, 9, 7), (4, 3, 3, 2), dict(pads=[2, 0, 1, 3], strides=[2, 1], dilations=[1, 2])),
    ((1, 4, 7, 9), (6, 2, 3, 3), dict(pads=[1, 1, 1, 1], group=2)),
    ((2, 6, 7, 8), (6, 1, 3, 3), dict(pads=[1, 1, 1, 1], group=6)),                       # depthwise, flat rows
    ((1, 5, 6, 9), (10, 1, 5, 5), dict(pads=[2, 2, 2, 2], group=5)),                     # multiplier 2
    ((2, 4, 9, 8), (8, 1, 3, 3), dict(pads=[1, 0, 0, 1], strides=[2, 1], group=4)),      # strided depthwise
    ((1, 3, 8, 8), (3, 1, 3, 3), dict(pads=[0, 2, 1, 0], dilations=[2, 1], group=3)),    # dilated, asymmetric
    ((1, 3, 8, 8), (3, 1, 2, 3), dict(pads=[-1, 1, 0, -2], group=3)),                    # cropping pads
    ((1, 4, 8, 8), (5, 4, 3, 3), dict(pads=[-1, 0, 1, -1])),
    ((1, 129, 3), (128, 129, 3), dict(pads=[1, 1])),                                     # silero's 1-D
    ((1, 1, 576), (6, 1, 256), dict(strides=[128])),
    ((2, 4, 11), (6, 2, 3), dict(pads=[2, 1], strides=[2], dilations=[2], group=2)),
    ((1, 6, 10), (6, 1, 3), dict(pads=[1, 1], group=6)),                                 # 1-D depthwise
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), dict(pads=[1, 0, 1, 0, 1, 1], strides=[1, 2, 1])),
    ((2, 3, 4, 5, 6), (3, 1, 3, 3, 3), dict(pads=[1] * 6, group=3)),                     # 3-D depthwise
    ((3, 8, 8, 8), (16, 8, 1, 1), dict(strides=[2, 2])),                                 # 1x1 strided
    ((2, 6, 4, 5), (4, 3, 1, 1), dict(group=2)),                                         # grouped 1x1
    ((1, 4, 5, 5), (4, 4, 1, 1), dict(pads=[1, 0, 0, 1])),                               # padded 1x1
    # flat rows, the bias added after the junk columns are dropped: long rows, none dropped, 3-D
    ((3, 3, 16, 16), (8, 3, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((2, 3, 6, 5), (4, 3, 3, 1), dict(pads=[1, 0, 1, 0])),
    ((2, 2, 4, 5, 3), (3, 2, 2, 3, 2), dict(pads=[1, 0, 1, 0, 1, 1])),
]


def _pads_of(x_shape, w_shape, attrs, auto_pad=None):
    nd = len(x_shape) - 2
    strides = attrs.get("strides", [1] * nd)
    dil = attrs.get("dilations", [1] * nd)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        return strides, dil, *same_pads(x_shape[2:], w_shape[2:], strides, dil, auto_pad)
    pads = attrs.get("pads", [0] * (2 * nd)) if auto_pad is None else [0] * (2 * nd)
    return strides, dil, pads[:nd], pads[nd:]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape,w_shape,attrs", CASES)
def test_conv_matches_the_reference_over_changing_inputs(x_shape, w_shape, attrs, bias):
    b = randn(w_shape[0]) if bias else None
    w = randn(*w_shape)
    s = session("Conv", {"x": randn(*x_shape), "w": w, "b": b}, attrs, constants=("w",))
    strides, dil, begin, end = _pads_of(x_shape, w_shape, attrs)
    for _ in range(3):                          # the prepared plan and the thread's buffers are reused
        x = randn(*x_shape)
        feed = {"x": x} if b is None else {"x": x, "b": b}
        got = s.run(None, feed)[0]
        assert got.dtype == np.float32 and got.flags.c_contiguous
        close(got, ref_conv(x, w, b, strides, dil, begin, end, attrs.get("group", 1)))


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("x_shape,w_shape,group,strides", [
    ((1, 2, 6, 7), (3, 2, 2, 4), 1, [2, 1]),
    ((1, 4, 7, 6), (4, 1, 4, 3), 4, [1, 1]),
    ((2, 4, 7, 6), (8, 1, 3, 2), 4, [2, 3]),
])
def test_conv_auto_pad(auto_pad, x_shape, w_shape, group, strides):
    x, w = randn(*x_shape), randn(*w_shape)
    attrs = dict(auto_pad=auto_pad, strides=strides, group=group)
    got = session("Conv", {"x": x, "w": w}, attrs).run(None, {"x": x, "w": w})[0]
    _, dil, begin, end = _pads_of(x_shape, w_shape, dict(strides=strides), auto_pad)
    close(got, ref_conv(x, w, None, strides, dil, begin, end, group))


@pytest.mark.parametrize("x_shape,w_shape,attrs", [CASES[0], CASES[3], CASES[4], CASES[9], CASES[14]])
def test_conv_float16_computes_in_float32_and_rounds_once(x_shape, w_shape, attrs):
    x, w, b = randn(*x_shape, dtype=np.float16), randn(*w_shape, dtype=np.float16), randn(w_shape[0], dtype=np.float16)
    got = session("Conv", {"x": x, "w": w, "b": b}, attrs).run(None, {"x": x, "w": w, "b": b})[0]
    assert got.dtype == np.float16
    strides, dil, begin, end = _pads_of(x_shape, w_shape, attrs)
    close(got, ref_conv(x, w, b, strides, dil, begin, end, attrs.get("group", 1)), np.float16)


def test_conv_float64():
    x, w, b = randn(2, 4, 6, 6, dtype=np.float64), randn(4, 1, 3, 3, dtype=np.float64), randn(4, dtype=np.float64)
    got = session("Conv", {"x": x, "w": w, "b": b}, dict(pads=[1] * 4, group=4)).run(None, {"x": x, "w": w, "b": b})[0]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref_conv(x, w, b, [1, 1], [1, 1], [1, 1], [1, 1], 4), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("x_shape,w_shape,attrs", [CASES[0], CASES[3], CASES[4], CASES[10], CASES[15]])
def test_conv_runtime_weights_that_change_between_runs(x_shape, w_shape, attrs):
    x = randn(*x_shape)
    s = session("Conv", {"x": x, "w": randn(*w_shape), "b": randn(w_shape[0])}, attrs)
    strides, dil, begin, end = _pads_of(x_shape, w_shape, attrs)
    w = randn(*w_shape)
    for k in range(4):
        b = randn(w_shape[0])
        close(s.run(None, {"x": x, "w": w, "b": b})[0], ref_conv(x, w, b, strides, dil, begin, end,
                                                               attrs.get("group", 1)))
        if k % 2:
            w = randn(*w_shape)    # a new array
        else:
            w *= -0.5              # the same array object with new contents
            w += randn(*w_shape)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_conv_runtime_weights_changed_in_place_are_seen(dtype):
    # float16 W is converted to float32: that copy must not outlive the caller's changes
    x, w, b = randn(1, 4, 6, 6, dtype=dtype), randn(4, 1, 3, 3, dtype=dtype), randn(4, dtype=dtype)
    for attrs in (dict(pads=[1] * 4, group=4), dict(pads=[1] * 4)):
        wa = w if attrs.get("group") else randn(4, 4, 3, 3, dtype=dtype)
        s = session("Conv", {"x": x, "w": wa, "b": b}, attrs)
        for _ in range(3):
            got = s.run(None, {"x": x, "w": wa, "b": b})[0]
            close(got, ref_conv(x, wa, b, [1, 1], [1, 1], [1, 1], [1, 1], attrs.get("group", 1)), dtype)
            wa[...] = randn(*wa.shape, dtype=dtype)
            b[...] = randn(4, dtype=dtype)


def test_conv_several_input_shapes_on_one_node():
    w = randn(6, 1, 3, 3)
    s = session("Conv", {"x": randn(1, 6, 5, 5), "w": w}, dict(pads=[1] * 4, group=6), constants=("w",))
    for shape in [(1, 6, 5, 5), (2, 6, 9, 4), (1, 6, 5, 5), (3, 6, 1, 7)]:
        x = randn(*shape)
        close(s.run(None, {"x": x})[0], ref_conv(x, w, None, [1, 1], [1, 1], [1, 1], [1, 1], 6))


def test_conv_two_threads_on_one_session():
    cases = [((1, 6, 12, 10), (6, 1, 5, 5), dict(pads=[2] * 4, group=6)),
             ((2, 4, 8, 8), (5, 4, 3, 3), dict(pads=[1] * 4))]
    for x_shape, w_shape, attrs in cases:
        w, b = randn(*w_shape), randn(w_shape[0])
        s = session("Conv", {"x": randn(*x_shape), "w": w, "b": b}, attrs, constants=("w", "b"))
        strides, dil, begin, end = _pads_of(x_shape, w_shape, attrs)
        feeds = [randn(*x_shape) for _ in range(2)]
        want = [ref_conv(x, w, b, strides, dil, begin, end, attrs.get("group", 1)) for x in feeds]
        two_threads(s, feeds, want, 200)


def test_conv_bad_inputs_fail_naming_the_node_every_time():
    x, w = randn(1, 4, 5, 5), randn(4, 1, 3, 3)
    bad = session("Conv", {"x": x, "w": w.astype(np.float64)}, dict(group=4))
    for _ in range(2):                      # nothing is kept from a failed call
        with pytest.raises(OnnxkitError, match="W has element type float64"):
            bad.run(None, {"x": x, "w": w.astype(np.float64)})
    s = session("Conv", {"x": x, "w": w}, dict(group=4))
    s.run(None, {"x": x, "w": w})
    with pytest.raises(OnnxkitError, match="input channels"):
        s.run(None, {"x": randn(1, 3, 5, 5), "w": w})
    with pytest.raises(OnnxkitError, match="B has 3 values"):
        session("Conv", {"x": x, "w": w, "b": randn(3)}, dict(group=4)).run(None, {"x": x, "w": w, "b": randn(3)})


# -- pools --------------------------------------------------------------------------------------

def ref_pool(x, kind, kernel, strides, dil, begin, end, ceil_mode=False, include_pad=False):
    xf = x.astype(np.float64)
    lowest = float(np.iinfo(x.dtype).min) if np.issubdtype(x.dtype, np.integer) else -np.inf
    extra = []
    for d, k, s, dl, b, e in zip(x.shape[2:], kernel, strides, dil, begin, end):
        span = d + b + e - (k - 1) * dl - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= d + b:      # the last window must start inside the input or left pad
            o -= 1
        extra.append(max(0, (o - 1) * s + (k - 1) * dl + 1 - (d + b + e)))
    out = [(d + b + e + t - (k - 1) * dl - 1) // s + 1
           for d, b, e, t, k, s, dl in zip(x.shape[2:], begin, end, extra, kernel, strides, dil)]
    real = padded(np.ones_like(xf), begin, [e + t for e, t in zip(end, extra)], 0.0)     # 1 on the input
    inside = np.pad(padded(np.ones_like(xf), begin, end, 1.0), [(0, 0), (0, 0)] + [(0, t) for t in extra])
    xp = padded(xf, begin, [e + t for e, t in zip(end, extra)], lowest if kind == "max" else 0.0)
    y = np.zeros(x.shape[:2] + tuple(out))
    cnt = {pos: win for pos, win in windows(inside if include_pad else real, kernel, strides, dil, out)}
    for pos, win in windows(xp, kernel, strides, dil, out):
        if kind == "max":
            y[(Ellipsis,) + pos] = win.reshape(win.shape[:2] + (-1,)).max(axis=2)
        else:
            y[(Ellipsis,) + pos] = win.reshape(win.shape[:2] + (-1,)).sum(axis=2) / cnt[pos][0, 0].sum()
    return y


POOLS = [
    ((3, 8, 16, 16), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ((3, 8, 16, 16), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((2, 3, 9, 10), dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 2, 1], ceil_mode=1)),
    ((1, 4, 9, 8), dict(kernel_shape=[2, 3], dilations=[2, 1], pads=[0, 1, 1, 1])),
    ((1, 6, 3, 40), dict(kernel_shape=[3, 2], strides=[3, 2])),
    ((2, 3, 11), dict(kernel_shape=[3], strides=[2], pads=[1, 2])),
    ((1, 2, 5, 6, 4), dict(kernel_shape=[2, 3, 1], strides=[1, 2, 1], pads=[1, 0, 0, 0, 1, 0])),
    ((1, 2, 5, 5), dict(kernel_shape=[1, 1], strides=[2, 2])),
]


def _pool_geometry(x_shape, attrs):
    nd = len(x_shape) - 2
    pads = attrs.get("pads", [0] * (2 * nd))
    return (attrs["kernel_shape"], attrs.get("strides", [1] * nd), attrs.get("dilations", [1] * nd),
            pads[:nd], pads[nd:], bool(attrs.get("ceil_mode", 0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("x_shape,attrs", POOLS)
def test_max_pool(x_shape, attrs, dtype):
    s = session("MaxPool", {"x": randn(*x_shape, dtype=dtype)}, attrs)
    kernel, strides, dil, begin, end, ceil = _pool_geometry(x_shape, attrs)
    for _ in range(2):
        x = randn(*x_shape, dtype=dtype)
        got = s.run(None, {"x": x})[0]
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, ref_pool(x, "max", kernel, strides, dil, begin, end, ceil).astype(dtype))


def test_max_pool_int8_pads_with_the_type_minimum():
    x = RNG.integers(-128, 0, size=(1, 2, 5, 5)).astype(np.int8)
    attrs = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    got = session("MaxPool", {"x": x}, attrs).run(None, {"x": x})[0]
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, ref_pool(x, "max", [3, 3], [1, 1], [1, 1], [1, 1], [1, 1]).astype(np.int8))


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("x_shape,attrs", POOLS)
def test_average_pool(x_shape, attrs, include_pad):
    attrs = dict(attrs, count_include_pad=include_pad)
    attrs.pop("dilations", None) if len(x_shape) != 4 else None
    s = session("AveragePool", {"x": randn(*x_shape)}, attrs, opset=19)
    kernel, strides, dil, begin, end, ceil = _pool_geometry(x_shape, attrs)
    for _ in range(2):
        x = randn(*x_shape)
        close(s.run(None, {"x": x})[0], ref_pool(x, "avg", kernel, strides, dil, begin, end, ceil, bool(include_pad)))


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(3, 16, 4, 4), (1, 480, 6, 40), (2, 3, 7), (1, 2, 3, 4, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_global_pools(op, shape, dtype):
    s = session(op, {"x": randn(*shape, dtype=dtype)})
    axes = tuple(range(2, len(shape)))
    for _ in range(2):
        x = randn(*shape, dtype=dtype)
        got = s.run(None, {"x": x})[0]
        xf = x.astype(np.float64)
        want = xf.mean(axis=axes, keepdims=True) if op == "GlobalAveragePool" else xf.max(axis=axes, keepdims=True)
        assert got.dtype == dtype
        close(got, want, dtype)


def test_pools_two_threads_on_one_session():
    x_shape, attrs = POOLS[2]
    s = session("AveragePool", {"x": randn(*x_shape)}, attrs)
    feeds = [randn(*x_shape) for _ in range(2)]
    kernel, strides, dil, begin, end, ceil = _pool_geometry(x_shape, attrs)
    want = [ref_pool(x, "avg", kernel, strides, dil, begin, end, ceil) for x in feeds]
    two_threads(s, feeds, want, 300)


# -- pools: bit-identity of the blocked, phase-split reduction (overrides/pool_windows.py) -------

def fold_pool(x, kind, kernel, strides, dil, begin, end, ceil_mode=False, include_pad=False):
    """The padded separable fold in float32, as the portable kernel orders it: per window,
    the taps of the first spatial axis folded in order (``(t0 op t1) op t2 ...``) for each
    position of the others, then those of the next axis; averages divided by the float32
    count.  Pads are -inf / the type's minimum (max) or +0 (sum)."""
    nd = len(kernel)
    want = ref_pool(x[:1, :1], kind, kernel, strides, dil, begin, end, ceil_mode)   # the output extents
    out = want.shape[2:]
    tail = [max(0, (o - 1) * s + (k - 1) * d + 1 - (n + b + e))
            for o, s, k, d, n, b, e in zip(out, strides, kernel, dil, x.shape[2:], begin, end)]
    lowest = float(np.iinfo(x.dtype).min) if np.issubdtype(x.dtype, np.integer) else -np.inf
    xf = x.astype(np.float32)
    widths = [(0, 0), (0, 0)] + [(b, e + t) for b, e, t in zip(begin, end, tail)]
    xp = np.pad(xf, widths, constant_values=lowest if kind == "max" else 0.0)
    counted = np.pad(np.ones_like(xf), [(0, 0), (0, 0)] + [(b, e) for b, e in zip(begin, end)],
                     constant_values=1.0 if include_pad else 0.0)
    counted = np.pad(counted, [(0, 0), (0, 0)] + [(0, t) for t in tail])
    op = np.maximum if kind == "max" else np.add
    y = np.empty(x.shape[:2] + tuple(out), dtype=np.float32)
    for (pos, win), (_, cnt) in zip(windows(xp, kernel, strides, dil, out), windows(counted, kernel, strides, dil, out)):
        for _ in range(nd):
            acc = win[:, :, 0]
            for t in range(1, win.shape[2]):
                acc = op(acc, win[:, :, t])
            win = acc
        if kind == "avg":
            win = win / np.float32(cnt[0, 0].sum())
        y[(Ellipsis,) + pos] = win
    return y.astype(x.dtype)


def special_values(shape, dtype=np.float32):
    """Normal values with a share of signed zeros, infinities and NaNs."""
    x = randn(*shape)
    pick = RNG.random(shape)
    x[pick < 0.15] = -0.0
    x[(pick >= 0.15) & (pick < 0.2)] = 0.0
    x[(pick >= 0.2) & (pick < 0.21)] = np.inf
    x[(pick >= 0.21) & (pick < 0.22)] = -np.inf
    x[(pick >= 0.22) & (pick < 0.225)] = np.nan
    return x.astype(dtype)


BLOCKED_POOLS = POOLS + [
    ((2, 5, 13, 12), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ((1, 7, 12, 11), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1])),
    ((1, 6, 11, 14), dict(kernel_shape=[3, 2], strides=[3, 3], dilations=[2, 3], pads=[2, 1, 0, 2])),
    ((1, 9, 7, 7), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ((1, 9, 7, 7), dict(kernel_shape=[7, 7])),
    ((2, 3, 8, 9), dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ((1, 5, 9, 9), dict(kernel_shape=[1, 1], strides=[2, 2], pads=[1, 0, 0, 1])),
    ((1, 4, 6, 5), dict(kernel_shape=[1, 3], strides=[1, 1])),
    ((3, 4, 23), dict(kernel_shape=[4], strides=[3], pads=[2, 1], dilations=[2])),
    ((1, 3, 5, 7, 6), dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0])),
]


@pytest.mark.parametrize("block_bytes", [300, 1 << 20])
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("x_shape,attrs", BLOCKED_POOLS)
def test_pools_bit_identical_to_the_padded_fold(x_shape, attrs, kind, block_bytes, monkeypatch):
    from onnxkit_cpu.overrides import pool_windows
    monkeypatch.setattr(pool_windows, "BLOCK_BYTES", block_bytes)   # 300: a few rows a block, a short last one
    attrs = dict(attrs)
    if kind == "avg":
        attrs["count_include_pad"] = int(len(x_shape) % 2 == 0)
    op = "MaxPool" if kind == "max" else "AveragePool"
    s = session(op, {"x": randn(*x_shape)}, attrs, opset=19)
    kernel, strides, dil, begin, end, ceil = _pool_geometry(x_shape, attrs)
    for _ in range(3):
        x = special_values(x_shape)
        got = s.run(None, {"x": x})[0]
        with np.errstate(invalid="ignore"):   # inf - inf in the references
            want = fold_pool(x, kind, kernel, strides, dil, begin, end, ceil, bool(attrs.get("count_include_pad", 0)))
        assert_same_bits(got, want)


def assert_same_bits(got, want):
    """``got`` is ``want`` bit for bit (signed zeros included), NaN where it is NaN (of any
    sign: numpy's in-place and fresh loops may order a NaN + NaN's operands differently)."""
    assert got.shape == want.shape and got.dtype == want.dtype
    nan = np.isnan(want) if want.dtype.kind == "f" else np.zeros(want.shape, dtype=bool)
    np.testing.assert_array_equal(np.isnan(got) if got.dtype.kind == "f" else nan, nan)
    assert got[~nan].tobytes() == want[~nan].tobytes()


@pytest.mark.parametrize("dtype", [np.float16, np.int8, np.uint8])
def test_max_pool_narrow_types_bit_identical(dtype):
    x_shape, attrs = BLOCKED_POOLS[len(POOLS)]
    s = session("MaxPool", {"x": np.zeros(x_shape, dtype=dtype)}, attrs)
    kernel, strides, dil, begin, end, ceil = _pool_geometry(x_shape, attrs)
    x = RNG.integers(0, 100, size=x_shape).astype(dtype) if dtype != np.float16 else special_values(x_shape, dtype)
    got = s.run(None, {"x": x})[0]
    assert_same_bits(got, fold_pool(x, "max", kernel, strides, dil, begin, end, ceil))


def test_blocked_max_pool_two_threads(monkeypatch):
    from onnxkit_cpu.overrides import pool_windows
    monkeypatch.setattr(pool_windows, "BLOCK_BYTES", 1000)
    x_shape, attrs = BLOCKED_POOLS[len(POOLS)]
    s = session("MaxPool", {"x": randn(*x_shape)}, attrs)
    feeds = [randn(*x_shape) for _ in range(2)]
    kernel, strides, dil, begin, end, ceil = _pool_geometry(x_shape, attrs)
    two_threads(s, feeds, [fold_pool(x, "max", kernel, strides, dil, begin, end, ceil) for x in feeds], 200)


@pytest.mark.parametrize("k", [1, 3])
def test_conv_weights_built_by_folded_nodes_are_prepared_once(k, monkeypatch):
    # W = ConstantOfShape-like arithmetic on initializers (Mul of two constants) is folded at
    # planning; the folded array is read-only, so the kernel keeps its product layout of W
    # (with B) across runs instead of building it again every call
    from onnxkit_cpu.overrides import conv as conv_mod

    w0, b = randn(8, 4, k, k), randn(8)
    two = np.full((1,), 2.0, np.float32)
    nodes = [helper.make_node("Mul", ["w0", "two"], ["w"]), helper.make_node("Conv", ["x", "w", "b"], ["y"])]
    inits = [helper.make_tensor(n, TensorProto.FLOAT, v.shape, v.reshape(-1).tolist())
             for n, v in (("w0", w0), ("two", two), ("b", b))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 9, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    made = []
    for cls, name in ((conv_mod.Planes, "_prepared"), (conv_mod.Prepared, "weights")):
        real = getattr(cls, name)
        monkeypatch.setattr(cls, name, lambda self, *a, _real=real: made.append(1) or _real(self, *a))
    s = InferenceSession(model.SerializeToString())
    x = randn(1, 4, 9, 9)
    for _ in range(4):
        close(s.run(None, {"x": x})[0], ref_conv(x, w0 * 2, b, [1, 1], [1, 1], [0, 0], [0, 0], 1))
    assert len(made) == 1


def test_shared_columns_one_buffer_per_thread():
    from onnxkit_cpu.overrides.conv_depthwise import SHARED_BYTES, Shared

    a = Shared((3, 5), np.float32, lambda c: c, threading.local())
    b = Shared((7,), np.float64, lambda c: c, threading.local())
    big = Shared((SHARED_BYTES // 4 + 1,), np.float32, lambda c: c, threading.local())
    va, vb = a.get(), b.get()
    assert va.shape == (3, 5) and va.dtype == np.float32 and vb.shape == (7,) and vb.dtype == np.float64
    assert np.shares_memory(va, vb)                     # one buffer for every user on the thread
    assert a.get() is va                                # views kept while the buffer is the same
    assert not np.shares_memory(big.get(), va) and not np.shares_memory(big.get(), big.get())
    other = []
    t = threading.Thread(target=lambda: other.append(a.get()))
    t.start()
    t.join()
    assert not np.shares_memory(other[0], va)           # each thread its own


@pytest.mark.usefixtures("warm_bodies")
@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 4, 17, 9), (6, 4, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 1])),
    ((2, 4, 15, 8), (6, 2, 3, 2), dict(pads=[0, 1, 2, 0], strides=[1, 2], group=2)),
    ((1, 3, 9, 6, 5), (4, 3, 2, 3, 2), dict(pads=[1, 0, 1, 0, 1, 0], strides=[2, 1, 1])),
    ((1, 3, 40), (5, 3, 5), dict(pads=[2, 2], strides=[3])),
])
def test_conv_columns_over_the_shared_buffer_in_blocks_of_rows(x_shape, w_shape, attrs, monkeypatch):
    # both bodies make the columns a block of output rows at a time once they would exceed the
    # thread's shared buffer (a budget of a few hundred bytes here): the reference's values
    from onnxkit_cpu.overrides import conv as conv_mod, conv_blocks

    monkeypatch.setattr(conv_blocks, "SHARED_BYTES", 512)      # the blocks' budget (block_rows)
    blocked = []
    real = conv_mod.Prepared._blocked_columns
    monkeypatch.setattr(conv_mod.Prepared, "_blocked_columns", lambda self, *a: blocked.append(1) or real(self, *a))
    x, w, b = randn(*x_shape), randn(*w_shape), randn(w_shape[0])
    s = session("Conv", {"x": x, "w": w, "b": b}, attrs, constants=("w", "b"))
    strides, dil, begin, end = _pads_of(x_shape, w_shape, attrs)
    for _ in range(2):
        close(s.run(None, {"x": x})[0], ref_conv(x, w, b, strides, dil, begin, end, attrs.get("group", 1)))
    compiled_two_axes = compiled.enabled() and len(x_shape) == 4
    assert bool(blocked) == (not compiled_two_axes)       # the numpy body's blocks (the loop's: test_compiled_conv)
