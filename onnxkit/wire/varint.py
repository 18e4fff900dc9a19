"""Variable-length integers (Clause 12.2.2, 12.2.3): scalar and vectorised forms.

The vectorised forms decode and encode whole packed fields with numpy, so a packed
``int64_data`` of millions of elements costs no Python loop.
"""

from __future__ import annotations

import numpy as np

from ..errors import DecodeError

_U64 = 1 << 64
_SHIFTS = np.arange(10, dtype=np.uint64) * np.uint64(7)


def encode_varint(value: int) -> bytes:
    """The varint of a non-negative int, or of a negative one as 64-bit two's complement (12.2.3)."""
    if value < 0:
        value += _U64
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def to_signed64(value: int) -> int:
    return value - _U64 if value >= 1 << 63 else value


def decode_varints(data, offset: int = 0, path: str = "") -> np.ndarray:
    """Every varint of a packed field's payload, as uint64 (12.3.3).  At most ten octets each."""
    b = np.frombuffer(data, dtype=np.uint8)
    n = b.size
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    ends = np.flatnonzero(b < 0x80)
    if ends.size == 0 or ends[-1] != n - 1:
        raise DecodeError("packed varints end in the middle of a value", offset + n, path)
    if ends.size == n:
        return b.astype(np.uint64)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    longest = int(lengths.max())
    if longest > 10:
        at = int(starts[np.argmax(lengths > 10)])
        raise DecodeError("a variable-length integer is longer than ten octets (12.2.2)", offset + at, path)
    tenth = lengths == 10
    if tenth.any() and (b[ends[tenth]] > 1).any():
        raise DecodeError("a variable-length integer exceeds 2**64 - 1 (12.2.2)", offset + int(ends[tenth][0]), path)
    pos = np.arange(n, dtype=np.int64) - np.repeat(starts, lengths)
    vals = (b & 0x7F).astype(np.uint64) << _SHIFTS[pos]
    return np.bitwise_or.reduceat(vals, starts)


def encode_varints(values: np.ndarray) -> bytes:
    """The packed payload of ``values`` (any integer dtype; negatives as ten octets, 12.2.3)."""
    v = np.asarray(values)
    if v.size == 0:
        return b""
    if v.dtype.kind == "i":
        u = v.astype(np.int64).view(np.uint64)
    else:
        u = v.astype(np.uint64)
    if int(u.max()) < 0x80:
        return u.astype(np.uint8).tobytes()
    groups = ((u[:, None] >> _SHIFTS[None, :]) & np.uint64(0x7F)).astype(np.uint8)
    lengths = np.ones(u.shape, dtype=np.int64)
    for k in range(1, 10):
        lengths += (u >> np.uint64(7 * k)) != 0
    cols = np.arange(10)[None, :]
    groups |= np.where(cols < (lengths[:, None] - 1), np.uint8(0x80), np.uint8(0))
    return groups[cols < lengths[:, None]].tobytes()
