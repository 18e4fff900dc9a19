"""Shape and type inference functions of com.microsoft (Clause 9.2), one module per family.

Every module of this package whose name does not start with ``_`` defines ``FUNCTIONS``:
``{('com.microsoft', op_type, 1): fn}``; :func:`functions` merges them.  Every definition the
package ships has one.  The rules are those of onnxruntime's operator documentation
(ContribOperators.md); where a shape depends on a value that is not a constant, it is left
unknown (9.4).
"""

from __future__ import annotations

from onnxkit.plugin import merge_family_tables


def functions() -> dict:
    """Every inference function of every family module of this package."""
    return merge_family_tables(__name__, __path__, "FUNCTIONS")
