"""The compiled time loop of RNN, GRU and LSTM (onnxkit_cpu/compiled/rnn.py, taken by
overrides/rnn.py).

Every compiled result is compared with the override's numpy body (the same node planned
under ``compiled.disabled()``) and with an independent float64 evaluation of the operator's
equations written out below (sigmoid as ``1 / (1 + exp(-x))``), at Clause 11's tolerances,
over directions, layouts, float32 / float64, batch 1 and 3, sequence lengths equal and
unequal (0 included), initial states absent and present, and the corpus's shapes (the
tagger's bidirectional LSTM, silero's single step of hidden 128).  A spy on the compiled
loop makes each test fail when the fast path is silently not taken.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402
from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit.tolerances import tolerance_for  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import rnn as loops  # noqa: E402
from onnxkit_cpu.overrides import rnn as override  # noqa: E402

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c"]


class Spy:
    """Stands for ``loops.recurrence``: counts the calls of the real compiled loops and records
    each call's ``project`` argument (1: the loop computed the input projection)."""

    def __init__(self):
        self.calls = 0
        self.projected = []
        self.real = loops.recurrence

    def get(self, cell):
        real = self.real.get(cell)
        if real is None:
            return None

        def counted(*args):
            self.calls += 1
            self.projected.append(args[2])
            return real(*args)

        return counted


@pytest.fixture
def spy(monkeypatch):
    s = Spy()
    assert compiled.available(), "numba must be installed: the compiled path is what is tested"
    monkeypatch.setattr(loops, "recurrence", s)
    return s


def make_model(op, inputs, **attrs):
    """A one-node model of ``op`` over ``inputs`` (by position, None for an absent input)."""
    names = [n if v is not None else "" for n, v in zip(NAMES, inputs)]
    while names and not names[-1]:
        names.pop()
    outs = ["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2]
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
           for n, v in zip(names, inputs) if n]
    elem = helper.np_dtype_to_tensor_dtype(inputs[0].dtype)
    outv = [helper.make_tensor_value_info(n, elem, [None] * (4 if n == "Y" else 3)) for n in outs]
    node = helper.make_node(op, names, outs, **attrs)
    m = helper.make_model(helper.make_graph([node], "g", ins, outv), opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 7
    return m.SerializeToString(), {n: v for n, v in zip(names, inputs) if n}


def run(op, inputs, numpy_body=False, **attrs):
    m, feed = make_model(op, inputs, **attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if numpy_body:
            with compiled.disabled():
                s = InferenceSession(m)
        else:
            s = InferenceSession(m)
        return s.run(None, feed)


# -- the independent float64 reference ---------------------------------------------------------
def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference(op, inputs, direction="forward", layout=0, linear_before_reset=0, **_):
    """Y, Y_h (, Y_c) by the operator's equations in float64, one entry and step at a time."""
    X, W, R, B, lens, h0, c0 = (list(inputs) + [None] * 7)[:7]
    X = np.asarray(X, np.float64)
    if layout:
        X = X.transpose(1, 0, 2)
        h0, c0 = (None if v is None else v.transpose(1, 0, 2) for v in (h0, c0))
    T, Bn, _ = X.shape
    D, GH, H = R.shape
    W, R = W.astype(np.float64), R.astype(np.float64)
    B = np.zeros((D, 2 * GH)) if B is None else B.astype(np.float64)
    lens = np.full(Bn, T) if lens is None else np.asarray(lens)
    Y = np.zeros((T, D, Bn, H))
    Yh, Yc = np.zeros((D, Bn, H)), np.zeros((D, Bn, H))
    for d in range(D):
        rev = direction == "reverse" or d == 1
        wb, rb = B[d, :GH], B[d, GH:]
        for b in range(Bn):
            h = np.zeros(H) if h0 is None else h0[d, b].astype(np.float64)
            c = np.zeros(H) if c0 is None else c0[d, b].astype(np.float64)
            n = int(lens[b])
            for t in (range(n - 1, -1, -1) if rev else range(n)):
                x = X[t, b]
                if op == "RNN":
                    h = np.tanh(W[d] @ x + R[d] @ h + wb + rb)
                elif op == "LSTM":
                    g = W[d] @ x + R[d] @ h + wb + rb
                    i, o, f, cc = _sigmoid(g[:H]), _sigmoid(g[H:2 * H]), _sigmoid(g[2 * H:3 * H]), np.tanh(g[3 * H:])
                    c = f * c + i * cc
                    h = o * np.tanh(c)
                else:
                    gx = W[d] @ x + wb
                    z = _sigmoid(gx[:H] + R[d, :H] @ h + rb[:H])
                    r = _sigmoid(gx[H:2 * H] + R[d, H:2 * H] @ h + rb[H:2 * H])
                    if linear_before_reset:
                        hh = np.tanh(gx[2 * H:] + r * (R[d, 2 * H:] @ h + rb[2 * H:]))
                    else:
                        hh = np.tanh(gx[2 * H:] + R[d, 2 * H:] @ (r * h) + rb[2 * H:])
                    h = (1 - z) * hh + z * h
                Y[t, d, b] = h
            if n:
                Yh[d, b], Yc[d, b] = h, c
    outs = [Y, Yh, Yc][:3 if op == "LSTM" else 2]
    if layout:
        outs = [Y.transpose(2, 0, 1, 3)] + [v.transpose(1, 0, 2) for v in outs[1:]]
    return outs


def inputs_for(op, rng, dt, D=1, T=5, Bn=3, I=4, H=6, lens=None, init=True, layout=0, scale=0.5):
    G = GATES[op] * H

    def r(*shape):
        return (rng.standard_normal(shape) * scale).astype(dt)

    X = r(Bn, T, I) if layout else r(T, Bn, I)
    st = (Bn, D, H) if layout else (D, Bn, H)
    ins = [X * 4, r(D, G, I), r(D, G, H), r(D, 2 * G), None if lens is None else np.array(lens, np.int32)]
    if init:
        ins += [r(*st)] + ([r(*st)] if op == "LSTM" else [])
    return ins


def assert_close(got, want, dt, what):
    tol = tolerance_for(dt)
    assert got.dtype == dt and got.shape == want.shape, what
    np.testing.assert_allclose(got, want, rtol=tol.rtol, atol=tol.atol, err_msg=what)


CELLS = [("RNN", {}), ("GRU", {"linear_before_reset": 0}), ("GRU", {"linear_before_reset": 1}), ("LSTM", {})]
DIRECTIONS = [("forward", 1), ("reverse", 1), ("bidirectional", 2)]


@pytest.mark.parametrize("op,extra", CELLS, ids=["RNN", "GRU", "GRU-lbr", "LSTM"])
@pytest.mark.parametrize("direction,D", DIRECTIONS)
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("layout", [0, 1])
def test_compiled_loop_matches_numpy_body_and_float64_reference(spy, op, extra, direction, D, dt, layout):
    rng = np.random.default_rng(14 + 3 * D + layout)
    attrs = dict(direction=direction, hidden_size=6, layout=layout, **extra)
    for Bn, lens, init in itertools.product([1, 3], [None, "unequal"], [False, True]):
        lengths = None if lens is None else [5, 0, 2][:Bn] if Bn == 3 else [3]
        ins = inputs_for(op, rng, dt, D=D, Bn=Bn, lens=lengths, init=init, layout=layout)
        before = spy.calls
        got = run(op, ins, **attrs)
        assert spy.calls == before + 1, "the compiled loop was not taken"
        body = run(op, ins, numpy_body=True, **attrs)
        assert spy.calls == before + 1, "compiled.disabled() must keep the numpy body"
        want = reference(op, ins, **attrs)
        for k, (g, b, w) in enumerate(zip(got, body, want)):
            what = f"{op} {extra} {direction} layout={layout} batch={Bn} lens={lengths} init={init} output {k}"
            assert g.flags.c_contiguous, what
            assert_close(g, b.astype(dt), dt, what + " vs the numpy body")
            assert_close(g, w.astype(dt), dt, what + " vs the float64 reference")
        if lengths is not None and 0 in lengths:          # past a length: zero rows and states
            b0 = lengths.index(0)
            Y = got[0].transpose(1, 2, 0, 3) if layout else got[0]
            assert not Y[:, :, b0].any()
            assert not (got[1][b0] if layout else got[1][:, b0]).any()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_corpus_shapes(spy, dt):
    """The tagger's bidirectional LSTM (X (7, 3, 16), hidden 24) and silero's single step
    (X (1, 1, 128), hidden 128, initial states given)."""
    rng = np.random.default_rng(7)
    for D, T, Bn, I, H, direction in [(2, 7, 3, 16, 24, "bidirectional"), (1, 1, 1, 128, 128, "forward")]:
        ins = inputs_for("LSTM", rng, dt, D=D, T=T, Bn=Bn, I=I, H=H, scale=0.2)
        calls = spy.calls
        got = run("LSTM", ins, direction=direction, hidden_size=H)
        assert spy.calls == calls + 1 and spy.projected[-1] == 1, "the loop computes these projections"
        body = run("LSTM", ins, numpy_body=True, direction=direction, hidden_size=H)
        want = reference("LSTM", ins, direction=direction)
        for g, b, w in zip(got, body, want):
            assert_close(g, b, dt, f"H={H} vs the numpy body")
            assert_close(g, w.astype(dt), dt, f"H={H} vs the float64 reference")


@pytest.mark.parametrize("op,extra", CELLS, ids=["RNN", "GRU", "GRU-lbr", "LSTM"])
@pytest.mark.parametrize("layout", [0, 1])
def test_long_sequences_take_the_projection_by_blas(spy, op, extra, layout):
    """Beyond COMPILED_WORK multiply-adds the input projection is one BLAS product written
    into the loop's scratch (``project`` 0); the loop's results are those of the other path."""
    rng = np.random.default_rng(5 + layout)
    attrs = dict(direction="bidirectional", hidden_size=6, layout=layout, **extra)
    T, Bn, I = 400, 3, 12
    assert T * Bn * I * 2 * GATES[op] * 6 > override.COMPILED_WORK
    for dt in (np.float32, np.float64):
        ins = inputs_for(op, rng, dt, D=2, T=T, Bn=Bn, I=I, lens=[T, 0, 123], layout=layout, scale=0.3)
        got = run(op, ins, **attrs)
        assert spy.projected[-1] == 0, "a long sequence's projection is BLAS's"
        body = run(op, ins, numpy_body=True, **attrs)
        want = reference(op, ins, **attrs)
        for k, (g, b, w) in enumerate(zip(got, body, want)):
            assert g.flags.c_contiguous
            assert_close(g, b, dt, f"{op} {extra} output {k} vs the numpy body")
            assert_close(g, w.astype(dt), dt, f"{op} {extra} output {k} vs the float64 reference")


def _tanh_by_rnn(x, spy):
    """tanh(x) by one step of an RNN of hidden size 1 over a batch of x.size entries, whose
    only weight from X is 1 (exact) and whose recurrence weight and biases are 0:
    Y[0, 0, b] = tanh(x[b] + 0 + 0)."""
    dt = x.dtype
    ins = [x.reshape(1, -1, 1), np.ones((1, 1, 1), dt), np.zeros((1, 1, 1), dt), np.zeros((1, 2), dt)]
    calls = spy.calls
    y = run("RNN", ins, hidden_size=1)[0].reshape(-1)
    assert spy.calls == calls + 1
    return y


def test_the_compiled_tanh_is_correctly_rounded_in_float32_and_close_in_float64(spy):
    grid = np.concatenate([np.linspace(-12, 12, 40001), np.geomspace(1e-30, 12, 4000), -np.geomspace(1e-30, 12, 400)])
    exact = np.tanh(grid.astype(np.longdouble))
    x32 = grid.astype(np.float32)
    y32 = _tanh_by_rnn(x32, spy)
    assert np.array_equal(y32, np.tanh(x32.astype(np.longdouble)).astype(np.float32))
    y64 = _tanh_by_rnn(grid, spy)
    rel = np.abs((y64 - exact) / exact).astype(np.float64)
    assert rel.max() < 4e-15
    for dt in (np.float32, np.float64):
        special = np.array([np.inf, -np.inf, np.nan, 0.0, 30.0, -30.0, 1e-300 if dt == np.float64 else 1e-40], dt)
        y = _tanh_by_rnn(special, spy)
        assert y[:2].tolist() == [1.0, -1.0] and np.isnan(y[2]) and y[3] == 0
        assert y[4:6].tolist() == [1.0, -1.0] and y[6] == special[6]


@pytest.mark.parametrize("op,extra", CELLS, ids=["RNN", "GRU", "GRU-lbr", "LSTM"])
def test_nan_and_inf_propagate_as_in_the_numpy_body(spy, op, extra):
    rng = np.random.default_rng(3)
    ins = inputs_for(op, rng, np.float32, D=2)
    ins[0][1, 0, 0] = np.nan          # entry 0 at t=1: NaN from there on (both directions)
    ins[0][2, 1, 0] = np.inf          # entry 1 at t=2: infinite pre-activations, saturated gates
    ins[0][3, 2, 0] = -np.inf
    attrs = dict(direction="bidirectional", hidden_size=6, **extra)
    got = run(op, ins, **attrs)
    body = run(op, ins, numpy_body=True, **attrs)
    for g, b in zip(got, body):
        assert np.array_equal(np.isnan(g), np.isnan(b))
        np.testing.assert_allclose(g, b, rtol=1e-3, atol=1e-6)
    assert np.isnan(got[0][1:, 0, 0]).all() and np.isnan(got[0][:2, 1, 0]).all()   # forward, reverse
    assert np.isfinite(got[0][:, :, 1:]).all()


def test_non_contiguous_inputs_give_the_contiguous_results(spy):
    rng = np.random.default_rng(5)
    ins = inputs_for("LSTM", rng, np.float32, D=2)
    views = [np.asfortranarray(ins[0]), ins[1][:, ::-1][:, ::-1], np.asfortranarray(ins[2]), ins[3]] + ins[4:]
    assert not views[0].flags.c_contiguous and not views[2].flags.c_contiguous
    attrs = dict(direction="bidirectional", hidden_size=6)
    for g, w in zip(run("LSTM", views, **attrs), run("LSTM", ins, **attrs)):
        assert np.array_equal(g, w)


def test_large_steps_and_other_types_keep_the_numpy_path(spy):
    rng = np.random.default_rng(9)
    H = 64                            # 2 x 8 x 4 x 64^2 multiply-adds per step > COMPILED_WORK
    assert 2 * 8 * 4 * H * H > override.COMPILED_WORK
    ins = inputs_for("LSTM", rng, np.float32, D=2, T=3, Bn=8, I=8, H=H, scale=0.1)
    got = run("LSTM", ins, direction="bidirectional", hidden_size=H)
    assert spy.calls == 0
    for g, w in zip(got, reference("LSTM", ins, direction="bidirectional")):
        assert_close(g, w.astype(np.float32), np.float32, "numpy path, large steps")
    half = [None if v is None else v.astype(np.float16) if v.dtype == np.float32 else v
            for v in inputs_for("GRU", rng, np.float32)]
    got = run("GRU", half, hidden_size=6)
    assert spy.calls == 0 and got[0].dtype == np.float16
    for g, w in zip(got, reference("GRU", half)):
        np.testing.assert_allclose(g, w, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("layout", [0, 1])
def test_bad_lengths_and_states_fail_naming_the_node(spy, layout):
    rng = np.random.default_rng(2)
    ins = inputs_for("LSTM", rng, np.float32, lens=[5, 6, 1], layout=layout)
    with pytest.raises(OnnxkitError, match=r"sequence_lens must hold 3 lengths in \[0, 5\]"):
        run("LSTM", ins, hidden_size=6, layout=layout)
    for k in (5, 6):                  # an initial state of one batch entry (numpy would broadcast it)
        bad = inputs_for("LSTM", rng, np.float32, layout=layout)
        bad[k] = bad[k][:1] if layout else bad[k][:, :1]
        with pytest.raises(OnnxkitError, match="initial state must have shape"):
            run("LSTM", bad, hidden_size=6, layout=layout)
    assert spy.calls == 0


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_hidden_or_input_size_zero(spy, op):
    rng = np.random.default_rng(4)
    for H, I in ((0, 4), (3, 0)):
        ins = inputs_for(op, rng, np.float32, D=2, H=H, I=I, lens=[5, 0, 2])
        got = run(op, ins, direction="bidirectional", hidden_size=H)
        want = reference(op, ins, direction="bidirectional")
        for g, w in zip(got, want):
            assert_close(g, w.astype(np.float32), np.float32, f"H={H} I={I}")
    assert spy.calls == 2


def test_threads_sharing_a_session_get_their_own_results(spy):
    """The loop's scratch is per thread: concurrent runs of one session give each its result."""
    import concurrent.futures

    rng = np.random.default_rng(3)
    feeds = [inputs_for("LSTM", rng, np.float32, D=2, T=7, Bn=3, I=16, H=24, scale=0.3) for _ in range(6)]
    m, _ = make_model("LSTM", feeds[0], direction="bidirectional", hidden_size=24)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = InferenceSession(m)
    names = [n for n, v in zip(NAMES, feeds[0]) if v is not None]
    want = [s.run(None, dict(zip(names, [v for v in f if v is not None]))) for f in feeds]

    def job(k):
        f = feeds[k % len(feeds)]
        return k, [s.run(None, dict(zip(names, [v for v in f if v is not None]))) for _ in range(20)]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for k, results in pool.map(job, range(24)):
            for got in results:
                for g, w in zip(got, want[k % len(feeds)]):
                    assert np.array_equal(g, w)
    assert spy.calls >= 6 + 24 * 20
