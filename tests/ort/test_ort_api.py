"""onnxruntime's documented Python usage, run against onnxruntime and onnxkit by changing only the module.

Every ``snippet_*`` function below is written as onnxruntime's documentation writes it, with
the module passed in as ``ort``; each test runs a snippet with ``onnxruntime`` and with
``onnxkit`` and asserts the two give the same results.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import onnxkit

ort_runtime = pytest.importorskip("onnxruntime")

DIGITS = str(Path(__file__).resolve().parents[2] / "examples" / "digits.onnx")
IMAGES = np.load(Path(DIGITS).with_name("digits_input.npy"))


# -- the snippets (onnxruntime's documentation, "Python API" and "Tutorials") -----------------
def snippet_basic(ort, path):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    input_name = sess.get_inputs()[0].name
    return sess.run(None, {input_name: IMAGES})


def snippet_session_options(ort, path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
    out_name = sess.get_outputs()[0].name
    got = sess.run([out_name], {"image": IMAGES})
    opts = sess.get_session_options()
    return got, opts.intra_op_num_threads, opts.log_severity_level


def snippet_positional_options_and_bytes(ort, path):
    with open(path, "rb") as fh:
        data = fh.read()
    sess = ort.InferenceSession(data, ort.SessionOptions(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"image": IMAGES})


def snippet_describe(ort, path):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    meta = sess.get_modelmeta()
    return ([(i.name, i.type, i.shape) for i in sess.get_inputs()],
            [(o.name, o.type, o.shape) for o in sess.get_outputs()],
            sess.get_providers(), sess.get_provider_options(),
            meta.producer_name, meta.graph_name, meta.domain, meta.description, meta.custom_metadata_map)


def snippet_available_providers(ort, path):
    return "CPUExecutionProvider" in ort.get_available_providers(), ort.get_device()


def snippet_run_options(ort, path):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ro = ort.RunOptions()
    ro.log_severity_level = 3
    ro.logid = "first"
    return sess.run(None, {"image": IMAGES}, ro)


def snippet_terminate(ort, path):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ro = ort.RunOptions()
    ro.terminate = True
    try:
        sess.run(None, {"image": IMAGES}, ro)
    except Exception as exc:
        return "terminate" in str(exc).lower()
    return "ran"


def snippet_ortvalue(ort, path):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = ort.OrtValue.ortvalue_from_numpy(IMAGES, "cpu", 0)
    results = sess.run_with_ort_values(["probabilities"], {"image": x})
    return (x.shape(), x.data_type(), x.device_name(), x.is_tensor(), x.has_value(),
            results[0].numpy(), results[0].shape())


def snippet_iobinding(ort, path):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    io_binding = sess.io_binding()
    io_binding.bind_cpu_input("image", IMAGES)
    io_binding.bind_output("probabilities")
    sess.run_with_iobinding(io_binding)
    return io_binding.copy_outputs_to_cpu()[0], io_binding.get_outputs()[0].shape()


def snippet_iobinding_ortvalues(ort, path):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    x = ort.OrtValue.ortvalue_from_numpy(IMAGES, "cpu", 0)
    y = ort.OrtValue.ortvalue_from_shape_and_type([2, 10], np.float32, "cpu", 0)
    io_binding = sess.io_binding()
    io_binding.bind_ortvalue_input("image", x)
    io_binding.bind_ortvalue_output("probabilities", y)
    sess.run_with_iobinding(io_binding)
    return y.numpy()


def snippet_list_feed(ort, path):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, {"image": IMAGES.tolist()})


def snippet_feed_every_input(ort, path):
    # the idiom that must not overwrite weights: IR-3 models list their initializers as inputs
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {i.name: np.ones([d if isinstance(d, int) else 1 for d in i.shape], np.float32) for i in sess.get_inputs()}
    return ([i.name for i in sess.get_inputs()], [i.name for i in sess.get_overridable_initializers()],
            sess.run(None, feed))


def snippet_profiling(ort, path):
    so = ort.SessionOptions()
    so.enable_profiling = True
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    sess.run(None, {"image": IMAGES})
    prof_file = sess.end_profiling()
    with open(prof_file) as fh:
        events = json.load(fh)
    os.remove(prof_file)
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    return sorted(e["args"]["op_name"] for e in nodes), all(e["ph"] == "X" and e["dur"] >= 0 for e in nodes)


def snippet_wrong_input_name(ort, path):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    try:
        sess.run(None, {"nope": IMAGES})
    except ValueError:
        return "ValueError"
    return "ran"


# -- the tests --------------------------------------------------------------------------------
def _same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), (a, b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (a, b)
        for k in a:
            _same(a[k], b[k])
    else:
        assert a == b, (a, b)


def _ir3_model(tmp_path) -> str:
    """A model in IR version 3 style: the weight is both an input and an initializer."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.full((1, 3), 2.0, np.float32), "w")
    g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["y"])], "ir3",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3]),
                           helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)], ir_version=3)
    path = tmp_path / "ir3.onnx"
    onnx.save(m, path)
    return str(path)


SNIPPETS = [snippet_basic, snippet_session_options, snippet_positional_options_and_bytes, snippet_describe,
            snippet_available_providers, snippet_run_options, snippet_terminate, snippet_ortvalue, snippet_iobinding,
            snippet_iobinding_ortvalues, snippet_list_feed, snippet_profiling, snippet_wrong_input_name]


@pytest.mark.parametrize("snippet", SNIPPETS, ids=lambda f: f.__name__)
def test_snippet_gives_what_onnxruntime_gives(snippet, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # profiles are written to the working directory
    theirs = snippet(ort_runtime, DIGITS)
    ours = snippet(onnxkit, DIGITS)
    _same(theirs, ours)


def test_initializer_inputs_are_not_listed_as_inputs(tmp_path):
    path = _ir3_model(tmp_path)
    theirs = snippet_feed_every_input(ort_runtime, path)
    ours = snippet_feed_every_input(onnxkit, path)
    assert ours[0] == ["x"] and ours[1] == []  # IR 3: onnxruntime lists no overridable initializer
    _same(theirs, ours)
    np.testing.assert_array_equal(ours[2][0], np.full((1, 3), 2.0, np.float32))  # the weight was not overwritten
