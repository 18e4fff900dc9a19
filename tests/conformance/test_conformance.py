"""The ONNX 1-3 test vectors on the cpu backend (issue #5's bar), through the conformance runner.

Each gate asserts the exact figures of ``onnxkit/statement/conformance_figures.json`` (docs/conformance.md's
conformance statement is rendered from the same file): a vector that stops passing fails the
gate by name, and so does one that newly passes (its figure must then be updated).  The node
run writes its report to ``.cache/conformance-node-cpu.json`` (every case with its outcome and
message), so a failure here can be read case by case.
"""

from __future__ import annotations

import json
from pathlib import Path

from onnxkit import records
import pytest

import conformance_figures as figures
from onnxkit.conformance import discover, run_all, summary, write_report

REPORT = Path(__file__).resolve().parents[2] / ".cache" / "conformance-node-cpu.json"

#: Upstream node vectors that contradict Part 1 itself, so onnxkit refuses them on purpose:
#: the sequence inputs of test_sequence_map_* are declared seq(tensor(float)[N]) but their
#: elements have different extents; a dimension variable denotes one extent throughout the
#: model (Clause 6.5.2 and its NOTE on sequences), so the input check refuses the feed.
SPEC_DIVERGENT = figures.named_set("conformance.cpu.node.spec_divergent")

FOLDERS = ["node", "simple", "pytorch-converted", "pytorch-operator", "light"]

#: Cast/CastLike from FLOAT/FLOAT16 to INT4/UINT4/INT2/UINT2 with inputs out of the target range:
#: the Cast definition leaves a float out of range undefined, onnx's expected data wraps, onnxkit
#: rounds half to even and clamps (Clause 6.3.3 and the narrow-type decision, docs/decisions.md), so these
#: fail on purpose, each on its out-of-range elements only.
NARROW_CLAMP = {f"node/test_{op}_{src}_to_{dst}{exp}" for op, exps in (("cast", ("",)), ("castlike", ("", "_expanded")))
                for src in ("FLOAT", "FLOAT16") for dst in ("INT4", "UINT4", "INT2", "UINT2") for exp in exps}


def run_gate(root: Path, folder: str, backend: str):
    """Run one vector folder on ``backend``; returns the runner's outcomes."""
    return run_all(discover(root / folder), backend, progress=False)


def assert_gate(backend: str, folder: str, outcomes) -> None:
    """The outcomes show the gate's figures exactly; the message names every vector that differs."""
    problems = figures.gate_problems(backend, folder, outcomes)
    assert not problems, f"{folder} vectors on {backend}:\n" + "\n".join(problems)
    either = {n for c in figures.EITHER_WAY for n in figures.gate_sets(backend, folder).get(c, ())}
    counted = [records.evolve(o, status="fail") if o.name in either else o for o in outcomes]
    assert summary(counted) == figures.expected_counts(backend, folder)


def test_every_set_of_the_figures_has_its_stated_size():
    assert not figures.set_size_problems()
    assert len(SPEC_DIVERGENT) == figures.count("conformance.cpu.node.spec_divergent")
    assert all(name.startswith("test_sequence_map_") for name in SPEC_DIVERGENT)


def test_the_statement_renders_the_figures():
    """docs/conformance.md's statement is kept equal to `onnxkit conformance statement` by tests/conformance/test_statement.py."""
    from onnxkit.statement.results import test_package

    cpu_line = test_package()["lines"][0]
    assert f"node {figures.passing('cpu', 'node'):,} / {figures.gate('cpu', 'node')['cases']:,}" in cpu_line


def test_a_gate_names_a_vector_that_stops_passing_and_one_that_starts(monkeypatch):
    """gate_problems on made-up outcomes of a made-up gate with every category of named set."""
    from onnxkit.conformance import Outcome

    made_up = {"cases": 20, "unsupported": {"count": 2, "names": ["u1", "u2"]},
               "type_refusal": {"count": 2, "names": ["t1", "t2"]}, "spec_divergent": {"count": 1, "names": ["s1"]}}
    monkeypatch.setattr(figures, "gate", lambda backend, folder: made_up)
    monkeypatch.setattr(figures, "gate_sets", lambda backend, folder: {
        k: frozenset(v["names"]) for k, v in made_up.items() if k in figures.CATEGORIES})
    words = {"unsupported": "", "type_refusal": "the gpu backend has no torch dtype for element type uint64",
             "spec_divergent": "dimension variable (Clause 6.5.2)"}
    named = {name: category for category, names in figures.gate_sets("gpu", "node").items() for name in names}
    outcomes = [Outcome(name, figures.CATEGORIES[category][0], words[category]) for name, category in named.items()]
    outcomes += [Outcome(f"test_made_up_{k}", "pass") for k in range(made_up["cases"] - len(named))]
    assert figures.gate_problems("gpu", "node", outcomes) == []
    refused = next(k for k, o in enumerate(outcomes) if named.get(o.name) == "type_refusal")
    outcomes[refused] = Outcome(outcomes[refused].name, "pass")
    outcomes[-1] = Outcome("test_made_up_last", "fail", "values differ")
    problems = figures.gate_problems("gpu", "node", outcomes)
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"{outcomes[refused].name} now passes on gpu") and "lower its count" in problems[0]
    assert problems[1] == "test_made_up_last is fail on gpu, the figures say pass: values differ"
    assert figures.gate_problems("gpu", "node", outcomes[:-1])[0].startswith("19 node vectors ran on gpu")


def test_an_ill_conditioned_vector_may_pass_or_fail_and_no_other_may_fail(monkeypatch):
    from onnxkit.conformance import Outcome

    made_up = {"cases": 3, "ill_conditioned": {"count": 1, "names": ["shaky"]}}
    monkeypatch.setattr(figures, "gate", lambda backend, folder: made_up)
    monkeypatch.setattr(figures, "gate_sets", lambda backend, folder: {"ill_conditioned": frozenset({"shaky"})})
    steady = [Outcome("a", "pass"), Outcome("b", "pass")]
    for shaky in (Outcome("shaky", "pass"), Outcome("shaky", "fail", "output 0: values differ")):
        assert figures.gate_problems("cpu", "light", steady + [shaky]) == []
    problems = figures.gate_problems("cpu", "light", [Outcome("a", "fail", "values differ"), steady[1],
                                                      Outcome("shaky", "error", "boom")])
    assert problems == ["a is fail on cpu, the figures say pass: values differ",
                        "shaky is error on cpu, the figures say ill_conditioned: boom"]


@pytest.mark.parametrize("folder", FOLDERS)
def test_vectors_on_cpu_show_the_stated_figures(onnx_vectors_dir, folder):
    outcomes = run_gate(onnx_vectors_dir, folder, "cpu")
    if folder == "node":
        REPORT.parent.mkdir(exist_ok=True)
        write_report(REPORT, outcomes, "cpu")
    print(f"\n{folder} vectors on cpu: {summary(outcomes)}")
    assert_gate("cpu", folder, outcomes)


def test_the_report_is_json_with_every_case(tmp_path, onnx_vectors_dir):
    from onnxkit.cli import main

    report = tmp_path / "r.json"
    rc = main(["conformance", "run", str(onnx_vectors_dir / "node"), "-k", "test_abs", "--report", str(report),
               "--no-progress"])
    data = json.loads(report.read_text())
    assert data["backend"] == "cpu" and data["summary"]["pass"] == len(data["cases"]) >= 1
    assert rc == 0
