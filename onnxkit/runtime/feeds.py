"""What a caller feeds a session and what it gets back.

Feeds (:func:`coerce_feed`): numpy arrays as they are, except that one in a non-native byte
order (``>f4`` on a little-endian machine) is converted to the native order (values kept);
numpy and Python scalars and nested lists become arrays of the declared element type (a float
where an integer is declared is refused, never truncated; an integer outside the declared
integer type's range is refused, never wrapped — onnxruntime refuses both too; a float beyond
a float type's range becomes +/-inf, as onnxruntime); a dict fed to a map input has its keys
checked against the key type (STRING: ``str``/``bytes``; integers: in range) and each value
that is a Python or numpy scalar or a 0-d array converted to the value type by the same rules
(as onnxruntime converts a dict's values; shape ``[1]`` where the value type declares it);
:class:`OrtValue` gives its value; a torch tensor stays a tensor on
a torch backend (checked through a zero-strided numpy stand-in of its shape and dtype, never
copied to the host) and becomes a numpy array on the others.  Outputs
(:func:`fresh_outputs`): every array is the caller's own — a copy is made of any that is a
view, read-only, one of the values the session keeps, a feed, or another output — and is
handed back as a view of the array owning its data, which nothing else references (so its
``.base`` is set, as for onnxruntime's outputs, viewing the buffer it allocated; no copy).
"""

from __future__ import annotations


import numpy as np

from .. import ir
from ..dtypes import ELEMENT_TYPES
from ..errors import OnnxkitError
from ..narrow import integer_range
from ..status import InvalidArgument
from .ortvalue import OrtValue
from .torch_values import torch_to_numpy, torch_to_numpy_dtype


class InputError(OnnxkitError, InvalidArgument, ValueError):
    """A fed value does not match the model's declared input (or is not an input at all)."""


def is_torch_backend(backend) -> bool:
    """Whether the backend's values are torch tensors: what it declares
    (:attr:`Backend.array_kind <onnxkit.registry.Backend>` ``"torch"``, the gpu backend)."""
    return getattr(backend, "array_kind", None) == "torch"


def _is_torch(value) -> bool:
    return type(value).__module__.startswith("torch") and hasattr(value, "dtype") and hasattr(value, "shape")


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


def _integer_leaves(value):
    """The leaves of ``value`` (a scalar or nested list) as an object array when every one is an
    integer (Python or numpy, bool included), else None: numpy would make a list mixing
    ``2**63`` and ``-1`` float64, and one beyond 64 bits an object array."""
    try:
        leaves = np.asarray(value, dtype=object)
    except ValueError:
        return None
    if all(isinstance(x, (int, np.integer, np.bool_)) for x in leaves.flat):
        return leaves
    return None


def check_integer_range(name: str, arr: np.ndarray, et, what: str = "value") -> None:
    """Raise :class:`InputError` naming input ``name`` when an integer of ``arr`` (an integer,
    bool or object array of integers) does not fit element type ``et`` (never wrapped)."""
    bounds = integer_range(et)
    if bounds is None or arr.size == 0 or arr.dtype.kind == "b":
        return
    if arr.dtype.kind == "O":
        ints = [int(x) for x in arr.flat]
        lo, hi = min(ints), max(ints)
    else:
        lo, hi = int(arr.min()), int(arr.max())
    bad = lo if lo < bounds[0] else (hi if hi > bounds[1] else None)
    if bad is not None:
        raise InputError(f"input {name!r}: {what} {bad} is out of the range of the declared element type "
                         f"{et.name.lower()} [{bounds[0]}, {bounds[1]}]")


def _python_floats(name: str, leaves: np.ndarray, et) -> np.ndarray:
    """Object array of real numbers (Python integers beyond 64 bits among them) as float64."""
    try:
        return np.array([float(x) for x in leaves.flat], dtype=np.float64).reshape(leaves.shape)
    except OverflowError:
        raise InputError(f"input {name!r}: an integer is too large for the declared element type "
                         f"{et.name.lower()}") from None
    except (TypeError, ValueError):
        raise InputError(f"input {name!r}: declared tensor of {et.name.lower()}, got a list of object") from None


def _from_python(name: str, value, t):
    """A Python scalar or (nested) list as an array of the declared element type; an integer
    outside an integer type's range is refused, never wrapped (onnxruntime refuses it too)."""
    want = _declared_dtype(t)
    try:
        arr = np.asarray(value)
    except ValueError as exc:  # ragged nested lists
        raise InputError(f"input {name!r}: cannot make a tensor of this list: {exc}") from None
    if want is None or want is object:
        return arr.astype(object) if want is object and arr.dtype.kind in "US" else arr
    return _numbers_as(name, value, arr, ELEMENT_TYPES[t.elem_type])


def _numbers_as(name: str, value, arr: np.ndarray, et) -> np.ndarray:
    """``arr`` (numpy's reading of ``value``) as an array of numeric element type ``et``: integers
    exactly and in range, floats not into integers, complex not into reals; a float beyond a
    float type's range is +/-inf (IEEE overflow, as onnxruntime)."""
    to_int = et.is_integral or et.tag == 9  # integer or BOOL
    leaves = _integer_leaves(value) if arr.dtype.kind in "fO" and to_int else None
    if leaves is not None:  # integers numpy read as float64 or object: taken exactly
        arr = leaves
    if arr.dtype.kind in "US":
        raise InputError(f"input {name!r}: declared tensor of {et.name.lower()}, got a list of {arr.dtype}")
    if arr.dtype.kind == "O" and leaves is None:
        if to_int:
            raise InputError(f"input {name!r}: declared tensor of {et.name.lower()}, got a list of object")
        arr = _python_floats(name, arr, et)
    if arr.dtype.kind in "fc" and to_int:
        raise InputError(f"input {name!r}: declared an integer tensor ({et.name.lower()}), got floating-point values")
    if arr.dtype.kind == "c" and not et.is_complex:
        raise InputError(f"input {name!r}: declared a real tensor ({et.name.lower()}), got complex values")
    check_integer_range(name, arr, et)
    with np.errstate(over="ignore"):
        return arr.astype(et.dtype)


def _map_key(name: str, key, key_type: int):
    """A map key checked against the declared key type (STRING: str or bytes; an integer type:
    an integer in its range)."""
    et = ELEMENT_TYPES.get(key_type)
    if et is None:
        return key
    if et.tag == 8:
        if not isinstance(key, (str, bytes, np.str_, np.bytes_)):
            raise InputError(f"input {name!r}: map key {key!r} must be a string (declared key type string), "
                             f"got {type(key).__name__}")
        return key
    if isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer)):
        # the last clause is onnxruntime's wording, which its tests and callers match
        raise InputError(f"input {name!r}: map key {key!r} must be an integer "
                         f"(declared key type {et.name.lower()}), got {type(key).__name__}: "
                         f"Unexpected key type  {type(key)}, it cannot be linked to C type {et.name.lower()}_t")
    check_integer_range(name, np.asarray(key, dtype=object), et, "map key")
    return key


def _map_value(name: str, value, t):
    """A map value: a Python or numpy scalar, or a 0-d array, becomes an array of the declared
    element type (shape ``[1] * rank`` where the declared shape allows it), as onnxruntime
    converts a dict's values; anything else is left to the feed check."""
    want = _declared_dtype(t)
    if want is None or want is object:  # (not ``in (None, object)``: np.dtype(None) is float64)
        return value
    scalar = isinstance(value, (bool, int, float, np.generic)) or (isinstance(value, np.ndarray) and value.ndim == 0)
    if not scalar:
        return value
    arr = _numbers_as(name, value, np.asarray(value), ELEMENT_TYPES[t.elem_type])
    dims = t.shape.values if t.shape is not None else ()
    if all(not isinstance(d, int) or d == 1 for d in dims):
        arr = arr.reshape((1,) * len(dims))
    return arr


def _native(arr: np.ndarray) -> np.ndarray:
    """``arr`` in the machine's byte order (a big-endian ``>f4`` feed is converted, values kept)."""
    if arr.dtype.isnative or arr.dtype.kind in "OSUV":
        return arr
    return arr.astype(arr.dtype.newbyteorder("="))


def coerce_feed(name: str, value, t, torch_backend: bool):
    """``(value to check, value to run or None)`` of one feed; see the module docstring."""
    if isinstance(value, OrtValue):
        value = value._value
    if value is None:
        return value, None
    if isinstance(value, np.ndarray):
        return _native(value), None
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
    if isinstance(t, ir.MapType) and isinstance(value, dict):
        out = {}
        for k, v in value.items():
            where = f"{name}[{k!r}]"
            v = _map_value(where, v, t.value_type)
            out[_map_key(name, k, t.key_type)] = _native(v) if isinstance(v, np.ndarray) else v
        return out, None
    if isinstance(value, (list, tuple, bool, int, float, complex)) and not isinstance(t, (ir.SequenceType, ir.MapType)):
        return _from_python(name, value, t), None
    if isinstance(value, np.generic):
        return _native(np.asarray(value)), None
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
    (a map's values, e.g. ZipMap's floats) stay the scalars they are, as onnxruntime returns them;
    a value ``conv`` refuses by TypeError or ValueError (an opaque one) stays as it is, and any
    other fault of ``conv`` (a failed transfer) propagates."""
    if v is None or isinstance(v, (np.ndarray, np.generic, int, float, complex, str, bytes)) or conv is None:
        return v
    if isinstance(v, list):
        return [to_host(x, conv) for x in v]
    if isinstance(v, dict):
        return {k: to_host(x, conv) for k, x in v.items()}
    try:
        return conv(v)
    except (TypeError, ValueError):  # a value the backend's conversion refuses (opaque): as it is
        return v


def fresh_outputs(values: list, kept_ids: frozenset, feeds=()) -> list:
    """``values`` with every array that the caller could share with something made its own (a
    value of ``kept_ids``, one of the run's ``feeds``, a view, a repeated array); each top-level
    array a view of its owner (see the module docstring).  Makes no reference cycle (a run
    leaves nothing for the cyclic collector)."""
    seen: set = {id(v) for v in feeds if v is not None}
    out = [_own(v, kept_ids, seen) for v in values]
    return [v.view() if isinstance(v, np.ndarray) else v for v in out]


def _own(v, kept_ids: frozenset, seen: set):
    """``v`` as :func:`fresh_outputs` hands it out (``seen``: ids of the arrays handed out so
    far and of the feeds; the array handed out is added)."""
    if isinstance(v, np.ndarray):
        if v.base is not None or not v.flags.writeable or id(v) in kept_ids or id(v) in seen:
            v = v.copy()
        seen.add(id(v))
        return v
    if isinstance(v, np.generic):
        return np.asarray(v).copy()
    if isinstance(v, list):
        return [_own(x, kept_ids, seen) for x in v]
    if isinstance(v, dict):
        return {k: _own(x, kept_ids, seen) for k, x in v.items()}
    return v
