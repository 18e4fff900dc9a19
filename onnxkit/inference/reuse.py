"""An earlier inference of the same model reused node by node (Clause 9).

A session infers a model whose declarations add to what inference derives twice: as it is (the
checker's Clause 9.4 duty) and without its declarations (the optimizer's view,
:func:`onnxkit.runtime.optimizer.view.undeclared`, so that no declaration is taken for a fact).
Most nodes see the same input types and values both times.  The second inference, given the
first one's :class:`~onnxkit.inference.InferenceResult` (``infer_model(..., reuse=first)``),
takes a node's output types and values from it instead of calling its inference function again
where all of these hold:

* the node is a node of a graph (not of a function body) and holds no subgraph;
* the first inference inferred the node at the same graph path and index, bound to the same
  definition (the same registry's object), and its inference function returned (no error, no
  refusal);
* every input's type is equal to the first inference's and every input's value is the same
  (both unknown, or arrays of one dtype and shape with equal elements).

What this relies on: an inference function's result depends on its node, the types and values of
its inputs and the operator set versions alone, and it names any new dimension through
``fresh_dim``.  The second engine reserves the first one's fresh dimension names, so a reused
type's fresh dimensions name nothing the second inference makes; its types are those inferring
afresh gives, up to the names of fresh dimensions (as ``declarations_used`` already allows).  A
reused node's diagnostics are not reported again.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = ["reused", "same_value"]


def same_value(a, b) -> bool:
    """True when ``a`` and ``b`` are both unknown (None), or arrays of one dtype and shape whose
    elements are equal (a NaN is never equal: the node is inferred again)."""
    if a is None or b is None:
        return a is b
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return False
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


def reused(results: dict, key, definition, in_types: list, in_values: list) -> Optional[tuple]:
    """``(output types, output values)`` (new lists) recorded under ``key`` in ``results`` for the
    same definition (the same object) and the same inputs (module docstring), else None."""
    found = results.get(key)
    if found is None:
        return None
    was_definition, was_types, was_values, out_types, out_values = found
    if was_definition is not definition or len(was_types) != len(in_types):
        return None
    for was, now in zip(was_types, in_types):
        if was is not now and was != now:
            return None
    for was, now in zip(was_values, in_values):
        if was is not now and not same_value(was, now):
            return None
    return list(out_types), list(out_values)
