"""Tokenizer's expressions read as onnxruntime's RE2 reads them (kernels/re2_syntax.py): one node
against onnxruntime on cpu and gpu (the kernel is host_only: gpu runs it on its cpu fallback) over
leftmost-longest alternation, Unicode and POSIX classes, ASCII Perl classes, anchors, flags and
literal syntax, for tokenexp and separators; what has no equivalent is a clear error."""

from __future__ import annotations

import numpy as np
import pytest
from ms_harness import build, check, run_onnxkit

TEXT = np.array(["Héllo wörld, naïve café\n", "abc DEF 123 x_y abcd", "tabs\tand\vnew\nline",
                 "数据 科学 and ab-cd", "aaa ab abab", ""], dtype=object)

TOKENEXPS = [
    r"a|ab", r"a|ab|abc", r"(?:ab)?(?:abcd)?", r"a+?", r"(?U)a+",           # leftmost-longest, greediness
    r"\pL+", r"\p{L}+", r"\PL+", r"\pN+", r"\p{Han}+", r"[\pL\d]+",           # Unicode classes and scripts
    r"[[:alpha:]]+", r"[[:digit:][:upper:]]+", r"[^[:space:]]+", r"[[:punct:]]", r"(?i)[[:upper:]]+",
    r"\w+", r"\b\w\w+\b", r"\B\w", r"\s+", r"\S+", r"[\w-]+", r"\d+\.?\d*",   # ASCII Perl classes
    r"\w+$", r"(?m)\w+$", r"^\w+", r"\z", r".", r"..", r"(?s).+", r"(?-s).+",  # anchors, dot, newline
    r"\Qa.b\E", r"\x{41}", r"(?i:ABC)d", r"[]a]+", r"(ab)+", r"(?P<n>\w)+", r"x*",
]


@pytest.mark.parametrize("tokenexp", TOKENEXPS)
def test_tokenexp_matches_onnxruntime(tokenexp):
    check("Tokenizer", [TEXT], {"mark": 1, "pad_value": "#", "mincharnum": 1, "tokenexp": tokenexp}, host_only=True)


SEPARATORS = [[" "], [" ", ", "], [",", ", "], ["a", "ab"], ["c", "ab"], ["x+", "a"], ["[[:space:]]+", "-"],
              [r"\s"], [r"\pL"], ["(ab)+"], ["."], [".."], [r"\d+"], ["^a"]]


@pytest.mark.parametrize("separators", SEPARATORS, ids=repr)
def test_separators_match_onnxruntime(separators):
    """Each separator cuts the pieces the ones before it left, in order (["c", "ab"] on "abxc" is ["x"])."""
    attrs = {"mark": 1, "pad_value": "#", "mincharnum": 1, "separators": separators}
    check("Tokenizer", [TEXT], attrs, host_only=True)
    check("Tokenizer", [np.array([["abxc", "1a2xx3a4x"], ["abxcab", "aaa ab-abab"]], dtype=object)], attrs,
          host_only=True)


@pytest.mark.parametrize("attrs,fragment", [
    ({"tokenexp": r"\C"}, r"\C (any one octet) is not supported"),
    ({"tokenexp": r"[\W]"}, r"\W inside brackets is not supported"),
    ({"tokenexp": r"[[:^alpha:]]"}, "the negated POSIX class [:^alpha:] is not supported"),
    ({"tokenexp": r"\x{zz}"}, r"\x{zz} is not a hexadecimal code point"),
    ({"tokenexp": "(ab"}, "cannot compile the tokenexp expression"),
    ({"separators": [r"\b"]}, r"the separator '\\b' matches an empty string"),
    ({"separators": ["x*"]}, "separators that can match empty are not supported"),
])
def test_what_has_no_equivalent_is_a_clear_error(attrs, fragment):
    from onnxkit.errors import OnnxkitError

    model, feed = build("Tokenizer", [TEXT], {"mark": 0, "pad_value": "#", "mincharnum": 1, **attrs})
    for backend in ("cpu", "gpu"):
        with pytest.raises(OnnxkitError) as info:
            run_onnxkit(model, feed, backend, on_fallback=True)
        assert fragment in str(info.value), str(info.value)
