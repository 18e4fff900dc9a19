"""Optimized model files cross runtimes, both ways.

* onnxruntime's saved optimized files (``optimized_model_filepath``) at ORT_ENABLE_BASIC, EXTENDED
  and ALL — com.microsoft fusions, the NCHWc layout operators of com.microsoft.nchwc, the
  default-domain LayerNormalization-1 in a graph importing ai.onnx 12 — run on onnxkit with
  onnxruntime's results (corpus models, and single NCHWc nodes onnxruntime runs as written).
* onnxkit's saved optimized files (ai.onnxkit nodes written as standard or com.microsoft operators,
  or expanded: onnxkit/runtime/optimizer/portable.py) load in onnxruntime and give the optimized
  session's results.

The corpus models chosen cover every operator the other runtime's file holds
(``python tests/optimizer/test_cross_runtime_files.py`` runs every corpus model, both ways).
"""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import onnxkit  # noqa: E402
from onnxkit.runtime.optimizer.portable import FORMAT_KEY  # noqa: E402

CORPUS_TESTS = Path(__file__).resolve().parent.parent / "corpus"
if str(CORPUS_TESTS) not in sys.path:
    sys.path.insert(0, str(CORPUS_TESTS))

from corpus_outcome import compare  # noqa: E402

helper, TP = onnx.helper, onnx.TensorProto
LEVELS = {"basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
          "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
          "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
#: corpus models whose onnxruntime files hold every kind of node onnxruntime writes for the corpus:
#: NCHWc Conv (plain and blocked input, depthwise, Sum, Relu / HardSigmoid), ReorderInput / Output,
#: MaxPool, AveragePool, GlobalAveragePool, Upsample (nearest, linear), Reshape and Concat of
#: blocked tensors, LayerNormalization-1 (rapidocr_rec_v4, ai.onnx 12), com.microsoft fusions
ORT_FILES = ["small_resnet_ts", "unet_resize_ts", "rapidocr_cls_v2", "rapidocr_rec_v4", "magika_standard_v3_3",
             "hf_bert_ts", "hf_gpt2_dynamo"]
#: corpus models whose onnxkit files held ai.onnxkit nodes: Attention (guarded and not), Gelu
#: (erf, tanh), HardSwish (ai.onnx 12)
ONNXKIT_FILES = ["hf_bert_ts", "hf_gpt2_ts", "hf_vit_dynamo", "attention_encoder_ts", "conv1d_audio_ts",
                 "rapidocr_cls_v2", "magika_standard_v3_3"]


@pytest.fixture(scope="module")
def corpus():
    from corpus_cache import ensure_corpus

    out, manifest = ensure_corpus(log=lambda line: print(line, file=sys.stderr))
    return out


def _copy_model(out: Path, name: str, folder: Path) -> Path:
    """``name``'s model and its external data file copied into ``folder`` (a saved optimized file
    names the data file beside it, as the source model does)."""
    for f in out.glob(f"{name}.onnx*"):
        shutil.copy(f, folder / f.name)
    return folder / f"{name}.onnx"


def _ort(path, level=ort.GraphOptimizationLevel.ORT_DISABLE_ALL, save=None):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.log_severity_level = 3
    if save:
        so.optimized_model_filepath = str(save)
    return ort.InferenceSession(path if isinstance(path, bytes) else str(path), so, providers=["CPUExecutionProvider"])


def _agree(got, want, what: str) -> None:
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        _, why = compare(g, w, f"{what} output {i}")
        assert not why, why


def _onnxkit(path, so=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return onnxkit.InferenceSession(path if isinstance(path, bytes) else str(path), so)


def check_ort_file(out: Path, name: str, level: str, folder: Path) -> set:
    """onnxruntime's file of ``name`` at ``level`` runs on onnxkit with onnxruntime's results;
    the (domain, op_type) of the file's nodes outside ai.onnx."""
    from corpus_cache import load_inputs

    feeds = load_inputs(out, name)
    src = _copy_model(out, name, folder)
    saved = folder / f"{name}.{level}.onnx"
    want = _ort(src, LEVELS[level], saved).run(None, feeds)
    got = _onnxkit(saved).run(None, feeds)
    _agree(got, want, f"{name} ({level})")
    m = onnx.load(str(saved), load_external_data=False)
    return {(n.domain, n.op_type) for n in m.graph.node if n.domain not in ("", "ai.onnx")}


def check_onnxkit_file(out: Path, name: str, folder: Path) -> dict:
    """onnxkit's saved optimized file of ``name`` loads in onnxruntime with the optimized session's
    results; the session's rewrites."""
    from corpus_cache import load_inputs

    feeds = load_inputs(out, name)
    src = _copy_model(out, name, folder)
    so = onnxkit.SessionOptions()
    so.optimized_model_filepath = str(folder / f"{name}.onnxkit.onnx")
    sess = _onnxkit(src, so)
    want = sess.run(None, feeds)
    m = onnx.load(so.optimized_model_filepath, load_external_data=False)
    assert not [n.op_type for n in m.graph.node if n.domain == "ai.onnxkit"]
    assert "ai.onnxkit" not in {o.domain for o in m.opset_import}
    got = _ort(so.optimized_model_filepath).run(None, feeds)
    _agree(got, want, f"{name} (onnxkit's file in onnxruntime)")
    return {k: v for k, v in sess.optimized.rewrites.items() if v}


@pytest.mark.parametrize("level", list(LEVELS))
def test_onnxruntimes_files_of_corpus_models_run_on_onnxkit(corpus, level, tmp_path):
    ops = set()
    for name in ORT_FILES:
        ops |= check_ort_file(corpus, name, level, tmp_path)
    if level == "all":       # the NCHWc layout operators were exercised
        assert {("com.microsoft.nchwc", op) for op in ("ReorderInput", "ReorderOutput", "Conv", "MaxPool",
                                                       "AveragePool", "GlobalAveragePool", "Upsample")} <= ops
    if level != "basic":
        assert ("com.microsoft", "FusedConv") in ops or level == "all"
        assert ("com.microsoft", "SkipLayerNormalization") in ops


def test_onnxkits_files_of_corpus_models_load_in_onnxruntime(corpus, tmp_path):
    fused = {}
    for name in ONNXKIT_FILES:
        for k, v in check_onnxkit_file(corpus, name, tmp_path).items():
            fused[k] = fused.get(k, 0) + v
    assert fused.get("attention") and fused.get("gelu") and fused.get("hardswish"), fused


# -- single nodes -------------------------------------------------------------------------------

def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _run_both(model, feeds):
    """``model`` on onnxruntime (its optimizer off: the nodes as written) and onnxkit, equal."""
    data = model.SerializeToString()
    want = _ort(data).run(None, feeds)
    got = _onnxkit(data).run(None, feeds)
    _agree(got, want, model.graph.name)
    return got


def _nchwc_model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "nchwc", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset),
                                               helper.make_opsetid("com.microsoft.nchwc", 1)])


def _block():
    from onnxkit_microsoft.kernels.nchwc import block_size

    return block_size()


@pytest.mark.parametrize("channels_last", [0, 1])
@pytest.mark.parametrize("pool", ["GlobalMaxPool", "GlobalAveragePool", "MaxPool", "AveragePool"])
def test_reorders_and_pools_as_onnxruntime(channels_last, pool):
    """ReorderInput (NCHW or NHWC, channels padded to the block), a pool on the blocked tensor,
    ReorderOutput back: onnxruntime's values, padded channels cut off."""
    c = 20                                       # not a multiple of 8 or 16: padded channels
    shape = [2, 5, 6, c] if channels_last else [2, c, 5, 6]
    attrs = {}
    if pool == "MaxPool":
        attrs = {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]}
    elif pool == "AveragePool":
        attrs = {"kernel_shape": [2, 3], "pads": [1, 1, 0, 1], "count_include_pad": 1}
    nodes = [helper.make_node("ReorderInput", ["x"], ["b"], domain="com.microsoft.nchwc", channels_last=channels_last),
             helper.make_node(pool, ["b"], ["p"], domain="com.microsoft.nchwc", **attrs),
             helper.make_node("ReorderOutput", ["p"], ["y"], domain="com.microsoft.nchwc", channels=c,
                              channels_last=channels_last)]
    m = _nchwc_model(nodes, [_vi("x", TP.FLOAT, shape)], [_vi("y", TP.FLOAT, None)])
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    _run_both(m, {"x": x})


@pytest.mark.parametrize("mode,ctm", [("nearest", "asymmetric"), ("linear", "asymmetric"), ("linear", "half_pixel"),
                                      ("linear", "align_corners")])
def test_upsample_as_onnxruntime(mode, ctm):
    c = 2 * _block()
    nodes = [helper.make_node("ReorderInput", ["x"], ["b"], domain="com.microsoft.nchwc"),
             helper.make_node("Upsample", ["b"], ["u"], domain="com.microsoft.nchwc", scales=[1, 1, 3, 2], mode=mode,
                              coordinate_transformation_mode=ctm),
             helper.make_node("ReorderOutput", ["u"], ["y"], domain="com.microsoft.nchwc", channels=c)]
    m = _nchwc_model(nodes, [_vi("x", TP.FLOAT, [1, c, 4, 5])], [_vi("y", TP.FLOAT, None)])
    x = np.random.default_rng(4).standard_normal((1, c, 4, 5)).astype(np.float32)
    y = _run_both(m, {"x": x})[0]
    assert y.shape == (1, c, 12, 10)


def _conv_chain(cin: int, group: int, residual: bool, act: str):
    """Conv -> (Add of a second Conv) -> activation, as standard nodes: onnxruntime's ALL level turns
    it into NCHWc Convs with reordered filters (and Sum, activation)."""
    rng = np.random.default_rng(cin + group)
    m = 32
    w = (rng.standard_normal((m, cin // group, 3, 3)) * 0.3).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    w2 = (rng.standard_normal((m, m, 1, 1)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=group),
             helper.make_node("Conv", ["c", "w2"], ["c2"])]
    last = "c2"
    if residual:
        nodes.append(helper.make_node("Add", ["c2", "c"], ["s"]))
        last = "s"
    nodes.append(helper.make_node(act, [last], ["y"]))
    inits = [onnx.numpy_helper.from_array(a, n) for a, n in ((w, "w"), (b, "b"), (w2, "w2"))]
    g = helper.make_graph(nodes, "conv", [_vi("x", TP.FLOAT, [1, cin, 9, 7])], [_vi("y", TP.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("cin,group,residual,act", [(3, 1, False, "Relu"), (32, 1, True, "Relu"),
                                                    (32, 32, True, "HardSigmoid"), (16, 1, False, "Sigmoid")])
def test_nchwc_convolutions_onnxruntime_writes_run_on_onnxkit(cin, group, residual, act, tmp_path):
    model = _conv_chain(cin, group, residual, act)
    src = tmp_path / "conv.onnx"
    onnx.save(model, str(src))
    x = np.random.default_rng(5).standard_normal((1, cin, 9, 7)).astype(np.float32)
    saved = tmp_path / "conv.all.onnx"
    want = _ort(src, LEVELS["all"], saved).run(None, {"x": x})
    ops = [(n.domain, n.op_type) for n in onnx.load(str(saved)).graph.node]
    assert ("com.microsoft.nchwc", "Conv") in ops
    _agree(_onnxkit(saved).run(None, {"x": x}), want, "conv chain")


def test_nchwc_kernels_on_the_gpu_backend(tmp_path):
    """The kernels are portable (the array API): the torch backend (CUDA, or torch's CPU device
    where there is none) gives onnxruntime's values too, with no per-node fallback."""
    pytest.importorskip("torch")
    model = _conv_chain(32, 32, True, "HardSigmoid")
    onnx.save(model, str(tmp_path / "conv.onnx"))
    x = np.random.default_rng(5).standard_normal((1, 32, 9, 7)).astype(np.float32)
    want = _ort(tmp_path / "conv.onnx", LEVELS["all"], tmp_path / "conv.all.onnx").run(None, {"x": x})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sess = onnxkit.InferenceSession(str(tmp_path / "conv.all.onnx"), backend="gpu")
    assert sess.fallbacks == []
    _agree(sess.run(None, {"x": x}), want, "conv chain, gpu backend")
    c = 32
    nodes = [helper.make_node("ReorderInput", ["x"], ["b"], domain="com.microsoft.nchwc", channels_last=1),
             helper.make_node("Upsample", ["b"], ["u"], domain="com.microsoft.nchwc", scales=[1, 1, 3, 2], mode="linear",
                              coordinate_transformation_mode="half_pixel"),
             helper.make_node("MaxPool", ["u"], ["p"], domain="com.microsoft.nchwc", kernel_shape=[2, 2]),
             helper.make_node("ReorderOutput", ["p"], ["y"], domain="com.microsoft.nchwc", channels=c)]
    m = _nchwc_model(nodes, [_vi("x", TP.FLOAT, [1, 4, 5, c])], [_vi("y", TP.FLOAT, None)])
    x = np.random.default_rng(4).standard_normal((1, 4, 5, c)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sess = onnxkit.InferenceSession(m.SerializeToString(), backend="gpu")
    _agree(sess.run(None, {"x": x}), _ort(m.SerializeToString()).run(None, {"x": x}), "upsample, gpu backend")


def test_a_block_size_mismatch_is_a_clear_error():
    b = _block()
    nodes = [helper.make_node("ReorderOutput", ["x"], ["y"], domain="com.microsoft.nchwc", channels=3)]
    m = _nchwc_model(nodes, [_vi("x", TP.FLOAT, [1, b + 4, 2, 2])], [_vi("y", TP.FLOAT, None)])
    with pytest.raises(onnxkit.OnnxkitError, match="block size"):
        _onnxkit(m.SerializeToString()).run(None, {"x": np.zeros((1, b + 4, 2, 2), np.float32)})


@pytest.mark.parametrize("opset", [12, 16])
def test_layer_normalization_1_below_ai_onnx_17_as_onnxruntime(opset):
    """onnxruntime registers LayerNormalization-1 in ai.onnx (its fusion writes it at any opset):
    bound below ai.onnx 17 as an extension (the checker says so: a warning), with its results."""
    rng = np.random.default_rng(6)
    scale, bias = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    node = helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-5)
    g = helper.make_graph([node], "ln", [_vi("x", TP.FLOAT, [2, 3, 8])], [_vi("y", TP.FLOAT, [2, 3, 8])],
                          [onnx.numpy_helper.from_array(scale, "s"), onnx.numpy_helper.from_array(bias, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    y = _run_both(m, {"x": x})[0]
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * scale + bias
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    reg = onnxkit.InferenceSession(m.SerializeToString()).registry
    assert reg.is_extension(reg.bind("", "LayerNormalization", opset))
    assert not reg.is_extension(reg.bind("", "LayerNormalization", 17))


# -- onnxkit's files: the portable forms -----------------------------------------------------------

def _saved(model, tmp_path, fmt=None):
    so = onnxkit.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    if fmt is not None:
        so.add_session_config_entry(FORMAT_KEY, fmt)
    sess = _onnxkit(model.SerializeToString(), so)
    return sess, onnx.load(so.optimized_model_filepath)


def _gelu_tanh(elem, opset):
    x = "x"
    nodes = [helper.make_node("Mul", [x, x], ["x2"]), helper.make_node("Mul", ["x2", x], ["x3"]),
             helper.make_node("Mul", ["x3", "c"], ["cx3"]), helper.make_node("Add", [x, "cx3"], ["inner"]),
             helper.make_node("Mul", ["inner", "k"], ["ki"]), helper.make_node("Tanh", ["ki"], ["t"]),
             helper.make_node("Add", ["t", "one"], ["t1"]), helper.make_node("Mul", [x, "t1"], ["xt"]),
             helper.make_node("Mul", ["xt", "half"], ["y"])]
    dt = helper.tensor_dtype_to_np_dtype(elem)
    inits = [onnx.numpy_helper.from_array(np.array(v, dt), n)
             for n, v in (("c", 0.044715), ("k", np.sqrt(2 / np.pi)), ("one", 1.0), ("half", 0.5))]
    g = helper.make_graph(nodes, "gelu", [_vi("x", elem, [3, 4])], [_vi("y", elem, [3, 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("elem,op", [(TP.FLOAT, "FastGelu"), (TP.DOUBLE, "Tanh")])
def test_tanh_gelu_is_saved_as_fast_gelu_or_its_formula(elem, op, tmp_path):
    model = _gelu_tanh(elem, 17)
    sess, saved = _saved(model, tmp_path)
    assert sess.optimized.rewrites["gelu"] == 1
    assert op in [n.op_type for n in saved.graph.node]
    x = np.linspace(-4, 4, 12).reshape(3, 4).astype(helper.tensor_dtype_to_np_dtype(elem))
    want = sess.run(None, {"x": x})
    got = ort.InferenceSession(saved.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    _agree(got, want, "gelu")


def test_hard_swish_below_opset_14_is_saved_as_hard_sigmoid_times_x(tmp_path):
    nodes = [helper.make_node("Add", ["x", "three"], ["a"]), helper.make_node("Clip", ["a", "zero", "six"], ["c"]),
             helper.make_node("Mul", ["x", "c"], ["m"]), helper.make_node("Div", ["m", "six"], ["y"])]
    inits = [onnx.numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("three", 3.0), ("zero", 0.0),
                                                                               ("six", 6.0))]
    g = helper.make_graph(nodes, "hs", [_vi("x", TP.FLOAT, [2, 5])], [_vi("y", TP.FLOAT, [2, 5])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])
    sess, saved = _saved(model, tmp_path)
    assert sess.optimized.rewrites["hardswish"] == 1
    assert [n.op_type for n in saved.graph.node] == ["HardSigmoid", "Mul"]
    x = np.linspace(-5, 5, 10).reshape(2, 5).astype(np.float32)
    _agree(ort.InferenceSession(saved.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x}),
           sess.run(None, {"x": x}), "hardswish")


def test_the_onnxkit_format_keeps_the_fused_node_and_a_bad_value_is_refused(tmp_path):
    model = _gelu_tanh(TP.FLOAT, 17)
    _, saved = _saved(model, tmp_path, "onnxkit")
    assert [(n.domain, n.op_type) for n in saved.graph.node] == [("ai.onnxkit", "Gelu")]
    with pytest.raises(onnxkit.OnnxkitError, match="optimized_model_format"):
        _saved(model, tmp_path, "compact")


def test_attention_from_opset_23_is_saved_as_ai_onnx_attention(tmp_path):
    from test_opt_attention import _feed_for, _graph

    proto = _graph(mask=None, guard=False, opset=23)
    sess, saved = _saved(proto, tmp_path)
    assert sess.optimized.rewrites["attention"] == 1
    assert ("", "Attention") in [(n.domain, n.op_type) for n in saved.graph.node]
    feed = _feed_for(proto)
    _agree(ort.InferenceSession(saved.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed),
           sess.run(None, feed), "attention-23")


def test_a_guarded_attention_is_saved_as_its_expansion(tmp_path):
    from test_opt_attention import _feed_for, _graph

    proto = _graph(opset=17)
    sess, saved = _saved(proto, tmp_path)
    assert sess.optimized.rewrites["attention"] == 1
    ops = [n.op_type for n in saved.graph.node]
    assert "Attention" not in ops and {"Softmax", "IsNaN", "Where"} <= set(ops)
    feed = _feed_for(proto)
    feed["pad"][0, :, 2, :] = False             # a fully masked row: the guard's zeros
    _agree(ort.InferenceSession(saved.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed),
           sess.run(None, feed), "guarded attention")


if __name__ == "__main__":     # every corpus model, both ways
    import json
    import tempfile

    from corpus_cache import ensure_corpus

    out, manifest = ensure_corpus()
    bad = 0
    for entry in json.loads((out / "manifest.json").read_text())["models"]:
        with tempfile.TemporaryDirectory() as tmp:
            for what, check in [(lv, lambda lv=lv: check_ort_file(out, entry["name"], lv, Path(tmp))) for lv in LEVELS] + \
                    [("onnxkit", lambda: check_onnxkit_file(out, entry["name"], Path(tmp)))]:
                try:
                    check()
                    print(f"{entry['name']} {what}: ok", flush=True)
                except Exception as exc:  # noqa: BLE001 - a report
                    bad += 1
                    print(f"{entry['name']} {what}: {type(exc).__name__}: {exc}"[:400], flush=True)
    print(f"{bad} failures")
    sys.exit(1 if bad else 0)
