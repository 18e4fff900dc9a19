"""onnxkit standing in for onnxruntime: the backend's keyword allowlists, memory infos, the
provider assignment report, against onnxruntime's documented behaviour (what onnxruntime's own
Python tests showed missing)."""

from __future__ import annotations

import numpy as np
import pytest

import onnxkit
from onnxkit import status
from onnxkit.ort import backend, datasets
from onnxkit.runtime import devices

X = np.array([[1, 2], [3, 4], [5, 6]], np.float32)


@pytest.fixture
def mul_1():
    return datasets.get_example("mul_1.onnx")


# -- backend: which SessionOptions / RunOptions keywords pass ----------------------------------
@pytest.mark.parametrize("field, value", [("optimized_model_filepath", "x.onnx"), ("profile_file_prefix", "p"),
                                          ("enable_profiling", True)])
def test_backend_refuses_session_fields_that_write_files(mul_1, field, value, tmp_path):
    for call in (lambda: backend.prepare(mul_1, **{field: value}), lambda: backend.run(mul_1, [X], **{field: value})):
        with pytest.raises(RuntimeError, match=f"'{field}' is not permitted") as caught:
            call()
        assert isinstance(caught.value, onnxkit.OnnxkitError)
    assert list(tmp_path.iterdir()) == []


def test_backend_refuses_run_terminate_and_accepts_allowed_run_fields(mul_1):
    rep = backend.prepare(mul_1)
    with pytest.raises(RuntimeError, match="RunOptions field 'terminate' is not permitted"):
        rep.run(X, terminate=True)
    with pytest.raises(RuntimeError, match="'terminate' is not permitted"):
        backend.run(mul_1, [X], terminate=True)
    np.testing.assert_array_equal(backend.run(mul_1, [X], only_execute_path_to_fetches=True, logid="t")[0], X * X)


def test_backend_ignores_keywords_naming_no_field_and_applies_allowed_ones(mul_1):
    rep = backend.prepare(mul_1, no_such_keyword="x", intra_op_num_threads=1,
                          graph_optimization_level=onnxkit.GraphOptimizationLevel.ORT_DISABLE_ALL)
    assert rep.session.get_session_options().intra_op_num_threads == 1
    assert rep.session.get_session_options().graph_optimization_level == onnxkit.GraphOptimizationLevel.ORT_DISABLE_ALL
    np.testing.assert_array_equal(rep.run(X, another_unknown=3)[0], X * X)
    np.testing.assert_array_equal(backend.run(mul_1, [X], yet_another="z")[0], X * X)
    assert backend.prepare(rep) is rep


# -- OrtMemoryInfo ---------------------------------------------------------------------------
CASES = [("Cpu", 0), ("Cuda", 0), ("CudaPinned", -1)]


@pytest.mark.parametrize("name, mem", CASES)
def test_memory_info_device_fields_follow_the_name(name, mem):
    info = devices.OrtMemoryInfo(name, devices.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, mem)
    assert info.device_vendor_id == (0x10DE if name.startswith("Cuda") else 0)
    assert info.device_mem_type == (devices.OrtDeviceMemoryType.HOST_ACCESSIBLE if name == "CudaPinned"
                                    else devices.OrtDeviceMemoryType.DEFAULT)
    assert info.mem_type == mem


def test_memory_info_create_v2_maps_device_memory_to_mem_type():
    host = devices.OrtMemoryInfo.create_v2("T", devices.OrtMemoryInfoDeviceType.GPU, 0x10DE, 1,
                                           devices.OrtDeviceMemoryType.HOST_ACCESSIBLE, 64,
                                           devices.OrtAllocatorType.ORT_DEVICE_ALLOCATOR)
    assert (host.mem_type, host.device_mem_type, host.device_vendor_id, host.device_id) == \
        (devices.OrtMemType.CPU_OUTPUT, devices.OrtDeviceMemoryType.HOST_ACCESSIBLE, 0x10DE, 1)
    plain = devices.OrtMemoryInfo.create_v2("T", devices.OrtMemoryInfoDeviceType.CPU, 0, 0,
                                            devices.OrtDeviceMemoryType.DEFAULT)
    assert (plain.mem_type, plain.device_mem_type, plain.allocator_type) == \
        (devices.OrtMemType.DEFAULT, devices.OrtDeviceMemoryType.DEFAULT, devices.OrtAllocatorType.ORT_DEVICE_ALLOCATOR)


def test_memory_info_fields_equal_onnxruntime_s():
    ort = pytest.importorskip("onnxruntime")
    for name, mem in CASES:
        a = ort.OrtMemoryInfo(name, ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType(mem))
        b = devices.OrtMemoryInfo(name, devices.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, mem)
        assert (int(a.device_mem_type), a.device_vendor_id, int(a.mem_type)) == \
            (int(b.device_mem_type), b.device_vendor_id, int(b.mem_type)), name


# -- get_provider_graph_assignment_info --------------------------------------------------------
def _add_mul_bytes():
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    f = onnx.TensorProto.FLOAT
    g = h.make_graph([h.make_node("Add", ["x", "x"], ["a"], name="add_0"),
                      h.make_node("Mul", ["a", "x"], ["y"], name="mul_0")], "g",
                     [h.make_tensor_value_info("x", f, [2])], [h.make_tensor_value_info("y", f, [2])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_provider_assignment_is_reported_per_node_when_asked_for():
    model = _add_mul_bytes()
    so = onnxkit.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    sess = onnxkit.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    parts = sess.get_provider_graph_assignment_info()
    assert [p.ep_name for p in parts] == ["CPUExecutionProvider"] * 2
    assert [(n.domain, n.op_type, n.name) for p in parts for n in p.get_nodes()] == [("", "Add", "add_0"),
                                                                                    ("", "Mul", "mul_0")]


def test_provider_assignment_refused_unless_recorded():
    sess = onnxkit.InferenceSession(_add_mul_bytes(), providers=["CPUExecutionProvider"])
    with pytest.raises(status.Fail, match="'session.record_ep_graph_assignment_info' must be set to \"1\""):
        sess.get_provider_graph_assignment_info()


# -- OrtValue._ortvalue ------------------------------------------------------------------------
def test_ortvalue_exposes_its_native_value_as_onnxruntime_s_wrapper_does():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = onnxkit.OrtValue.ortvalue_from_numpy(arr)
    native = v._ortvalue
    assert native.data_ptr() == v.data_ptr() and native.shape() == [2, 3]
    back = onnxkit.OrtValue.from_dlpack(native.to_dlpack(), False)
    assert back.data_ptr() == v.data_ptr()
    np.testing.assert_array_equal(back.numpy(), arr)


# -- example models ----------------------------------------------------------------------------
def test_logreg_iris_computes_onnxruntime_s_example_function(monkeypatch, tmp_path):
    ort = pytest.importorskip("onnxruntime")
    import onnxruntime.datasets as ort_datasets

    monkeypatch.setenv("ONNXKIT_DATASETS", str(tmp_path))
    x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [-1.0, 0.5]], np.float32)
    want = ort.InferenceSession(ort_datasets.get_example("logreg_iris.onnx"), providers=["CPUExecutionProvider"])
    rows = [want.run(None, {"float_input": x[i:i + 3]}) for i in (0, 1)]   # its input is declared [3, 2]
    got = backend.run(datasets.get_example("logreg_iris.onnx"), [x])
    np.testing.assert_array_equal(got[0], np.concatenate([rows[0][0], rows[1][0][2:]]))
    for g, w in zip(got[1], rows[0][1] + rows[1][1][2:]):
        assert sorted(g) == sorted(w) == [0, 1, 2]
        np.testing.assert_allclose([g[k] for k in w], [w[k] for k in w], rtol=1e-3, atol=1e-7)


def test_a_stale_cached_example_is_written_again(monkeypatch, tmp_path):
    monkeypatch.setenv("ONNXKIT_DATASETS", str(tmp_path))
    (tmp_path / "mul_1.onnx").write_bytes(b"an older onnxkit's file")
    path = datasets.get_example("mul_1.onnx")
    np.testing.assert_array_equal(onnxkit.InferenceSession(path).run(None, {"X": X})[0], X * X)
    assert datasets.get_example("mul_1.onnx") == path
