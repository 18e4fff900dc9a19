"""What the cpu kernels derive from a weight input and keep (a convolution's weights in its
product layout, Winograd's transformed tiles, BatchNormalization's scale and shift, an RNN's
prepared weights) is reused only while its elements cannot change (issue 29, item 7).

A runtime input may be a read-only *view* of memory the caller writes between runs
(``np.broadcast_to`` of an array, a view whose flag the caller cleared) or a writeable array
written in place; fed again as the same object, the kernel must see its new values.  Each case
runs three times, the fed memory changed after each run, and is compared with onnxruntime on a
contiguous copy of the same feed.  Initializers and folded values still are kept: the planner
declares them constants of the plan (``NodeContext.is_constant``, tests/engine/test_kernel_constants.py).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as TP, helper, numpy_helper  # noqa: E402

from onnxkit import InferenceSession, SessionOptions  # noqa: E402
from onnxkit_cpu.overrides import conv as cpu_conv  # noqa: E402

F = TP.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=17) -> bytes:
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()


def _vi(name, shape):
    return helper.make_tensor_value_info(name, F, list(shape) if shape is not None else None)


class Fed:
    """A weight fed as ``mode``: ``broadcast`` (np.broadcast_to of a smaller writeable base),
    ``readonly_view`` (a read-only view of a writeable array) or ``inplace`` (the writeable
    array itself); :meth:`change` writes new values into the memory the fed object reads."""

    def __init__(self, rng, shape, mode):
        self.rng, self.mode = rng, mode
        if mode == "broadcast":
            self.base = rng.standard_normal(shape[1:]).astype(np.float32)
            self.value = np.broadcast_to(self.base, shape)
        else:
            self.base = rng.standard_normal(shape).astype(np.float32)
            self.value = self.base
            if mode == "readonly_view":
                self.value = self.base.view()
                self.value.flags.writeable = False

    def change(self):
        self.base[...] = self.rng.standard_normal(self.base.shape).astype(np.float32)


MODES = ["broadcast", "readonly_view", "inplace"]


def _check_three_runs(proto: bytes, fixed: dict, fed: dict, level: int, positive=()):
    so = SessionOptions()
    so.graph_optimization_level = level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sess = InferenceSession(proto, so)
    oracle = ort.InferenceSession(proto, providers=["CPUExecutionProvider"])
    feed = {**fixed, **{n: f.value for n, f in fed.items()}}
    for run in range(3):
        got = sess.run(None, feed)
        want = oracle.run(None, {n: np.ascontiguousarray(v) for n, v in feed.items()})
        for g, w in zip(got, want):
            assert np.allclose(g, w, rtol=1e-4, atol=1e-4), f"run {run}: stale weights (max diff {np.abs(g - w).max()})"
        for f in fed.values():
            f.change()
            if positive:  # variances stay positive
                np.abs(f.base, out=f.base)
                f.base += 0.5


#: name -> (X shape, W shape, Conv attributes): the cpu Conv's kinds (1x1, im2col columns, the
#: compiled planes, depthwise, patches, Winograd, one spatial axis, blocked columns)
CONVS = {
    "planes_3x3": ((1, 2, 6, 6), (4, 2, 3, 3), {}),
    "pointwise": ((1, 2, 5, 5), (4, 2, 1, 1), {}),
    "depthwise": ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4}),
    "patches": ((1, 2, 16, 16), (3, 2, 8, 8), {"strides": [8, 8]}),
    "winograd": ((1, 16, 12, 12), (16, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    "one_axis": ((1, 2, 10), (3, 2, 3), {}),
    "one_row": ((2, 3, 3, 9), (4, 3, 3, 3), {}),
    "big": ((2, 8, 20, 20), (8, 8, 3, 3), {}),
}


@pytest.mark.parametrize("level", [0, 99])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", sorted(CONVS))
def test_conv_sees_a_runtime_weight_change(kind, mode, level):
    xs, ws, attrs = CONVS[kind]
    rng = np.random.default_rng(7)
    proto = _model([helper.make_node("Conv", ["X", "W", "B"], ["Y"], **attrs)],
                   [_vi("X", xs), _vi("W", ws), _vi("B", ws[:1])], [_vi("Y", None)])
    x = rng.standard_normal(xs).astype(np.float32)
    fed = {"W": Fed(rng, ws, mode), "B": Fed(rng, ws[:1] if mode != "broadcast" else (ws[0],), mode)}
    _check_three_runs(proto, {"X": x}, fed, level)


@pytest.mark.parametrize("mode", MODES)
def test_conv_without_bias_sees_a_runtime_weight_change(mode):
    rng = np.random.default_rng(8)
    proto = _model([helper.make_node("Conv", ["X", "W"], ["Y"], pads=[1, 1, 1, 1])],
                   [_vi("X", (1, 3, 7, 7)), _vi("W", (5, 3, 3, 3))], [_vi("Y", None)])
    _check_three_runs(proto, {"X": rng.standard_normal((1, 3, 7, 7)).astype(np.float32)},
                      {"W": Fed(rng, (5, 3, 3, 3), mode)}, 99)


@pytest.mark.parametrize("mode", MODES)
def test_batch_norm_sees_runtime_parameter_changes(mode):
    rng = np.random.default_rng(9)
    c = 4
    names = ["scale", "B", "mean", "var"]
    proto = _model([helper.make_node("BatchNormalization", ["X", *names], ["Y"])],
                   [_vi("X", (2, c, 5, 5))] + [_vi(n, (c,)) for n in names], [_vi("Y", None)])
    fed = {n: Fed(rng, (c,), mode) for n in names}
    for f in fed.values():
        np.abs(f.base, out=f.base)
        f.base += 0.5
    _check_three_runs(proto, {"X": rng.standard_normal((2, c, 5, 5)).astype(np.float32)}, fed, 99, positive=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op,gates", [("RNN", 1), ("GRU", 3), ("LSTM", 4)])
def test_recurrent_sees_runtime_weight_changes(op, gates, mode):
    rng = np.random.default_rng(10)
    seq, batch, inp, hid = 4, 2, 3, 5
    proto = _model([helper.make_node(op, ["X", "W", "R", "B"], ["Y"], hidden_size=hid)],
                   [_vi("X", (seq, batch, inp)), _vi("W", (1, gates * hid, inp)), _vi("R", (1, gates * hid, hid)),
                    _vi("B", (1, 2 * gates * hid))], [_vi("Y", None)])
    fed = {"W": Fed(rng, (1, gates * hid, inp), mode), "R": Fed(rng, (1, gates * hid, hid), mode),
           "B": Fed(rng, (1, 2 * gates * hid), mode)}
    _check_three_runs(proto, {"X": rng.standard_normal((seq, batch, inp)).astype(np.float32)}, fed, 99)


@pytest.mark.parametrize("source", ["bytes", "file", "mapped file"])
def test_the_plans_initializers_and_folded_values_are_kept(source, tmp_path, monkeypatch):
    """The plan's constants take the kept path: initializers (from bytes, from a file the
    session reads into its own read-only copy, from a file it maps), and values folded at
    planning (a kernel's fresh result, Mul; views of constants, Transpose, Split): the Conv
    derives each weight's layout once, on the first run, never again.  The folded values are
    read-only (:func:`onnxkit.runtime.plan.frozen`: protected, not a constancy signal)."""
    decided = []
    real_kept = cpu_conv.kept

    def spy(constant, v, derived):
        decided.append(constant)
        return real_kept(constant, v, derived)

    monkeypatch.setattr(cpu_conv, "kept", spy)
    w = np.arange(24, dtype=np.float32).reshape(4, 2, 3, 1) / 10
    proto = _model([helper.make_node("Transpose", ["Wt"], ["W"], perm=[0, 1, 3, 2]),
                    helper.make_node("Split", ["W"], ["W1", "W2"], axis=0, num_outputs=2),
                    helper.make_node("Mul", ["W0", "two"], ["W3"]),
                    helper.make_node("Conv", ["X", "W1"], ["Y1"]), helper.make_node("Conv", ["X", "W2"], ["Y2"]),
                    helper.make_node("Conv", ["X", "W0"], ["Y0"]), helper.make_node("Conv", ["X", "W3"], ["Y3"])],
                   [_vi("X", (1, 2, 4, 5))], [_vi(n, None) for n in ("Y0", "Y1", "Y2", "Y3")],
                   [numpy_helper.from_array(w, "Wt"), numpy_helper.from_array(w.transpose(0, 1, 3, 2), "W0"),
                    numpy_helper.from_array(np.array(2, np.float32), "two")], opset=18)
    path = tmp_path / "m.onnx"
    path.write_bytes(proto)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sess = InferenceSession(proto) if source == "bytes" else InferenceSession(str(path),
                                                                                 own_data=source == "file")
    consts = sess.plan.constants
    assert {"W0", "W1", "W2", "W3"} <= set(consts)
    assert not any(consts[n].flags.writeable for n in ("W0", "W1", "W2", "W3"))
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 5)).astype(np.float32)
    want = ort.InferenceSession(proto, providers=["CPUExecutionProvider"]).run(None, {"X": x})
    for run in range(3):
        for g, e in zip(sess.run(None, {"X": x}), want):
            assert np.allclose(g, e, rtol=1e-5, atol=1e-5)
        if run == 0:
            assert len(decided) >= 4 and all(decided), decided    # each Conv's W: declared constant, kept
            first = len(decided)
    assert len(decided) == first        # later runs derive nothing again
