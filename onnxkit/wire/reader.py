"""The reader: bytes to IR, driven by the Annex B table (Clause 12.2-12.5).

Rules it keeps (each is tested):

* varints of at most ten octets, values at most 2**64-1 (12.2.2); negative values as ten-octet
  two's complement (12.2.3); int32 fields range-checked (12.2.3);
* wire types 3 and 4 rejected (12.2.1); a length running past the enclosing message rejected (12.2.5);
* packed and unpacked forms both accepted, also mixed in one message (12.3.3);
* a singular field: the last occurrence wins; an embedded message is merged field by field
  with earlier occurrences (12.3.2) — done by decoding the concatenated occurrences, which is
  what merging means on the wire;
* unknown fields skipped by wire type and retained, octet for octet, with their tag (12.4); the
  deprecated field ``AttributeProto.tp`` is retained the same way, and its value also read;
* documented limits on message size and nesting depth (12.5, :mod:`onnxkit.limits`).

Every fault raises :class:`DecodeError` with the byte offset and the message path.
``raw_data`` is a memoryview of the input (zero copy); the packed fixed-width fields of
TensorProto are numpy views of it.
"""

from __future__ import annotations

import struct

import numpy as np

from ..errors import DecodeError, LimitExceeded
from ..ir.base import WireInfo
from ..limits import DEFAULT_LIMITS, Limits
from .adapters import MANDATORY_SCALARS, build
from .schema import DEFAULTS, DEPRECATED, MESSAGES, ONEOF
from .varint import decode_varints

_unpack_f = struct.Struct("<f").unpack_from
_unpack_d = struct.Struct("<d").unpack_from
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_ARRAY_DTYPE = {"<f4": np.dtype("<f4"), "<f8": np.dtype("<f8"), "int32": np.dtype("int32"),
                "int64": np.dtype("int64"), "uint64": np.dtype("uint64")}
# Fields whose octets stay a view of the input rather than a copy.
_ZERO_COPY = {("TensorProto", "raw_data")}


class _Path:
    """A lazily formatted message path: built only when an error names it."""

    __slots__ = ("parent", "name", "index")

    def __init__(self, parent, name, index=None):
        self.parent, self.name, self.index = parent, name, index

    def __str__(self) -> str:
        parts = []
        node = self
        while node is not None:
            parts.append(node.name if node.index is None else f"{node.name}[{node.index}]")
            node = node.parent
        return ".".join(reversed(parts))


class Reader:
    """Decodes one buffer.  Use :func:`decode_message`."""

    def __init__(self, buf, limits: Limits = DEFAULT_LIMITS):
        self.buf = buf
        self.limits = limits

    def fail(self, message, offset, path):
        raise DecodeError(message, offset, str(path) if path is not None else "")

    def varint(self, pos, end, path):
        buf = self.buf
        result = 0
        shift = 0
        start = pos
        while True:
            if pos >= end:
                self.fail("truncated variable-length integer", start, path)
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                if result >> 64:
                    self.fail("a variable-length integer exceeds 2**64 - 1 (12.2.2)", start, path)
                return result, pos
            shift += 7
            if shift >= 70:
                self.fail("a variable-length integer is longer than ten octets (12.2.2)", start, path)

    def message(self, name, pos, end, depth, path):
        """Decode the message ``name`` from ``buf[pos:end]``; returns the IR object."""
        if depth > self.limits.max_nesting_depth:
            raise LimitExceeded(
                f"messages nest deeper than max_nesting_depth={self.limits.max_nesting_depth} at {path} (Clause 12.5, 15.4)",
                limit="max_nesting_depth", value=depth, maximum=self.limits.max_nesting_depth, path=str(path), offset=pos)
        spec = MESSAGES[name]
        by_tag = spec.by_tag
        buf = self.buf
        fields: dict = {}
        unknown = None
        spans = None
        while pos < end:
            start = pos
            b = buf[pos]
            if b < 0x80:
                key = b
                pos += 1
            else:
                key, pos = self.varint(pos, end, path)
            tag = key >> 3
            wt = key & 7
            if tag == 0:
                self.fail("field tag 0 is not a valid tag (12.3.1)", start, path)
            f = by_tag.get(tag)
            if f is not None and f.label == DEPRECATED and wt == f.wire_type:
                # Annex B.1: a deprecated field is read and otherwise ignored.  Its octets are
                # retained (12.4) and its value kept, since Part 2 operators (Optional's TYPE_PROTO
                # attribute) have no other field to carry it.
                n, p2 = self.varint(pos, end, path)
                if n > end - p2:
                    self.fail(f"length {n} of field {f.name} runs past the end of its message (12.2.5)", start, path)
                fields[f.name] = self.message(f.msg, p2, p2 + n, depth + 1, _Path(path, f.name))
                pos = p2 + n
                if unknown is None:
                    unknown = []
                unknown.append((tag, bytes(buf[start:pos])))
                continue
            if f is not None and f.label != DEPRECATED and (wt == f.wire_type or (wt == 2 and f.packable)):
                fname = f.name
                kind = f.kind
                if wt == 0:
                    if pos < end and buf[pos] < 0x80:
                        v = buf[pos]
                        pos += 1
                    else:
                        v, pos = self.varint(pos, end, _Path(path, fname))
                    if kind == "int64":
                        if v >= 1 << 63:
                            v -= 1 << 64
                    elif kind in ("int32", "enum"):
                        if v >= 1 << 63:
                            v -= 1 << 64
                        if v < _INT32_MIN or v > _INT32_MAX:
                            self.fail(f"value {v} of int32 field {fname} is out of range (12.2.3)", start, _Path(path, fname))
                elif wt == 2:
                    n, pos = (buf[pos], pos + 1) if pos < end and buf[pos] < 0x80 else self.varint(pos, end, _Path(path, fname))
                    if n > end - pos:
                        if n > self.limits.max_message_bytes:
                            raise LimitExceeded(f"field {fname} declares {n} octets, more than max_message_bytes (12.5)",
                                                limit="max_message_bytes", value=n, maximum=self.limits.max_message_bytes,
                                                path=str(_Path(path, fname)), offset=start)
                        self.fail(f"length {n} of field {fname} runs past the end of its message (12.2.5)", start, _Path(path, fname))
                    stop = pos + n
                    if kind == "message":
                        if f.repeated:
                            lst = fields.get(fname)
                            if lst is None:
                                lst = fields[fname] = []
                            v = self.message(f.msg, pos, stop, depth + 1, _Path(path, fname, len(lst)))
                            lst.append(v)
                            pos = stop
                            continue
                        if fname in fields:  # 12.3.2: merge with the earlier occurrences
                            spans = spans or {}
                            spans.setdefault(fname, []).append((pos, stop))
                            v = self._merged(f.msg, spans[fname], depth, _Path(path, fname))
                        else:
                            spans = spans or {}
                            spans[fname] = [(pos, stop)]
                            v = self.message(f.msg, pos, stop, depth + 1, _Path(path, fname))
                    elif kind == "string":
                        v = bytes(buf[pos:stop]).decode("utf-8", "surrogateescape")
                    elif kind == "bytes":
                        v = buf[pos:stop] if (name, fname) in _ZERO_COPY else bytes(buf[pos:stop])
                    else:  # packed repeated scalars (12.3.3)
                        v = self._packed(f, pos, stop, path)
                        if f.array is None:
                            fields.setdefault(fname, []).extend(v.tolist() if isinstance(v, np.ndarray) else v)
                        else:
                            fields.setdefault(fname, []).append(v)
                        pos = stop
                        continue
                    pos = stop
                elif wt == 5:
                    if end - pos < 4:
                        self.fail(f"truncated 32-bit value of field {fname}", start, _Path(path, fname))
                    v = _unpack_f(buf, pos)[0]
                    if v != v:  # keep a NaN's exact bits (12.2.4): a Python float may lose them
                        v = np.frombuffer(buf, dtype="<f4", count=1, offset=pos)[0]
                    pos += 4
                else:  # wt == 1
                    if end - pos < 8:
                        self.fail(f"truncated 64-bit value of field {fname}", start, _Path(path, fname))
                    v = _unpack_d(buf, pos)[0]
                    pos += 8
                if f.repeated:
                    if f.array is None:
                        lst = fields.get(fname)
                        if lst is None:
                            fields[fname] = [v]
                        else:
                            lst.append(v)
                    else:
                        fields.setdefault(fname, []).append(np.asarray([v], dtype=_ARRAY_DTYPE[f.array]))
                else:
                    if f.label == ONEOF:  # setting one member of a group clears the others
                        for other in spec.fields:
                            if other.group == f.group and other.name != fname:
                                fields.pop(other.name, None)
                    fields[fname] = v
                continue
            # unknown (or deprecated, or of an unexpected wire type): skip by wire type, keep the octets (12.4)
            if wt == 0:
                _, pos = self.varint(pos, end, path)
            elif wt == 1:
                pos += 8
            elif wt == 5:
                pos += 4
            elif wt == 2:
                n, pos = self.varint(pos, end, path)
                pos += n
            else:
                self.fail(f"wire type {wt} (field tag {tag}) is not allowed (12.2.1)", start, path)
            if pos > end:
                self.fail(f"unknown field {tag} runs past the end of its message (12.2.5)", start, path)
            if unknown is None:
                unknown = []
            unknown.append((tag, bytes(buf[start:pos])))
        return self._finish(name, spec, fields, unknown)

    def _finish(self, name, spec, fields, unknown):
        explicit = None
        for fname, v in fields.items():
            f = spec.by_name[fname]
            if f.array is not None:
                fields[fname] = v[0] if len(v) == 1 else np.concatenate(v)
            elif not f.repeated and f.kind != "message" and f.label != ONEOF and v == DEFAULTS[f.kind] \
                    and not (isinstance(v, float) and str(v) != str(DEFAULTS[f.kind])):
                explicit = (explicit or set())
                explicit.add(fname)
        mandatory = MANDATORY_SCALARS[name]
        absent = frozenset(m for m in mandatory if m not in fields) if mandatory else frozenset()
        wire = None
        if unknown or explicit or absent:
            wire = WireInfo(unknown or [], frozenset(explicit or ()), absent)
        return build(name, fields, wire)

    def _packed(self, f, pos, stop, path):
        buf = self.buf
        if f.kind in ("float", "double"):
            size = 4 if f.kind == "float" else 8
            if (stop - pos) % size:
                self.fail(f"packed field {f.name} holds {stop - pos} octets, not a multiple of {size}", pos, _Path(path, f.name))
            arr = np.frombuffer(buf, dtype=_ARRAY_DTYPE["<f4" if size == 4 else "<f8"], count=(stop - pos) // size, offset=pos)
            return arr if f.array else [float(x) if x == x else x for x in arr]
        raw = decode_varints(buf[pos:stop], pos, str(_Path(path, f.name)))
        if f.kind == "uint64":
            return raw
        signed = raw.view(np.int64)
        if f.kind in ("int32", "enum"):
            if signed.size and (signed.min() < _INT32_MIN or signed.max() > _INT32_MAX):
                self.fail(f"a value of int32 field {f.name} is out of range (12.2.3)", pos, _Path(path, f.name))
            return signed.astype(np.int32)
        return signed

    def _merged(self, msg, spans, depth, path):
        joined = b"".join(bytes(self.buf[a:b]) for a, b in spans)
        sub = Reader(memoryview(joined), self.limits)
        return sub.message(msg, 0, len(joined), depth + 1, path)


def decode_message(data, message: str = "ModelProto", limits: Limits = DEFAULT_LIMITS):
    """Decode ``data`` (bytes, bytearray, memoryview, mmap) as the Annex B message ``message``."""
    if message not in MESSAGES:
        raise ValueError(f"{message!r} is not a message of Annex B")
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    if view.nbytes > limits.max_message_bytes:
        raise LimitExceeded(f"{message} of {view.nbytes} octets exceeds max_message_bytes={limits.max_message_bytes} (Clause 12.5)",
                            limit="max_message_bytes", value=view.nbytes, maximum=limits.max_message_bytes)
    reader = Reader(view, limits)
    try:
        return reader.message(message, 0, len(view), 1, _Path(None, message))
    except (DecodeError, LimitExceeded):
        raise
    except RecursionError:
        raise LimitExceeded("messages nest too deeply for the decoder (Clause 12.5)", limit="max_nesting_depth") from None
    except (IndexError, ValueError, TypeError, OverflowError, struct.error) as exc:  # defensive: never leak these
        raise DecodeError(f"malformed {message}: {type(exc).__name__}: {exc}") from None
