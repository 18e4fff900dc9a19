"""No ConformanceWarning on stderr once the caller has asked onnxruntime for errors only
(``SessionOptions.log_severity_level`` 3 or 4, ``set_default_logger_severity(3)``), with
onnxkit called directly and standing in for onnxruntime under the runner; the warning is
printed at onnxruntime's default severity (2), so the test can fail."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def ir3_model(tmp_path_factory):
    """An IR version 3 model whose initializer is not a graph input: a warning that breaks a SHALL."""
    onnx = pytest.importorskip("onnx")
    h, f = onnx.helper, onnx.TensorProto.FLOAT
    w = h.make_tensor("W", f, [2], [1.0, 2.0])
    g = h.make_graph([h.make_node("Mul", ["X", "W"], ["Y"])], "g", [h.make_tensor_value_info("X", f, [2])],
                     [h.make_tensor_value_info("Y", f, [2])], [w])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 7)], ir_version=3)
    path = tmp_path_factory.mktemp("ir3") / "ir3.onnx"
    path.write_bytes(m.SerializeToString())
    return str(path)


def _stderr(code: str, standin: bool, tmp_path) -> str:
    """stderr of ``code`` run in a fresh process: ``ort`` is onnxkit, or, standing in, the
    ``onnxruntime`` module of a program run by ``python -m onnxkit.ort``."""
    head = "import numpy as np, onnxruntime as ort\n" if standin else "import numpy as np, onnxkit as ort\n"
    script = tmp_path / "probe.py"
    script.write_text(head + code, encoding="utf-8")
    cmd = [sys.executable, *(["-m", "onnxkit.ort"] if standin else []), str(script)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "[1. 2.]" in proc.stdout   # the model ran
    return proc.stderr


RUN = "print(s.run(None, {'X': np.ones(2, np.float32)})[0])\n"
CASES = {
    "default": ("s = ort.InferenceSession(%r)\n" + RUN, True),
    "session severity 3": ("so = ort.SessionOptions(); so.log_severity_level = 3\n"
                           "s = ort.InferenceSession(%r, so)\n" + RUN, False),
    "session severity 4": ("so = ort.SessionOptions(); so.log_severity_level = 4\n"
                           "s = ort.InferenceSession(%r, so)\n" + RUN, False),
    "default severity 3": ("ort.set_default_logger_severity(3)\ns = ort.InferenceSession(%r)\n" + RUN, False),
}


@pytest.mark.parametrize("standin", [False, True], ids=["onnxkit", "standing-in"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_conformance_warning_obeys_onnxruntime_s_log_severity(ir3_model, case, standin, tmp_path):
    code, printed = CASES[case]
    err = _stderr(code % ir3_model, standin, tmp_path)
    assert ("ConformanceWarning" in err) is printed, err
    if not printed:
        assert err == ""
