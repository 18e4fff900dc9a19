"""The direct rules the cpu shape kernels decide a new key by (Reshape, Unsqueeze, Squeeze,
Expand: a decoder's past grows every token, so every run brings new extents): where a rule
answers, it is the operator's result; where it does not, the portable geometry decides, refusals
included.  Oracles: onnxruntime on a stream of keys through one session each (every key new to
the plan), and extents written out by hand."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

import onnxkit  # noqa: E402
from onnxkit_cpu.overrides.shape import expand_rule, reshape_rule, squeeze_rule, unsqueeze_rule  # noqa: E402


def _model(op: str, opset: int = 17, **attrs) -> bytes:
    """``op(x, ints)`` with x float32 of any rank and ``ints`` an int64 input (both fed)."""
    g = h.make_graph([h.make_node(op, ["x", "ints"], ["y"], name=op.lower(), **attrs)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, None), h.make_tensor_value_info("ints", T.INT64, [None])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=8).SerializeToString()


def _sessions(op: str, **attrs):
    data = _model(op, **attrs)
    so = ort.SessionOptions()
    so.log_severity_level = 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return onnxkit.InferenceSession(data), ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def _agree(mine, theirs, shape: tuple, ints: tuple) -> bool:
    """Both refuse, or both give the same array; returns whether they computed one."""
    feed = {"x": np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape), "ints": np.array(ints, np.int64)}
    try:
        want = theirs.run(None, feed)[0]
    except Exception:  # noqa: BLE001  (onnxruntime refuses: onnxkit must too)
        want = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if want is None:
            with pytest.raises(onnxkit.errors.OnnxkitError):
                mine.run(None, feed)
            return False
        got = mine.run(None, feed)[0]
    assert got.shape == want.shape, (shape, ints)
    np.testing.assert_array_equal(got, want)
    return True


SHAPES = [(), (1,), (3,), (2, 3), (1, 4), (2, 1, 3), (1, 2, 1, 2), (0, 3)]


def test_reshape_agrees_with_onnxruntime_on_a_stream_of_new_keys():
    mine, theirs = _sessions("Reshape")
    targets = [(), (-1,), (6,), (3, 2), (-1, 2), (2, -1), (1, -1, 1), (-1, -1), (0, -1), (0, 3), (-2, 3), (4, -1),
               (12,), (2, 2, -1), (1,), (0,)]
    computed = sum(_agree(mine, theirs, s, t) for s, t in itertools.product(SHAPES, targets))
    assert computed > 20


def test_unsqueeze_agrees_with_onnxruntime_on_a_stream_of_new_keys():
    mine, theirs = _sessions("Unsqueeze")
    axes = [(0,), (-1,), (3, 0), (0, 3), (1, -1), (0, 0), (5,), (-6,), (2, 0, 1)]
    computed = sum(_agree(mine, theirs, s, a) for s, a in itertools.product(SHAPES, axes))
    assert computed > 20


def _constant_axes_sessions(axes: tuple):
    """Unsqueeze(x, axes) with ``axes`` an initializer (the kernel bound to it: decided per rank),
    not specialized (one plan, so one bound kernel, sees every rank of the stream)."""
    g = h.make_graph([h.make_node("Unsqueeze", ["x", "axes"], ["y"], name="unsqueeze")], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, None)], [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [h.make_tensor("axes", T.INT64, [len(axes)], list(axes))])
    data = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8).SerializeToString()
    so = ort.SessionOptions()
    so.log_severity_level = 4
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mine = onnxkit.SessionOptions()
        mine.add_session_config_entry("session.disable_passes", "specialize")
        return onnxkit.InferenceSession(data, mine), ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def test_unsqueeze_of_constant_axes_agrees_with_onnxruntime_over_ranks_and_new_extents():
    """Positions decided once per rank: a stream of new extents of each rank, ranks the axes do
    not fit (refused by name, before and after ranks they fit), repeated and empty axes."""
    stream = [(), (3,), (4,), (0,), (2, 3), (2, 5), (1, 7), (2, 1, 3), (2, 1, 4), (1, 2, 1, 2), (0, 3), (5,), (),
              (1, 2, 3, 4, 5)]
    computed = 0
    for axes in [(0,), (-1,), (2,), (1, 3), (3, 1), (0, -1), (-3,), (0, 0), (4,)]:
        mine, theirs = _constant_axes_sessions(axes)
        for shape in stream:
            feed = {"x": np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)}
            try:
                want = theirs.run(None, feed)[0]
            except Exception:  # noqa: BLE001  (onnxruntime refuses: onnxkit must too)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    with pytest.raises(onnxkit.errors.OnnxkitError):
                        mine.run(None, feed)
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = mine.run(None, feed)[0]
            assert got.shape == want.shape, (axes, shape)
            np.testing.assert_array_equal(got, want)
            computed += 1
    assert computed > 60


def test_squeeze_agrees_with_onnxruntime_on_a_stream_of_new_keys():
    mine, theirs = _sessions("Squeeze")
    axes = [(0,), (-1,), (1,), (0, 2), (2, 0), (3,), (-4,)]  # repeated axes: onnxruntime accepts them, onnxkit refuses (as before)
    computed = sum(_agree(mine, theirs, s, a) for s, a in itertools.product(SHAPES, axes))
    assert computed > 5


def test_expand_agrees_with_onnxruntime_on_a_stream_of_new_keys():
    mine, theirs = _sessions("Expand")
    dims = [(), (1,), (3,), (2, 3), (4, 1, 3), (2, 1), (0, 3), (2, 0), (1, 1, 1, 1), (3, 2, 1, 2), (2, 2, 2, 2)]
    computed = sum(_agree(mine, theirs, s, d) for s, d in itertools.product(SHAPES, dims))
    assert computed > 20


def test_the_rules_answer_the_plain_cases_with_the_operators_extents():
    assert reshape_rule((2, 3), (3, 2)) == (3, 2)
    assert reshape_rule((2, 3), (-1,)) == (6,)
    assert reshape_rule((2, 3, 4), (2, -1, 2)) == (2, 6, 2)
    assert reshape_rule((1,), ()) == ()
    assert unsqueeze_rule((2, 3), (3, 0)) == (1, 2, 3, 1)
    assert unsqueeze_rule((2, 3), (-1, 1)) == (2, 1, 3, 1)
    assert squeeze_rule((1, 2, 1), (2, 0)) == (2,)
    assert squeeze_rule((1, 2, 1), (-1,)) == (1, 2)
    assert expand_rule((1, 4, 1, 5, 8), (1, 4, 2, 5, 8)) == (1, 4, 2, 5, 8)
    assert expand_rule((3, 1), (2, 1, 4)) == (2, 3, 4)
    assert expand_rule((2, 3), (1,)) == (2, 3)


def test_the_rules_leave_every_other_case_to_the_portable_geometry():
    assert reshape_rule((2, 3), (0, 3)) is None          # 0 copies an extent (or is one, allowzero)
    assert reshape_rule((2, 3), (-1, -1)) is None
    assert reshape_rule((2, 3), (-2, 3)) is None
    assert reshape_rule((2, 3), (4, -1)) is None         # counts that do not divide: refused there
    assert reshape_rule((2, 3), (5,)) is None
    assert reshape_rule((0, 3), (-1, 3)) is None         # -1 of an empty input
    assert unsqueeze_rule((2,), ()) is None and unsqueeze_rule((2,), None) is None
    assert unsqueeze_rule((2,), (0, 0)) is None and unsqueeze_rule((2,), (2,)) is None
    assert unsqueeze_rule((2,), (-3,)) is None
    assert squeeze_rule((1, 2), ()) is None and squeeze_rule((1, 2), None) is None
    assert squeeze_rule((1, 2), (1,)) is None            # extent 2
    assert squeeze_rule((1, 2), (0, 0)) is None and squeeze_rule((1, 2), (2,)) is None
    assert expand_rule((2, 3), (4, 3)) is None and expand_rule((2, 3), (-1, 3)) is None


def test_the_kernels_take_the_rules_for_new_keys(monkeypatch):
    """A stream of new extents through Reshape asks the portable geometry nothing (the rule
    answers), and a target the rule leaves alone is decided there."""
    import onnxkit_cpu.overrides.shape as shape

    asked = []
    real = shape.reshape_target
    monkeypatch.setattr(shape, "reshape_target", lambda *a: asked.append(a[2]) or real(*a))
    mine, theirs = _sessions("Reshape")
    for n in range(1, 40):
        _agree(mine, theirs, (n, 2), (2, -1))
    assert asked == []
    _agree(mine, theirs, (3, 2), (0, -1))
    assert asked == [[0, -1]]
