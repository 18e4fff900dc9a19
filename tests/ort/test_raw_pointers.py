"""Devices as onnxruntime 1.32 takes them (an OrtDevice wherever a device is named:
onnxkit/runtime/devices.py, ortvalue.py) and raw memory addresses in IOBinding
(onnxkit/runtime/pointers.py), each against onnxruntime doing the same."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto as TP, helper  # noqa: E402
from onnxruntime.capi import _pybind_state as C  # noqa: E402

from onnxkit import InferenceSession, OnnxkitError, OrtValue  # noqa: E402
from onnxkit.ort.capi.extras import SessionIOBinding  # noqa: E402
from onnxkit.runtime.devices import (  # noqa: E402
    OrtAllocatorType, OrtDevice, OrtDeviceVendorId, OrtMemoryInfo, OrtMemType, value_device,
)


def _model(elem: int, op: str = "Neg", shape=(None, 3)) -> bytes:
    g = helper.make_graph([helper.make_node(op, ["X"], ["Y"])], "g",
                          [helper.make_tensor_value_info("X", elem, list(shape))],
                          [helper.make_tensor_value_info("Y", elem, list(shape))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _sessions(model: bytes):
    return InferenceSession(model), ort.InferenceSession(model, providers=["CPUExecutionProvider"])


# -- OrtDevice --------------------------------------------------------------------------------------
def test_device_numbers_and_vendors_are_onnxruntime_s():
    for name in ("cpu", "cuda", "gpu", "webgpu", "fpga", "npu", "cann", "dml", "default_memory"):
        assert getattr(OrtDevice, name)() == getattr(C.OrtDevice, name)(), name
    for name in ("cpu", "cuda", "cann", "dml", "webgpu", "gpu", "npu"):
        for vendor in (-1, 0, 0x8086):
            mine, theirs = OrtDevice.make(name, 2, vendor), ort.OrtDevice.make(name, 2, vendor)
            assert (mine.device_type(), mine.device_id(), mine.device_vendor_id(), mine.device_mem_type()) == \
                (theirs.device_type(), theirs.device_id(), theirs.device_vendor_id(), theirs.device_mem_type()), name
    for args in [(0, 0, 3), (1, 0, 0x10DE, 2), (4, 0, 1), (4, 0, 0, 2), (2, 0, 1)]:   # the native constructors
        mine, theirs = OrtDevice(*args), C.OrtDevice(*args)
        assert (mine.device_type(), mine.mem_type(), mine.vendor_id(), mine.device_id()) == \
            (theirs.device_type(), theirs.mem_type(), theirs.vendor_id(), theirs.device_id()), args
    assert {v.name: int(v) for v in OrtDeviceVendorId} == {v.name: int(v) for v in ort.OrtDeviceVendorId}
    with pytest.raises(OnnxkitError, match="unsupported device type 'tpu'"):
        OrtDevice.make("tpu", 0)


def test_which_devices_hold_values():
    assert value_device(OrtDevice(0, 0, 0)) == ("cpu", 0)
    assert value_device(OrtDevice(1, 0, 0x10DE, 1)) == ("cuda", 1)
    assert value_device(OrtDevice(1, 0, 3)) == ("cuda", 3)          # a legacy vendor-less GPU
    assert value_device(OrtDevice(1, 5, 0x10DE, 0)) == ("cpu", 0)   # host-accessible (pinned) memory
    assert value_device("CPU", 0) == ("cpu", 0)
    pinned = OrtMemoryInfo("CudaPinned", OrtAllocatorType.ORT_DEVICE_ALLOCATOR, 0, OrtMemType.CPU_OUTPUT)
    assert value_device(pinned.device) == ("cpu", 0)
    assert value_device(OrtMemoryInfo("Cuda", OrtAllocatorType.ORT_DEVICE_ALLOCATOR, 1, OrtMemType.DEFAULT).device) \
        == ("cuda", 1)
    host = OrtValue.ortvalue_from_shape_and_type([2], np.float32, memory_info=pinned)
    assert host.device_name() == "cpu" and host.numpy().tolist() == [0.0, 0.0]
    for device in (OrtDevice.make("dml", 0), OrtDevice.make("gpu", 0, 0x1002), OrtDevice.make("npu", 0)):
        with pytest.raises(OnnxkitError, match="not a device onnxkit holds values on"):
            value_device(device)
    with pytest.raises(OnnxkitError, match="device type must be 'cpu' or 'cuda'.*not 'dml'"):
        OrtValue.ortvalue_from_numpy(np.ones(2), "dml", 0)


@pytest.mark.parametrize("element_type", [np.float32, np.int64, np.float16, TP.FLOAT, TP.BFLOAT16, TP.UINT8,
                                          TP.FLOAT8E4M3FN])
def test_ortvalues_made_on_an_ortdevice_are_onnxruntime_s(element_type):
    device = OrtDevice(OrtDevice.cpu(), OrtDevice.default_memory(), 0)
    mine = OrtValue.ortvalue_from_shape_and_type([2, 3], element_type, device)
    theirs = ort.OrtValue.ortvalue_from_shape_and_type([2, 3], element_type, "cpu", 0)
    assert (mine.element_type(), mine.shape(), mine.device_name(), mine.data_type()) == \
        (theirs.element_type(), theirs.shape(), theirs.device_name(), theirs.data_type())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    a, b = OrtValue.ortvalue_from_numpy(x, device), C.OrtValue.ortvalue_from_numpy(x, C.OrtDevice(0, 0, 0))
    assert (a.element_type(), a.shape(), a.data_ptr()) == (b.element_type(), b.shape(), x.ctypes.data)


# -- raw pointers ------------------------------------------------------------------------------
DTYPES = [(TP.FLOAT, np.float32), (TP.DOUBLE, np.float64), (TP.INT8, np.int8), (TP.INT32, np.int32),
          (TP.INT64, np.int64), (TP.FLOAT16, np.float16), (TP.UINT16, np.uint16)]


@pytest.mark.parametrize("elem, dtype", DTYPES)
@pytest.mark.parametrize("form", ["python", "native"])
def test_inputs_and_outputs_by_address_as_in_onnxruntime(elem, dtype, form):
    op = "Neg" if np.dtype(dtype).kind in "fi" else "Identity"
    x = (np.arange(12).reshape(4, 3) - 5).astype(dtype)
    results = []
    for lib, sess in zip(("onnxkit", "onnxruntime"), _sessions(_model(elem, op))):
        out = np.full((4, 3), 99, dtype)
        if form == "python":
            io = sess.io_binding()
            io.bind_input("X", "cpu", 0, dtype, x.shape, x.ctypes.data)
            io.bind_output("Y", "cpu", 0, elem, [4, 3], out.ctypes.data)
            sess.run_with_iobinding(io)
        else:   # onnxruntime's native binding: an OrtDevice second, element type as ONNX number or numpy type
            dev = OrtDevice(0, 0, 0) if lib == "onnxkit" else C.OrtDevice(0, 0, 0)
            io = SessionIOBinding(sess._sess) if lib == "onnxkit" else C.SessionIOBinding(sess._sess)
            io.bind_input("X", dev, dtype, list(x.shape), x.ctypes.data)
            io.bind_output("Y", dev, elem, [4, 3], out.ctypes.data)
            sess._sess.run_with_iobinding(io, None)
        got = io.get_outputs()[0]
        results.append((out.copy(), got.numpy().copy(), got.data_ptr() == out.ctypes.data))
    (kit_buf, kit_out, kit_same), (ref_buf, ref_out, ref_same) = results
    np.testing.assert_array_equal(kit_buf, ref_buf)   # written into the caller's memory
    np.testing.assert_array_equal(kit_out, ref_out)
    assert kit_same and ref_same                      # the output value is that memory


def test_a_torch_bfloat16_buffer_by_address():
    torch = pytest.importorskip("torch")
    for sess in _sessions(_model(TP.BFLOAT16, "Identity", shape=[None])):
        x, y = torch.arange(8).to(torch.bfloat16), torch.empty(8, dtype=torch.bfloat16)
        io = sess.io_binding()
        io.bind_input("X", x.device.type, 0, TP.BFLOAT16, x.shape, x.data_ptr())
        io.bind_output("Y", y.device.type, 0, TP.BFLOAT16, y.shape, y.data_ptr())
        sess.run_with_iobinding(io)
        assert torch.equal(x, y)


def test_a_bound_address_is_read_at_each_run_and_rebinding_replaces():
    sess = InferenceSession(_model(TP.FLOAT))
    x = np.ones((2, 3), np.float32)
    io = sess.io_binding()
    io.bind_input("X", "cpu", 0, np.float32, [2, 3], x.ctypes.data)
    io.bind_output("Y")
    sess.run_with_iobinding(io)
    assert io.copy_outputs_to_cpu()[0].tolist() == [[-1.0] * 3] * 2
    x[:] = 4   # the memory, not a copy of it, is bound
    sess.run_with_iobinding(io)
    assert io.copy_outputs_to_cpu()[0].tolist() == [[-4.0] * 3] * 2
    out = np.zeros((2, 3), np.float32)
    io.bind_output("Y", "cpu", 0, np.float32, [2, 3], out.ctypes.data)   # replaces the first binding
    sess.run_with_iobinding(io)
    assert len(io.get_outputs()) == 1 and out.tolist() == [[-4.0] * 3] * 2


def test_bad_addresses_and_declarations_are_refused_naming_the_binding():
    sess = InferenceSession(_model(TP.FLOAT))
    io = sess.io_binding()
    x = np.ones((2, 3), np.float32)
    with pytest.raises(OnnxkitError, match=r"bind_input\('X'\): buffer_ptr 0 is not an address"):
        io.bind_input("X", "cpu", 0, np.float32, [2, 3], 0)
    with pytest.raises(OnnxkitError, match=r"bind_input\('X'\): shape \[2, -3\] has a negative dimension"):
        io.bind_input("X", "cpu", 0, np.float32, [2, -3], x.ctypes.data)
    with pytest.raises(OnnxkitError, match=r"bind_input\('X'\): STRING elements cannot be read from raw memory"):
        io.bind_input("X", "cpu", 0, TP.STRING, [2, 3], x.ctypes.data)
    with pytest.raises(OnnxkitError, match=r"bind_input\('X'\): 99 is not an ONNX element type"):
        io.bind_input("X", "cpu", 0, 99, [2, 3], x.ctypes.data)
    with pytest.raises(OnnxkitError, match=r"bind_input\('X'\): with a device, element_type, shape and buffer_ptr"):
        io.bind_input("X", "cpu", 0)
    with pytest.raises(OnnxkitError, match=r"bind_output\('Y'\): `element_type` and `shape` are to be provided"):
        io.bind_output("Y", "cpu", 0, None, None, x.ctypes.data)
    with pytest.raises(OnnxkitError, match="not a device onnxkit holds values on"):
        io.bind_input("X", OrtDevice.make("dml", 0), np.float32, [2, 3], x.ctypes.data)
    # an output of another shape than the memory bound for it: refused before anything is written
    small = np.zeros((1, 3), np.float32)
    io.bind_input("X", "cpu", 0, np.float32, [2, 3], x.ctypes.data)
    io.bind_output("Y", "cpu", 0, np.float32, [1, 3], small.ctypes.data)
    with pytest.raises(OnnxkitError, match=r"output 'Y': shape \[2, 3\] does not match"):
        sess.run_with_iobinding(io)
    assert not small.any()


def test_a_cuda_address_is_device_memory():
    torch = pytest.importorskip("torch")
    io = InferenceSession(_model(TP.FLOAT)).io_binding()
    if not torch.cuda.is_available():   # onnxkit must not read device memory as host memory
        with pytest.raises(OnnxkitError, match=r"bind_input\('X'\): buffer_ptr is device memory on cuda:0, but "
                                               "torch sees no CUDA device"):
            io.bind_input("X", "cuda", 0, np.float32, [2, 3], 4096)
        return
    x = torch.ones((2, 3), device="cuda")
    io.bind_input("X", "cuda", 0, np.float32, [2, 3], x.data_ptr())
    io.bind_output("Y")
    io._session.run_with_iobinding(io)
    assert io.copy_outputs_to_cpu()[0].tolist() == [[-1.0] * 3] * 2
