"""The ai.onnx.ml definitions of onnxkit-ml against onnx.defs (test-only onnx).

The field-by-field comparison is the one of the default-domain plugin's tests, loaded by path.
"""

from __future__ import annotations

from importlib import resources
import importlib.util
import json
import math
import os
import subprocess
import sys

import onnx.defs

from onnxkit.ir import AttributeType
from onnxkit.schema import decode_schema_document
from onnxkit_ml import schemas as ml

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = os.path.dirname(os.path.dirname(HERE))
DOMAIN = "ai.onnx.ml"


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_dd_tests = _load("onnxkit_dd_schema_checks", os.path.join(PLUGINS, "default_domain", "tests", "test_schemas.py"))


def _opset(v):
    return next(o for o in ml.operator_sets() if o.version == v)


def test_counts():
    defs = ml.definitions()
    assert all(d.domain == DOMAIN for d in defs)
    assert len(defs) == 25
    assert len({d.name for d in defs}) == 19
    assert ml.schema_data().versions == {DOMAIN: (1, 5)} == {DOMAIN: (1, onnx.defs.onnx_ml_opset_version())}


def test_every_definition_agrees_with_onnx():
    n, problems = _dd_tests.compare_all(ml.definitions(), (DOMAIN,))
    assert n == 25
    assert problems == []


def test_every_inventory_agrees_with_onnx_get_schema():
    opsets = ml.operator_sets()
    assert [(o.domain, o.version) for o in opsets] == [(DOMAIN, v) for v in range(1, 6)]
    assert _dd_tests.check_inventories(opsets, DOMAIN) == []
    assert [len(o) for o in opsets] == [18, 18, 18, 18, 19]


def test_binding():
    assert _opset(1).get("LabelEncoder").since_version == 1
    assert _opset(3).get("LabelEncoder").since_version == 2
    assert _opset(4).get("LabelEncoder").since_version == 4
    assert _opset(2).get("TreeEnsembleRegressor").since_version == 1
    assert _opset(3).get("TreeEnsembleRegressor").since_version == 3
    assert "TreeEnsemble" not in _opset(4) and _opset(5).get("TreeEnsemble").since_version == 5


def test_deprecated_tree_ensembles_stay_at_5():
    for op in ("TreeEnsembleClassifier", "TreeEnsembleRegressor"):
        s = _opset(5).get(op)
        assert s is not None and s.deprecated and s.since_version == 5
        assert not _opset(4).get(op).deprecated


def test_defaults():
    le = _opset(4).get("LabelEncoder")
    assert le.attributes["default_string"].default_value == b"_Unused"
    assert le.attributes["default_int64"].default_value == -1
    default_float = le.attributes["default_float"]
    assert default_float.type == AttributeType.FLOAT and math.copysign(1.0, default_float.default_value) == -1.0  # -0.0
    assert le.attributes["keys_tensor"].type == AttributeType.TENSOR and le.attributes["keys_tensor"].default_value is None
    binar = _opset(1).get("Binarizer")
    assert binar.attributes["threshold"].default_value == 0.0 and isinstance(binar.attributes["threshold"].default_value, float)
    assert not any(d.has_function or d.has_context_dependent_function for d in ml.definitions())


def test_data_file_is_up_to_date():
    common = _load("schema_gen_common_ml_t", os.path.join(PLUGINS, "default_domain", "tools", "schema_gen_common.py"))
    raw = (resources.files("onnxkit_ml") / "schemas_data.json.gz").read_bytes()
    assert decode_schema_document(raw) == common.build_document([DOMAIN]), \
        "schemas_data.json.gz is stale: run plugins/ml_domain/tools/generate_schemas.py"


def test_runtime_does_not_import_onnx():
    code = ("import sys, onnxkit_ml.plugin as p\n"
            "sets = list(p.onnxkit_operator_sets())\n"
            "assert [s.version for s in sets] == [1, 2, 3, 4, 5], sets\n"
            "bad = [m for m in sys.modules if m == 'onnx' or m.startswith(('onnx.', 'onnxruntime', 'google.protobuf'))]\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
