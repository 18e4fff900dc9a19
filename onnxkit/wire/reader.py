"""The reader: bytes to IR, driven by the Annex B table (Clause 12.2-12.5).

Rules it keeps (each is tested):

* varints of at most ten octets, values at most 2**64-1 (12.2.2); negative values as ten-octet
  two's complement (12.2.3); int32 fields range-checked (12.2.3);
* wire types 3 and 4 rejected (12.2.1); a length running past the enclosing message rejected (12.2.5);
* packed and unpacked forms both accepted, also mixed in one message (12.3.3);
* a singular field: the last occurrence wins; an embedded message is merged field by field
  with earlier occurrences (12.3.2) — the spans of every occurrence are collected while the
  enclosing message is read and decoded once, in order, into one message at its end (what
  decoding the concatenation means), so each octet is read once however the copies nest;
* decoding cost is linear: repeated fields are appended to, never rescanned; every message
  decoded is counted against ``max_messages`` and nodes and tensors against ``max_nodes``
  and ``max_tensors`` (:mod:`onnxkit.limits`) *before* its object is built, so a small file
  of empty entries cannot amplify into gigabytes;
* unknown fields skipped by wire type and retained, octet for octet, with their tag (12.4); the
  deprecated field ``AttributeProto.tp`` is retained the same way, and its value also read;
* documented limits on message size and nesting depth (12.5, :mod:`onnxkit.limits`).

Every fault raises :class:`DecodeError` with the byte offset and the message path.
``raw_data`` is a memoryview of the input (zero copy); the packed fixed-width fields of
TensorProto are numpy views of it.
"""

from __future__ import annotations

import gc
import math
import struct
import sys

import numpy as np

from ..errors import DecodeError, LimitExceeded
from ..ir.base import WireInfo
from ..limits import DEFAULT_LIMITS, Limits
from .adapters import MANDATORY_SCALARS, builder_for
from .schema import DEPRECATED, MESSAGES
from .varint import decode_varints, encode_varint

_unpack_f = struct.Struct("<f").unpack_from
_unpack_d = struct.Struct("<d").unpack_from
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_ARRAY_DTYPE = {"<f4": np.dtype("<f4"), "<f8": np.dtype("<f8"), "int32": np.dtype("int32"),
                "int64": np.dtype("int64"), "uint64": np.dtype("uint64")}
# Fields whose octets stay a view of the input rather than a copy.
_ZERO_COPY = {("TensorProto", "raw_data")}


_VARINT, _UINT64, _INT32, _FLOAT, _DOUBLE, _MESSAGE, _STRING, _BYTES, _VIEW, _PACKED, _DEPRECATED = range(11)
_RUN_AFTER = 32          # elements of one unpacked field read one by one before switching to numpy
_RUN_WINDOW = 1 << 16    # octets examined per vectorised step


def _plan(spec):
    """``{field key: (action, name, repeated, arg)}`` for one message: the reader's dispatch table."""
    plan = {}
    for f in spec.fields:
        key = (f.tag << 3) | f.wire_type
        if f.label == DEPRECATED:
            plan[key] = (_DEPRECATED, f.name, False, f.msg)
            continue
        group = tuple(o.name for o in spec.fields if o.group == f.group and o.name != f.name) if f.group else None
        if f.kind == "message":
            plan[key] = (_MESSAGE, f.name, f.repeated, f.msg)
        elif f.kind == "string":
            plan[key] = (_STRING, f.name, f.repeated, group)
        elif f.kind == "bytes":
            plan[key] = (_VIEW if (spec.name, f.name) in _ZERO_COPY else _BYTES, f.name, f.repeated, group)
        elif f.kind == "float":
            plan[key] = (_FLOAT, f.name, f.repeated, group)
        elif f.kind == "double":
            plan[key] = (_DOUBLE, f.name, f.repeated, group)
        else:
            code = {"int64": _VARINT, "uint64": _UINT64, "int32": _INT32, "enum": _INT32}[f.kind]
            plan[key] = (code, f.name, f.repeated, group)
        if f.packable:
            plan[(f.tag << 3) | 2] = (_PACKED, f.name, True, f)
    return plan


def _Path(parent, name, index=None):
    """A message path, kept as nested tuples and formatted only when an error names it."""
    return (parent, name, index)


def path_str(path) -> str:
    parts = []
    while path is not None:
        parent, name, index = path
        parts.append(name if index is None else f"{name}[{index}]")
        path = parent
    return ".".join(reversed(parts))


class Reader:
    """Decodes one buffer.  Use :func:`decode_message`."""

    def __init__(self, buf, limits: Limits = DEFAULT_LIMITS):
        self.buf = buf
        # For indexing and for slices that are copied anyway (strings, small octet fields) the
        # object under the view is faster than the view when it is bytes or an mmap.
        base = getattr(buf, "obj", None)
        mm = sys.modules.get("mmap")  # no mmap object exists before the module is imported
        mapped = mm is not None and isinstance(base, mm.mmap)
        self.raw = base if (isinstance(base, bytes) or mapped) and len(base) == buf.nbytes else buf
        self.limits = limits
        self.max_depth = limits.max_nesting_depth
        #: Every Tensor decoded, in order (external data is attached to them by the loader).
        self.tensors: list = []
        #: Messages decoded so far, and nodes and tensors among them (the count limits).
        self.count = 0
        self.counts = {"NodeProto": 0, "TensorProto": 0}

    def fail(self, message, offset, path):
        raise DecodeError(message, offset, path_str(path))

    def varint(self, pos, end, path):
        buf = self.raw
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

    def _counted(self, name, pos, path):
        """Count one message against the count limits before it is built (12.5, 15.4)."""
        self.count += 1
        limits = self.limits
        if self.count > limits.max_messages:
            raise LimitExceeded(
                f"the input holds more than max_messages={limits.max_messages} messages (at {path_str(path)}, "
                f"byte {pos}; Clause 12.5, 15.4)", limit="max_messages", value=self.count,
                maximum=limits.max_messages, path=path_str(path), offset=pos)
        n = self.counts.get(name)
        if n is not None:
            n += 1
            self.counts[name] = n
            which = "max_nodes" if name == "NodeProto" else "max_tensors"
            maximum = getattr(limits, which)
            if n > maximum:
                raise LimitExceeded(
                    f"the input holds more than {which}={maximum} {name} messages (at {path_str(path)}, byte {pos}; "
                    "Clause 12.5, 15.4)", limit=which, value=n, maximum=maximum, path=path_str(path), offset=pos)

    def message(self, name, pos, end, depth, path, rest=None):
        """Decode the message ``name`` from ``buf[pos:end]``; returns the IR object.

        ``rest``: further spans (a list of start, stop pairs, flat) of the same message,
        read on into the same fields: the later occurrences a 12.3.2 merge folds in.
        """
        if depth > self.max_depth:
            raise LimitExceeded(
                f"messages nest deeper than max_nesting_depth={self.limits.max_nesting_depth} at {path_str(path)} (Clause 12.5, 15.4)",
                limit="max_nesting_depth", value=depth, maximum=self.limits.max_nesting_depth, path=path_str(path), offset=pos)
        self._counted(name, pos, path)
        plan = _PLANS[name]
        buf = self.raw
        view = self.buf
        fields: dict = {}
        unknown = None
        pending = None   # singular embedded messages: {field: (message, spans)}, decoded at the end
        explicit = None
        rest_at = 0
        while True:
            while pos < end:
                start = pos
                b = buf[pos]
                if b < 0x80:
                    key = b
                    pos += 1
                else:
                    key, pos = self.varint(pos, end, path)
                act = plan.get(key)
                if act is None:
                    pos = self._skip(key, start, pos, end, path)
                    if unknown is None:
                        unknown = []
                    unknown.append((key >> 3, bytes(buf[start:pos])))
                    continue
                code, fname, repeated, arg = act
                if code >= _MESSAGE:  # length-delimited: names, messages, octets (the common case first)
                    if pos < end and buf[pos] < 0x80:
                        n = buf[pos]
                        pos += 1
                    else:
                        n, pos = self.varint(pos, end, _Path(path, fname))
                    if n > end - pos:
                        if n > self.limits.max_message_bytes:
                            raise LimitExceeded(f"field {fname} declares {n} octets, more than max_message_bytes (12.5)",
                                                limit="max_message_bytes", value=n, maximum=self.limits.max_message_bytes,
                                                path=path_str(_Path(path, fname)), offset=start)
                        self.fail(f"length {n} of field {fname} runs past the end of its message (12.2.5)", start, _Path(path, fname))
                    stop = pos + n
                    if n == 0 and code <= _VIEW and code >= _STRING and not repeated and arg is None:
                        explicit = (explicit or set()) | {fname}
                    if code == _MESSAGE:
                        if repeated:
                            lst = fields.get(fname)
                            if lst is None:
                                lst = fields[fname] = []
                            lst.append(self.message(arg, pos, stop, depth + 1, (path, fname, len(lst))))
                            pos = stop
                            continue
                        # 12.3.2: every occurrence is merged into one message, decoded once at the end
                        if pending is None:
                            pending = {}
                        got = pending.get(fname)
                        if got is None:
                            pending[fname] = (arg, [pos, stop])
                            fields[fname] = None  # keeps the field's place; filled in below
                        else:
                            got[1].append(pos)
                            got[1].append(stop)
                        pos = stop
                        continue
                    elif code == _STRING:
                        v = buf[pos:stop].decode("utf-8", "surrogateescape") if buf is not view else \
                            bytes(view[pos:stop]).decode("utf-8", "surrogateescape")
                    elif code == _BYTES:
                        v = bytes(buf[pos:stop])
                    elif code == _VIEW:
                        v = view[pos:stop]
                    elif code == _PACKED:  # packed repeated scalars (12.3.3)
                        v = self._packed(arg, pos, stop, path)
                        if arg.array is None:
                            fields.setdefault(fname, []).extend(v.tolist() if isinstance(v, np.ndarray) else v)
                        else:
                            fields.setdefault(fname, []).append(v)
                        pos = stop
                        continue
                    else:  # _DEPRECATED: Annex B.1 - read, retained (12.4), value kept for Part 2's sake
                        v = self.message(arg, pos, stop, depth + 1, (path, fname, None))
                        if unknown is None:
                            unknown = []
                        unknown.append((key >> 3, bytes(buf[start:stop])))
                    pos = stop
                elif code <= _INT32:  # varint scalars
                    if pos < end and buf[pos] < 0x80:
                        v = buf[pos]
                        pos += 1
                    else:
                        v, pos = self.varint(pos, end, _Path(path, fname))
                    if code != _UINT64 and v >= 1 << 63:
                        v -= 1 << 64
                    if code == _INT32 and (v < _INT32_MIN or v > _INT32_MAX):
                        self.fail(f"value {v} of int32 field {fname} is out of range (12.2.3)", start, _Path(path, fname))
                    if v == 0 and not repeated and arg is None:
                        explicit = (explicit or set()) | {fname}
                elif code == _FLOAT:
                    if end - pos < 4:
                        self.fail(f"truncated 32-bit value of field {fname}", start, _Path(path, fname))
                    v = _unpack_f(buf, pos)[0]
                    if v != v:  # keep a NaN's exact bits (12.2.4): a Python float may lose them
                        v = np.frombuffer(buf, dtype="<f4", count=1, offset=pos)[0]
                    elif v == 0 and not repeated and arg is None and math.copysign(1.0, v) > 0:
                        explicit = (explicit or set()) | {fname}
                    pos += 4
                elif code == _DOUBLE:
                    if end - pos < 8:
                        self.fail(f"truncated 64-bit value of field {fname}", start, _Path(path, fname))
                    v = _unpack_d(buf, pos)[0]
                    if v == 0 and not repeated and arg is None and math.copysign(1.0, v) > 0:
                        explicit = (explicit or set()) | {fname}
                    pos += 8
                if repeated:
                    lst = fields.get(fname)
                    if lst is None:
                        fields[fname] = [v]
                    else:
                        lst.append(v)
                        if len(lst) == _RUN_AFTER and code != _STRING and code != _BYTES and code != _VIEW:
                            # a long unpacked run (key, value, key, value, ...): decode the rest with numpy
                            more, pos = self._run(key, code, pos, end, path, fname)
                            if more is not None:
                                if _FINISH[name][0].get(fname) is not None:
                                    lst.append(more)
                                else:
                                    values = more.tolist()
                                    if code == _FLOAT:  # a NaN keeps its exact bits (12.2.4), as one by one
                                        for i in np.flatnonzero(np.isnan(more)).tolist():
                                            values[i] = more[i]
                                    lst.extend(values)
                else:
                    if arg is not None and code != _MESSAGE and code != _DEPRECATED:  # one-of: clear the others
                        for other in arg:
                            fields.pop(other, None)
                    fields[fname] = v
            if rest is None or rest_at >= len(rest):
                break
            pos, end = rest[rest_at], rest[rest_at + 1]  # the next occurrence of a merged message
            rest_at += 2
        if pending is not None:
            for fname, (msg, spans) in pending.items():
                fields[fname] = self.message(msg, spans[0], spans[1], depth + 1, (path, fname, None),
                                             spans[2:] if len(spans) > 2 else None)
        arrays, mandatory, builder = _FINISH[name]
        if arrays:
            for fname in arrays:
                v = fields.get(fname)
                if v is not None:
                    if len(v) == 1 and isinstance(v[0], np.ndarray):
                        fields[fname] = v[0]
                    else:  # unpacked elements, or both forms mixed (12.3.3): concatenate in order
                        fields[fname] = np.concatenate([np.asarray(x, dtype=arrays[fname]).reshape(-1) for x in v])
        absent = None
        if mandatory:
            for m in mandatory:
                if m not in fields:
                    absent = (absent or set()) | {m}
        if unknown or explicit or absent:
            obj = builder(fields, WireInfo(unknown or [], frozenset(explicit or ()), frozenset(absent or ())))
        else:
            obj = builder(fields, None)
        if arrays:  # a TensorProto: remember it, so the loader need not walk the model for them
            self.tensors.append(obj)
        return obj

    def _run(self, key, code, pos, end, path, fname):
        """Decode the consecutive fields with key ``key`` from ``pos`` on, as one numpy array.

        Unpacked repeated scalars (proto2's default, e.g. attribute ``ints``/``floats`` of
        large ML models) are millions of (key, value) pairs; this reads them vectorised.
        Returns ``(values or None, new position)``.
        """
        buf = self.buf
        keyb = encode_varint(key)
        k = len(keyb)
        out = []
        while True:
            window = min(end, pos + _RUN_WINDOW)
            b = np.frombuffer(buf, dtype=np.uint8, count=window - pos, offset=pos)
            if code == _FLOAT or code == _DOUBLE:
                stride = k + (4 if code == _FLOAT else 8)
                n = b.size // stride
                if n == 0:
                    break
                rows = b[:n * stride].reshape(n, stride)
                ok = np.all(rows[:, :k] == np.frombuffer(keyb, dtype=np.uint8), axis=1)
                n = int(np.argmin(ok)) if not ok.all() else n
                if n == 0:
                    break
                vals = np.ascontiguousarray(rows[:n, k:]).view("<f4" if code == _FLOAT else "<f8").reshape(-1)
                out.append(vals if code == _DOUBLE else vals)
                pos += n * stride
            else:
                ends = np.flatnonzero(b < 0x80)
                if ends.size < 2:
                    break
                complete = ends[-1] + 1
                starts = np.empty_like(ends)
                starts[0] = 0
                starts[1:] = ends[:-1] + 1
                lengths = ends - starts + 1
                if lengths.max() > 10:
                    break  # leave the fault to the scalar path, which names it
                vals = decode_varints(b[:complete], pos, "")
                npairs = vals.size // 2
                keys_ok = (vals[0:2 * npairs:2] == key) & (lengths[0:2 * npairs:2] == k)
                n = int(np.argmin(keys_ok)) if not keys_ok.all() else npairs
                if n == 0:
                    break
                v = vals[1:2 * n:2]
                if code != _UINT64:
                    v = v.view(np.int64)
                    if code == _INT32 and v.size and (v.min() < _INT32_MIN or v.max() > _INT32_MAX):
                        self.fail(f"a value of int32 field {fname} is out of range (12.2.3)", pos, (path, fname, None))
                out.append(v)
                pos += int(ends[2 * n - 1]) + 1
            if window == end or pos < window - _RUN_WINDOW // 2:
                break  # the run ended inside this window
        if not out:
            return None, pos
        return (out[0] if len(out) == 1 else np.concatenate(out)), pos

    def _skip(self, key, start, pos, end, path):
        """Skip an unknown field by its wire type alone (12.4)."""
        wt = key & 7
        if key >> 3 == 0:
            self.fail("field tag 0 is not a valid tag (12.3.1)", start, path)
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
            self.fail(f"wire type {wt} (field tag {key >> 3}) is not allowed (12.2.1)", start, path)
        if pos > end:
            self.fail(f"unknown field {key >> 3} runs past the end of its message (12.2.5)", start, path)
        return pos

    def _packed(self, f, pos, stop, path):
        buf = self.buf
        if f.kind in ("float", "double"):
            size = 4 if f.kind == "float" else 8
            if (stop - pos) % size:
                self.fail(f"packed field {f.name} holds {stop - pos} octets, not a multiple of {size}", pos, _Path(path, f.name))
            arr = np.frombuffer(buf, dtype=_ARRAY_DTYPE["<f4" if size == 4 else "<f8"], count=(stop - pos) // size, offset=pos)
            return arr if f.array else [float(x) if x == x else x for x in arr]
        raw = decode_varints(buf[pos:stop], pos, path_str(_Path(path, f.name)))
        if f.kind == "uint64":
            return raw
        signed = raw.view(np.int64)
        if f.kind in ("int32", "enum"):
            if signed.size and (signed.min() < _INT32_MIN or signed.max() > _INT32_MAX):
                self.fail(f"a value of int32 field {f.name} is out of range (12.2.3)", pos, _Path(path, f.name))
            return signed.astype(np.int32)
        return signed

_PLANS = {name: _plan(spec) for name, spec in MESSAGES.items()}
_FINISH = {
    name: (
        {f.name: _ARRAY_DTYPE[f.array] for f in spec.fields if f.array},
        # mandatory scalars whose absence is remembered; an attribute's value field is the adapter's
        tuple(MANDATORY_SCALARS[name] - ({"f"} if name == "AttributeProto" else set())),
        builder_for(name),
    )
    for name, spec in MESSAGES.items()
}


def decode_message(data, message: str = "ModelProto", limits: Limits = DEFAULT_LIMITS, tensors: list = None):
    """Decode ``data`` (bytes, bytearray, memoryview, mmap) as the Annex B message ``message``.

    If ``tensors`` is a list, every Tensor decoded is appended to it."""
    if message not in MESSAGES:
        raise ValueError(f"{message!r} is not a message of Annex B")
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    if view.nbytes > limits.max_message_bytes:
        raise LimitExceeded(f"{message} of {view.nbytes} octets exceeds max_message_bytes={limits.max_message_bytes} (Clause 12.5)",
                            limit="max_message_bytes", value=view.nbytes, maximum=limits.max_message_bytes)
    reader = Reader(view, limits)
    if tensors is not None:
        reader.tensors = tensors
    # The decoder builds only acyclic objects: the cyclic collector, run again and again over a
    # growing heap while millions are built, would make the cost superlinear.  Off meanwhile.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return reader.message(message, 0, len(view), 1, _Path(None, message))
    except (DecodeError, LimitExceeded):
        raise
    except RecursionError:
        raise LimitExceeded("messages nest too deeply for the decoder (Clause 12.5)", limit="max_nesting_depth") from None
    except (IndexError, ValueError, TypeError, OverflowError, struct.error) as exc:  # defensive: never leak these
        raise DecodeError(f"malformed {message}: {type(exc).__name__}: {exc}") from None
    finally:
        if collecting:
            gc.enable()
