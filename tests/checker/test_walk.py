"""onnxkit.checker.walk against a plain recursive walk of the same rules, on every catalogue model.

The rules (the module's docstring): every IR object (record class) under the root, depth-first
in field order, each graph object once; fields named in ``_SKIP`` and fields whose default is a
scalar or an array are not walked; a list is walked where its first or last item is an IR object,
and then each of its IR items; children of the model other than its graph and functions are
located under ``model``.  Each entry is compared by identity (object, parent), field and rendered
location, on the catalogue's models as built in Python and as decoded from their octets.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from catalogue import INVALID, VALID  # noqa: E402

from onnxkit import ir, records  # noqa: E402
from onnxkit.api import to_bytes  # noqa: E402
from onnxkit.checker.walk import label, walk  # noqa: E402
from onnxkit.wire import decode_message  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SKIP = {"_wire", "_outer_wire", "base_dir", "external_options", "_decoded"}
SCALAR_DEFAULTS = (str, bytes, int, float, np.ndarray)


def _render(base, segment: str) -> str:
    base = str(base) if base is not None else ""
    return f"{base} / {segment}" if base and segment else (base or segment)


def reference_walk(root, root_location: str = "") -> list:
    """``(obj, rendered location, parent, field)`` of every IR object, recursively."""
    out, graphs = [], set()

    def visit(obj, loc, parent, field):
        if isinstance(obj, ir.Graph):
            if id(obj) in graphs:
                return
            graphs.add(id(obj))
        out.append((obj, loc, parent, field))
        if not records.has(type(obj)):
            return
        for a in records.fields(type(obj)):
            if a.name in SKIP or isinstance(a.default, SCALAR_DEFAULTS):
                continue
            v = getattr(obj, a.name)
            base = "model" if isinstance(obj, ir.Model) and a.name not in ("graph", "functions") else loc
            if isinstance(v, list):
                if not v or not (records.has(type(v[0])) or records.has(type(v[-1]))):
                    continue
                for i, item in enumerate(v):
                    if records.has(type(item)):
                        visit(item, _render(base, label(obj, a.name, i, item)), obj, a.name)
            elif v is not None and records.has(type(v)):
                visit(v, _render(base, label(obj, a.name, None, v)), obj, a.name)

    visit(root, root_location, None, "")
    return out


def _same(model) -> int:
    got = walk(model)
    want = reference_walk(model)
    assert len(got) == len(want)
    for (o, loc, p, f), (ro, rloc, rp, rf) in zip(got, want):
        assert o is ro and p is rp and f == rf and str(loc) == str(rloc), (type(o).__name__, str(loc), str(rloc))
    return len(got)


def _models():
    for case in (*VALID, *INVALID):
        try:
            built = case.build()
        except Exception:  # noqa: BLE001 (a case whose builder needs files or a registry of its own)
            continue
        if isinstance(built, ir.Model):
            yield case.name, built


MODELS = list(_models())


@pytest.mark.parametrize("name,model", MODELS, ids=[n for n, _ in MODELS])
def test_walk_visits_what_the_rules_say_built_and_decoded(name, model):
    _same(model)
    try:
        decoded = decode_message(to_bytes(model), "ModelProto")
    except Exception:  # noqa: BLE001 (a case the writer refuses: its fault is in the IR object itself)
        return
    _same(decoded)


def test_walk_of_the_example_and_of_a_model_with_every_kind_of_child():
    """The example; and a model holding subgraphs (If), a function, a sparse initializer, a
    training graph, metadata and typed value infos: each object once, located as the rules say."""
    from onnxkit import load

    assert _same(load(str(ROOT / "examples" / "digits.onnx"))) > 10
    f32 = ir.tensor_type(1, [2])
    relu = ir.Graph(node=[ir.Node(input=["x"], output=["y"], op_type="Relu")], name="branch",
                    output=[ir.ValueInfo("y", f32)])
    node = ir.Node(input=["c"], output=["y"], op_type="If",
                   attribute=[ir.Attribute.make("then_branch", relu), ir.Attribute.make("else_branch", relu)])
    sparse = ir.SparseTensor(values=ir.Tensor.from_numpy(np.ones(2, np.float32), name="s"),
                             indices=ir.Tensor.from_numpy(np.array([0, 3], np.int64)), dims=[4])
    g = ir.Graph(node=[node], name="main", input=[ir.ValueInfo("c", ir.tensor_type(9, []))],
                 output=[ir.ValueInfo("y", f32)], sparse_initializer=[sparse],
                 value_info=[ir.ValueInfo("z", ir.SequenceType(f32))],
                 metadata_props=[ir.StringStringEntry("k", "v")])
    fn = ir.Function(name="F", domain="local", node=[ir.Node(op_type="Relu", input=["a"], output=["b"])],
                     input=["a"], output=["b"], opset_import=[ir.OperatorSetId("", 17)])
    model = ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 17)], graph=g, functions=[fn],
                     training_info=[ir.TrainingInfo(initialization=relu)],
                     metadata_props=[ir.StringStringEntry("a", "b")])
    walked = walk(model)
    assert _same(model) == len(walked)
    kinds = {type(o).__name__ for o, *_ in walked}
    assert {"Function", "SparseTensor", "TrainingInfo", "StringStringEntry", "SequenceType", "Attribute"} <= kinds
    assert sum(o is relu for o, *_ in walked) == 1    # a graph met again is visited once
