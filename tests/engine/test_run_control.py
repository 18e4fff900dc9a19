"""Profiling (onnxruntime's Chrome trace) and ending a run: RunOptions.terminate and run_time_limit_s."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxkit import InferenceSession, RunOptions, SessionOptions
from onnxkit.runtime import RunTerminated

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DIGITS = str(EXAMPLES / "digits.onnx")
IMAGES = np.load(EXAMPLES / "digits_input.npy")
F = TensorProto.FLOAT


def _long_loop(trip=10_000_000):
    """A Loop of ``trip`` iterations whose body adds 1 (would run for minutes)."""
    one = numpy_helper.from_array(np.ones(1, np.float32), "one")
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"]), helper.make_node("Add", ["v", "one"], ["v_out"])],
                             "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                                      helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                      helper.make_tensor_value_info("v", F, [1])],
                             [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("v_out", F, [1])])
    m = numpy_helper.from_array(np.array(trip, np.int64), "M")
    g = helper.make_graph([helper.make_node("Loop", ["M", "", "V"], ["V_out"], body=body)], "loop",
                          [helper.make_tensor_value_info("V", F, [1])], [helper.make_tensor_value_info("V_out", F, [1])],
                          [m, one])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _long_scan(length=2_000_000):
    """A Scan over ``length`` elements summing them into its state."""
    body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s_out"])], "body",
                             [helper.make_tensor_value_info("s", F, [1]), helper.make_tensor_value_info("x", F, [1])],
                             [helper.make_tensor_value_info("s_out", F, [1])])
    g = helper.make_graph([helper.make_node("Scan", ["S", "X"], ["S_out"], body=body, num_scan_inputs=1)], "scan",
                          [helper.make_tensor_value_info("S", F, [1]), helper.make_tensor_value_info("X", F, [length, 1])],
                          [helper.make_tensor_value_info("S_out", F, [1])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


# -- profiling --------------------------------------------------------------------------------
@pytest.mark.usefixtures("first_run_policy")
def test_profile_is_a_chrome_trace_with_one_event_per_node_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    so = SessionOptions()
    so.enable_profiling = True
    so.profile_file_prefix = "digits"
    sess = InferenceSession(DIGITS, so)
    assert sess.get_profiling_start_time_ns() > 0
    sess.run(None, {"image": IMAGES})
    sess.run(None, {"image": IMAGES[:1]})
    path = sess.end_profiling()
    assert Path(path).name.startswith("digits_") and path.endswith(".json")
    events = json.loads(Path(path).read_text())
    assert isinstance(events, list)  # the JSON array form of the Trace Event Format
    for e in events:
        assert e["ph"] == "X" and isinstance(e["ts"], (int, float)) and e["dur"] >= 0
        assert {"pid", "tid", "name", "cat", "args"} <= e.keys()
    nodes = [e for e in events if e["cat"] == "Node"]
    steps = [s.node for s in sess.plan.steps]
    assert len(nodes) == 2 * len(steps)  # exactly one event per executed node, per run
    assert [e["args"]["op_name"] for e in nodes] == [n.op_type for n in steps] * 2
    first_conv = next(e for e in nodes if e["args"]["op_name"] == "Conv")
    assert first_conv["args"]["input_type_shape"][0] == {"float": [2, 1, 8, 8]}
    runs = [e for e in events if e["cat"] == "Session" and e["name"] == "model_run"]
    assert len(runs) == 2
    assert sess.end_profiling() == ""  # profiling has stopped


@pytest.mark.usefixtures("first_run_policy")
def test_no_profile_when_profiling_is_off():
    assert InferenceSession(DIGITS).end_profiling() == ""


# -- ending a run -----------------------------------------------------------------------------
def test_terminate_from_another_thread_ends_a_long_loop():
    sess = InferenceSession(_long_loop())
    ro = RunOptions()
    timer = threading.Timer(0.3, lambda: setattr(ro, "terminate", True))
    timer.start()
    t0 = time.perf_counter()
    with pytest.raises(RunTerminated, match="terminate"):
        sess.run(None, {"V": np.zeros(1, np.float32)}, ro)
    assert time.perf_counter() - t0 < 30
    timer.join()
    ro.terminate = False  # the same options run to the end once the flag is cleared
    small = InferenceSession(_long_loop(5))
    assert small.run(None, {"V": np.zeros(1, np.float32)}, ro)[0].tolist() == [5.0]


def test_run_time_limit_ends_a_long_scan():
    sess = InferenceSession(_long_scan())
    ro = RunOptions()
    ro.run_time_limit_s = 0.2
    t0 = time.perf_counter()
    with pytest.raises(RunTerminated, match="run_time_limit_s"):
        sess.run(None, {"S": np.zeros(1, np.float32), "X": np.ones((2_000_000, 1), np.float32)}, ro)
    assert time.perf_counter() - t0 < 30


def test_a_run_within_its_time_limit_completes():
    ro = RunOptions()
    ro.run_time_limit_s = 60
    (y,) = InferenceSession(DIGITS).run(None, {"image": IMAGES}, ro)
    assert y.shape == (2, 10)
