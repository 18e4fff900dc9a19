"""Reductions: Reduce* (axes as attribute, later as input), ArgMax / ArgMin.

The output geometry of every one of them is :func:`reduce_shape` (onnxkit.inference.common),
over extents ``int | str | None``: the rules here and the kernels
(``onnxkit_default_domain/kernels/reduction.py``) both call it.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import INT64, axes_of, dims_of, normalize_axis, reduce_shape, reduction_rule, tensor

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)

for _op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
            "ReduceProd", "ReduceSumSquare"):
    FUNCTIONS.register(_op, 1, 17)(reduction_rule(None))
    FUNCTIONS.register(_op, 18)(reduction_rule(1))
FUNCTIONS.register("ReduceSum", 1, 12)(reduction_rule(None))
FUNCTIONS.register("ReduceSum", 13)(reduction_rule(1))

_FOLD = {"ReduceSum": np.sum, "ReduceProd": np.prod, "ReduceMax": np.max, "ReduceMin": np.min}


def _folding(axes_input):
    """A reduction rule that also folds small integer constants (sizes computed from shapes)."""
    base = reduction_rule(axes_input)

    def rule_(ctx):
        base(ctx)
        c = ctx.constant(0)
        if c is None or c.dtype.kind not in "iu" or c.size == 0:
            return
        axes, known = axes_of(ctx, axes_input if axes_input is not None and ctx.has_input(axes_input) else None)
        if not known:
            return
        if not axes:
            if ctx.attr("noop_with_empty_axes", 0):
                ctx.set_value(0, c)
                return
            axes = list(range(c.ndim))
        axes = tuple(normalize_axis(ctx, a, c.ndim) for a in axes)
        ctx.set_value(0, np.asarray(_FOLD[ctx.op_type](c, axis=axes, keepdims=bool(ctx.attr("keepdims", 1)))))

    return rule_


for _op in _FOLD:
    if _op == "ReduceSum":
        FUNCTIONS.register(_op, 1, 12)(_folding(None))
        FUNCTIONS.register(_op, 13)(_folding(1))
    else:
        FUNCTIONS.register(_op, 1, 17)(_folding(None))
        FUNCTIONS.register(_op, 18)(_folding(1))


@FUNCTIONS.register(("ArgMax", "ArgMin"))
def _arg(ctx):
    dims = dims_of(ctx.input_type(0))
    return [tensor(INT64, reduce_shape(ctx, dims, [int(ctx.attr("axis", 0))], bool(ctx.attr("keepdims", 1))))]
