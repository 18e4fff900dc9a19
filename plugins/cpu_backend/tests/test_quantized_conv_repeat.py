"""QLinearConv's and QLinearMatMul's cpu overrides run after run (overrides/quantized_conv.py,
overrides/quantization.py: bound by the run loop where every input but X is a constant of the
plan, a body kept per X shape and dtype, _plans.bodies_by_layout; read at each call otherwise),
and the VNNI product's two loop orders and kept scratch arrays (compiled/quantized_vnni_impl.py
``gemm``, compiled/quantized_vnni.py ``scratch``).

Each session runs several X of one shape, then of another, then the first again; every output
is compared with the portable kernel's session (bit for bit), onnxruntime's (within one step:
it requantizes in float32) and, for the products, an int64 product written here.  Near misses:
an X scale, a zero point or B fed (never kept), a new X shape, int8 X, per-channel and
per-tensor weights, nonzero zero points, groups, padding, strides, dilations, depthwise.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402

from quantized_harness import build, identical, portable_kernels, within_one_step  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu.compiled import quantized_vnni as vnni  # noqa: E402
from onnxkit_cpu.overrides import quantized_conv as fast_module  # noqa: E402

RNG = np.random.default_rng(4417)


@pytest.fixture(params=["vnni", "float32"])
def product_path(request, monkeypatch):
    """Each test twice: with the VNNI products where the host has them, and with them off."""
    if request.param == "float32":
        monkeypatch.setattr(vnni, "ENABLED", False)
    elif vnni.get() is None:
        pytest.skip("no AVX-512 VNNI here: the float32 products run (the float32 case covers them)")
    return request.param


def ints(dtype, shape, lo=None, hi=None):
    info = np.iinfo(dtype)
    return RNG.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dtype)


def _any_x_shape(data: bytes) -> bytes:
    """The model with X's shape left out (the sessions take X of any rank and extents)."""
    import onnx

    m = onnx.load_from_string(data)
    m.graph.input[0].type.tensor_type.ClearField("shape")
    return m.SerializeToString()


def _bound(session) -> bool:
    """Whether the run loop's layout calls a function the node's kernel bound to its constants
    (binds_constants) rather than the kernel's own function (one-node sessions)."""
    plan = session.plan
    (laid,) = plan._layout(0, plan.constants, plan.steps).laid_steps()
    return laid.call is not laid.step.fn


def _onnxruntime(data):
    import onnxruntime

    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxruntime.InferenceSession(data, so, providers=["CPUExecutionProvider"])


CASES = [
    # (x channels, spatial, w shape, attributes, x type, w type, per channel)
    (16, (9, 8), (24, 16, 3, 3), {"pads": [1, 1, 1, 1]}, np.uint8, np.int8, True),
    (16, (9, 8), (24, 16, 3, 3), {"pads": [1, 0, 2, 1], "strides": [2, 1]}, np.uint8, np.int8, False),
    (8, (10, 10), (16, 4, 3, 3), {"group": 2, "dilations": [2, 2], "pads": [2, 2, 2, 2]}, np.int8, np.int8, True),
    (12, (7, 7), (32, 12, 1, 1), {}, np.uint8, np.uint8, False),
    (6, (14, 15), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}, np.uint8, np.int8, True),
    (5, (9, 30), (5, 1, 3, 3), {"group": 5, "strides": [2, 2], "pads": [1, 1, 1, 1]}, np.int8, np.int8, False),
]


def _inputs(xc, w_shape, x_type, w_type, per_channel):
    m = w_shape[0]
    w = ints(w_type, w_shape, -60 if w_type == np.int8 else 70, 60 if w_type == np.int8 else 190)
    w_zp = ints(w_type, (m,), -3 if w_type == np.int8 else 120, 3 if w_type == np.int8 else 130) if per_channel \
        else np.array(2 if w_type == np.int8 else 128, w_type)
    w_scale = RNG.uniform(0.002, 0.02, (m,) if per_channel else ()).astype(np.float32)
    x_zp = np.array(-7 if x_type == np.int8 else 131, x_type)
    y_zp = np.array(5 if x_type == np.int8 else 120, x_type)
    b = RNG.integers(-4000, 4000, m).astype(np.int32)
    return [None, np.float32(0.03), x_zp, w, np.asarray(w_scale), w_zp, np.float32(0.4), y_zp, b]


@pytest.mark.usefixtures("warm_bodies", "product_path")
@pytest.mark.parametrize("case", CASES)
def test_runs_of_constant_weights_are_the_portable_kernels(case, monkeypatch):
    """X changes run after run, then its shape, then back: each output is the portable kernel's
    bit for bit and onnxruntime's within one step; the checks and geometry run once per shape
    met anew (the body kept for a shape serves its repeats, the first shape's after the second's)."""
    xc, spatial, w_shape, attrs, x_type, w_type, per_channel = case
    inputs = _inputs(xc, w_shape, x_type, w_type, per_channel)
    inputs[0] = ints(x_type, (1, xc) + spatial)
    tp = TP.UINT8 if x_type == np.uint8 else TP.INT8
    data, _ = build("QLinearConv", inputs, attrs, opset=13, out_types=[tp], constants=tuple(range(1, 9)))
    data = _any_x_shape(data)
    decided = []
    real = fast_module.centered_w
    monkeypatch.setattr(fast_module, "centered_w", lambda *a: decided.append(1) or real(*a))
    fast = InferenceSession(data, validate=False)
    with portable_kernels("QLinearConv"):
        ref = InferenceSession(data, validate=False)
    theirs = _onnxruntime(data)
    # the larger X first: a body kept for it must not serve the smaller one
    shapes = [(2, xc) + tuple(s + 3 for s in spatial)] * 3 + [(1, xc) + spatial] * 2 + [(2, xc) + tuple(
        s + 3 for s in spatial)]
    seen, counts = set(), []
    for shape in shapes:
        x = ints(x_type, shape)
        got = fast.run(None, {"x0": x})[0]
        identical(got, ref.run(None, {"x0": x})[0])
        within_one_step(got, theirs.run(None, {"x0": x})[0])
        seen.add(len(np.unique(got)))
        counts.append(len(decided))
    assert max(seen) > 10
    assert _bound(fast)
    # decided where a plan's layout meets a shape first (the shape specializer may lay out a plan
    # of its own on a shape's second run): a shape's third run, and the first shape met again, not
    assert counts[2] == counts[1] and counts[5] == counts[4] and 2 <= counts[5] <= 4


@pytest.mark.usefixtures("warm_bodies", "product_path")
@pytest.mark.parametrize("fed", [1, 2, 8])
def test_a_fed_input_is_read_at_each_call(fed, monkeypatch):
    """X's scale, X's zero point or B a graph input, changed between runs (a new array, then the
    same array written in place): each output follows it (nothing decided from it is kept)."""
    inputs = _inputs(16, (24, 16, 3, 3), np.uint8, np.int8, True)
    inputs[0] = ints(np.uint8, (1, 16, 8, 8))
    constants = tuple(i for i in range(1, 9) if i != fed)
    data, _ = build("QLinearConv", inputs, {"pads": [1, 1, 1, 1]}, opset=13, out_types=[TP.UINT8],
                    constants=constants)
    fast = InferenceSession(data, validate=False)
    with portable_kernels("QLinearConv"):
        ref = InferenceSession(data, validate=False)
    value = np.array(inputs[fed])
    outs = []
    for step in range(4):
        if step == 1:
            value = value.copy()
            value[...] = value + (np.float32(0.01) if value.dtype == np.float32 else 9)
        elif step == 3:
            value[...] = value - (np.float32(0.005) if value.dtype == np.float32 else 4)     # written in place
        feed = {"x0": inputs[0], f"x{fed}": value}
        got = fast.run(None, feed)[0]
        identical(got, ref.run(None, feed)[0])
        outs.append(got)
    assert not np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[2], outs[3])
    assert not _bound(fast)
    assert not _bound(fast)


@pytest.mark.parametrize("shape", [(10, 1000, 70), (700, 1000, 40), (7, 300, 33)])
def test_both_loop_orders_give_the_exact_product(shape):
    """Rows operands under and over ROWS_IN_CACHE bytes (the panels outermost, the K blocks
    outermost), K over one block: the int64 product, zero points at the ends."""
    impl = vnni.get()
    if impl is None:
        pytest.skip("no AVX-512 VNNI here")
    p, k, n = shape
    assert (p * ((k + 3) // 4 * 4) > impl.ROWS_IN_CACHE) == (p == 700)
    for a_type, w_type in ((np.uint8, np.int8), (np.int8, np.uint8)):
        a, w = ints(a_type, (p, k)), ints(w_type, (k, n))
        a_zp = int(np.iinfo(a_type).max)
        w_zp = ints(w_type, (n,))
        got = vnni.product(impl, a, a_zp, vnni.PackedW(impl, w, w_zp))
        want = (a.astype(np.int64) - a_zp) @ (w.astype(np.int64) - w_zp.astype(np.int64))
        assert np.array_equal(got, want)


def test_kept_scratch_arrays_follow_their_buffer():
    """A scratch array handed out again is the same array while its name's buffer stands; once a
    larger request replaced the buffer, the earlier shape is carved from the new one."""
    name = f"test-kept-{RNG.integers(1 << 62)}"      # a buffer of its own
    small = vnni.scratch(name, (64,), np.int32)
    assert vnni.scratch(name, (64,), np.int32) is small
    large = vnni.scratch(name, (1 << 16,), np.int64)
    again = vnni.scratch(name, (64,), np.int32)
    assert again.shape == (64,) and again.dtype == np.int32
    assert np.shares_memory(again, large) and not np.shares_memory(again, small)


@pytest.mark.usefixtures("warm_bodies", "product_path")
@pytest.mark.parametrize("a_type,b_type,per_column", [(np.uint8, np.int8, True), (np.uint8, np.int8, False),
                                                      (np.int8, np.int8, True), (np.uint8, np.uint8, False)])
def test_qlinear_matmul_runs_of_a_constant_b(a_type, b_type, per_column, monkeypatch):
    """QLinearMatMul with every input but A a constant: A changes run after run, then its shape,
    then back; each output the portable kernel's bit for bit, onnxruntime's within one step."""
    from onnxkit_cpu.overrides import quantization as q_module

    k, n = 48, 40
    b = ints(b_type, (k, n))
    b_zp = ints(b_type, (n,)) if per_column else np.array(3 if b_type == np.int8 else 130, b_type)
    b_scale = RNG.uniform(0.002, 0.02, (n,) if per_column else ()).astype(np.float32)
    if per_column and b_type == np.int8:
        b_zp = np.zeros(n, b_type)          # onnxruntime's int8 B: symmetric per column
    tp = TP.UINT8 if a_type == np.uint8 else TP.INT8
    inputs = [ints(a_type, (5, k)), np.float32(0.03), np.array(-4 if a_type == np.int8 else 125, a_type), b,
              np.asarray(b_scale), b_zp, np.float32(0.6), np.array(2 if a_type == np.int8 else 128, a_type)]
    data, _ = build("QLinearMatMul", inputs, {}, opset=21, out_types=[tp], constants=tuple(range(1, 8)))
    data = _any_x_shape(data)
    made = []
    real = q_module.centered_b
    monkeypatch.setattr(q_module, "centered_b", lambda *a: made.append(1) or real(*a))
    fast = InferenceSession(data, validate=False)
    with portable_kernels("QLinearMatMul"):
        ref = InferenceSession(data, validate=False)
    theirs = _onnxruntime(data)
    counts = []
    for shape in [(2, 7, k)] * 3 + [(5, k)] * 2 + [(2, 7, k)]:
        a = ints(a_type, shape)
        got = fast.run(None, {"x0": a})[0]
        identical(got, ref.run(None, {"x0": a})[0])
        within_one_step(got, theirs.run(None, {"x0": a})[0])
        assert len(np.unique(got)) > 10
        counts.append(len(made))
    assert _bound(fast)
    if vnni.get() is not None:      # decided per layout and shape met first (as for QLinearConv above)
        assert counts[2] == counts[1] and counts[5] == counts[4] and 2 <= counts[5] <= 4
    with pytest.raises(Exception) as wrong_k:       # an A of another K after a kept body: the portable error
        fast.run(None, {"x0": ints(a_type, (2, 7, k + 4))})
    with pytest.raises(type(wrong_k.value)):
        ref.run(None, {"x0": ints(a_type, (2, 7, k + 4))})


@pytest.mark.usefixtures("warm_bodies", "product_path")
def test_qlinear_matmul_fed_scale_is_read_at_each_call():
    """A's scale a graph input, changed between runs (a new array, then written in place): each
    output follows it."""
    k, n = 32, 24
    inputs = [ints(np.uint8, (6, k)), np.float32(0.03), np.array(125, np.uint8), ints(np.int8, (k, n)),
              np.float32(0.01), np.array(0, np.int8), np.float32(0.6), np.array(128, np.uint8)]
    data, _ = build("QLinearMatMul", inputs, {}, opset=21, out_types=[TP.UINT8], constants=(2, 3, 4, 5, 6, 7))
    fast = InferenceSession(data, validate=False)
    with portable_kernels("QLinearMatMul"):
        ref = InferenceSession(data, validate=False)
    scale = np.array(np.float32(0.03))
    outs = []
    for step in range(4):
        if step == 1:
            scale = np.array(np.float32(0.05))
        elif step == 3:
            scale[...] = np.float32(0.02)           # written in place
        feed = {"x0": inputs[0], "x1": scale}
        got = fast.run(None, feed)[0]
        identical(got, ref.run(None, feed)[0])
        outs.append(got)
    assert not np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[2], outs[3])
    assert not _bound(fast)


def test_bodies_by_layout_keep_one_body_per_shape_and_dtype():
    """_plans.bodies_by_layout: a body decided once per X shape and dtype (an X of the same shape
    but another dtype is decided anew), the inputs handed to ``decide`` and ``other`` as given,
    and nothing kept where ``decide`` returns None (``other`` serves each such call)."""
    from onnxkit_cpu.overrides._plans import bodies_by_layout

    decided, refused = [], []

    def decide(x, *others):
        decided.append((x.shape, x.dtype, others))
        if x.dtype == np.int16:
            return None
        decided_for = (x.shape, x.dtype.name)        # a body is of the layout it was decided for
        return lambda x: ("body",) + decided_for

    def other(x, *others):
        refused.append(others)
        return "other"

    scale, zp = np.float32(0.5), np.uint8(3)
    bound = bodies_by_layout(decide, other)(scale, zp)
    a8, b8 = np.zeros((2, 3), np.uint8), np.zeros((2, 3), np.int8)
    assert bound(a8, scale, zp) == ("body", (2, 3), "uint8")
    assert bound(a8 + 1, scale, zp) == ("body", (2, 3), "uint8")
    assert bound(b8, scale, zp) == ("body", (2, 3), "int8")
    assert bound(np.zeros((3, 2), np.uint8), scale, zp) == ("body", (3, 2), "uint8")
    assert bound(a8, scale, zp) == ("body", (2, 3), "uint8")
    assert [d[:2] for d in decided] == [((2, 3), np.uint8), ((2, 3), np.int8), ((3, 2), np.uint8)]
    assert all(d[2][0] is scale and d[2][1] is zp for d in decided)
    c16 = np.zeros((2, 3), np.int16)
    assert bound(c16, scale, zp) == "other" and bound(c16, scale, zp) == "other"
    assert len(decided) == 5 and len(refused) == 2 and refused[0][0] is scale
