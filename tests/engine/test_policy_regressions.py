"""Bugs found while making real-world models run by default (issue #11), each pinned by a test.

Loop/Scan bodies of IR version 3 exports, ``infer_shapes`` papering over contradictions,
``onnxkit infer -o`` writing after an error, Cast to the narrow integer types, a graph that
is its own subgraph, a TypeProto with two kinds; then STRING values at the session boundary
and the ``--strict`` flags of the CLI.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

from onnxkit import ConformanceWarning, InferenceSession, check_model, infer_shapes, ir, load, to_bytes  # noqa: E402

F = T.FLOAT


def _vi(name, shape, elem=F):
    return h.make_tensor_value_info(name, elem, shape)


def _bytes(graph, opset, ir_version):
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = ir_version
    return m.SerializeToString()


# -- Loop / Scan bodies whose initializers are trailing inputs (IR < 4) --------------------------

def test_loop_body_with_initializers_listed_as_trailing_inputs_ir3():
    """IR 3 lists every initializer as a graph input: the body's 'w' is not a loop-carried value."""
    w = h.make_tensor("w", F, [2], [10.0, 20.0])
    body = h.make_graph([h.make_node("Identity", ["cond"], ["cond_out"]), h.make_node("Add", ["v", "w"], ["v_out"])],
                        "body", [_vi("i", [], T.INT64), _vi("cond", [], T.BOOL), _vi("v", [2]), _vi("w", [2])],
                        [_vi("cond_out", [], T.BOOL), _vi("v_out", [2])], initializer=[w])
    loop = h.make_node("Loop", ["M", "c", "v0"], ["v_final"], body=body)
    g = h.make_graph([loop], "g", [_vi("M", [], T.INT64), _vi("c", [], T.BOOL), _vi("v0", [2])], [_vi("v_final", [2])])
    data = _bytes(g, 8, 3)
    assert check_model(data).ok
    out = InferenceSession(data).run(None, {"M": np.array(3, np.int64), "c": np.array(True),
                                            "v0": np.zeros(2, np.float32)})[0]
    np.testing.assert_array_equal(out, [30.0, 60.0])


def test_scan8_body_with_initializers_listed_as_trailing_inputs_ir3():
    w = h.make_tensor("w", F, [], [1.0])
    body = h.make_graph([h.make_node("Add", ["s", "x"], ["s1"]), h.make_node("Add", ["s1", "w"], ["s_out"]),
                         h.make_node("Identity", ["s_out"], ["y"])],
                        "body", [_vi("s", []), _vi("x", []), _vi("w", [])], [_vi("s_out", []), _vi("y", [])],
                        initializer=[w])
    scan = h.make_node("Scan", ["", "s0", "xs"], ["s_final", "ys"], body=body, num_scan_inputs=1)
    g = h.make_graph([scan], "g", [_vi("s0", [1]), _vi("xs", [1, 3])], [_vi("s_final", [1]), _vi("ys", [1, 3])])
    s, ys = InferenceSession(_bytes(g, 8, 3)).run(None, {"s0": np.zeros(1, np.float32),
                                                         "xs": np.array([[1.0, 2.0, 3.0]], np.float32)})
    np.testing.assert_array_equal(ys, [[2.0, 5.0, 9.0]])
    np.testing.assert_array_equal(s, [9.0])


# -- inference never papers over a contradiction ---------------------------------------------------

def _contradicting_output_model():
    """Y = Cast(X, to=INT64), but Y is declared float [3] (a type contradiction, an error)."""
    g = h.make_graph([h.make_node("Cast", ["X"], ["Y"], to=T.INT64)], "g", [_vi("X", [3])], [_vi("Y", [3])])
    return _bytes(g, 17, 8)


def test_infer_shapes_keeps_a_contradicted_declaration():
    model = load(_contradicting_output_model())
    out = infer_shapes(model)
    assert out.graph.output[0].type == ir.tensor_type(F, [3])  # as declared; the contradiction is reported
    assert "inferred-type-mismatch" in {d.code for d in check_model(model).errors}


def test_infer_shapes_keeps_a_contradicted_declared_shape_but_refines_others():
    g = h.make_graph([h.make_node("Relu", ["X"], ["r"]), h.make_node("Neg", ["r"], ["Y"])], "g",
                     [_vi("X", [2, 3])], [_vi("Y", [2, None])], value_info=[_vi("r", [1, 3])])
    out = infer_shapes(load(_bytes(g, 17, 8)))
    assert out.graph.value_info[0].type == ir.tensor_type(F, [1, 3])
    assert out.graph.output[0].type == ir.tensor_type(F, [2, 3])


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "onnxkit", *args], capture_output=True, text=True, timeout=120)


def test_infer_writes_nothing_on_error(tmp_path):
    src, dst = tmp_path / "m.onnx", tmp_path / "out.onnx"
    src.write_bytes(_contradicting_output_model())
    proc = _cli("infer", str(src), "-o", str(dst), "-q")
    assert proc.returncode == 1 and not dst.exists()
    assert "inferred-type-mismatch" in proc.stderr and "not written" in proc.stderr


def test_infer_strict_counts_a_contradicted_shape(tmp_path):
    g = h.make_graph([h.make_node("Relu", ["X"], ["Y"])], "g", [_vi("X", [2])], [_vi("Y", [3])])
    src, dst = tmp_path / "m.onnx", tmp_path / "out.onnx"
    src.write_bytes(_bytes(g, 17, 8))
    assert _cli("infer", str(src), "-o", str(dst), "-q").returncode == 0 and dst.exists()
    dst.unlink()
    assert _cli("infer", str(src), "-o", str(dst), "-q", "--strict").returncode == 1 and not dst.exists()


# -- Cast to narrow integers: round half to even (6.3.3), then the low bits ---------------------

@pytest.mark.parametrize("to, want", [(T.INT4, [2, 3, -3, 0, 0, 2, -2]), (T.UINT4, [2, 3, 13, 0, 0, 2, 14]),
                                      (T.INT2, [-2, -1, 1, 0, 0, -2, -2]), (T.UINT2, [2, 3, 1, 0, 0, 2, 2])])
def test_cast_to_narrow_integers_rounds_half_to_even_then_wraps(to, want):
    """2.5 -> 2 and -1.5 -> -2 (ties to even), 2.7 -> 3 (not truncated); out of range, the low
    bits of the rounded value, as onnxruntime and the ONNX 1-3 vectors have it (1e10 -> 0)."""
    x = np.array([2.5, 2.7, -2.7, 1e10, -1e10, 1.5, -1.5], np.float32)
    g = h.make_graph([h.make_node("Cast", ["X"], ["Y"], to=to)], "g", [_vi("X", [7])], [_vi("Y", [7], to)])
    y = InferenceSession(_bytes(g, 25, 11)).run(None, {"X": x})[0]
    assert y.astype(np.int64).tolist() == want


def test_cast_from_integers_to_narrow_integers_keeps_the_low_bits():
    """Fixed point to fixed point: the Cast definition discards the higher bits."""
    g = h.make_graph([h.make_node("Cast", ["X"], ["Y"], to=T.INT4)], "g", [_vi("X", [3], T.INT32)],
                     [_vi("Y", [3], T.INT4)])
    y = InferenceSession(_bytes(g, 21, 10)).run(None, {"X": np.array([9, -9, 7], np.int32)})[0]
    assert y.astype(np.int64).tolist() == [-7, 7, 7]


# -- a graph that is its own subgraph; a TypeProto with two kinds ---------------------------------

def test_a_graph_reachable_from_itself_is_a_cycle_error_not_a_memory_error():
    body = ir.Graph(name="then", output=[ir.ValueInfo("X")])
    body.node.append(ir.Node(["C"], ["Z"], op_type="If", attribute=[ir.Attribute.make("then_branch", body),
                                                                    ir.Attribute.make("else_branch", body)]))
    other = ir.Graph(name="else", output=[ir.ValueInfo("X")])
    top = ir.Graph(node=[ir.Node(["C"], ["Y"], op_type="If", attribute=[ir.Attribute.make("then_branch", body),
                                                                       ir.Attribute.make("else_branch", other)])],
                   name="main", input=[ir.ValueInfo("X", ir.tensor_type(F, [2])),
                                       ir.ValueInfo("C", ir.tensor_type(T.BOOL, []))],
                   output=[ir.ValueInfo("Y", ir.tensor_type(F, [2]))])
    report = check_model(ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 17)], graph=top))
    cycles = [d for d in report.errors if d.code == "subgraph-cycle"]
    assert len(cycles) == 2 and all("'then' is a subgraph of itself" in d.message for d in cycles)


def test_a_typeproto_with_two_kinds_is_flagged_and_round_trips():
    """B.2.21: a TypeProto carrying both a tensor_type and a sequence_type, as a producer may write it."""
    proto = onnx.load_from_string(_bytes(h.make_graph([h.make_node("Relu", ["X"], ["Y"])], "g", [_vi("X", [2])],
                                                      [_vi("Y", [2])]), 17, 8))
    seq = onnx.TypeProto()
    seq.sequence_type.elem_type.tensor_type.elem_type = F
    tp = proto.graph.input[0].type.SerializeToString() + seq.SerializeToString()  # fields 1 and 4 of one message
    vi_bytes = b"\x0a\x01X\x12" + _varint(len(tp)) + tp                           # ValueInfoProto name, type
    old = proto.graph.input[0].SerializeToString()
    g_bytes = proto.graph.SerializeToString()
    g_bytes = g_bytes.replace(b"\x5a" + _varint(len(old)) + old, b"\x5a" + _varint(len(vi_bytes)) + vi_bytes, 1)
    proto.ClearField("graph")
    data = proto.SerializeToString() + b"\x3a" + _varint(len(g_bytes)) + g_bytes  # ModelProto.graph is field 7
    assert "type-kind-multiple" in {d.code for d in check_model(data).errors}
    assert to_bytes(load(data)) == to_bytes(load(to_bytes(load(data))))  # the member not kept is retained (12.4)
    assert seq.sequence_type.SerializeToString() in to_bytes(load(data))


def _varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


# -- STRING values at the session boundary (6.4) --------------------------------------------------

def _concat_model():
    g = h.make_graph([h.make_node("StringConcat", ["A", "B"], ["Y"])], "g", [_vi("A", [2], T.STRING),
                                                                              _vi("B", [2], T.STRING)],
                     [_vi("Y", [2], T.STRING)])
    return _bytes(g, 20, 9)


def test_strings_come_out_as_str_and_go_in_as_str_or_bytes():
    sess = InferenceSession(_concat_model())
    a = np.array(["abc", "d\u00e9f"], dtype=object)
    b = np.array([b".com", b".net"], dtype=object)
    y = sess.run(None, {"A": a, "B": b})[0]
    assert y.dtype == object and y.tolist() == ["abc.com", "d\u00e9f.net"]
    assert all(type(v) is str for v in y.tolist())
    y = sess.run(None, {"A": np.array(["x", "y"]), "B": np.array([b"1", b"2"])})[0]  # numpy U and S arrays
    assert y.tolist() == ["x1", "y2"]


def test_a_string_that_is_not_utf8_comes_back_as_bytes():
    y = InferenceSession(_concat_model()).run(None, {"A": np.array([b"\xff", b"ok"], dtype=object),
                                                     "B": np.array(["!", "!"], dtype=object)})[0]
    assert y.tolist() == [b"\xff!", "ok!"]


def test_string_initializers_and_constants_come_out_as_str():
    c = h.make_node("Constant", [], ["Y"], value=h.make_tensor("v", T.STRING, [2], [b"a", "\u00e9".encode()]))
    g = h.make_graph([c], "g", [], [_vi("Y", [2], T.STRING)])
    assert InferenceSession(_bytes(g, 17, 8)).run(None, {})[0].tolist() == ["a", "\u00e9"]


# -- --strict on the command line -----------------------------------------------------------------

def _duplicate_names(tmp_path):
    g = h.make_graph([h.make_node("Relu", ["X"], ["a"], name="n"), h.make_node("Neg", ["a"], ["Y"], name="n")], "g",
                     [_vi("X", [2])], [_vi("Y", [2])])
    p = tmp_path / "m.onnx"
    p.write_bytes(_bytes(g, 17, 8))
    np.save(tmp_path / "x.npy", np.array([1.0, -1.0], np.float32))
    return str(p)


def test_check_strict_counts_violations(tmp_path):
    path = _duplicate_names(tmp_path)
    plain = _cli("check", path)
    assert plain.returncode == 0 and "warning:" in plain.stdout and "duplicate-node-name" in plain.stdout
    assert _cli("check", path, "--strict").returncode == 1


def test_run_strict_refuses_and_default_runs(tmp_path):
    path = _duplicate_names(tmp_path)
    x = f"X={tmp_path / 'x.npy'}"
    plain = _cli("run", path, "-i", x)
    assert plain.returncode == 0 and "[-1. -0.]" in plain.stdout and "duplicate-node-name" in plain.stderr
    strict = _cli("run", path, "-i", x, "--strict")
    assert strict.returncode != 0 and "duplicate-node-name" in strict.stderr


def test_session_warnings_can_be_silenced_like_any_python_warning():
    g = h.make_graph([h.make_node("Relu", ["X"], ["a"], name="n"), h.make_node("Neg", ["a"], ["Y"], name="n")], "g",
                     [_vi("X", [2])], [_vi("Y", [2])])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConformanceWarning)
        with pytest.raises(ConformanceWarning, match="duplicate-node-name"):
            InferenceSession(_bytes(g, 17, 8))
