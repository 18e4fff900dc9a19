"""The behaviours onnxkit chose where Part 1 leaves them open (``onnxkit.positions``).

Each test pins one row of :data:`onnxkit.positions.POSITIONS` with hand-written expectations,
so changing the behaviour fails here and the conformance statement has to change with it.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit import ir  # noqa: E402
from onnxkit.checker.types import contradiction  # noqa: E402
from onnxkit.errors import EvaluationError, ExternalDataError, LimitExceeded  # noqa: E402
from onnxkit.positions import POSITIONS  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _model(nodes, inputs, outputs, opset=21, initializers=()):
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 10
    return m.SerializeToString()


def _vi(name, elem=T.FLOAT, shape=None):
    return h.make_tensor_value_info(name, elem, shape)


def test_every_position_names_a_test_that_exists():
    here = ast.parse(Path(__file__).read_text())
    defined = {n.name for n in here.body if isinstance(n, ast.FunctionDef)}
    for p in POSITIONS:
        path, name = p.test.split("::")
        assert (ROOT / path).exists(), p
        if path == "tests/conformance/test_positions.py":
            assert name in defined, f"{p.clause}: the test {name} does not exist"
        else:
            assert f"def {name}(" in (ROOT / path).read_text(), p


# -- 6.9 -----------------------------------------------------------------------------------------

def _tt(elem, dims):
    return ir.TensorType(elem, None if dims is None else ir.Shape.of(dims))


def test_assignability_contradiction_only_between_static_facts():
    f = 1  # FLOAT
    assert contradiction(_tt(f, [2, 3]), _tt(f, [2, 3])) is None
    assert contradiction(_tt(f, None), _tt(f, [2, 3])) is None          # unknown shape: assignable
    assert contradiction(_tt(f, ["N", 3]), _tt(f, [2, 3])) is None      # a variable: assignable
    assert contradiction(_tt(f, [None, 3]), _tt(f, [2, 3])) is None     # an unknown extent: assignable
    assert contradiction(_tt(f, [2, 4]), _tt(f, [2, 3]))[0] == "shape-mismatch"
    assert contradiction(_tt(f, [2]), _tt(f, [2, 3]))[0] == "shape-mismatch"
    assert contradiction(_tt(f, [2, 3]), _tt(11, [2, 3]))[0] == "type-mismatch"
    assert contradiction(_tt(f, [2]), ir.SequenceType(_tt(f, [2])))[0] == "type-mismatch"
    # ... and a value is checked against the declaration when it exists: a static extent binds.
    b = _model([h.make_node("Identity", ["x"], ["y"])], [_vi("x", shape=[2, "N"])], [_vi("y", shape=[2, "N"])])
    sess = onnxkit.InferenceSession(b)
    assert sess.run(None, {"x": np.zeros((2, 5), np.float32)})[0].shape == (2, 5)
    with pytest.raises(onnxkit.OnnxkitError, match="axis 0"):
        sess.run(None, {"x": np.zeros((3, 5), np.float32)})


# -- 8.5 -----------------------------------------------------------------------------------------

def test_random_operators_are_a_stream_per_session():
    b = _model([h.make_node("RandomNormal", [], ["z"], shape=[4], seed=7.0),
                h.make_node("Sin", ["x"], ["s"])], [_vi("x", shape=[3])], [_vi("z", shape=[4]), _vi("s", shape=[3])])
    x = np.array([0.1, 2.0, -3.5], np.float32)
    sess = onnxkit.InferenceSession(b)
    (z1, s1), (z2, s2) = sess.run(None, {"x": x}), sess.run(None, {"x": x})
    assert s1.tobytes() == s2.tobytes()                  # deterministic operators: bit-identical
    assert not np.array_equal(z1, z2)                     # a stream: the second run draws anew
    z1_again, _ = onnxkit.InferenceSession(b).run(None, {"x": x})
    assert z1_again.tobytes() == z1.tobytes()             # a new session repeats the sequence
    unseeded = _model([h.make_node("RandomUniform", [], ["z"], shape=[4])], [], [_vi("z", shape=[4])])
    first = [onnxkit.InferenceSession(unseeded, seed=s).run(None, {})[0] for s in (1, 1, 2)]
    assert first[0].tobytes() == first[1].tobytes() and first[0].tobytes() != first[2].tobytes()


# -- 11.3 ----------------------------------------------------------------------------------------

def test_nan_propagates_through_max_and_min_and_division_follows_ieee():
    b = _model([h.make_node("Max", ["x", "y"], ["mx"]), h.make_node("Min", ["x", "y"], ["mn"]),
                h.make_node("Div", ["x", "y"], ["d"])],
               [_vi("x", shape=[5]), _vi("y", shape=[5])], [_vi("mx", shape=[5]), _vi("mn", shape=[5]), _vi("d", shape=[5])])
    x = np.array([np.nan, 1.0, 1.0, -1.0, 0.0], np.float32)
    y = np.array([1.0, np.nan, 0.0, 0.0, 0.0], np.float32)
    mx, mn, d = onnxkit.InferenceSession(b).run(None, {"x": x, "y": y})
    assert np.isnan(mx[:2]).all() and np.isnan(mn[:2]).all()      # NaN in either operand
    assert mx[2:4].tolist() == [1.0, 0.0] and mn[2:4].tolist() == [0.0, -1.0]
    assert d[2] == np.inf and d[3] == -np.inf and np.isnan(d[4])
    # two zeros of opposite sign: a zero, the second operand on the cpu backend
    z = _model([h.make_node("Max", ["x", "y"], ["mx"]), h.make_node("Min", ["x", "y"], ["mn"])],
               [_vi("x", shape=[2]), _vi("y", shape=[2])], [_vi("mx", shape=[2]), _vi("mn", shape=[2])])
    a, c = np.array([-0.0, 0.0], np.float32), np.array([0.0, -0.0], np.float32)
    mx, mn = onnxkit.InferenceSession(z).run(None, {"x": a, "y": c})
    assert (mx == 0).all() and (mn == 0).all()
    assert np.signbit(mx).tolist() == [False, True] and np.signbit(mn).tolist() == [False, True]


def test_integer_overflow_wraps_and_division_by_zero_is_refused():
    b = _model([h.make_node("Add", ["x", "y"], ["s"]), h.make_node("Mul", ["x", "y"], ["p"])],
               [_vi("x", T.INT32, [2]), _vi("y", T.INT32, [2])], [_vi("s", T.INT32, [2]), _vi("p", T.INT32, [2])])
    s, p = onnxkit.InferenceSession(b).run(None, {"x": np.array([2 ** 31 - 1, -2 ** 31], np.int32),
                                                  "y": np.array([2, 2], np.int32)})
    assert s.tolist() == [-2 ** 31 + 1, -2 ** 31 + 2] and p.tolist() == [-2, 0]
    for op in ("Div", "Mod"):
        d = _model([h.make_node(op, ["x", "y"], ["q"], name="the_division")],
                   [_vi("x", T.INT64, [3]), _vi("y", T.INT64, [3])], [_vi("q", T.INT64, [3])])
        sess = onnxkit.InferenceSession(d)
        ok = sess.run(None, {"x": np.array([7, -7, 6], np.int64), "y": np.array([2, 2, 3], np.int64)})[0]
        assert ok.tolist() == ([3, -3, 2] if op == "Div" else [1, 1, 0])
        with pytest.raises(EvaluationError, match="the_division.*integer division by zero"):
            sess.run(None, {"x": np.array([7, -7, 6], np.int64), "y": np.array([2, 0, 3], np.int64)})


# -- 12.5 ----------------------------------------------------------------------------------------

def test_message_size_limit_is_refused_before_decoding():
    assert onnxkit.DEFAULT_LIMITS.max_message_bytes == 2 ** 31
    b = _model([h.make_node("Identity", ["x"], ["y"])], [_vi("x", shape=[1])], [_vi("y", shape=[1])])
    with pytest.raises(LimitExceeded, match="max_message_bytes"):
        onnxkit.load(b, limits=onnxkit.Limits(max_message_bytes=len(b) - 1))
    assert onnxkit.load(b, limits=onnxkit.Limits(max_message_bytes=len(b))).graph.node[0].op_type == "Identity"


# -- 12.8, 13.3 ----------------------------------------------------------------------------------

def _external_model(tmp_path, checksum=False):
    w = onnxkit.ir.Tensor.from_numpy(np.arange(2048, dtype=np.float32), name="w")
    b = _model([h.make_node("Add", ["x", "w"], ["y"])], [_vi("x", shape=[2048])], [_vi("y", shape=[2048])])
    model = onnxkit.load(b)
    model.graph.initializer.append(w)
    path = tmp_path / "m.onnx"
    onnxkit.save(model, path, external_data=True, size_threshold=16, checksum=checksum)
    return path, tmp_path / "m.onnx.data"


def test_hash_covers_external_contents_only_with_data(tmp_path):
    path, data = _external_model(tmp_path)
    plain, full = onnxkit.model_hash(path), onnxkit.model_hash(path, with_data=True)
    assert plain == hashlib.sha256(onnxkit.canonical_bytes(path)).hexdigest() and full != plain
    raw = bytearray(data.read_bytes())
    raw[8] ^= 0xFF
    data.write_bytes(bytes(raw))
    assert onnxkit.model_hash(path) == plain                        # the file's octets: unchanged
    assert onnxkit.model_hash(path, with_data=True) != full          # the contents: changed


def test_sha256_checksums_are_written_and_verified(tmp_path):
    path, data = _external_model(tmp_path, checksum="sha256")
    model = onnxkit.load(path)
    entries = {e.key: e.value for e in model.graph.initializer[0].external_data}
    assert entries["checksum"] == hashlib.sha256(data.read_bytes()).hexdigest() and len(entries["checksum"]) == 64
    assert model.graph.initializer[0].numpy()[5] == 5.0
    (tmp_path / "sha1").mkdir()
    sha1_path, sha1_data = _external_model(tmp_path / "sha1", checksum=True)
    entries = {e.key: e.value for e in onnxkit.load(sha1_path).graph.initializer[0].external_data}
    assert entries["checksum"] == hashlib.sha1(sha1_data.read_bytes()).hexdigest()
    raw = bytearray(data.read_bytes())
    raw[0] ^= 1
    data.write_bytes(bytes(raw))
    with pytest.raises(ExternalDataError, match="SHA256 of the file"):
        onnxkit.load(path).graph.initializer[0].numpy()


# -- Loop ----------------------------------------------------------------------------------------

def test_loop_with_a_trip_count_and_no_condition_ignores_the_body_condition():
    body = h.make_graph([
        h.make_node("Constant", [], ["two"], value=h.make_tensor("t", T.INT64, [], [2])),
        h.make_node("Less", ["i", "two"], ["c_out"]),
        h.make_node("Constant", [], ["one"], value=h.make_tensor("o", T.FLOAT, [], [1.0])),
        h.make_node("Add", ["vb", "one"], ["vb_out"])], "body",
        [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("vb", T.FLOAT, [])],
        [_vi("c_out", T.BOOL, []), _vi("vb_out", T.FLOAT, [])])
    b = _model([h.make_node("Loop", ["M", "", "v0"], ["v"], body=body)],
               [_vi("M", T.INT64, []), _vi("v0", T.FLOAT, [])], [_vi("v", T.FLOAT, [])])
    got = onnxkit.InferenceSession(b).run(None, {"M": np.array(5, np.int64), "v0": np.array(0, np.float32)})[0]
    assert float(got) == 5.0          # five iterations; onnxruntime stops after three
