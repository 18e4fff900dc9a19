"""STRING values at the session boundary (Clause 6.4: the encoding of a STRING element is left open).

Inside onnxkit a STRING element is an octet string (``bytes``), as the wire carries it, and
every string kernel works on octets.  At the boundary a session follows onnxruntime and
``onnx.numpy_helper``: a fed element may be ``str`` (encoded as UTF-8) or ``bytes``, and a
returned element is a ``str`` (decoded as UTF-8), save an element that is not valid UTF-8,
which comes back as the ``bytes`` it is, unchanged.
"""

from __future__ import annotations

import numpy as np


def to_octets(arr: np.ndarray) -> np.ndarray:
    """A fed STRING array (``str``/``bytes`` elements, or a numpy ``U``/``S`` array) as an object array of bytes."""
    if arr.dtype.kind == "S":
        return arr.astype(object)
    flat = [x.encode("utf-8", "surrogateescape") if isinstance(x, str) else x for x in arr.reshape(-1).tolist()]
    out = np.empty(arr.shape, dtype=object)
    out.reshape(-1)[:] = flat
    return out


def _text(x):
    if isinstance(x, (bytes, bytearray)):
        try:
            return bytes(x).decode("utf-8")
        except UnicodeDecodeError:
            return bytes(x)
    return x


def to_text(value):
    """A value as a user sees it: STRING elements (object arrays of bytes) decoded; other values unchanged.

    Walks sequences (lists) and maps (dicts, keys included); cheap on non-object arrays."""
    if isinstance(value, np.ndarray):
        if value.dtype != object or not value.size:
            return value
        out = np.empty(value.shape, dtype=object)
        out.reshape(-1)[:] = [_text(x) for x in value.reshape(-1).tolist()]
        return out
    if isinstance(value, list):
        return [to_text(v) for v in value]
    if isinstance(value, dict):
        return {_text(k): to_text(v) for k, v in value.items()}
    return value
