"""Corpus source: models authored with onnxscript.

onnxscript reads the type annotations of a ``@script`` function at definition time from this
module's globals, so this module imports onnxscript at the top and has no
``from __future__ import annotations``; it is imported only when the corpus is built.
"""

from pathlib import Path

import numpy as np
import onnxscript
from onnxscript import FLOAT, INT64, script
from onnxscript import opset18 as op
from onnxscript.values import Opset

from corpus_common import Entry, normal, rng_for

local = Opset("corpus.local", 1)


@script(local)
def Swish(x):
    """A model-local function (Clause 5.3.3): x * sigmoid(x)."""
    return op.Mul(x, op.Sigmoid(x))


@script()
def swish_mlp(x: FLOAT["N", 8], w1: FLOAT[8, 16], w2: FLOAT[16, 3]) -> FLOAT["N", 3]:
    """Two matrix products around the local Swish, then Softmax."""
    return op.Softmax(op.MatMul(Swish(op.MatMul(x, w1)), w2), axis=-1)


@script()
def damped_cosine(x: FLOAT["N"], steps: INT64) -> FLOAT["N"]:
    """A Loop of ``steps`` iterations: acc = 0.9 * acc + cos(x)."""
    acc = op.Identity(x)
    for i in range(steps):
        acc = op.Add(op.Mul(acc, op.Constant(value_float=0.9)), op.Cos(x))
    return acc


def build(out: Path) -> list:
    """Write both models with seeded inputs (weights are inputs, so they too are fed)."""
    rng = rng_for("onnxscript")
    models = [
        ("onnxscript_swish_mlp", swish_mlp,
         {"x": normal(rng, (4, 8)), "w1": normal(rng, (8, 16)), "w2": normal(rng, (16, 3))}),
        ("onnxscript_loop", damped_cosine, {"x": normal(rng, (6,)), "steps": np.array(5, np.int64)}),
    ]
    entries = []
    for name, fn, inputs in models:
        (out / f"{name}.onnx").write_bytes(fn.to_model_proto().SerializeToString())
        entries.append(Entry(name, "onnxscript", onnxscript.__version__, inputs))
    return entries
