"""The figures onnxkit claims, read from ``tests/conformance_figures.json`` (their one source).

The conformance gates (tests/test_conformance.py, tests/test_conformance_gpu.py) and the
inference gates (tests/inference/test_vectors.py) assert these exact counts and named sets, and
the README's conformance statement rows and known divergences are rendered from them, so a
claimed number cannot drift from what the suite checks:

* a **gate** is one vector folder on one backend: ``{"cases": N, CATEGORY: SET, ...}``; every
  vector not named in one of its sets must pass, every named one must have its set's category,
  so the gate's pass figure is ``cases`` less the named vectors;
* a **set** is ``{"count": K, "names": [...]}``: an exclusion or refusal list whose size is
  stated and asserted (``len(names) == count``);
* :func:`readme_items` renders the README text from the figures; ``python
  tests/conformance_figures.py --write-readme`` writes it into README.md, ``--check`` reports
  whether README.md is up to date.

Updating a figure (a vector newly passes, a reference model becomes evaluable, ...) is one
edit of one entry of the JSON file (its names and count), then ``--write-readme``.
"""

from __future__ import annotations

import json
import re
import sys
from functools import lru_cache
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FIGURES = TESTS / "conformance_figures.json"
README = TESTS.parent / "README.md"
WRITE_README = "python tests/conformance_figures.py --write-readme"

#: What a gate's outcome categories mean: the status the conformance runner reports and the words
#: its message must contain.  A vector not named in any set of its gate must pass.
CATEGORIES = {
    "unsupported": ("unsupported", ()),
    # the input check refuses a feed that breaks Clause 6.5.2 (one variable, one extent)
    "spec_divergent": ("error", ("6.5.2",)),
    # the gpu backend has no torch dtype for an element type the vector uses
    "type_refusal": ("error", ("no torch dtype", "torch has no dtype")),
}


@lru_cache(maxsize=None)
def figures() -> dict:
    """The parsed figures file (read once)."""
    return json.loads(FIGURES.read_text(encoding="utf-8"))


def entry(dotted: str):
    """The figures entry at a dotted path, e.g. ``"conformance.cpu.node"``."""
    node = figures()
    for key in dotted.split("."):
        node = node[key]
    return node


def named_set(dotted: str) -> frozenset:
    """The names of the set at a dotted path (its size is checked by :func:`set_size_problems`)."""
    return frozenset(entry(dotted)["names"])


def count(dotted: str) -> int:
    """The stated size of the set at a dotted path."""
    return int(entry(dotted)["count"])


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


def gate(backend: str, folder: str) -> dict:
    """The figures of one vector folder on one backend."""
    return entry(f"conformance.{backend}.{folder}")


def gate_sets(backend: str, folder: str) -> dict:
    """{category: frozenset of vector names} of a gate."""
    return {key: frozenset(value["names"]) for key, value in gate(backend, folder).items() if key in CATEGORIES}


def expected_counts(backend: str, folder: str) -> dict:
    """The outcome counts a gate must show, in the conformance runner's ``summary`` form."""
    counts = {"pass": gate(backend, folder)["cases"], "fail": 0, "unsupported": 0, "error": 0}
    for category, names in gate_sets(backend, folder).items():
        status = CATEGORIES[category][0]
        counts[status] += len(names)
        counts["pass"] -= len(names)
    return counts


def passing(backend: str, folder: str) -> int:
    """The pass figure of a gate."""
    return expected_counts(backend, folder)["pass"]


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
        if got == want:
            continue
        if got == "pass":
            problems.append(f"{outcome.name} now passes on {backend} (the figures say {want}): remove it from "
                            f"{where}.{want} in tests/conformance_figures.json, lower its count, then run "
                            f"{WRITE_README}")
        else:
            problems.append(f"{outcome.name} is {got} on {backend}, the figures say {want}: {outcome.message[:300]}")
    for name in sorted(set(expected) - seen):
        problems.append(f"{name} is named in {where}.{expected[name]} but no such vector ran")
    return problems


# -- the README ------------------------------------------------------------------------------------

def _n(value: int) -> str:
    return f"{value:,}"


def _listing(names, limit: int = 12) -> str:
    """A short set written out in code spans; a long one referred to by its place in the figures."""
    names = sorted(names)
    if len(names) > limit:
        return "named in `tests/conformance_figures.json`"
    return ", ".join(f"`{name}`" for name in names)


MODEL_FOLDERS = ("simple", "pytorch-converted", "pytorch-operator")


def _fraction(backend: str, folder: str) -> str:
    """``PASS / CASES`` of a gate."""
    return f"{_n(passing(backend, folder))} / {_n(gate(backend, folder)['cases'])}"


def _cpu_row() -> str:
    sets = gate_sets("cpu", "node")
    divergent = len(sets.get("spec_divergent", ()))
    refused = f" (the {divergent} others refused on purpose, below)" if divergent else ""
    parts = [f"node {_fraction('cpu', 'node')}{refused}"] + [f"{f} {_fraction('cpu', f)}" for f in MODEL_FOLDERS]
    return "; ".join(parts) + f"; light {_fraction('cpu', 'light')} against their reference outputs "


def _gpu_row() -> str:
    node = expected_counts("gpu", "node")
    sets = gate_sets("gpu", "node")
    unsupported, refusals = len(sets.get("unsupported", ())), len(sets.get("type_refusal", ()))
    parts = [f"node vectors {_n(node['pass'])} pass, {_n(node['fail'])} fail ({_n(unsupported)} unsupported, "
             f"{_n(refusals)} type refusals)"]
    for folder in MODEL_FOLDERS:
        unsupported = len(gate_sets("gpu", folder).get("unsupported", ()))
        parts.append(f"{folder} {_fraction('gpu', folder)}" + (f" ({_n(unsupported)} unsupported)" if unsupported else ""))
    parts.append(f"light models {_fraction('gpu', 'light')}")
    return "; ".join(parts) + " "


def _inference_row() -> str:
    inf = entry("inference")
    return (f"over every node vector's {_n(inf['outputs'])} outputs: {_n(inf['exact'])} exact, 0 contradicting the "
            f"expected data (onnx's own strict inference: {_n(inf['onnx_exact'])} exact); with every input extent a "
            f"variable: {_n(inf['symbolic_exact'])} exact, 0 contradicting; every intermediate value onnx.reference "
            f"computes ({_n(inf['reference_values'])}): {_n(inf['reference_exact'])} exact, 0 contradicting "
            f"(exclusions below) ")


def _spec_divergent_bullet():
    if "spec_divergent" not in gate("cpu", "node") or not count("conformance.cpu.node.spec_divergent"):
        return None
    names = named_set("conformance.cpu.node.spec_divergent")
    return (f"The {len(names)} node vectors {_listing(names)} feed sequences whose elements differ in an extent "
            "that the input type names with one dimension variable; Clause 6.5.2 (and its NOTE on sequences) says "
            "one variable is one extent throughout a model, so the session refuses the feed and says so.")


def _type_refusal_bullet():
    names = gate_sets("gpu", "node").get("type_refusal", frozenset())
    return (f"On the `gpu` backend, {_n(len(names))} node vectors ({_listing(names)}) use an element type torch has "
            "no dtype for (unsigned 16/32/64-bit, 8-bit floats, 4- and 2-bit integers, float4) and are refused "
            "with an error saying so, not evaluated.")


def _unevaluable_bullet():
    names = named_set("inference.reference_unevaluable")
    return (f"The inference check against onnx's `ReferenceEvaluator` leaves out the {len(names)} node models it "
            f"cannot run ({_listing(names)}: its string kernels do not take octet strings, it has no `Scatter`, "
            "and its Scan cannot run `test_scan_sum`).")


def _quirk_bullet():
    names = named_set("inference.reference_quirks")
    models = sorted({name.split(":", 1)[0] for name in names})
    return (f"The same check does not compare {len(names)} values of {len(models)} models ({_listing(models)}), "
            "where the ReferenceEvaluator's Loop stacks scalar scan outputs as [N, 1]; the package's expected "
            "output, checked against inference too, is [N].")


def _unloadable_bullet():
    names = named_set("inference.unloadable_values")
    listed = f" ({_listing(names)})" if names else ""
    return (f"Expected values of the node vectors that the inference checks cannot load and so leave out: "
            f"{_n(len(names))}{listed}.")


def _gpu_oracle_bullet():
    cannot = named_set("gpu_unit_tests.reference_cannot_run")
    differs = named_set("gpu_unit_tests.reference_disagrees")
    ops = sorted({name.rsplit(" ", 1)[1].rsplit("-", 1)[0] for name in differs})
    return (f"The `gpu` backend's unit tests compare each result with the `cpu` backend and with onnx's "
            f"`ReferenceEvaluator`; {_n(len(cannot))} comparisons are of forms the reference cannot run (old "
            f"operator versions, attribute forms it lacks) and {_n(len(differs))} are where it is wrong or computes "
            f"narrow types differently ({', '.join(f'`{op}`' for op in ops)}; e.g. `LpNormalization` with p = 1, "
            "`LRN` with an even size, the Softmax family's 2-D coercion before version 13, `MaxPool` with SAME "
            "padding and strides); those are compared with the `cpu` backend only, each named in "
            "`tests/conformance_figures.json`.")


def readme_items() -> list[tuple[str, str | None]]:
    """(anchor, text) pairs: README.md must hold ``anchor + text`` running to the end of its table
    cell or line; a text of None means the anchor's line must be absent."""
    bullet = [
        ("- **Sequences with varying extents (cpu).** ", _spec_divergent_bullet()),
        ("- **Element types torch lacks (gpu).** ", _type_refusal_bullet()),
        ("- **Models onnx.reference cannot run.** ", _unevaluable_bullet()),
        ("- **onnx.reference's Loop shapes.** ", _quirk_bullet()),
        ("- **Expected values that do not load.** ", _unloadable_bullet()),
        ("- **Where onnx.reference is no oracle (gpu unit tests).** ", _gpu_oracle_bullet()),
    ]
    return [
        ("| ONNX 1-3 (onnx 1.23.2 package) | ", _cpu_row()),
        ("Checked on torch's CPU device only: ", _gpu_row()),
        ("| inference | ", _inference_row()),
    ] + bullet


def _span(anchor: str) -> re.Pattern:
    return re.compile(re.escape(anchor) + r"[^|\n]*")


def readme_problems(text: str) -> list[str]:
    """Where ``text`` (README.md) differs from the rendered figures; empty when it is up to date."""
    problems = []
    for anchor, rendered in readme_items():
        found = _span(anchor).findall(text)
        if rendered is None:
            if found:
                problems.append(f"README still has the line {anchor!r}, which the figures no longer support")
        elif found != [anchor + rendered]:
            problems.append(f"README has {found or 'no'} {anchor!r}...; the figures render {anchor + rendered!r}")
    return problems


def render_readme(text: str) -> str:
    """``text`` (README.md) with every rendered item written in (lines whose text is None dropped)."""
    for anchor, rendered in readme_items():
        pattern = _span(anchor)
        if rendered is None:
            text = re.sub(r"^" + re.escape(anchor) + r".*\n", "", text, flags=re.M)
        elif pattern.search(text):
            text = pattern.sub(lambda _: anchor + rendered, text, count=1)
        else:
            raise SystemExit(f"README.md has no {anchor!r}: add the line by hand, then run this again")
    return text


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-readme"]:
        README.write_text(render_readme(README.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"wrote the figures into {README}")
    elif sys.argv[1:] == ["--check"]:
        found = set_size_problems() + readme_problems(README.read_text(encoding="utf-8"))
        print("\n".join(found) or "README.md and the figures agree")
        sys.exit(1 if found else 0)
    else:
        sys.exit("usage: python tests/conformance_figures.py --write-readme | --check")
