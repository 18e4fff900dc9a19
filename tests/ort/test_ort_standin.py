"""onnxkit standing in for onnxruntime: install_as_onnxruntime, the runner, `onnxkit exec`, the
submodules clients import, the status exception classes, the module functions, backend, datasets."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import onnxkit
from onnxkit import errors, status
from onnxkit.ort import install

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def standin():
    """onnxkit installed as onnxruntime for one test, the real one (if any) restored after."""
    saved = {n: m for n, m in sys.modules.items() if n == "onnxruntime" or n.startswith("onnxruntime.")}
    onnxkit.install_as_onnxruntime()
    yield sys.modules["onnxruntime"]
    install.uninstall()
    sys.modules.update(saved)


def test_import_onnxruntime_gives_onnxkit_and_its_submodules(standin):
    import onnxruntime
    import onnxruntime.backend
    import onnxruntime.capi._pybind_state as C
    import onnxruntime.datasets
    from onnxruntime.capi import onnxruntime_pybind11_state as state
    from onnxruntime.capi.onnxruntime_inference_collection import InferenceSession
    from onnxruntime.transformers.io_binding_helper import TypeHelper

    assert onnxruntime is sys.modules["onnxkit.ort"] and onnxruntime.InferenceSession is onnxkit.InferenceSession
    assert InferenceSession is onnxkit.InferenceSession and C.OrtValue is onnxkit.OrtValue
    assert state.InvalidArgument is status.InvalidArgument and onnxruntime.backend.prepare
    assert onnxruntime.__version__ == onnxruntime.get_version_string()
    assert TypeHelper.ort_type_to_numpy_type("tensor(float)") is np.float32
    assert onnxruntime.capi.onnxruntime_pybind11_state is state
    with pytest.raises(ModuleNotFoundError, match="onnxkit stands in"):
        import onnxruntime.quantization  # noqa: F401  (not provided: never half the real package)


def test_install_replaces_modules_imported_before_and_uninstall_undoes_it():
    fake = type(sys)("onnxruntime")
    saved = {n: m for n, m in sys.modules.items() if n == "onnxruntime" or n.startswith("onnxruntime.")}
    sys.modules["onnxruntime"] = fake
    try:
        onnxkit.install_as_onnxruntime()
        onnxkit.install_as_onnxruntime()  # idempotent
        assert sys.modules["onnxruntime"] is sys.modules["onnxkit.ort"] and install.installed()
        assert sum(f is install._FINDER for f in sys.meta_path) == 1
        install.uninstall()
        assert not install.installed() and "onnxruntime" not in sys.modules
    finally:
        install.uninstall()
        sys.modules.update(saved)


def _script(tmp_path):
    path = tmp_path / "client.py"
    path.write_text(textwrap.dedent("""
        import sys, subprocess
        import onnxruntime as ort
        from onnxruntime.capi._pybind_state import OrtDevice
        import numpy as np
        sess = ort.InferenceSession(ort.datasets.get_example("mul_1.onnx"))
        y = sess.run(None, {"X": np.full((3, 2), 2, np.float32)})[0]
        child = subprocess.run([sys.executable, "-c", "import onnxruntime; print(onnxruntime.__name__)"],
                               capture_output=True, text=True).stdout.strip()
        print(ort.__name__, float(y.sum()), sys.argv[1:], child)
    """))
    return path


def test_the_runner_runs_a_script_and_a_module_unchanged(tmp_path):
    env = {**os.environ, "PYTHONPATH": REPO, "ONNXKIT_DATASETS": str(tmp_path)}
    out = subprocess.run([sys.executable, "-m", "onnxkit.ort", str(_script(tmp_path)), "a", "b"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["onnxkit.ort", "42.0", "['a',", "'b']", "onnxkit.ort"]  # children too
    mod = subprocess.run([sys.executable, "-m", "onnxkit.ort", "-m", "json.tool", "--help"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert mod.returncode == 0 and "json.tool" in mod.stdout
    bad = subprocess.run([sys.executable, "-m", "onnxkit.ort"], env=env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_onnxkit_exec_runs_a_command_with_onnxkit_standing_in(tmp_path):
    env = {**os.environ, "PYTHONPATH": REPO, "ONNXKIT_DATASETS": str(tmp_path)}
    code = ("import importlib.metadata as md, onnxruntime; "
            "print(onnxruntime.__name__, md.version('onnxruntime'))")
    out = subprocess.run([sys.executable, "-m", "onnxkit.cli", "exec", "--", sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["onnxkit.ort", onnxkit.ort.ORT_API_VERSION]
    failing = subprocess.run([sys.executable, "-m", "onnxkit.cli", "exec", "--", sys.executable, "-c",
                              "raise SystemExit(7)"], env=env, capture_output=True, timeout=300)
    assert failing.returncode == 7
    missing = subprocess.run([sys.executable, "-m", "onnxkit.cli", "exec", "--", "no-such-command-xyz"], env=env,
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 127 and "no such command" in missing.stderr


# -- errors -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, ort", [
    (errors.OnnxkitError, status.Fail), (errors.DecodeError, status.InvalidProtobuf),
    (errors.NoSuchFileError, status.NoSuchFile), (errors.ValidationError, status.InvalidGraph),
    (errors.UnsupportedOperatorError, status.NotImplemented), (errors.EvaluationError, status.RuntimeException),
    (errors.PluginError, status.EPFail), (onnxkit.InputError, status.InvalidArgument),
])
def test_onnxkit_errors_are_onnxruntimes_status_classes_and_runtime_errors(cls, ort):
    assert issubclass(cls, ort) and issubclass(cls, RuntimeError) and issubclass(cls, errors.OnnxkitError)


def test_caught_as_onnxruntime_code_catches_them(tmp_path, standin):
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument, InvalidProtobuf, NoSuchFile

    with pytest.raises(NoSuchFile):
        standin.InferenceSession(str(tmp_path / "absent.onnx"))
    with pytest.raises(FileNotFoundError):
        standin.InferenceSession(str(tmp_path / "absent.onnx"))
    with pytest.raises(InvalidProtobuf):
        standin.InferenceSession(b"\xff\xff\xff")
    sess = standin.InferenceSession(standin.datasets.get_example("mul_1.onnx"))
    with pytest.raises(InvalidArgument, match=r"Required inputs \(\['X'\]\) are missing"):
        sess.run(None, {})
    with pytest.raises(ValueError):
        sess.run(None, {"X": np.zeros((3, 3), np.float32)})


# -- module functions -------------------------------------------------------------------------
def test_module_functions(standin):
    ort = standin
    assert "Build Info" in ort.get_build_info() and "CPUExecutionProvider" in ort.get_all_providers()
    assert ort.get_all_providers()[-1] == "CPUExecutionProvider"
    ort.disable_telemetry_events()
    ort.enable_telemetry_events()
    got = []
    ort.set_default_logger_callback(lambda *a: got.append(a))
    try:
        logging.getLogger("onnxkit.run").warning("hello %s", "there")
    finally:
        ort.set_default_logger_callback(None)
    assert got and got[0][0] == 2 and got[0][4] == "hello there"
    ort.set_default_logger_verbosity(1)
    with pytest.raises(NotImplementedError, match="execution provider libraries"):
        ort.register_execution_provider_library("x", "/nope.so")
    with pytest.raises(TypeError, match="add_active_adapter: expected a LoraAdapter, got NoneType"):
        ort.RunOptions().add_active_adapter(None)
    assert [d.ep_name for d in ort.get_ep_devices()] == ort.get_available_providers()


def test_set_seed_seeds_sessions_created_later():
    from onnx import TensorProto, helper

    from onnxkit.ort.functions import set_seed
    from onnxkit.runtime.defaults import DEFAULTS

    g = helper.make_graph([helper.make_node("RandomUniform", [], ["y"], shape=[4], dtype=TensorProto.FLOAT)], "g", [],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    try:
        set_seed(7)
        a = onnxkit.InferenceSession(m).run(None, {})[0]
        b = onnxkit.InferenceSession(m).run(None, {})[0]
        set_seed(8)
        c = onnxkit.InferenceSession(m).run(None, {})[0]
    finally:
        DEFAULTS["seed"] = None
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_global_thread_pools_require_sessions_without_their_own():
    from onnxkit.ort.functions import set_global_thread_pool_sizes
    from onnxkit.runtime.defaults import DEFAULTS

    path = onnxkit.ort.datasets.get_example("mul_1.onnx")
    try:
        set_global_thread_pool_sizes(2, 2)
        with pytest.raises(RuntimeError, match="use_per_session_threads"):
            onnxkit.InferenceSession(path)
        so = onnxkit.SessionOptions()
        so.use_per_session_threads = False
        sess = onnxkit.InferenceSession(path, so)
        assert sess.get_session_options().intra_op_num_threads == 2 and so.intra_op_num_threads == 0
    finally:
        DEFAULTS["global_threads"] = None


# -- backend and datasets ---------------------------------------------------------------------
def test_datasets_are_written_by_onnxkit_and_run(tmp_path, monkeypatch):
    from onnxkit.ort import datasets

    monkeypatch.setenv("ONNXKIT_DATASETS", str(tmp_path))
    for name in ("sigmoid.onnx", "mul_1.onnx", "logreg_iris.onnx"):
        assert datasets.get_example(name).startswith(str(tmp_path))
    x = np.linspace(-3, 3, 60, dtype=np.float32).reshape(3, 4, 5)
    (y,) = onnxkit.InferenceSession(datasets.get_example("sigmoid.onnx")).run(None, {"x": x})
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-x)), rtol=1e-6, atol=2e-7)  # MLAS's logistic: docs/decisions.md
    sess = onnxkit.InferenceSession(datasets.get_example("logreg_iris.onnx"))
    labels, probs = sess.run(None, {"float_input": np.array([[1, 2], [5, 0.5]], np.float32)})
    assert labels.dtype == np.int64 and len(probs) == 2 and sorted(probs[0]) == [0, 1, 2]
    assert abs(sum(probs[0].values()) - 1) < 1e-5
    assert [a.shape for a in sess.get_outputs()] == [["N"], []]   # a sequence of maps: the empty shape
    with pytest.raises(FileNotFoundError, match="examples"):
        datasets.get_example("resnet.onnx")


def test_backend_prepare_run_supports_device_and_is_compatible():
    import onnx

    from onnxkit.ort import backend

    path = onnxkit.ort.datasets.get_example("mul_1.onnx")
    x = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    rep = backend.prepare(path)
    np.testing.assert_array_equal(rep.run(x)[0], x * x)
    np.testing.assert_array_equal(backend.run(onnx.load(path), [x])[0], x * x)        # a ModelProto
    np.testing.assert_array_equal(backend.OnnxRuntimeBackend.run_model(path, {"X": x})[0], x * x)
    assert backend.supports_device("CPU") and not backend.supports_device("FPGA")
    assert backend.is_compatible(path)
    with pytest.raises(onnxkit.OnnxkitError, match="'optimized_model_filepath' is not permitted"):
        backend.prepare(path, optimized_model_filepath=path)
    with pytest.raises(onnxkit.OnnxkitError, match="2 inputs given, the model has 1"):
        backend.prepare(onnxkit.ort.datasets.get_example("sigmoid.onnx")).run([x, x])


def test_check_and_normalize_provider_args():
    from onnxkit.ort.capi.onnxruntime_inference_collection import check_and_normalize_provider_args as norm

    assert norm(None, None, ["a"]) == ([], [])
    assert norm([("a", {1: 2}), "b"], None, ["a", "b"]) == (["a", "b"], [{"1": "2"}, {}])
    with pytest.warns(UserWarning, match="Duplicate"):
        assert norm(["a", "a"], [{}, {}], ["a"]) == (["a"], [{}])
    with pytest.warns(UserWarning, match="not in available provider names"):
        norm(["z"], None, ["a"])
    for providers, options in ((3, None), ([3], None), (["a"], 3), (["a"], ["x"]), (["a", "b"], [{}]),
                               ([("a", {})], [{}])):
        with pytest.raises(ValueError):
            norm(providers, options, ["a", "b"])


def test_cuda_is_listed_and_chosen_only_where_cuda_is(monkeypatch):
    from onnxkit.runtime import providers

    path = onnxkit.ort.datasets.get_example("mul_1.onnx")
    monkeypatch.setattr(providers, "cuda_available", lambda: False)
    assert "CUDAExecutionProvider" not in onnxkit.get_available_providers()
    with pytest.warns(UserWarning, match="Specified provider 'CUDAExecutionProvider' is not in available"):
        sess = onnxkit.InferenceSession(path, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    monkeypatch.setattr(providers, "cuda_available", lambda: True)
    assert onnxkit.get_available_providers()[0] == "CUDAExecutionProvider"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sess = onnxkit.InferenceSession(path, providers=["CUDAExecutionProvider"])
    assert sess.get_providers() == ["CUDAExecutionProvider"]
