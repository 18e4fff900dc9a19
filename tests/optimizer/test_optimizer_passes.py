"""The optimizer's one pass table (onnxkit.runtime.optimizer.PASSES): every graph and plan pass
with its level, the session's plan passes dispatched from it, and no pass module importing
another module's private names."""

import ast
from pathlib import Path

import pytest

from onnxkit.runtime import optimizer
from onnxkit.runtime.optimizer import PASS_NAMES, PASSES, disabled_passes, passes_on, plan_pass_on

OPTIMIZER = Path(optimizer.__file__).parent


def test_the_table_holds_every_pass_with_its_level_in_order():
    assert [(p.name, p.level, p.works_on) for p in PASSES] == [
        ("identity", 1, "graph"), ("cast", 1, "graph"), ("qdq", 2, "graph"), ("transpose", 1, "graph"), ("reshape", 1, "graph"),
        ("pad_conv", 1, "graph"), ("qpad_conv", 1, "graph"), ("conv_bn", 1, "graph"), ("channel_affine", 1, "graph"),
        ("matmul_add", 1, "graph"), ("gelu", 2, "graph"), ("hardswish", 2, "graph"), ("attention", 2, "graph"),
        ("qlut", 2, "graph"), ("elementwise", 2, "graph"), ("onehot", 2, "plan"), ("epilogue", 2, "plan"), ("specialize", 1, "run")]
    assert len(PASS_NAMES) == 18 and len(set(PASS_NAMES)) == 18


def test_levels_and_disabled_passes_select_from_the_table():
    assert [p.name for p in passes_on("graph", 1)] == ["identity", "cast", "transpose", "reshape", "pad_conv",
                                                        "qpad_conv", "conv_bn", "channel_affine", "matmul_add"]
    assert [p.name for p in passes_on("plan", 2, {"onehot"})] == ["epilogue"]
    assert passes_on("plan", 1) == [] and passes_on("graph", 0) == []
    assert plan_pass_on("specialize", 1) and not plan_pass_on("specialize", 1, {"specialize"})
    assert plan_pass_on("epilogue", 2) and not plan_pass_on("epilogue", 1)
    with pytest.raises(Exception, match="unknown optimizer pass"):
        disabled_passes("gelu,no_such_pass")


def test_plan_passes_run_through_the_table(monkeypatch):
    """The session's plan passes are the table's: one replaced there is the one the session runs."""
    from onnxkit import records
    import numpy as np
    from onnx import TensorProto as TP
    from onnx import helper

    import onnxkit

    seen = []
    table = tuple(records.evolve(p, run=lambda plan, name=p.name: seen.append(name) or 0) if p.works_on == "plan" else p
                  for p in PASSES)
    monkeypatch.setattr(optimizer, "PASSES", table)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TP.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TP.FLOAT, [2])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = onnxkit.InferenceSession(proto.SerializeToString())
    assert seen == ["onehot", "epilogue"]
    assert session.run(None, {"x": np.array([-1.0, 1.0], np.float32)})[0].tolist() == [0.0, 1.0]


def _private_imports(path: Path) -> list:
    """``(module, name)`` for each private name a module takes from another onnxkit module: a
    ``from .module import _name``, or ``Imported._name`` on a name it imported (``Planner._lifetimes``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found, imported = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            found += [(node.module, a.name) for a in node.names if a.name.startswith("_")]
            imported |= {a.asname or a.name for a in node.names}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported \
                and node.attr.startswith("_") and not node.attr.startswith("__"):
            found.append((node.value.id, node.attr))
    return found


def test_no_optimizer_module_imports_a_private_name():
    modules = sorted(OPTIMIZER.glob("*.py"))
    assert len(modules) == 27
    offenders = {p.name: _private_imports(p) for p in modules if _private_imports(p)}
    assert offenders == {}
    session = OPTIMIZER.parent / "session.py"
    assert [found for found in _private_imports(session) if (found[0] or "").startswith("optimizer")] == []


def test_the_check_sees_a_private_name(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from ..plan import Planner\nfrom .conv_bn import _inference_bn\nPlanner._lifetimes([], set())\n")
    assert _private_imports(planted) == [("conv_bn", "_inference_bn"), ("Planner", "_lifetimes")]
