"""Checking a run against the figures onnxkit claims (``onnxkit/statement/conformance_figures.json``).

The figures and their reading live in :mod:`onnxkit.statement.results` (the conformance
statement renders them); this module adds what the tests need to hold a run to them: the sizes
of the named sets, and :func:`gate_problems`, which names every vector whose outcome differs
from its gate's figures (a vector that stopped passing, and one that newly passes).
"""

from __future__ import annotations

from onnxkit.statement.results import (  # noqa: F401  (re-exported for the tests)
    CATEGORIES, EITHER_WAY, FIGURES, UPDATE_README, count, entry, expected_counts, figures, gate, gate_sets, named_set, passing,
)

WRITE_README = UPDATE_README


def all_sets(node=None, prefix: str = ""):
    """Every ``{"count", "names"}`` set of the figures, as (dotted path, set) pairs."""
    node = figures() if node is None else node
    if isinstance(node, dict) and set(node) == {"count", "names"}:
        yield prefix, node
        return
    if isinstance(node, dict):
        for key, value in node.items():
            yield from all_sets(value, f"{prefix}.{key}" if prefix else key)


def set_size_problems() -> list[str]:
    """Sets whose names are not ``count`` distinct names (empty when every size holds)."""
    problems = []
    for dotted, value in all_sets():
        names = value["names"]
        if len(names) != value["count"] or len(set(names)) != len(names):
            problems.append(f"{dotted}: count {value['count']} but {len(names)} names "
                            f"({len(set(names))} distinct)")
    return problems


def category_of(outcome) -> str:
    """The category an outcome falls in: ``pass``, one of :data:`CATEGORIES`, or its bare status
    (``fail``, ``error``, ``unsupported``) when its message lacks the category's words."""
    if outcome.status == "pass":
        return "pass"
    for category, (status, words) in CATEGORIES.items():
        if outcome.status == status and (not words or any(w in outcome.message for w in words)):
            return category
    return outcome.status


def gate_problems(backend: str, folder: str, outcomes) -> list[str]:
    """Every way ``outcomes`` (the runner's, one per vector) differ from the gate's figures, each
    line naming the vector: a vector that stopped passing or changed category, and a vector that
    newly passes (whose figure must then be updated).  Empty when the gate holds exactly."""
    expected = {name: category for category, names in gate_sets(backend, folder).items() for name in names}
    where = f"conformance.{backend}.{folder}"
    problems = []
    cases = gate(backend, folder)["cases"]
    if len(outcomes) != cases:
        problems.append(f"{len(outcomes)} {folder} vectors ran on {backend}, the figures say {cases} ({where}.cases)")
    seen = set()
    for outcome in outcomes:
        seen.add(outcome.name)
        want = expected.get(outcome.name, "pass")
        got = category_of(outcome)
        if got in EITHER_WAY and want != got:  # a category only for the vectors named in it
            got = outcome.status
        if got == want or (want in EITHER_WAY and got == "pass"):
            continue
        if got == "pass":
            problems.append(f"{outcome.name} now passes on {backend} (the figures say {want}): remove it from "
                            f"{where}.{want} in onnxkit/statement/conformance_figures.json, lower its count, then run "
                            f"{WRITE_README}")
        else:
            problems.append(f"{outcome.name} is {got} on {backend}, the figures say {want}: {outcome.message[:300]}")
    for name in sorted(set(expected) - seen):
        problems.append(f"{name} is named in {where}.{expected[name]} but no such vector ran")
    return problems
