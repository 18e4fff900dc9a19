"""The hook implementations: operator set, opaque type, inference functions, kernels.

Every name comes from :mod:`onnxkit.plugin`, the one import surface for plugin authors.  The
kernels are written once, for every backend: ``Standardize`` computes with ``ctx.xp``, the
array namespace of the backend its node runs on (numpy on ``cpu``, torch on ``gpu``); the two
histogram operators pass a Python object (an opaque value) and use numpy, so they are
registered ``host_only`` and run on the host (a gpu session runs those two nodes on its
cpu fallback and says so in ``sess.fallbacks``).
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import (AttributeDef, FormalParameter, KernelTable, OpaqueTypeDef, OperatorSet, OpSchema,
                            TypeConstraint, hookimpl, ir)

from . import DOMAIN
from .histogram import Histogram

HISTOGRAM = f"opaque({DOMAIN},Histogram)"
FLOATS = ("tensor(float)", "tensor(double)")

MAKE_HISTOGRAM = OpSchema(
    domain=DOMAIN, name="MakeHistogram", since_version=1,
    inputs=(FormalParameter("x", "T"),), outputs=(FormalParameter("h", HISTOGRAM),),
    attributes={"bins": AttributeDef("bins", ir.AttributeType.INT, default_value=10)},
    type_constraints=(TypeConstraint("T", FLOATS),),
    min_input=1, max_input=1, min_output=1, max_output=1,
)
HISTOGRAM_QUANTILE = OpSchema(
    domain=DOMAIN, name="HistogramQuantile", since_version=1,
    inputs=(FormalParameter("h", HISTOGRAM), FormalParameter("q", "tensor(float)")),
    outputs=(FormalParameter("y", "tensor(float)"),),
    min_input=2, max_input=2, min_output=1, max_output=1,
)
STANDARDIZE = OpSchema(
    domain=DOMAIN, name="Standardize", since_version=1,
    inputs=(FormalParameter("x", "T"),), outputs=(FormalParameter("y", "T"),),
    attributes={"epsilon": AttributeDef("epsilon", ir.AttributeType.FLOAT, default_value=1e-6)},
    type_constraints=(TypeConstraint("T", FLOATS),),
    min_input=1, max_input=1, min_output=1, max_output=1,
)


@hookimpl
def onnxkit_operator_sets():
    return [OperatorSet(DOMAIN, 1, {s.name: s for s in (MAKE_HISTOGRAM, HISTOGRAM_QUANTILE, STANDARDIZE)})]


@hookimpl
def onnxkit_opaque_types():
    return [OpaqueTypeDef(DOMAIN, "Histogram", Histogram, "equal-width histogram of a tensor's elements")]


KERNELS = KernelTable()


@KERNELS.register("Standardize", 1, domain=DOMAIN)
def standardize(ctx):
    """(x - mean(x)) / sqrt(var(x) + epsilon) over all elements, in x's type, on any backend."""
    epsilon = float(ctx.attr("epsilon"))
    xp = ctx.xp

    def run(x):
        if x.ndim == 0 or x.shape[0] == 0:
            ctx.fail("x must hold at least one element")
        mean = xp.mean(x)
        centred = x - mean
        return centred / xp.sqrt(xp.mean(centred * centred) + xp.asarray(epsilon, dtype=x.dtype))

    return run


@KERNELS.register("MakeHistogram", 1, domain=DOMAIN, host_only=True)
def make_histogram(ctx):
    bins = int(ctx.attr("bins"))
    return lambda x: Histogram.of(x, bins)


@KERNELS.register("HistogramQuantile", 1, domain=DOMAIN, host_only=True)
def histogram_quantile(ctx):
    def run(h, q):
        if not isinstance(h, Histogram):
            ctx.fail(f"input 0 must be an opaque {DOMAIN}::Histogram, got {type(h).__name__}")
        return h.quantile(q).astype(np.float32)

    return run


@hookimpl
def onnxkit_portable_kernels():
    return KERNELS


@hookimpl
def onnxkit_inference_functions():
    from .inference import FUNCTIONS

    return FUNCTIONS
