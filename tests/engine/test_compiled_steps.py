"""A layout's steps compiled to straight-line Python (issue 43, :func:`onnxkit.runtime.loop.compile_chunk`):
the same results as the tuple loop, bit for bit, and as onnxruntime within the fuzzer's
tolerance, on the differential fuzzer's models of every family and on the near misses the
compiled code must handle as the loop does (a short result, a tuple for one output, a kernel
that fails, a size guard that refuses, the bytes a guard charged given back, a 0 extent)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from onnxkit import InferenceSession, ir
from onnxkit.errors import EvaluationError, LimitExceeded, OnnxkitError
from onnxkit.limits import Limits
from onnxkit.runtime import loop

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from fuzz.differential.build import feeds_for  # noqa: E402
from fuzz.differential.driver import families, feed_seed, generate  # noqa: E402
from fuzz.differential.oracle import check, close  # noqa: E402

T = ir.tensor_type


_SEEN: list = []  # the layouts the fast loop asked for compiled chunks, in a test using ``seen``


def _layouts(sess=None) -> list:
    """The layouts the fast loop ran since the ``seen`` fixture began (the session's plans)."""
    out = []
    for lay in _SEEN:
        if all(lay is not o for o in out):
            out.append(lay)
    return out


@pytest.fixture(autouse=True)
def seen(monkeypatch):
    """Note every layout the fast loop runs (by wrapping :meth:`Layout.compiled`)."""
    _SEEN.clear()
    compiled = loop.Layout.compiled

    def noting(self):
        _SEEN.append(self)
        return compiled(self)

    monkeypatch.setattr(loop.Layout, "compiled", noting)
    yield _SEEN
    _SEEN.clear()


@pytest.fixture
def compiled_early(monkeypatch):
    """Compile from a layout's first run on, in chunks of three steps (several chunks a plan)."""
    monkeypatch.setattr(loop, "COMPILE_AFTER", 1)
    monkeypatch.setattr(loop, "CHUNK", 3)


def _runs(data: bytes, feeds: list, times: int, compile_after: int) -> list:
    """The outputs of ``times`` rounds of ``feeds`` on one session, compiled from run ``compile_after``."""
    saved = loop.COMPILE_AFTER, loop.CHUNK
    loop.COMPILE_AFTER, loop.CHUNK = compile_after, 3
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                sess = InferenceSession(data)
            except OnnxkitError as exc:        # a model refused at planning: the same refusal
                return [type(exc).__name__ + str(exc)] * (times * len(feeds))
            out = []
            for _ in range(times):
                for f in feeds:
                    try:
                        out.append(sess.run(None, f))
                    except EvaluationError as exc:  # a refusal must be the same refusal
                        out.append(type(exc).__name__ + str(exc))
        return out
    finally:
        loop.COMPILE_AFTER, loop.CHUNK = saved


def _same_bits(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b)) \
        and len(a) == len(b)


def test_compiled_steps_agree_with_the_loop_and_onnxruntime_on_every_family():
    """Every fuzzer family, two models each, two extents (the fuzzer's variants: symbolic axes
    take other extents, 0 among them where a family allows it): the compiled runs give the tuple
    loop's bits, and agree with onnxruntime where it runs the model."""
    fams = sorted(families())
    compared = compiled = 0
    for k in range(2 * len(fams)):
        family, model = generate(43, k)
        data = model.SerializeToString()
        rng = np.random.default_rng([43, k])
        feeds = [{n: f.value for n, f in feeds_for(model, rng, v).items()} for v in (0, 1)]
        loop_runs = _runs(data, feeds, 6, 10 ** 9)
        code_runs = _runs(data, feeds, 6, 1)
        for r, (a, b) in enumerate(zip(loop_runs, code_runs)):
            assert _same_bits(a, b), f"{family} model {k}, run {r}: compiled steps differ from the loop"
        try:
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            so.log_severity_level = 4
            theirs = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
            want = [theirs.run(None, f) for f in feeds]
        except Exception:  # noqa: BLE001 - a model onnxruntime refuses is compared with the loop only
            want = None
        if want is not None:
            for r, got in enumerate(code_runs[-2:]):
                if isinstance(got, str):
                    continue
                for g_, w in zip(got, want[r]):
                    differ = close(g_, w)
                    # a disagreement the fuzzer's oracle sets aside (an unfilled Dropout-7 mask,
                    # onnxruntime outvoted by onnx.reference) is no failure here either
                    assert differ is None or check(model, feed_seed(43, k)).status == "excluded", \
                        f"{family} model {k}: {differ}"
                compared += 1
        compiled += 1
    assert compiled == 2 * len(fams) and compared >= len(fams)


def _model(nodes, inputs, outputs, initializer=()):
    g = ir.Graph(node=nodes, name="g", input=inputs, output=outputs, initializer=list(initializer))
    return ir.Model(ir_version=10, opset_import=[ir.OperatorSetId("", 21)], graph=g)


def _decoder_like():
    """A past of growing length concatenated with a new row, scaled, expanded and reshaped by
    extents computed from its shape (Shape, Gather, Concat, Reshape: a decoder's shape
    arithmetic), then a product: guarded steps, frees and computed targets."""
    f = T(1, ["b", "past", 4])
    nodes = [
        ir.Node(["past", "new"], ["cat"], op_type="Concat", name="cat", attribute=[ir.Attribute.make("axis", 1)]),
        ir.Node(["cat", "two"], ["scaled"], op_type="Mul", name="scale"),
        ir.Node(["cat"], ["shape"], op_type="Shape", name="shape"),
        ir.Node(["shape", "one"], ["total"], op_type="Gather", name="gather"),
        ir.Node(["minus1", "total4"], ["target"], op_type="Concat", name="target", attribute=[ir.Attribute.make("axis", 0)]),
        ir.Node(["total", "four"], ["total4"], op_type="Mul", name="times4"),
        ir.Node(["scaled", "target"], ["flat"], op_type="Reshape", name="reshape"),
        ir.Node(["cat", "w"], ["y"], op_type="MatMul", name="product"),
    ]
    # topological order: total4 before target
    nodes = [nodes[0], nodes[1], nodes[2], nodes[3], nodes[5], nodes[4], nodes[6], nodes[7]]
    inits = [ir.Tensor.from_numpy(np.array(2.0, np.float32), "two"),
             ir.Tensor.from_numpy(np.array([1], np.int64), "one"),
             ir.Tensor.from_numpy(np.array([4], np.int64), "four"),
             ir.Tensor.from_numpy(np.array([-1], np.int64), "minus1"),
             ir.Tensor.from_numpy(np.arange(12, dtype=np.float32).reshape(4, 3) / 7, "w")]
    return _model(nodes, [ir.ValueInfo("past", f), ir.ValueInfo("new", T(1, ["b", 1, 4]))],
                  [ir.ValueInfo("flat", T(1, None)), ir.ValueInfo("y", T(1, None))], inits)


def test_a_growing_past_runs_compiled_with_the_loops_bits(compiled_early):
    """Extents 0 to 19 of the past, one more each run (every run a new extent), on a session
    compiled from its first run, against a session that never compiles and a numpy reference."""
    m = _decoder_like()
    sess = InferenceSession(m)
    saved = loop.COMPILE_AFTER
    loop.COMPILE_AFTER = 10 ** 9
    try:
        plain = InferenceSession(m)
        rng = np.random.default_rng(1)
        w = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
        for n in range(20):
            past = rng.standard_normal((2, n, 4)).astype(np.float32)
            new = rng.standard_normal((2, 1, 4)).astype(np.float32)
            got = sess.run(None, {"past": past, "new": new})
            loop.COMPILE_AFTER = 10 ** 9
            want = plain.run(None, {"past": past, "new": new})
            loop.COMPILE_AFTER = 1
            cat = np.concatenate([past, new], 1)
            np.testing.assert_array_equal(want[0], (cat * np.float32(2)).reshape(-1, (n + 1) * 4))
            np.testing.assert_array_equal(want[1], cat @ w)
            assert all(a.tobytes() == b.tobytes() and a.shape == b.shape for a, b in zip(got, want))
    finally:
        loop.COMPILE_AFTER = saved
    busiest = max(_layouts(), key=lambda lay: sum(o is lay for o in _SEEN))  # the varying class's plan
    assert busiest.chunks and busiest.chunks[-1].end == len(busiest.fast) and len(busiest.chunks) > 1


def test_chunks_are_compiled_one_a_run_after_compile_after_runs(monkeypatch):
    """A layout's first COMPILE_AFTER - 1 runs compile nothing; from then on each run compiles
    one chunk, and once every step is compiled the chunks run (no further compiling)."""
    monkeypatch.setattr(loop, "COMPILE_AFTER", 3)
    monkeypatch.setattr(loop, "CHUNK", 2)
    before: list = []
    compiled = loop.Layout.compiled

    def counting(self):
        before.append((self, len(self.chunks)))
        return compiled(self)

    monkeypatch.setattr(loop.Layout, "compiled", counting)
    sess = InferenceSession(_decoder_like(), validate=False)
    feed = {"past": np.ones((1, 2, 4), np.float32), "new": np.ones((1, 1, 4), np.float32)}
    for _ in range(16):
        sess.run(None, feed)
    busiest = max({id(lay): lay for lay, _ in before}.values(), key=lambda lay: sum(o is lay for o, _ in before))
    counts = [n for lay, n in before if lay is busiest]
    need = -(-len(busiest.fast) // 2)
    assert need >= 2 and len(counts) >= need + 4
    assert counts[:need + 4] == [0, 0, 0, *range(1, need + 1), need]
    assert counts[-1] == need and busiest.chunks[-1].end == len(busiest.fast)


def test_a_cold_first_plans_layouts_wait_longer(monkeypatch):
    """Runs of a session's cold first plan (a warm plan will replace it) count towards
    COLD_COMPILE_AFTER, others towards COMPILE_AFTER."""
    from onnxkit.runtime.bodies import FirstRun, planning_cold

    monkeypatch.setattr(loop, "COMPILE_AFTER", 2)
    monkeypatch.setattr(loop, "COLD_COMPILE_AFTER", 6)
    monkeypatch.setattr(loop, "CHUNK", 1000)
    feed = {"past": np.ones((1, 2, 4), np.float32), "new": np.ones((1, 1, 4), np.float32)}
    for cold, first in ((True, 6), (False, 2)):
        _SEEN.clear()
        sess = InferenceSession(_decoder_like(), validate=False)
        for _ in range(12):
            if cold:
                with planning_cold(FirstRun()):
                    sess.run(None, feed)
            else:
                sess.run(None, feed)
        busiest = max(_layouts(), key=lambda lay: sum(o is lay for o in _SEEN))
        # one chunk (CHUNK covers the plan) compiled at the run that reached the threshold; the
        # runs after it are the chunk's, not counted
        assert busiest.chunks and busiest.runs == first, (cold, busiest.runs)


class _Boom(Exception):
    pass


def _swap_kernel(sess, op: str, fn):
    """Replace the kernel of every ``op`` step of the session's plans (a new layout follows)."""
    for lay in _layouts(sess):
        for s in lay.steps:
            if s.op == op:
                s.fn = fn


def test_a_failing_kernel_in_compiled_code_names_its_node(compiled_early, monkeypatch):
    """The node named is the one whose line raised, not its chunk's first (one chunk here)."""
    monkeypatch.setattr(loop, "CHUNK", 1000)
    m = _decoder_like()
    sess = InferenceSession(m, validate=False)
    feed = {"past": np.ones((1, 2, 4), np.float32), "new": np.ones((1, 1, 4), np.float32)}
    for _ in range(4):
        sess.run(None, feed)

    def boom(a, b):
        raise _Boom("no")

    _swap_kernel(sess, "MatMul", boom)
    for _ in range(4):  # the new layout compiles again, and the failure is the node's at every run
        with pytest.raises(EvaluationError, match="'product' \\(MatMul\\) failed: _Boom: no") as caught:
            sess.run(None, feed)
    assert _from_compiled(caught.value.__cause__)   # the last run's failure came from compiled steps
    assert any(lay.chunks and lay.chunks[-1].end == len(lay.fast) for lay in _layouts(sess))


def test_a_short_result_in_compiled_code_continues_checked_and_reports_the_absent_value(compiled_early):
    """A kernel returning an empty tuple for its one output: the loop's rule (the rest of the
    run checks its reads, and the reader of the absent value is named), compiled or not."""
    m = _decoder_like()
    sess = InferenceSession(m, validate=False)
    feed = {"past": np.ones((1, 2, 4), np.float32), "new": np.ones((1, 1, 4), np.float32)}
    for _ in range(4):
        sess.run(None, feed)
    _swap_kernel(sess, "Mul", lambda a, b: ())
    for _ in range(4):
        with pytest.raises(EvaluationError, match="reads 'scaled', which has no value"):
            sess.run(None, feed)
    _swap_kernel(sess, "Mul", lambda a, b: (a * b,))  # a tuple for one output: its first element
    for _ in range(4):
        got = sess.run(None, feed)
    np.testing.assert_array_equal(got[0], np.full((1, 12), 2.0, np.float32))


def test_guards_in_compiled_code_refuse_and_give_bytes_back(compiled_early):
    """A size guard refuses the same run compiled as by the loop; a run that passes gives back
    every byte its guards charged (the budget's live bytes return to zero)."""
    m = _decoder_like()
    small = Limits(max_value_bytes=4 * 4 * 299)
    sess = InferenceSession(m, limits=small, validate=False)
    ok = {"past": np.ones((1, 3, 4), np.float32), "new": np.ones((1, 1, 4), np.float32)}
    for _ in range(5):
        sess.run(None, ok)
    big = {"past": np.ones((1, 299, 4), np.float32), "new": np.ones((1, 1, 4), np.float32)}  # the feeds pass
    for _ in range(6):
        with pytest.raises(LimitExceeded, match="'cat'") as caught:  # the Concat's output would not
            sess.run(None, big)
    assert _from_compiled(caught.value)


def test_a_declared_size_guard_refuses_in_compiled_code(compiled_early):
    """A guard without a cheap bound (Expand declares its output's bytes) refuses compiled as by
    the loop: a target of many rows after runs of few."""
    from onnx import TensorProto as TP
    from onnx import helper as h

    g = h.make_graph([h.make_node("Expand", ["x", "rows"], ["y"], name="expand"),
                      h.make_node("Mul", ["y", "y"], ["z"], name="square")], "g",
                     [h.make_tensor_value_info("x", TP.FLOAT, [1, 100]), h.make_tensor_value_info("rows", TP.INT64, [2])],
                     [h.make_tensor_value_info("z", TP.FLOAT, None)])
    data = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    sess = InferenceSession(data, limits=Limits(max_value_bytes=400 * 100 * 4), validate=False)
    x = np.ones((1, 100), np.float32)
    for n in range(1, 9):
        assert sess.run(None, {"x": x, "rows": np.array([n, 100], np.int64)})[0].shape == (n, 100)
    for n in (401, 5000):
        with pytest.raises(LimitExceeded, match="'expand'") as caught:
            sess.run(None, {"x": x, "rows": np.array([n, 100], np.int64)})
    assert _from_compiled(caught.value)


def test_compiled_steps_give_back_the_bytes_of_freed_values(compiled_early):
    """max_run_bytes bounds the guarded values held at once, compiled as by the loop: five
    400,000-byte values made and freed in turn fit in 1,000,000 bytes at every run."""
    from onnx import TensorProto as TP
    from onnx import helper as h

    nodes, prev = [], "x"
    for i in range(5):
        nodes += [h.make_node("Expand", [prev, "rows"], [f"e{i}"]),
                  h.make_node("ReduceMean", [f"e{i}"], [f"r{i}"], axes=[0], keepdims=1)]
        prev = f"r{i}"
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [1, 1000])],
                     [h.make_tensor_value_info(prev, TP.FLOAT, [1, 1000])],
                     [h.make_tensor("rows", TP.INT64, [2], [100, 1000])])
    data = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    sess = InferenceSession(data, limits=Limits(max_run_bytes=1_000_000))
    x = np.ones((1, 1000), np.float32)
    for _ in range(8):
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], x)
    assert any(lay.chunks and lay.chunks[-1].end == len(lay.fast) for lay in _layouts())


def _from_compiled(exc) -> bool:
    """Whether ``exc`` was raised through a compiled chunk's function."""
    tb = exc.__traceback__
    files = []
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    return any(f.startswith("<onnxkit plan steps") for f in files)


def test_the_chunk_maps_each_line_to_its_step():
    """Every line of a compiled chunk's source belongs to one step (the traceback's line says
    which node failed): a chunk of the steps 5-8 of a made-up layout."""
    calls = [lambda *a: None for _ in range(9)]
    fast = tuple((c, 1, 1, 0, (1,), 2, ((0, 2),), (), 0, None, ()) for c in calls)
    chunk = loop.compile_chunk(fast, 5, 9, {"ABSENT": None, "_store": None, "_release": None,
                                                 "_call_special": None, "_Short": Exception, "layout": None}, 1)
    assert (chunk.begin, chunk.end) == (5, 9)
    assert sorted(set(chunk.lines)) == [5, 6, 7, 8]
