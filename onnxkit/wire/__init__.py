"""onnxkit's own codec for Clause 12 and Annex B (no protobuf).

``decode_message(data, "ModelProto") -> IR``; ``encode_message(obj) -> bytes``.
The table of messages is :data:`onnxkit.wire.schema.MESSAGES`.
"""

from __future__ import annotations

from ..limits import DEFAULT_LIMITS, Limits
from .reader import decode_message
from .schema import MESSAGES
from .writer import encode


def encode_message(obj, message: str = None, canonical: bool = False) -> bytes:
    """``obj`` as the octets of ``message`` (default: the message its IR class stands for)."""
    return b"".join(encode(obj, message, canonical))


__all__ = ["decode_message", "encode_message", "encode", "MESSAGES", "Limits", "DEFAULT_LIMITS"]
