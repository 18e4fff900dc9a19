"""The wire tests' own protobuf encoder, straight from Clauses 12.2 / 12.3 (not onnxkit's), and
their two checks: a decode error with its offset and path, and the same octets read by ``onnx``'s
protobuf classes (the oracle; ``onnx`` is imported by the caller's ``pytest.importorskip``)."""

from __future__ import annotations

import struct

import pytest

from onnxkit.errors import DecodeError
from onnxkit.wire import decode_message


def uv(n: int) -> bytes:
    """Variable-length integer (12.2.2); a negative n as its 64-bit two's complement (12.2.3)."""
    if n < 0:
        n += 1 << 64
    assert 0 <= n < 1 << 64
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def key(tag: int, wt: int) -> bytes:
    return uv(tag * 8 + wt)  # (1)


def vi(tag: int, n: int) -> bytes:
    return key(tag, 0) + uv(n)


def ld(tag: int, payload: bytes) -> bytes:
    return key(tag, 2) + uv(len(payload)) + payload


def st(tag: int, text: str) -> bytes:
    return ld(tag, text.encode("utf-8"))


def f32(tag: int, x: float) -> bytes:
    return key(tag, 5) + struct.pack("<f", x)


def f64(tag: int, x: float) -> bytes:
    return key(tag, 1) + struct.pack("<d", x)


def model(*fields: bytes) -> bytes:
    return b"".join(fields)


def decode_error(data: bytes, message: str = "ModelProto", **kw) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        decode_message(data, message, **kw)
    err = info.value
    assert isinstance(err.offset, int), "every DecodeError carries an offset"
    assert err.path.startswith(message), f"path {err.path!r} should start at {message}"
    return err


def pb(data: bytes, message: str = "ModelProto"):
    import onnx

    cls = onnx
    for part in message.split("."):
        cls = getattr(cls, part)
    return cls.FromString(data)
