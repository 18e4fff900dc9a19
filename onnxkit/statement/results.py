"""The ONNX 1-3 results onnxkit claims and its known divergences: one source for the conformance
statement (docs/conformance.md) and for the tests that assert them.

The figures live in ``conformance_figures.json`` beside this module:

* a **gate** is one vector folder on one backend: ``{"cases": N, CATEGORY: SET, ...}``; every
  vector not named in one of its sets must pass, every named one must have its set's category,
  so the gate's pass figure is ``cases`` less the named vectors;
* a **set** is ``{"count": K, "names": [...]}``: an exclusion or refusal list whose size is
  stated and asserted (``len(names) == count``).

The suite (tests/test_conformance*.py, tests/inference/test_vectors.py, the gpu unit tests)
asserts every figure exactly and names each vector that differs.  Updating a figure is one edit
of one entry of the JSON file, then ``python tools/update_statement.py`` (docs/conformance.md and the README's summary).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

FIGURES = Path(__file__).resolve().parent / "conformance_figures.json"
UPDATE_README = "python tools/update_statement.py"

#: What a gate's outcome categories mean: the status the conformance runner reports and the words
#: its message must contain.  A vector not named in any set of its gate must pass.
CATEGORIES = {
    "unsupported": ("unsupported", ()),
    # the input check refuses a feed that breaks Clause 6.5.2 (one variable, one extent)
    "spec_divergent": ("error", ("6.5.2",)),
    # the gpu backend has no torch dtype for an element type the vector uses
    "type_refusal": ("error", ("no torch dtype", "torch has no dtype")),
    # a vector whose expected values hinge on rounding: not claimed; it may pass or fail by machine
    "ill_conditioned": ("fail", ("values differ",)),
}
#: categories whose vectors may also pass (the gate accepts either; the statement claims neither)
EITHER_WAY = ("ill_conditioned",)
MODEL_FOLDERS = ("simple", "pytorch-converted", "pytorch-operator")


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
    """The names of the set at a dotted path."""
    return frozenset(entry(dotted)["names"])


def count(dotted: str) -> int:
    """The stated size of the set at a dotted path."""
    return int(entry(dotted)["count"])


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
        counts[CATEGORIES[category][0]] += len(names)
        counts["pass"] -= len(names)
    return counts


def passing(backend: str, folder: str) -> int:
    """The pass figure of a gate."""
    return expected_counts(backend, folder)["pass"]


# -- rendered text ---------------------------------------------------------------------------------

def _n(value: int) -> str:
    return f"{value:,}"


def _listing(names, limit: int = 12) -> str:
    """A short set written out in code spans; a long one referred to by its place in the figures."""
    names = sorted(names)
    if len(names) > limit:
        return "named in `onnxkit/statement/conformance_figures.json`"
    return ", ".join(f"`{name}`" for name in names)


def _fraction(backend: str, folder: str) -> str:
    return f"{_n(passing(backend, folder))} / {_n(gate(backend, folder)['cases'])}"


def _cpu_line() -> str:
    divergent = len(gate_sets("cpu", "node").get("spec_divergent", ()))
    refused = f" (the {divergent} others refused on purpose, see the divergences)" if divergent else ""
    parts = [f"node {_fraction('cpu', 'node')}{refused}"] + [f"{f} {_fraction('cpu', f)}" for f in MODEL_FOLDERS]
    return "`cpu`: " + "; ".join(parts) + f"; light {_fraction('cpu', 'light')} against their reference outputs"


def _gpu_line() -> str:
    node = expected_counts("gpu", "node")
    sets = gate_sets("gpu", "node")
    parts = [f"node {_n(node['pass'])} pass, {_n(node['fail'])} fail ({_n(len(sets.get('unsupported', ())))} "
             f"unsupported, {_n(len(sets.get('type_refusal', ())))} type refusals)"]
    for folder in MODEL_FOLDERS:
        unsupported = len(gate_sets("gpu", folder).get("unsupported", ()))
        parts.append(f"{folder} {_fraction('gpu', folder)}" + (f" ({_n(unsupported)} unsupported)" if unsupported else ""))
    parts.append(f"light {_fraction('gpu', 'light')}")
    return "`gpu` (torch's CPU device): " + "; ".join(parts)


def _inference_line() -> str:
    inf = entry("inference")
    return (f"inference: over every node vector's {_n(inf['outputs'])} outputs, {_n(inf['exact'])} exact, 0 "
            f"contradicting the expected data (onnx's own strict inference: {_n(inf['onnx_exact'])} exact); with "
            f"every input extent a variable: {_n(inf['symbolic_exact'])} exact, 0 contradicting; every intermediate "
            f"value onnx.reference computes ({_n(inf['reference_values'])}): {_n(inf['reference_exact'])} exact, "
            "0 contradicting (exclusions in the divergences)")


def test_package() -> dict:
    """The ONNX 1-3 item of the statement: a one-line summary and the lines that detail it."""
    summary = (f"node {_fraction('cpu', 'node')} on `cpu`; "
               + "; ".join(f"{f} {_fraction('cpu', f)}" for f in MODEL_FOLDERS)
               + f"; light {_fraction('cpu', 'light')} (details below)")
    return {"package": figures()["package"], "summary": summary, "lines": [
        _cpu_line(), _gpu_line(),
        "codec: byte-exact `save(load(b)) == b` on all 2,033 models and 6,851 value files of the package",
        _inference_line(),
        "validation: 0 errors on all 1,884 node models and the other model folders; the checker's catalogue: 141 "
        "invalid and 23 valid models, every code documented (`docs/diagnostics.md`)",
    ]}


def _figure_divergences() -> list:
    out = []
    if count("conformance.cpu.node.spec_divergent"):
        names = named_set("conformance.cpu.node.spec_divergent")
        out.append(f"**Sequences with varying extents (cpu).** The {len(names)} node vectors {_listing(names)} feed "
                   "sequences whose elements differ in an extent that the input type names with one dimension "
                   "variable; Clause 6.5.2 (and its NOTE on sequences) says one variable is one extent throughout a "
                   "model, so the session refuses the feed and says so.")
    refusals = gate_sets("gpu", "node").get("type_refusal", frozenset())
    if refusals:
        out.append(f"**Element types torch lacks (gpu).** {_n(len(refusals))} node vectors ({_listing(refusals)}) use "
                   "an element type torch has no dtype for (unsigned 16/32/64-bit, 8-bit floats, 4- and 2-bit "
                   "integers, float4) and are refused with an error saying so, not evaluated.")
    names = named_set("inference.reference_unevaluable")
    out.append(f"**Models onnx.reference cannot run.** The inference check against onnx's `ReferenceEvaluator` "
               f"leaves out the {len(names)} node models it cannot run ({_listing(names)}).")
    names = named_set("inference.reference_quirks")
    models = sorted({name.split(":", 1)[0] for name in names})
    out.append(f"**onnx.reference's Loop shapes.** The same check does not compare {len(names)} values of "
               f"{len(models)} models ({_listing(models)}), where the ReferenceEvaluator's Loop stacks scalar scan "
               "outputs as [N, 1]; the package's expected output, checked against inference too, is [N].")
    names = named_set("inference.unloadable_values")
    out.append(f"**Expected values that do not load.** Expected values of the node vectors that the inference "
               f"checks cannot load and so leave out: {_n(len(names))}" + (f" ({_listing(names)})." if names else "."))
    cannot = named_set("gpu_unit_tests.reference_cannot_run")
    differs = named_set("gpu_unit_tests.reference_disagrees")
    ops = sorted({name.rsplit(" ", 1)[1].rsplit("-", 1)[0] for name in differs})
    out.append(f"**Where onnx.reference is no oracle (gpu unit tests).** The `gpu` backend's unit tests compare "
               f"each result with the `cpu` backend and with onnx's `ReferenceEvaluator`; {_n(len(cannot))} "
               f"comparisons are of forms the reference cannot run (old operator versions, attribute forms it lacks) "
               f"and {_n(len(differs))} are where it is wrong or computes narrow types differently "
               f"({', '.join(f'`{op}`' for op in ops)}); those are compared with the `cpu` backend only.")
    return out


#: Divergences that are not counts of the test package.
OTHER_DIVERGENCES = (
    "STRING elements (Clause 6.4 leaves the encoding open) come back from a session as `str`, save an element "
    "that is not valid UTF-8, which comes back as `bytes`; inside onnxkit they are the octets the model holds.",
    "`Gradient` (ai.onnx.preview.training) differentiates the operators listed in `kernels/gradient.py`; a graph "
    "using another is refused when the session is created, naming the operator.",
    "`Loop` with a trip count and no condition input runs the trip count's iterations (the body's condition is "
    "ignored, as Part 2 states); onnxruntime stops when the body's condition becomes false.",
)


def divergences() -> list:
    """Every known divergence, as Markdown list items: the figures' named sets, then the others."""
    return _figure_divergences() + list(OTHER_DIVERGENCES)
