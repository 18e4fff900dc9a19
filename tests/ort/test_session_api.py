"""The session beyond onnxruntime's snippets: fresh outputs, feeds, providers, device values, pickling."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxkit
from onnxkit import InferenceSession, OrtValue, RunOptions, SessionOptions
from onnxkit.errors import OnnxkitError, UnsupportedOperatorError
from onnxkit.registry import build_registry
from onnxkit.runtime import InputError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DIGITS = str(EXAMPLES / "digits.onnx")
IMAGES = np.load(EXAMPLES / "digits_input.npy")
F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=17, **kw):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], **kw).SerializeToString()


def _aliasing_model():
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "W")
    return _model([helper.make_node("Identity", ["X"], ["A"]), helper.make_node("Flatten", ["X"], ["B"]),
                   helper.make_node("Identity", ["W"], ["C"]), helper.make_node("Identity", ["A"], ["D"])],
                  [helper.make_tensor_value_info("X", F, [2, 3])],
                  [helper.make_tensor_value_info(n, F, [2, 3]) for n in "ABCD"], [w])


# -- outputs ----------------------------------------------------------------------------------
def test_outputs_alias_nothing_the_caller_or_the_model_holds():
    sess = InferenceSession(_aliasing_model())
    x = np.ones((2, 3), np.float32)
    a, b, c, d = sess.run(None, {"X": x})
    for out in (a, b, c, d):
        assert out.flags.writeable and not np.shares_memory(out, x)
    assert not np.shares_memory(a, d)
    b[...] = 7
    c[...] = -1
    assert (x == 1).all()
    a2, b2, c2, d2 = sess.run(None, {"X": x})
    np.testing.assert_array_equal(c2, np.arange(6, dtype=np.float32).reshape(2, 3))  # the constant is intact


# -- feeds ------------------------------------------------------------------------------------
def _add_model(elem=F, shape=(2, 2)):
    return _model([helper.make_node("Add", ["X", "Y"], ["Z"])],
                  [helper.make_tensor_value_info("X", elem, list(shape)), helper.make_tensor_value_info("Y", elem, [])],
                  [helper.make_tensor_value_info("Z", elem, list(shape))])


def test_python_scalars_and_nested_lists_are_fed_as_the_declared_type():
    sess = InferenceSession(_add_model())
    (z,) = sess.run(None, {"X": [[1, 2], [3, 4]], "Y": 0.5})
    assert z.dtype == np.float32
    np.testing.assert_array_equal(z, [[1.5, 2.5], [3.5, 4.5]])
    (z,) = sess.run(None, {"X": np.ones((2, 2), np.float32), "Y": np.float32(2)})
    assert (z == 3).all()


def test_a_float_list_is_not_truncated_into_an_integer_input():
    sess = InferenceSession(_add_model(TensorProto.INT64))
    with pytest.raises(InputError, match="integer"):
        sess.run(None, {"X": [[1.5, 2], [3, 4]], "Y": 1})
    (z,) = sess.run(None, {"X": [[1, 2], [3, 4]], "Y": 1})
    assert z.dtype == np.int64 and z.tolist() == [[2, 3], [4, 5]]


@pytest.mark.parametrize("feed", [None, [IMAGES], "image"])
def test_a_feed_that_is_not_a_dict_is_an_input_error(feed):
    sess = InferenceSession(DIGITS)
    with pytest.raises(InputError, match="input_feed must be a dict"):
        sess.run(None, feed)


# -- providers --------------------------------------------------------------------------------
def _loop_model(trip=3):
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Identity", ["v"], ["v_out"])],
                             "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                                      helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                      helper.make_tensor_value_info("v", F, [1])],
                             [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("v_out", F, [1])])
    m = numpy_helper.from_array(np.array(trip, np.int64), "M")
    return _model([helper.make_node("Loop", ["M", "", "V"], ["V_out"], body=body)],
                  [helper.make_tensor_value_info("V", F, [1])], [helper.make_tensor_value_info("V_out", F, [1])], [m])


def _dft_model():
    """A DFT (opset 17): its kernel needs numpy's FFT (host-only), so the gpu backend runs it on cpu."""
    return _model([helper.make_node("Relu", ["X"], ["R"]), helper.make_node("DFT", ["R"], ["Y"], onesided=0)],
                  [helper.make_tensor_value_info("X", F, [1, 8, 1])], [helper.make_tensor_value_info("Y", F, [1, 8, 2])])


def test_cuda_runs_what_torch_lacks_on_the_cpu_fallback_node_by_node():
    sess = InferenceSession(_dft_model(), providers=["gpu", "CPUExecutionProvider"])
    assert sess.get_providers() == ["CUDAExecutionProvider"]
    assert [f.op_type for f in sess.fallbacks] == ["DFT"]          # the Relu runs on torch
    assert InferenceSession(_loop_model(), providers=["gpu"]).fallbacks == []   # a Loop does too
    x = np.arange(8, dtype=np.float32).reshape(1, 8, 1) - 3
    (y,) = sess.run(None, {"X": x})
    want = np.fft.fft(np.maximum(x[0, :, 0], 0))
    np.testing.assert_allclose(y[0, :, 0] + 1j * y[0, :, 1], want, rtol=1e-5, atol=1e-5)


def test_cuda_falls_back_to_cpu_when_the_gpu_backend_cannot_evaluate_an_operator(caplog):
    """Without a per-node fallback, onnxruntime's provider order decides: the whole model goes to the CPU."""
    reg = build_registry()
    reg.backends["gpu"].fallback = None
    caplog.set_level(logging.WARNING, logger="onnxkit")
    sess = InferenceSession(_dft_model(), providers=["gpu", "CPUExecutionProvider"], registry=reg)
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert any(r.name == "onnxkit.run" and "falling back" in r.getMessage() for r in caplog.records)
    with pytest.raises(UnsupportedOperatorError, match="DFT"):
        InferenceSession(_dft_model(), backend="gpu", registry=reg)


def test_a_missing_backend_names_the_pip_install():
    reg = build_registry(exclude=["gpu_backend"])
    with pytest.raises(OnnxkitError, match="pip install onnxkit-gpu"):
        InferenceSession(DIGITS, backend="gpu", registry=reg)
    sess = InferenceSession(DIGITS, providers=["CUDAExecutionProvider"], registry=reg)  # onnxruntime: falls back
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_providers_nothing_provides_are_an_error_and_options_are_kept():
    with pytest.raises(OnnxkitError, match="FooExecutionProvider"):
        InferenceSession(DIGITS, providers=["FooExecutionProvider"])
    sess = InferenceSession(DIGITS, providers=["TensorrtExecutionProvider", ("CPUExecutionProvider", {"arena": 1})])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert sess.get_provider_options() == {"CPUExecutionProvider": {"arena": "1"}}
    assert InferenceSession(DIGITS, "gpu").get_providers() == ["CUDAExecutionProvider"]  # onnxkit's positional backend


# -- device values (gpu backend: torch, on CUDA where there is one) ---------------------------
def test_torch_tensors_are_fed_and_kept_on_the_gpu_backend():
    torch = pytest.importorskip("torch")
    want = InferenceSession(DIGITS).run(None, {"image": IMAGES})[0]
    sess = InferenceSession(DIGITS, providers=["gpu"])
    assert sess.get_providers() == ["CUDAExecutionProvider"]
    (got,) = sess.run(None, {"image": torch.from_numpy(IMAGES)})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    (out,) = sess.run_with_ort_values(None, {"image": OrtValue(torch.from_numpy(IMAGES))})
    assert isinstance(out.to_torch(), torch.Tensor)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(InputError, match="axis 2 must be 8"):
        sess.run(None, {"image": torch.zeros((1, 1, 9, 8))})


def test_dlpack_in_and_out_shares_memory():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = OrtValue.from_dlpack(x)
    assert np.shares_memory(v.numpy(), x) and v.shape() == [2, 3] and v.data_type() == "tensor(float)"
    back = np.from_dlpack(OrtValue.ortvalue_from_numpy(x))
    assert np.shares_memory(back, x)
    torch = pytest.importorskip("torch")
    t = torch.utils.dlpack.from_dlpack(OrtValue.ortvalue_from_numpy(x).to_dlpack())
    assert t.data_ptr() == x.ctypes.data


def test_cuda_values_say_clearly_when_there_is_no_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        v = OrtValue.ortvalue_from_numpy(IMAGES, "cuda", 0)
        assert v.device_name() == "cuda"
        sess = InferenceSession(DIGITS, providers=["CUDAExecutionProvider"])
        io = sess.io_binding()
        io.bind_ortvalue_input("image", v)
        io.bind_output("probabilities", "cuda")
        sess.run_with_iobinding(io)
        assert io.get_outputs()[0].device_name() == "cuda"
    else:
        with pytest.raises(OnnxkitError, match="no CUDA device"):
            OrtValue.ortvalue_from_numpy(IMAGES, "cuda", 0)


# -- pickling ---------------------------------------------------------------------------------
@pytest.mark.usefixtures("first_run_policy")
def test_a_session_pickles_with_its_options_and_plans_again():
    so = SessionOptions()
    so.log_severity_level = 3
    sess = InferenceSession(DIGITS, so, providers=["CPUExecutionProvider"])
    copy = pickle.loads(pickle.dumps(sess))
    assert copy.get_session_options().log_severity_level == 3 and copy.get_providers() == ["CPUExecutionProvider"]
    assert copy.plan is not sess.plan
    np.testing.assert_array_equal(copy.run(None, {"image": IMAGES})[0], sess.run(None, {"image": IMAGES})[0])


def test_optimized_model_filepath_writes_the_model_and_a_custom_registry_is_not_pickled(tmp_path):
    so = SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "planned.onnx")
    InferenceSession(DIGITS, so)
    assert onnxkit.load(tmp_path / "planned.onnx") == onnxkit.load(DIGITS)
    sess = InferenceSession(DIGITS, registry=build_registry())
    with pytest.raises(OnnxkitError, match="registry"):
        pickle.dumps(sess)


@pytest.mark.usefixtures("first_run_policy")
def test_a_session_goes_to_a_spawned_process_pool():
    sess = InferenceSession(DIGITS)
    want = sess.run(None, {"image": IMAGES})[0]
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        got = pool.submit(sess.run, None, {"image": IMAGES}).result(timeout=300)[0]
    np.testing.assert_array_equal(got, want)


def test_a_loaded_model_pickles():
    model = onnxkit.load(DIGITS)  # tensors are views of the mapped file
    copy = pickle.loads(pickle.dumps(model))
    assert copy == model
    t = pickle.loads(pickle.dumps(model.graph.initializer[0]))
    np.testing.assert_array_equal(t.numpy(), model.graph.initializer[0].numpy())


# -- logging ----------------------------------------------------------------------------------
def test_logging_goes_to_the_onnxkit_loggers_and_follows_log_severity_level(caplog):
    caplog.set_level(logging.DEBUG, logger="onnxkit")
    InferenceSession(DIGITS)  # onnxruntime's default severity, 2: warnings only
    assert [r for r in caplog.records if r.levelno < logging.WARNING] == []
    so = SessionOptions()
    so.log_severity_level = 0  # verbose
    InferenceSession(DIGITS, so).run(None, {"image": IMAGES}, RunOptions())
    names = {r.name for r in caplog.records}
    assert {"onnxkit.load", "onnxkit.plan", "onnxkit.run"} <= names
    caplog.clear()
    so = SessionOptions()
    so.log_severity_level = 3  # errors only
    InferenceSession(DIGITS, so).run(None, {"image": IMAGES}, RunOptions())
    assert [r for r in caplog.records if r.levelno < logging.ERROR] == []


def test_the_library_prints_nothing_even_with_warnings(tmp_path):
    """An advisory warning (it breaks no SHALL) is only logged: nothing reaches stdout or stderr.
    (A warning that breaks a SHALL is one ``ConformanceWarning`` line: tests/engine/test_policy.py.)"""
    m = _model([helper.make_node("Relu", ["X"], ["Y"])], [helper.make_tensor_value_info("X", F, [2])],
               [helper.make_tensor_value_info("Y", F, [2])])
    model = onnxkit.load(m)
    model.opset_import.append(onnxkit.ir.OperatorSetId("", 17))  # imported twice: a checker warning
    onnxkit.save(model, tmp_path / "w.onnx")
    assert onnxkit.check_model(onnxkit.load(tmp_path / "w.onnx")).warnings
    code = ("import numpy as np, onnxkit; s = onnxkit.InferenceSession(r'%s'); "
            "s.run(None, {'X': np.ones(2, np.float32)})" % (tmp_path / "w.onnx"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""


# -- display ----------------------------------------------------------------------------------
def test_reprs_are_short():
    from onnxkit import ir

    assert repr(ir.Node(["x", "w"], ["y"], op_type="Conv")) == "Node(Conv, inputs=[x, w], outputs=[y])"
    nodes = [ir.Node([f"v{i}"], [f"v{i + 1}"], op_type="Relu") for i in range(5000)]
    model = ir.Model(ir_version=8, opset_import=[ir.OperatorSetId("", 13)],
                     graph=ir.Graph(node=nodes, name="big", input=[ir.ValueInfo("v0", ir.tensor_type(1, [1]))],
                                    output=[ir.ValueInfo("v5000", ir.tensor_type(1, [1]))]))
    text = repr(model)
    assert "\n" not in text and len(text) < 200 and "5000 nodes" in text
    assert "... +" in repr(ir.Graph(input=[ir.ValueInfo(f"i{k}") for k in range(50)]))
    sess = repr(InferenceSession(DIGITS))
    assert sess.startswith("InferenceSession('digits'") and "image: tensor(float)[N, 1, 8, 8]" in sess


def test_dir_and_help_show_the_public_api():
    import pydoc

    names = dir(onnxkit)
    for n in ("InferenceSession", "SessionOptions", "RunOptions", "OrtValue", "load", "save", "to_text",
              "get_available_providers", "check_model"):
        assert n in names and n in onnxkit.__all__
    assert "wire" not in names and "annotations" not in names
    assert "InferenceSession" in pydoc.render_doc(onnxkit)


def test_map_values_come_back_as_the_python_scalars_onnxruntime_returns():
    """ZipMap's probabilities: Python floats in the maps, not 0-d arrays (a corpus finding)."""
    g = helper.make_graph([helper.make_node("ZipMap", ["X"], ["Z"], domain="ai.onnx.ml", classlabels_int64s=[0, 1])],
                          "g", [helper.make_tensor_value_info("X", F, [None, 2])],
                          [helper.make_value_info("Z", helper.make_sequence_type_proto(helper.make_map_type_proto(
                              TensorProto.INT64, helper.make_tensor_type_proto(F, []))))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)])
    m.ir_version = 8
    out = InferenceSession(m.SerializeToString()).run(None, {"X": np.array([[0.25, 0.75]], np.float32)})[0]
    assert out == [{0: 0.25, 1: 0.75}] and all(type(v) is float for v in out[0].values())
