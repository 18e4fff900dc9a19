"""The packaged schema data's text decoded without the gzip, json and base64 modules.

:func:`_gunzip` is ``gzip.decompress`` by zlib alone, :func:`_json_loads` ``json.loads`` by the C
scanner json decodes with (anything it declines goes to ``json.loads`` itself), :func:`_b64decode`
``base64.b64decode`` by binascii: a process that reads schema data (every session) imports none of
those modules (``tests/structure/test_first_result_path.py`` holds each to the module it stands for).
"""

from __future__ import annotations

import binascii
import zlib

__all__ = ["_b64decode", "_gunzip", "_json_loads"]


class _ScanContext:
    """What ``json.JSONDecoder()`` hands its C scanner: strict, no hooks, ``float`` / ``int`` for
    numbers, ``NaN`` / ``Infinity`` / ``-Infinity`` as the floats they name."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__
    memo: dict = {}


_scan = None  # the C scanner, made on first use (False: there is none)


def _json_loads(text):
    """``json.loads(text)`` for schema data (str or UTF-8 octets holding one JSON value): by the C
    scanner the json module decodes with, given the json module's default decoder's settings, so
    reading schema data does not import json; anything the scanner declines (whitespace around the
    value, another encoding, a malformed text) goes to ``json.loads``, which decides (and refuses)
    as it always does."""
    global _scan
    scan = _scan
    if scan is None:
        try:
            from _json import make_scanner
        except ImportError:  # an interpreter without json's C accelerator
            make_scanner = None
        scan = _scan = make_scanner(_ScanContext()) if make_scanner is not None else False
    if scan is not False:
        try:
            string = text if isinstance(text, str) else bytes(text).decode("utf-8")
            value, end = scan(string, 0)
        except (StopIteration, ValueError):
            pass
        else:
            if end == len(string):
                return value
    import json

    return json.loads(text)


def _b64decode(text) -> bytes:
    """What ``base64.b64decode(text)`` gives (non-alphabet characters discarded, padding checked),
    by binascii alone: the base64 module is not imported for the definitions' function bodies."""
    return binascii.a2b_base64(text)


def _gunzip(data: bytes) -> bytes:
    """What ``gzip.decompress`` gives (every member, in order; each member's CRC and length
    checked), by zlib alone: the gzip module is not imported, and its member loop is not paid."""
    out = []
    while data:
        member = zlib.decompressobj(31)   # 16 + 15: the gzip wrapper, its trailer verified
        try:
            out.append(member.decompress(data))
        except zlib.error as exc:   # gzip.BadGzipFile is an OSError too
            raise OSError(f"not a valid gzip member: {exc}") from None
        if not member.eof:
            raise EOFError("Compressed file ended before the end-of-stream marker was reached")
        data = member.unused_data.lstrip(b"\x00")   # gzip's trailing zero padding
    return b"".join(out)
