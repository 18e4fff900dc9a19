"""The validator against the catalogue (tests/checker/catalogue.py).

Every invalid model breaks one rule: the validator must report the intended code, and no
other error code unless the case lists it.  Every valid model must pass with no error; the
ones marked ``oracle`` must pass onnx's own checker too, so that "valid" is not only our
opinion.  A model with several independent faults must have every one reported (10.5).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import catalogue  # noqa: E402
from catalogue import INVALID, VALID  # noqa: E402

from onnxkit import ir  # noqa: E402
from onnxkit.api import to_bytes  # noqa: E402
from onnxkit.checker import check_model  # noqa: E402
from onnxkit.checker.codes import CODES  # noqa: E402


def run(case, tmp_path):
    obj = case.build()
    if not case.encode:
        return check_model(obj, limits=case.limits, open_external=case.open_external, registry=case.registry)
    data = obj if isinstance(obj, bytes) else to_bytes(obj)
    if case.files or case.path:
        for name, content in case.files.items():
            (tmp_path / name).write_bytes(content)
        path = tmp_path / "model.onnx"
        path.write_bytes(data)
        return check_model(str(path), limits=case.limits, open_external=case.open_external, registry=case.registry)
    return check_model(data, limits=case.limits, open_external=case.open_external, registry=case.registry)


def test_catalogue_size():
    assert len(INVALID) == 141 and len(VALID) == 23  # the figures of the conformance statement (docs/conformance.md)
    assert len({c.name for c in INVALID + VALID}) == len(INVALID) + len(VALID)


def test_every_code_is_exercised():
    """Each code of the catalogue (bar the opened-file ones covered below) has an invalid model."""
    assert {c.code for c in INVALID} == set(CODES)


@pytest.mark.parametrize("case", INVALID, ids=lambda c: c.name)
def test_invalid(case, tmp_path):
    report = run(case, tmp_path)
    codes = report.codes()
    assert case.code in codes, f"{case.code} not reported; got:\n" + "\n".join(map(str, report.diagnostics))
    allowed = {case.code, *case.also}
    stray = {d.code for d in report.errors} - allowed
    assert not stray, "unexpected errors:\n" + "\n".join(str(d) for d in report.errors if d.code in stray)
    intended = [d for d in report.diagnostics if d.code == case.code]
    assert all(d.severity == CODES[case.code].severity and d.clause == CODES[case.code].clause for d in intended)
    assert report.ok == (CODES[case.code].severity == "warning")


@pytest.mark.parametrize("case", VALID, ids=lambda c: c.name)
def test_valid(case, tmp_path):
    report = run(case, tmp_path)
    assert report.ok, "\n".join(map(str, report.errors))
    assert {d.code for d in report.warnings} == set(case.warnings), "\n".join(map(str, report.warnings))


@pytest.mark.parametrize("case", [c for c in VALID if c.oracle], ids=lambda c: c.name)
def test_valid_is_valid_for_onnx(case):
    onnx = pytest.importorskip("onnx")
    proto = onnx.load_from_string(to_bytes(case.build()))
    onnx.checker.check_model(proto, full_check=True)


def test_ir_versions_of_valid_cases():
    versions = {case.build().ir_version for case in VALID}
    assert {1, 3, 4, 8, 9, 10, 11, 13, 14} <= versions


def test_several_faults_all_reported():
    """One model, six independent faults: each is reported, at its own location (10.5)."""
    m = catalogue.relu()
    g = m.graph
    g.node.append(catalogue.node("Relux", ["X"], ["A"]))                       # unknown-operator
    g.node.append(catalogue.node("Relu", ["Q"], ["B"]))                        # undefined-value
    g.node.append(catalogue.node("Relu", ["X"], ["Y"]))                        # duplicate-definition
    g.output.append(catalogue.vi("Z"))                                          # undefined-output
    g.initializer.append(ir.Tensor(dims=[3], data_type=1, name="W", float_data=[1.0]))  # tensor-size-mismatch
    m.metadata_props = [ir.StringStringEntry("k", "1"), ir.StringStringEntry("k", "2")]  # duplicate-metadata-key
    report = check_model(to_bytes(m))
    want = {"unknown-operator", "undefined-value", "duplicate-definition", "undefined-output", "tensor-size-mismatch"}
    assert {d.code for d in report.errors} == want
    assert len(report.errors) == 5
    assert [d.code for d in report.warnings] == ["duplicate-metadata-key"]  # metadata cannot change the result (5.5)
    by_code = {d.code: d.location for d in report.diagnostics}
    assert by_code["unknown-operator"] == "graph 'main' / node 1 (Relux)"
    assert by_code["undefined-value"] == "graph 'main' / node 2 (Relu) / input 0 'Q'"
    assert by_code["tensor-size-mismatch"] == "graph 'main' / initializer 'W'"
    assert by_code["duplicate-metadata-key"] == "model"


def test_same_fault_twice_reported_twice():
    m = catalogue.model(catalogue.graph([catalogue.node("Relu", ["P"], ["T"]), catalogue.node("Relu", ["Q"], ["Y"])],
                                        [catalogue.vi("X")], [catalogue.vi("Y")]))
    report = check_model(to_bytes(m))
    assert [d.code for d in report.errors] == ["undefined-value", "undefined-value"]


def test_subgraph_location():
    report = run(next(c for c in INVALID if c.name == "undefined_in_subgraph"), None)
    (d,) = report.errors
    assert d.location == "graph 'main' / node 0 (If) / attribute 'then_branch' / graph 'then' / node 0 (Relu) / input 0 'Q'"


def test_attribute_location():
    report = run(next(c for c in INVALID if c.name == "relu_with_beta"), None)
    (d,) = report.warnings  # unknown-attribute: no kernel reads it (issue 45)
    assert d.location == "graph 'main' / node 0 (Relu) / attribute 'beta'"


def test_ir3_rule_is_per_ir_version():
    """The same model: an error at IR 3 (initializer not an input), valid at IR 4."""
    m = catalogue.with_init(catalogue.tensor("W", [1.0]), ir_version=3, opsets=(("", 6),))
    assert "initializer-not-input" in check_model(to_bytes(m)).codes()
    m.ir_version = 4
    assert check_model(to_bytes(m)).ok


def test_attribute_type_rule_is_per_ir_version():
    """An attribute without its type field: conforming at IR 1, not at IR 2."""
    case = next(c for c in INVALID if c.name == "attribute_without_type_ir2")
    m = case.build()
    assert "mandatory-field-missing" in check_model(to_bytes(m)).codes()
    m.ir_version = 1
    assert check_model(to_bytes(m)).ok


def test_known_types_hook():
    """Types supplied by inference feed the type checks, and a contradiction with a declared type is reported."""
    m = catalogue.model(catalogue.graph([catalogue.node("Relu", ["X"], ["T"]), catalogue.node("Sqrt", ["T"], ["Y"])],
                                        [catalogue.vi("X")], [catalogue.vi("Y")]))
    assert check_model(m).ok
    hook = {"T": ir.tensor_type(catalogue.I64, [2])}
    codes = {d.code for d in check_model(m, known_types=hook).errors}
    # Relu: float in, int64 out; Sqrt: int64 in, which it does not admit
    assert codes == {"type-variable-mismatch", "type-constraint-violation"}
    m.graph.value_info.append(catalogue.vi("T", catalogue.F, (3,)))
    hook = {("graph 'main'", "T"): ir.tensor_type(catalogue.F, [2])}
    report = check_model(m, known_types=hook)
    # a stale declaration is a warning; the inference the checker runs on a model without errors sees it too
    assert report.ok and {d.code for d in report.warnings} == {"shape-mismatch", "inferred-shape-mismatch"}


def test_ir_object_and_bytes_agree():
    for case in INVALID:
        if not case.encode or case.files or case.path or case.limits is not catalogue.DEFAULT_LIMITS:
            continue
        obj = case.build()
        if isinstance(obj, bytes) or getattr(obj, "ir_version", 0) <= 0:
            continue
        from onnxkit.api import load

        decoded = load(to_bytes(obj), external_data="never")
        assert check_model(decoded).codes() == check_model(to_bytes(obj)).codes(), case.name


def test_input_forms(tmp_path):
    """An IR model, octets, a str path, a Path and a binary file object all give the same report."""
    m = catalogue.relu_two_inputs()
    data = to_bytes(m)
    p = tmp_path / "m.onnx"
    p.write_bytes(data)
    want = [str(d) for d in check_model(data).diagnostics]
    assert want and [str(d) for d in check_model(m).diagnostics] == want
    assert [str(d) for d in check_model(str(p)).diagnostics] == want
    assert [str(d) for d in check_model(p).diagnostics] == want
    with open(p, "rb") as fh:
        assert [str(d) for d in check_model(fh).diagnostics] == want


def test_unreadable_path_raises(tmp_path):
    from onnxkit.errors import OnnxkitError

    with pytest.raises(OnnxkitError):
        check_model(str(tmp_path / "missing.onnx"))


def test_registry_argument():
    """With a registry that provides no domain, every node's domain is unknown: warnings, no errors."""
    from onnxkit.registry import Registry

    report = check_model(catalogue.relu(), registry=Registry([]))
    assert report.ok and report.codes() == {"unknown-domain"}
