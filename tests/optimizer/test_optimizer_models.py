"""Whole models give the same results with the optimizer on (ORT_ENABLE_ALL) as off
(ORT_DISABLE_ALL), within onnxkit's tolerances: the nine light models of the ONNX test package
(also against onnxruntime) and the corpus models on which the passes rewrite something.  The
optimized model also checks with no error and no warning the model as given lacked."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import onnxkit
from onnxkit import InferenceSession, SessionOptions
from optimizer_cases import off, ort, within

ROOT = Path(__file__).resolve().parents[2]
#: the light models of the ONNX test package; no pass applies to zfnet512 (no Identity, Dropout, BatchNormalization)
LIGHT = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet", "vgg19"]
#: corpus models on which the passes rewrite (identity, cast, conv_bn, matmul_add, gelu, attention; onehot on the plan), by pass
CORPUS = {"hf_bert_ts": "identity, cast, attention", "hf_vit_ts": "attention", "hf_gpt2_ts": "attention", "hf_t5_ts": "identity, cast", "attention_encoder_ts": "identity, cast",
          "rapidocr_cls_v2": "conv_bn, matmul_add", "rapidocr_rec_v4": "conv_bn", "magika_standard_v3_3": "matmul_add, gelu, onehot",
          "skl_mlp_string_labels": "cast, matmul_add", "silero_vad_16k_op15": "cast"}


def same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return within(a, b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def _compare(model, feed, oracle=None, oracle_skips=()) -> int:
    """Optimized vs plain (every output) and vs ``oracle`` (the outputs at the indices not in
    ``oracle_skips``); returns the number of rewrites."""
    on = InferenceSession(model, SessionOptions())
    assert on.optimized.changed
    before = {d.code for d in onnxkit.check_model(on.model).warnings}
    report = onnxkit.check_model(on.optimized.model)
    assert report.ok and {d.code for d in report.warnings} <= before
    optimized, plain = on.run(None, feed), InferenceSession(model, off()).run(None, feed)
    assert same(optimized, plain)
    if oracle is not None:
        expected = oracle.run(None, feed)
        keep = [k for k in range(len(expected)) if k not in oracle_skips]
        assert same([optimized[k] for k in keep], [expected[k] for k in keep])
    return sum(on.optimized.rewrites.values())


def _logits_as_outputs(path) -> tuple:
    """The model with each Softmax graph output's input (the logits) added as a graph output,
    and the indices of those Softmax outputs.  The light models' random weights give logits near
    1e10 (squeezenet: 6.8e9), where an ulp is 512-1024: a different but equally exact summation
    order (another BLAS kernel, thread count or CPU) moves a logit by a few ulps, which the
    Softmax turns into a different result.  The logits are compared with onnxruntime; the
    Softmax outputs only optimized against plain onnxkit (the same kernels)."""
    import onnx

    m = onnx.load(str(path))
    producers = {o: n for n in m.graph.node for o in n.output}
    skips = []
    for k, out in enumerate(list(m.graph.output)):
        node = producers.get(out.name)
        if node is not None and node.op_type == "Softmax":
            skips.append(k)
            m.graph.output.append(onnx.helper.make_empty_tensor_value_info(node.input[0]))
    return m.SerializeToString(), tuple(skips)


@pytest.mark.parametrize("name", LIGHT)
def test_light_model(onnx_vectors_dir, name):
    path = onnx_vectors_dir / "light" / f"light_{name}.onnx"
    data, skips = _logits_as_outputs(path)
    model = onnxkit.load(data)
    init = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(0)
    feed = {}
    for vi in model.graph.input:
        if vi.name not in init:
            feed[vi.name] = rng.standard_normal([int(d) for d in vi.type.shape.values]).astype(np.float32)
    _compare(model, feed, ort.InferenceSession(data, providers=["CPUExecutionProvider"]), skips)
    if name == "densenet121":   # Caffe's BatchNormalization + Scale (Mul, Add) pairs, each folded into one node
        assert InferenceSession(model).optimized.rewrites["channel_affine"] == 121


@pytest.fixture(scope="module")
def corpus():
    """(folder, load_inputs) of the real-world corpus, built on first use as tests/corpus does."""
    sys.path.insert(0, str(ROOT / "tests" / "corpus"))
    from corpus_cache import ensure_corpus, load_inputs

    folder, _ = ensure_corpus(log=lambda line: print(line, file=sys.stderr))
    return folder, load_inputs


@pytest.mark.parametrize("name", list(CORPUS))
def test_corpus_model(corpus, name):
    folder, load_inputs = corpus
    assert _compare(str(folder / f"{name}.onnx"), load_inputs(folder, name)) > 0


@pytest.mark.parametrize("name", ["hf_bert_ts", "hf_vit_ts", "hf_gpt2_ts"])
def test_corpus_attention_fused(corpus, name):
    """Each of the two attention layers of the corpus transformers becomes one Attention node."""
    folder, _ = corpus
    optimized = InferenceSession(str(folder / f"{name}.onnx")).optimized
    assert optimized.rewrites["attention"] == 2
    ops = [n.op_type for n in optimized.model.graph.node]
    assert ops.count("Attention") == 2 and "Softmax" not in ops


def test_corpus_magika_gelu_and_onehot(corpus):
    """magika (jax2tf): both tanh-GELU expansions (cubic term ``x * (x * (0.044715 * x))``) become
    Gelu nodes, and its one-hot byte embedding runs as one plan step reading rows of W."""
    folder, load_inputs = corpus
    s = InferenceSession(str(folder / "magika_standard_v3_3.onnx"))
    assert s.optimized.rewrites["gelu"] == 2
    ops = [st.op for st in s.plan.steps]
    assert "Equal" not in ops and "Tanh" not in ops and ops.count("ai.onnxkit::Gelu") == 2
    so = SessionOptions()
    so.add_session_config_entry("session.disable_passes", "onehot")
    assert "Equal" in [st.op for st in InferenceSession(str(folder / "magika_standard_v3_3.onnx"), so).plan.steps]
