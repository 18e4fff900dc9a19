"""Feature preprocessing of ai.onnx.ml.

Operators and the definitions (since_versions) implemented, all version 1:

* ArrayFeatureExtractor: ``X[..., indices]`` (indices flattened); a 1-D X gives one row [1, n].
* Binarizer: 1 where ``X > threshold``, else 0, in X's element type (NaN gives 0).
* Imputer: the values equal to ``replaced_value_float`` / ``replaced_value_int64`` (NaN when
  the replaced value is NaN) become ``imputed_value_*`` of their column (one value, or one per
  column of the last axis); X keeps its element type.
* Normalizer: per row, float output.  MAX divides by the row's greatest value (signed, as the
  specification's ``X / max(X)`` and onnxruntime), L1 by the sum of absolute values, L2 by the
  Euclidean norm (signs kept).  A row whose divisor is 0 is returned unchanged (onnxruntime).
* Scaler: ``(X - offset) * scale`` as float (one value, or one per column of the last axis).
* OneHotEncoder: [*X.shape, categories] float; numeric X is truncated to int64 and looked up in
  ``cats_int64s``, STRING X in ``cats_strings``; an unknown value gives a row of zeros, or an
  error when ``zeros`` is 0.
* FeatureVectorizer: concatenation of the inputs ([N, C_i], a 1-D input being a column), each
  cut or zero-padded to ``inputdimensions[i]`` columns; float output.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable

from ._common import is_string_tensor, str_list, text_array

KERNELS = KernelTable()
ML = "ai.onnx.ml"


def _numeric(ctx, x, name="X"):
    if not isinstance(x, np.ndarray) or x.dtype == object or x.dtype.kind not in "fiub":
        ctx.fail(f"{name} must be a numeric tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    return x


def _per_column(ctx, values, ncols, what):
    v = np.asarray(values)
    if v.size not in (1, ncols):
        ctx.fail(f"{what} has {v.size} values; expected 1 or one per column ({ncols})")
    return v


@KERNELS.register("ArrayFeatureExtractor", 1, domain=ML, host_only=True)
def array_feature_extractor(ctx):
    def run(x, indices):
        if not isinstance(indices, np.ndarray) or indices.dtype.kind not in "iu":
            ctx.fail("Y (the indices) must be an int64 tensor")
        if x.ndim == 0:
            ctx.fail("X must have rank >= 1")
        idx = indices.reshape(-1).astype(np.int64)
        c = x.shape[-1]
        if idx.size and (idx.min() < 0 or idx.max() >= c):
            bad = int(idx[(idx < 0) | (idx >= c)][0])
            ctx.fail(f"index {bad} is out of range for the last axis of X (size {c})")
        out = np.take(x, idx, axis=-1)
        return out.reshape(1, -1) if x.ndim == 1 else out

    return run


@KERNELS.register("Binarizer", 1, domain=ML, host_only=True)
def binarizer(ctx):
    threshold = float(ctx.attr("threshold"))

    def run(x):
        _numeric(ctx, x)
        thr = np.float32(threshold) if x.dtype == np.float32 else threshold
        return (x > thr).astype(x.dtype)

    return run


@KERNELS.register("Imputer", 1, domain=ML, host_only=True)
def imputer(ctx):
    floats = ctx.attr("imputed_value_floats") or []
    ints = ctx.attr("imputed_value_int64s") or []
    if bool(floats) == bool(ints):
        ctx.fail("exactly one of imputed_value_floats and imputed_value_int64s must be given")
    rep_f = float(ctx.attr("replaced_value_float"))
    rep_i = int(ctx.attr("replaced_value_int64"))

    def run(x):
        _numeric(ctx, x)
        if x.ndim == 0:
            ctx.fail("X must have rank >= 1")
        if floats:
            if x.dtype.kind != "f":
                ctx.fail(f"imputed_value_floats needs a float X, got {x.dtype}")
            vals = _per_column(ctx, np.asarray(floats, dtype=np.float32), x.shape[-1], "imputed_value_floats")
            mask = np.isnan(x) if np.isnan(rep_f) else x == x.dtype.type(np.float32(rep_f))
        else:
            if x.dtype.kind not in "iu":
                ctx.fail(f"imputed_value_int64s needs an integer X, got {x.dtype}")
            vals = _per_column(ctx, np.asarray(ints, dtype=np.int64), x.shape[-1], "imputed_value_int64s")
            mask = x == rep_i
        fill = np.broadcast_to(vals.astype(x.dtype), x.shape)
        return np.where(mask, fill, x)

    return run


@KERNELS.register("Normalizer", 1, domain=ML, host_only=True)
def normalizer(ctx):
    norm = ctx.attr_str("norm")
    if norm not in ("MAX", "L1", "L2"):
        ctx.fail(f"norm={norm!r} is not one of MAX, L1, L2")

    def run(x):
        _numeric(ctx, x)
        if x.ndim not in (1, 2):
            ctx.fail(f"X must have rank 1 or 2, got shape {list(x.shape)}")
        x2 = x.reshape(1, -1) if x.ndim == 1 else x
        v = x2.astype(np.float64)
        if v.shape[1] == 0:
            return x.astype(np.float32)
        if norm == "MAX":
            d = v.max(axis=1, keepdims=True)
        elif norm == "L1":
            d = np.abs(v).sum(axis=1, keepdims=True)
        else:
            d = np.sqrt((v * v).sum(axis=1, keepdims=True))
        out = np.where(d != 0, v / np.where(d != 0, d, 1.0), v)
        return out.astype(np.float32).reshape(x.shape)

    return run


@KERNELS.register("Scaler", 1, domain=ML, host_only=True)
def scaler(ctx):
    offset = np.asarray(ctx.attr("offset") or [0.0], dtype=np.float32).astype(np.float64)
    scale = np.asarray(ctx.attr("scale") or [1.0], dtype=np.float32).astype(np.float64)

    def run(x):
        _numeric(ctx, x)
        if x.ndim == 0:
            ctx.fail("X must have rank >= 1")
        c = x.shape[-1]
        o = _per_column(ctx, offset, c, "offset")
        s = _per_column(ctx, scale, c, "scale")
        return ((x.astype(np.float64) - o) * s).astype(np.float32)

    return run


@KERNELS.register("OneHotEncoder", 1, domain=ML, host_only=True)
def one_hot_encoder(ctx):
    cats_i = ctx.attr("cats_int64s") or []
    cats_s = str_list(ctx.attr("cats_strings"))
    if bool(cats_i) == bool(cats_s):
        ctx.fail("exactly one of cats_int64s and cats_strings must be given")
    zeros = int(ctx.attr("zeros"))
    if cats_s:
        table = {v: i for i, v in reversed(list(enumerate(cats_s)))}
    else:
        keys = np.asarray(cats_i, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        skeys = keys[order]

    def run(x):
        if is_string_tensor(x):
            if not cats_s:
                ctx.fail("a STRING X needs cats_strings")
            idx = np.fromiter((table.get(v, -1) for v in text_array(x).ravel()), dtype=np.int64, count=x.size)
        else:
            _numeric(ctx, x)
            if not cats_i:
                ctx.fail("a numeric X needs cats_int64s")
            xi = x.reshape(-1)
            if xi.dtype.kind == "f":
                bad = ~np.isfinite(xi)
                xi = np.where(bad, 0, xi).astype(np.int64)
            else:
                bad = np.zeros(xi.shape, dtype=bool)
                xi = xi.astype(np.int64)
            pos = np.minimum(np.searchsorted(skeys, xi), len(skeys) - 1)
            idx = np.where((skeys[pos] == xi) & ~bad, order[pos], -1)
        k = len(cats_s) or len(cats_i)
        if not zeros and (idx < 0).any():
            ctx.fail(f"value {x.reshape(-1)[np.nonzero(idx < 0)[0][0]]!r} is not a category (zeros=0)")
        out = np.zeros((idx.size, k), dtype=np.float32)
        hit = idx >= 0
        out[np.nonzero(hit)[0], idx[hit]] = 1.0
        return out.reshape(*x.shape, k)

    return run


@KERNELS.register("FeatureVectorizer", 1, domain=ML, host_only=True)
def feature_vectorizer(ctx):
    dims = [int(d) for d in (ctx.attr("inputdimensions") or [])]

    def run(*xs):
        if len(dims) != len(xs):
            ctx.fail(f"inputdimensions has {len(dims)} values for {len(xs)} inputs")
        parts = []
        n = None
        for i, (x, d) in enumerate(zip(xs, dims)):
            _numeric(ctx, x, f"input {i}")
            a = x.reshape(-1, 1) if x.ndim == 1 else x
            if a.ndim != 2:
                ctx.fail(f"input {i} must have rank 1 or 2, got shape {list(x.shape)}")
            if n is None:
                n = a.shape[0]
            elif a.shape[0] != n:
                ctx.fail(f"input {i} has {a.shape[0]} rows but input 0 has {n}")
            b = np.zeros((a.shape[0], d), dtype=np.float32)
            w = min(d, a.shape[1])
            b[:, :w] = a[:, :w]
            parts.append(b)
        return np.concatenate(parts, axis=1) if parts else np.zeros((0, 0), dtype=np.float32)

    return run
