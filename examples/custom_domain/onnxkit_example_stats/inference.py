"""Inference functions (Clause 9.2) of the example domain: one per operator definition."""

from __future__ import annotations

from onnxkit.plugin import ir

from . import DOMAIN


def make_histogram(ctx):
    """MakeHistogram: the output is the domain's opaque Histogram type, whatever the input."""
    return [ir.OpaqueType(DOMAIN, "Histogram")]


def histogram_quantile(ctx):
    """HistogramQuantile: float, with the shape of ``q`` (unknown rank if ``q``'s is)."""
    q = ctx.input_type(1)
    shape = q.shape if isinstance(q, ir.TensorType) else None
    return [ir.TensorType(1, shape)]


def standardize(ctx):
    """Standardize: the type and shape of ``x``."""
    return [ctx.input_type(0)]


FUNCTIONS = {
    (DOMAIN, "Standardize", 1): standardize,
    (DOMAIN, "MakeHistogram", 1): make_histogram,
    (DOMAIN, "HistogramQuantile", 1): histogram_quantile,
}
