"""cpu override of Pad-11 and later (``onnxkit_default_domain/kernels/shape_layout.py``).

The crop, widths, output extents and (reflect / edge / wrap) source positions of a Pad are
decided once per key of the input's extents and the ``pads`` / ``axes`` values
(:mod:`._plans`; by the extents alone where those inputs are constants) by the portable
family's own functions; a run is then one allocation and one
copy (constant) or one ``take`` per padded axis, exactly as the portable kernel computes it.
STRING tensors take the portable path.
"""

from __future__ import annotations

import numpy as np
from onnxkit_default_domain.api import WIDENED_ONLY_VERSIONS as _LATEST
from onnxkit_default_domain.api import pad_array, pad_mode, pad_plan, source_index

from onnxkit.plugin import KernelTable, binds_constants

from ._plans import IntPlans

KERNELS = KernelTable()


def _plan(ctx, x, pads: list, mode: str, axes):
    """``run(x, constant_value)`` for inputs of ``x``'s extents (after the portable checks)."""
    crop, begin, end = pad_plan(ctx, x, pads, axes)
    dims = list(x[crop].shape) if crop is not None else list(x.shape)
    if not any(begin) and not any(end):
        return (lambda x, value: x[crop]) if crop is not None else (lambda x, value: x)
    if mode == "constant":
        shape = tuple(d + b + e for d, b, e in zip(dims, begin, end))
        inner = tuple(slice(b, b + d) for b, d in zip(begin, dims))

        def constant(x, value):
            if crop is not None:
                x = x[crop]
            if value is None:
                out = np.zeros(shape, dtype=x.dtype)
            else:
                out = np.empty(shape, dtype=x.dtype)
                out[...] = value.reshape(()).astype(x.dtype)
            out[inner] = x
            return out

        return constant
    takes = []
    for a, (d, b, e) in enumerate(zip(dims, begin, end)):
        if b or e:
            if d == 0:
                ctx.fail(f"mode '{mode}' cannot pad an empty axis")
            takes.append((a, source_index(mode, d, b, e)))

    def gather(x, value):
        if crop is not None:
            x = x[crop]
        for a, idx in takes:
            x = x.take(idx, axis=a)
        return x

    return gather


@KERNELS.register("Pad", 11, 13, 18, 19, *_LATEST)
def pad(ctx):
    mode = pad_mode(ctx)
    with_axes = ctx.since_version >= 18
    plans = IntPlans(lambda x, pads, axes: _plan(ctx, x, list(pads), mode, None if axes is None else list(axes)))

    def check(x, constant_value, axes) -> bool:
        """The per-call checks; True when ``x`` takes the portable body (STRING)."""
        if axes is not None and not with_axes:
            ctx.fail("the 'axes' input is defined from Pad-18")
        if constant_value is not None and constant_value.size != 1:
            ctx.fail(f"constant_value must be a scalar, got shape {list(constant_value.shape)}")
        return x.dtype == object

    def fn(x, pads, constant_value=None, axes=None):
        if check(x, constant_value, axes):
            return pad_array(ctx, x, ctx.ints(pads), mode, constant_value, None if axes is None else ctx.ints(axes))
        return plans.plan(x, pads, axes)(x, constant_value)

    def bind(pads, axes):
        plan = None if pads is None or (axes is not None and not with_axes) else plans.fixed(pads, axes)
        if plan is None:
            return None

        def fixed(x, pads, constant_value=None, axes=None):
            if check(x, constant_value, None):
                return fn(x, pads, constant_value, axes)
            return plan(x)(x, constant_value)

        return fixed

    return binds_constants(fn, bind, 1, 3)
