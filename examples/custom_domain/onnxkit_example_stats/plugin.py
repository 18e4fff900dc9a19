"""The hook implementations: operator set, opaque type, inference functions, CPU kernels."""

from __future__ import annotations

import numpy as np

from onnxkit import hookimpl
from onnxkit.ir import AttributeType
from onnxkit.registry import OpaqueTypeDef
from onnxkit.runtime import KernelTable
from onnxkit.schema import AttributeDef, FormalParameter, OperatorSet, OpSchema, TypeConstraint

from . import DOMAIN
from .histogram import Histogram

HISTOGRAM = f"opaque({DOMAIN},Histogram)"

MAKE_HISTOGRAM = OpSchema(
    domain=DOMAIN, name="MakeHistogram", since_version=1,
    inputs=(FormalParameter("x", "T"),), outputs=(FormalParameter("h", HISTOGRAM),),
    attributes={"bins": AttributeDef("bins", AttributeType.INT, default_value=10)},
    type_constraints=(TypeConstraint("T", ("tensor(float)", "tensor(double)")),),
    min_input=1, max_input=1, min_output=1, max_output=1,
)
HISTOGRAM_QUANTILE = OpSchema(
    domain=DOMAIN, name="HistogramQuantile", since_version=1,
    inputs=(FormalParameter("h", HISTOGRAM), FormalParameter("q", "tensor(float)")),
    outputs=(FormalParameter("y", "tensor(float)"),),
    min_input=2, max_input=2, min_output=1, max_output=1,
)


@hookimpl
def onnxkit_operator_sets():
    return [OperatorSet(DOMAIN, 1, {s.name: s for s in (MAKE_HISTOGRAM, HISTOGRAM_QUANTILE)})]


@hookimpl
def onnxkit_opaque_types():
    return [OpaqueTypeDef(DOMAIN, "Histogram", Histogram, "equal-width histogram of a tensor's elements")]


KERNELS = KernelTable()


@KERNELS.register("MakeHistogram", 1, domain=DOMAIN)
def make_histogram(ctx):
    bins = int(ctx.attr("bins"))
    return lambda x: Histogram.of(x, bins)


@KERNELS.register("HistogramQuantile", 1, domain=DOMAIN)
def histogram_quantile(ctx):
    def run(h, q):
        if not isinstance(h, Histogram):
            ctx.fail(f"input 0 must be an opaque {DOMAIN}::Histogram, got {type(h).__name__}")
        return h.quantile(q).astype(np.float32)

    return run


@hookimpl
def onnxkit_kernels(backend):
    return KERNELS if backend == "cpu" else None



@hookimpl
def onnxkit_inference_functions():
    from .inference import FUNCTIONS

    return FUNCTIONS
