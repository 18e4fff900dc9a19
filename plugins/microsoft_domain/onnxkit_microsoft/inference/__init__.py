"""Shape and type inference functions of com.microsoft (Clause 9.2), one module per family.

Every module of this package whose name does not start with ``_`` defines ``FUNCTIONS``:
``{('com.microsoft', op_type, 1): fn}``; :func:`functions` gives them, each loaded on its
first call (:mod:`onnxkit.plugin.lazy`).  Every definition the
package ships has one.  The rules are those of onnxruntime's operator documentation
(ContribOperators.md); where a shape depends on a value that is not a constant, it is left
unknown (9.4).
"""

from __future__ import annotations

from onnxkit.plugin import lazy_family_tables


def functions() -> dict:
    """Every inference function of every family module of this package, each imported when it is
    first called (the generated ``_function_index.py``; tests/plugins/test_kernel_index.py keeps it equal
    to the modules' ``FUNCTIONS``: regenerate with ``python tools/kernel_index.py``)."""
    from ._function_index import ENTRIES

    return lazy_family_tables(__name__, ENTRIES, table="FUNCTIONS")
