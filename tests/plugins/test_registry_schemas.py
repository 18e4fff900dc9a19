"""Operator sets through the registry: the schema plugins, removing one, the ``opsets`` command,
and the host's schema classes (:mod:`onnxkit.schema`)."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys

import pytest

from onnxkit import hookimpl
from onnxkit.ir import AttributeType
from onnxkit.registry import build_registry
from onnxkit.schema import (
    AttributeDef, FormalParameter, OperatorSet, OpSchema, TypeConstraint, build_operator_sets,
)

SCHEMA_PLUGINS = ["onnxkit-default-domain", "onnxkit-ml"]


@pytest.fixture(scope="module")
def both():
    return build_registry(include=SCHEMA_PLUGINS)


def _schema_faults(reg):
    return [f for f in reg.faults if f.plugin in ("default_domain", "ml_domain", *SCHEMA_PLUGINS)]


# -- through the registry ----------------------------------------------------------------
def test_registry_holds_every_operator_set(both):
    assert _schema_faults(both) == []
    assert both.domains() == {"": list(range(1, 29)), "ai.onnx.ml": [1, 2, 3, 4, 5],
                              "ai.onnx.preview": [1], "ai.onnx.preview.training": [1],
                              "ai.onnxkit": [1, 2, 3, 4]}  # onnxkit's fused operators (the optimizer's targets; 2 adds Attention, 3 LookupTable, 4 Elementwise)
    assert both.provided_by("default_domain")["operator_sets"][:2] == [("", 1), ("", 2)]
    assert len(both.provided_by("ml_domain")["operator_sets"]) == 5


def test_registry_binds(both):
    assert both.bind("", "Relu", 13).key == ("", "Relu", 13)
    assert both.bind("ai.onnx", "Relu", 12).since_version == 6
    up = both.bind("", "Upsample", 13)
    assert up is not None and up.deprecated and up.since_version == 10
    assert both.bind("", "Celu", 11) is None and both.bind("", "Celu", 12).since_version == 12
    assert both.bind("", "Relu", 29) is None
    assert both.bind("ai.onnx.ml", "LabelEncoder", 3).since_version == 2
    assert both.bind("ai.onnx.preview.training", "Adam", 1).since_version == 1


def test_removing_the_ml_plugin():
    reg = build_registry(exclude=["onnxkit-ml"])
    assert "ai.onnx.ml" not in reg.domains()
    assert reg.operator_set("ai.onnx.ml", 3) is None
    assert reg.bind("ai.onnx.ml", "LabelEncoder", 3) is None
    assert all(f.plugin not in ("ml_domain", "onnxkit-ml") for f in reg.faults)
    # ai.onnx is untouched
    assert reg.domains()[""] == list(range(1, 29))
    assert reg.bind("", "Relu", 13).since_version == 13
    assert reg.bind("", "Upsample", 13).deprecated


def test_removing_the_default_domain_plugin_keeps_ml():
    reg = build_registry(include=SCHEMA_PLUGINS, exclude=["default_domain"])
    assert list(reg.domains()) == ["ai.onnx.ml"]
    assert reg.bind("", "Relu", 13) is None
    assert reg.bind("ai.onnx.ml", "TreeEnsemble", 5).since_version == 5


def test_a_second_claim_of_an_operator_set_is_a_fault():
    class Impostor:
        @hookimpl
        def onnxkit_operator_sets(self):
            return [OperatorSet("ai.onnx.ml", 3, {})]

    reg = build_registry(include=[*SCHEMA_PLUGINS, "zz_impostor"], extra=[("zz_impostor", Impostor())])
    assert any(f.plugin == "zz_impostor" and "already provided" in f.message for f in reg.faults)
    assert reg.bind("ai.onnx.ml", "LabelEncoder", 3).since_version == 2


# -- the opsets command ------------------------------------------------------------------
def _run_opsets(reg, *argv):
    from onnxkit.cli import opsets_cmd

    parser = argparse.ArgumentParser()
    opsets_cmd.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["opsets", *argv])
    out, err = io.StringIO(), io.StringIO()
    rc = opsets_cmd.run(args, registry=reg, out=out, err=err)
    return rc, out.getvalue().splitlines(), err.getvalue()


ML_V3 = {
    "ArrayFeatureExtractor": 1, "Binarizer": 1, "CastMap": 1, "CategoryMapper": 1, "DictVectorizer": 1,
    "FeatureVectorizer": 1, "Imputer": 1, "LabelEncoder": 2, "LinearClassifier": 1, "LinearRegressor": 1,
    "Normalizer": 1, "OneHotEncoder": 1, "SVMClassifier": 1, "SVMRegressor": 1, "Scaler": 1,
    "TreeEnsembleClassifier": 3, "TreeEnsembleRegressor": 3, "ZipMap": 1,
}


def test_cli_opsets_ml_3(both):
    rc, lines, err = _run_opsets(both, "--domain", "ai.onnx.ml", "--version", "3")
    assert rc == 0
    rows = [line.split("\t") for line in lines]
    assert all(len(r) == 4 and r[0] == "ai.onnx.ml" and r[3] == "-" for r in rows)
    assert {r[1]: int(r[2]) for r in rows} == ML_V3
    assert [r[1] for r in rows] == sorted(ML_V3)


def test_cli_opsets_deprecated_flag_and_default_domain(both):
    rc, lines, _ = _run_opsets(both, "-d", "ai.onnx", "-v", "13")
    assert rc == 0
    assert "ai.onnx\tUpsample\t10\tdeprecated" in lines and "ai.onnx\tRelu\t13\t-" in lines
    assert len(lines) == len(both.operator_set("", 13))
    rc, lines, _ = _run_opsets(both, "-d", "ai.onnx.ml", "-v", "5")
    assert "ai.onnx.ml\tTreeEnsembleRegressor\t5\tdeprecated" in lines and "ai.onnx.ml\tTreeEnsemble\t5\t-" in lines


def test_cli_opsets_selection(both):
    rc, lines, _ = _run_opsets(both)  # latest of every domain
    assert rc == 0 and {line.split("\t")[0] for line in lines} == {"ai.onnx", "ai.onnx.ml", "ai.onnx.preview",
                                                                    "ai.onnx.preview.training", "ai.onnxkit"}
    assert len(lines) == 203 + 19 + 1 + 4 + 5   # ai.onnxkit 4: Gelu, HardSwish, Attention, LookupTable, Elementwise
    rc, lines, _ = _run_opsets(both, "-v", "5")  # version 5 wherever it exists
    assert rc == 0 and {line.split("\t")[0] for line in lines} == {"ai.onnx", "ai.onnx.ml"}
    rc, lines, _ = _run_opsets(both, "-d", "ai.onnx.ml", "--all")
    assert len(lines) == 18 * 4 + 19
    rc, lines, _ = _run_opsets(both, "-d", "ai.onnx.ml", "-v", "5", "--new")
    assert sorted(line.split("\t")[1] for line in lines) == ["TreeEnsemble", "TreeEnsembleClassifier", "TreeEnsembleRegressor"]


def test_cli_opsets_errors(both):
    rc, lines, err = _run_opsets(both, "-d", "ai.onnx.ml", "-v", "9")
    assert rc == 2 and lines == [] and "no operator set version 9" in err
    rc, lines, err = _run_opsets(both, "-d", "com.example")
    assert rc == 2 and lines == [] and "com.example" in err
    reg = build_registry(include=["onnxkit-default-domain"])
    rc, lines, err = _run_opsets(reg, "--domain", "ai.onnx.ml", "--version", "3")
    assert rc == 2 and "ai.onnx.ml" in err


def test_cli_opsets_console_script():
    env = dict(os.environ, ONNXKIT_PLUGINS="onnxkit-default-domain,onnxkit-ml")
    code = "import sys; from onnxkit.cli import main; sys.exit(main(sys.argv[1:]))"
    r = subprocess.run([sys.executable, "-c", code, "opsets", "--domain", "ai.onnx.ml", "--version", "3"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert {line.split("\t")[1]: int(line.split("\t")[2]) for line in r.stdout.splitlines()} == ML_V3


# -- the schema classes ------------------------------------------------------------------
def _def(name, since, domain="x.test", **kw):
    return OpSchema(domain=domain, name=name, since_version=since, **kw)


def test_build_operator_sets_inventory():
    defs = [_def("A", 1), _def("A", 3, deprecated=True), _def("B", 2), _def("C", 4)]
    sets = {o.version: o for o in build_operator_sets(defs, {"x.test": (1, 5)})}
    assert sorted(sets) == [1, 2, 3, 4, 5]
    assert sets[1].op_types() == ["A"] and sets[1]["A"].since_version == 1
    assert sets[2].op_types() == ["A", "B"]
    assert sets[3]["A"].since_version == 3 and sets[3]["A"].deprecated
    assert sets[5].op_types() == ["A", "B", "C"] and sets[5]["A"].since_version == 3  # deprecation keeps it
    assert [s.name for s in sets[4].introduced()] == ["C"] and sets[5].introduced() == []
    with pytest.raises(ValueError, match="beyond"):
        build_operator_sets(defs, {"x.test": (1, 3)})
    assert [o.version for o in build_operator_sets([], {"y": (1, 2)})] == [1, 2]  # empty sets still exist


def test_operator_set_lazy_and_normalised():
    calls = []

    def factory():
        calls.append(1)
        return {"A": _def("A", 1, domain="")}

    o = OperatorSet("ai.onnx", 2, factory)
    assert o.domain == "" and o.version == 2 and calls == []
    assert o.get("A").name == "A" and len(o) == 1 and [s.name for s in o] == ["A"]
    assert calls == [1]


def test_schema_value_semantics():
    a = _def("A", 1, inputs=(FormalParameter("X", "T"),), type_constraints=(TypeConstraint("T", ("tensor(float)",)),),
             attributes={"k": AttributeDef("k", AttributeType.INTS, False, (1, 2))})
    b = _def("A", 1, inputs=(FormalParameter("X", "T"),), type_constraints=(TypeConstraint("T", ("tensor(float)",)),),
             attributes={"k": AttributeDef("k", AttributeType.INTS, False, (1, 2))})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != _def("A", 1, attributes={"k": AttributeDef("k", AttributeType.INTS, False, (1, 3))})
    assert str(_def("Relu", 14, domain="")) == "ai.onnx::Relu-14"
    attr = a.attributes["k"].default_attribute()
    assert (attr.name, attr.type, attr.value) == ("k", AttributeType.INTS, [1, 2])
    assert AttributeDef("r", AttributeType.INT, True).default_attribute() is None
    assert a.allowed_types(a.inputs[0]) == ("tensor(float)",)
    assert a.input_at(1) is None and not a.has_function and a.function_body is None
