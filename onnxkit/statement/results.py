"""The ONNX 1-3 results onnxkit claims, and its known divergences: one source for the README's
conformance statement and for the tests that assert them (tests/test_conformance*.py).

A figure here is asserted exactly by the suite; when a vector starts or stops passing the
suite fails and names it, and this file is where the figure is updated.
"""

from __future__ import annotations

#: The ONNX 1-3 package the figures were measured on (the ``onnx`` wheel that generates it).
PACKAGE = "onnx 1.23.2"

TEST_PACKAGE = {
    "package": PACKAGE,
    "summary": "node 1,876 / 1,884 on `cpu`; simple 23 / 23; pytorch-converted 82 / 82; pytorch-operator 35 / 35; "
               "light 9 / 9 (details below)",
    "lines": [
        "`cpu`: node 1,876 / 1,884 (the 8 others refused on purpose, see the divergences); simple 23 / 23; "
        "pytorch-converted 82 / 82; pytorch-operator 35 / 35; light 9 / 9 against their reference outputs",
        "`gpu` (torch's CPU device): node vectors 1,143 pass, 0 fail (537 unsupported, 204 type refusals); "
        "light models 9 / 9",
        "codec: byte-exact `save(load(b)) == b` on all 2,033 models and 6,851 value files of the package",
        "inference: over every node vector's outputs, 1,958 exact, 0 contradicting the expected data",
        "validation: 0 errors on all 1,884 node models and the other model folders",
    ],
}

DIVERGENCES = (
    "The 8 node vectors `test_sequence_map_{add_2_sequences,extract_shapes,identity_1_sequence_1_tensor,"
    "identity_2_sequences}` (and their `_expanded` forms) feed sequences whose elements differ in an extent that "
    "the input type names with one dimension variable; Clause 6.5.2 (and its NOTE on sequences) says one variable "
    "is one extent throughout a model, so the session refuses the feed and says so.",
    "STRING elements are octet strings (Clause 6.4 leaves the encoding open): values come back as `bytes`.",
    "`RegexFullMatch` uses Python's `re` after translating RE2 syntax; `(?i)` folds ASCII letters only and `\\s` "
    "also matches `\\v` (see `kernels/string.py`).",
    "`Gradient` (ai.onnx.preview.training) differentiates the operators listed in `kernels/gradient.py`; a graph "
    "using another is refused when the session is created, naming the operator.",
    "A skl2onnx model that declares a shape contradicting what its operators produce (e.g. a 2-target "
    "RandomForestRegressor declared `[?, 1]`) is refused (Clauses 9.4, 15.5), where onnxruntime warns and runs it.",
    "`Loop` with a trip count and no condition input runs the trip count's iterations (the body's condition is "
    "ignored, as Part 2 states); onnxruntime stops when the body's condition becomes false.",
)
