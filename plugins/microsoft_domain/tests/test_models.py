"""Whole models made the way users make them with onnxruntime 1.32's tools, from the real-world corpus
(tests/corpus), run on onnxkit's cpu and gpu backends with default options and compared with
onnxruntime on the corpus' fixed inputs.

The derived models are built once into ``<corpus>/microsoft/`` (keyed by onnxruntime's version and
this file) — the optimizer at ORT_ENABLE_EXTENDED (``optimized_model_filepath``), the transformers
optimizer (bert, gpt2, vit, t5: its SimplifiedLayerNormalization is in ai.onnx, bound to
onnxkit-microsoft's extension of that name), ``quantize_dynamic``, ``quantize_static`` (QDQ and QOperator, a
calibration reader over the model's own inputs) and the MatMulNBits quantizer (4 bits, block 32).
Float models agree within 1e-4 of the output's largest magnitude; a model whose output is an 8-bit
value dequantized agrees within one step of that output's scale.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

CORPUS = Path(__file__).resolve().parents[3] / "tests" / "corpus"
if str(CORPUS) not in sys.path:
    sys.path.insert(0, str(CORPUS))

from corpus_cache import ensure_corpus, load_inputs  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402

#: name -> (tool, source corpus model, argument)
MODELS = {
    "ext_bert_ts": ("extended", "hf_bert_ts", None),
    "ext_bert_dynamo": ("extended", "hf_bert_dynamo", None),
    "ext_gpt2_ts": ("extended", "hf_gpt2_ts", None),
    "ext_vit_ts": ("extended", "hf_vit_ts", None),
    "ext_whisper_dynamo": ("extended", "hf_whisper_dynamo", None),
    "ext_small_resnet_ts": ("extended", "small_resnet_ts", None),
    "ext_conv1d_audio_ts": ("extended", "conv1d_audio_ts", None),
    "tr_bert_ts": ("transformers", "hf_bert_ts", "bert"),
    "tr_distilbert_ts": ("transformers", "hf_distilbert_ts", "bert"),
    "tr_gpt2_ts": ("transformers", "hf_gpt2_ts", "gpt2"),
    "tr_vit_ts": ("transformers", "hf_vit_ts", "vit"),
    "tr_vit_dynamo": ("transformers", "hf_vit_dynamo", "vit"),
    "tr_t5_ts": ("transformers", "hf_t5_ts", "t5"),
    "qdyn_bert_ts": ("dynamic", "hf_bert_ts", None),
    "qdyn_small_resnet_ts": ("dynamic", "small_resnet_ts", None),
    "qdq_small_resnet_ts": ("static", "small_resnet_ts", "QDQ"),
    "qop_small_resnet_ts": ("static", "small_resnet_ts", "QOperator"),
    "qdq_vit_ts": ("static", "hf_vit_ts", "QDQ"),
    "qdq_bert_ts": ("static", "hf_bert_ts", "QDQ"),
    "qdq_unet_resize_ts": ("static", "unet_resize_ts", "QDQ"),
    "qdyn_gpt2_ts": ("dynamic", "hf_gpt2_ts", None),
    "nbits_bert_ts": ("nbits", "hf_bert_ts", None),
    "nbits_gpt2_ts": ("nbits", "hf_gpt2_ts", None),
}


def _make(tool, src: Path, dst: Path, arg, inputs):
    logging.getLogger("onnxruntime").setLevel(logging.ERROR)
    logging.getLogger("root").setLevel(logging.ERROR)
    if tool == "extended":
        data = src.parent / f"{src.name}.data"
        if data.exists():  # the saved graph keeps its weights' external-data reference, by file name
            import shutil

            shutil.copyfile(data, dst.parent / data.name)
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = str(dst)
        so.log_severity_level = 3
        ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    elif tool == "transformers":
        from onnxruntime.transformers.optimizer import optimize_model

        logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
        with contextlib.redirect_stdout(io.StringIO()):
            optimize_model(str(src), model_type=arg, num_heads=2, hidden_size=64).save_model_to_file(str(dst))
    elif tool == "dynamic":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8)
    elif tool == "static":
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.feeds = iter([inputs])

            def get_next(self):
                return next(self.feeds, None)

        quantize_static(str(src), str(dst), Reader(), quant_format=getattr(QuantFormat, arg))
    else:
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        q = MatMulNBitsQuantizer(onnx.load(str(src)), block_size=32, is_symmetric=False)
        q.process()
        q.model.save_model_to_file(str(dst))


@pytest.fixture(scope="module")
def built():
    corpus, _ = ensure_corpus(log=lambda line: print(line, file=sys.stderr))
    out = corpus / "microsoft"
    out.mkdir(exist_ok=True)
    key = hashlib.sha256((ort.__version__ + onnx.__version__).encode() + Path(__file__).read_bytes()).hexdigest()[:16]
    stamp = out / "key.json"
    fresh = stamp.exists() and json.loads(stamp.read_text()).get("key") == key
    for name, (tool, source, arg) in MODELS.items():
        dst = out / f"{name}.onnx"
        if not (fresh and dst.exists()):
            _make(tool, corpus / f"{source}.onnx", dst, arg, load_inputs(corpus, source))
    stamp.write_text(json.dumps({"key": key}))
    return corpus, out


def _output_step(path: Path, output: str):
    """The scale of the DequantizeLinear that writes ``output`` (None if none does)."""
    m = onnx.load(str(path), load_external_data=False)
    inits = {t.name: t for t in m.graph.initializer}
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear" and output in n.output and n.input[1] in inits:
            return float(np.max(onnx.numpy_helper.to_array(inits[n.input[1]])))
    return None


@pytest.mark.parametrize("name", list(MODELS))
def test_model_runs_and_matches_onnxruntime(built, name):
    corpus, out = built
    tool, source, _ = MODELS[name]
    path = out / f"{name}.onnx"
    feeds = load_inputs(corpus, source)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref_sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    want = ref_sess.run(None, feeds)
    names = [o.name for o in ref_sess.get_outputs()]
    # onnxruntime's optimizer off: the model as written (its QDQ fusions round otherwise: on the QDQ
    # ViT its own two runs differ by 8 steps); each output must be within a step of it, and of the
    # default run within a step plus that disagreement
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    plain = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    domains = {n.domain for n in onnx.load(str(path), load_external_data=False).graph.node}
    for backend in ("cpu", "gpu"):
        sess = InferenceSession(str(path), backend)
        if backend == "gpu":
            ms = [f for f in sess.fallbacks if "com.microsoft" in str(f) or f.op_type == "SimplifiedLayerNormalization"]
            assert not ms, ms
        got = sess.run(None, feeds)
        for g, w, oname in zip(got, want, names):
            assert g.shape == w.shape and g.dtype == w.dtype, (name, backend, oname)
            step = _output_step(path, oname) if tool in ("static", "dynamic") else None
            tol = 1.01 * step if step else 1e-4 * max(1.0, float(np.max(np.abs(w))))
            if tool == "dynamic" and not step:
                tol = 2e-3 * max(1.0, float(np.max(np.abs(w))))
            err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) if w.size else 0.0
            p = plain[names.index(oname)]
            own = float(np.max(np.abs(p.astype(np.float64) - w.astype(np.float64)))) if w.size else 0.0
            err_plain = float(np.max(np.abs(g.astype(np.float64) - p.astype(np.float64)))) if w.size else 0.0
            assert err_plain <= tol and err <= tol + own, (name, backend, oname, err_plain, err, own, tol)
    if tool != "dynamic":
        assert "com.microsoft" in domains or tool == "static", (name, domains)


def test_t5_runs_its_ai_onnx_simplified_layer_normalization_as_an_extension_and_says_so(built):
    import onnxkit
    from onnxkit.cli.unsupported_cmd import extension_operators

    _, out = built
    path = out / "tr_t5_ts.onnx"
    assert extension_operators(str(path)) == [("", "SimplifiedLayerNormalization", 1, "onnxkit-microsoft", 2)]
    with pytest.warns(onnxkit.ConformanceWarning, match=r"extension-operator x2"):
        InferenceSession(str(path), "cpu")
    with pytest.raises(onnxkit.OnnxkitError, match="extension-operator"):
        InferenceSession(str(path), "cpu", strict=True)


# -- small models quantized by onnxruntime.quantization, built here (no corpus needed) -------------

def _lstm_model(path: Path):
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(3)
    H, K = 8, 6
    inits = [numpy_helper.from_array((rng.standard_normal((1, 4 * H, K)) * 0.4).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((1, 4 * H, H)) * 0.4).astype(np.float32), "R"),
             numpy_helper.from_array((rng.standard_normal((1, 8 * H)) * 0.1).astype(np.float32), "B"),
             numpy_helper.from_array((rng.standard_normal((H, 3)) * 0.5).astype(np.float32), "Wo")]
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "yh"], hidden_size=H),
             helper.make_node("Squeeze", ["yh", "ax"], ["h"]),
             helper.make_node("MatMul", ["h", "Wo"], ["out"])]
    inits.append(numpy_helper.from_array(np.array([0], np.int64), "ax"))
    g = helper.make_graph(nodes, "lstm", [helper.make_tensor_value_info("x", 1, [5, 2, K])],
                          [helper.make_tensor_value_info("out", 1, [2, 3])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return {"x": rng.standard_normal((5, 2, K)).astype(np.float32)}


def _conv_model(path: Path):
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(4)
    w1 = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((4, 3, 1, 1)) * 0.3).astype(np.float32), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["a"], ["s"]),
             helper.make_node("Conv", ["x", "w2"], ["b"]),
             helper.make_node("Concat", ["s", "b"], ["c"], axis=1),
             helper.make_node("AveragePool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("LeakyRelu", ["p"], ["y"], alpha=0.1)]
    g = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", 1, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", 1, [1, 8, 4, 4])], [w1, w2])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}


def _compare(path: Path, feeds: dict, tol_of):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    for backend in ("cpu", "gpu"):
        sess = InferenceSession(str(path), backend)
        if backend == "gpu":
            ms = [f for f in sess.fallbacks if "com.microsoft" in str(f)]
            assert not ms, ms
        got = sess.run(None, feeds)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, backend
            err = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))
            assert err <= tol_of(w), (backend, err, tol_of(w))


def test_quantize_dynamic_lstm_writes_dynamic_quantize_lstm_and_matches(tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger("root").setLevel(logging.ERROR)
    feeds = _lstm_model(tmp_path / "lstm.onnx")
    quantize_dynamic(str(tmp_path / "lstm.onnx"), str(tmp_path / "q.onnx"), weight_type=QuantType.QInt8)
    ops = {(n.domain, n.op_type) for n in onnx.load(str(tmp_path / "q.onnx")).graph.node}
    assert ("com.microsoft", "DynamicQuantizeLSTM") in ops, ops
    # onnxruntime also quantizes the activations on the fly; onnxkit computes them in float
    _compare(tmp_path / "q.onnx", feeds, lambda w: 0.03 * max(1.0, float(np.max(np.abs(w)))))


def test_quantize_static_qoperator_writes_qlinear_concat_sigmoid_average_pool_and_matches(tmp_path):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    logging.getLogger("root").setLevel(logging.ERROR)
    feeds = _conv_model(tmp_path / "conv.onnx")

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([feeds])

        def get_next(self):
            return next(self.feeds, None)

    quantize_static(str(tmp_path / "conv.onnx"), str(tmp_path / "q.onnx"), Reader(), quant_format=QuantFormat.QOperator)
    m = onnx.load(str(tmp_path / "q.onnx"))
    ops = {n.op_type for n in m.graph.node if n.domain == "com.microsoft"}
    assert {"QLinearConcat", "QLinearSigmoid", "QLinearAveragePool", "QLinearLeakyRelu"} <= ops, ops
    step = _output_step(tmp_path / "q.onnx", "y")
    assert step
    _compare(tmp_path / "q.onnx", feeds, lambda w: 1.01 * step)
