"""The portable recurrent kernels (RNN, GRU, LSTM) on both backends.

Each case runs on ``cpu`` (numpy) and ``gpu`` (torch; its CPU device without CUDA) and is
checked against onnx's reference implementation where it implements the case, and against
the recurrence's own properties where it does not (sequence_lens: an entry of length L gives
what the same entry run alone over its first L steps gives).  On gpu the node must run on
torch, not on the cpu fallback.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("torch")
from one_node import BACKENDS, outputs, reference  # noqa: E402

from onnxkit.errors import OnnxkitError  # noqa: E402

RNG = np.random.default_rng(1313)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
INPUTS = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]


def _inputs(op, feeds: dict) -> list:
    return [feeds.get(n) for n in INPUTS[:8 if op == "LSTM" else 6]]


def _run(backend, op, opset, feeds, attrs, n_out=3):
    return outputs(backend, op, opset, _inputs(op, feeds), attrs, n_out)


def _reference(op, opset, feeds, attrs, n_out=3):
    return reference(op, opset, _inputs(op, feeds), attrs, n_out)


def _feeds(op, T=5, B=3, I=4, H=6, D=1, dtype=np.float32, bias=True, states=False, peep=False, layout=0):
    g = GATES[op]
    f = {"X": RNG.standard_normal((B, T, I) if layout else (T, B, I)).astype(dtype),
         "W": (0.5 * RNG.standard_normal((D, g * H, I))).astype(dtype),
         "R": (0.5 * RNG.standard_normal((D, g * H, H))).astype(dtype)}
    if bias:
        f["B"] = (0.3 * RNG.standard_normal((D, 2 * g * H))).astype(dtype)
    if states:
        shape = (B, D, H) if layout else (D, B, H)
        f["initial_h"] = RNG.standard_normal(shape).astype(dtype)
        if op == "LSTM":
            f["initial_c"] = RNG.standard_normal(shape).astype(dtype)
    if peep:
        f["P"] = (0.3 * RNG.standard_normal((D, 3 * H))).astype(dtype)
    return f


def _close(got, want, rtol=1e-4, atol=1e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.asarray(w).dtype and g.shape == np.shape(w)
        np.testing.assert_allclose(g.astype(np.float64), np.asarray(w, np.float64), rtol=rtol, atol=atol)


# -- an independent oracle: the definition's equations, one step at a time, in float64 -----------
_ACTS = {"tanh": lambda x, a, b: np.tanh(x), "sigmoid": lambda x, a, b: 1 / (1 + np.exp(-x)),
         "relu": lambda x, a, b: np.maximum(x, 0), "affine": lambda x, a, b: a * x + b,
         "leakyrelu": lambda x, a, b: np.where(x < 0, a * x, x), "thresholdedrelu": lambda x, a, b: np.where(x > a, x, 0),
         "scaledtanh": lambda x, a, b: a * np.tanh(b * x), "hardsigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
         "elu": lambda x, a, b: np.where(x < 0, a * (np.exp(x) - 1), x), "softsign": lambda x, a, b: x / (1 + abs(x)),
         "softplus": lambda x, a, b: np.log1p(np.exp(x))}
_TAKES = {"affine": (1.0, 0.0), "leakyrelu": (0.01, None), "thresholdedrelu": (1.0, None), "scaledtanh": (1.0, 1.0),
          "hardsigmoid": (0.2, 0.5), "elu": (1.0, None)}
_DEFAULTS = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}


def _oracle(op, feeds, attrs):
    """Y and the final states by the operator's equations (no sequence_lens)."""
    f64 = {k: v.astype(np.float64) for k, v in feeds.items()}
    layout = attrs.get("layout", 0)
    X = f64["X"].transpose(1, 0, 2) if layout else f64["X"]
    direction = attrs.get("direction", "forward")
    D = 2 if direction == "bidirectional" else 1
    T, B, _ = X.shape
    W, R = f64["W"], f64["R"]
    H = R.shape[-1]
    g = GATES[op]
    bias = f64.get("B", np.zeros((D, 2 * g * H)))
    names = attrs.get("activations", _DEFAULTS[op] * D)
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    clip = attrs.get("clip")
    fns = []
    for k, name in enumerate(names):
        da, db = _TAKES.get(name.lower(), (None, None))
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        c = None if (op == "LSTM" and k % 3 == 2) else clip
        fns.append(lambda x, f=_ACTS[name.lower()], a=a, b=b, c=c: f(x if c is None else np.clip(x, -c, c), a, b))
    per = len(_DEFAULTS[op])
    states = [f64.get(n) for n in (("initial_h", "initial_c") if op == "LSTM" else ("initial_h",))]
    states = [np.zeros((D, B, H)) if s is None else (s.transpose(1, 0, 2) if layout else s) for s in states]
    Y = np.zeros((T, D, B, H))
    finals = [np.zeros((D, B, H)) for _ in states]
    for d in range(D):
        f = fns[d * per:(d + 1) * per]
        w = [W[d, k * H:(k + 1) * H] for k in range(g)]
        r = [R[d, k * H:(k + 1) * H] for k in range(g)]
        wb = [bias[d, k * H:(k + 1) * H] for k in range(g)]
        rb = [bias[d, (g + k) * H:(g + k + 1) * H] for k in range(g)]
        h = states[0][d]
        c = states[1][d] if op == "LSTM" else None
        steps = range(T - 1, -1, -1) if (direction == "reverse" or d == 1) else range(T)
        for t in steps:
            x = X[t]
            lin = [x @ w[k].T + wb[k] + h @ r[k].T + rb[k] for k in range(g)]
            if op == "RNN":
                h = f[0](lin[0])
            elif op == "GRU":
                z, rr = f[0](lin[0]), f[0](lin[1])
                if attrs.get("linear_before_reset"):
                    hh = f[1](x @ w[2].T + wb[2] + rr * (h @ r[2].T + rb[2]))
                else:
                    hh = f[1](x @ w[2].T + wb[2] + (rr * h) @ r[2].T + rb[2])
                h = (1 - z) * hh + z * h
            else:
                p = f64.get("P", np.zeros((D, 3 * H)))[d]
                i = f[0](lin[0] + p[:H] * c)
                fg = 1 - i if attrs.get("input_forget") else f[0](lin[2] + p[2 * H:] * c)
                c = fg * c + i * f[1](lin[3])
                h = f[0](lin[1] + p[H:2 * H] * c) * f[2](c)
            Y[t, d] = h
        finals[0][d] = h
        if op == "LSTM":
            finals[1][d] = c
    if layout:
        return [Y.transpose(2, 0, 1, 3)] + [s.transpose(1, 0, 2) for s in finals]
    return [Y] + finals


CASES = [
    ("RNN", 22, {}, {}),
    ("RNN", 14, {"direction": "bidirectional"}, {"D": 2, "states": True}),
    ("RNN", 7, {"direction": "reverse", "activations": ["Relu"]}, {}),
    ("GRU", 22, {}, {"states": True}),
    ("GRU", 14, {"linear_before_reset": 1, "direction": "bidirectional"}, {"D": 2}),
    ("GRU", 7, {"direction": "reverse"}, {"bias": False}),
    ("LSTM", 22, {}, {"states": True}),
    ("LSTM", 14, {"direction": "bidirectional"}, {"D": 2, "states": True, "peep": True}),
    ("LSTM", 7, {"direction": "reverse", "input_forget": 1}, {"peep": True}),
    ("LSTM", 14, {"layout": 1}, {"states": True, "layout": 1}),
    ("GRU", 14, {"layout": 1, "direction": "bidirectional"}, {"D": 2, "states": True, "layout": 1}),
    # enough steps x batch entries that R^T is laid out row-major once
    ("LSTM", 22, {"direction": "bidirectional"}, {"T": 40, "B": 4, "D": 2, "states": True}),
    ("GRU", 22, {"linear_before_reset": 1}, {"T": 40, "B": 4}),
    ("GRU", 22, {}, {"T": 40, "B": 4}),
    ("RNN", 22, {}, {"T": 40, "B": 4}),
    # the cpu fast path's gate-major LSTM steps: both directions, several entries, a single step
    ("LSTM", 14, {"direction": "bidirectional"}, {"T": 7, "B": 3, "I": 16, "H": 24, "D": 2, "states": True}),
    ("LSTM", 14, {"direction": "reverse"}, {"T": 4, "B": 2, "I": 5, "H": 3}),
    ("LSTM", 14, {}, {"T": 1, "B": 1, "I": 16, "H": 16, "states": True}),
    ("LSTM", 14, {"direction": "bidirectional", "layout": 1}, {"T": 3, "B": 2, "D": 2, "states": True, "layout": 1}),
]


def _n_out(op):
    return 3 if op == "LSTM" else 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op, opset, attrs, shape", CASES, ids=[f"{c[0]}-{c[1]}-{k}" for k, c in enumerate(CASES)])
def test_recurrences_follow_the_equations(backend, op, opset, attrs, shape):
    feeds = _feeds(op, **shape)
    attrs = dict(attrs, hidden_size=feeds["R"].shape[-1])
    got = _run(backend, op, opset, feeds, attrs, _n_out(op))
    want = _oracle(op, feeds, attrs)
    _close(got, [w.astype(np.float32) for w in want])


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_the_oracle_agrees_with_onnx_reference(op):
    feeds = _feeds(op, states=True)
    attrs = {"hidden_size": feeds["R"].shape[-1]}
    want = _reference(op, 14, feeds, attrs, _n_out(op))
    _close([w.astype(np.float32) for w in _oracle(op, feeds, attrs)], want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_activation_lists_with_alpha_beta_and_clip(backend, op):
    per = {"RNN": ["ScaledTanh"], "GRU": ["HardSigmoid", "Affine"], "LSTM": ["HardSigmoid", "ScaledTanh", "Softsign"]}[op]
    back = {"RNN": ["LeakyRelu"], "GRU": ["Sigmoid", "Elu"], "LSTM": ["Sigmoid", "Softplus", "ThresholdedRelu"]}[op]
    feeds = _feeds(op, D=2)
    attrs = {"hidden_size": feeds["R"].shape[-1], "direction": "bidirectional", "activations": per + back,
             "activation_alpha": [0.7, 0.4, 0.9], "activation_beta": [0.6, 0.8], "clip": 1.5}
    got = _run(backend, op, 14, feeds, attrs, _n_out(op))
    _close(got, [w.astype(np.float32) for w in _oracle(op, feeds, attrs)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lens_equal_running_each_entry_alone(backend, op, direction):
    D = 2 if direction == "bidirectional" else 1
    T, B = 6, 4
    feeds = _feeds(op, T=T, B=B, D=D, states=True)
    lens = np.array([6, 3, 0, 1], np.int32)
    attrs = {"hidden_size": feeds["R"].shape[-1], "direction": direction}
    n_out = 3 if op == "LSTM" else 2
    outs = _run(backend, op, 14, dict(feeds, sequence_lens=lens), attrs, n_out)
    Y, finals = outs[0], outs[1:]
    for b, L in enumerate(lens):
        assert not Y[L:, :, b].any()                         # rows past the length are zero
        if L == 0:
            assert all(not f[:, b].any() for f in finals)    # an empty entry has zero final states
            continue
        alone = {k: v for k, v in feeds.items()}
        alone["X"] = feeds["X"][:L, b:b + 1]
        alone["initial_h"] = feeds["initial_h"][:, b:b + 1]
        if op == "LSTM":
            alone["initial_c"] = feeds["initial_c"][:, b:b + 1]
        ref = _run(backend, op, 14, alone, attrs, n_out)
        np.testing.assert_allclose(Y[:L, :, b:b + 1], ref[0], rtol=1e-5, atol=1e-6)
        for f, r in zip(finals, ref[1:]):
            np.testing.assert_allclose(f[:, b:b + 1], r, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_element_types_keep_their_type(backend, dtype):
    feeds = _feeds("LSTM", dtype=dtype, states=True)
    attrs = {"hidden_size": feeds["R"].shape[-1]}
    got = _run(backend, "LSTM", 22, feeds, attrs)
    assert all(g.dtype == dtype for g in got)
    wide = {k: v.astype(np.float64) for k, v in feeds.items()}
    want = _run("cpu", "LSTM", 22, wide, attrs)
    tol = 5e-3 if dtype == np.float16 else 1e-12
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_inputs_name_the_node(backend):
    feeds = _feeds("GRU")
    h = feeds["R"].shape[-1]
    with pytest.raises(OnnxkitError, match="'n0'.*hidden_size"):
        _run(backend, "GRU", 14, feeds, {"hidden_size": h + 1})
    with pytest.raises(OnnxkitError, match="'n0'.*activations lists 1"):
        _run(backend, "GRU", 14, feeds, {"hidden_size": h, "activations": ["Tanh"]})
    with pytest.raises(OnnxkitError, match="'n0'.*unknown activation"):
        _run(backend, "GRU", 14, feeds, {"hidden_size": h, "activations": ["Tanh", "Nope"]})
    with pytest.raises(OnnxkitError, match="'n0'.*sequence_lens"):
        _run(backend, "GRU", 14, dict(feeds, sequence_lens=np.array([1, 9, 2], np.int32)), {"hidden_size": h})
    with pytest.raises(OnnxkitError, match="'n0'.*B must have shape"):
        _run(backend, "GRU", 14, dict(feeds, B=feeds["B"][:, 1:]), {"hidden_size": h})


# -- the cpu backend's fast path (default activations): weights kept per node, NaN stays put ---------
def _with_initializers(op, feeds, attrs):
    """A one-node model whose W, R, B are initializers (the same arrays every run); X and the
    initial states are fed."""
    from onnx import helper, numpy_helper

    names = ["X", "W", "R", "B", "", "initial_h"] + (["initial_c"] if op == "LSTM" else [])
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    fed = [n for n in names if n and n not in ("W", "R", "B")]
    g = helper.make_graph([helper.make_node(op, names, outs, name="n0", **attrs)], "g",
                          [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, list(feeds[n].shape)) for n in fed],
                          [helper.make_empty_tensor_value_info(o) for o in outs],
                          initializer=[numpy_helper.from_array(feeds[n], n) for n in ("W", "R", "B")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m.SerializeToString(), fed


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op, attrs", [("LSTM", {"direction": "bidirectional"}), ("GRU", {"direction": "bidirectional"}),
                                       ("GRU", {"linear_before_reset": 1, "direction": "reverse"}), ("RNN", {})])
def test_initializer_weights_serve_every_run(backend, op, attrs):
    from onnxkit.runtime import InferenceSession

    D = 2 if attrs.get("direction") == "bidirectional" else 1
    feeds = _feeds(op, D=D, states=True)
    attrs = dict(attrs, hidden_size=feeds["R"].shape[-1])
    model, fed = _with_initializers(op, feeds, attrs)
    sess = InferenceSession(model, backend, validate=False)
    for _ in range(3):     # new inputs each run, the same weights
        feeds = dict(feeds, X=RNG.standard_normal(feeds["X"].shape).astype(np.float32))
        got = sess.run(None, {n: feeds[n] for n in fed})
        _close(got, [w.astype(np.float32) for w in _oracle(op, feeds, attrs)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_a_nan_stays_in_its_batch_entry_and_direction(backend, op):
    feeds = _feeds(op, T=5, B=3, D=2, states=True)
    feeds["X"][3, 1, 0] = np.nan         # entry 1 at step 3: the reverse direction meets it second
    attrs = {"hidden_size": feeds["R"].shape[-1], "direction": "bidirectional"}
    got = _run(backend, op, 14, feeds, attrs, _n_out(op))
    want = [w.astype(np.float32) for w in _oracle(op, feeds, attrs)]
    assert np.isnan(got[0][3:, 0, 1]).all() and not np.isnan(got[0][:3, 0, 1]).any()
    assert np.isnan(got[0][:4, 1, 1]).all() and not np.isnan(got[0][4:, 1, 1]).any()
    assert not np.isnan(got[0][:, :, [0, 2]]).any()
    _close(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_default_activations_named_explicitly_in_double(backend, op):
    feeds = _feeds(op, D=2, states=True, dtype=np.float64)
    names = [n.lower() for n in _DEFAULTS[op]] * 2
    attrs = {"hidden_size": feeds["R"].shape[-1], "direction": "bidirectional", "activations": names}
    got = _run(backend, op, 14, feeds, attrs, _n_out(op))
    _close(got, _oracle(op, feeds, attrs), rtol=1e-12, atol=1e-12)


def test_one_session_checks_each_new_shape():
    """The fast path checks the shapes of each new combination of input shapes: a second batch
    size is computed right, and a bad initial state after good runs is still refused by name."""
    from onnxkit.runtime import InferenceSession

    feeds = _feeds("LSTM", T=4, B=2, D=2, states=True)
    attrs = {"hidden_size": feeds["R"].shape[-1], "direction": "bidirectional"}
    model, fed = _with_initializers("LSTM", feeds, attrs)
    m = onnx.load_from_string(model)
    for vi in m.graph.input:                        # any batch size
        vi.type.tensor_type.shape.dim[1].dim_param = "batch"
    sess = InferenceSession(m.SerializeToString(), "cpu", validate=False)
    for B in (2, 5, 2):
        f = _feeds("LSTM", T=4, B=B, D=2, states=True)
        f.update(W=feeds["W"], R=feeds["R"], B=feeds["B"])
        _close(sess.run(None, {n: f[n] for n in fed}), [w.astype(np.float32) for w in _oracle("LSTM", f, attrs)])
    bad = {n: feeds[n] for n in fed}
    bad["initial_c"] = feeds["initial_c"][:, :1]
    with pytest.raises(OnnxkitError, match="'n0'.*initial state"):
        sess.run(None, bad)
