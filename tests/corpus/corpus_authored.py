"""Corpus source: models authored with spox, and models rewritten by onnxruntime.

The spox models are written here operator by operator (If, TopK, reductions).  The
onnxruntime ones are what users get when they save onnxruntime's optimized graph or run its transformer optimizer: they use ``com.microsoft``
operators, which onnxkit has no domain for, so they must be *reported* unsupported by name.
They are built from ``hf_bert_ts.onnx`` and ``small_resnet_ts.onnx``, so this source runs
after ``corpus_hf`` and ``corpus_torch``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from pathlib import Path

import numpy as np

from corpus_common import Entry, integers, normal, rng_for


def _spox_scorer(rng):
    """spox: standardize rows, a linear layer, ReLU, then the top-3 scores and their indices."""
    import spox.opset.ai.onnx.v17 as op
    from spox import Tensor, argument, build

    x = argument(Tensor(np.float32, ("N", 8)))
    mean = op.reduce_mean(x, axes=[1])
    centered = op.sub(x, mean)
    std = op.sqrt(op.add(op.reduce_mean(op.mul(centered, centered), axes=[1]),
                         op.constant(value=np.float32(1e-5))))
    h = op.relu(op.add(op.matmul(op.div(centered, std), op.constant(value=normal(rng, (8, 6)))),
                       op.constant(value=normal(rng, (6,)))))
    values, indices = op.top_k(h, op.constant(value=np.array([3], np.int64)), axis=1)
    return build(inputs={"x": x}, outputs={"scores": values, "indices": indices}), {"x": normal(rng, (4, 8))}


def _spox_gated(rng):
    """spox: an If on the sign of the input's sum chooses between two branches; then a Where."""
    import spox.opset.ai.onnx.v17 as op
    from spox import Tensor, argument, build

    x = argument(Tensor(np.float32, ("N", 5)))
    total = op.reduce_sum(x, keepdims=0)
    (branch,) = op.if_(op.greater(total, op.constant(value=np.float32(0))),
                       then_branch=lambda: [op.mul(x, op.constant(value=np.float32(2)))],
                       else_branch=lambda: [op.neg(op.abs(x))])
    out = op.where(op.greater(branch, op.constant(value=np.float32(0.5))), branch, op.tanh(branch))
    return build(inputs={"x": x}, outputs={"y": out}), {"x": normal(rng, (3, 5))}


def _ort_optimized(out: Path) -> list[Entry]:
    """onnxruntime's saved optimized graph (ORT_ENABLE_EXTENDED: fusions into com.microsoft
    operators, not the machine-dependent NCHWc layout of ORT_ENABLE_ALL) and its transformer
    optimizer."""
    import onnxruntime as ort
    from onnxruntime.transformers.optimizer import optimize_model

    entries = []
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(out / "ort_optimized_small_resnet.onnx")
    so.log_severity_level = 3
    ort.InferenceSession(str(out / "small_resnet_ts.onnx"), so, providers=["CPUExecutionProvider"])
    entries.append(Entry("ort_optimized_small_resnet", "onnxruntime graph optimizer (ORT_ENABLE_EXTENDED)",
                         ort.__version__, {"x": normal(rng_for("ort_optimized_small_resnet"), (3, 3, 16, 16))},
                         note="small_resnet_ts.onnx as onnxruntime saves it optimized"))
    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    with contextlib.redirect_stdout(io.StringIO()):
        opt = optimize_model(str(out / "hf_bert_ts.onnx"), model_type="bert", num_heads=2, hidden_size=64)
    opt.save_model_to_file(str(out / "ort_transformers_bert.onnx"))
    rng = rng_for("ort_transformers_bert")
    entries.append(Entry("ort_transformers_bert", "onnxruntime.transformers optimizer", ort.__version__,
                         {"input_ids": integers(rng, 1000, (2, 12)), "attention_mask": np.ones((2, 12), np.int64)},
                         note="hf_bert_ts.onnx with fused attention"))
    return entries


def build(out: Path) -> list[Entry]:
    """Write the spox models, then derive the onnxruntime-optimized ones."""
    from importlib.metadata import version

    entries = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in (("spox_scorer", _spox_scorer), ("spox_gated", _spox_gated)):
            model, inputs = fn(rng_for(name))
            (out / f"{name}.onnx").write_bytes(model.SerializeToString())
            entries.append(Entry(name, "spox", version("spox"), inputs))
        entries.extend(_ort_optimized(out))
    return entries
