"""CDist (com.microsoft 1): the pairwise distances ``C[i, j]`` between the rows of A ``[N, K]`` and
B ``[M, K]``, ``metric`` 'sqeuclidean' (default) or 'euclidean' (the two onnxruntime computes; any
other is an error at planning).  Computed as ``|a|² + |b|² - 2 a·b``, clipped at 0, in the input
type (float or double): onnxruntime's own way, the one skl2onnx's kNN models are checked against.
"""

from __future__ import annotations

from onnxkit.plugin import KernelTable

from ._common import DOMAIN, check_float, const, shape_of

KERNELS = KernelTable()


@KERNELS.register("CDist", 1, domain=DOMAIN)
def cdist(ctx):
    xp = ctx.xp
    metric = ctx.attr_str("metric")
    if metric not in ("sqeuclidean", "euclidean"):
        ctx.fail(f"metric {metric!r} is not one CDist computes (sqeuclidean, euclidean)")

    def run(a, b):
        check_float(ctx, a, "A", ("float32", "float64"))
        if a.ndim != 2 or b.ndim != 2 or int(a.shape[1]) != int(b.shape[1]) or a.dtype != b.dtype:
            ctx.fail(f"A [N, K] and B [M, K] of one type expected, got {shape_of(a)} and {shape_of(b)}")
        aa = xp.sum(a * a, axis=1, keepdims=True)
        bb = xp.reshape(xp.sum(b * b, axis=1), (1, -1))
        d = aa + bb - 2 * xp.matmul(a, xp.permute_dims(b, (1, 0)))
        d = xp.where(d > 0, d, const(xp, 0, d))
        return xp.sqrt(d) if metric == "euclidean" else d

    return run
