"""onnxruntime's LoRA adapter file (``.onnx_adapter``): read and written here, without a library.

The file is a FlatBuffers buffer of onnxruntime's schema ``adapter_schema.fbs`` (file
identifier ``"TORT"``, format version 1)::

    table Parameter { name:string; dims:[int64]; data_type:int32 (ONNX element type);
                      raw_data:[uint8] (force_align: 8); }
    table Adapter { format_version:int; adapter_version:int; model_version:int;
                    parameters:[Parameter]; }

Why no ``flatbuffers`` dependency: two small tables are read and written, the runtime imports
nothing beyond numpy, and every offset the reader follows is checked here against the buffer
so that a damaged file is an :class:`~onnxkit.errors.OnnxkitError` naming what is wrong and
where (the library would raise ``IndexError``/``struct.error`` from deep inside).

Contracts:

* :func:`read_adapter` reads a buffer (the file memory-mapped) and returns
  :class:`AdapterContents`: the three versions and ``{name: array}``, each array a read-only,
  zero-copy view of the buffer in the parameter's element type and dims (a copy only where the
  host is big-endian or the data is not aligned for its type).  Refused, as onnxruntime refuses
  them: no ``TORT`` identifier, a format version other than 1, a parameter without a name, with
  element type UNDEFINED, without dims (onnxruntime requires at least one), or whose raw data is
  not dims x element size octets, an element type onnxruntime 1.32 does not take as a LoRA
  parameter (:data:`STORABLE`: not STRING, BOOL, COMPLEX64, COMPLEX128, nor outside the schema's
  1-20); also any offset or length outside the buffer.
* :func:`build_adapter` writes the same layout FlatBuffers' builder accepts: every offset points
  forward, tables are 4-aligned, vtables 2-aligned, strings NUL-terminated, the int64 dims and the
  raw data 8-aligned; all fields are written (defaults included).  onnxruntime reads what it
  writes and the other way round (tests/ort/test_lora_adapters.py).  It refuses what onnxruntime
  could not read back: an empty name, a scalar (no dims), an element type not in :data:`STORABLE`.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
import sys
from typing import Optional

import numpy as np

from ..errors import NoSuchFileError, OnnxkitError

IDENTIFIER = b"TORT"
FORMAT_VERSION = 1

#: The element types a parameter may have: onnxruntime 1.32 reads these (the schema's
#: TensorDataType enumerates 1-20; STRING, BOOL, COMPLEX64 and COMPLEX128 it refuses).
STORABLE = frozenset(range(1, 21)) - {8, 9, 14, 15}


class AdapterContents:
    """What an adapter file holds: ``format_version``, ``adapter_version``, ``model_version``
    and ``parameters`` (``{name: numpy array}``, in the file's order)."""

    __slots__ = ("format_version", "adapter_version", "model_version", "parameters")

    def __init__(self, format_version: int, adapter_version: int, model_version: int, parameters: dict):
        self.format_version = format_version
        self.adapter_version = adapter_version
        self.model_version = model_version
        self.parameters = parameters


def _dtype(tag: int, what: str) -> np.dtype:
    from ..dtypes import ELEMENT_TYPES

    if tag not in STORABLE:
        name = ELEMENT_TYPES[tag].name if tag in ELEMENT_TYPES else "not an element type of the schema"
        raise OnnxkitError(f"{what}: element type {tag} ({name}) is not a LoRA parameter type (the adapter "
                           f"format's are {sorted(STORABLE)}, as onnxruntime reads them)")
    return np.dtype(ELEMENT_TYPES[tag].dtype)


class _Reader:
    """Bounds-checked access to a FlatBuffers buffer; ``where`` names the file in errors."""

    def __init__(self, buf, where: str):
        self.buf = buf
        self.n = len(buf)
        self.where = where

    def fail(self, msg: str):
        raise OnnxkitError(f"{self.where}: {msg}")

    def scalar(self, fmt: str, pos: int):
        size = struct.calcsize(fmt)
        if pos < 0 or pos + size > self.n:
            self.fail(f"a {size}-octet value at offset {pos} lies outside the {self.n}-octet buffer")
        return struct.unpack_from(fmt, self.buf, pos)[0]

    def follow(self, pos: int) -> int:
        """The position a uoffset field at ``pos`` points to."""
        off = self.scalar("<I", pos)
        if off == 0:
            self.fail(f"a zero offset at {pos}")
        target = pos + off
        if target >= self.n:
            self.fail(f"the offset at {pos} points to {target}, outside the {self.n}-octet buffer")
        return target

    def table(self, pos: int) -> tuple:
        """``(pos, field offsets)`` of the table at ``pos``."""
        vt = pos - self.scalar("<i", pos)
        vt_size = self.scalar("<H", vt)
        tbl_size = self.scalar("<H", vt + 2)
        if vt_size < 4 or vt_size % 2 or vt + vt_size > self.n or pos + tbl_size > self.n:
            self.fail(f"the table at {pos} has a broken vtable at {vt}")
        fields = [self.scalar("<H", vt + 4 + 2 * i) for i in range((vt_size - 4) // 2)]
        if any(f >= tbl_size and f for f in fields):
            self.fail(f"a field of the table at {pos} lies outside its {tbl_size} octets")
        return pos, fields

    @staticmethod
    def field(table: tuple, i: int) -> int:
        pos, fields = table
        return pos + fields[i] if i < len(fields) and fields[i] else 0

    def int32(self, table: tuple, i: int, default: int = 0) -> int:
        at = self.field(table, i)
        return self.scalar("<i", at) if at else default

    def vector(self, table: tuple, i: int, elem_size: int) -> Optional[tuple]:
        """``(start of elements, count)`` of a vector field, None when absent."""
        at = self.field(table, i)
        if not at:
            return None
        vec = self.follow(at)
        count = self.scalar("<I", vec)
        if vec + 4 + count * elem_size > self.n:
            self.fail(f"the vector at {vec} ({count} elements of {elem_size} octets) runs past the buffer's end")
        return vec + 4, count

    def string(self, table: tuple, i: int) -> Optional[str]:
        got = self.vector(table, i, 1)
        if got is None:
            return None
        start, count = got
        try:
            return bytes(self.buf[start:start + count]).decode("utf-8")
        except UnicodeDecodeError:
            self.fail(f"the string at {start} is not UTF-8")


def read_adapter(buf, where: str = "adapter") -> AdapterContents:
    """The contents of an adapter buffer (bytes, mmap or memoryview); see the module docstring."""
    r = _Reader(buf, where)
    if r.n <= 8 or bytes(buf[4:8]) != IDENTIFIER:
        r.fail(f"not an onnxruntime adapter file (no {IDENTIFIER.decode()!r} identifier at offset 4)")
    root = r.table(r.follow(0))
    fmt = r.int32(root, 0)
    if fmt != FORMAT_VERSION:
        r.fail(f"adapter format version {fmt} is not supported (supported: {FORMAT_VERSION})")
    params: dict = {}
    got = r.vector(root, 3, 4)
    start, count = got if got is not None else (0, 0)
    for k in range(count):
        p = r.table(r.follow(start + 4 * k))
        name = r.string(p, 0)
        if not name:
            r.fail(f"parameter {k}: its name is missing")
        what = f"{where}: parameter {name!r}"
        tag = r.int32(p, 2)
        if tag == 0:
            r.fail(f"parameter {name!r}: data_type is UNDEFINED")
        dtype = _dtype(tag, what)
        dims_at = r.vector(p, 1, 8)
        if dims_at is None or dims_at[1] == 0:
            r.fail(f"parameter {name!r}: dims is missing or empty")
        dims = [r.scalar("<q", dims_at[0] + 8 * j) for j in range(dims_at[1])]
        if any(d < 0 for d in dims):
            r.fail(f"parameter {name!r}: negative dims {dims}")
        raw = r.vector(p, 3, 1)
        if raw is None:
            r.fail(f"parameter {name!r}: raw_data is missing")
        size = math.prod(dims)
        if raw[1] != size * dtype.itemsize:
            r.fail(f"parameter {name!r}: raw_data size ({raw[1]}) does not match expected size "
                   f"({size * dtype.itemsize}) calculated from tensor shape {dims} and element type")
        arr = np.frombuffer(buf, dtype=dtype, count=size, offset=raw[0]) if size else np.zeros(0, dtype)
        if sys.byteorder == "big" and dtype.itemsize > 1:
            arr = arr.byteswap()
        elif not arr.flags.aligned:
            arr = arr.copy()
        arr = arr.reshape(dims)
        arr.flags.writeable = False
        params[name] = arr
    return AdapterContents(fmt, r.int32(root, 1), r.int32(root, 2), params)


def read_adapter_file(path, what: str) -> AdapterContents:
    """The adapter in the file ``path``, memory-mapped (its arrays are views of the mapping), read
    with :func:`read_adapter`; ``what`` names the caller in errors."""
    try:
        path = os.fspath(path)
    except TypeError:
        raise OnnxkitError(f"{what}: expected a file path, got {type(path).__name__}") from None
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                raise OnnxkitError(f"{what}: {path!r} is empty, not an adapter file")
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise NoSuchFileError(f"{what}: no such file {path!r}") from None
    except OSError as exc:
        raise OnnxkitError(f"{what}: cannot open {path!r}: {exc.strerror or exc}") from None
    return read_adapter(buf, f"{what}: {path!r}")


class _Writer:
    def __init__(self):
        self.out = bytearray()

    def align(self, n: int, extra: int = 0) -> int:
        """Pad so that ``position + extra`` is a multiple of ``n``; returns the position."""
        while (len(self.out) + extra) % n:
            self.out.append(0)
        return len(self.out)

    def put(self, fmt: str, *values) -> int:
        pos = len(self.out)
        self.out += struct.pack(fmt, *values)
        return pos

    def patch(self, field_pos: int, target: int) -> None:
        struct.pack_into("<I", self.out, field_pos, target - field_pos)

    def table(self, nfields: int) -> tuple:
        """A vtable and a table of ``nfields`` 4-octet fields; returns ``(table pos, [field pos])``."""
        self.align(4, 2 * (nfields + 2))  # the table after the vtable starts 4-aligned
        vt = self.put("<" + "H" * (nfields + 2), 2 * (nfields + 2), 4 + 4 * nfields,
                      *(4 + 4 * i for i in range(nfields)))
        pos = self.put("<i", len(self.out) - vt)
        return pos, [self.put("<I", 0) for _ in range(nfields)]

    def vector(self, data: bytes, count: int, elem_align: int) -> int:
        pos = self.align(max(elem_align, 4), 4)
        self.put("<I", count)
        self.out += data
        return pos


def build_adapter(parameters: dict, adapter_version: int, model_version: int) -> bytes:
    """An adapter buffer of ``parameters`` (``{name: numpy array}``, each tagged with its ONNX
    element type: ``{name: (array, tag)}``) and the two versions; see the module docstring."""
    w = _Writer()
    w.put("<I", 0)
    w.out += IDENTIFIER
    root, fields = w.table(4)
    w.patch(0, root)
    for i, v in enumerate((FORMAT_VERSION, adapter_version, model_version)):
        struct.pack_into("<i", w.out, fields[i], int(v))
    names = list(parameters)
    vec = w.vector(b"\0" * (4 * len(names)), len(names), 4)
    w.patch(fields[3], vec)
    for k, name in enumerate(names):
        arr, tag = parameters[name]
        what = f"export_adapter: parameter {name!r}"
        if not isinstance(name, str) or not name:
            raise OnnxkitError(f"export_adapter: parameter names must be non-empty strings, got {name!r}")
        dtype = _dtype(int(tag), what)
        if np.ndim(arr) == 0:  # (before ascontiguousarray, which makes a scalar 1-d)
            raise OnnxkitError(f"{what}: a scalar (no dims) cannot be read back by onnxruntime, which requires "
                               "at least one dimension; reshape it to [1]")
        arr = np.ascontiguousarray(arr)
        if arr.dtype != dtype:
            raise OnnxkitError(f"{what}: its array is {arr.dtype}, not element type {tag}'s {dtype}")
        pos, pf = w.table(4)
        w.patch(vec + 4 + 4 * k, pos)
        struct.pack_into("<i", w.out, pf[2], int(tag))
        encoded = name.encode("utf-8")
        at = w.vector(encoded + b"\0", len(encoded), 1)
        w.patch(pf[0], at)
        at = w.vector(struct.pack(f"<{arr.ndim}q", *arr.shape), arr.ndim, 8)
        w.patch(pf[1], at)
        raw = (arr.byteswap() if sys.byteorder == "big" and dtype.itemsize > 1 else arr).tobytes()
        at = w.vector(raw, len(raw), 8)
        w.patch(pf[3], at)
    w.align(8)
    return bytes(w.out)
