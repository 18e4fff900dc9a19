"""Inference functions (Clause 9.2) of the example domain: one per operator definition,
registered on a :class:`~onnxkit.plugin.FunctionTable` (each for every since_version of its
operator among the definitions the table is given: here version 1)."""

from __future__ import annotations

from onnxkit.plugin import FunctionTable, ir

from . import DOMAIN

FUNCTIONS = FunctionTable([(DOMAIN, op, 1) for op in ("MakeHistogram", "HistogramQuantile", "Standardize")],
                          domain=DOMAIN)


@FUNCTIONS.register("MakeHistogram")
def make_histogram(ctx):
    """MakeHistogram: the output is the domain's opaque Histogram type, whatever the input."""
    return [ir.OpaqueType(DOMAIN, "Histogram")]


@FUNCTIONS.register("HistogramQuantile")
def histogram_quantile(ctx):
    """HistogramQuantile: float, with the shape of ``q`` (unknown rank if ``q``'s is)."""
    q = ctx.input_type(1)
    shape = q.shape if isinstance(q, ir.TensorType) else None
    return [ir.TensorType(1, shape)]


@FUNCTIONS.register("Standardize")
def standardize(ctx):
    """Standardize: the type and shape of ``x``."""
    return [ctx.input_type(0)]
