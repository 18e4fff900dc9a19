"""float16 and bfloat16 products on their float32 bodies (overrides/half.py: MatMul, Gemm, Conv and the
fused Attention widen to float32, run BLAS, round once) against onnxruntime 1.32, an independent float64
numpy reference rounded once to the type, and onnxkit's unoptimized graph.

Near misses: odd shapes, broadcast batches, 1-D operands, transposes, infinities and NaN in the inputs,
and sums that overflow float16 only after accumulation (every product and partial sum of the first
terms within range): onnxruntime's result is inf there, and so is onnxkit's.  A spy counts the calls
of each override's ``narrow`` so a test fails if the half path silently stops being taken; a weight
fed as a graph input (not held by the plan) must be widened again on every run.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit_cpu.overrides import attention as attention_override  # noqa: E402
from onnxkit_cpu.overrides import conv as conv_override  # noqa: E402
from onnxkit_cpu.overrides import linalg as linalg_override  # noqa: E402

from test_compiled_attention import padding_mask  # noqa: E402
from test_compiled_attention import reference as attention_reference  # noqa: E402
from test_compiled_attention import run as attention_node  # noqa: E402

RNG = np.random.default_rng(4401)
F16, BF16 = np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
TYPE = {F16: TP.FLOAT16, BF16: TP.BFLOAT16}


@pytest.fixture
def spy(monkeypatch):
    """``spy[module name]``: calls of that override's ``narrow`` (the half path's rounding)."""
    count = {}
    for mod in (linalg_override, conv_override, attention_override):
        name = mod.__name__.rsplit(".", 1)[1]
        count[name] = 0

        def counted(y, dtype, *halves, _body=mod.narrow, _name=name):
            count[_name] += 1
            return _body(y, dtype, *halves)

        monkeypatch.setattr(mod, "narrow", counted)
    return count


def model(nodes, inputs, outputs, inits=(), opset=17):
    """Serialized model: ``inputs`` / ``outputs`` as (name, TensorProto type[, shape])."""
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, None if not s else s[0]) for n, t, *s in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs], initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()


def kit(data, feed, optimize=True):
    so = onnxkit.SessionOptions()
    if not optimize:
        so.graph_optimization_level = onnxkit.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxkit.InferenceSession(data, so).run(None, feed)[0]


def half_path_off(module, data, feed):
    """The run with ``module``'s half path off (its ``is_half`` False): the portable kernel's
    float16 body (or, for Conv, its numpy body on the narrow type), the path before overrides/half.py."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "is_half", lambda dtype: False)
        return kit(data, feed)


def peer(data, feed):
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feed)[0]


def rounded(y64, dtype):
    """The float64 reference rounded once to ``dtype`` (overflow: inf)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(y64).astype(np.float32).astype(dtype)


def assert_half_close(got, want, ulps=2):
    """Same dtype and shape; the same infinities and NaN; finite values within ``ulps`` of the
    type's spacing at ``want`` (float32 accumulation then one rounding, against float64 or
    onnxruntime's own accumulation order)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w))
    assert np.array_equal(g[np.isinf(w)], w[np.isinf(w)]) and np.array_equal(np.isinf(g), np.isinf(w))
    fin = np.isfinite(w)
    spacing = np.minimum(np.abs(np.spacing(want.astype(np.float32)[fin].astype(want.dtype)).astype(np.float64)), 32.0) \
        if want.dtype == F16 else np.abs(w[fin]) * 2.0 ** -7 + 1e-38      # (65504's spacing is inf: 32 below)
    assert np.all(np.abs(g[fin] - w[fin]) <= ulps * spacing + 1e-6), float(np.abs(g[fin] - w[fin]).max())


def half(shape, t=F16, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32).astype(t)


# ------------------------------------------------------------------------------- MatMul

MATMUL = {      # A shape, B shape
    "odd": ((7, 13), (13, 5)),
    "batch-broadcast": ((3, 1, 9, 17), (4, 17, 6)),
    "vector-left": ((17,), (2, 17, 3)),
    "vector-right": ((2, 5, 17), (17,)),
}


@pytest.mark.parametrize("case", list(MATMUL))
@pytest.mark.parametrize("weight", ["initializer", "input"])
def test_matmul_float16_matches_onnxruntime_and_reference(spy, case, weight):
    sa, sb = MATMUL[case]
    a, b = half(sa), half(sb)
    inits = [numpy_helper.from_array(b, "b")] if weight == "initializer" else []
    inputs = [("a", TP.FLOAT16)] + ([("b", TP.FLOAT16)] if weight == "input" else [])
    data = model([helper.make_node("MatMul", ["a", "b"], ["y"])], inputs, [("y", TP.FLOAT16)], inits)
    feed = {"a": a} | ({"b": b} if weight == "input" else {})
    got = kit(data, feed)
    assert spy["linalg"] >= 1
    assert_half_close(got, rounded(np.matmul(a.astype(np.float64), b.astype(np.float64)), F16), ulps=1)
    assert_half_close(got, peer(data, feed))
    assert_half_close(got, kit(data, feed, optimize=False))
    assert np.array_equal(got, half_path_off(linalg_override, data, feed))    # both: float32 BLAS, rounded once


def test_matmul_float16_overflow_after_accumulation_is_inf_as_onnxruntime():
    """Each product 40000 * 1 and each of the first partial sums is a float16; the sum is not."""
    a = np.array([[40000.0, 40000.0, 1.0], [-40000.0, -40000.0, 0.0], [60000.0, -60000.0, 2.0]], F16)
    b = np.ones((3, 2), F16)
    data = model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", TP.FLOAT16), ("b", TP.FLOAT16)],
                 [("y", TP.FLOAT16)])
    feed = {"a": a, "b": b}
    got, want = kit(data, feed), peer(data, feed)
    assert np.isposinf(got[0]).all() and np.isneginf(got[1]).all() and (got[2] == 2.0).all()
    assert_half_close(got, want, ulps=0)


def test_matmul_float16_infinities_and_nan_as_onnxruntime():
    a = half((4, 6))
    a[0, 1], a[1, 2], a[2, 3] = np.inf, -np.inf, np.nan
    b = half((6, 3))
    b[2, 0] = 0.0                              # -inf * 0: NaN
    data = model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", TP.FLOAT16), ("b", TP.FLOAT16)],
                 [("y", TP.FLOAT16)])
    feed = {"a": a, "b": b}
    got = kit(data, feed)
    assert np.isnan(got[1, 0]) and np.isnan(got[2]).all()
    assert_half_close(got, peer(data, feed))


def test_fed_weight_is_widened_again_each_run():
    """B as a graph input: a second run with other values must see them (nothing kept)."""
    data = model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", TP.FLOAT16), ("b", TP.FLOAT16)],
                 [("y", TP.FLOAT16)])
    s = onnxkit.InferenceSession(data)
    a, b = half((5, 8)), half((8, 4))
    b_first = b.copy()
    first = s.run(None, {"a": a, "b": b})[0]
    b[...] = half((8, 4))                          # the same object, new values
    second = s.run(None, {"a": a, "b": b})[0]
    assert_half_close(first, rounded(a.astype(np.float64) @ b_first.astype(np.float64), F16), ulps=1)
    assert_half_close(second, rounded(a.astype(np.float64) @ b.astype(np.float64), F16), ulps=1)


def test_matmul_bfloat16_matches_reference(spy):
    """bfloat16 (onnxruntime 1.32's CPU provider has no bfloat16 MatMul): the float64 reference."""
    a, b = half((3, 7, 19), BF16), half((19, 6), BF16)
    data = model([helper.make_node("MatMul", ["a", "b"], ["y"])], [("a", TP.BFLOAT16)], [("y", TP.BFLOAT16)],
                 [helper.make_tensor("b", TP.BFLOAT16, b.shape, b.astype(np.float32).reshape(-1).tolist())])
    got = kit(data, {"a": a})
    assert spy["linalg"] >= 1
    assert_half_close(got, rounded(a.astype(np.float64) @ b.astype(np.float64), BF16), ulps=1)
    assert_half_close(got, kit(data, {"a": a}, optimize=False), ulps=1)


# --------------------------------------------------------------------------------- Gemm

@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c_shape", [None, (5,), (3, 1), (3, 5)])
def test_gemm_float16_matches_onnxruntime_and_reference(spy, trans_a, trans_b, c_shape):
    m, k, n = 3, 11, 5
    a = half((k, m) if trans_a else (m, k))
    b = half((n, k) if trans_b else (k, n))
    alpha, beta = 0.5, 2.0
    inits = [numpy_helper.from_array(b, "b")] + ([numpy_helper.from_array(half(c_shape), "c")] if c_shape else [])
    node = helper.make_node("Gemm", ["a", "b"] + (["c"] if c_shape else []), ["y"], alpha=alpha, beta=beta,
                            transA=trans_a, transB=trans_b)
    data = model([node], [("a", TP.FLOAT16)], [("y", TP.FLOAT16)], inits)
    got = kit(data, {"a": a})
    assert spy["linalg"] >= 1
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    y = alpha * ((a64.T if trans_a else a64) @ (b64.T if trans_b else b64))
    if c_shape:
        y = y + beta * numpy_helper.to_array(inits[1]).astype(np.float64)
    assert_half_close(got, rounded(y, F16), ulps=1)
    assert_half_close(got, peer(data, {"a": a}))
    assert_half_close(got, half_path_off(linalg_override, data, {"a": a}), ulps=1)


# --------------------------------------------------------------------------------- Conv

def naive_conv(x, w, b, pads, strides):
    """2-D convolution, one group, by its definition in float64 (loops over the kernel)."""
    x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    oh, ow = (h - kh) // strides[0] + 1, (wd - kw) // strides[1] + 1
    y = np.zeros((n, m, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + strides[0] * oh:strides[0], j:j + strides[1] * ow:strides[1]]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j].astype(np.float64))
    return y if b is None else y + b.astype(np.float64).reshape(1, -1, 1, 1)


@pytest.mark.parametrize("case", [
    dict(x=(1, 3, 9, 7), w=(5, 3, 3, 3), pads=(1, 1, 1, 1), strides=(1, 1), bias=True),
    dict(x=(2, 4, 8, 8), w=(6, 4, 3, 3), pads=(0, 1, 1, 0), strides=(2, 2), bias=False),
    dict(x=(1, 8, 5, 5), w=(3, 8, 1, 1), pads=(0, 0, 0, 0), strides=(1, 1), bias=True),
])
@pytest.mark.parametrize("relu", [False, True])
def test_conv_float16_matches_onnxruntime_unoptimized_and_reference(spy, case, relu):
    x, w = half(case["x"]), half(case["w"], scale=0.3)
    b = half(case["w"][:1]) if case["bias"] else None
    inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(b, "b")] if b is not None else [])
    nodes = [helper.make_node("Conv", ["x", "w"] + (["b"] if b is not None else []), ["c" if relu else "y"],
                              pads=list(case["pads"]), strides=list(case["strides"]))]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    data = model(nodes, [("x", TP.FLOAT16)], [("y", TP.FLOAT16)], inits)
    got = kit(data, {"x": x})
    assert spy["conv"] >= 1
    want = naive_conv(x, w, b, case["pads"], case["strides"])
    if relu:
        want = np.maximum(want, 0)
    assert_half_close(got, rounded(want, F16), ulps=1)
    assert_half_close(got, peer(data, {"x": x}))
    assert_half_close(got, kit(data, {"x": x}, optimize=False), ulps=1)
    assert_half_close(got, half_path_off(conv_override, data, {"x": x}), ulps=1)


def test_conv_float16_overflow_is_inf_as_onnxruntime():
    x = np.full((1, 2, 3, 3), 300.0, F16)
    w = np.full((1, 2, 3, 3), 30.0, F16)        # 18 products of 9000: 162000, beyond 65504
    data = model([helper.make_node("Conv", ["x", "w"], ["y"])], [("x", TP.FLOAT16)], [("y", TP.FLOAT16)],
                 [numpy_helper.from_array(w, "w")])
    got = kit(data, {"x": x})
    assert np.isposinf(got).all()
    assert_half_close(got, peer(data, {"x": x}), ulps=0)


# ---------------------------------------------------------------------------- Attention

def unfused_attention(t=TP.FLOAT16):
    """softmax(Q K^T * c) V as the exporters write it (onnxkit's optimizer fuses it into Attention)."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "c"], ["ss"]),
             helper.make_node("Softmax", ["ss"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    return nodes


@pytest.mark.parametrize("shape", [(1, 2, 5, 8, 5), (2, 3, 33, 16, 17), (1, 1, 70, 8, 70)])
def test_fused_attention_float16_matches_onnxruntime_and_unoptimized(spy, shape):
    b, h, s, d, kv = shape
    q, k, v = half((b, h, s, d)), half((b, h, kv, d)), half((b, h, kv, d))
    c = numpy_helper.from_array(np.array(1 / math.sqrt(d), F16), "c")
    data = model(unfused_attention(), [("q", TP.FLOAT16, q.shape), ("k", TP.FLOAT16, k.shape), ("v", TP.FLOAT16, v.shape)],
                 [("y", TP.FLOAT16)], [c])
    feed = {"q": q, "k": k, "v": v}
    got = kit(data, feed)
    assert spy["attention"] == 1                   # fused, and the half path taken
    want = attention_reference(q, k, v, scale=float(np.float16(1 / math.sqrt(d))), guard=0)
    assert_half_close(got, want, ulps=2)
    assert_half_close(got, peer(data, feed), ulps=4)          # onnxruntime rounds the scores and probabilities
    # the unfused graph rounds the scores and the probabilities to float16 node by node (4 roundings)
    unfused = kit(data, feed, optimize=False)
    assert unfused.dtype == F16
    np.testing.assert_allclose(got.astype(np.float32), unfused.astype(np.float32), rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("t", [F16, BF16])
def test_attention_node_half_with_padding_mask_matches_reference(spy, t):
    """A -inf padding mask of the inputs' type (the fused node's kernel itself, fed directly)."""
    q, k, v = half((2, 2, 9, 8), t), half((2, 2, 9, 8), t), half((2, 2, 9, 6), t)
    mask = padding_mask(2, 9, np.float32).astype(t)
    got = attention_node(q, k, v, mask, guard=1)
    assert spy["attention"] == 1
    assert_half_close(got, attention_reference(q, k, v, mask, guard=1), ulps=2)


# ------------------------------------------------------------------ compiled conversions

def _loop(name):
    """The compiled conversion ``name`` of onnxkit_cpu.compiled.half: ``widen16`` / ``narrow16``
    (the hardware's where it has F16C) or their ``_table`` loops; the hardware loops themselves
    where ``name`` ends in ``_hw`` (skipped on a processor without F16C)."""
    pytest.importorskip("numba")
    from onnxkit_cpu.compiled import half as loops

    if name.endswith("_hw"):
        assert loops.widen16_table.get() is not None       # numba imported before hardware() asks
        hw = loops.hardware()
        if hw is None:
            pytest.skip("no F16C on this processor")
        return getattr(hw, name[:-3]).get()
    return getattr(loops, name).get()


@pytest.mark.parametrize("name", ["widen16", "widen16_table", "widen16_hw"])
def test_compiled_widening_is_numpys_for_every_float16_pattern(name):
    from onnxkit_cpu.compiled import half as loops

    up = _loop(name)
    assert up is not None
    bits = RNG.permutation(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16))
    out = np.empty(bits.shape, np.float32)
    up(bits, loops.widening_table(), out)
    assert np.array_equal(out.view(np.uint32), bits.view(np.float16).astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("name", ["narrow16", "narrow16_table", "narrow16_hw"])
def test_compiled_narrowing_is_numpys_at_every_rounding_boundary(name):
    """Every float16 value, the float32 midpoints between neighbours (ties to even) and their
    float32 neighbours, the overflow threshold, subnormals, NaN payloads, and random patterns."""
    down = _loop(name)
    assert down is not None
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    fin = h[np.isfinite(h)].astype(np.float64)
    fin = np.unique(fin)
    mids = ((fin[:-1] + fin[1:]) / 2).astype(np.float32)             # exact in float32
    near = np.concatenate([mids, np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf)),
                           fin.astype(np.float32), np.float32([65504, 65519.996, 65520, 65536, 1e30, 2.0 ** -25,
                                                               2.0 ** -26, 1e-45, 3e-8, np.inf, -np.inf])])
    rand = RNG.integers(0, 1 << 32, size=400_000, dtype=np.uint64).astype(np.uint32)
    nans = np.uint32([0x7f800001, 0x7fc00000, 0xffc00001, 0x7f802000, 0x7fffffff, 0xff800100])
    bits = np.concatenate([near.view(np.uint32), rand, nans])
    out = np.empty(bits.shape, np.uint16)
    down(bits, bits.view(np.float32), out)
    with np.errstate(over="ignore", invalid="ignore"):
        want = bits.view(np.float32).astype(np.float16).view(np.uint16)
    assert np.array_equal(out, want), bits[out != want][:8]


@pytest.mark.parametrize("to", [TP.FLOAT16, TP.FLOAT])
def test_cast_float32_float16_is_numpys_conversion(to):
    """The converters' edge Casts: every rounding case numpy's ``astype`` gives, bit for bit
    (overflow to inf, ties to even, subnormals, NaN), and onnxruntime's values."""
    src = TP.FLOAT if to == TP.FLOAT16 else TP.FLOAT16
    x = np.concatenate([RNG.standard_normal(1000) * 1e4, np.float32([65504, 65520, 1e6, -1e6, 2.0 ** -25,
                        3 * 2.0 ** -26, 1e-8, -0.0, np.inf, -np.inf, np.nan])]).astype(np.float32)
    x = x if to == TP.FLOAT16 else x.astype(np.float16)
    data = model([helper.make_node("Cast", ["x"], ["y"], to=to)], [("x", src)], [("y", to)])
    got = kit(data, {"x": x})
    with np.errstate(over="ignore"):
        want = x.astype(np.float16 if to == TP.FLOAT16 else np.float32)
    assert got.dtype == want.dtype and np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    assert_half_close(got, peer(data, {"x": x}), ulps=0) if to == TP.FLOAT16 else None


# ----------------------------------------------------------------------- LayerNormalization

@pytest.mark.parametrize("t", [F16, BF16])
@pytest.mark.parametrize("outputs", [1, 3])
def test_layer_norm_half_matches_reference_and_onnxruntime(spy_norm, t, outputs):
    """stash_type 1: the statistics in float32 (the definition), Y rounded once; Mean and
    InvStdDev float32."""
    x = (half((2, 7, 33), t, scale=3.0).astype(np.float32) + 5).astype(t)
    scale, bias = half((33,), t), half((33,), t)
    tp = TYPE[t]
    inits = [helper.make_tensor("s", tp, scale.shape, scale.astype(np.float32).tolist()),
             helper.make_tensor("b", tp, bias.shape, bias.astype(np.float32).tolist())]
    outs = ["y", "mean", "inv"][:outputs]
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], outs, axis=-1, epsilon=1e-5)
    data = model([node], [("x", tp)], [("y", tp)] + [(n, TP.FLOAT) for n in outs[1:]], inits)
    got = onnxkit.InferenceSession(data).run(None, {"x": x})
    assert spy_norm["calls"] >= 1
    x64 = x.astype(np.float64)
    m = x64.mean(-1, keepdims=True)
    inv = 1 / np.sqrt(((x64 - m) ** 2).mean(-1, keepdims=True) + 1e-5)
    y = (x64 - m) * inv * scale.astype(np.float64) + bias.astype(np.float64)
    assert_half_close(got[0], rounded(y, t), ulps=1)
    if outputs == 3:
        assert got[1].dtype == got[2].dtype == np.float32
        np.testing.assert_allclose(got[1], m, rtol=1e-6)
        np.testing.assert_allclose(got[2], inv, rtol=1e-5)
    if t == F16:
        want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
        assert_half_close(got[0], want[0], ulps=1)


@pytest.fixture
def spy_norm(monkeypatch):
    from onnxkit_cpu.overrides import norm as norm_override

    count = {"calls": 0}

    def counted(y, dtype, *halves, _body=norm_override.narrow):
        count["calls"] += 1
        return _body(y, dtype, *halves)

    monkeypatch.setattr(norm_override, "narrow", counted)
    return count


# ---------------------------------------------------------------------------------- Erf

@pytest.mark.parametrize("t", [F16, BF16])
def test_erf_half_matches_reference_and_the_path_before(t):
    from onnxkit_cpu.overrides import elementwise_math

    x = np.concatenate([half((500,), t, scale=2.0).astype(np.float32), [0.0, -0.0, 6.0, -6.0, np.inf, -np.inf, np.nan]])
    x = x.astype(t)
    data = model([helper.make_node("Erf", ["x"], ["y"])], [("x", TYPE[t])], [("y", TYPE[t])])
    got = kit(data, {"x": x})
    want = rounded(np.array([math.erf(v) for v in x.astype(np.float64)]), t)
    assert_half_close(got, want, ulps=1)
    assert np.array_equal(got.view(np.uint16), half_path_off(elementwise_math, data, {"x": x}).view(np.uint16))
    if t == F16:
        assert_half_close(got, peer(data, {"x": x}), ulps=1)
