"""What a caller feeds a session and what it gets back.

Feeds (:func:`coerce_feed`): numpy arrays as they are; numpy and Python scalars and nested
lists become arrays of the declared element type (a float where an integer is declared is
refused, never truncated); :class:`OrtValue` gives its value; a torch tensor stays a tensor on
a torch backend (checked through a zero-strided numpy stand-in of its shape and dtype, never
copied to the host) and becomes a numpy array on the others.  Outputs
(:func:`fresh_outputs`): every array is the caller's own — a copy is made of any that is a
view, read-only, one of the values the session keeps, a feed, or another output.
"""

from __future__ import annotations

import numpy as np

from .. import ir
from ..dtypes import ELEMENT_TYPES
from ..errors import OnnxkitError
from .ortvalue import OrtValue


class InputError(OnnxkitError, ValueError):
    """A fed value does not match the model's declared input (or is not an input at all)."""


def is_torch_backend(backend) -> bool:
    """Whether the backend's values are torch tensors (the gpu backend)."""
    return "torch" in (backend.device or "")


def _is_torch(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "dtype") and hasattr(value, "shape")


def torch_to_numpy_dtype(dtype) -> np.dtype:
    """The numpy dtype of a torch dtype (bfloat16 as ml_dtypes.bfloat16)."""
    import torch

    if dtype == torch.bfloat16:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return torch.empty(0, dtype=dtype).numpy().dtype


def torch_to_numpy(t) -> np.ndarray:
    """A torch tensor as a numpy array of its own (copied to the host; bfloat16 as ml_dtypes')."""
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(torch_to_numpy_dtype(t.dtype)).copy()
    return t.numpy().copy()


def _stand_in(t) -> np.ndarray:
    """A read-only numpy array with ``t``'s shape and dtype that holds one element."""
    dt = torch_to_numpy_dtype(t.dtype)
    shape = tuple(int(d) for d in t.shape)
    return np.lib.stride_tricks.as_strided(np.zeros(1, dt), shape=shape, strides=(0,) * len(shape), writeable=False)


def _declared_dtype(t):
    if isinstance(t, ir.TensorType):
        et = ELEMENT_TYPES.get(t.elem_type)
        return None if et is None else (object if et.tag == 8 else et.dtype)
    return None


def _from_python(name: str, value, t):
    """A Python scalar or (nested) list as an array of the declared element type."""
    want = _declared_dtype(t)
    try:
        arr = np.asarray(value)
    except ValueError as exc:  # ragged nested lists
        raise InputError(f"input {name!r}: cannot make a tensor of this list: {exc}") from None
    if want is None or want is object:
        return arr.astype(object) if want is object and arr.dtype.kind in "US" else arr
    want = np.dtype(want)
    if arr.dtype.kind == "O" or arr.dtype.kind in "US":
        raise InputError(f"input {name!r}: declared tensor of {want}, got a list of {arr.dtype}")
    if arr.dtype.kind in "fc" and want.kind in "iub":
        raise InputError(f"input {name!r}: declared an integer tensor ({want}), got floating-point values")
    if arr.dtype.kind == "c" and want.kind == "f":
        raise InputError(f"input {name!r}: declared a real tensor ({want}), got complex values")
    return arr.astype(want)


def coerce_feed(name: str, value, t, torch_backend: bool):
    """``(value to check, value to run or None)`` of one feed; see the module docstring."""
    if isinstance(value, OrtValue):
        value = value._value
    if value is None or isinstance(value, np.ndarray):
        return value, None
    if _is_torch(value):
        if torch_backend:
            return _stand_in(value), value
        return value.detach().cpu().numpy(), None
    if isinstance(t, ir.OptionalType):
        return coerce_feed(name, value, t.elem_type, torch_backend)
    if isinstance(t, ir.SequenceType) and isinstance(value, (list, tuple)):
        pairs = [coerce_feed(f"{name}[{i}]", v, t.elem_type, torch_backend) for i, v in enumerate(value)]
        checked = [c for c, _ in pairs]
        actual = None if all(a is None for _, a in pairs) else [c if a is None else a for c, a in pairs]
        return checked, actual
    if isinstance(value, (list, tuple, bool, int, float, complex)) and not isinstance(t, (ir.SequenceType, ir.MapType)):
        return _from_python(name, value, t), None
    if isinstance(value, np.generic):
        return np.asarray(value), None
    return value, None


def to_backend(v, conv):
    """A checked feed as a backend value (lists and dicts element by element)."""
    if isinstance(v, np.ndarray) or _is_torch(v):
        return conv(v)
    if isinstance(v, list):
        return [to_backend(x, conv) for x in v]
    if isinstance(v, dict):
        return {k: to_backend(x, conv) for k, x in v.items()}
    return v


def to_host(v, conv):
    """A backend value as numpy (lists and dicts element by element); Python and numpy scalars
    (a map's values, e.g. ZipMap's floats) stay the scalars they are, as onnxruntime returns them."""
    if v is None or isinstance(v, (np.ndarray, np.generic, int, float, complex, str, bytes)) or conv is None:
        return v
    if isinstance(v, list):
        return [to_host(x, conv) for x in v]
    if isinstance(v, dict):
        return {k: to_host(x, conv) for k, x in v.items()}
    try:
        return conv(v)
    except Exception:
        return v


def fresh_outputs(values: list, kept_ids: frozenset) -> list:
    """``values`` with every array that the caller could share with something made its own."""
    seen: set = set()

    def own(v):
        if isinstance(v, np.ndarray):
            if v.base is not None or not v.flags.writeable or id(v) in kept_ids or id(v) in seen:
                v = v.copy()
            seen.add(id(v))
            return v
        if isinstance(v, np.generic):
            return np.asarray(v).copy()
        if isinstance(v, list):
            return [own(x) for x in v]
        if isinstance(v, dict):
            return {k: own(x) for k, x in v.items()}
        return v

    return [own(v) for v in values]
