"""LoRA adapters (onnxkit/runtime/adapter_format.py, lora.py, lora_files.py) against onnxruntime
1.32: files written by either are read by the other, an active adapter changes a run as it
changes onnxruntime's, and a damaged file is a clear onnxkit error."""

from __future__ import annotations

import ctypes
import logging

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")
from onnx import TensorProto as TP, helper  # noqa: E402

from onnxkit import InferenceSession, OnnxkitError, OrtValue, RunOptions  # noqa: E402
from onnxkit.errors import NoSuchFileError  # noqa: E402
from onnxkit.runtime.adapter_format import STORABLE, build_adapter, read_adapter  # noqa: E402
from onnxkit.runtime.lora import LoraAdapter  # noqa: E402
from onnxkit.runtime.lora_files import AdapterFormat  # noqa: E402

#: one parameter per element type onnxruntime takes (its numpy dtype), odd shapes included
DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
          10: np.float16, 11: np.float64, 12: np.uint32, 13: np.uint64, 16: ml_dtypes.bfloat16,
          17: ml_dtypes.float8_e4m3fn, 18: ml_dtypes.float8_e4m3fnuz, 19: ml_dtypes.float8_e5m2,
          20: ml_dtypes.float8_e5m2fnuz}
SHAPES = [(5, 2), (3,), (1, 1, 7), (0, 4), (2, 3)]


def _params() -> dict:
    rng = np.random.default_rng(0)
    out = {}
    for i, (tag, dt) in enumerate(DTYPES.items()):
        shape = SHAPES[i % len(SHAPES)]
        out[f"p{tag}_é"] = (rng.integers(0, 7, size=shape).astype(np.float32).astype(dt), tag)
    return out


def _ort_value(arr, tag):
    bits = {1: np.uint8, 2: np.uint16}.get(arr.dtype.itemsize) if tag >= 16 else None
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(arr.view(bits) if bits else arr, tag)


def test_the_element_types_are_those_onnxruntime_takes():
    assert STORABLE == set(DTYPES)


def test_onnxruntime_reads_what_onnxkit_writes(tmp_path):
    params = _params()
    fmt = AdapterFormat()
    fmt.set_adapter_version(3)
    fmt.set_model_version(-4)
    fmt.set_parameters({k: OrtValue.ortvalue_from_numpy_with_onnx_type(a, t) for k, (a, t) in params.items()})
    path = tmp_path / "kit.onnx_adapter"
    fmt.export_adapter(path)
    got = ort.AdapterFormat.read_adapter(str(path))
    assert (got.get_format_version(), got.get_adapter_version(), got.get_model_version()) == (1, 3, -4)
    back = got.get_parameters()
    assert sorted(back) == sorted(params)
    for name, (arr, tag) in params.items():
        v = back[name]
        assert (v.element_type(), v.shape()) == (tag, list(arr.shape)), name
        assert _octets(v) == arr.tobytes(), name


def _octets(v) -> bytes:
    """The contents of an onnxruntime OrtValue (its numpy() knows no bfloat16 or float8)."""
    n = v.tensor_size_in_bytes()
    return ctypes.string_at(v.data_ptr(), n) if n else b""


def test_onnxkit_reads_what_onnxruntime_writes(tmp_path):
    params = _params()
    fmt = ort.AdapterFormat()
    fmt.set_adapter_version(7)
    fmt.set_model_version(2)
    fmt.set_parameters({k: _ort_value(a, t) for k, (a, t) in params.items()})
    path = tmp_path / "ort.onnx_adapter"
    fmt.export_adapter(str(path))
    got = AdapterFormat.read_adapter(path)
    assert (got.get_format_version(), got.get_adapter_version(), got.get_model_version()) == (1, 7, 2)
    back = got.get_parameters()
    assert sorted(back) == sorted(params)
    for name, (arr, tag) in params.items():
        v = back[name]
        assert (v.element_type(), v.shape(), v.numpy().dtype) == (tag, list(arr.shape), arr.dtype), name
        assert v.numpy().tobytes() == arr.tobytes(), name
        assert not v.numpy().flags.writeable  # a view of the mapped file


def _lora_model() -> bytes:
    """onnxruntime's two_params_lora_model: output = x @ W + (x @ A) @ B, A [4, dim] and B [dim, 4]
    inputs whose initializers (dim 0) are their defaults."""
    w = np.arange(1, 17, dtype=np.float32).reshape(4, 4)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["input_x", "weight_x"], ["mx"]),
         helper.make_node("MatMul", ["input_x", "lora_param_a"], ["ma"]),
         helper.make_node("MatMul", ["ma", "lora_param_b"], ["mb"]),
         helper.make_node("Add", ["mx", "mb"], ["output"])], "lora",
        [helper.make_tensor_value_info("input_x", TP.FLOAT, [4, 4]),
         helper.make_tensor_value_info("lora_param_a", TP.FLOAT, [4, "dim"]),
         helper.make_tensor_value_info("lora_param_b", TP.FLOAT, ["dim", 4])],
        [helper.make_tensor_value_info("output", TP.FLOAT, [4, 4])],
        [helper.make_tensor("weight_x", TP.FLOAT, [4, 4], w.ravel()),
         helper.make_tensor("lora_param_a", TP.FLOAT, [4, 0], []),
         helper.make_tensor("lora_param_b", TP.FLOAT, [0, 4], [])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


A1, B1 = np.array([[3], [4], [5], [6]], np.float32), np.array([[7, 8, 9, 10]], np.float32)
A2, B2 = np.full((4, 2), 0.5, np.float32), np.arange(8, dtype=np.float32).reshape(2, 4)
X = np.ones((4, 4), np.float32)


def _write(path, params: dict):
    """An adapter file written by onnxruntime."""
    fmt = ort.AdapterFormat()
    fmt.set_parameters({k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in params.items()})
    fmt.export_adapter(str(path))
    return str(path)


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    d = tmp_path_factory.mktemp("lora")
    return {"one": _write(d / "one.onnx_adapter", {"lora_param_a": A1, "lora_param_b": B1}),
            "two": _write(d / "two.onnx_adapter", {"lora_param_a": A2, "lora_param_b": B2}),
            "a_only": _write(d / "a.onnx_adapter", {"lora_param_a": A2}),
            "unknown": _write(d / "u.onnx_adapter", {"nope": A1}),
            "constant": _write(d / "w.onnx_adapter", {"weight_x": np.zeros((4, 4), np.float32)})}


def _both(adapter_paths, feeds, method="run"):
    """The output of onnxkit and of onnxruntime with these adapter files active, or the error."""
    outs, alive = [], []   # onnxruntime's RunOptions does not keep its adapters alive: the test must
    for lib, session, run_options, lora in [
            ("onnxkit", InferenceSession(_lora_model()), RunOptions(), LoraAdapter),
            ("onnxruntime", ort.InferenceSession(_lora_model(), providers=["CPUExecutionProvider"]),
             ort.RunOptions(), ort.LoraAdapter)]:
        for p in adapter_paths:
            a = lora()
            if p is not None:
                a.Load(p)
            run_options.add_active_adapter(a)
            alive.append(a)
        try:
            if method == "run":
                outs.append(session.run(None, feeds, run_options)[0])
            else:
                value = OrtValue if lib == "onnxkit" else ort.OrtValue
                got = session.run_with_ort_values(None, {k: value.ortvalue_from_numpy(v) for k, v in feeds.items()},
                                                  run_options)
                outs.append(got[0].numpy())
        except Exception as exc:  # noqa: BLE001 (onnxruntime's InvalidArgument is no RuntimeError)
            outs.append(type(exc).__mro__)
    return outs


@pytest.mark.parametrize("active, feeds", [
    ([], {"input_x": X}),
    (["one"], {"input_x": X}),
    (["one"], {"input_x": X, "lora_param_a": A2, "lora_param_b": B2}),   # the adapter's values win
    (["one", "two"], {"input_x": X}),                                     # the first adapter's win
    (["two", "one"], {"input_x": X}),
    (["a_only"], {"input_x": X, "lora_param_b": B2}),                     # a feed and an adapter together
    ([None], {"input_x": X}),                                             # never loaded: no parameters
])
@pytest.mark.parametrize("method", ["run", "run_with_ort_values"])
def test_an_active_adapter_changes_the_run_as_in_onnxruntime(adapters, active, feeds, method):
    kit, ref = _both([adapters[a] if a else None for a in active], feeds, method)
    np.testing.assert_array_equal(kit, ref)
    if active == ["one"]:   # onnxruntime's own test's expected output
        assert kit[0].tolist() == [154.0, 176.0, 198.0, 220.0]


@pytest.mark.parametrize("which", ["unknown", "constant"])
def test_a_parameter_that_names_no_input_is_refused_as_by_onnxruntime(adapters, which):
    kit, ref = _both([adapters[which]], {"input_x": X})
    assert isinstance(kit, tuple) and isinstance(ref, tuple)   # both refused
    with pytest.raises(OnnxkitError, match="not an input of the model|constant of the model"):
        a = LoraAdapter()
        a.Load(adapters[which])
        ro = RunOptions()
        ro.add_active_adapter(a)
        InferenceSession(_lora_model()).run(None, {"input_x": X}, ro)


def test_iobinding_async_and_vector_runs_ignore_adapters_with_a_warning(adapters, caplog):
    s = InferenceSession(_lora_model())
    a = LoraAdapter()
    a.Load(adapters["one"])
    ro = RunOptions()
    ro.add_active_adapter(a)
    base = s.run(None, {"input_x": X})[0]
    io = s.io_binding()
    io.bind_cpu_input("input_x", X)
    io.bind_output("output")
    with caplog.at_level(logging.WARNING, logger="onnxkit.run"):
        s.run_with_iobinding(io, ro)
    np.testing.assert_array_equal(io.copy_outputs_to_cpu()[0], base)
    assert "run_with_iobinding has active adapters specified, but won't have an effect" in caplog.text
    fetches = []
    with caplog.at_level(logging.WARNING, logger="onnxkit.run"):
        s.run_with_ortvaluevector(ro, ["input_x"], [OrtValue.ortvalue_from_numpy(X)], ["output"], fetches, None)
    np.testing.assert_array_equal(fetches[0].numpy(), base)
    assert "run_with_ortvaluevector has active adapters" in caplog.text
    assert ro._active_adapters == [a]   # the caller's options are left as they were


def test_load_from_array_and_the_adapter_of_onnxruntime_s_test(adapters):
    with open(adapters["one"], "rb") as fh:
        data = fh.read()
    a = LoraAdapter()
    a.LoadFromArray(data)
    ro = RunOptions()
    ro.add_active_adapter(a)
    assert InferenceSession(_lora_model()).run(None, {"input_x": X}, ro)[0][0].tolist() == [154, 176, 198, 220]


# -- refusals ------------------------------------------------------------------------------------
def test_what_onnxruntime_could_not_read_back_is_refused_on_export(tmp_path):
    cases = [({"s": OrtValue.ortvalue_from_numpy(np.float32(3))}, "a scalar .* at least one dimension"),
             ({"b": OrtValue.ortvalue_from_numpy(np.array([True]))}, "element type 9 .BOOL. is not a LoRA"),
             ({"c": OrtValue.ortvalue_from_numpy(np.array([1j], np.complex64))}, "element type 14"),
             ({"": OrtValue.ortvalue_from_numpy(np.ones(2, np.float32))}, "non-empty strings")]
    for params, msg in cases:
        fmt = AdapterFormat()
        fmt.set_parameters(params)
        with pytest.raises(OnnxkitError, match=msg):
            fmt.export_adapter(tmp_path / "x.onnx_adapter")
    with pytest.raises(OnnxkitError, match="must be a str name and an OrtValue"):
        AdapterFormat().set_parameters({"a": np.ones(2, np.float32)})
    with pytest.raises(OnnxkitError, match="adapter_version must be an int32"):
        AdapterFormat().set_adapter_version(2**31)


def test_missing_and_empty_files_are_named(tmp_path):
    with pytest.raises(NoSuchFileError, match="LoraAdapter.Load: no such file"):
        LoraAdapter().Load(tmp_path / "missing.onnx_adapter")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(OnnxkitError, match="is empty, not an adapter file"):
        AdapterFormat.read_adapter(tmp_path / "empty")
    with pytest.raises(TypeError, match="expected a LoraAdapter"):
        RunOptions().add_active_adapter(AdapterFormat())


def _valid() -> bytes:
    return build_adapter({"a": (A1, 1), "b": (np.arange(6, dtype=np.int64).reshape(2, 3), 7)}, 1, 2)


def test_a_file_onnxruntime_refuses_is_refused_with_what_is_wrong(tmp_path):
    good = _valid()
    bad_identifier = good[:4] + b"XXXX" + good[8:]
    with pytest.raises(OnnxkitError, match="not an onnxruntime adapter file .no 'TORT' identifier"):
        read_adapter(bad_identifier)
    root = int.from_bytes(good[:4], "little")
    version2 = bytearray(good)
    version2[root + 4:root + 8] = (2).to_bytes(4, "little")   # format_version, the root table's first field
    with pytest.raises(OnnxkitError, match="adapter format version 2 is not supported"):
        read_adapter(bytes(version2))
    for data in (bad_identifier, bytes(version2)):
        (tmp_path / "bad").write_bytes(data)
        with pytest.raises(RuntimeError):
            ort.AdapterFormat.read_adapter(str(tmp_path / "bad"))


def test_every_truncation_and_byte_flip_reads_or_is_an_onnxkit_error():
    good = _valid()
    assert read_adapter(good).parameters["b"].tolist() == [[0, 1, 2], [3, 4, 5]]
    for n in range(len(good)):
        try:
            contents = read_adapter(good[:n])
        except OnnxkitError:
            continue
        assert len(good) - n < 8 and contents.parameters["b"].tolist() == [[0, 1, 2], [3, 4, 5]]  # padding cut
    rng = np.random.default_rng(1)
    for _ in range(400):
        data = bytearray(good)
        for i in rng.integers(0, len(data), size=3):
            data[i] = int(rng.integers(0, 256))
        try:
            read_adapter(bytes(data))
        except OnnxkitError:
            pass
