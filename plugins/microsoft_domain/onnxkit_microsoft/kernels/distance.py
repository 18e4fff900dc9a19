"""CDist (com.microsoft 1): the pairwise distances ``C[i, j]`` between the rows of A ``[N, K]`` and
B ``[M, K]``, ``metric`` 'sqeuclidean' (default) or 'euclidean' (the two onnxruntime computes),
or 'minkowski' with the float attribute ``p`` (> 0, default 2) that skl2onnx writes for a kNN /
LocalOutlierFactor model whose ``p`` is not 2.  Any other metric is an error at planning.

'sqeuclidean' and 'euclidean' are computed as ``|a|² + |b|² - 2 a·b``, clipped at 0, in the input
type (float or double): onnxruntime's own way, the one skl2onnx's kNN models are checked against.
'minkowski' is ``(Σ_k |a_k - b_k|^p)^(1/p)``, scikit-learn's definition, computed in double and
returned in the input type.  onnxruntime 1.32 computes no Minkowski distance: it refuses a CDist
carrying ``p`` as an unrecognized attribute; onnxkit's checker reports ``p`` as an attribute the
definition lacks (a warning) and this kernel reads it only under 'minkowski'.
"""

from __future__ import annotations

from onnxkit.plugin import KernelTable

from ._common import DOMAIN, check_float, const, device_of, shape_of

KERNELS = KernelTable()

#: The rows of A taken at once under 'minkowski' (bounds the [rows, M, K] difference array).
_ROWS = 256


@KERNELS.register("CDist", 1, domain=DOMAIN)
def cdist(ctx):
    xp = ctx.xp
    metric = ctx.attr_str("metric")
    if metric not in ("sqeuclidean", "euclidean", "minkowski"):
        ctx.fail(f"metric {metric!r} is not one CDist computes (sqeuclidean, euclidean, minkowski with p)")
    p = ctx.attr("p") if metric == "minkowski" else None  # not in onnxruntime's definition: no schema default
    p = 2.0 if p is None else float(p)
    if not p > 0:  # also NaN
        ctx.fail(f"metric 'minkowski' takes p > 0, got p={p!r}")

    def minkowski(a, b):
        a64, b64 = xp.astype(a, xp.float64), xp.astype(b, xp.float64)
        n, m, k = int(a.shape[0]), int(b.shape[0]), int(b.shape[1])
        rows = []
        for s in range(0, n, _ROWS):
            d = xp.abs(xp.reshape(a64[s:s + _ROWS], (-1, 1, k)) - xp.reshape(b64, (1, m, k)))
            rows.append(xp.sum(d ** p, axis=2) ** (1.0 / p))
        out = rows[0] if len(rows) == 1 else xp.concat(rows, axis=0)
        return xp.astype(out, a.dtype)

    def run(a, b):
        check_float(ctx, a, "A", ("float32", "float64"))
        if a.ndim != 2 or b.ndim != 2 or int(a.shape[1]) != int(b.shape[1]) or a.dtype != b.dtype:
            ctx.fail(f"A [N, K] and B [M, K] of one type expected, got {shape_of(a)} and {shape_of(b)}")
        if metric == "minkowski":
            if int(a.shape[0]) == 0:
                return xp.zeros((0, int(b.shape[0])), dtype=a.dtype, device=device_of(a))
            return minkowski(a, b)
        aa = xp.sum(a * a, axis=1, keepdims=True)
        bb = xp.reshape(xp.sum(b * b, axis=1), (1, -1))
        d = aa + bb - 2 * xp.matmul(a, xp.permute_dims(b, (1, 0)))
        d = xp.where(d > 0, d, const(xp, 0, d))
        return xp.sqrt(d) if metric == "euclidean" else d

    return run
