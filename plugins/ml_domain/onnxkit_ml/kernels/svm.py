"""Support vector machines of ai.onnx.ml.

Operators and the definitions (since_versions) implemented:

* SVMClassifier 1: one-vs-one SVC (support vectors, ``vectors_per_class``) with LINEAR, POLY,
  RBF or SIGMOID kernels, votes, optional Platt probabilities (``prob_a`` / ``prob_b``,
  pairwise coupling of libsvm); or the liblinear form (no support vectors: one coefficient
  row per class, ``rho[0]`` added).
* SVMRegressor 1: SVR / one-class SVM (``n_supports`` support vectors) or the linear form.

Kernels (``kernel_params`` = [gamma, coef0, degree]): LINEAR ``<x, v>``, POLY
``(gamma <x, v> + coef0) ** degree``, RBF ``exp(-gamma |x - v|^2)``, SIGMOID
``tanh(gamma <x, v> + coef0)``.  Inputs float, double, int64 or int32, [N, C] or [C]; kernel
values and decision values are computed in float64, the probability coupling in float32 (as
onnxruntime and the reference implementation), outputs are float32.

Outputs of SVMClassifier (the layout of onnxruntime and the ONNX reference implementation):

* with probabilities (SVC form): Z = [N, classes] probabilities; the label is the class with
  most votes (first on ties), not the most probable one;
* without probabilities, more than two classes: Z = the [N, classes*(classes-1)/2] pairwise
  decision values (post transform applied), label = most votes (first on ties);
* without probabilities, two classes: Z = ``[-s, s]`` (post transform applied to both) for the
  one decision value ``s``; label ``labels[0]`` when ``s > 0`` (its vote), else ``labels[1]``;
* liblinear form: Z = [N, classes] scores (post transform applied), label = greatest score,
  except that two classes with only non-negative coefficients give ``labels[1]`` when the
  greatest score is >= 0.5 (both runtimes' rule).

The post transform is applied to Z whenever Z has more than one column.  SVMRegressor applies
the post transform to its one column (onnxruntime ignores it; the reference rejects all but
NONE).
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, calls_blas

from ._common import as_float_matrix, labels_from, logistic, post_transform, str_list, transform_name

KERNELS = KernelTable()
ML = "ai.onnx.ml"
KERNEL_TYPES = ("LINEAR", "POLY", "RBF", "SIGMOID")


def _kernel_setup(ctx):
    kind = ctx.attr_str("kernel_type")
    if kind not in KERNEL_TYPES:
        ctx.fail(f"kernel_type={kind!r} is not one of {', '.join(KERNEL_TYPES)}")
    params = list(ctx.attr("kernel_params") or [])
    if params and len(params) != 3:
        ctx.fail(f"kernel_params must hold [gamma, coef0, degree], got {len(params)} values")
    gamma, coef0, degree = (float(np.float32(p)) for p in params) if params else (0.0, 0.0, 0.0)
    return kind, gamma, coef0, degree


def _kernel(kind, gamma, coef0, degree, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[N, C] x [V, C] -> [N, V] kernel values (float64)."""
    if kind == "RBF":
        d = (x * x).sum(axis=1)[:, None] + (v * v).sum(axis=1)[None, :] - 2.0 * (x @ v.T)
        return np.exp(-gamma * np.maximum(d, 0.0))
    dot = x @ v.T
    if kind == "LINEAR":
        return dot
    s = gamma * dot + coef0
    if kind == "POLY":
        return s ** degree
    return np.tanh(s)


def _check_features(ctx, x2, n):
    if x2.shape[1] != n:
        ctx.fail(f"X has {x2.shape[1]} features but the model expects {n}")


def _multiclass_probability(r: np.ndarray) -> np.ndarray:
    """Pairwise coupling (Wu, Lin & Weng, method 2, as libsvm) for [N, k, k] pairwise estimates.

    Float32 arithmetic; each row stops iterating once its error is below 0.005 / k.
    """
    n, k, _ = r.shape
    f = np.float32
    r = r.astype(f)
    q = np.zeros((n, k, k), dtype=f)
    for t in range(k):
        col = r[:, :, t] ** 2
        q[:, t, t] = col[:, :t].sum(axis=1) + col[:, t + 1:].sum(axis=1)
        q[:, t, :t] = q[:, :t, t]
        q[:, t, t + 1:] = -r[:, t + 1:, t] * r[:, t, t + 1:]
    p = np.full((n, k), f(1.0 / k), dtype=f)
    eps = f(0.005 / k)
    active = np.ones(n, dtype=bool)
    for _ in range(max(100, k)):
        qp = np.einsum("nij,nj->ni", q, p).astype(f)
        pqp = (p * qp).sum(axis=1)
        err = np.abs(qp - pqp[:, None]).max(axis=1)
        active &= ~(err < eps)
        if not active.any():
            break
        for t in range(k):
            diff = (-qp[:, t] + pqp) / q[:, t, t]
            diff = np.where(active, diff, f(0)).astype(f)
            p[:, t] += diff
            d1 = (f(1) + diff)
            pqp = ((pqp + diff * (diff * q[:, t, t] + f(2) * qp[:, t])) / d1 / d1).astype(f)
            qp = ((qp + diff[:, None] * q[:, t, :]) / d1[:, None]).astype(f)
            p = (p / d1[:, None]).astype(f)
    return p


@KERNELS.register("SVMClassifier", 1, domain=ML, host_only=True)
@calls_blas
def svm_classifier(ctx):
    kind, gamma, coef0, degree = _kernel_setup(ctx)
    ints = list(ctx.attr("classlabels_ints") or [])
    strings = str_list(ctx.attr("classlabels_strings"))
    if ints and strings:
        ctx.fail("only one of classlabels_ints and classlabels_strings may be given")
    k = len(strings) or len(ints)
    if k == 0:
        ctx.fail("one of classlabels_ints and classlabels_strings is required")
    coefs = np.asarray(ctx.attr("coefficients") or [], dtype=np.float32).astype(np.float64)
    if coefs.size == 0:
        ctx.fail("attribute 'coefficients' is required")
    rho = np.asarray(ctx.attr("rho") or [], dtype=np.float32).astype(np.float64)
    prob_a = np.asarray(ctx.attr("prob_a") or [], dtype=np.float32)
    prob_b = np.asarray(ctx.attr("prob_b") or [], dtype=np.float32)
    if prob_a.size != prob_b.size:
        ctx.fail("prob_a and prob_b must have the same length")
    per_class = [int(v) for v in (ctx.attr("vectors_per_class") or [])]
    n_vec = sum(per_class)
    transform = transform_name(ctx)
    n_pairs = k * (k - 1) // 2
    positive = bool((coefs >= 0).all())

    if n_vec > 0:
        if len(per_class) != k:
            ctx.fail(f"vectors_per_class has {len(per_class)} entries for {k} classes")
        sv = np.asarray(ctx.attr("support_vectors") or [], dtype=np.float32).astype(np.float64)
        if sv.size % n_vec:
            ctx.fail(f"support_vectors has {sv.size} values, not a multiple of the {n_vec} vectors")
        sv = sv.reshape(n_vec, -1)
        if coefs.size < (k - 1) * n_vec:
            ctx.fail(f"coefficients has {coefs.size} values, expected (classes-1)*vectors = {(k - 1) * n_vec}")
        coefs2 = coefs[:(k - 1) * n_vec].reshape(k - 1, n_vec)
        if rho.size < n_pairs:
            ctx.fail(f"rho has {rho.size} values, expected one per class pair ({n_pairs})")
        if prob_a.size and prob_a.size < n_pairs:
            ctx.fail(f"prob_a has {prob_a.size} values, expected one per class pair ({n_pairs})")
        starts = np.concatenate([[0], np.cumsum(per_class)]).astype(int)
        pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    else:
        if coefs.size % k:
            ctx.fail(f"coefficients has {coefs.size} values, not a multiple of the {k} classes")
        lin = coefs.reshape(k, -1)
        if rho.size < 1:
            ctx.fail("rho must have at least one value")

    def run_svc(x2):
        _check_features(ctx, x2, sv.shape[1])
        kv = _kernel(kind, gamma, coef0, degree, x2, sv)
        n = x2.shape[0]
        dec = np.empty((n, n_pairs))
        votes = np.zeros((n, k), dtype=np.int64)
        for p, (i, j) in enumerate(pairs):
            si, sj = slice(starts[i], starts[i + 1]), slice(starts[j], starts[j + 1])
            s = kv[:, si] @ coefs2[j - 1, si] + kv[:, sj] @ coefs2[i, sj] + rho[p]
            dec[:, p] = s
            win = s > 0
            votes[:, i] += win
            votes[:, j] += ~win
        best = np.argmax(votes, axis=1) if n else np.zeros(0, dtype=np.int64)
        labels = labels_from(best, ints, strings)
        dec32 = dec.astype(np.float32)
        if prob_a.size:
            val = 1.0 - logistic(dec32 * prob_a[:n_pairs] + prob_b[:n_pairs]).astype(np.float32)
            val = np.clip(val, np.float32(1e-7), np.float32(1 - 1e-7)).astype(np.float32)
            r = np.zeros((n, k, k), dtype=np.float32)
            for p, (i, j) in enumerate(pairs):
                r[:, i, j] = val[:, p]
                r[:, j, i] = 1 - val[:, p]
            z = _multiclass_probability(r) if n else np.zeros((0, k), np.float32)
            z = post_transform(z, transform) if k > 1 else z
        elif k == 2:
            s = dec32[:, 0].astype(np.float64)
            z = post_transform(np.stack([-s, s], axis=1), transform)
        else:
            z = post_transform(dec32, transform) if n_pairs > 1 else dec32
        return labels, np.asarray(z, dtype=np.float32)

    def run_linear(x2):
        _check_features(ctx, x2, lin.shape[1])
        scores = x2 @ lin.T + rho[0]
        n = x2.shape[0]
        best = np.argmax(scores, axis=1) if n else np.zeros(0, dtype=np.int64)
        if k == 2 and not prob_a.size and positive:
            best = np.where(scores.max(axis=1) >= 0.5, 1, best) if n else best
        labels = labels_from(best, ints, strings)
        z = post_transform(scores, transform) if k > 1 else scores
        return labels, z.astype(np.float32)

    def run(x):
        x2 = as_float_matrix(ctx, x, np.float64)
        return run_svc(x2) if n_vec > 0 else run_linear(x2)

    return run


@KERNELS.register("SVMRegressor", 1, domain=ML, host_only=True)
@calls_blas
def svm_regressor(ctx):
    kind, gamma, coef0, degree = _kernel_setup(ctx)
    n_sup = int(ctx.attr("n_supports"))
    coefs = np.asarray(ctx.attr("coefficients") or [], dtype=np.float32).astype(np.float64)
    rho = np.asarray(ctx.attr("rho") or [], dtype=np.float32).astype(np.float64)
    one_class = bool(ctx.attr("one_class"))
    transform = transform_name(ctx)
    if coefs.size == 0:
        ctx.fail("attribute 'coefficients' is required")
    if rho.size < 1:
        ctx.fail("rho must have at least one value")
    if n_sup > 0:
        sv = np.asarray(ctx.attr("support_vectors") or [], dtype=np.float32).astype(np.float64)
        if sv.size % n_sup:
            ctx.fail(f"support_vectors has {sv.size} values, not a multiple of n_supports={n_sup}")
        sv = sv.reshape(n_sup, -1)
        if coefs.size < n_sup:
            ctx.fail(f"coefficients has {coefs.size} values for {n_sup} support vectors")

    def run(x):
        x2 = as_float_matrix(ctx, x, np.float64)
        if n_sup > 0:
            _check_features(ctx, x2, sv.shape[1])
            y = _kernel(kind, gamma, coef0, degree, x2, sv) @ coefs[:n_sup] + rho[0]
        else:
            _check_features(ctx, x2, coefs.size)
            y = x2 @ coefs + rho[0]
        if one_class:
            y = np.where(y > 0, 1.0, -1.0)
        return post_transform(y[:, None], transform).astype(np.float32)

    return run
