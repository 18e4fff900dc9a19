"""onnxkit's own intra-op threads (onnxkit/runtime/threads.py ``parallel_for``): the cpu
kernels that split their work into blocks of rows (Attention's (batch, head) pairs,
LayerNormalization's rows, BatchNormalization's images or channels, the elementwise activation
passes, the softmax rows, depthwise Conv's channel blocks) across the session's
``intra_op_num_threads``.

What must hold: a session of 1, 2 and 3 threads (3 oversubscribes this 2-core box) gives the
same bits (each split keeps every element's arithmetic), and onnxruntime 1.32's result within
Clause 11's tolerance; the setting is honoured (``threads.observer`` sees each kernel make as
many blocks as threads, one at 1 thread, and the blocks run on that many distinct threads).
No timing asserts.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

import onnxkit.runtime.threads as threads  # noqa: E402
from onnxkit.runtime import InferenceSession, SessionOptions  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.available(), reason="numba is not installed"),
              pytest.mark.usefixtures("warm_bodies")]

RNG = np.random.default_rng(44)
F = TP.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=20, extra=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, F, None) for n in outputs], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *extra], ir_version=10)
    return m.SerializeToString()


def _run(data, feeds, n, numpy_bodies=False):
    """Outputs of a session of ``n`` intra-op threads, and ``{kernel name: blocks}`` its run made
    (``numpy_bodies``: planned under ``compiled.disabled()``)."""
    so = SessionOptions()
    so.intra_op_num_threads = n
    so.add_session_config_entry("session.intra_op.split_kernels", "1")
    if numpy_bodies:
        with compiled.disabled():
            s = InferenceSession(data, so, validate=False)
    else:
        s = InferenceSession(data, so, validate=False)
    seen = {}

    def observe(name, k):
        seen[name] = max(seen.get(name, 0), k)
    threads.observer = observe
    try:
        out = s.run(None, feeds)
    finally:
        threads.observer = None
    return out, seen


def _cases():
    x = RNG.standard_normal((4, 64, 256)).astype(np.float32)
    scale = RNG.standard_normal(256).astype(np.float32)
    bias = RNG.standard_normal(256).astype(np.float32)
    yield "layer_norm", _model(
        [helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-5)],
        [("x", x.shape)], ["y"], [helper.make_tensor("s", F, [256], scale), helper.make_tensor("b", F, [256], bias)]
    ), {"x": x}, "layer_norm.rows"
    img = RNG.standard_normal((1, 32, 40, 40)).astype(np.float32)
    bn = [RNG.standard_normal(32).astype(np.float32) for _ in range(3)] + [RNG.random(32).astype(np.float32) + 0.5]
    yield "batch_norm_channels", _model(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], [("x", img.shape)], ["y"],
        [helper.make_tensor(n, F, [32], a) for n, a in zip("sbmv", bn)]), {"x": img}, "batch_norm.channels"
    imgs = RNG.standard_normal((3, 8, 40, 40)).astype(np.float32)
    yield "batch_norm_images", _model(
        [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], [("x", imgs.shape)], ["y"],
        [helper.make_tensor(n, F, [8], a[:8]) for n, a in zip("sbmv", bn)]), {"x": imgs}, "batch_norm.channels"
    big = (RNG.standard_normal((3, 257, 301)) * 4).astype(np.float32)
    yield "gelu", _model([helper.make_node("Gelu", ["x"], ["y"])], [("x", big.shape)], ["y"]), \
        {"x": big}, "activation.elements"
    yield "gelu_tanh", _model([helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")], [("x", big.shape)], ["y"]), \
        {"x": big}, "activation.elements"
    yield "hard_swish", _model([helper.make_node("HardSwish", ["x"], ["y"])], [("x", big.shape)], ["y"]), \
        {"x": big}, "activation.elements"
    odd = (RNG.standard_normal((3, 257, 301)) * 4).astype(np.float32)[:, :, 1:]     # not contiguous
    for op in ("Sigmoid", "Tanh"):                                                  # float32: the MLAS loops
        yield op.lower(), _model([helper.make_node(op, ["x"], ["y"])], [("x", odd.shape)], ["y"], opset=13), \
            {"x": odd}, "activation.elements"
    for op, attrs in (("Softplus", {}), ("Elu", {"alpha": 0.7}), ("Mish", {})):
        yield f"numpy_{op.lower()}", _model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", odd.shape)], ["y"],
                                            opset=22), {"x": odd}, "activation.numpy"
    rows = RNG.standard_normal((2, 300, 100)).astype(np.float32)
    yield "softmax", _model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], [("x", rows.shape)], ["y"]), \
        {"x": rows}, "softmax.rows"
    yield "log_softmax", _model([helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)], [("x", rows.shape)], ["y"]), \
        {"x": rows}, "softmax.rows"
    dw_x = RNG.standard_normal((1, 48, 56, 56)).astype(np.float32)
    dw_w = RNG.standard_normal((48, 1, 3, 3)).astype(np.float32)
    dw_b = RNG.standard_normal(48).astype(np.float32)
    yield "depthwise", _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], group=48, pads=[1, 1, 1, 1], kernel_shape=[3, 3])],
        [("x", dw_x.shape)], ["y"], [helper.make_tensor("w", F, list(dw_w.shape), dw_w),
                                     helper.make_tensor("b", F, [48], dw_b)]), {"x": dw_x}, "conv.depthwise"
    wx = RNG.standard_normal((2, 32, 40, 44)).astype(np.float32)     # 3x3, stride 1, 32 -> 24 channels: Winograd
    ww = RNG.standard_normal((24, 32, 3, 3)).astype(np.float32)
    wb = RNG.standard_normal(24).astype(np.float32)
    yield "winograd", _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], [("x", wx.shape)], ["y"],
        [helper.make_tensor("w", F, list(ww.shape), ww), helper.make_tensor("b", F, [24], wb)]), {"x": wx}, \
        "conv.winograd"
    for name, (ix, iw, strides) in (("im2col", ((1, 12, 40, 36), (20, 12, 3, 3), [2, 2])),
                                    ("im2col_5x5", ((1, 8, 30, 30), (6, 8, 5, 5), [1, 1]))):
        ax, aw = RNG.standard_normal(ix).astype(np.float32), RNG.standard_normal(iw).astype(np.float32)
        ab = RNG.standard_normal(iw[0]).astype(np.float32)
        yield name, _model([helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=strides)],
                           [("x", ix)], ["y"], [helper.make_tensor("w", F, list(iw), aw),
                                                helper.make_tensor("b", F, [iw[0]], ab)]), {"x": ax}, "conv.im2col"
    pool_x = RNG.standard_normal((2, 24, 33, 35)).astype(np.float32)
    yield "max_pool", _model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                                               pads=[1, 1, 1, 1])], [("x", pool_x.shape)], ["y"]), \
        {"x": pool_x}, "pool.planes"
    yield "average_pool", _model([helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3],
                                                   pads=[1, 1, 1, 1], count_include_pad=0)], [("x", pool_x.shape)],
                                 ["y"]), {"x": pool_x}, "pool.planes"
    cx = RNG.standard_normal((1, 64, 2000)).astype(np.float32)     # one spatial axis: the numpy columns
    cw = RNG.standard_normal((8, 64, 5)).astype(np.float32)
    yield "conv_columns", _model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[2, 2], strides=[2])],
                                 [("x", cx.shape)], ["y"], [helper.make_tensor("w", F, list(cw.shape), cw)]), \
        {"x": cx}, "conv.columns"
    rx = RNG.standard_normal((2, 16, 40, 48)).astype(np.float32)
    for mode in ("linear", "nearest", "cubic"):
        yield f"resize_{mode}", _model(
            [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode=mode)], [("x", rx.shape)], ["y"],
            [helper.make_tensor("sc", F, [4], [1.0, 1.0, 2.0, 1.5])], opset=19), {"x": rx}, "resize.planes"
    for name, (b, h, s, d) in (("attention_compiled", (2, 4, 48, 16)), ("attention_blocked", (1, 4, 370, 32))):
        q, k, v = (RNG.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(3))
        mask = np.where(RNG.random((s, s)) < 0.2, -np.inf, 0.0).astype(np.float32)
        np.fill_diagonal(mask, 0.0)
        ins = [(n, a.shape) for n, a in zip("qkvm", (q, k, v, mask))]
        kit = _model([helper.make_node("Attention", ["q", "k", "v", "m"], ["y"], domain="ai.onnxkit")], ins, ["y"],
                     opset=17, extra=[helper.make_opsetid("ai.onnxkit", 2)])
        oracle = _model([helper.make_node("Attention", ["q", "k", "v", "m"], ["y"])], ins, ["y"], opset=23)
        split = "attention.batched" if name == "attention_compiled" else "attention.blocked"   # float32: _batched
        yield name, (kit, oracle), {"q": q, "k": k, "v": v, "m": mask}, split


CASES = list(_cases())


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_threads_give_the_same_bits_and_onnxruntime_values(case):
    name, data, feeds, kernel = case
    data, oracle = data if isinstance(data, tuple) else (data, data)
    results = {}
    for n in (1, 2, 3):
        out, seen = _run(data, feeds, n)
        assert kernel in seen, f"{name}: the {kernel} split did not run (took {sorted(seen)})"
        assert seen[kernel] == (1 if n == 1 else min(n, seen[kernel])) and (n == 1 or seen[kernel] >= 2), \
            f"{name}: {seen[kernel]} blocks at {n} threads"
        results[n] = out[0]
    for n in (2, 3):
        assert results[n].tobytes() == results[1].tobytes(), f"{name}: {n} threads differ from 1"
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(oracle, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(results[1], want, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(want).max())))


def test_the_numpy_depthwise_body_splits_its_channel_blocks_alike():
    """Compiled loops off: depthwise Conv's numpy channel blocks (own column buffers off the
    caller's thread) give the same bits at 1, 2 and 3 threads, and the compiled path's values."""
    name, data, feeds, kernel = next(c for c in CASES if c[0] == "depthwise")
    results = {}
    for n in (1, 2, 3):
        out, seen = _run(data, feeds, n, numpy_bodies=True)
        assert seen.get("conv.depthwise") == min(n, 3), seen
        results[n] = out[0]
    assert results[2].tobytes() == results[1].tobytes() and results[3].tobytes() == results[1].tobytes()
    np.testing.assert_allclose(results[1], _run(data, feeds, 1)[0][0], rtol=1e-5, atol=1e-5)


def test_three_threads_make_three_blocks_on_three_threads(monkeypatch):
    """The count is the session's (not clamped to the cores): at 3, the 3 blocks run at the same
    time on 3 distinct threads (each waits at a barrier of 3 until all have started); at 1 the
    one block runs on the caller's thread."""
    name, data, feeds, kernel = next(c for c in CASES if c[0] == "gelu")
    idents, barrier = set(), [None]
    real = threads.parallel_for

    def spying(fn, n, grain=1, name=""):
        def wrapped(lo, hi):
            idents.add(threading.get_ident())
            if barrier[0] is not None:
                barrier[0].wait(timeout=60)
            return fn(lo, hi)
        return real(wrapped, n, grain, name)

    import onnxkit_cpu.overrides.activation as activation
    monkeypatch.setattr(activation, "parallel_for", spying)
    barrier[0] = threading.Barrier(3)
    _run(data, feeds, 3)
    assert len(idents) == 3
    idents.clear()
    barrier[0] = None
    _run(data, feeds, 1)
    assert idents == {threading.get_ident()}


def test_the_default_is_the_free_cores_and_a_busy_machine_gets_one(monkeypatch):
    """intra_op_num_threads = 0: :func:`threads.free_threads` blocks (1 under a load that fills the cores)."""
    name, data, feeds, kernel = next(c for c in CASES if c[0] == "gelu")
    monkeypatch.setattr(threads, "free_threads", lambda *a, **k: 2)
    _, seen = _run(data, feeds, 0)
    assert seen[kernel] == 2
    monkeypatch.setattr(threads, "free_threads", lambda *a, **k: 1)
    _, seen = _run(data, feeds, 0)
    assert seen[kernel] == 1


def test_the_threads_of_this_process_are_read_only_where_they_could_change_the_count(monkeypatch):
    """A load average that leaves one thread decides alone (:func:`threads.running_elsewhere`
    only lowers the count); one that leaves more asks it."""
    asked = []
    monkeypatch.setattr(threads, "running_elsewhere", lambda: asked.append(1) or 0)
    monkeypatch.setattr(threads, "_load_cache", [0.0, 0.0])
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (1000.0, 0.0, 0.0))
    assert threads.free_threads(now=10.0) == 1 and asked == []
    monkeypatch.setattr(threads, "_load_cache", [0.0, 0.0])
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert threads.free_threads(now=20.0) == threads.default_threads()
    assert asked == ([1] if threads.default_threads() > 1 else [])     # one core: nothing to lower


def test_outside_a_run_and_small_work_stay_on_the_callers_thread():
    calls = []
    assert threads.intra_op_threads() == 1
    assert threads.parallel_for(lambda lo, hi: calls.append((lo, hi)), 10) == 1 and calls == [(0, 10)]
    with threads.blas_limit(4):
        assert threads.intra_op_threads() == 4
        calls.clear()
        assert threads.parallel_for(lambda lo, hi: calls.append((lo, hi)), 10, grain=4) == 2
        assert sorted(calls) == [(0, 5), (5, 10)]
        # a block on a pool thread runs at 1 thread (no nesting), on the caller's at the run's
        inner, me = [], threading.get_ident()
        threads.parallel_for(lambda lo, hi: inner.append((threading.get_ident() == me, threads.intra_op_threads())), 4)
        assert len(inner) == 4 and all(n == (4 if mine else 1) for mine, n in inner)
    assert threads.intra_op_threads() == 1


def test_blocks_no_pool_thread_takes_are_run_by_the_caller(monkeypatch):
    """A pool whose threads never start (a machine with every core busy): the caller runs every
    block itself, the same blocks, and returns without waiting for the pool."""
    class Idle:
        def submit(self, fn):
            import concurrent.futures
            return concurrent.futures.Future()      # pending forever unless cancelled

    monkeypatch.setattr(threads, "_executor", lambda workers: Idle())
    calls = []
    with threads.blas_limit(3):
        assert threads.parallel_for(lambda lo, hi: calls.append((lo, hi)), 9) == 3
    assert calls == [(0, 3), (3, 6), (6, 9)]


def test_an_error_in_a_block_reaches_the_caller():
    def fail(lo, hi):
        if lo:
            raise ValueError("block")
    with threads.blas_limit(2):
        with pytest.raises(ValueError, match="block"):
            threads.parallel_for(fail, 8)


def test_a_model_of_split_operators_alone_enters_the_limit():
    """Gelu calls no BLAS, but splits across threads: its session sets the count around runs."""
    name, data, feeds, kernel = next(c for c in CASES if c[0] == "gelu")
    import onnxkit
    assert threads.uses_blas(onnxkit.load(data))


def test_sessions_run_from_several_python_threads_share_the_pool():
    """Four Python threads each running 2- and 3-thread sessions at once (the pool shared, blocks
    of several runs queued together): every result is the one-thread run's, bit for bit."""
    import concurrent.futures

    picked = [c for c in CASES if c[0] in ("layer_norm", "gelu", "depthwise", "attention_compiled", "max_pool")]
    want = {c[0]: _run(c[1][0] if isinstance(c[1], tuple) else c[1], c[2], 1)[0][0] for c in picked}
    sessions = []
    for name, data, feeds, _ in picked:
        for n in (2, 3):
            so = SessionOptions()
            so.intra_op_num_threads = n
            so.add_session_config_entry("session.intra_op.split_kernels", "1")
            sessions.append((name, InferenceSession(data[0] if isinstance(data, tuple) else data, so, validate=False),
                             feeds))

    def work(i):
        bad = []
        for r in range(6):
            name, s, feeds = sessions[(i + r) % len(sessions)]
            if s.run(None, feeds)[0].tobytes() != want[name].tobytes():
                bad.append(name)
        return bad

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        assert [b for f in [ex.submit(work, i) for i in range(4)] for b in f.result()] == []


def test_a_forked_child_makes_a_pool_of_its_own():
    """After fork the parent's pool threads do not exist in the child: its runs make a new pool
    (both blocks of a 2-thread call meet at a barrier of 2: they run at once, on two threads)."""
    import subprocess
    import sys

    code = ("import os, threading, numpy as np\n"
            "import onnxkit.runtime.threads as t\n"
            "with t.blas_limit(2):\n"
            "    t.parallel_for(lambda lo, hi: None, 8)\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    meet, a = threading.Barrier(2), np.zeros(8)\n"
            "    def block(lo, hi):\n"
            "        meet.wait(timeout=30)\n"
            "        a[lo:hi] = 1\n"
            "    try:\n"
            "        with t.blas_limit(2):\n"
            "            k = t.parallel_for(block, 8)\n"
            "    except threading.BrokenBarrierError:\n"
            "        os._exit(4)\n"
            "    os._exit(0 if k == 2 and a.sum() == 8 else 3)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "raise SystemExit(os.waitstatus_to_exitcode(status))\n")
    assert subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0
