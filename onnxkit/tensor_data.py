"""Tensor contents <-> numpy arrays (Clause 6.3.4 storage, Table 7, Annex B.2.16).

A :class:`~onnxkit.ir.tensor.Tensor` keeps its storage as on the wire.  This module reads it
(:func:`tensor_to_numpy`, :func:`sparse_to_dense`) and computes the storage fields of an array
(:func:`raw_fields` for raw storage, :func:`numpy_to_typed` / :func:`typed_fields` for typed
storage); :func:`onnxkit.ir.tensor.numpy_to_tensor` / ``numpy_to_typed_tensor`` (and
``Tensor.from_numpy``) build tensors from them.  It works on a tensor through its fields and
imports nothing of the IR (the IR imports it); external contents are read through
:func:`onnxkit.external_read.read_external`.

Raw storage: elements little-endian, fixed width; BOOL one octet per element; COMPLEX64/128
as (real, imaginary) pairs; sub-byte types bit-packed (Clause 6.3.4, see :mod:`onnxkit.narrow`).
Typed storage (field per ``ElementType.typed_field``):

=============  ===========================================================================
int32_data     INT8 UINT8 INT16 UINT16 INT32 BOOL (values); FLOAT16 BFLOAT16 FP8 E8M0 (the
               unsigned integer of their bits, 6.3.4 last paragraph); 2/4/6-bit types packed
               per Table 7
int64_data     INT64
uint64_data    UINT32 UINT64
float_data     FLOAT; COMPLEX64 as pairs
double_data    DOUBLE; COMPLEX128 as pairs
string_data    STRING (octet strings)
=============  ===========================================================================

Every malformed storage raises :class:`~onnxkit.errors.OnnxkitTypeError` naming the tensor and
the expected and actual sizes.  Reading is lenient where the value is unambiguous: an
integer of int32_data/uint64_data wider than its element type contributes its low-order
bits (so a signed or unsigned rendering of the same bits both read correctly), a BOOL octet
other than 0 reads as True, and the unused bits of narrow typed storage (which SHALL be
zero) and the padding bits of raw storage are ignored.
"""

from __future__ import annotations

import os
import sys
from typing import Optional

import numpy as np

from .dtypes import DataType, ElementType, element_type, from_numpy_dtype
from .errors import OnnxkitTypeError
from .narrow import (
    convert, from_codes, pack_bits, pack_typed, packed_size, to_codes, typed_count, unpack_bits,
    unpack_typed,
)

__all__ = ["tensor_to_numpy", "raw_fields", "numpy_to_typed", "typed_fields", "sparse_to_dense"]

_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")
_LITTLE = sys.byteorder == "little"


def record_base_dir(base_dir, tensors, on_tensors: bool = True) -> Optional[str]:
    """``base_dir`` (the directory holding the model file) made absolute, so that resolution does
    not depend on the working directory later (Clause 13.2 NOTE), and set as each of ``tensors``'
    ``base_dir`` (None on them where not ``on_tensors``: external data ``'never'``); returned for
    the caller's model.  The loader (:func:`onnxkit.load`) and :func:`onnxkit.external.attach` both
    record it so."""
    base = os.path.abspath(os.fspath(base_dir)) if base_dir is not None else None
    tensor_base = base if on_tensors else None
    for t in tensors:
        t.base_dir = tensor_base
    return base


def read_external(t: Tensor) -> memoryview:
    """The octets of the external tensor ``t``: :func:`onnxkit.external_read.read_external`, whose
    modules (with the storage's) a process imports when it first reads an external tensor."""
    from .external_read import read_external as read

    return read(t)


def _label(t: Tensor) -> str:
    return f"tensor {t.name!r}" if t.name else "unnamed tensor"


def _fail(t: Tensor, message: str):
    raise OnnxkitTypeError(f"{_label(t)}: {message}")


_INTP_MAX = int(np.iinfo(np.intp).max)


def _shape(t: Tensor, dims, bits: int = 8) -> tuple:
    """``dims`` as a shape numpy can hold: non-negative integers whose non-zero extents, times
    the element size, fit in an index (numpy refuses larger ones even with a zero extent)."""
    try:
        shape = tuple(int(d) for d in dims)
    except (TypeError, ValueError):
        _fail(t, f"dims {list(dims)!r} are not integers")
    if any(d < 0 for d in shape):
        _fail(t, f"dims {list(shape)} contain a negative dimension")
    span = max(1, (bits + 7) // 8)
    for d in shape:
        if d:
            span *= d
    if span > _INTP_MAX:
        _fail(t, f"dims {list(shape)}: the product of the non-zero extents times the element size overflows a "
                 f"{np.dtype(np.intp).itemsize * 8}-bit index, so no array can have this shape")
    return shape


def _count(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _row(data_type) -> ElementType:
    return data_type if isinstance(data_type, ElementType) else element_type(int(data_type))


# ============================================================================ reading

def tensor_to_numpy(t: Tensor) -> np.ndarray:
    """The contents of ``t`` as an array of shape ``t.dims`` and the dtype of its element type.

    Raw (and external) storage of types of 8 bits or more gives a **read-only zero-copy view**
    of the octets; typed storage FLOAT/DOUBLE/INT32/INT64/UINT64 gives a read-only view of
    the field; other cases give a new array.  STRING gives an object array of ``bytes``.
    Raises :class:`OnnxkitTypeError` for tag 0 or an unlisted tag (Clause 6.2), a storage
    whose size does not match ``dims``, raw and typed storage both present (6.3.4: one or
    the other), data in a field that does not carry the element type, raw storage for
    STRING, and a segmented tensor (``segment`` set; onnxkit does not reassemble segments).
    """
    et = element_type(t.data_type, where=_label(t))
    shape = _shape(t, t.dims, et.bits)
    n = _count(shape)
    if t.segment is not None:
        _fail(t, "segmented tensors (TensorProto.segment) are not supported")
    present = [f for f in _TYPED_FIELDS if len(getattr(t, f)) > 0]
    if t.is_external:
        if et.tag == DataType.STRING:
            _fail(t, "STRING elements cannot be stored externally (no raw layout for strings)")
        if present:
            _fail(t, f"external data and typed storage ({', '.join(present)}) both present")
        return _from_raw(t, et, read_external(t), shape, n)
    raw = t.raw_data
    if raw is not None and (len(raw) > 0 or not present):
        if present:
            _fail(t, f"raw_data and typed storage ({', '.join(present)}) both present; "
                     "a tensor uses one or the other (Clause 6.3.4)")
        if et.tag == DataType.STRING:
            if n == 0 and len(raw) == 0:
                return np.empty(shape, dtype=object)
            _fail(t, "STRING tensors use string_data; raw_data has no layout for strings")
        return _from_raw(t, et, raw, shape, n)
    wrong = [f for f in present if f != et.typed_field]
    if wrong:
        _fail(t, f"element type {et.name} is carried in {et.typed_field}, but {', '.join(wrong)} holds data")
    return _from_typed(t, et, shape, n)


def _octets(t: Tensor, buf) -> memoryview:
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.ndim != 1 or mv.format not in ("B", "b", "c"):
        try:
            mv = mv.cast("B")
        except TypeError:
            mv = memoryview(mv.tobytes())
    return mv


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _from_raw(t: Tensor, et: ElementType, buf, shape: tuple, n: int) -> np.ndarray:
    mv = _octets(t, buf)
    nbytes = mv.nbytes
    need = packed_size(n, et.bits) if et.is_narrow else n * (et.bits // 8)
    if nbytes != need:
        per = f"{et.bits} bits" if et.is_narrow else f"{et.bits // 8} octet(s)"
        _fail(t, f"raw data of {n} {et.name} elements ({per} each, dims {list(shape)}) must be "
                 f"{need} octets, got {nbytes}")
    if et.is_narrow:  # Clause 6.3.4 bit stream
        return from_codes(unpack_bits(mv, et.bits, n), et).reshape(shape)
    if et.tag == DataType.BOOL:
        u8 = np.frombuffer(mv, dtype=np.uint8)
        if n and int(u8.max()) > 1:
            return (u8 != 0).reshape(shape)  # normalise stray octets instead of leaking them
        return _readonly(u8.view(np.bool_)).reshape(shape)
    if _LITTLE or et.bits == 8:
        arr = np.frombuffer(mv, dtype=et.dtype)
    else:  # big-endian host: the wire is little-endian
        w = et.bits // 8 if not et.is_complex else et.bits // 16
        arr = np.frombuffer(mv, dtype=np.dtype(f"<u{w}")).astype(f"=u{w}").view(et.dtype)
    return _readonly(arr).reshape(shape)


def _from_typed(t: Tensor, et: ElementType, shape: tuple, n: int) -> np.ndarray:
    field = et.typed_field
    data = getattr(t, field)
    if et.tag == DataType.STRING:
        if len(data) != n:
            _fail(t, f"string_data has {len(data)} elements, dims {list(shape)} need {n}")
        out = np.empty(n, dtype=object)
        for i, s in enumerate(data):  # Python objects: nothing to vectorise
            out[i] = s.encode("utf-8") if isinstance(s, str) else bytes(s)
        return out.reshape(shape)
    data = np.asarray(data).reshape(-1)
    if et.is_narrow:  # Table 7
        need = typed_count(n, et.bits)
        if data.size != need:
            _fail(t, f"{field} of {n} {et.name} elements must hold {need} 32-bit integers "
                     f"(Table 7), got {data.size}")
        return from_codes(unpack_typed(data, et.bits, n), et).reshape(shape)
    need = 2 * n if et.is_complex else n
    if data.size != need:
        what = f"{n} complex elements need {need} values (pairs)" if et.is_complex else f"need {need} values"
        _fail(t, f"{field} has {data.size} values, dims {list(shape)}: {what}")
    tag = et.tag
    if data.dtype == et.dtype:  # FLOAT, DOUBLE, INT32, INT64, UINT64: view of the field
        return _readonly(data.view()).reshape(shape)
    if et.is_complex:
        part = np.float32 if tag == DataType.COMPLEX64 else np.float64
        return _readonly(np.ascontiguousarray(data, dtype=part).view(et.dtype)).reshape(shape)
    if tag == DataType.BOOL:
        return (data != 0).reshape(shape)
    if et.is_float:  # FLOAT16, BFLOAT16, FP8, E8M0: the unsigned integer of the bits (6.3.4)
        bits = np.uint16 if et.bits == 16 else np.uint8
        return data.astype(bits).view(et.dtype).reshape(shape)
    return data.astype(et.dtype).reshape(shape)  # narrower ints: the low-order bits


# ============================================================================ writing

def _coerce(array, data_type) -> tuple:
    """(array, element type) for writing: the inferred type, or ``data_type`` with the values
    converted to it by :func:`onnxkit.narrow.convert` (value conversion, RNE, saturating)."""
    arr = np.asarray(array)
    if data_type is None:
        et = from_numpy_dtype(arr.dtype)
    else:
        et = _row(data_type)
    if et.tag == DataType.STRING:
        if arr.dtype.kind not in "USO":
            raise OnnxkitTypeError(f"STRING tensor needs str/bytes elements, got an array of {arr.dtype}")
        return arr, et
    if arr.dtype.kind in "USO":
        raise OnnxkitTypeError(f"cannot store an array of {arr.dtype} as {et.name}")
    native = arr.dtype.newbyteorder("=") if arr.dtype.byteorder not in "=|" else arr.dtype
    if native != et.dtype:
        arr = convert(arr, et)
    elif native != arr.dtype:
        arr = arr.astype(native)
    return arr, et


def _string_list(arr: np.ndarray) -> list:
    out = []
    for s in arr.reshape(-1).tolist():
        if isinstance(s, str):
            out.append(s.encode("utf-8"))
        elif isinstance(s, (bytes, bytearray, memoryview, np.bytes_)):
            out.append(bytes(s))
        else:
            raise OnnxkitTypeError(f"STRING element {s!r} is neither str nor bytes")
    return out


def _raw_bytes(arr: np.ndarray, et: ElementType) -> bytes:
    if et.is_narrow:
        return pack_bits(to_codes(arr), et.bits)
    a = np.ascontiguousarray(arr)
    if et.tag == DataType.BOOL:
        return a.view(np.uint8).tobytes()
    if not _LITTLE and et.bits > 8:
        w = et.bits // 8 if not et.is_complex else et.bits // 16
        return a.view(f"=u{w}").astype(f"<u{w}").tobytes()
    return a.tobytes()


def raw_fields(array, data_type: Optional[int] = None) -> dict:
    """The fields (``dims``, ``data_type`` and ``raw_data`` or ``string_data``) of a tensor of
    shape ``array.shape`` holding ``array`` in raw storage.

    ``raw_data`` (``bytes``) for every element type except STRING, which uses ``string_data``
    (``str`` elements encoded as UTF-8).  The element type is inferred from the dtype
    (:func:`onnxkit.dtypes.from_numpy_dtype`), or is ``data_type``: then the *values* are
    converted to it with :func:`onnxkit.narrow.convert` (RNE, saturating/clamping) --
    never reinterpreted (an int8 array is not taken as INT4 codes).
    """
    arr, et = _coerce(array, data_type)
    dims = [int(d) for d in arr.shape]
    if et.tag == DataType.STRING:
        return {"dims": dims, "data_type": int(et.tag), "string_data": _string_list(arr)}
    return {"dims": dims, "data_type": int(et.tag), "raw_data": _raw_bytes(arr, et)}


def numpy_to_typed(array, elem_type) -> tuple:
    """``(field_name, data)``: ``array`` (flattened) in the typed storage of ``elem_type``.

    ``data`` is the numpy array for the field (``list`` of ``bytes`` for ``string_data``):
    FLOAT -> float_data; COMPLEX64 -> float_data pairs; DOUBLE/COMPLEX128 -> double_data;
    INT64 -> int64_data; UINT32/UINT64 -> uint64_data; INT8..INT32, UINT8, UINT16, BOOL ->
    int32_data values; FLOAT16/BFLOAT16/FP8/E8M0 -> int32_data bit patterns (6.3.4);
    2/4/6-bit types -> int32_data packed per Table 7.  Values are converted to
    ``elem_type`` as in :func:`raw_fields` when the dtype differs.
    """
    arr, et = _coerce(array, elem_type)
    field = et.typed_field
    if et.tag == DataType.STRING:
        return field, _string_list(arr)
    flat = np.ascontiguousarray(arr).reshape(-1)
    if et.is_narrow:
        return field, pack_typed(to_codes(flat), et.bits)
    if et.is_complex:
        return field, flat.view(np.float32 if et.tag == DataType.COMPLEX64 else np.float64).copy()
    if field == "int32_data" and et.is_float:
        return field, flat.view(np.uint16 if et.bits == 16 else np.uint8).astype(np.int32)
    target = {"float_data": np.float32, "double_data": np.float64, "int32_data": np.int32,
              "int64_data": np.int64, "uint64_data": np.uint64}[field]
    return field, flat.astype(target)


def typed_fields(array, data_type: Optional[int] = None) -> dict:
    """The fields (``dims``, ``data_type`` and the typed field) of a tensor holding ``array`` in
    typed storage (see :func:`numpy_to_typed`)."""
    arr, et = _coerce(array, data_type)
    field, data = numpy_to_typed(arr, et)
    return {"dims": [int(d) for d in arr.shape], "data_type": int(et.tag), field: data}


# ============================================================================ sparse

def sparse_to_dense(sp: SparseTensor) -> np.ndarray:
    """The dense array of shape ``sp.dims`` that ``sp`` denotes (SparseTensorProto).

    ``values`` is a 1-D tensor of NNZ elements; ``indices`` an integer tensor, either [NNZ]
    (indices into the row-major flattened dense tensor) or [NNZ, rank] (coordinates).  Every
    other element is zero (``b""`` for STRING, code 0 -- 2**-127 -- for FLOAT8E8M0, which has no
    zero).  Raises :class:`OnnxkitTypeError` for missing parts, a shape mismatch, an index out
    of range, or the same position given twice.
    """
    if sp.values is None or sp.indices is None:
        raise OnnxkitTypeError("sparse tensor lacks " + ("values" if sp.values is None else "indices"))
    v = sp.values
    label = f"sparse tensor {v.name!r}" if v.name else "sparse tensor"

    def fail(msg):
        raise OnnxkitTypeError(f"{label}: {msg}")

    shape = _shape(v, sp.dims)
    total = _count(shape)
    if len(v.dims) != 1:
        fail(f"values must be 1-D, got dims {list(v.dims)}")
    values = tensor_to_numpy(v)
    nnz = values.shape[0]
    ix_type = element_type(sp.indices.data_type, where=f"{label} indices")
    if not ix_type.is_integral:
        fail(f"indices must be integers, got {ix_type.name}")
    idx = np.asarray(tensor_to_numpy(sp.indices)).astype(np.int64)
    if idx.ndim == 1:
        if idx.shape[0] != nnz:
            fail(f"{idx.shape[0]} linearized indices for {nnz} values")
        bad = np.flatnonzero((idx < 0) | (idx >= total))
        if bad.size:
            fail(f"index {int(idx[bad[0]])} (entry {int(bad[0])}) is outside 0..{total - 1} for dims {list(shape)}")
        lin = idx
    elif idx.ndim == 2:
        if idx.shape != (nnz, len(shape)):
            fail(f"indices have shape {list(idx.shape)}, expected [{nnz}, {len(shape)}] (NNZ, rank)")
        bad = np.argwhere((idx < 0) | (idx >= np.asarray(shape, dtype=np.int64)))
        if bad.size:
            i, j = (int(b) for b in bad[0])
            fail(f"coordinate {int(idx[i, j])} of entry {i} (axis {j}) is outside 0..{shape[j] - 1}")
        lin = np.ravel_multi_index(tuple(idx.T), shape) if nnz else np.zeros(0, np.int64)
    else:
        fail(f"indices must be [NNZ] or [NNZ, rank], got shape {list(idx.shape)}")
    if np.unique(lin).size != lin.size:
        fail("the same position is given more than once in indices")
    if values.dtype == object:
        dense = np.full(total, b"", dtype=object)
    else:
        dense = np.zeros(total, dtype=values.dtype)
    dense[lin] = values
    return dense.reshape(shape)
