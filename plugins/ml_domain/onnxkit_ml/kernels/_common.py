"""Helpers shared by the ai.onnx.ml kernel families (no operator is registered here).

* post transforms of the classifiers and regressors (NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO,
  PROBIT), vectorised over a batch of score rows;
* STRING tensor conversions (inputs hold ``bytes`` or ``str``; outputs hold ``bytes``, what
  the tensor files of the test package hold) and label arrays.

PROBIT is ``sqrt(2) * erfinv(2p - 1)`` with the closed-form approximation of erfinv (Winitzki,
a = 0.147) that the ONNX reference implementation and onnxruntime both use, so the scores agree
with theirs; ``p`` of 0 or 1 gives -inf / +inf.
"""

from __future__ import annotations

import numpy as np

POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


def text(v) -> str:
    if isinstance(v, (bytes, bytearray, np.bytes_)):
        return bytes(v).decode("utf-8", "surrogateescape")
    return str(v)


def raw(v) -> bytes:
    if isinstance(v, (bytes, bytearray, np.bytes_)):
        return bytes(v)
    return str(v).encode("utf-8", "surrogateescape")


def str_list(values) -> list:
    """A STRINGS attribute (bytes) as a list of Python ``str``."""
    return [text(v) for v in (values or [])]


def bytes_array(items, shape=None) -> np.ndarray:
    """An object array of ``bytes`` (a STRING tensor as onnxkit holds it)."""
    out = np.empty(len(items), dtype=object)
    out[:] = [raw(v) for v in items]
    return out if shape is None else out.reshape(shape)


def is_string_tensor(x) -> bool:
    return isinstance(x, np.ndarray) and (x.dtype == object or x.dtype.kind in "SU")


def text_array(x: np.ndarray) -> np.ndarray:
    """A STRING tensor as an object array of ``str`` (same shape)."""
    flat = [text(v) for v in x.ravel()]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(x.shape)


def transform_name(ctx, name: str = "post_transform") -> str:
    """The post_transform as one of POST_TRANSFORMS (INT attribute of TreeEnsemble 5 or STRING)."""
    v = ctx.attr(name)
    if v is None:
        return "NONE"
    if isinstance(v, (int, np.integer)):
        if not 0 <= int(v) < len(POST_TRANSFORMS):
            ctx.fail(f"{name}={v} is not one of 0..4")
        return POST_TRANSFORMS[int(v)]
    s = ctx.attr_str(name)
    if s not in POST_TRANSFORMS:
        ctx.fail(f"{name}={s!r} is not one of {', '.join(POST_TRANSFORMS)}")
    return s


def as_float_matrix(ctx, x, dtype=np.float32, name="X") -> np.ndarray:
    """A numeric input as a 2-D array of ``dtype`` ([N, C]; a 1-D input is one row)."""
    if not isinstance(x, np.ndarray) or x.dtype == object or x.dtype.kind not in "fiub":
        ctx.fail(f"{name} must be a numeric tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if x.ndim == 0:
        ctx.fail(f"{name} must have rank 1 or 2, got a scalar")
    x2 = x.reshape(1, -1) if x.ndim == 1 else x.reshape(x.shape[0], -1)
    return x2.astype(dtype, copy=False)


# -- post transforms ----------------------------------------------------------------------------

def logistic(v: np.ndarray) -> np.ndarray:
    e = 1.0 / (1.0 + np.exp(-np.abs(v)))
    return np.where(v < 0, 1.0 - e, e)


def softmax(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_zero(v: np.ndarray) -> np.ndarray:
    """Softmax over the non-zero scores of each row; scores within 1e-7 of 0 stay (nearly) 0.

    A row of zeros gives 0.5 everywhere (the ONNX reference implementation's choice).
    """
    vmax = v.max(axis=-1, keepdims=True)
    nz = np.abs(v) > 1e-7
    with np.errstate(over="ignore", under="ignore"):
        e = np.where(nz, np.exp(v - vmax), v * np.exp(-vmax))
    s = e.sum(axis=-1, keepdims=True)
    zero = s == 0
    with np.errstate(invalid="ignore", divide="ignore"):
        out = e / np.where(zero, 1.0, s)
    return np.where(zero, 0.5, out)


def erfinv_approx(x: np.ndarray) -> np.ndarray:
    sgn = np.where(x < 0, -1.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log((1.0 - x) * (1.0 + x))
        a = 2.0 / (np.pi * 0.147) + 0.5 * lg
        b = lg / 0.147
        return sgn * np.sqrt(-a + np.sqrt(a * a - b))


def probit(v: np.ndarray) -> np.ndarray:
    return np.sqrt(2.0) * erfinv_approx(2.0 * v - 1.0)


def post_transform(scores: np.ndarray, name: str) -> np.ndarray:
    """Apply a post transform row-wise to a [N, K] array (computed in float64)."""
    s = scores.astype(np.float64, copy=False)
    if name == "NONE":
        return s
    if name == "LOGISTIC":
        return logistic(s)
    if name == "SOFTMAX":
        return softmax(s) if s.shape[-1] else s
    if name == "SOFTMAX_ZERO":
        return softmax_zero(s) if s.shape[-1] else s
    if name == "PROBIT":
        return probit(s)
    raise ValueError(name)


def labels_from(indices: np.ndarray, ints, strings) -> np.ndarray:
    """Class indices -> the int64 or STRING (bytes) labels they stand for."""
    if strings:
        table = bytes_array(strings)
        return table[indices] if len(indices) else np.empty(0, dtype=object)
    table = np.asarray(ints, dtype=np.int64)
    return table[indices] if len(indices) else np.empty(0, dtype=np.int64)
