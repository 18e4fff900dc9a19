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
  ``onnx.reference`` agrees with onnxkit (the tie-break of the brief).  One such: a training-mode
  BatchNormalization whose batch variance is 0 (one element per channel) gives B exactly by Part 2's
  formula, where onnxruntime's float32 kernel is off by its rounding amplified by 1 / sqrt(epsilon)
  (tests/optimizer/test_fuzz_regressions.py).
* ``reference-alone`` — onnxruntime cannot run the model (nor its float32 copy, used where it has no
  float64 kernel), onnx.reference is the oracle, and it disagrees with both onnxkit modes, which
  agree with each other (checked by hand: its dilated Conv computes 0 * inf, its
  BatchNormalization-9 and its LpPool over NaN were wrong).  The two onnxkit modes disagreeing is
  a failure whatever the reference says.
* ``no-oracle`` — neither onnxruntime nor onnx.reference runs the model (a generator slip):
  nothing to compare with.
* Generator restrictions (models not generated, so not counted): no NaN into MaxPool (onnxruntime
  skips NaN in a max, numpy propagates it; Part 2 does not say), no RNN in float64 or layout 1 (onnxruntime has no
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
* :data:`DIRECT` — the oracle follows a function body's rounding where onnxkit computes Part 2's
  formula (HardSwish's alpha as a float attribute, GroupNormalization's E[x^2] - E[x]^2): set
  aside only where onnxkit equals the fuzzer's own float64 computation of the formula
  (:func:`direct_hard_swish`, :func:`direct_group_norm`).
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

#: disagreements where the oracle follows a function body's rounding and onnxkit Part 2's formula,
#: each accepted only where onnxkit equals the fuzzer's own direct float64 computation of the formula
DIRECT = {
    "hardswish-float32-alpha": "float64 HardSwish: onnxruntime (a float64 kernel at opset 18 only) and onnx.reference "
                               "run the function body, HardSigmoid with the float attribute alpha = 0.16666667163372 "
                               "(1/6 rounded to float32), ~4e-8 off near x = -3; onnxkit computes Part 2's x * max(0, "
                               "min(1, x / 6 + 1 / 2)) (its HardSwish fusion's pattern divides by 6): onnxkit equal to "
                               "that formula in float64 and the oracle to the float32 alpha's",
    "group-norm-cancellation": "GroupNormalization-21 on float32 / float16: onnxruntime and onnx.reference compute "
                               "stage one as the function body, Var = E[x^2] - E[x]^2 in float32, which cancels "
                               "where a group's variance is far below its mean squared (a 2-element group of mean "
                               "-1.73 and variance 1e-3: 2.3e-4 off); onnxkit's two-pass variance equal to the direct "
                               "float64 computation of Part 2's formula, some group's variance below 1% of its mean "
                               "squared",
}
EXCLUSIONS.update(DIRECT)


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


def direct_group_norm(model, feeds: dict, ill_conditioned: bool = False):
    """Part 2's GroupNormalization-21 computed directly in float64 (two-pass variance) and rounded
    once to X's type, for a model that is one GroupNormalization-21 node of a floating-point graph
    input and two initializers (the norm family's), else None: the oracle's own computation where
    onnxruntime's float32 E[x^2] - E[x]^2 cancels (:data:`LOOSE`, :data:`DIRECT`).  With
    ``ill_conditioned``, also None unless some group's variance is below 1% of its mean squared
    (where that cancellation loses digits)."""
    import numpy as np
    from onnx import numpy_helper

    g = model.graph
    if len(g.node) != 1 or g.node[0].op_type != "GroupNormalization" or len(g.node[0].input) != 3:
        return None
    node = g.node[0]
    inits = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in g.initializer}
    x = feeds.get(node.input[0])
    if x is None or node.input[1] not in inits or node.input[2] not in inits or \
            np.asarray(x).dtype not in (np.float64, np.float32, np.float16) or x.ndim < 3:
        return None
    dtype = np.asarray(x).dtype
    x = np.asarray(x, dtype=np.float64)
    attrs = {a.name: a for a in node.attribute}
    groups = attrs["num_groups"].i
    eps = attrs["epsilon"].f if "epsilon" in attrs else 1e-5
    n, c = x.shape[:2]
    if groups <= 0 or c % groups or inits[node.input[1]].size != c:
        return None
    xg = x.reshape(n, groups, -1)
    mean = xg.mean(axis=2, keepdims=True)
    d = xg - mean
    var = (d * d).mean(axis=2, keepdims=True)
    if ill_conditioned and not (var < 0.01 * mean * mean).any():
        return None
    with np.errstate(all="ignore"):
        y = (d / np.sqrt(var + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return (y * inits[node.input[1]].reshape(shape) + inits[node.input[2]].reshape(shape)).astype(dtype)


def direct_hard_swish(model, feeds: dict):
    """``(Part 2's formula, the function body's)``: ``x * max(0, min(1, x / 6 + 1 / 2))`` and the
    same with alpha = float64(float32(1 / 6)) (HardSigmoid's float attribute), both in float64, for
    a model that is one ai.onnx HardSwish node of a float64 graph input, else None
    (:data:`DIRECT`)."""
    import numpy as np

    g = model.graph
    if len(g.node) != 1 or g.node[0].op_type != "HardSwish" or g.node[0].domain not in ("", "ai.onnx"):
        return None
    x = feeds.get(g.node[0].input[0])
    if x is None or np.asarray(x).dtype != np.float64:
        return None
    x = np.asarray(x)
    alpha32 = float(np.float32(1.0 / 6.0))
    return x * np.clip(x / 6.0 + 0.5, 0.0, 1.0), x * np.clip(x * alpha32 + 0.5, 0.0, 1.0)


def direct_reason(model, feeds: dict, got, want) -> str:
    """The :data:`DIRECT` entry under which onnxkit's ``got``, apart from the oracle's ``want``, is
    set aside (onnxkit equal to the formula computed here, and for HardSwish the oracle equal to
    the function body's rounding), or ``''``."""
    import numpy as np

    from .agreement import close

    hs = direct_hard_swish(model, feeds)
    if hs is not None:
        formula, body = hs
        if np.asarray(want).dtype == np.float64 and close(got, formula) is None and close(want, body) is None:
            return "hardswish-float32-alpha"
        return ""
    if np.asarray(want).dtype in (np.float32, np.float16):
        exact = direct_group_norm(model, feeds, ill_conditioned=True)
        if exact is not None and close(got, exact) is None:
            return "group-norm-cancellation"
    return ""
