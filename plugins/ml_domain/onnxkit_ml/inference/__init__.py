"""Shape and type inference functions of ai.onnx.ml (Clause 9.2), one module per family.

Every module of this package whose name does not start with ``_`` defines ``FUNCTIONS``:
``{('ai.onnx.ml', op_type, since_version): fn}``; :func:`functions` gives them, each loaded on
its first call (:mod:`onnxkit.plugin.lazy`), and the
plugin's ``onnxkit_inference_functions`` hook returns the result.  Every definition of
ai.onnx.ml operator sets 1..5 has a function (25 in all).

The rules are those of the operators' definitions (onnx/defs/traditionalml), completed where
the definition is explicit about a shape that ONNX's own functions leave open (a batch of
``N`` rows gives ``N`` labels and ``[N, E]`` scores; a 1-D input is one row, ``N = 1``).
Where the definition and the runtimes disagree (CastMap's and DictVectorizer's rank, a 1-D
input of FeatureVectorizer), the shape is left unknown rather than guessed (9.4).
"""

from __future__ import annotations

from onnxkit.plugin import lazy_family_tables


def functions() -> dict:
    """Every inference function of every family module of this package, each imported when it is
    first called (the generated ``_function_index.py``; tests/plugins/test_kernel_index.py keeps it equal
    to the modules' ``FUNCTIONS``: regenerate with ``python tools/kernel_index.py``)."""
    from ._function_index import ENTRIES

    return lazy_family_tables(__name__, ENTRIES, table="FUNCTIONS")
