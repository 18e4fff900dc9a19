"""``onnxkit unsupported MODEL``: every problem of a model without running it (Clause 4.4), external
data never read, a missing external file one problem; exit status and ``--format json``."""

from __future__ import annotations

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit.cli import main  # noqa: E402
from onnxkit.cli.unsupported_cmd import problems  # noqa: E402

F = TensorProto.FLOAT


def _vi(name, shape, elem=F):
    return helper.make_tensor_value_info(name, elem, shape)


def _save(path, nodes, inputs, outputs, inits=(), opset=16, external=False):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if external:
        onnx.save(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="weights.bin",
                  size_threshold=0)
    else:
        onnx.save(m, str(path))
    return path


def _everything_wrong(tmp_path):
    """A model with a problem of each kind; its external file deleted."""
    w = numpy_helper.from_array(np.ones((3, 3), np.float32), "w")
    v = numpy_helper.from_array(np.ones((3,), np.float32), "v")
    nodes = [
        helper.make_node("Add", ["m", "v"], ["a"], name="late"),                                 # out of order
        helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        helper.make_node("FastGelu", ["a"], ["g"], domain="com.microsoft", name="gelu"),         # implicit import
        helper.make_node("Foo", ["g"], ["f"], domain="com.acme", name="foo"),                    # not imported
        helper.make_node("ScatterElements", ["x", "i", "x"], ["s"], reduction="max", name="sc"),  # beyond 16
        helper.make_node("Sin", ["n"], ["y"], name="sin"),                                       # int32: no type
    ]
    ins = [_vi("x", [3, 3]), _vi("i", [3, 3], TensorProto.INT64), _vi("n", [3], TensorProto.INT32)]
    outs = [_vi("f", [3, 3]), _vi("s", [3, 3]), _vi("y", [3], TensorProto.INT32)]
    path = _save(tmp_path / "m.onnx", nodes, ins, outs, [w, v], external=True)
    (tmp_path / "weights.bin").unlink()
    return path


def test_every_problem_is_listed_and_the_missing_file_once(tmp_path, capsys):
    path = _everything_wrong(tmp_path)
    assert main(["unsupported", str(path), "--backend", "cpu,gpu"]) == 1
    text = capsys.readouterr().out
    for code in ("not-topologically-sorted", "domain-implicitly-imported", "domain-not-imported",
                 "attribute-value-beyond-definition", "type-constraint-violation"):
        assert f"[{code}, Clause" in text, code
    assert "node 2 'gelu' (com.microsoft::FastGelu)" in text and "node 4 'sc' (ScatterElements)" in text
    for backend in ("cpu", "gpu"):
        assert f"unsupported operator(s) on {backend}:" in text
    assert "com.acme" in text and "Foo" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("external data file")]
    assert lines == ["external data file 'weights.bin' (2 tensor(s): 'w', 'v'): no such file in "
                     f"{tmp_path} (Clause 13.2)"]


def test_the_json_form_says_the_same(tmp_path, capsys):
    path = _everything_wrong(tmp_path)
    assert main(["unsupported", str(path), "--format", "json", "--backend", "all"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"] == str(path) and doc["ok"] is False
    assert set(doc["backends"]) == {"cpu", "gpu"}
    assert [(r["domain"], r["op_type"]) for r in doc["backends"]["cpu"]["unsupported"]] == [("com.acme", "Foo")]
    codes = {d["code"] for d in doc["checker"]["diagnostics"]}
    assert {"domain-implicitly-imported", "attribute-value-beyond-definition", "domain-not-imported"} <= codes
    assert doc["checker"]["errors"] == sum(d["severity"] == "error" for d in doc["checker"]["diagnostics"])
    assert doc["external_data"] == [{"location": "weights.bin", "tensors": ["w", "v"],
                                     "problem": f"no such file in {tmp_path} (Clause 13.2)"}]


def test_external_data_is_never_read(tmp_path, monkeypatch):
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    shape = numpy_helper.from_array(np.array([3, 4], np.int64), "shape")  # a constant a kernel reads at planning
    nodes = [helper.make_node("Reshape", ["w", "shape"], ["r"]), helper.make_node("MatMul", ["x", "r"], ["y"])]
    path = _save(tmp_path / "m.onnx", nodes, [_vi("x", [2, 3])], [_vi("y", [2, 4])], [w, shape], external=True)

    from onnxkit.storage import LocalFileStorage

    opened = []
    real = LocalFileStorage.open

    def watched(self, base, location, **kw):
        opened.append(location)
        return real(self, base, location, **kw)

    monkeypatch.setattr(LocalFileStorage, "open", watched)
    found = problems(str(path), ("cpu", "gpu"))
    assert found["ok"] and found["external_data"] == [] and not found["checker"]["diagnostics"]
    assert all(not b["unsupported"] and b["stopped"] is None for b in found["backends"].values())
    assert opened == []
    onnxkit.InferenceSession(str(path)).run(None, {"x": np.ones((2, 3), np.float32)})
    assert set(opened) == {"weights.bin"}  # the watch sees a session read it


def test_a_short_external_file_is_a_problem(tmp_path, capsys):
    w = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
    path = _save(tmp_path / "m.onnx", [helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", [1, 8])],
                 [_vi("y", [1, 8])], [w], external=True)
    (tmp_path / "weights.bin").write_bytes(b"\0" * 100)
    assert main(["unsupported", str(path)]) == 1
    assert "external data file 'weights.bin' (1 tensor(s): 'w'): 100 octets, shorter than the 256" in \
        capsys.readouterr().out


def _warnings_only(tmp_path):
    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([2.0], np.float32), "vals"),
                                   numpy_helper.from_array(np.array([1], np.int64), "idx"), [3])
    const = helper.make_node("Constant", [], ["c"], name="k")
    const.attribute.append(helper.make_attribute("value", sp))
    nodes = [const, helper.make_node("FastGelu", ["x"], ["g"], domain="com.microsoft"),
             helper.make_node("Add", ["g", "c"], ["y"])]
    return _save(tmp_path / "w.onnx", nodes, [_vi("x", [3])], [_vi("y", [3])], opset=17)


def test_warnings_alone_exit_0_and_strict_exits_1(tmp_path, capsys):
    path = _warnings_only(tmp_path)
    assert main(["unsupported", str(path)]) == 0
    text = capsys.readouterr().out
    assert "2 finding(s) of the checker" in text and "every operator of" in text
    assert "[attribute-form-accepted, Clause 7.3.1]" in text and "[domain-implicitly-imported, Clause 5.3.2]" in text
    assert main(["unsupported", str(path), "--strict"]) == 1
    capsys.readouterr()
    # what it lists as runnable runs, equal to onnxruntime (the oracle)
    ort = pytest.importorskip("onnxruntime")
    x = {"x": np.array([-1, 0.5, 2], np.float32)}
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, x)[0]
    with pytest.warns(onnxkit.ConformanceWarning):
        got = onnxkit.InferenceSession(str(path)).run(None, x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_an_unknown_backend_is_a_usage_error(tmp_path, capsys):
    path = _warnings_only(tmp_path)
    assert main(["unsupported", str(path), "--backend", "cpu,tpu"]) == 2
    assert "no backend 'tpu'" in capsys.readouterr().err


def test_a_subgraphs_missing_external_file_stops_planning_and_is_listed(tmp_path, capsys):
    w = numpy_helper.from_array(np.ones((2,), np.float32), "w")
    then_g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["r"])], "then", [], [_vi("r", [2])], [w])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["r"])], "else", [], [_vi("r", [2])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)
    path = _save(tmp_path / "m.onnx", [node], [_vi("x", [2]), _vi("c", [], TensorProto.BOOL)], [_vi("y", [2])],
                 external=True)
    (tmp_path / "weights.bin").unlink()
    assert main(["unsupported", str(path)]) == 1
    text = capsys.readouterr().out
    assert "planning on cpu stopped: external data of tensor 'w'" in text and "Traceback" not in text
    assert text.count("external data file 'weights.bin' (1 tensor(s): 'w'): no such file") == 1
