"""Compiled steps (onnxkit/runtime/loop.py ``compile_chunk``) of nodes with several named outputs
and a declared-size guard (SkipSimplifiedLayerNormalization: Y and the sum; GroupQueryAttention:
the output and the presents): the guard and the kernel written inline (not through
``_call_special``), the outputs stored by position.  Against the tuple loop (bits), onnxruntime,
and the near misses the loop handles: a guard that refuses (named, raised from compiled code),
the bytes each guard charged given back as the values are freed (a chain that fits
``max_run_bytes`` only so), a kernel returning too few outputs (the reader of the absent one
named), a result that is not a tuple.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

from ms_harness import run_ort

import onnxkit
from onnxkit.errors import EvaluationError, LimitExceeded
from onnxkit.limits import Limits
from onnxkit.runtime import loop

HID = 8
LAYERS = 5


def _chain() -> bytes:
    """LAYERS skip norms, each fed the previous one's Y and sum, then Y * sum."""
    nodes, y, s = [], "x", "skip"
    for i in range(LAYERS):
        nodes.append(helper.make_node("SkipSimplifiedLayerNormalization", [y, s, "gamma"], [f"y{i}", "", "", f"s{i}"],
                                      name=f"norm{i}", domain="com.microsoft", epsilon=1e-5))
        y, s = f"y{i}", f"s{i}"
    nodes.append(helper.make_node("Mul", [y, s], ["z"], name="last"))
    f = TensorProto.FLOAT
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, f, [1, "n", HID]) for n in ("x", "skip")],
                          [helper.make_tensor_value_info("z", f, None)],
                          [helper.make_tensor("gamma", f, [HID], np.linspace(0.5, 1.5, HID).tolist())])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m.SerializeToString()


def _feed(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed + n)
    return {k: rng.standard_normal((1, n, HID)).astype(np.float32) for k in ("x", "skip")}


@pytest.fixture
def layouts(monkeypatch):
    """Compile from a layout's first run, two steps a chunk; the layouts the fast loop ran."""
    seen = []
    compiled = loop.Layout.compiled

    def noting(self):
        if all(self is not s for s in seen):
            seen.append(self)
        return compiled(self)

    monkeypatch.setattr(loop.Layout, "compiled", noting)
    monkeypatch.setattr(loop, "COMPILE_AFTER", 1)
    monkeypatch.setattr(loop, "CHUNK", 2)
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
    return seen


def _session(model, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return onnxkit.InferenceSession(model, validate=False, **kw)


def _fully_compiled(seen) -> list:
    return [lay for lay in seen if lay.chunks and lay.chunks[-1].end == len(lay.fast)]


def test_guarded_multi_output_steps_compiled_inline_give_the_loops_bits(layouts, monkeypatch):
    model = _chain()
    fast = _session(model)
    got = [fast.run(None, _feed(n)) for n in (1, 2, 3, 3, 4, 5, 6, 7, 8, 9)]
    done = _fully_compiled(layouts)
    assert done, "no layout was compiled whole"
    for lay in done:
        specials = [s for s in lay.laid_steps() if s.special == loop.SPECIAL]
        assert len(specials) == LAYERS  # the norms: a guard and several named outputs
        for chunk in lay.chunks:
            assert "_call_special" not in chunk.code.co_names
    monkeypatch.setattr(loop, "COMPILE_AFTER", 10 ** 9)
    plain = _session(model)
    for n, g in zip((1, 2, 3, 3, 4, 5, 6, 7, 8, 9), got):
        want = plain.run(None, _feed(n))
        assert g[0].tobytes() == want[0].tobytes() and g[0].shape == want[0].shape
        np.testing.assert_allclose(g[0], run_ort(model, _feed(n))[0], rtol=1e-4, atol=1e-5)


def test_a_multi_output_guard_refuses_in_compiled_code_and_its_bytes_are_given_back(layouts):
    """Each norm charges its Y and sum (2 n HID floats and its row statistics); a run holds two
    norms' charges at once at most when each is given back once its values are freed: a
    max_run_bytes of three norms' charges passes every run, and the run of a longer sequence
    whose one norm would exceed max_value_bytes is refused naming the first norm."""
    model = _chain()
    n = 16
    charge = 2 * n * HID * 4 + 8 * n
    limits = Limits(max_run_bytes=3 * charge + 2 * n * HID * 4 * 2, max_value_bytes=charge)
    sess = _session(model, limits=limits)
    for k in range(1, n + 1):
        sess.run(None, _feed(k))
    assert _fully_compiled(layouts)
    for _ in range(3):
        with pytest.raises(LimitExceeded, match="'norm0'") as caught:
            sess.run(None, _feed(n + 1))
    tb, files = caught.value.__traceback__, []
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert any(f.startswith("<onnxkit plan steps") for f in files)


def _swap(seen, op: str, fn):
    for lay in seen:
        for s in lay.steps:
            if s.op.endswith(op):
                s.fn = fn


def test_too_few_outputs_or_one_value_from_a_compiled_multi_output_step(layouts):
    """A norm returning a tuple without the sum, or a bare array: the run goes on checked from
    the next step, and the reader of the absent sum is named, as the loop does."""
    model = _chain()
    sess = _session(model)
    for k in range(1, 11):
        sess.run(None, _feed(k))
    assert _fully_compiled(layouts)
    for short in (lambda x, s, g: (x + s,), lambda x, s, g: x + s, lambda x, s, g: (x + s, None, None)):
        _swap(layouts, "SkipSimplifiedLayerNormalization", short)
        for _ in range(6):  # the new layout is compiled whole by the fifth
            with pytest.raises(EvaluationError, match="reads 's0', which has no value"):
                sess.run(None, _feed(3))
        assert len(_fully_compiled(layouts)) >= 2
    _swap(layouts, "SkipSimplifiedLayerNormalization", lambda x, s, g: (x, None, None, s))
    for _ in range(6):
        got = sess.run(None, _feed(3))
    np.testing.assert_array_equal(got[0], _feed(3)["x"] * _feed(3)["skip"])


def test_a_declared_size_charged_in_compiled_code_counts_towards_max_run_bytes(layouts):
    """The compiled step charges a declared size itself where both limits admit it (``_charge``):
    the bytes count towards ``max_run_bytes`` as the guard's own charge does.  Two norms' charges
    are held at once (norm0's Y and sum until norm1 has read them), so a ``max_run_bytes`` one
    byte short of two charges of a 16-row run passes runs of up to 15 rows and refuses the 16-row
    run naming the second norm, from compiled code, every time (the bytes given back in between);
    the same limits on the tuple loop refuse the same run alike."""
    model = _chain()
    n = 16
    charge = 2 * n * HID * 4 + 8 * n
    limits = Limits(max_run_bytes=2 * charge - 1, max_value_bytes=10 * charge)
    sess = _session(model, limits=limits)
    for k in range(1, n):
        sess.run(None, _feed(k))
    assert _fully_compiled(layouts)
    for _ in range(3):
        with pytest.raises(LimitExceeded, match="'norm1'") as caught:
            sess.run(None, _feed(n))
        sess.run(None, _feed(n - 1))
    tb, files = caught.value.__traceback__, []
    while tb is not None:
        files.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert any(f.startswith("<onnxkit plan steps") for f in files)
    loop_sess = _session(model, limits=limits)
    with pytest.raises(LimitExceeded, match="'norm1'"):
        loop_sess.run(None, _feed(n))
