"""String and text operators of ai.onnx (host_only).

StringNormalizer, StringConcat, StringSplit, RegexFullMatch and TfIdfVectorizer (string or
integer n-grams, skips, TF / IDF / TFIDF weighting).  They are host_only: STRING tensors are
numpy object arrays, and RegexFullMatch needs the RE2 binding; the gpu backend runs these
nodes on its cpu fallback.

STRING tensors are object arrays; inputs may hold ``bytes`` (UTF-8) or ``str``; outputs hold
``bytes`` (what the tensor files hold).  Text is decoded as UTF-8 (``surrogateescape``, so
invalid bytes survive a round trip).

Documented choices:

* StringNormalizer removes *elements* equal to a stop word (the specification's wording; the
  ONNX reference implementation instead removes words inside elements and strips accents).
  Case mapping is Unicode's default mapping (Python ``str.lower``/``str.upper``) whatever the
  ``locale`` attribute says; empty strings are kept.
* RegexFullMatch: RE2 itself (the ``google-re2`` binding) with RE2's syntax and semantics,
  matching in time linear in the text; without the binding the operator is reported
  unsupported when the session is created.
* TfIdfVectorizer: in IDF/TFIDF modes ``weights[j]`` scales output coordinate ``j`` (what the
  ONNX reference implementation and onnxruntime do; it equals the specification's "weight of
  the i-th pool n-gram" whenever ``ngram_indexes`` is the identity).
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, Unsupported, size_guard

KERNELS = KernelTable()


def _text(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "surrogateescape")
    return str(v)


def _raw(v) -> bytes:
    if isinstance(v, (bytes, bytearray)):
        return bytes(v)
    return str(v).encode("utf-8", "surrogateescape")


def _check_strings(ctx, x, name="X"):
    if x.dtype != object and x.dtype.kind not in "SU":
        ctx.fail(f"{name} must be a string tensor, got {x.dtype}")


def _object_array(items, shape) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(shape)


# ------------------------------------------------------------------------ StringNormalizer

@KERNELS.register("StringNormalizer", 10, host_only=True)
def string_normalizer(ctx):
    action = ctx.attr_str("case_change_action")
    if action not in ("NONE", "LOWER", "UPPER"):
        ctx.fail(f"case_change_action must be NONE, LOWER or UPPER, got {action!r}")
    sensitive = bool(ctx.attr("is_case_sensitive"))
    stops = [_text(s) for s in (ctx.attr("stopwords") or [])]
    stopset = set(stops) if sensitive else {s.lower() for s in stops}
    change = {"LOWER": str.lower, "UPPER": str.upper}.get(action)

    def fn(x):
        _check_strings(ctx, x)
        if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
            ctx.fail(f"X must have shape [C] or [1, C], got {list(x.shape)}")
        words = [_text(v) for v in x.reshape(-1)]
        if stopset:
            words = [w for w in words if (w if sensitive else w.lower()) not in stopset]
        if change is not None:
            words = [change(w) for w in words]
        if not words:
            words = [""]
        shape = (len(words),) if x.ndim == 1 else (1, len(words))
        return _object_array([_raw(w) for w in words], shape)

    return fn


# ---------------------------------------------------------------------------- StringConcat

_concat = np.frompyfunc(lambda a, b: _raw(a) + _raw(b), 2, 1)


@KERNELS.register("StringConcat", 20, host_only=True)
@size_guard("string_concat")
def string_concat(ctx):
    def fn(x, y):
        _check_strings(ctx, x, "X")
        _check_strings(ctx, y, "Y")
        try:
            shape = np.broadcast_shapes(x.shape, y.shape)
        except ValueError:
            ctx.fail(f"shapes {list(x.shape)} and {list(y.shape)} do not broadcast")
        out = np.empty(shape, dtype=object)
        if out.size:
            out[...] = _concat(x.astype(object), y.astype(object))
        return out

    return fn


# ----------------------------------------------------------------------------- StringSplit

@KERNELS.register("StringSplit", 20, host_only=True)
@size_guard("string_split")
def string_split(ctx):
    delim = ctx.attr_str("delimiter", "") or None
    maxsplit = ctx.attr("maxsplit")
    maxsplit = -1 if maxsplit is None else int(maxsplit)
    if maxsplit < -1:
        ctx.fail(f"maxsplit must be non-negative, got {maxsplit}")

    def fn(x):
        _check_strings(ctx, x)
        parts = [_text(v).split(delim, maxsplit) for v in x.reshape(-1)]
        counts = np.array([len(p) for p in parts], dtype=np.int64).reshape(x.shape)
        width = max((len(p) for p in parts), default=0)
        y = np.empty((len(parts), width), dtype=object)
        y[...] = b""
        for i, p in enumerate(parts):
            y[i, : len(p)] = [_raw(s) for s in p]
        return y.reshape(x.shape + (width,)), counts

    return fn


# -------------------------------------------------------------------------- RegexFullMatch

try:  # RE2 itself (google-re2): linear-time matching, RE2 syntax; never a backtracking engine
    import re2 as _re2
except ImportError:  # pragma: no cover - exercised by forcing the import to fail
    _re2 = None


def _re2_options():
    options = _re2.Options()
    options.log_errors = False      # the error comes back as an exception, not on stderr
    options.never_capture = True    # full-match only: no submatch bookkeeping
    options.max_mem = 8 << 20       # compiled program and DFA cache per pattern (RE2's default)
    return options


@KERNELS.register("RegexFullMatch", 20, host_only=True)
def regex_full_match(ctx):
    """RE2's own engine, on the UTF-8 octets of each element (Clause 6.4: strings are octets)."""
    if _re2 is None:
        raise Unsupported("RegexFullMatch needs RE2 (pip install google-re2); "
                          "onnxkit does not substitute a backtracking engine")
    pattern = ctx.attr("pattern")
    if pattern is None:
        ctx.fail("the pattern attribute is required")
    try:
        regex = _re2.compile(_raw(pattern), _re2_options())
    except _re2.error as exc:
        detail = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        ctx.fail(f"invalid RE2 pattern {_text(pattern)!r}: {detail}")
    match = np.frompyfunc(lambda s: regex.fullmatch(_raw(s)) is not None, 1, 1)

    def fn(x):
        _check_strings(ctx, x)
        if x.size == 0:
            return np.zeros(x.shape, dtype=np.bool_)
        return np.asarray(match(x.astype(object)), dtype=np.bool_).reshape(x.shape)

    return fn


# -------------------------------------------------------------------------- TfIdfVectorizer

def _code(grams, radix: int):
    """Integer code of n-grams of token ids along the last axis (mixed radix)."""
    code = np.zeros(grams.shape[:-1], dtype=np.int64)
    for k in range(grams.shape[-1] - 1, -1, -1):
        code = code * radix + grams[..., k]
    return code


@KERNELS.register("TfIdfVectorizer", 9, host_only=True)
@size_guard("value")
def tfidf_vectorizer(ctx):
    mode = ctx.attr_str("mode")
    if mode not in ("TF", "IDF", "TFIDF"):
        ctx.fail(f"mode must be TF, IDF or TFIDF, got {mode!r}")
    min_n = int(ctx.attr("min_gram_length", 0))
    max_n = int(ctx.attr("max_gram_length", 0))
    max_skip = int(ctx.attr("max_skip_count", 0))
    if min_n < 1 or max_n < min_n or max_skip < 0:
        ctx.fail(f"need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0 "
                 f"(got {min_n}, {max_n}, {max_skip})")
    counts = [int(c) for c in (ctx.attr("ngram_counts") or [])]
    indexes = [int(c) for c in (ctx.attr("ngram_indexes") or [])]
    pool_i = ctx.attr("pool_int64s")
    pool_s = ctx.attr("pool_strings")
    if (pool_i is None) == (pool_s is None):
        ctx.fail("exactly one of pool_int64s and pool_strings must be set")
    strings = pool_s is not None
    pool = [_text(s) for s in pool_s] if strings else [int(v) for v in pool_i]
    if not indexes:
        ctx.fail("ngram_indexes must not be empty")
    out_size = max(indexes) + 1
    weights = ctx.attr("weights")
    weights = None if not weights else np.asarray(weights, dtype=np.float32)
    if weights is not None and weights.size < out_size:
        ctx.fail(f"weights has {weights.size} values but the output has {out_size} coordinates")

    # n-gram (tuple of tokens) -> output coordinate, for the sizes in [min_n, max_n] only
    table: dict = {}
    pool_pos = 0
    for level, start in enumerate(counts):
        n = level + 1
        end = counts[level + 1] if level + 1 < len(counts) else len(pool)
        items = pool[start:end]
        for k in range(len(items) // n):
            gram = tuple(items[k * n:(k + 1) * n])
            if pool_pos >= len(indexes):
                ctx.fail("ngram_indexes is shorter than the number of n-grams in the pool")
            if min_n <= n <= max_n:
                table[gram] = indexes[pool_pos]
            pool_pos += 1
    vocab: dict = {}
    for gram in table:
        for tok in gram:
            vocab.setdefault(tok, len(vocab))
    radix = len(vocab) + 1
    # per n-gram size: the sorted integer codes of the pool's n-grams and their output coordinates
    by_size: dict = {}
    for gram, col in table.items():
        by_size.setdefault(len(gram), []).append(([vocab[t] for t in gram], col))
    coded = {}
    for n, grams in by_size.items():
        if radix ** n >= 2 ** 62:
            ctx.fail(f"{n}-grams over a vocabulary of {radix - 1} tokens are too many to index")
        codes = np.array([_code(np.array(g, dtype=np.int64), radix) for g, _ in grams], dtype=np.int64)
        cols = np.array([c for _, c in grams], dtype=np.int64)
        order = np.argsort(codes, kind="stable")
        coded[n] = (codes[order], cols[order])

    def fn(x):
        if strings:
            _check_strings(ctx, x)
            toks = [_text(v) for v in x.reshape(-1)]
        else:
            if x.dtype.kind not in "iu":
                ctx.fail(f"X must be int32/int64 with pool_int64s, got {x.dtype}")
            toks = x.reshape(-1).tolist()
        if x.ndim > 2:
            ctx.fail(f"X must have rank 1 or 2, got shape {list(x.shape)}")
        rows, width = (1, x.size) if x.ndim < 2 else x.shape
        ids = np.array([vocab.get(t, -1) for t in toks], dtype=np.int64).reshape(rows, width)
        freq = np.zeros((rows, out_size), dtype=np.int64)
        for n, (codes, cols) in coded.items():
            for skip in ([0] if n == 1 else range(max_skip + 1)):
                span = (n - 1) * (skip + 1)
                if span >= width:
                    continue
                starts = width - span
                grams = np.stack([ids[:, k * (skip + 1): k * (skip + 1) + starts] for k in range(n)], axis=-1)
                valid = (grams >= 0).all(axis=-1)
                code = _code(grams, radix)
                pos = np.minimum(np.searchsorted(codes, code), len(codes) - 1)
                hit = valid & (codes[pos] == code)
                r_idx, s_idx = np.nonzero(hit)
                np.add.at(freq, (r_idx, cols[pos[r_idx, s_idx]]), 1)
        if mode == "TF":
            y = freq.astype(np.float32)
        elif mode == "IDF":
            y = (freq > 0).astype(np.float32)
            if weights is not None:
                y = y * weights[:out_size]
        else:
            y = freq.astype(np.float32)
            if weights is not None:
                y = y * weights[:out_size]
        y = y.astype(np.float32)
        return y.reshape(out_size) if x.ndim < 2 else y

    return fn
