"""The string operators skl2onnx writes: Tokenizer, MurmurHash3 (com.microsoft 1; numpy, ``host_only``).

* Tokenizer — each string of X (shape ``[N]`` or ``[N, C]``) cut into tokens: with
  ``separators`` (regular expressions; the one separator ``''`` cuts into characters) the pieces
  between matches, with ``tokenexp`` the matches themselves; empty pieces and tokens of fewer than
  ``mincharnum`` characters are dropped.  The expressions are read as onnxruntime's RE2 reads
  them, leftmost-longest (:mod:`.re2_syntax`: ``\\w``, ``\\b``, ``\\d`` and ``\\s`` are ASCII
  classes, ``\\pL`` a Unicode one; ``.`` matches no newline), except that the tokenexp ``.`` cuts into
  characters, a newline included, as onnxruntime does.  Separators cut in turn, in their order
  (the pieces of the first cut by the second...); a separator matching empty is refused.  ``mark`` puts ``'\\x02'`` before
  and ``'\\x03'`` after each string's tokens.  Y appends one axis, as long as the most tokens of a string, padded with
  ``pad_value``; it is 0 long when no string has a token (the marks then are not written).
* MurmurHash3 — the 32-bit x86 MurmurHash3 of each element with ``seed``: a string's UTF-8
  octets, a number's 4 or 8 little-endian octets; uint32 with ``positive`` (default 1), else the
  same bits as int32.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable

from ._common import DOMAIN
from .re2_syntax import Re2SyntaxError, compile_re2

KERNELS = KernelTable()
START, END = "\x02", "\x03"


def _regex_error():
    import regex

    return regex.error


def _split(ctx, patterns: list, s: str) -> list:
    """``s`` cut by each separator in turn, as onnxruntime does: the pieces between the first
    separator's matches, each of them cut by the second's, and so on (captured groups are not
    pieces).  A separator matching an empty string is refused (onnxruntime's result there follows
    no rule this kernel states)."""
    pieces = [s]
    for sep, pattern in patterns:
        cut = []
        for piece in pieces:
            at = 0
            for m in pattern.finditer(piece):
                if m.end() == m.start():
                    ctx.fail(f"the separator {sep!r} matches an empty string (in {s!r}); separators that can "
                             "match empty are not supported")
                cut.append(piece[at:m.start()])
                at = m.end()
            cut.append(piece[at:])
        pieces = [p for p in cut if p]
    return pieces


def _as_text(v) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, (bytes, bytearray)) else str(v)


@KERNELS.register("Tokenizer", 1, domain=DOMAIN, host_only=True)
def tokenizer(ctx):
    mark = bool(ctx.attr("mark"))
    pad = ctx.attr_str("pad_value", "")
    mincharnum = int(ctx.attr("mincharnum", 1))
    seps = [_as_text(s) for s in (ctx.attr("separators") or ())]
    tokenexp = ctx.attr_str("tokenexp", "") or ""
    if tokenexp and seps:
        ctx.fail("separators and tokenexp exclude each other")
    if not tokenexp and not seps:
        ctx.fail("one of separators and tokenexp must be given")
    if mincharnum < 1:
        ctx.fail(f"mincharnum must be at least 1, got {mincharnum}")
    try:
        if tokenexp == "." or seps == [""]:
            cut = list  # onnxruntime cuts into characters here, a newline included
        elif tokenexp:
            pattern = compile_re2(tokenexp)
            cut = lambda s: [m.group(0) for m in pattern.finditer(s)]  # noqa: E731
        else:
            patterns = [(sep, compile_re2(sep)) for sep in seps if sep]
            cut = lambda s: _split(ctx, patterns, s)  # noqa: E731
    except (Re2SyntaxError, _regex_error()) as exc:
        ctx.fail(f"cannot compile the {'tokenexp' if tokenexp else 'separators'} expression: {exc}")

    def tokens(s: str) -> list:
        return [t for t in cut(s) if t and len(t) >= mincharnum]

    def run(x):
        x = np.asarray(x)
        if x.dtype != object and x.dtype.kind not in "US":
            ctx.fail(f"X must be a string tensor, got {x.dtype}")
        if x.ndim not in (1, 2):
            ctx.fail(f"X must be 1-D or 2-D, got shape {list(x.shape)}")
        if x.size == 0:
            return np.empty(x.shape + (0,), dtype=object)
        rows = [tokens(_as_text(v)) for v in x.reshape(-1).tolist()]
        longest = max(len(r) for r in rows)
        if longest == 0:
            return np.empty(x.shape + (0,), dtype=object)
        if mark:
            rows = [[START, *r, END] for r in rows]
            longest += 2
        out = np.full((len(rows), longest), pad, dtype=object)
        for i, r in enumerate(rows):
            out[i, :len(r)] = r
        return out.reshape(x.shape + (longest,))

    return run


_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x, r: int):
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _fmix(h):
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def murmur3_words(words: np.ndarray, nbytes: int, seed: int) -> np.ndarray:
    """MurmurHash3_x86_32 of rows of whole little-endian 32-bit ``words`` (``[n, k]`` uint32),
    each row ``nbytes`` = 4k octets long (vectorized over the rows)."""
    with np.errstate(over="ignore"):
        h = np.full(words.shape[0], np.uint32(seed & 0xFFFFFFFF), dtype=np.uint32)
        for j in range(words.shape[1]):
            k = words[:, j] * _C1
            k = _rotl(k, 15) * _C2
            h = _rotl(h ^ k, 13) * np.uint32(5) + np.uint32(0xE6546B64)
        return _fmix(h ^ np.uint32(nbytes))


def murmur3_bytes(data: bytes, seed: int) -> int:
    """MurmurHash3_x86_32 of ``data`` (any length)."""
    n = len(data)
    whole = n // 4 * 4
    words = np.frombuffer(data[:whole], dtype="<u4").reshape(1, -1).astype(np.uint32)
    with np.errstate(over="ignore"):
        h = np.full(1, np.uint32(seed & 0xFFFFFFFF), dtype=np.uint32)
        for j in range(words.shape[1]):
            k = _rotl(words[:, j] * _C1, 15) * _C2
            h = _rotl(h ^ k, 13) * np.uint32(5) + np.uint32(0xE6546B64)
        tail = data[whole:]
        if tail:
            k = np.array([int.from_bytes(tail, "little")], dtype=np.uint32)
            h = h ^ (_rotl(k * _C1, 15) * _C2)
        return int(_fmix(h ^ np.uint32(n & 0xFFFFFFFF))[0])


_NUMERIC = ("int32", "uint32", "int64", "uint64", "float32", "float64")


@KERNELS.register("MurmurHash3", 1, domain=DOMAIN, host_only=True)
def murmur_hash3(ctx):
    seed = int(ctx.attr("seed"))
    positive = bool(ctx.attr("positive"))

    def run(x):
        x = np.asarray(x)
        if x.dtype == object or x.dtype.kind in "US":
            flat = [murmur3_bytes(_as_text(v).encode("utf-8"), seed) for v in x.reshape(-1).tolist()]
            h = np.array(flat, dtype=np.uint32).reshape(x.shape)
        elif x.dtype.name in _NUMERIC:
            le = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("<")).reshape(-1)
            words = le.view("<u4").reshape(le.size, x.dtype.itemsize // 4).astype(np.uint32)
            h = murmur3_words(words, x.dtype.itemsize, seed).reshape(x.shape)
        else:
            ctx.fail(f"X has element type {x.dtype}; MurmurHash3 takes strings, int32, uint32, int64, uint64, "
                     "float and double")
        return h if positive else h.view(np.int32)

    return run
