"""IOBinding and OrtValue misuse is a clear error, never a silent conversion, broadcast or ignored
buffer (onnxkit/runtime/ortvalue.py); end_profiling is thread-safe and a bad profile prefix is
refused naming the option (onnxkit/runtime/session.py, state.py); Cast of NaN / inf / out-of-range
values leaks no numpy RuntimeWarning (the cast kernels)."""

from __future__ import annotations

import os
import threading
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP, helper  # noqa: E402

from onnxkit import InferenceSession, OnnxkitError, OrtValue, SessionOptions  # noqa: E402


def model(nodes, inputs, outputs, opset=17) -> bytes:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, e, s) for n, e, s in inputs],
                          [helper.make_tensor_value_info(n, e, s) for n, e, s in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


IDENTITY = model([helper.make_node("Identity", ["x"], ["y"])], [("x", TP.FLOAT, [2, 3])], [("y", TP.FLOAT, [2, 3])])
TWO_OUT = model([helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"])],
                [("x", TP.FLOAT, [2, 3])], [("a", TP.FLOAT, [2, 3]), ("b", TP.FLOAT, [2, 3])])
X = np.full((2, 3), 2.25, np.float32)


# -- IOBinding ----------------------------------------------------------------------------------
@pytest.mark.parametrize("runtime", ["onnxkit", "onnxruntime"])
def test_an_int32_ortvalue_bound_to_a_float_output_is_a_type_mismatch(runtime):
    if runtime == "onnxkit":
        s, Value, error = InferenceSession(IDENTITY), OrtValue, OnnxkitError
    else:
        s, Value, error = ort.InferenceSession(IDENTITY, providers=["CPUExecutionProvider"]), ort.OrtValue, RuntimeError
    b = s.io_binding()
    b.bind_cpu_input("x", X)
    target = Value.ortvalue_from_numpy(np.zeros((2, 3), np.int32))
    b.bind_ortvalue_output("y", target)
    with pytest.raises(error, match="type"):
        s.run_with_iobinding(b)
    assert target.numpy().tolist() == [[0] * 3] * 2  # not truncated into 2


def test_matching_bound_outputs_are_written_and_a_mismatch_writes_none_of_them():
    s = InferenceSession(TWO_OUT)
    a, b_ok = OrtValue.ortvalue_from_numpy(np.zeros((2, 3), np.float32)), np.zeros((2, 3), np.float32)
    io = s.io_binding()
    io.bind_cpu_input("x", X)
    io.bind_ortvalue_output("a", a)
    io.bind_ortvalue_output("b", OrtValue.ortvalue_from_numpy(b_ok))
    s.run_with_iobinding(io)
    assert a.numpy().tolist() == X.tolist() and b_ok.tolist() == (-X).tolist()
    a2 = OrtValue.ortvalue_from_numpy(np.zeros((2, 3), np.float32))
    io = s.io_binding()
    io.bind_cpu_input("x", X)
    io.bind_ortvalue_output("a", a2)
    io.bind_ortvalue_output("b", OrtValue.ortvalue_from_numpy(np.zeros((2, 3), np.float64)))
    with pytest.raises(OnnxkitError, match="output 'b': type mismatch"):
        s.run_with_iobinding(io)
    assert not a2.numpy().any()


def test_a_bound_ortvalue_of_another_shape_is_refused():
    s = InferenceSession(IDENTITY)
    io = s.io_binding()
    io.bind_cpu_input("x", X)
    io.bind_ortvalue_output("y", OrtValue.ortvalue_from_numpy(np.zeros((3, 2), np.float32)))
    with pytest.raises(OnnxkitError, match=r"output 'y': shape \[2, 3\] does not match"):
        s.run_with_iobinding(io)


def test_bind_output_with_a_raw_pointer_needs_element_type_and_shape():
    s = InferenceSession(IDENTITY)
    io = s.io_binding()
    buf = np.zeros((2, 3), np.float32)
    with pytest.raises(OnnxkitError, match="bind_output\\('y'\\): `element_type` and `shape` are to be provided"):
        io.bind_output("y", "cpu", 0, None, [2, 3], buf.ctypes.data)
    io.bind_output("y", "cpu", 0, np.float32, [2, 3])   # element type and shape alone are fine
    io.bind_cpu_input("x", X)
    s.run_with_iobinding(io)
    assert io.copy_outputs_to_cpu()[0].tolist() == X.tolist()
    assert not buf.any()


def test_a_read_only_ortvalue_cannot_be_bound_as_an_output():
    arr = np.zeros((2, 3), np.float32)
    arr.flags.writeable = False
    io = InferenceSession(IDENTITY).io_binding()
    with pytest.raises(OnnxkitError, match="bind_ortvalue_output\\('y'\\): the OrtValue's array is read-only"):
        io.bind_ortvalue_output("y", OrtValue.ortvalue_from_numpy(arr))


# -- OrtValue.update_inplace --------------------------------------------------------------------
@pytest.mark.parametrize("src", [np.arange(3, dtype=np.float32), np.arange(6, dtype=np.float32),
                                 np.ones((3, 2), np.float32), np.ones((1, 3), np.float32)],
                         ids=["[3]", "[6]", "[3,2]", "[1,3]"])
def test_update_inplace_refuses_another_shape(src):
    v = OrtValue.ortvalue_from_numpy(np.zeros((2, 3), np.float32))
    with pytest.raises(OnnxkitError, match=r"update_inplace: shape .* does not match the OrtValue's shape \[2, 3\]"):
        v.update_inplace(src)
    assert not v.numpy().any()


def test_update_inplace_refuses_another_type_and_a_read_only_array():
    v = OrtValue.ortvalue_from_numpy(np.zeros((2, 3), np.float32))
    with pytest.raises(OnnxkitError, match="update_inplace: type mismatch"):
        v.update_inplace(np.ones((2, 3), np.float64))
    v.update_inplace(np.full((2, 3), 7, np.float32))
    assert v.numpy().tolist() == [[7.0] * 3] * 2
    ro = np.zeros(2, np.float32)
    ro.flags.writeable = False
    with pytest.raises(OnnxkitError, match="read-only"):
        OrtValue.ortvalue_from_numpy(ro).update_inplace(np.ones(2, np.float32))


# -- profiling ----------------------------------------------------------------------------------
RELU = model([helper.make_node("Relu", ["x"], ["y"])], [("x", TP.FLOAT, [2])], [("y", TP.FLOAT, [2])])


def profiled(prefix):
    so = SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = prefix
    return InferenceSession(RELU, so)


def test_end_profiling_from_two_threads_writes_one_trace(tmp_path):
    for r in range(12):
        s = profiled(str(tmp_path / f"r{r}"))
        s.run(None, {"x": np.ones(2, np.float32)})
        barrier, results, errors = threading.Barrier(2), [], []

        def end():
            barrier.wait()
            try:
                results.append(s.end_profiling())
            except Exception as exc:  # noqa: BLE001 - the test reports it
                errors.append(exc)
        threads = [threading.Thread(target=end) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert sorted(bool(p) for p in results) == [False, True]   # one path, one '' (as onnxruntime)
        written = [p for p in results if p]
        assert os.path.isfile(written[0])
    assert len(os.listdir(tmp_path)) == 12


@pytest.mark.parametrize("prefix", ["no-such-dir/p", "a\0b"], ids=["missing-dir", "nul"])
def test_a_bad_profile_prefix_is_refused_naming_the_option(tmp_path, prefix):
    with pytest.raises(OnnxkitError, match="SessionOptions.profile_file_prefix"):
        profiled(str(tmp_path / prefix))


def test_a_trace_is_never_written_over_an_existing_file(tmp_path):
    first = profiled(str(tmp_path / "p"))
    second = profiled(str(tmp_path / "p"))
    paths = {first.end_profiling(), second.end_profiling()}
    assert len(paths) == 2 and all(os.path.isfile(p) for p in paths)


# -- Cast without numpy warnings ----------------------------------------------------------------
SPECIAL = [np.nan, np.inf, -np.inf, 1e30, -1e30, 2.5, -0.0]


PAIRS = [(s, d) for s in (TP.FLOAT, TP.DOUBLE) for d in (TP.INT64, TP.INT32, TP.UINT8, TP.FLOAT16, TP.FLOAT) if s != d]


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{TP.DataType.Name(s)}-{TP.DataType.Name(d)}" for s, d in PAIRS])
def test_cast_of_nan_inf_and_out_of_range_leaks_no_warning(backend, src, dst):
    m = model([helper.make_node("Cast", ["x"], ["y"], to=dst)], [("x", src, [None])], [("y", dst, [None])], opset=21)
    x = np.array(SPECIAL + ([1e300] if src == TP.DOUBLE else []), dtype=np.float64 if src == TP.DOUBLE else np.float32)
    s = InferenceSession(m, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (y,) = s.run(None, {"x": x})
    if np.dtype(y.dtype).kind in "iu":       # the documented rule: truncation; NaN and inf -> 0
        assert y[:3].tolist() == [0, 0, 0] and y[5] == 2 and y[6] == 0
    else:
        assert np.isnan(y[0]) and y[1] == np.inf and y[2] == -np.inf and y[5] == 2.5
        if dst == TP.FLOAT16 or src == TP.DOUBLE:
            assert np.isinf(y[-1] if src == TP.DOUBLE else y[3])
