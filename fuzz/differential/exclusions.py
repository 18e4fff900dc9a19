"""The known disagreements the fuzzer does not count as onnxkit failures: an explicit list.

Each entry is a name, the reason, and how it is recognised.  The driver counts exclusions by
name, so a run's figures say how many models each entry set aside.

* ``random-output`` — Dropout in training mode (ratio > 0) draws its mask at random in every
  runtime (onnxruntime's and onnxkit's generators differ): such outputs are compared by shape and
  element type and checked by property (each element 0 or ``x / (1 - ratio)``; with ratio >= 0.5
  over >= 40 elements some element dropped), the model's other outputs as usual.
* ``dropout-legacy-mask`` — Dropout-7..9's mask in an inference run is "not filled" (Part 2):
  onnxruntime returns zeros, onnx.reference True; compared by shape and element type only.
* ``onnxruntime-outvoted`` — onnxkit and onnxruntime disagree beyond tolerance and
  ``onnx.reference`` agrees with onnxkit (the tie-break of the brief).
* ``reference-alone`` — onnxruntime cannot run the model (nor its float32 copy, used where it has no
  float64 kernel), onnx.reference is the oracle, and it disagrees with both onnxkit modes, which
  agree with each other (checked by hand: its dilated Conv computes 0 * inf, its
  BatchNormalization-9 and its LpPool over NaN were wrong).  The two onnxkit modes disagreeing is
  a failure whatever the reference says.
* ``no-oracle`` — neither onnxruntime nor onnx.reference runs the model (a generator slip):
  nothing to compare with.
* Generator restrictions (models not generated, so not counted): no NaN into MaxPool (onnxruntime
  skips NaN in a max, numpy propagates it; Part 2 does not say), no infinities into an unguarded
  attention pattern's Q (a row of -inf scores gives NaN there and zeros fused: documented in
  ``onnxkit/runtime/optimizer/attention.py``), no RNN in float64 or layout 1 (onnxruntime has no
  such kernels), no out-of-range float -> uint8 Cast (undefined behaviour in C++), no NaN or inf
  into Resize and no tf_crop_and_resize (the portable kernel differs from onnxruntime there:
  taps of weight 0 times inf or NaN, and cropped axes; its fast path is bit-identical to it), no
  dilated MaxPool with ``auto_pad`` SAME_UPPER / SAME_LOWER (onnxkit gives Part 2's
  ``ceil(input / stride)`` output extent, as onnx's shape inference does; onnxruntime and
  onnx.reference give one less where the dilated window exceeds the input: 2x3x3x2x3,
  kernel [1, 2, 3], dilations [1, 1, 2], strides [1, 2, 2]: last extent 2 against 1), no Clip
  with an absent bound after a float16 / float64 Conv (an absent bound is the type's limit, Part
  2: onnxkit clips float16's +-inf to +-65504; onnxruntime's float16 Clip and onnx.reference keep
  +-inf, and a float64 model is checked on its float32 copy, whose limits are float32's).
* :data:`LOOSE` — float64 compared at float32 tolerance where the oracle computes in float32.
* :data:`REFUSALS` — onnxkit errors that are documented refusals (README), recognised by
  message; none is expected from the generated models, so the list is short.
"""

from __future__ import annotations

import re

#: (name, reason, regular expression on the onnxkit error message)
REFUSALS = (
)

#: every exclusion name the oracle can give, with its reason
EXCLUSIONS = {
    "random-output": "Dropout in training mode: a random mask in every runtime; compared by shape/type and property",
    "dropout-legacy-mask": "Dropout-7..9 in inference: Part 2 leaves the mask unfilled (onnxruntime gives zeros, "
                           "onnx.reference True): compared by shape and type",
    "onnxruntime-outvoted": "onnxruntime disagrees with onnxkit and onnx.reference sides with onnxkit",
    "reference-alone": "onnxruntime refuses the run (and its float32 copy), onnx.reference is the oracle and "
                       "disagrees with both onnxkit modes, which agree (its Conv with dilations makes 0 * inf, its "
                       "BatchNormalization-9 and LpPool with NaN disagreed with a direct computation)",
    "no-oracle": "neither onnxruntime nor onnx.reference runs the model",
    **{name: reason for name, reason, _ in REFUSALS},
}


#: float64 results compared at float32's tolerance, where the oracle itself computes (part of) it in float32
LOOSE = {
    "reference-float64": "onnx.reference is the oracle (onnxruntime has no float64 kernel: Erf, Conv-1 ...) and "
                         "its float64 Erf is float32-accurate (errors ~2e-8 measured): float64 at float32 tolerance",
    "stash-type-float32": "GroupNormalization-21 with stash_type 1 on float64: onnxruntime computes stage one in "
                          "float32 (Part 2), onnxkit in float64 (its kernels' documented choice): float32 tolerance, "
                          "or, where a group's variance is far below its mean squared (onnxruntime's float32 "
                          "E[x^2] - E[x]^2 cancels), onnxkit equal to a direct float64 computation",
}
EXCLUSIONS.update(LOOSE)


def loose_reason(model, oracle: str, want) -> str:
    """The :data:`LOOSE` entry under which a float64 mismatch is compared at float32 tolerance, or ``''``."""
    import numpy as np

    if np.asarray(want).dtype != np.float64:
        return ""
    if oracle.startswith("onnx.reference"):
        return "reference-float64"
    if any(n.op_type == "GroupNormalization" for n in model.graph.node):
        return "stash-type-float32"
    return ""


def refusal_reason(model, exc) -> str:
    """The name of the documented refusal ``exc`` (an OnnxkitError) is, or ``''``."""
    text = str(exc)
    for name, _, pattern in REFUSALS:
        if re.search(pattern, text):
            return name
    return ""


def direct_group_norm(model, feeds: dict):
    """The float64 two-pass GroupNormalization of a model that is one GroupNormalization-21
    node of a graph input and two initializers (the norm family's), else None: the oracle's
    own computation where onnxruntime's float32 stage one cancels (:data:`LOOSE`)."""
    import numpy as np
    from onnx import numpy_helper

    g = model.graph
    if len(g.node) != 1 or g.node[0].op_type != "GroupNormalization" or len(g.node[0].input) != 3:
        return None
    node = g.node[0]
    inits = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in g.initializer}
    x = feeds.get(node.input[0])
    if x is None or node.input[1] not in inits or node.input[2] not in inits or x.dtype != np.float64 or x.ndim < 3:
        return None
    attrs = {a.name: a for a in node.attribute}
    groups = attrs["num_groups"].i
    eps = attrs["epsilon"].f if "epsilon" in attrs else 1e-5
    n, c = x.shape[:2]
    if groups <= 0 or c % groups or inits[node.input[1]].size != c:
        return None
    xg = x.reshape(n, groups, -1)
    d = xg - xg.mean(axis=2, keepdims=True)
    y = (d / np.sqrt((d * d).mean(axis=2, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y * inits[node.input[1]].reshape(shape) + inits[node.input[2]].reshape(shape)
