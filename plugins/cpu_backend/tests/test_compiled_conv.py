"""The compiled path of Conv (onnxkit_cpu.compiled.conv.planes through overrides/conv.py).

Every case runs a one-node model three ways: planned with the compiled loop (the test counts
the loop's calls, so it fails if the fast path silently stops being taken), planned under
``compiled.disabled()`` (the numpy body), and an independent float64 reference written here
(the padded input sliced per kernel offset, an einsum per group).  The compiled path sums in
another order than BLAS (see the module docstrings): results agree to float rounding.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import conv as loops, conv_channels as channel_loops  # noqa: E402

# numba missing or ONNXKIT_CPU_COMPILED=0: nothing to test here (test_compiled.py fails then)
pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies")]  # the compiled loops, from the first run

RNG = np.random.default_rng(1415)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


class _Calls:
    """The calls of several counted loops together."""

    def __init__(self, spies):
        self.spies = spies

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.spies)


@pytest.fixture
def counter(count_calls):
    """The compiled path's calls: the planes loop and the channel-block loops it takes on small
    maps of many channels (onnxkit_cpu.compiled.conv_channels, test_conv_channel_blocks.py)."""
    return _Calls([count_calls(loops, "planes")] + [count_calls(channel_loops, n) for n in channel_loops.LOOPS.values()])


def session(x, w, b, attrs, constants=("w", "b")):
    """A one-node Conv model; W and B initializers (read-only) where named in ``constants``."""
    arrays = {"x": x, "w": w, "b": b}
    given = [n for n in arrays if arrays[n] is not None]
    inits = [numpy_helper.from_array(arrays[n], n) for n in given if n in constants]
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), [None] * v.ndim)
              for n, v in arrays.items() if v is not None and n not in constants]
    y = helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(x.dtype), None)
    graph = helper.make_graph([helper.make_node("Conv", given, ["y"], **attrs)], "g", inputs, [y], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return InferenceSession(model.SerializeToString(), validate=False)


def feed_of(x, w, b, constants=("w", "b")):
    feed = {"x": x}
    for name, v in (("w", w), ("b", b)):
        if v is not None and name not in constants:
            feed[name] = v
    return feed


def reference(x, w, b, attrs):
    """float64 Conv: the padded input (negative pads crop) sliced per kernel offset."""
    nd = x.ndim - 2
    strides = attrs.get("strides", [1] * nd)
    dil = attrs.get("dilations", [1] * nd)
    pads = attrs.get("pads", [0] * 2 * nd)
    group = attrs.get("group", 1)
    xp = x.astype(np.float64)
    for i in range(nd):
        lo, hi = pads[i], pads[nd + i]
        xp = xp[(slice(None),) * (2 + i) + (slice(max(0, -lo), xp.shape[2 + i] - max(0, -hi)),)]
        widths = [(0, 0)] * xp.ndim
        widths[2 + i] = (max(0, lo), max(0, hi))
        xp = np.pad(xp, widths)
    m, cg, *k = w.shape
    out = [(xp.shape[2 + i] - (k[i] - 1) * dil[i] - 1) // strides[i] + 1 for i in range(nd)]
    y = np.zeros((x.shape[0], m, *out))
    mg, w64 = m // group, w.astype(np.float64)
    for off in np.ndindex(*k):
        win = xp[(slice(None), slice(None)) + tuple(
            slice(o * d, o * d + (n - 1) * s + 1, s) for o, d, n, s in zip(off, dil, out, strides))]
        for g in range(group):
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", win[:, g * cg:(g + 1) * cg],
                                                    w64[(slice(g * mg, (g + 1) * mg), slice(None)) + off])
    if b is not None:
        y += b.astype(np.float64).reshape((1, m) + (1,) * nd)
    return y


def check(x, w, b, attrs, counter, constants=("w", "b"), runs=2):
    """Compiled vs numpy body vs reference; the compiled loop called once per run."""
    fast = session(x, w, b, attrs, constants)
    with compiled.disabled():
        slow = session(x, w, b, attrs, constants)
    before = counter.calls
    for _ in range(runs):
        got = fast.run(None, feed_of(x, w, b, constants))[0]
    assert counter.calls - before == runs, "the compiled loop was not used"
    body = slow.run(None, feed_of(x, w, b, constants))[0]
    assert counter.calls - before == runs          # the numpy body does not call it
    assert got.dtype == x.dtype and got.shape == body.shape and got.flags.c_contiguous
    tol = 1e-12 if x.dtype == np.float64 else 2e-5
    want = reference(x, w, b, attrs)
    scale = max(1.0, float(np.nanmax(np.abs(np.where(np.isinf(want), 0, want)))))
    np.testing.assert_allclose(got, body, rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * scale)
    return got


CORPUS = [
    # rapidocr_rec_v4's depthwise convolutions, and the numbers the corpus feeds them
    ((1, 240, 12, 40), (240, 1, 5, 5), dict(pads=[2, 2, 2, 2], group=240)),
    ((1, 480, 6, 40), (480, 1, 5, 5), dict(pads=[2, 2, 2, 2], strides=[2, 1], group=480)),
    ((1, 64, 24, 80), (64, 1, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 1], group=64)),
    ((1, 128, 12, 80), (128, 1, 3, 3), dict(pads=[1, 1, 1, 1], strides=[1, 2], group=128)),
    ((1, 112, 28, 28), (112, 1, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2], group=112)),   # shufflenet
    # small products (small_resnet_ts, rapidocr's stem)
    ((3, 3, 16, 16), (8, 3, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((3, 8, 8, 8), (16, 8, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2])),
    ((3, 16, 4, 4), (16, 16, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((1, 3, 48, 160), (16, 3, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2])),
]

EDGES = [
    ((2, 5, 6, 9), (10, 1, 5, 5), dict(pads=[2, 2, 2, 2], group=5)),                      # multiplier 2, batch 2
    ((1, 3, 9, 8), (3, 1, 3, 3), dict(pads=[0, 2, 1, 0], dilations=[2, 3], group=3)),     # dilated, asymmetric
    ((1, 3, 8, 8), (3, 1, 2, 3), dict(pads=[-1, 1, 0, -2], group=3)),                     # cropping pads
    ((1, 4, 11, 13), (4, 1, 7, 7), dict(pads=[3, 3, 3, 3], strides=[3, 2], group=4)),     # taps 5 + 1 + 1
    ((1, 4, 9, 9), (8, 1, 4, 2), dict(pads=[1, 2, 2, 1], strides=[2, 3], group=4)),       # taps 3 + 1, 1 + 1
    ((2, 6, 30), (6, 1, 3), dict(pads=[1, 1], group=6)),                                   # 1-D depthwise
    ((1, 4, 25), (8, 1, 5), dict(pads=[4, 0], strides=[3], dilations=[2], group=4)),
    ((2, 4, 7, 9), (6, 2, 3, 3), dict(pads=[1, 1, 1, 1], group=2)),                        # grouped product
    ((2, 3, 9, 7), (4, 3, 3, 2), dict(pads=[2, 0, 1, 3], strides=[2, 1], dilations=[1, 2])),
    ((1, 4, 8, 8), (5, 4, 3, 3), dict(pads=[-1, 0, 1, -1])),
    ((1, 2, 5, 5), (3, 2, 2, 2), dict()),                                                  # no pads
    ((1, 2, 3, 1), (2, 1, 2, 2), dict(pads=[1, -1, 0, 2], group=2)),                      # columns all cropped
    ((1, 2, 3, 1), (4, 2, 2, 2), dict(pads=[1, -1, 0, 2])),
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape,w_shape,attrs", CORPUS + EDGES)
def test_compiled_conv_matches_numpy_body_and_reference(x_shape, w_shape, attrs, bias, counter):
    check(randn(*x_shape), randn(*w_shape), randn(w_shape[0]) if bias else None, attrs, counter)


@pytest.mark.parametrize("x_shape,w_shape,attrs", [CORPUS[0], EDGES[0], EDGES[5], CORPUS[6]])
def test_compiled_conv_float64(x_shape, w_shape, attrs, counter):
    f = np.float64
    check(randn(*x_shape, dtype=f), randn(*w_shape, dtype=f), randn(w_shape[0], dtype=f), attrs, counter)


@pytest.mark.parametrize("x_shape,w_shape,attrs", [CORPUS[1], EDGES[3], CORPUS[5], EDGES[7]])
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_nan_and_inf_propagate_as_in_the_numpy_body(x_shape, w_shape, attrs, counter):
    x, w, b = randn(*x_shape), randn(*w_shape), randn(w_shape[0])
    flat = x.reshape(-1)
    flat[::97] = np.nan
    flat[5::89] = np.inf
    flat[7::83] = -np.inf
    w.reshape(-1)[1] = np.inf            # multiplies the zero border too: NaN there, as the padded product
    got = check(x, w, b, attrs, counter)
    assert np.isnan(got).any() and np.isinf(got).any()


def test_non_contiguous_input(counter):
    x = np.swapaxes(randn(1, 12, 40, 40), 1, 3)[:, :, :, :12]          # (1, 40, 40, 12): not C-contiguous
    wide = np.swapaxes(randn(1, 32, 40, 40), 1, 3)[:, :, :, :32]       # rows 32 wide: the depthwise planes loop
    assert not x.flags.c_contiguous and not wide.flags.c_contiguous     # (narrower: test_conv_channel_blocks.py)
    check(wide, randn(40, 1, 5, 5), randn(40), dict(pads=[2, 2, 2, 2], group=40), counter)
    check(x, randn(6, 40, 3, 3), randn(6), dict(pads=[1, 1, 1, 1]), counter)


@pytest.mark.parametrize("x_shape,w_shape,attrs", [CORPUS[0], CORPUS[5]])
def test_runtime_weights_new_and_changed_in_place(x_shape, w_shape, attrs, counter):
    x, w, b = randn(*x_shape), randn(*w_shape), randn(w_shape[0])
    fast = session(x, w, b, attrs, constants=())
    for k in range(4):
        got = fast.run(None, {"x": x, "w": w, "b": b})[0]
        np.testing.assert_allclose(got, reference(x, w, b, attrs), rtol=2e-5, atol=2e-5 * 10)
        if k % 2:
            w, b = randn(*w_shape), randn(w_shape[0])     # new arrays
        else:
            w *= -0.5                                     # the same arrays, new contents
            b += 1.0
    assert counter.calls == 4


def test_size_zero_batch_takes_the_portable_kernel(counter):
    x, w, b = randn(1, 6, 5, 5), randn(6, 1, 3, 3), randn(6)
    s = session(x, w, b, dict(pads=[1, 1, 1, 1], group=6))
    y = s.run(None, {"x": np.zeros((0, 6, 5, 5), np.float32)})[0]
    assert y.shape == (0, 6, 5, 5) and counter.calls == 0
    assert s.run(None, {"x": x})[0].shape == (1, 6, 5, 5) and counter.calls == 1


@pytest.mark.parametrize("x,w,attrs", [
    (randn(1, 129, 3), randn(128, 129, 3), dict(pads=[1, 1])),                           # 1-D product
    (randn(1, 480, 1, 20), randn(60, 480, 1, 3), dict(pads=[0, 1, 0, 1])),               # one output row
    (randn(1, 3, 4, 5, 6), randn(3, 1, 3, 3, 3), dict(pads=[1] * 6, group=3)),          # 3-D
    (randn(1, 8, 6, 6), randn(4, 8, 1, 1), dict()),                                     # 1x1: a plain product
])
def test_shapes_the_rule_leaves_to_the_numpy_body(x, w, attrs, counter):
    """(float16 is not among them: it runs on the float32 bodies, overrides/half.py.)"""
    s = session(x, w, None, attrs)
    s.run(None, {"x": x})
    assert counter.calls == 0


def test_disabled_at_planning_keeps_the_numpy_body(counter):
    x, w = randn(1, 6, 8, 8), randn(6, 1, 3, 3)
    with compiled.disabled():
        s = session(x, w, None, dict(pads=[1] * 4, group=6))
    s.run(None, {"x": x})
    assert counter.calls == 0


def test_two_threads_on_one_session(counter):
    # each thread has its own padded plane, accumulators and columns
    cases = [((1, 24, 12, 20), (24, 1, 5, 5), dict(pads=[2] * 4, group=24)),
             ((2, 4, 8, 8), (5, 4, 3, 3), dict(pads=[1] * 4, strides=[2, 1]))]
    for x_shape, w_shape, attrs in cases:
        w, b = randn(*w_shape), randn(w_shape[0])
        s = session(randn(*x_shape), w, b, attrs)
        feeds = [randn(*x_shape) for _ in range(2)]
        want = [reference(x, w, b, attrs) for x in feeds]

        def work(k):
            for _ in range(100):
                np.testing.assert_allclose(s.run(None, {"x": feeds[k]})[0], want[k], rtol=2e-5, atol=1e-4)

        with ThreadPoolExecutor(2) as pool:
            list(pool.map(work, [0, 1]))        # re-raises a thread's failure
    assert counter.calls == 400


BLOCKED = [
    ((1, 8, 33, 20), (8, 8, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((2, 8, 30, 31), (6, 8, 3, 3), dict(pads=[1, 2, 0, 1], strides=[2, 1])),
    ((1, 8, 33, 20), (8, 4, 3, 5), dict(pads=[2, 1, 2, 2], strides=[1, 2], dilations=[2, 1], group=2)),
    ((1, 4, 20, 20), (4, 4, 3, 3), dict(pads=[-1, 0, -2, 0])),          # cropped rows at both ends
    ((1, 3, 23, 23), (5, 3, 7, 7), dict(pads=[3, 3, 3, 3], strides=[2, 2])),
]


@pytest.mark.parametrize("x_shape, w_shape, attrs", BLOCKED)
@pytest.mark.parametrize("bias", [True, False])
def test_large_products_in_blocks_of_rows(x_shape, w_shape, attrs, bias, counter, monkeypatch):
    # columns larger than the shared buffer are filled and multiplied a block of output rows at a
    # time (overrides/conv_blocks.py): one loop call per block, the one-block product's values to
    # float rounding (BLAS may order a dot product differently for a few columns) and the reference
    from onnxkit_cpu.overrides import conv as conv_mod, conv_blocks

    x, w, b = randn(*x_shape), randn(*w_shape), randn(w_shape[0]) if bias else None
    before = counter.calls
    whole = session(x, w, b, attrs).run(None, feed_of(x, w, b))[0]
    assert counter.calls - before == 1
    want = reference(x, w, b, attrs)
    monkeypatch.setattr(conv_blocks, "MIN_COLUMNS", 1)
    for budget in (4096, 1 << 14):
        monkeypatch.setattr(conv_blocks, "SHARED_BYTES", budget)
        for module in (conv_mod, conv_blocks):        # conv reads it to decide, conv_blocks to size
            monkeypatch.setattr(module, "CACHE_BYTES", budget)
        s = session(x, w, b, attrs)
        for _ in range(2):
            before = counter.calls
            got = s.run(None, feed_of(x, w, b))[0]
            assert counter.calls - before > 1            # one loop call per block of rows
            scale = max(1.0, float(np.abs(want).max()))
            np.testing.assert_allclose(got, whole, rtol=2e-5, atol=2e-6 * scale)
            np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-5, atol=2e-6 * scale)


def test_cache_blocks_rule():
    # blocks of about CACHE_BYTES of columns, MIN_COLUMNS output positions at least, SHARED_BYTES at most
    from onnxkit_cpu.overrides.conv_blocks import CACHE_BYTES, MIN_COLUMNS, SHARED_BYTES, cache_block_rows

    rows, ow = 148, 112                       # a 7x7 stem of 3 channels (B's ones row included)
    per = cache_block_rows(1, 1, rows, 112, ow, 4)
    assert per * ow * rows * 4 <= CACHE_BYTES < (per + 1) * ow * rows * 4 and per * ow >= MIN_COLUMNS
    per = cache_block_rows(1, 1, 1729, 14, 14, 4)        # 14 x 14 outputs: narrower than MIN_COLUMNS
    assert per == 14                                       # one block
    per = cache_block_rows(1, 1, 600, 56, 56, 4)         # exactly MIN_COLUMNS (7 rows) fit CACHE_BYTES
    assert per == -(-MIN_COLUMNS // 56) == 7 and 7 * 56 * 600 * 4 <= CACHE_BYTES < 8 * 56 * 600 * 4
    # a MIN_COLUMNS block larger than CACHE_BYTES: the largest balanced blocks the shared buffer takes
    per = cache_block_rows(1, 1, 2000, 56, 56, 4)        # 18 rows fit 8 MiB: 4 blocks of 14
    assert per == 14 and 18 * 56 * 2000 * 4 <= SHARED_BYTES < 19 * 56 * 2000 * 4
    assert cache_block_rows(2, 1, 1280, 508, 1, 4) == 508   # magika's 5x1 convolution: one block
    per = cache_block_rows(1, 1, 1 << 16, 64, 64, 4)     # MIN_COLUMNS would exceed the shared buffer
    assert per == max(1, SHARED_BYTES // ((1 << 16) * 64 * 4))
