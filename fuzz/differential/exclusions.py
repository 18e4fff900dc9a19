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
  taps of weight 0 times inf or NaN, and cropped axes; its fast path is bit-identical to it).
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
                          "float32 (Part 2), onnxkit in float64 (its kernels' documented choice): float32 tolerance",
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
