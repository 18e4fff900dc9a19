"""onnxkit.runtime.optimizer.view.copy_node: the view's copy of a node is what attrs' ``evolve``
makes (every field the same object but ``input`` / ``output``, new lists of the same names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from onnxkit import ir, load, records
from onnxkit.runtime.optimizer.view import GraphView, copy_node

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / ".cache" / "corpus"


def _same_as_evolve(n) -> None:
    got = copy_node(n)
    want = records.evolve(n, input=list(n.input), output=list(n.output))
    assert type(got) is type(want) and got == want
    for a in records.fields(type(n)):
        g, w = getattr(got, a.name), getattr(want, a.name)
        if a.name in ("input", "output"):
            assert g == getattr(n, a.name) and g is not getattr(n, a.name), a.name
        else:
            assert g is w is getattr(n, a.name), a.name


def _every_field_set() -> ir.Node:
    wired = load(str(ROOT / "examples" / "digits.onnx")).graph.node[0]   # a decoded node: its wire record set
    return ir.Node(input=["x", "", "w"], output=["y"], name="n", op_type="Op", domain="local", overload="v2",
                   attribute=[ir.Attribute.make("k", 3)], doc_string="doc",
                   metadata_props=[ir.StringStringEntry("a", "b")],
                   device_configurations=[ir.NodeDeviceConfiguration(configuration_id="c")], _wire=wired._wire)


def test_copy_node_is_what_evolve_makes():
    _same_as_evolve(_every_field_set())
    for n in load(str(ROOT / "examples" / "digits.onnx")).graph.node:
        _same_as_evolve(n)
    for name in ("hf_bert_ts", "silero_vad_16k_op15"):
        if (CORPUS / f"{name}.onnx").exists():
            for n in load(str(CORPUS / f"{name}.onnx")).graph.node:
                _same_as_evolve(n)


def test_a_node_subclass_is_copied_by_evolve_and_the_view_copies_every_node():
    tagged = records.define(type("Tagged", (ir.Node,), {}))(op_type="Relu", input=["x"], output=["y"])
    got = copy_node(tagged)
    assert type(got) is type(tagged) and got == tagged and got.input is not tagged.input
    model = load(str(ROOT / "examples" / "digits.onnx"))
    view = GraphView(model)
    assert len(view.node) == len(model.graph.node)
    for copy, node in zip(view.node, model.graph.node):
        assert copy == node and copy is not node and copy.input is not node.input and copy.attribute is node.attribute


@pytest.mark.parametrize("field", ["doc_string", "metadata_props", "device_configurations", "overload", "domain"])
def test_each_field_reaches_its_own_parameter(field):
    n = _every_field_set()
    assert getattr(copy_node(n), field) is getattr(n, field)
