"""The writer: IR to bytes, driven by the Annex B table (Clause 12).

* Fields in increasing tag order (12.3.2); retained unknown fields among them by their tag.
* Repeated scalar fields in the form Annex B records: packed where it says packed (12.3.3).
* Deprecated fields are never written anew (Annex B.1): a TYPE_PROTO attribute, whose only
  field is the deprecated ``tp``, leaves only as the octets it was read from, unchanged;
  otherwise it is refused with :class:`EncodeError` (use TYPE_PROTOS).
* Presence: a scalar field is written when it differs from its default, when the decoded
  input had it explicitly, or when it is mandatory (and the input, if any, did not lack it).
  So a model read from bytes written in tag order is written back octet for octet.
* ``canonical=True`` (onnxkit's canonical form, docs/decisions.md, "Canonical form") ignores the
  recorded presence, writes mandatory fields always and optional ones only when not
  default, and writes retained unknown fields sorted by tag with minimal varints.

The output is a list of chunks (bytes / memoryviews): large octet fields are not copied
until the caller joins them or writes them to a file.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from ..errors import EncodeError
from .adapters import MESSAGE_OF_CLASS, always_written, getter, late_message, use_field_encoder, wire_of
from .schema import DEFAULTS, DEPRECATED, MESSAGES, FieldSpec
from .varint import encode_varint, encode_varints

_pack_f = struct.Struct("<f").pack
_pack_d = struct.Struct("<d").pack
_BIG = 1 << 12  # octet fields at least this long become chunks of their own (no copy)


def _key(f: FieldSpec, wt: int) -> bytes:
    return encode_varint((f.tag << 3) | wt)


def is_default(value, kind: str) -> bool:
    """True if ``value`` is the default of its scalar kind (-0.0 and NaN are not)."""
    if kind in ("float", "double"):
        return value == 0 and math.copysign(1.0, float(value)) > 0
    return value == DEFAULTS[kind]


def _scalar(kind: str, v) -> bytes:
    if kind in ("int64", "int32", "enum", "uint64"):
        return encode_varint(int(v))
    if kind == "float":
        return v.tobytes() if isinstance(v, np.float32) else _pack_f(v)
    if kind == "double":
        return _pack_d(v)
    if kind == "string":
        b = v.encode("utf-8", "surrogateescape")
        return encode_varint(len(b)) + b
    raise AssertionError(kind)


def encode_field(f: FieldSpec, value) -> bytes:
    """One field as key and value, unpacked; used to retain stray attribute value fields."""
    out = bytearray()
    values = value if f.repeated else [value]
    for v in values:
        if f.kind == "message":
            data = b"".join(encode(v, f.msg))
            out += _key(f, 2) + encode_varint(len(data)) + data
        elif f.kind == "bytes":
            out += _key(f, 2) + encode_varint(len(v)) + bytes(v)
        else:
            out += _key(f, f.wire_type) + _scalar(f.kind, v)
    return bytes(out)


def encode(obj, message: str = None, canonical: bool = False) -> list:
    """``obj`` encoded as ``message`` (default: the message of its class), as a list of chunks."""
    if message is None:
        message = MESSAGE_OF_CLASS.get(type(obj)) or late_message(type(obj))
        if message is None:
            raise EncodeError(f"cannot encode a {type(obj).__name__}: not an onnxkit IR object")
    spec = MESSAGES[message]
    get = getter(message, obj)
    wire = None if canonical else wire_of(message, obj)
    explicit = wire.explicit if wire is not None else ()
    absent = wire.absent if wire is not None else ()
    forced = always_written(message, obj)
    buf = bytearray()
    chunks = [buf]
    retained = _retained(message, obj, canonical)
    r = 0
    for f in spec.write_order:
        while r < len(retained) and retained[r][0] < f.tag:
            buf += retained[r][1]
            r += 1
        v = get(f.name)
        if f.label == DEPRECATED:
            if v is not None and not _passes_through(f, v, retained):
                raise EncodeError(f"{message}.{f.name} is deprecated (Annex B.1) and onnxkit never writes it anew: "
                                  f"{_what(obj)} cannot be encoded" + _hint(message, f.name))
            continue
        kind = f.kind
        if f.repeated:
            if v is None or len(v) == 0:
                continue
            if kind == "message":
                for item in v:
                    buf = _message(buf, chunks, f, item, canonical)
            elif f.packed:
                if f.array is not None:
                    arr = np.asarray(v)
                    payload = np.ascontiguousarray(arr, dtype=f.array).tobytes() if f.kind in ("float", "double") \
                        else encode_varints(arr)
                else:
                    payload = encode_varints(np.asarray(v))
                buf += _key(f, 2) + encode_varint(len(payload))
                if len(payload) >= _BIG:
                    chunks.append(payload)
                    buf = bytearray()
                    chunks.append(buf)
                else:
                    buf += payload
            elif kind == "bytes" or kind == "string":
                key = _key(f, 2)
                for item in v:
                    if kind == "string":
                        item = item.encode("utf-8", "surrogateescape")
                    buf += key + encode_varint(len(item))
                    buf += item
            else:
                key = _key(f, f.wire_type)
                if kind == "float":
                    data = np.asarray(v, dtype="<f4").tobytes()
                    for i in range(0, len(data), 4):
                        buf += key + data[i:i + 4]
                else:
                    for item in v:
                        buf += key + _scalar(kind, item)
            continue
        if kind == "message":
            if v is not None:
                buf = _message(buf, chunks, f, v, canonical)
            continue
        if v is None:
            continue
        name = f.name
        if not (name in explicit or (name in forced and name not in absent)) and is_default(v, kind) \
                and f.group is None and not (kind == "bytes" and not canonical and name not in absent):
            continue  # (an octet field the IR holds, even empty, is present: None is its absence)
        if name in absent and message == "AttributeProto" and name == "type" and _type_implied(obj):
            continue  # IR version 1 (no `type` on the wire): the value field written implies it; keep it absent
        if kind == "bytes":
            buf += _key(f, 2) + encode_varint(len(v))
            if len(v) >= _BIG:
                chunks.append(v if isinstance(v, (bytes, memoryview)) else bytes(v))
                buf = bytearray()
                chunks.append(buf)
            else:
                buf += v
        else:
            buf += _key(f, f.wire_type) + _scalar(kind, v)
    for _, raw in retained[r:]:
        buf += raw
    return chunks


def _type_implied(attr) -> bool:
    """True if an attribute's value field is written, so that a reader infers its type from it."""
    v = attr.value
    if attr.ref_attr_name or v is None or attr.type == 13:  # TYPE_PROTO: `tp` is never written anew
        return False
    return not isinstance(v, list) or len(v) > 0


def _retained(message, obj, canonical):
    """Retained fields as ``[(tag, octets)]`` sorted by tag (stable): they go back in tag order."""
    w = wire_of(message, obj)
    if w is None or not w.unknown:
        return []
    if canonical:
        return _canonical_unknown(w.unknown)
    return sorted(w.unknown, key=lambda t: t[0])


def _passes_through(f, value, retained) -> bool:
    """A deprecated field's value may only leave as the octets it was read from, unchanged."""
    from .reader import decode_message, Reader

    for tag, raw in retained:
        if tag == f.tag:
            r = Reader(memoryview(raw))
            key, pos = r.varint(0, len(raw), None)
            n, pos = r.varint(pos, len(raw), None)
            return decode_message(raw[pos:pos + n], f.msg) == value
    return False


def _message(buf, chunks, f, item, canonical):
    sub = encode(item, f.msg, canonical)
    n = sum(len(c) for c in sub)
    buf += _key(f, 2) + encode_varint(n)
    if len(sub) == 1:
        buf += sub[0]
        return buf
    chunks.extend(sub)
    buf = bytearray()
    chunks.append(buf)
    return buf


def _canonical_unknown(raws):
    """Retained fields sorted by tag (stable), with keys and varint values re-encoded minimally."""
    from .reader import Reader

    out = []
    for _, raw in raws:
        r = Reader(memoryview(raw))
        key, pos = r.varint(0, len(raw), None)
        tag, wt = key >> 3, key & 7
        if wt == 0:
            v, _ = r.varint(pos, len(raw), None)
            body = encode_varint(v)
        elif wt == 2:
            n, p = r.varint(pos, len(raw), None)
            body = encode_varint(n) + raw[p:]
        else:
            body = raw[pos:]
        out.append((tag, encode_varint(key) + body))
    out.sort(key=lambda t: t[0])
    return out


def _what(obj) -> str:
    name = getattr(obj, "name", "")
    return f"{type(obj).__name__} {name!r}" if name else type(obj).__name__


def _hint(message, field):
    if message == "AttributeProto" and field == "tp":
        return "; a singular TYPE_PROTO attribute has no other field: use TYPE_PROTOS with one element"
    return ""


use_field_encoder(encode_field)   # the decoder retains stray attribute value fields with it
