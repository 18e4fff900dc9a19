"""Pooling: the attributes and the output geometry of the sliding-window pools, shared by the
inference rules below and the kernels (``kernels/pool.py``, ``kernels/pool_roi.py``).

A pool reads only the attributes its definition declares (Part 2): ``storage_order`` exists
from MaxPool-8, ``ceil_mode`` from MaxPool-10 / AveragePool-10 / LpPool-18, ``dilations``
from MaxPool-10 / AveragePool-19 / LpPool-18, ``count_include_pad`` from AveragePool-7.  A node
of an older definition carrying one of them breaks its definition (the checker reports an
``unknown-attribute``); it is evaluated with the attribute's default, the same way by inference
and every backend.

:func:`pool_geometry` works over extents ``int | str | None`` (a ``str`` or ``None`` extent is
unknown): output extents, the begin / end pads (explicit, or from ``auto_pad``) and the
``tail`` a ``ceil_mode`` window reaches past the padded end.  The window rule is the
convolutions' (:mod:`.nn_geometry`: a window one stride too wide for the padded input gives an
empty output, a wider one is an error), for inference and kernels alike.
"""

from __future__ import annotations

from typing import Optional

from onnxkit.plugin import FunctionTable, records

from onnxkit.plugin.inference import INT64, dims_of, elem_of, shape_input, tensor

from ._util import definition_keys
from .nn_geometry import GeometryError, window_geometry

FUNCTIONS = FunctionTable(definition_keys)

def declared_attr(ctx, name: str, default):
    """Attribute ``name`` where the node's definition declares it (schema default applied), else
    ``default``.  Works with an inference and a kernel context alike."""
    schema = ctx.schema
    if schema is not None and name not in (schema.attributes or {}):
        return default
    v = ctx.attr(name)
    return default if v is None else v


def attr_text(ctx, name: str, default: str) -> str:
    """A STRING attribute as ``str`` (an inference context decodes them, a kernel context not)."""
    v = ctx.attr(name)
    if v is None:
        return default
    return v.decode("utf-8", "surrogateescape") if isinstance(v, (bytes, bytearray)) else str(v)


@records.frozen
class PoolAttrs:
    """The sliding-window attributes of one pool node, checked: every list has one value per
    spatial axis (``pads`` two), kernel, strides and dilations positive."""

    kernel: tuple
    strides: tuple
    dilations: tuple
    pads: Optional[tuple]
    auto_pad: str
    ceil_mode: bool


def pool_attrs(ctx, nd: int) -> PoolAttrs:
    """The :class:`PoolAttrs` of a pool node over ``nd`` spatial axes; ctx.fail for a missing
    ``kernel_shape``, a list of the wrong length or a non-positive value (``auto_pad`` is
    checked with the geometry)."""
    if nd < 1:
        ctx.fail(f"the input must have rank 3 or more, got {nd + 2}")
    kernel = ctx.attr("kernel_shape")
    if not kernel:
        ctx.fail("kernel_shape is required")
    kernel = tuple(int(k) for k in kernel)
    strides = tuple(int(s) for s in (ctx.attr("strides") or [1] * nd))
    dil = tuple(int(d) for d in (declared_attr(ctx, "dilations", None) or [1] * nd))
    pads = ctx.attr("pads")
    pads = tuple(int(p) for p in pads) if pads else None
    auto_pad = attr_text(ctx, "auto_pad", "NOTSET") or "NOTSET"
    ceil_mode = bool(declared_attr(ctx, "ceil_mode", 0))
    for what, vals in (("kernel_shape", kernel), ("strides", strides), ("dilations", dil)):
        if len(vals) != nd:
            ctx.fail(f"{what} must have {nd} values (one per spatial axis), got {list(vals)}")
        if any(v <= 0 for v in vals):
            ctx.fail(f"{what} must be positive, got {list(vals)}")
    if pads is not None and len(pads) != 2 * nd:
        ctx.fail(f"pads must have {2 * nd} values, got {list(pads)}")
    return PoolAttrs(kernel, strides, dil, pads, auto_pad, ceil_mode)


def pool_geometry(ctx, in_dims, a: PoolAttrs):
    """``(out, begin, end, tail)``, one value per spatial axis of extents ``in_dims``: output
    extents, begin / end pads (:func:`~.nn_geometry.window_geometry`, the convolutions' rule)
    and how far past ``end`` the last ``ceil_mode`` window reaches (None where unknown);
    ctx.fail for an impossible geometry."""
    try:
        out, begin, end = window_geometry(in_dims, a.kernel, a.strides, a.dilations, a.pads, a.auto_pad, a.ceil_mode)
    except GeometryError as exc:
        ctx.fail(f"{ctx.op_type}: {exc}")
    tail = [None if None in (o, b, e) or not isinstance(d, int)
            else max(0, (o - 1) * s + (k - 1) * dl + 1 - (d + b + e))
            for o, b, e, d, s, k, dl in zip(out, begin, end, in_dims, a.strides, a.kernel, a.dilations)]
    return out, begin, end, tail


def unpool_extents(ctx, x_dims, a: PoolAttrs) -> list:
    """MaxUnpool's output extents (before ``output_shape``) from ``X``'s: per spatial axis
    ``(d - 1) * stride + kernel - pad_begin - pad_end`` (None where ``d`` is unknown)."""
    nd = len(a.kernel)
    pads = a.pads or (0,) * (2 * nd)
    sp = [(d - 1) * a.strides[i] + a.kernel[i] - pads[i] - pads[nd + i] if isinstance(d, int) else None
          for i, d in enumerate(x_dims[2:])]
    return list(x_dims[:2]) + sp


# -- inference rules ------------------------------------------------------------------------------

@FUNCTIONS.register("MaxPool")
@FUNCTIONS.register("AveragePool")
@FUNCTIONS.register("LpPool")
def _pool(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    if xd is None:
        outs = [tensor(elem_of(x), None), tensor(INT64, None)]
        return outs[:ctx.num_outputs]
    out = pool_geometry(ctx, xd[2:], pool_attrs(ctx, len(xd) - 2))[0]
    dims = xd[:2] + out
    return [tensor(elem_of(x), dims), tensor(INT64, dims)][:ctx.num_outputs]


@FUNCTIONS.register("GlobalAveragePool")
@FUNCTIONS.register("GlobalMaxPool")
@FUNCTIONS.register("GlobalLpPool")
def _global_pool(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    return [tensor(elem_of(x), None if xd is None else xd[:2] + [1] * (len(xd) - 2))]


@FUNCTIONS.register("MaxRoiPool")
def _max_roi_pool(ctx):
    xd, rd = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))
    pooled = [int(v) for v in ctx.attr("pooled_shape")]
    return [tensor(elem_of(ctx.input_type(0)), [rd[0] if rd else None, xd[1] if xd else None] + pooled)]


@FUNCTIONS.register("RoiAlign")
def _roi_align(ctx):
    xd, rd = dims_of(ctx.input_type(0)), dims_of(ctx.input_type(1))
    return [tensor(elem_of(ctx.input_type(0)), [rd[0] if rd else None, xd[1] if xd and len(xd) > 1 else None,
                                                int(ctx.attr("output_height", 1)), int(ctx.attr("output_width", 1))])]


@FUNCTIONS.register("MaxUnpool")
def _max_unpool(ctx):
    x = ctx.input_type(0)
    xd = dims_of(x)
    if ctx.has_input(2):
        s = shape_input(ctx, 2)
        return [tensor(elem_of(x), s if s is not None else (None if xd is None else [None] * len(xd)))]
    if xd is None:
        return [tensor(elem_of(x), None)]
    return [tensor(elem_of(x), unpool_extents(ctx, xd, pool_attrs(ctx, len(xd) - 2)))]
