"""onnxkit's position on each behaviour the specification leaves open (Annex C, editorial notes).

Part 1 leaves several behaviours to the implementation or to later editions.  A conformance
statement (Annex A) has to say what onnxkit does in each case; this table is where it says so,
once.  ``onnxkit conformance statement`` prints it, and every row names the test that fails if
the behaviour changes (``tests/conformance/test_positions.py`` checks that each named test exists).

:data:`POSITIONS` is made on first use: the determinism row names the operators the domain
packages declare nondeterministic (:func:`nondeterministic_operators`), read from the registry.
"""

from __future__ import annotations

import functools

from onnxkit import records

from .kernel_traits import operator_traits


@records.frozen
class Position:
    """One open point: the clause, what is open, what onnxkit does, and the test that pins it."""

    clause: str
    topic: str
    position: str
    test: str


def _t(name: str) -> str:
    return f"tests/conformance/test_positions.py::{name}"


def nondeterministic_operators(registry=None) -> list:
    """The ai.onnx operators whose definitions are declared nondeterministic (Clause 8.5) by the
    domain package providing them (:func:`onnxkit.plugin.nondeterministic`), sorted; ``registry``
    defaults to the process's."""
    if registry is None:
        from .registry import get_registry

        registry = get_registry()
    return sorted({key[1] for key in registry.portable
                   if key[0] == "" and operator_traits(registry, key).nondeterministic})


@functools.lru_cache(maxsize=1)
def positions() -> tuple:
    """Every :class:`Position`, in clause order (made once: :data:`POSITIONS`)."""
    return (
        Position("6.4", "the encoding of STRING elements",
                 "Inside onnxkit a STRING element is the octet string the model holds (kept losslessly). At a "
                 "session's boundary, as onnxruntime and `onnx.numpy_helper` do, a fed element may be `str` (encoded "
                 "as UTF-8) or `bytes`, and a returned element is a `str` decoded as UTF-8, except an element that is "
                 "not valid UTF-8, which comes back as the `bytes` it is.",
                 "tests/engine/test_policy_regressions.py::test_a_string_that_is_not_utf8_comes_back_as_bytes"),
        Position("6.9", "type equality and assignability",
                 "Two types are equal when their kinds, element types and shapes are equal. A value may be supplied "
                 "where a type is declared unless the two contradict: different kinds, different element types, "
                 "different ranks, or two static extents that differ. An absent shape, an unknown extent and a "
                 "dimension variable are assignable to any extent; a model is not refused for them, and the value "
                 "is checked against the declaration when it exists (the feed check, and the declared-vs-computed "
                 "check after a run).",
                 _t("test_assignability_contradiction_only_between_static_facts")),
        Position("8.5", "determinism",
                 f"Every operator except {', '.join(nondeterministic_operators())} is deterministic: equal inputs give "
                 "bit-identical outputs on every run of a session (Dropout is random only in training mode). "
                 "A random operator draws from one generator per "
                 "node, seeded once when the session is created from the node's `seed` attribute, else the "
                 "session's `seed`: run k of a session gives the k-th draws (a stream, as onnxruntime), and a new "
                 "session with the same seeds repeats the sequence.",
                 _t("test_random_operators_are_a_stream_per_session")),
        Position("11.3", "NaN, signed zero, infinities",
                 "Floating-point arithmetic is IEEE 754 binary arithmetic of the element type: x/0 is ±inf, 0/0 and "
                 "inf-inf are NaN. Max and Min propagate NaN (IEEE 754-2019 maximum/minimum, not maxNum). For two "
                 "zeros of opposite sign Max and Min return one of them, unspecified (the cpu backend returns the "
                 "second operand; onnxruntime the first).",
                 _t("test_nan_propagates_through_max_and_min_and_division_follows_ieee")),
        Position("11.3", "integer overflow and division by zero",
                 "Integer arithmetic wraps modulo 2^n (two's complement), as onnxruntime's. Integer Div and Mod by "
                 "zero have no defined result, so none is produced: the run fails with an EvaluationError naming "
                 "the node (onnxruntime's result is undefined there).",
                 _t("test_integer_overflow_wraps_and_division_by_zero_is_refused")),
        Position("12.5", "maximum message size",
                 "A model, and any single embedded message, may be at most `max_message_bytes` octets (default "
                 "2 GiB, the reference implementation's limit, configurable through `onnxkit.Limits`); a larger one "
                 "is refused with LimitExceeded before it is decoded. Contents beyond it belong in external data "
                 "(Clause 13).",
                 _t("test_message_size_limit_is_refused_before_decoding")),
        Position("12.8", "canonical form and model hashes",
                 "onnxkit defines a canonical form (docs/decisions.md, \"Canonical form\"); `onnxkit hash` is the "
                 "SHA-256 of it. "
                 "It covers what the model file carries: an external tensor contributes its reference, not its "
                 "contents. `onnxkit hash --with-data` also covers the octets every reference selects, so a "
                 "changed data file changes that hash.",
                 _t("test_hash_covers_external_contents_only_with_data")),
        Position("13.3", "a stronger digest than SHA-1",
                 "A `checksum` of 40 hexadecimal digits is the SHA-1 the clause names; one of 64 digits is a "
                 "SHA-256. The choice is encoded by the digest's length, so no key outside Table 11 is introduced "
                 "(13.2 requires refusing those). Both are verified before the contents are used; "
                 "`onnxkit.save(..., checksum='sha256')` writes a SHA-256. The digest covers the whole file, as the "
                 "clause says.",
                 _t("test_sha256_checksums_are_written_and_verified")),
        Position("ONNX 1-2 Loop", "Loop with a trip count and no condition input",
                 "The body's condition output is ignored and the loop runs the trip count's iterations, as the "
                 "operator definition's table states (`for (i=0; i<M; ++i) { cond = ...; // ignored }`). "
                 "onnxruntime stops when the body's condition becomes false: the two differ on such models.",
                 _t("test_loop_with_a_trip_count_and_no_condition_ignores_the_body_condition")),
)


def __getattr__(name: str):
    if name == "POSITIONS":  # made on first use (PEP 562): it reads the registry
        return positions()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
