"""Quantization, signal, string, random, training and remaining kernels of the cpu backend.

Behaviour the ONNX node vectors do not cover: the older QuantizeLinear / DequantizeLinear
definitions (per-tensor only at 10, the types each version accepts), ``precision``,
``output_dtype``, blocked quantization with a partial last block, saturation of FLOAT8, 2-bit
types, DFT-17's ``axis`` attribute, IRFFT lengths, STFT without a window, window edge cases,
StringNormalizer / StringSplit / RegexFullMatch corner cases (RE2 semantics), TfIdf weighting,
seeded random streams, the training optimisers' options, loss reductions with ignored
targets, CumProd / BitCast, and errors that must name the node.  Expected values are
hand-computed, or come from numpy / ``onnx.reference`` used as an oracle (test-only import).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from onnxkit.errors import EvaluationError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402

TRAINING = "ai.onnx.preview.training"


def _elem(a) -> int:
    if a.dtype == object:
        return TensorProto.STRING
    return helper.np_dtype_to_tensor_dtype(a.dtype)


def build(op, opset, inputs, attrs=None, n_out=1, domain="", out_elem=None, out_rank=None):
    """A one-node model and its feeds (``None`` in ``inputs`` = omitted optional input).

    Graph outputs are typed with a rank (the checker requires it): element type and rank from
    onnx's type inference, else ``out_elem`` / ``out_rank``, else those of the first input.
    """
    names = [f"i{k}" if v is not None else "" for k, v in enumerate(inputs)]
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, domain=domain, **(attrs or {}))
    graph_inputs = [helper.make_tensor_value_info(n, _elem(v), list(v.shape))
                    for n, v in zip(names, inputs) if v is not None]
    opsets = [helper.make_opsetid("", opset if not domain else 21)]
    if domain:
        opsets.append(helper.make_opsetid(domain, opset))
    probe = helper.make_model(helper.make_graph([node], "g", graph_inputs, []), opset_imports=opsets)
    try:
        inferred = {vi.name: vi.type.tensor_type for vi in onnx.shape_inference.infer_shapes(probe).graph.value_info}
    except Exception:  # inputs made invalid on purpose
        inferred = {}
    first = next((v for v in inputs if v is not None), None)
    outputs = []
    for k, o in enumerate(outs):
        t = inferred.get(o)
        if out_elem is not None:
            elem = out_elem[k] if isinstance(out_elem, (list, tuple)) else out_elem
        elif t is not None and t.elem_type:
            elem = t.elem_type
        else:
            elem = _elem(first) if first is not None else TensorProto.FLOAT
        rank = len(t.shape.dim) if t is not None and t.HasField("shape") else None
        if out_rank is not None:
            rank = out_rank[k] if isinstance(out_rank, (list, tuple)) else out_rank
        if rank is None:
            rank = first.ndim if first is not None else 0
        outputs.append(helper.make_tensor_value_info(o, elem, [None] * rank))
    model = helper.make_model(helper.make_graph([node], "g", graph_inputs, outputs), opset_imports=opsets)
    return model, {n: v for n, v in zip(names, inputs) if v is not None}


def run(op, opset, inputs, attrs=None, n_out=1, domain="", seed=None, out_elem=None, out_rank=None):
    model, feeds = build(op, opset, inputs, attrs, n_out, domain, out_elem, out_rank)
    # validate=False: a one-node model whose declared output rank is only a guess of this harness;
    # validation (and inference contradicting a declaration) is tested in tests/checker
    outs = InferenceSession(model.SerializeToString(), seed=seed, validate=False).run(None, feeds)
    return outs if n_out > 1 else outs[0]


def oracle(op, opset, inputs, attrs=None, n_out=1, domain=""):
    model, feeds = build(op, opset, inputs, attrs, n_out, domain)
    outs = ReferenceEvaluator(model).run(None, feeds)
    return outs if n_out > 1 else outs[0]


def f32(*v):
    return np.array(v, dtype=np.float32)


# ---------------------------------------------------------------------------- quantization

def test_quantize_10_per_tensor_default_uint8_ties_to_even():
    y = run("QuantizeLinear", 10, [f32(0, 1.5, 2.5, -1, 300, 5.0), np.array(2.0, np.float32)])
    assert y.dtype == np.uint8
    # x/2 = 0, .75, 1.25, -.5, 150, 2.5 -> rint 0, 1, 1, -0, 150, 2
    np.testing.assert_array_equal(y, [0, 1, 1, 0, 150, 2])


def test_quantize_10_rejects_per_axis_scale():
    with pytest.raises(EvaluationError, match="scalar"):
        run("QuantizeLinear", 10, [np.ones((2, 2), np.float32), f32(1, 2), np.array([0, 0], np.uint8)])


def test_quantize_13_per_axis_int8_with_zero_point():
    x = np.array([[1.0, -2.0], [3.0, 100.0]], np.float32)
    y = run("QuantizeLinear", 13, [x, f32(1.0, 0.5), np.array([1, -3], np.int8)], {"axis": 1})
    # column 0: /1 +1 -> 2, 4; column 1: /0.5 -3 -> -7, 197 -> saturates to 127
    np.testing.assert_array_equal(y, np.array([[2, -7], [4, 127]], np.int8))


def test_quantize_19_float8_saturate_attribute():
    x = f32(1000.0, -1000.0, 1.0)
    zp = np.zeros(1, ml_dtypes.float8_e4m3fn).reshape(())
    sat = run("QuantizeLinear", 19, [x, np.array(1.0, np.float32), zp])
    assert sat.dtype == ml_dtypes.float8_e4m3fn
    np.testing.assert_array_equal(sat.astype(np.float32), [448.0, -448.0, 1.0])
    raw = run("QuantizeLinear", 19, [x, np.array(1.0, np.float32), zp], {"saturate": 0})
    assert np.isnan(raw.astype(np.float32)[:2]).all() and raw.astype(np.float32)[2] == 1.0


def test_quantize_19_refuses_a_type_of_a_later_version():
    model, feeds = build("QuantizeLinear", 19, [f32(1.0), np.array(1.0, np.float32),
                                                np.array(0, np.int16)])
    with pytest.raises(EvaluationError, match="INT16"):
        InferenceSession(model.SerializeToString(), validate=False).run(None, feeds)
    y = run("QuantizeLinear", 21, [f32(1.0, -40000.0), np.array(1.0, np.float32), np.array(0, np.int16)])
    np.testing.assert_array_equal(y, np.array([1, -32768], np.int16))


def test_quantize_21_blocked_with_partial_last_block():
    x = np.arange(10, dtype=np.float32).reshape(2, 5)
    scale = np.array([[1, 2, 4], [0.5, 1, 8]], np.float32)        # blocks of 2 along axis 1
    y = run("QuantizeLinear", 21, [x, scale], {"axis": 1, "block_size": 2})
    expected = np.array([[0 / 1, 1 / 1, 2 / 2, 3 / 2, 4 / 4],
                         [5 / .5, 6 / .5, 7 / 1, 8 / 1, 9 / 8]])
    np.testing.assert_array_equal(y, np.rint(expected).astype(np.uint8))
    with pytest.raises(EvaluationError, match="blocked"):
        run("QuantizeLinear", 21, [x, scale[:, :2]], {"axis": 1, "block_size": 2})


def test_quantize_21_output_dtype_and_conflict():
    y = run("QuantizeLinear", 21, [f32(-3.0, 3.0), np.array(1.0, np.float32)],
            {"output_dtype": TensorProto.INT8}, out_elem=TensorProto.INT8)
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, [-3, 3])
    model, feeds = build("QuantizeLinear", 21, [f32(1.0), np.array(1.0, np.float32), np.array(0, np.uint8)],
                         {"output_dtype": TensorProto.INT8})
    with pytest.raises(EvaluationError, match="output_dtype"):
        InferenceSession(model.SerializeToString(), validate=False).run(None, feeds)


def test_quantize_23_division_precision_follows_scale_type_unless_precision_given():
    x, scale, zp = f32(2.5002), np.array(1.0, np.float16), np.array(0, np.uint8)
    # in float16, 2.5002 rounds to 2.5 which rounds (ties to even) to 2; in float32 it gives 3
    assert run("QuantizeLinear", 23, [x, scale, zp])[0] == 2
    assert run("QuantizeLinear", 23, [x, scale, zp], {"precision": TensorProto.FLOAT})[0] == 3


def test_quantize_25_int2_and_uint2_saturate():
    y = run("QuantizeLinear", 25, [f32(-3, -1, 0, 1, 2), np.array(1.0, np.float32), np.array(0, ml_dtypes.int2)])
    assert y.dtype == ml_dtypes.int2
    np.testing.assert_array_equal(y.astype(np.int8), [-2, -1, 0, 1, 1])
    y = run("QuantizeLinear", 25, [f32(-1, 2, 7), np.array(1.0, np.float32), np.array(0, ml_dtypes.uint2)])
    np.testing.assert_array_equal(y.astype(np.int8), [0, 2, 3])


def test_quantize_rank1_input_with_a_per_axis_scale_ignores_the_default_axis():
    y = run("QuantizeLinear", 21, [f32(2.0, 4.0), f32(1.0, 2.0)])
    np.testing.assert_array_equal(y, [2, 2])


def test_dequantize_10_and_13():
    y = run("DequantizeLinear", 10, [np.array([0, 3, 255], np.uint8), np.array(0.5, np.float32),
                                     np.array(1, np.uint8)])
    np.testing.assert_allclose(y, [-0.5, 1.0, 127.0])
    x = np.array([[1, 2], [3, 4]], np.int8)
    y = run("DequantizeLinear", 13, [x, f32(2.0, 0.25), np.array([1, 0], np.int8)], {"axis": 1})
    np.testing.assert_allclose(y, [[0.0, 0.5], [4.0, 1.0]])


def test_dequantize_int32_without_zero_point_is_exact_beyond_float32():
    x = np.array([2 ** 24 + 1, -7], np.int32)
    y = run("DequantizeLinear", 21, [x, np.array(1.0, np.float32)])
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, np.array([2 ** 24 + 1, -7], np.float64).astype(np.float32))


def test_dequantize_blocked_and_output_dtype():
    x = np.array([[1, 2, 3]], np.int8)
    scale = np.array([[1.0, 10.0]], np.float32)
    y = run("DequantizeLinear", 23, [x, scale, np.array([[0, 1]], np.int8)],
            {"axis": 1, "block_size": 2, "output_dtype": TensorProto.FLOAT16}, out_elem=TensorProto.FLOAT16)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, [[1.0, 2.0, 20.0]])


def test_dequantize_e8m0_scale_needs_output_dtype():
    x = np.array([1, -2], np.int8)
    scale = np.array(4.0, ml_dtypes.float8_e8m0fnu)
    y = run("DequantizeLinear", 24, [x, scale], {"output_dtype": TensorProto.FLOAT}, out_elem=TensorProto.FLOAT)
    np.testing.assert_array_equal(y, f32(4.0, -8.0))
    model, feeds = build("DequantizeLinear", 24, [x, scale])
    with pytest.raises(EvaluationError, match="output_dtype"):
        InferenceSession(model.SerializeToString(), validate=False).run(None, feeds)


def test_dynamic_quantize_linear_hand_values():
    y, scale, zp = run("DynamicQuantizeLinear", 11, [f32(0.0, 2.55, 1.0)], n_out=3)
    assert scale.dtype == np.float32 and zp.dtype == np.uint8 and y.dtype == np.uint8
    np.testing.assert_allclose(scale, 0.01, rtol=1e-6)
    assert zp == 0
    np.testing.assert_array_equal(y, [0, 255, 100])
    y, scale, zp = run("DynamicQuantizeLinear", 11, [f32(-1.0, 1.0)], n_out=3)
    np.testing.assert_allclose(scale, 2 / 255, rtol=1e-6)
    # in float32, 1 / float32(2/255) = 127.49999 (not 127.5): the zero point is 127
    assert zp == 127
    np.testing.assert_array_equal(y, [0, 254])


def test_qlinear_matmul_per_row_and_per_column_scales():
    a = np.array([[10, 20], [30, 40]], np.uint8)
    b = np.array([[1, 2], [3, 4]], np.int8)
    a_scale, a_zp = f32(0.1, 0.2), np.array([10, 0], np.uint8)      # per row of a
    b_scale, b_zp = f32(1.0, 0.5), np.array([0, 2], np.int8)         # per column of b
    y = run("QLinearMatMul", 10, [a, a_scale, a_zp, b, b_scale, b_zp, np.array(0.5, np.float32),
                                  np.array(5, np.uint8)])
    real_a = (a.astype(float) - a_zp[:, None]) * a_scale[:, None]
    real_b = (b.astype(float) - b_zp[None, :]) * b_scale[None, :]
    expected = np.clip(np.rint(real_a @ real_b / 0.5) + 5, 0, 255)
    np.testing.assert_array_equal(y, expected.astype(np.uint8))


def test_qlinear_matmul_21_float8_operands_and_float16_scales():
    f8 = ml_dtypes.float8_e4m3fn
    a = np.array([[1, 2], [3, -4]], f8)
    b = np.array([[0.5, 1], [2, 4]], f8)
    z = np.array(0, f8)
    y = run("QLinearMatMul", 21, [a, np.array(1.0, np.float16), z, b, np.array(0.5, np.float16), z,
                                  np.array(2.0, np.float16), z])
    assert y.dtype == f8
    # (a @ b) * 1 * 0.5 / 2 = [[4.5, 9], [-6.5, -13]] / 4, all exact in e4m3
    np.testing.assert_array_equal(y.astype(np.float32), [[1.125, 2.25], [-1.625, -3.25]])
    model, feeds = build("QLinearMatMul", 10, [a, np.array(1.0, np.float32), z, b, np.array(1.0, np.float32), z,
                                               np.array(1.0, np.float32), z])
    with pytest.raises(EvaluationError, match="FLOAT8"):      # float8 operands only from version 21
        InferenceSession(model.SerializeToString(), validate=False).run(None, feeds)


@pytest.mark.parametrize("attrs", [
    {"pads": [1, 0, 1, 2], "strides": [2, 1]},
    {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"dilations": [2, 1], "group": 2},
])
def test_qlinear_conv_against_the_reference(attrs):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 255, (1, 4, 7, 6), dtype=np.uint8)
    group = attrs.get("group", 1)
    w = rng.integers(-100, 100, (6, 4 // group, 3, 2), dtype=np.int8)
    inputs = [x, np.array(0.02, np.float32), np.array(100, np.uint8), w,
              rng.uniform(0.01, 0.05, 6).astype(np.float32), np.zeros(6, np.int8),
              np.array(0.5, np.float32), np.array(120, np.uint8), rng.integers(-500, 500, 6).astype(np.int32)]
    attrs = dict(attrs, kernel_shape=[3, 2])
    got = run("QLinearConv", 10, inputs, attrs)
    want = oracle("QLinearConv", 10, inputs, attrs)
    assert got.dtype == np.uint8 and got.shape == want.shape
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1   # rounding of exact ties only
    assert (got == want).mean() > 0.99


# ---------------------------------------------------------------------------------- signal

def test_dft_17_axis_attribute_and_default():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 4, 1)).astype(np.float32)
    y = run("DFT", 17, [x])                                     # default axis 1 at version 17
    ref = np.fft.fft(x[..., 0].astype(np.float64), axis=1)
    np.testing.assert_allclose(y[..., 0], ref.real, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y[..., 1], ref.imag, rtol=1e-4, atol=1e-5)
    y = run("DFT", 17, [x], {"axis": 2, "onesided": 1})
    ref = np.fft.rfft(x[..., 0].astype(np.float64), axis=2)
    assert y.shape == (2, 5, 3, 2)
    np.testing.assert_allclose(y[..., 0] + 1j * y[..., 1], ref, rtol=1e-4, atol=1e-5)


def test_dft_20_axis_input_irfft_odd_length_and_bad_axis():
    rng = np.random.default_rng(1)
    spec = rng.standard_normal((3, 4, 2)).astype(np.float64)
    y = run("DFT", 20, [spec, np.array(7, np.int64), np.array(1, np.int64)], {"inverse": 1, "onesided": 1})
    ref = np.fft.irfft(spec[..., 0] + 1j * spec[..., 1], n=7, axis=1)
    assert y.shape == (3, 7, 1) and y.dtype == np.float64
    np.testing.assert_allclose(y[..., 0], ref, rtol=1e-10, atol=1e-12)
    with pytest.raises(EvaluationError, match="axis"):
        run("DFT", 20, [spec, None, np.array(2, np.int64)])


def test_stft_rectangular_window_from_frame_length_complex_signal():
    rng = np.random.default_rng(2)
    sig = rng.standard_normal((1, 10, 2)).astype(np.float32)
    y = run("STFT", 17, [sig, np.array(3, np.int64), None, np.array(4, np.int64)], {"onesided": 0}, out_rank=4)
    z = sig[0, :, 0].astype(np.float64) + 1j * sig[0, :, 1]
    frames = np.stack([z[i * 3:i * 3 + 4] for i in range(3)])      # (10 - 4) // 3 + 1 = 3 frames
    ref = np.fft.fft(frames, axis=-1)
    assert y.shape == (1, 3, 4, 2)
    np.testing.assert_allclose(y[0, ..., 0] + 1j * y[0, ..., 1], ref, rtol=1e-4, atol=1e-5)


def test_windows_symmetric_periodic_size_one_and_dtype():
    y = run("HannWindow", 17, [np.array(5, np.int64)], {"periodic": 0})
    np.testing.assert_allclose(y, [0, 0.5, 1, 0.5, 0], atol=1e-7)
    y = run("HannWindow", 17, [np.array(4, np.int32)], {"output_datatype": TensorProto.DOUBLE},
            out_elem=TensorProto.DOUBLE)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, [0, 0.5, 1, 0.5], atol=1e-15)
    np.testing.assert_allclose(run("HammingWindow", 17, [np.array(1, np.int64)], {"periodic": 0}), [1.0])
    y = run("BlackmanWindow", 17, [np.array(3, np.int64)], {"periodic": 0})
    np.testing.assert_allclose(y, [0, 1, 0], atol=1e-6)                # 0.42 - 0.5 cos + 0.08 cos 2x


def test_mel_weight_matrix_against_the_reference():
    inputs = [np.array(8, np.int64), np.array(64, np.int64), np.array(16000, np.int64),
              np.array(100.0, np.float32), np.array(7000.0, np.float32)]
    got = run("MelWeightMatrix", 17, inputs)
    want = oracle("MelWeightMatrix", 17, inputs)
    assert got.shape == (33, 8) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert np.allclose(got.max(axis=0), 1.0)          # every triangle peaks at 1


# --------------------------------------------------------------------------------- strings

def S(*v):
    return np.array(v, dtype=object)


def _text(a):
    return [x.decode() if isinstance(x, bytes) else x for x in np.asarray(a).reshape(-1)]


def test_string_normalizer_case_insensitive_stopwords_and_all_removed():
    y = run("StringNormalizer", 10, [S(b"Monday", b"", b"MONDAY x", b"tuesday")],
            {"stopwords": ["monday"], "case_change_action": "UPPER"})
    assert _text(y) == ["", "MONDAY X", "TUESDAY"]                 # empty strings are kept
    y = run("StringNormalizer", 10, [np.array([[b"a", b"A"]], dtype=object)], {"stopwords": ["a"]})
    assert y.shape == (1, 1) and _text(y) == [""]
    y = run("StringNormalizer", 10, [S("a", "A")], {"stopwords": ["a"], "is_case_sensitive": 1,
                                                   "case_change_action": "LOWER"})
    assert _text(y) == ["a"]


def test_string_concat_broadcast_and_utf8():
    y = run("StringConcat", 20, [S(b"ab", "\u00e9"), np.array([["-"], ["+"]], dtype=object)])
    assert y.shape == (2, 2)
    assert _text(y) == ["ab-", "\u00e9-", "ab+", "\u00e9+"]
    assert all(isinstance(v, str) for v in y.reshape(-1))  # a session returns STRING elements as str


def test_string_split_empty_strings_and_maxsplit_zero():
    y, n = run("StringSplit", 20, [S("", "a,b")], {"delimiter": ","}, n_out=2)
    assert y.shape == (2, 2) and _text(y) == ["", "", "a", "b"]
    np.testing.assert_array_equal(n, [1, 2])
    y, n = run("StringSplit", 20, [S("   ", " a  b ")], n_out=2)   # whitespace: runs collapse
    np.testing.assert_array_equal(n, [0, 2])
    assert _text(y) == ["", "", "a", "b"]
    y, n = run("StringSplit", 20, [S("a b c")], {"maxsplit": 0}, n_out=2)
    assert _text(y) == ["a b c"] and n.tolist() == [1]


def test_regex_full_match_re2_semantics():
    x = S("abc_1", "\u00e9t\u00e9", "ab\n", "x9")
    y = run("RegexFullMatch", 20, [x], {"pattern": r"\w+"})
    assert y.dtype == np.bool_ and y.tolist() == [True, False, False, True]     # \w is ASCII in RE2
    y = run("RegexFullMatch", 20, [x], {"pattern": r"[[:alpha:]]+[[:digit:]]"})
    assert y.tolist() == [False, False, False, True]
    y = run("RegexFullMatch", 20, [S("a+b", "ab")], {"pattern": r"\Qa+b\E"})
    assert y.tolist() == [True, False]
    y = run("RegexFullMatch", 20, [S("abc")], {"pattern": r"(?<w>a)bc\z"})
    assert y.tolist() == [True]
    for bad in (r"a(?=b)", r"(a)\1", r"a*+"):
        with pytest.raises(EvaluationError, match="RE2"):
            run("RegexFullMatch", 20, [S("ab")], {"pattern": bad})
    # RE2's own semantics: (?i) folds Unicode case, \s is [\t\n\f\r ] (no \v), \pL classes
    y = run("RegexFullMatch", 20, [S("\u00c9T\u00c9", "\v", "\u00e9")], {"pattern": r"(?i)\x{e9}t\x{e9}|\s|\pL"})
    assert y.tolist() == [True, False, True]
    # linear time: the classic catastrophic-backtracking pattern answers at once
    import time
    t0 = time.perf_counter()
    y = run("RegexFullMatch", 20, [S("a" * 5000 + "!")], {"pattern": "(a+)+$"})
    assert y.tolist() == [False] and time.perf_counter() - t0 < 10.0  # a backtracking engine takes hours


def test_regex_full_match_without_re2_is_unsupported(monkeypatch):
    from onnxkit.runtime import Unsupported
    from onnxkit_default_domain.kernels import string

    monkeypatch.setattr(string, "_re2", None)
    with pytest.raises(Unsupported, match="google-re2"):
        string.regex_full_match(None)


def test_tfidf_weighted_modes_against_the_reference():
    x = np.array([["a", "b", "a", "c", "b", "a"], ["c", "c", "a", "b", "x", "a"]], dtype=object)
    attrs = dict(min_gram_length=1, max_gram_length=2, max_skip_count=1, ngram_counts=[0, 3],
                 ngram_indexes=[0, 1, 2, 3, 4], pool_strings=["a", "b", "c", "a", "b", "c", "a"],
                 weights=[0.5, 1.0, 2.0, 3.0, 4.0])
    for mode in ("TF", "IDF", "TFIDF"):
        got = run("TfIdfVectorizer", 9, [x], dict(attrs, mode=mode), out_elem=TensorProto.FLOAT)
        want = oracle("TfIdfVectorizer", 9, [x], dict(attrs, mode=mode))
        np.testing.assert_allclose(got, want)
    # TF by hand.  Pool bigrams are (a,b) and (c,a).  Row 0 = a b a c b a: unigrams a=3 b=2
    # c=1; (a,b) adjacent at 0..1 and one apart at 2..4 -> 2; (c,a) one apart at 3..5 -> 1.
    tf = run("TfIdfVectorizer", 9, [x], dict(attrs, mode="TF"), out_elem=TensorProto.FLOAT)
    assert tf[0].tolist() == [3, 2, 1, 2, 1]


def test_tfidf_int_input_only_bigrams_with_skips():
    x = np.array([1, 2, 9, 2, 1, 3], np.int64)
    attrs = dict(mode="TF", min_gram_length=2, max_gram_length=2, max_skip_count=2, ngram_counts=[0, 0],
                 ngram_indexes=[1, 0], pool_int64s=[1, 2, 2, 1])
    y = run("TfIdfVectorizer", 9, [x], attrs, out_elem=TensorProto.FLOAT)
    # (1,2): gap0 at 0, gap1 -> (1,9) no, gap2 -> (1,2) at 0..3 yes => 2 ; (2,1): gap0 (3,4), gap2 (1,4) => 2
    np.testing.assert_array_equal(y, f32(2, 2))


# ---------------------------------------------------------------------------------- random

def test_random_seeded_streams_are_reproducible_and_typed():
    a = run("RandomNormal", 22, [], {"shape": [3, 4], "seed": 5.0, "dtype": TensorProto.DOUBLE},
            out_elem=TensorProto.DOUBLE)
    b = run("RandomNormal", 22, [], {"shape": [3, 4], "seed": 5.0, "dtype": TensorProto.DOUBLE},
            out_elem=TensorProto.DOUBLE)
    assert a.shape == (3, 4) and a.dtype == np.float64
    np.testing.assert_array_equal(a, b)
    c = run("RandomNormal", 22, [], {"shape": [3, 4], "seed": 6.0, "dtype": TensorProto.DOUBLE},
            out_elem=TensorProto.DOUBLE)
    assert not np.array_equal(a, c)
    u = run("RandomUniform", 1, [], {"shape": [1000], "low": 2.0, "high": 3.0}, seed=1, out_elem=TensorProto.FLOAT)
    assert u.dtype == np.float32 and u.min() >= 2.0 and u.max() <= 3.0 and u.std() > 0.2


def test_random_like_takes_the_input_type_and_session_seed():
    x = np.zeros((2, 3), np.float16)
    y1 = run("RandomUniformLike", 22, [x], seed=7)
    y2 = run("RandomUniformLike", 22, [x], seed=7)
    assert y1.dtype == np.float16 and y1.shape == (2, 3)
    np.testing.assert_array_equal(y1, y2)
    y = run("RandomNormalLike", 1, [np.zeros(4, np.int32)], {"dtype": TensorProto.FLOAT}, out_elem=TensorProto.FLOAT)
    assert y.dtype == np.float32
    with pytest.raises(EvaluationError, match="floating-point"):
        run("RandomNormalLike", 1, [np.zeros(4, np.int32)], out_elem=TensorProto.FLOAT)


def test_multinomial_and_bernoulli_certain_outcomes():
    logits = np.array([[0.0, -np.inf, -np.inf], [-np.inf, -np.inf, 5.0]], np.float32)
    y = run("Multinomial", 7, [logits], {"sample_size": 6, "dtype": TensorProto.INT64}, seed=3,
            out_elem=TensorProto.INT64)
    assert y.dtype == np.int64 and y.shape == (2, 6)
    assert (y[0] == 0).all() and (y[1] == 2).all()
    p = f32(0, 1, 0, 1)
    y = run("Bernoulli", 15, [p], {"dtype": TensorProto.BOOL}, out_elem=TensorProto.BOOL)
    assert y.dtype == np.bool_ and y.tolist() == [False, True, False, True]
    y = run("Bernoulli", 22, [np.full(2000, 0.3, np.float64)], {"seed": 1.0})
    assert y.dtype == np.float64 and set(np.unique(y)) <= {0.0, 1.0} and 0.25 < y.mean() < 0.35


# -------------------------------------------------------------------------------- training

def test_momentum_standard_and_nesterov_hand_values():
    r, t = np.array(0.1, np.float32), np.array(1, np.int64)
    x, g, v = f32(1.0), f32(2.0), f32(0.5)
    attrs = dict(alpha=0.9, beta=0.5, norm_coefficient=0.0, mode="standard")
    xn, vn = run("Momentum", 1, [r, t, x, g, v], attrs, n_out=2, domain=TRAINING)
    # v' = 0.9*0.5 + 0.5*2 = 1.45 ; x' = 1 - 0.1*1.45
    np.testing.assert_allclose(vn, [1.45], rtol=1e-6)
    np.testing.assert_allclose(xn, [0.855], rtol=1e-6)
    xn, vn = run("Momentum", 1, [r, np.array(0, np.int64), x, g, v], dict(attrs, mode="nesterov"),
                 n_out=2, domain=TRAINING)
    # t = 0: beta taken as 1 -> v' = 0.45 + 2 = 2.45 ; x' = 1 - 0.1*(2 + 0.9*2.45)
    np.testing.assert_allclose(vn, [2.45], rtol=1e-6)
    np.testing.assert_allclose(xn, [1 - 0.1 * (2 + 0.9 * 2.45)], rtol=1e-6)


def test_adagrad_decay_and_norm_coefficient():
    r, t = np.array(1.0, np.float32), np.array(3, np.int64)
    x, g, h = f32(2.0), f32(1.0), f32(3.0)
    xn, hn = run("Adagrad", 1, [r, t, x, g, h], {"decay_factor": 0.5, "epsilon": 0.0, "norm_coefficient": 0.5},
                 n_out=2, domain=TRAINING)
    # rate = 1/(1+1.5) = 0.4 ; g' = 0.5*2 + 1 = 2 ; h' = 3 + 4 = 7 ; x' = 2 - 0.4*2/sqrt(7)
    np.testing.assert_allclose(hn, [7.0])
    np.testing.assert_allclose(xn, [2 - 0.8 / np.sqrt(7)], rtol=1e-6)


def test_adam_bias_correction_only_after_step_zero():
    args = [f32(1.0), f32(0.5), f32(0.0), f32(0.0)]
    attrs = {"alpha": 0.5, "beta": 0.75, "epsilon": 0.0}
    x0 = run("Adam", 1, [np.array(0.1, np.float32), np.array(0, np.int64)] + args, attrs, n_out=3, domain=TRAINING)
    x2 = run("Adam", 1, [np.array(0.1, np.float32), np.array(2, np.int64)] + args, attrs, n_out=3, domain=TRAINING)
    # v' = 0.25, h' = 0.0625, v'/sqrt(h') = 1
    np.testing.assert_allclose(x0[1], [0.25])
    np.testing.assert_allclose(x0[2], [0.0625])
    np.testing.assert_allclose(x0[0], [1 - 0.1])
    np.testing.assert_allclose(x2[0], [1 - 0.1 * np.sqrt(1 - 0.75 ** 2) / (1 - 0.5 ** 2)], rtol=1e-6)


def test_optimizer_rejects_unbalanced_groups():
    with pytest.raises(EvaluationError, match="groups"):
        run("Adagrad", 1, [np.array(0.1, np.float32), np.array(0, np.int64), f32(1), f32(1), f32(1), f32(1)],
            n_out=2, domain=TRAINING)


# ---------------------------------------------------------------------- losses and others

def test_nll_12_mean_ignores_targets_without_weight():
    x = np.array([[-1.0, -2.0, -3.0], [-4.0, -5.0, -6.0], [-7.0, -8.0, -9.0]], np.float32)
    target = np.array([2, 1, 0], np.int64)
    y = run("NegativeLogLikelihoodLoss", 12, [x, target], {"ignore_index": 1})
    np.testing.assert_allclose(y, (3.0 + 7.0) / 2)                   # the ignored row is not counted
    y = run("NegativeLogLikelihoodLoss", 13, [x, target, f32(1, 2, 3)], {"reduction": "sum"})
    np.testing.assert_allclose(y, 3 * 3 + 5 * 2 + 7 * 1)
    with pytest.raises(EvaluationError, match="target"):
        run("NegativeLogLikelihoodLoss", 22, [x, np.array([3, 0, 0], np.int64)])


def test_softmax_cross_entropy_12_log_prob_output():
    x = f32(1.0, 2.0, 3.0).reshape(1, 3)
    loss, logp = run("SoftmaxCrossEntropyLoss", 12, [x, np.array([0], np.int32)], {"reduction": "none"}, n_out=2)
    ref = x - np.log(np.exp(x).sum())
    np.testing.assert_allclose(logp, ref, rtol=1e-6)
    np.testing.assert_allclose(loss, [-ref[0, 0]], rtol=1e-6)
    assert loss.dtype == np.float32 and loss.shape == (1,)


def test_cumprod_exclusive_reverse_int32():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    y = run("CumProd", 26, [x, np.array(1, np.int64)], {"exclusive": 1, "reverse": 1})
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [[6, 3, 1], [30, 6, 1]])
    y = run("CumProd", 26, [x, np.array(-2, np.int32)])
    np.testing.assert_array_equal(y, [[1, 2, 3], [4, 10, 18]])


def test_bitcast_narrow_types_and_width_mismatch():
    y = run("BitCast", 26, [np.array([1, -1, 7], ml_dtypes.int4)], {"to": TensorProto.UINT4},
            out_elem=TensorProto.UINT4)
    np.testing.assert_array_equal(y.astype(np.int32), [1, 15, 7])
    y = run("BitCast", 26, [np.array(1.0, np.float32)], {"to": TensorProto.INT32}, out_elem=TensorProto.INT32)
    assert y.shape == () and int(y) == 0x3F800000
    with pytest.raises(EvaluationError, match="width"):
        run("BitCast", 26, [f32(1.0)], {"to": TensorProto.INT64}, out_elem=TensorProto.INT64)
