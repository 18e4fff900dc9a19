"""``intra_op_num_threads``: BLAS threads limited around the session's runs (threadpoolctl)."""

from __future__ import annotations

import numpy as np
import pytest

threadpoolctl = pytest.importorskip("threadpoolctl")

from onnxkit import InferenceSession, SessionOptions  # noqa: E402
from onnxkit.runtime.threads import blas_threads, default_threads  # noqa: E402
from optimizer_cases import TP, helper, model  # noqa: E402


def _session(threads: int):
    x = helper.make_tensor_value_info("x", TP.FLOAT, [64, 64])
    y = helper.make_tensor_value_info("y", TP.FLOAT, [64, 64])
    so = SessionOptions()
    so.intra_op_num_threads = threads
    return InferenceSession(model([helper.make_node("MatMul", ["x", "x"], ["y"])], [x], [y]).SerializeToString(), so)


def _spy(sess) -> list:
    """Wrap the MatMul kernel: record threadpoolctl's BLAS thread counts as it runs."""
    seen = []
    step = sess.plan.steps[0]
    kernel = step.fn

    def spying(*args):
        seen.append(blas_threads())
        return kernel(*args)

    step.fn = spying
    return seen


def test_one_thread_inside_the_kernel_and_same_results(monkeypatch):
    import onnxkit.runtime.threads as threads

    monkeypatch.setattr(threads.os, "getloadavg", lambda: (0.0, 0.0, 0.0))   # a quiet machine
    monkeypatch.setattr(threads, "running_elsewhere", lambda: 0)              # ... right now too
    monkeypatch.setattr(threads, "_load_cache", [0.0, 0.0])
    if not blas_threads():
        pytest.skip("numpy's BLAS is not visible to threadpoolctl")
    feed = {"x": np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)}
    one, default = _session(1), _session(0)
    seen_one, seen_default = _spy(one), _spy(default)
    before = blas_threads()
    a, b = one.run(None, feed)[0], default.run(None, feed)[0]
    assert seen_one == [[1] * len(before)]
    assert seen_default == [[default_threads()] * len(before)]
    assert blas_threads() == before  # the setting found is restored after the run
    assert np.array_equal(a, b)


def test_default_is_the_physical_cores_available():
    import os

    assert 1 <= default_threads() <= len(os.sched_getaffinity(0))


def test_default_threads_leave_the_cores_other_processes_keep_busy(monkeypatch):
    """The default (0) gives the physical cores less those the load average shows busy elsewhere
    (this process's own runnable thread not counted), never fewer than one."""
    import os

    from onnxkit.runtime.threads import free_threads

    cpus = len(os.sched_getaffinity(0))
    assert free_threads(now=0.0, loadavg=(1.0, 0, 0)) == default_threads()          # only this process
    assert free_threads(now=0.0, loadavg=(1.0 + cpus, 0, 0)) == 1                    # every core busy elsewhere
    assert free_threads(now=0.0, loadavg=(100.0, 0, 0)) == 1
    if default_threads() >= 2:
        assert free_threads(now=0.0, loadavg=(2.0, 0, 0)) == min(default_threads(), cpus - 1)


def test_this_process_s_own_threads_in_the_load_average_are_not_others():
    """A process that ran n threads (its CPU seconds per second) sees its own n in the load
    average: only the rest is other processes' demand; a demand under one thread counts as one."""
    import os

    from onnxkit.runtime import threads
    from onnxkit.runtime.threads import free_threads

    cpus = len(os.sched_getaffinity(0))
    if default_threads() >= 2:
        # the load average of this process's own two BLAS threads: every core free for it
        assert free_threads(now=0.0, loadavg=(2.0, 0, 0), running=0, own=2.0) == min(default_threads(), cpus)
        # two threads of its own and one busy process elsewhere
        assert free_threads(now=0.0, loadavg=(3.0, 0, 0), running=0, own=2.0) == min(default_threads(), cpus - 1)
    assert free_threads(now=0.0, loadavg=(1.0 + cpus, 0, 0), running=0, own=1.0) == 1
    assert free_threads(now=0.0, loadavg=(1.0 + cpus, 0, 0), running=cpus, own=cpus) == 1   # others busy now
    # the demand measured: process CPU per wall second since the previous reading, at least 1
    # the demand measured: process CPU per wall second, averaged as the load average is
    saved = list(threads._own_cache)
    try:
        threads._own_cache[:] = [None, 0.0, 1.0]
        assert threads._own_demand(10.0) == 1.0                                  # no reading before
        threads._own_cache[:] = [10.0, threads.time.process_time() - 120.0, 1.0]  # 2 CPU s a second for 60 s
        keep = np.exp(-1.0)
        assert abs(threads._own_demand(70.0) - (keep + 2.0 * (1 - keep))) < 0.01
        threads._own_cache[:] = [10.0, threads.time.process_time(), 2.0]         # idle for 60 s after two
        assert threads._own_demand(70.0) == 1.0                                  # 2 e^-1 < 1: at least one
        threads._own_cache[:] = [10.0, threads.time.process_time(), 2.0]         # idle for 1 s after two
        assert 1.9 < threads._own_demand(11.0) < 2.0
    finally:
        threads._own_cache[:] = saved


def test_one_reading_of_a_thread_runnable_elsewhere_is_not_a_busy_process(monkeypatch):
    """The threads runnable elsewhere count as the smaller of two consecutive readings."""
    from onnxkit.runtime import threads

    readings = iter([1, 0, 2, 2])
    monkeypatch.setattr(threads, "running_elsewhere", lambda: next(readings))
    monkeypatch.setattr(threads, "_running_before", [0])
    monkeypatch.setattr(threads, "_load_cache", [0.0, 0.0])   # no reading kept from an earlier test
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (1.0, 0, 0))
    monkeypatch.setattr(threads, "_own_demand", lambda now: 1.0)
    free = [threads.free_threads(now=t) for t in (100.0, 102.0, 104.0, 106.0)]
    if default_threads() >= 2:
        assert free[:3] == [default_threads()] * 3 and free[3] == 1   # a blip, none, then busy twice


def test_processes_busy_now_count_before_the_load_average_shows_them():
    """A process that just became busy is in the runnable count at once, in the load average
    only after up to a minute: the default takes the greater of the two."""
    import os
    import subprocess
    import sys
    import time

    from onnxkit.runtime.threads import free_threads, running_elsewhere

    cpus = len(os.sched_getaffinity(0))
    assert free_threads(now=0.0, loadavg=(1.0, 0, 0), running=0) == default_threads()
    assert free_threads(now=0.0, loadavg=(1.0, 0, 0), running=cpus) == 1   # load average not caught up yet
    if not os.path.exists("/proc/loadavg"):
        pytest.skip("no /proc/loadavg on this system")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        deadline = time.monotonic() + 10
        seen = 0
        while time.monotonic() < deadline and seen < 2:
            seen = max(seen, running_elsewhere() or 0)
            time.sleep(0.05)
        assert seen >= 2
    finally:
        for p in spinners:
            p.kill()


def test_a_busy_machine_runs_the_default_session_on_fewer_threads(monkeypatch):
    import onnxkit.runtime.threads as threads

    if not blas_threads():
        pytest.skip("numpy's BLAS is not visible to threadpoolctl")
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (1000.0, 0.0, 0.0))
    monkeypatch.setattr(threads, "_load_cache", [0.0, 0.0])
    sess = _session(0)
    seen = _spy(sess)
    sess.run(None, {"x": np.ones((64, 64), np.float32)})
    assert seen == [[1] * len(blas_threads())]


def test_a_model_without_matrix_products_skips_the_limit(monkeypatch):
    """No BLAS user in any graph: runs do not pay for threadpoolctl (and still compute right)."""
    import onnxkit.runtime.session as session_module

    calls = []
    real = session_module.blas_limit
    monkeypatch.setattr(session_module, "blas_limit", lambda n, split=True: calls.append(n) or real(n, split))
    x = helper.make_tensor_value_info("x", TP.FLOAT, [3])
    relu = InferenceSession(model([helper.make_node("Relu", ["x"], ["y"])], [x],
                                  [helper.make_tensor_value_info("y", TP.FLOAT, [3])]).SerializeToString())
    assert relu.run(None, {"x": np.array([-1.0, 0.0, 2.0], np.float32)})[0].tolist() == [0.0, 0.0, 2.0]
    assert calls == []
    _session(1).run(None, {"x": np.ones((64, 64), np.float32)})
    assert calls == [1]


def test_a_blas_loaded_after_the_first_run_is_limited_too():
    """scipy brings its own OpenBLAS: imported after a session's first run, it is limited to the
    session's thread count as well (the libraries are looked up again when modules were imported)."""
    import subprocess
    import sys

    pytest.importorskip("scipy")
    code = """
import numpy as np, sys
from onnx import TensorProto as TP, helper
from onnxkit import InferenceSession, SessionOptions
from onnxkit.runtime.threads import blas_threads
assert "scipy.linalg" not in sys.modules
x = helper.make_tensor_value_info("x", TP.FLOAT, [64, 64])
y = helper.make_tensor_value_info("y", TP.FLOAT, [64, 64])
m = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "x"], ["y"])], "g", [x], [y]),
                      opset_imports=[helper.make_opsetid("", 17)])
so = SessionOptions(); so.intra_op_num_threads = 1
sess = InferenceSession(m.SerializeToString(), so)
feed = {"x": np.ones((64, 64), np.float32)}
sess.run(None, feed)
before = len(blas_threads())
import scipy.linalg  # noqa: F401 (a second BLAS)
assert len(blas_threads()) == before + 1, blas_threads()
step = sess.plan.steps[0]; kernel = step.fn; seen = []
step.fn = lambda *a: (seen.append(blas_threads()), kernel(*a))[1]
sess.run(None, feed)
print(seen)
assert seen == [[1] * (before + 1)], seen
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "OPENBLAS_NUM_THREADS": "2"})
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("setting, products, splits", [
    (None, True, False), ("auto", True, False), (" AUTO ", True, False), (None, False, True), ("auto", False, True),
    ("1", True, True), ("1", False, True), ("0", True, False), ("0", False, False)])
def test_kernels_split_their_loops_only_where_no_blas_threads_are_the_parallelism(setting, products, splits):
    from onnxkit.runtime.threads import splits_kernels

    assert splits_kernels(setting, products) is splits


@pytest.mark.parametrize("setting", ["yes", "2", "", "true"])
def test_a_split_kernels_entry_that_is_not_auto_0_or_1_is_refused_at_session_creation(setting):
    from onnxkit.errors import OnnxkitError

    x = helper.make_tensor_value_info("x", TP.FLOAT, [64, 64])
    so = SessionOptions()
    so.add_session_config_entry("session.intra_op.split_kernels", setting)
    with pytest.raises(OnnxkitError, match=r"session\.intra_op\.split_kernels.*'auto', '0' or '1'"):
        InferenceSession(model([helper.make_node("MatMul", ["x", "x"], ["y"])], [x],
                               [helper.make_tensor_value_info("y", TP.FLOAT, [64, 64])]).SerializeToString(), so)


def _intra_seen(op: str, threads: int, setting=None) -> list:
    """The intra-op thread count the kernels of a one-node ``op`` model see inside a run."""
    from onnxkit.runtime.threads import intra_op_threads

    x = helper.make_tensor_value_info("x", TP.FLOAT, [64, 64])
    y = helper.make_tensor_value_info("y", TP.FLOAT, [64, 64])
    so = SessionOptions()
    so.intra_op_num_threads = threads
    if setting is not None:
        so.add_session_config_entry("session.intra_op.split_kernels", setting)
    inputs = ["x", "x"] if op == "MatMul" else ["x"]
    sess = InferenceSession(model([helper.make_node(op, inputs, ["y"])], [x], [y]).SerializeToString(), so)
    seen = []
    step = sess.plan.steps[0]
    kernel = step.fn

    def spying(*args):
        seen.append(intra_op_threads())
        return kernel(*args)

    step.fn = spying
    sess.run(None, {"x": np.ones((64, 64), np.float32)})
    return seen


def test_a_model_with_matrix_products_leaves_its_parallelism_to_blas_unless_asked():
    """Two threads: a MatMul model's kernels see one intra-op thread (BLAS's threads are the run's
    parallelism), unless ``session.intra_op.split_kernels`` is "1"; a model without products
    (Tanh, whose cpu kernel splits its loop) sees both, unless the entry is "0"."""
    assert _intra_seen("MatMul", 2) == [1]
    assert _intra_seen("MatMul", 2, "1") == [2]
    assert _intra_seen("Tanh", 2) == [2]
    assert _intra_seen("Tanh", 2, "0") == [1]
    assert _intra_seen("Tanh", 1, "1") == [1]
