"""Tokenizer's expressions are RE2's (onnxruntime compiles them with RE2, leftmost-*longest*
matching); :func:`compile_re2` compiles one with the ``regex`` package in its POSIX
(leftmost-longest) mode after rewriting the RE2 syntax whose meaning differs there.

Rewritten, so that each means what it means in RE2:

* ``\\w \\W \\b \\B`` (ASCII word characters in RE2) as ASCII-scoped groups; ``\\d \\D \\s \\S`` as the
  ASCII sets RE2 gives them (``\\s`` is ``[\\t\\n\\f\\r ]``: no vertical tab); inside brackets
  ``\\w \\d \\s`` as their ranges;
* the POSIX classes inside brackets (``[[:alpha:]]``, ``[^[:space:]]`` ...): ASCII, as in RE2;
* ``$`` outside ``(?m)``: the end of the text only (``\\Z``), not before a final newline;
  ``\\z``: ``\\Z``;  ``\\x{H...}``: that code point;  ``\\Q...\\E``: the literal text;
* the ``U`` flag (swapped greediness) dropped: with leftmost-longest matching greediness does not
  change a match, in RE2 as in ``regex``'s POSIX mode.

Kept as written: ``\\pN``, ``\\p{Name}``, ``\\PN`` (Unicode classes and scripts, which ``regex`` reads
as RE2 does, from its own Unicode tables), ``.`` (no newline unless ``(?s)``).  Refused with :class:`Re2SyntaxError` naming the construct: ``\\C`` (one octet),
``\\W \\D \\S`` inside brackets and negated POSIX classes ``[[:^alpha:]]``.
"""

from __future__ import annotations

import functools

POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
#: RE2's Perl classes: outside brackets, inside brackets (None: no equivalent there)
OUTSIDE = {"w": "(?a:\\w)", "W": "(?a:\\W)", "b": "(?a:\\b)", "B": "(?a:\\B)", "d": "[0-9]", "D": "[^0-9]",
           "s": "[\\t\\n\\f\\r ]", "S": "[^\\t\\n\\f\\r ]", "z": "\\Z"}
INSIDE = {"w": "0-9A-Za-z_", "d": "0-9", "s": "\\t\\n\\f\\r ", "W": None, "D": None, "S": None}


class Re2SyntaxError(ValueError):
    """An RE2 construct with no equivalent here (the message names it)."""


@functools.lru_cache(maxsize=256)
def compile_re2(pattern: str):
    """``pattern`` (RE2 syntax) compiled with ``regex`` for leftmost-longest matching (``.`` matches no
    newline, as in RE2 without ``(?s)``).  Re2SyntaxError for a construct it refuses, ``regex.error`` for a malformed one."""
    import regex

    return regex.compile(translate(pattern), regex.POSIX)


def translate(pattern: str) -> str:
    """``pattern`` (RE2 syntax) in ``regex`` syntax with RE2's meaning (see the module docstring)."""
    multiline = _has_flag(pattern, "m")
    out, i, n, in_class = [], 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            e = pattern[i + 1]
            if e == "C":
                raise Re2SyntaxError("\\C (any one octet) is not supported")
            if e == "x" and i + 2 < n and pattern[i + 2] == "{":
                close = pattern.find("}", i + 3)
                if close < 0:
                    raise Re2SyntaxError(f"unterminated \\x{{...}} at position {i}")
                try:
                    out.append(f"\\U{int(pattern[i + 3:close], 16):08x}")
                except ValueError:
                    raise Re2SyntaxError(f"\\x{{{pattern[i + 3:close]}}} is not a hexadecimal code point") from None
                i = close + 1
                continue
            if e == "Q":
                close = pattern.find("\\E", i + 2)
                literal = pattern[i + 2:] if close < 0 else pattern[i + 2:close]
                out.append("".join(ch if ch.isalnum() or ch == "_" else f"\\{ch}" for ch in literal))
                i = n if close < 0 else close + 2
                continue
            table = INSIDE if in_class else OUTSIDE
            if e in table:
                if table[e] is None:
                    raise Re2SyntaxError(f"\\{e} inside brackets is not supported")
                out.append(table[e])
            else:
                out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            if pattern.startswith("[:", i):
                close = pattern.find(":]", i + 2)
                name = pattern[i + 2:close] if close > 0 else ""
                if name.lstrip("^") in POSIX:
                    if name.startswith("^"):
                        raise Re2SyntaxError(f"the negated POSIX class [:{name}:] is not supported")
                    out.append(POSIX[name])
                    i = close + 2
                    continue
            if c == "[":
                out.append("\\[")  # RE2 has no nested sets; regex would read one
                i += 1
                continue
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            if i < n and pattern[i] == "]":  # a leading ']' is a literal
                out.append("\\]")
                i += 1
            continue
        if c == "$" and not multiline:
            out.append("\\Z")
            i += 1
            continue
        if c == "(" and pattern.startswith("(?", i):
            j = i + 2
            while j < n and (pattern[j].isalpha() or pattern[j] == "-"):
                j += 1
            flags = pattern[i + 2:j]
            if "U" in flags and j < n and pattern[j] in "):":
                kept = flags.replace("U", "").strip("-")
                if pattern[j] == ")":
                    out.append(f"(?{kept})" if kept else "")
                else:
                    out.append(f"(?{kept}:")
                i = j + 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


def _has_flag(pattern: str, flag: str) -> bool:
    """True if an inline flag group of ``pattern`` sets ``flag`` (``(?m)``, ``(?im:``...)."""
    start = 0
    while True:
        k = pattern.find("(?", start)
        if k < 0:
            return False
        j = k + 2
        while j < len(pattern) and pattern[j].isalpha():
            j += 1
        if flag in pattern[k + 2:j] and j < len(pattern) and pattern[j] in ":-)":
            return True
        start = k + 2
