"""The ai.onnx / preview definitions of onnxkit-default-domain against onnx.defs (test-only onnx).

Every definition is compared field by field with ``onnx.defs.get_all_schemas_with_history()``;
every operator set's inventory with ``onnx.defs.get_schema(name, version, domain)``.
``compare_definition`` is also used by the ml plugin's tests.
"""

from __future__ import annotations

from importlib import resources
import importlib.util
import json
import math
import os
import subprocess
import sys

import onnx
import onnx.defs
import onnx.helper
import pytest

from onnxkit.ir import AttributeType
from onnxkit.schema import UNBOUNDED, OperatorSet, OpSchema, decode_schema_document, load_schema_data
from onnxkit_default_domain import schemas as dd

DOMAINS = ("", "ai.onnx.preview.training", "ai.onnx.preview")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_OPTION = {"Single": "single", "Optional": "optional", "Variadic": "variadic"}


def _onnx_defs(domains):
    return [s for s in onnx.defs.get_all_schemas_with_history() if s.domain in domains]


def _strip_docs(msg):
    """Independent of the generator: clear doc_string everywhere in a protobuf message."""
    for field, value in list(msg.ListFields()):
        if field.name == "doc_string":
            msg.ClearField("doc_string")
        elif field.type == field.TYPE_MESSAGE:
            for v in (value if field.is_repeated else [value]):
                _strip_docs(v)
    return msg


def _same_float(a, b) -> bool:
    """Equal including the sign of zero, or both NaN."""
    return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (math.isnan(a) and math.isnan(b))


def _default_matches(mine, attr_proto) -> bool:
    want = onnx.helper.get_attribute_value(attr_proto)
    t = attr_proto.type
    if t == onnx.AttributeProto.FLOAT:
        return isinstance(mine, float) and _same_float(mine, want)
    if t == onnx.AttributeProto.FLOATS:
        return len(mine) == len(want) and all(isinstance(a, float) and _same_float(a, b) for a, b in zip(mine, want))
    if t == onnx.AttributeProto.INT:
        return type(mine) is int and mine == want
    if t == onnx.AttributeProto.INTS:
        return list(mine) == list(want) and all(type(v) is int for v in mine)
    if t == onnx.AttributeProto.STRING:
        return isinstance(mine, bytes) and mine == want
    if t == onnx.AttributeProto.STRINGS:
        return list(mine) == list(want) and all(isinstance(v, bytes) for v in mine)
    raise AssertionError(f"no test for a default of attribute type {t}")


def compare_definition(mine: OpSchema, theirs) -> list:
    """Differences between one onnxkit definition and the onnx.defs one (empty when they agree)."""
    out = []
    where = f"{theirs.domain or 'ai.onnx'}::{theirs.name}-{theirs.since_version}"

    def check(cond, what):
        if not cond:
            out.append(f"{where}: {what}")

    check(mine.key == (theirs.domain, theirs.name, theirs.since_version), f"key {mine.key}")
    check(mine.deprecated == theirs.deprecated, f"deprecated {mine.deprecated}")
    check(mine.support_level == theirs.support_level.name.lower(), f"support_level {mine.support_level}")
    for kind in ("inputs", "outputs"):
        a, b = getattr(mine, kind), getattr(theirs, kind)
        check(len(a) == len(b), f"{len(a)} {kind}, onnx has {len(b)}")
        for p, q in zip(a, b):
            check((p.name, p.type_str, p.option, p.is_homogeneous, p.min_arity)
                  == (q.name, q.type_str, _OPTION[q.option.name], q.is_homogeneous, q.min_arity),
                  f"{kind[:-1]} {p} vs {q.name} {q.type_str} {q.option.name} {q.is_homogeneous} {q.min_arity}")
    check((mine.min_input, mine.max_input, mine.min_output, mine.max_output)
          == (theirs.min_input, theirs.max_input, theirs.min_output, theirs.max_output), "input/output counts")
    check(set(mine.attributes) == set(theirs.attributes), f"attributes {sorted(mine.attributes)} vs {sorted(theirs.attributes)}")
    for name, q in theirs.attributes.items():
        a = mine.attributes.get(name)
        if a is None:
            continue
        check(isinstance(a.type, AttributeType) and int(a.type) == int(q.type.value), f"attribute {name} type {a.type}")
        check(a.required == q.required, f"attribute {name} required {a.required}")
        dv = q.default_value
        if dv.type == onnx.AttributeProto.UNDEFINED and not dv.name:
            check(a.default_value is None and not a.has_default, f"attribute {name} has default {a.default_value!r}, onnx none")
        else:
            check(a.has_default and _default_matches(a.default_value, dv),
                  f"attribute {name} default {a.default_value!r} vs {onnx.helper.get_attribute_value(dv)!r}")
    check([(t.type_param, t.allowed_types) for t in mine.type_constraints]
          == [(t.type_param_str, tuple(t.allowed_type_strs)) for t in theirs.type_constraints], "type constraints")
    check(mine.has_function == theirs.has_function, f"has_function {mine.has_function}")
    check(mine.function_opset_versions == tuple(theirs.function_opset_versions),
          f"function versions {mine.function_opset_versions} vs {list(theirs.function_opset_versions)}")
    for v in theirs.function_opset_versions:
        want = _strip_docs(onnx.FunctionProto.FromString(theirs.get_function_with_opset_version(v)))
        got = mine.function_body_bytes(v)
        check(got is not None and onnx.FunctionProto.FromString(got) == want, f"function body at {v}")
    check(mine.has_context_dependent_function == theirs.has_context_dependent_function, "context-dependent flag")
    check(mine.context_dependent_function_versions == tuple(theirs.context_dependent_function_opset_versions),
          "context-dependent versions")
    return out


def compare_all(definitions, domains) -> tuple:
    """(number compared, differences) of every onnx definition of ``domains`` against ``definitions``."""
    mine = {d.key: d for d in definitions}
    theirs = _onnx_defs(domains)
    problems = []
    for s in theirs:
        d = mine.pop((s.domain, s.name, s.since_version), None)
        if d is None:
            problems.append(f"missing {s.domain}::{s.name}-{s.since_version}")
        else:
            problems.extend(compare_definition(d, s))
    problems.extend(f"not in onnx: {k}" for k in mine)
    return len(theirs), problems


def check_inventories(opsets, domain) -> list:
    """Each operator set of ``domain`` against ``onnx.defs.get_schema(name, version, domain)``."""
    names = {s.name for s in _onnx_defs((domain,))}
    problems = []
    for opset in opsets:
        if opset.domain != domain:
            continue
        for name in names:
            try:
                want = onnx.defs.get_schema(name, opset.version, domain).since_version
            except onnx.defs.SchemaError:
                want = None
            got = opset.get(name)
            if (got.since_version if got is not None else None) != want:
                problems.append(f"{domain or 'ai.onnx'} v{opset.version} {name}: {got and got.since_version} vs {want}")
        if set(opset.op_types()) - names:
            problems.append(f"v{opset.version} has unknown ops {set(opset.op_types()) - names}")
    return problems


# -- the counts -------------------------------------------------------------------------
def test_counts_of_ai_onnx():
    defs = [d for d in dd.definitions() if d.domain == ""]
    assert len(defs) == 629
    assert len({d.name for d in defs}) == 203
    assert dd.schema_data().versions == {"": (1, 28), "ai.onnx.preview.training": (1, 1), "ai.onnx.preview": (1, 1)}
    assert (1, onnx.defs.onnx_opset_version()) == dd.schema_data().versions[""]


def test_preview_domains():
    by_domain = {}
    for d in dd.definitions():
        by_domain.setdefault(d.domain, set()).add(d.name)
    assert by_domain["ai.onnx.preview.training"] == {"Adagrad", "Momentum", "Adam", "Gradient"}
    assert by_domain["ai.onnx.preview"] == {"FlexAttention"}


# -- every definition agrees with onnx.defs ----------------------------------------------
def test_every_definition_agrees_with_onnx():
    n, problems = compare_all(dd.definitions(), DOMAINS)
    assert n == 629 + 4 + 1
    assert problems == []


def test_comparison_detects_a_difference():
    relu = next(d for d in dd.definitions() if d.key == ("", "Relu", 14))
    conv = next(d for d in dd.definitions() if d.key == ("", "Conv", 11))
    onnx_relu, onnx_conv = onnx.defs.get_schema("Relu", 14), onnx.defs.get_schema("Conv", 11)
    assert compare_definition(relu, onnx_relu) == []
    from onnxkit import records

    assert compare_definition(records.evolve(relu, deprecated=True), onnx_relu)
    assert compare_definition(records.evolve(relu, type_constraints=()), onnx_relu)
    assert compare_definition(records.evolve(relu, function_bodies=()), onnx_relu)
    wrong = dict(conv.attributes)
    wrong["auto_pad"] = records.evolve(wrong["auto_pad"], default_value=b"VALID")
    assert compare_definition(records.evolve(conv, attributes=wrong), onnx_conv)


def test_attribute_defaults_are_typed_values():
    conv = next(d for d in dd.definitions() if d.key == ("", "Conv", 11))
    assert conv.attributes["auto_pad"].default_value == b"NOTSET"
    assert conv.attributes["group"].default_value == 1 and conv.attributes["group"].type == AttributeType.INT
    assert conv.attributes["kernel_shape"].default_value is None
    a = conv.attributes["auto_pad"].default_attribute()
    assert (a.name, a.type, a.value) == ("auto_pad", AttributeType.STRING, b"NOTSET")
    leaky = next(d for d in dd.definitions() if d.key == ("", "LeakyRelu", 16))
    assert leaky.attributes["alpha"].default_value == pytest.approx(0.01)
    assert leaky.attributes["alpha"].default_value == onnx.defs.get_schema("LeakyRelu", 16).attributes["alpha"].default_value.f


# -- inventories and binding (Clause 5.3.2, 14.3, 14.5) -----------------------------------
def test_every_inventory_agrees_with_onnx_get_schema():
    opsets = dd.operator_sets()
    assert sorted((o.domain, o.version) for o in opsets) == sorted(
        [("", v) for v in range(1, 29)] + [("ai.onnx.preview.training", 1), ("ai.onnx.preview", 1)])
    for domain in DOMAINS:
        assert check_inventories(opsets, domain) == []


def _opset(v, domain=""):
    return next(o for o in dd.operator_sets() if o.domain == domain and o.version == v)


def test_binding_greatest_since_version():
    assert _opset(13).get("Relu").since_version == 13
    assert _opset(12).get("Relu").since_version == 6
    assert _opset(14).get("Relu").since_version == 14
    assert _opset(28).get("Relu").since_version == 14
    assert _opset(1).get("Relu").since_version == 1


def test_deprecated_operators_stay():
    for v in range(10, 29):
        up = _opset(v).get("Upsample")
        assert up is not None and up.deprecated and up.since_version == 10, v
    assert not _opset(9).get("Upsample").deprecated
    assert _opset(28).get("Scatter").deprecated and _opset(28).get("Scatter").since_version == 11
    assert _opset(18).get("GroupNormalization").deprecated
    assert not _opset(21).get("GroupNormalization").deprecated


def test_later_operators_are_absent_earlier():
    # onnx 1.23.2 introduces no new operator at ai.onnx 13; 12 and 28 do.
    introduced_12 = {"Celu", "Einsum", "GreaterOrEqual", "LessOrEqual", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}
    for op in introduced_12:
        assert op not in _opset(11) and _opset(11).get(op) is None
        assert _opset(12).get(op).since_version == 12 and _opset(13).get(op) is not None
    assert {s.name for s in _opset(13)} == {s.name for s in _opset(12)}
    assert "SwiGLU" not in _opset(27) and _opset(28).get("SwiGLU").since_version == 28
    assert len(_opset(1)) == 95 and len(_opset(28)) == 203


def test_operator_set_protocol():
    o = _opset(13)
    assert isinstance(o, OperatorSet) and (o.domain, o.version) == ("", 13)
    schemas = list(o)
    assert len(schemas) == len(o) and all(isinstance(s, OpSchema) for s in schemas)
    assert [s.name for s in schemas] == sorted(s.name for s in schemas) == o.op_types()
    assert all(s.since_version <= 13 for s in schemas)
    assert o.get("NoSuchOp") is None and "NoSuchOp" not in o
    assert {s.name for s in o.introduced()} == {n for n in o.op_types() if o[n].since_version == 13}
    assert "Relu" in {s.name for s in o.introduced()} and "Upsample" not in {s.name for s in o.introduced()}


def test_signature_helpers():
    concat = _opset(13).get("Concat")
    assert concat.max_input == UNBOUNDED and concat.inputs[0].is_variadic
    assert concat.input_at(0) is concat.input_at(7) is concat.inputs[0]
    clip = _opset(13).get("Clip")
    assert clip.inputs[1].is_optional and clip.input_at(3) is None
    assert clip.allowed_types(clip.inputs[0]) == tuple(onnx.defs.get_schema("Clip", 13).type_constraints[0].allowed_type_strs)
    shape = _opset(15).get("Shape")
    assert shape.allowed_types(shape.outputs[0]) == ("tensor(int64)",)


# -- function bodies (Clause 8.4) ---------------------------------------------------------
def test_function_body_selection_follows_onnx():
    for s in _onnx_defs(DOMAINS):
        if not s.has_function:
            continue
        mine = next(d for d in dd.definitions() if d.key == (s.domain, s.name, s.since_version))
        for v in range(1, 30):
            want = s.get_function_with_opset_version(v)
            got = mine.function_body_bytes(v)
            assert (got is None) == (not want), (s.name, v)


def test_function_bodies_decode_to_ir():
    pytest.importorskip("onnxkit.wire", reason="onnxkit.wire (the codec) is not written yet")
    from onnxkit.ir import Function

    n = 0
    for s in _onnx_defs(DOMAINS):
        if not s.has_function:
            continue
        mine = next(d for d in dd.definitions() if d.key == (s.domain, s.name, s.since_version))
        for v in s.function_opset_versions:
            want = onnx.FunctionProto.FromString(s.get_function_with_opset_version(v))
            fn = mine.function_body_for(v)
            assert isinstance(fn, Function)
            assert (fn.name, fn.domain, list(fn.input), list(fn.output)) == (want.name, want.domain, list(want.input), list(want.output))
            assert [nd.op_type for nd in fn.node] == [nd.op_type for nd in want.node]
            assert [(o.domain, o.version) for o in fn.opset_import] == [(o.domain, o.version) for o in want.opset_import]
            assert fn.doc_string == ""
            assert mine.function_body_for(v) is fn  # decoded once
            n += 1
    assert n == 43
    relu = next(d for d in dd.definitions() if d.key == ("", "Relu", 14))
    assert relu.function_body_for(17) is None and relu.function_body_for(18) is relu.function_body
    mvn = next(d for d in dd.definitions() if d.key == ("", "MeanVarianceNormalization", 13))
    assert [o.version for o in mvn.function_body_for(17).opset_import] == [13]
    assert [o.version for o in mvn.function_body.opset_import] == [18]


def test_context_dependent_functions_are_flagged_only():
    ctx = [d for d in dd.definitions() if d.has_context_dependent_function]
    assert len(ctx) == sum(1 for s in _onnx_defs(DOMAINS) if s.has_context_dependent_function) == 34
    assert any(d.key == ("", "SoftmaxCrossEntropyLoss", 13) for d in ctx)


# -- the data file ------------------------------------------------------------------------
def _generator_common():
    spec = importlib.util.spec_from_file_location("schema_gen_common_t", os.path.join(ROOT, "tools", "schema_gen_common.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_data_file_is_up_to_date():
    raw = (resources.files("onnxkit_default_domain") / "schemas_data.json.gz").read_bytes()
    assert decode_schema_document(raw) == _generator_common().build_document(list(DOMAINS)), \
        "schemas_data.json.gz is stale: run plugins/default_domain/tools/generate_schemas.py"


def test_the_packaged_schema_data_loads_whole():
    """Every operator set and definition is in the packaged data (how fast it loads is a
    benchmark's question, not a test's: ``python benchmarks/load.py``)."""
    raw = (resources.files("onnxkit_default_domain") / "schemas_data.json.gz").read_bytes()
    data = load_schema_data(raw)
    assert len(data.operator_sets()) == 30 and len(data.definitions) == 634


def test_definitions_are_built_when_asked_for():
    """Reading the data builds no definition; an operator set builds the ones looked up, once,
    and the same object each time; ``definitions`` builds them all (what a session reads of the
    634 is a few dozen: the cold-start benchmark's ``plugins`` phase)."""
    raw = (resources.files("onnxkit_default_domain") / "schemas_data.json.gz").read_bytes()
    data = load_schema_data(raw)
    assert data._made == {} and len(data.keys) == 634 and ("", "Conv", 22) in data.keys
    latest = next(s for s in data.operator_sets() if s.domain == "" and s.version == 22)
    assert "Conv" in latest and "NoSuchOp" not in latest and data._made == {}
    conv = latest["Conv"]
    assert conv.key == ("", "Conv", 22) and latest.get("Conv") is conv and list(data._made) == [("", "Conv", 22)]
    assert len(latest) == len(list(latest)) and len(data._made) == len(latest)
    assert len(data.definitions) == 634 and data.definition(("", "Conv", 22)) is conv


def test_a_bad_row_fails_when_its_definition_is_built():
    row = {"domain": "", "name": "Bad", "since_version": 1, "inputs": [["X", "T", "single", True, 1]],
           "min_input": 3, "max_input": 1}
    data = load_schema_data(json.dumps({"format": "onnxkit-schemas/1", "domains": {"": [1, 1]},
                                        "definitions": [row]}).encode())
    (opset,) = data.operator_sets()
    assert "Bad" in opset
    with pytest.raises(ValueError, match="Bad-1: min_input 3 and max_input 1"):
        opset.get("Bad")


def test_bad_data_is_refused():
    with pytest.raises(ValueError, match="format"):
        load_schema_data(json.dumps({"format": "other", "domains": {}, "definitions": []}).encode())


def test_runtime_does_not_import_onnx():
    code = ("import sys, onnxkit_default_domain.plugin as p\n"
            "sets = list(p.onnxkit_operator_sets())\n"
            "assert len(sets) == 34, len(sets)\n"  # ai.onnx 1..28, the two preview sets, ai.onnxkit 1..4
            "bad = [m for m in sys.modules if m == 'onnx' or m.startswith(('onnx.', 'onnxruntime', 'google.protobuf'))]\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_schema_data_format_2_decodes_only_what_is_looked_up_and_format_1_still_reads():
    """Format /2 (a header line of keys, a definition per line) is what the generator writes; a
    definition's line is decoded when it is first looked up.  A plugin's data in format /1 (one
    JSON document, as earlier generators wrote it, compact or pretty) reads the same."""
    from onnxkit.schema import DATA_FORMAT, encode_schema_document

    raw = (resources.files("onnxkit_default_domain") / "schemas_data.json.gz").read_bytes()
    doc = decode_schema_document(raw)
    assert doc["format"] == DATA_FORMAT == "onnxkit-schemas/2" and len(doc["definitions"]) == 634
    data = load_schema_data(raw)
    assert all(isinstance(row, bytes) for row in data._rows.values())
    conv = data.definition(("", "Conv", 22))
    assert isinstance(data._rows[("", "Conv", 22)], bytes) and conv.name == "Conv" and len(data._made) == 1
    assert encode_schema_document(doc).count(b"\n") == 635
    old = dict(doc, format="onnxkit-schemas/1")
    for text in (json.dumps(old), json.dumps(old, indent=1)):
        one = load_schema_data(text.encode())
        assert one.keys == data.keys and one.versions == data.versions
        assert one.definition(("", "Conv", 22)).inputs == conv.inputs
        assert decode_schema_document(text.encode()) == old
    with pytest.raises(ValueError, match="format 'onnxkit-schemas/9'"):
        load_schema_data(json.dumps(dict(old, format="onnxkit-schemas/9")).encode())
    header, _, rest = encode_schema_document(doc).partition(b"\n")
    with pytest.raises(ValueError, match="lists 634 keys but holds 633"):
        load_schema_data(header + b"\n" + rest.split(b"\n", 1)[1])
