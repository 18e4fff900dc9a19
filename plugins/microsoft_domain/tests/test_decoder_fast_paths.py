"""The decoder hot paths: GroupQueryAttention's token step (gqa_token.py) and the declared output
sizes of the LLM kernels (no inference per run in their size guards).

The token step is checked differentially: the same one-node model on onnxkit with the token step,
without it (the general kernel), and on onnxruntime 1.32, over its axes (packed QKV or not, rotary
off / full / partial, a local window, the shared max-length buffer or a past of the cached tokens
only, a scale, a first token after a one-token prompt); a spy asserts the step served the run.
The declared sizes are checked against the bytes of the outputs the kernels return, and the
limits they enforce: a GroupQueryAttention whose total_sequence_length asks for a present beyond
``max_value_bytes`` is refused by name before it runs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

from ms_harness import nbits_model as _nbits_model, run_ort, spied as _spied

import onnxkit
from onnxkit.errors import LimitExceeded
from onnxkit.limits import Limits
from onnxkit_microsoft.kernels import gqa_token

N, NKV, H = 6, 2, 32


def _gqa_model(inputs, attrs):
    names = [f"x{k}" if v is not None else "" for k, v in enumerate(inputs)]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node("GroupQueryAttention", names, ["y", "pk", "pv"], name="n0", domain="com.microsoft",
                            num_heads=N, kv_num_heads=NKV, **attrs)
    tags = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int32): TensorProto.INT32}
    ins = [helper.make_tensor_value_info(n, tags[v.dtype], list(v.shape)) for n, v in zip(names, inputs)
           if v is not None]
    g = helper.make_graph([node], "g", ins, [helper.make_empty_tensor_value_info(o) for o in ("y", "pk", "pv")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m.SerializeToString(), {n: v for n, v in zip(names, inputs) if v is not None}


def _token(packed: bool, rotary: str, window: int, share: bool, t: int, scale: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    buf = 24 if share else t - 1
    q = rng.standard_normal((1, 1, (N + 2 * NKV) * H if packed else N * H)).astype(np.float32)
    k = None if packed else rng.standard_normal((1, 1, NKV * H)).astype(np.float32)
    v = None if packed else rng.standard_normal((1, 1, NKV * H)).astype(np.float32)
    pk, pv = (rng.standard_normal((1, NKV, buf, H)).astype(np.float32) for _ in range(2))
    cos = sin = None
    if rotary != "off":
        half = H // 2 if rotary == "full" else H // 4
        ang = rng.uniform(0, 2 * np.pi, (32, half))
        cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    inputs = [q, k, v, pk, pv, np.array([t - 1], np.int32), np.array([t], np.int32), cos, sin]
    attrs = {"local_window_size": window, "do_rotary": int(rotary != "off"), "scale": scale}
    return _gqa_model(inputs, attrs)


def _run(model, feed, step: bool, monkeypatch) -> tuple:
    """onnxkit's outputs with the host token step on or off (onnxkit-cpu's compiled step off:
    it would serve first), and how many runs it served."""
    from onnxkit_cpu import compiled

    served = []
    real = gqa_token.token_step

    def spy(*args):
        out = real(*args)
        served.append(out is not None)
        return out

    monkeypatch.setattr(gqa_token, "ENABLED", step)
    monkeypatch.setattr(gqa_token, "token_step", spy)
    with warnings.catch_warnings(), compiled.disabled():
        warnings.simplefilter("ignore")
        got = onnxkit.InferenceSession(model, "cpu").run(None, feed)
    return got, sum(served)


def _run_compiled(model, feed, monkeypatch) -> tuple:
    """onnxkit's outputs with onnxkit-cpu's compiled token step, and how many runs it served."""
    from types import SimpleNamespace

    from onnxkit_cpu.compiled import gqa as loops
    from onnxkit_cpu.overrides import gqa as override

    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
    served = []
    spy = SimpleNamespace(get=lambda: _spied(loops.chunk_step, served))
    monkeypatch.setattr(override, "loops", SimpleNamespace(chunk_step=spy))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = onnxkit.InferenceSession(model, "cpu").run(None, feed)
    monkeypatch.undo()
    return got, len(served)


CASES = [dict(packed=p, rotary=r, window=w, share=s, t=t)
         for p, r, w, s, t in [(True, "full", -1, True, 9), (False, "off", -1, False, 9), (True, "partial", 4, True, 9),
                               (False, "full", 3, False, 12), (True, "off", 20, True, 5), (False, "partial", -1, True, 2),
                               (True, "full", -1, False, 2), (False, "full", 1, True, 24)]]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_token_step_equals_the_general_kernel_and_onnxruntime(case, monkeypatch):
    model, feed = _token(**case, scale=0.3 if case["window"] == 3 else 0.0)
    fast, served = _run(model, feed, True, monkeypatch)
    assert served == 1, "the token step did not serve this decoding step"
    general, served = _run(model, feed, False, monkeypatch)
    assert served == 0
    want = run_ort(model, feed)
    t = case["t"]
    for k in range(3):
        assert fast[k].shape == general[k].shape == want[k].shape and fast[k].dtype == np.float32
        np.testing.assert_allclose(fast[k], general[k], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(fast[0], want[0], rtol=1e-4, atol=1e-5)
    for k in (1, 2):  # the rows past T: the general kernel's (compared above), onnxruntime's unspecified
        np.testing.assert_allclose(fast[k][:, :, :t], want[k][:, :, :t], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_compiled_token_step_equals_the_host_step_and_onnxruntime(case, monkeypatch):
    """onnxkit-cpu's compiled step (overrides/gqa.py) serves the same cases as the host step, its
    outputs within float32 rounding of the host step's and onnxruntime's; the presents' rows
    (the past's, the new one, a shared buffer's rows after it, zeros otherwise) equal the host
    step's exactly."""
    model, feed = _token(**case, scale=0.3 if case["window"] == 3 else 0.0)
    fast, served = _run_compiled(model, feed, monkeypatch)
    assert served == 1, "the compiled step did not serve this decoding step"
    host, served = _run(model, feed, True, monkeypatch)
    assert served == 1
    want = run_ort(model, feed)
    t = case["t"]
    for k in range(3):
        assert fast[k].shape == host[k].shape == want[k].shape and fast[k].dtype == np.float32
    np.testing.assert_allclose(fast[0], host[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fast[0], want[0], rtol=1e-4, atol=1e-5)
    for k in (1, 2):
        np.testing.assert_array_equal(fast[k], host[k])
        np.testing.assert_allclose(fast[k][:, :, :t], want[k][:, :, :t], rtol=1e-6, atol=1e-6)


def _chunk(packed: bool, rotary: str, window: int, share: bool, s: int, p: int, seed: int = 0):
    """A run of ``s`` new rows after ``p`` cached ones (``p`` 0: a prompt, total = s), the past
    of the cached rows only or a shared buffer of 24 positions."""
    rng = np.random.default_rng(seed)
    t = p + s
    buf = 24 if share else p
    q = rng.standard_normal((1, s, (N + 2 * NKV) * H if packed else N * H)).astype(np.float32)
    k = None if packed else rng.standard_normal((1, s, NKV * H)).astype(np.float32)
    v = None if packed else rng.standard_normal((1, s, NKV * H)).astype(np.float32)
    pk, pv = (rng.standard_normal((1, NKV, buf, H)).astype(np.float32) for _ in range(2))
    cos = sin = None
    if rotary != "off":
        half = H // 2 if rotary == "full" else H // 4
        ang = rng.uniform(0, 2 * np.pi, (32, half))
        cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    inputs = [q, k, v, pk, pv, np.array([t - 1], np.int32), np.array([t], np.int32), cos, sin]
    return _gqa_model(inputs, {"local_window_size": window, "do_rotary": int(rotary != "off")})


CHUNKS = [dict(packed=a, rotary=r, window=w, share=sh, s=s, p=p)
          for a, r, w, sh, s, p in [(True, "full", -1, True, 9, 0), (False, "off", -1, False, 7, 0),
                                    (True, "partial", 4, False, 12, 0), (False, "full", 3, True, 5, 0),
                                    (True, "full", -1, False, 3, 5), (False, "partial", 2, True, 4, 6),
                                    (True, "off", -1, True, 1, 0)]]


@pytest.mark.parametrize("case", CHUNKS, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_compiled_chunk_step_equals_the_general_kernel_and_onnxruntime(case, monkeypatch):
    """Prompts (nothing cached) and runs of several new rows after cached ones take the compiled
    step; outputs within float32 rounding of the general kernel's (compiled loops off) and
    onnxruntime's, the presents equal to the general kernel's (onnxruntime's below the rows
    written)."""
    model, feed = _chunk(**case)
    fast, served = _run_compiled(model, feed, monkeypatch)
    assert served == 1, "the compiled step did not serve this run"
    general, served = _run(model, feed, False, monkeypatch)
    assert served == 0
    want = run_ort(model, feed)
    t = case["p"] + case["s"]
    for k in range(3):
        assert fast[k].shape == general[k].shape == want[k].shape and fast[k].dtype == np.float32
    np.testing.assert_allclose(fast[0], general[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fast[0], want[0], rtol=1e-4, atol=1e-5)
    for k in (1, 2):
        np.testing.assert_array_equal(fast[k], general[k])
        np.testing.assert_allclose(fast[k][:, :, :t], want[k][:, :, :t], rtol=1e-6, atol=1e-6)


def test_compiled_step_leaves_other_cases_to_the_portable_kernel(monkeypatch):
    """A right-padded prompt (seqlens_k + 1 below the sequence length) and a batch of two take the
    portable kernel, not the compiled step."""
    rng = np.random.default_rng(2)
    q = rng.standard_normal((1, 6, (N + 2 * NKV) * H)).astype(np.float32)
    pk, pv = (np.zeros((1, NKV, 0, H), np.float32) for _ in range(2))
    model, feed = _gqa_model([q, None, None, pk, pv, np.array([3], np.int32), np.array([6], np.int32)],
                             {"local_window_size": -1})
    got, served = _run_compiled(model, feed, monkeypatch)
    assert served == 0
    np.testing.assert_allclose(got[0][:, :4], run_ort(model, feed)[0][:, :4], rtol=1e-4, atol=1e-5)
    q = rng.standard_normal((2, 1, (N + 2 * NKV) * H)).astype(np.float32)
    pk, pv = (rng.standard_normal((2, NKV, 8, H)).astype(np.float32) for _ in range(2))
    model, feed = _gqa_model([q, None, None, pk, pv, np.array([5, 7], np.int32), np.array([8], np.int32)],
                             {"local_window_size": -1})
    got, served = _run_compiled(model, feed, monkeypatch)
    assert served == 0
    np.testing.assert_allclose(got[0], run_ort(model, feed)[0], rtol=1e-4, atol=1e-5)


def test_token_step_leaves_other_cases_to_the_general_kernel(monkeypatch):
    """A prompt run (total 1 here: no past token) and a batch of two are not one decoding step."""
    model, feed = _token(True, "full", -1, True, 1)
    assert _run(model, feed, True, monkeypatch)[1] == 0
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 1, (N + 2 * NKV) * H)).astype(np.float32)
    pk, pv = (rng.standard_normal((2, NKV, 8, H)).astype(np.float32) for _ in range(2))
    model, feed = _gqa_model([q, None, None, pk, pv, np.array([5, 7], np.int32), np.array([8], np.int32)],
                             {"local_window_size": -1})
    got, served = _run(model, feed, True, monkeypatch)
    assert served == 0
    want = run_ort(model, feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


def test_gqa_declared_size_refuses_a_present_beyond_the_limit():
    """total_sequence_length asks for two 2 x 10^6 x 32 float32 presents present: refused before the kernel."""
    model, feed = _token(True, "off", -1, True, 9)
    feed["x6"] = np.array([1_000_000], np.int32)
    sess = onnxkit.InferenceSession(model, "cpu", limits=Limits(max_value_bytes=64 << 20))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(LimitExceeded, match="max_value_bytes|max_run_bytes"):
            sess.run(None, feed)


@pytest.mark.parametrize("op", ["GroupQueryAttention", "SkipSimplifiedLayerNormalization", "MatMulNBits",
                                "RotaryEmbedding", "SimplifiedLayerNormalization"])
def test_declared_sizes_bound_the_outputs(op):
    """Each kernel's declared bytes equal (or bound, for SimplifiedLayerNormalization's float32
    work) the bytes of the outputs it returns."""
    from onnxkit.plugin import traits_of

    rng = np.random.default_rng(2)
    if op == "GroupQueryAttention":
        model, feed = _token(True, "full", -1, True, 9)
    else:
        x = rng.standard_normal((1, 3, 32)).astype(np.float32)
        if op == "SkipSimplifiedLayerNormalization":
            inputs, attrs, dom = [x, x + 1, np.ones(32, np.float32)], {"epsilon": 1e-5}, "com.microsoft"
        elif op == "SimplifiedLayerNormalization":
            inputs, attrs, dom = [x, np.ones(32, np.float32)], {"epsilon": 1e-5, "axis": -1}, ""
        elif op == "RotaryEmbedding":
            ang = rng.uniform(0, 6, (8, 8)).astype(np.float32)
            inputs, attrs, dom = [x, np.array([[0, 1, 2]], np.int64), np.cos(ang), np.sin(ang)], {"num_heads": 2}, \
                "com.microsoft"
        else:
            b = rng.integers(0, 255, (8, 1, 16), dtype=np.uint8)
            inputs, attrs, dom = [x, b, np.ones(8, np.float32)], {"K": 32, "N": 8, "bits": 4, "block_size": 32}, \
                "com.microsoft"
        names = [f"x{k}" for k in range(len(inputs))]
        n_out = {"SkipSimplifiedLayerNormalization": 4, "SimplifiedLayerNormalization": 2}.get(op, 1)
        outs = ["y"] + [f"y{k}" for k in range(1, n_out)]
        tags = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
                np.dtype(np.uint8): TensorProto.UINT8}
        node = helper.make_node(op, names, outs, name="n0", domain=dom, **attrs)
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, tags[v.dtype], list(v.shape))
                                            for n, v in zip(names, inputs)],
                              [helper.make_empty_tensor_value_info(o) for o in outs])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
        m.ir_version = 8
        model, feed = m.SerializeToString(), dict(zip(names, inputs))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sess = onnxkit.InferenceSession(model, "cpu")
        outs = sess.run(None, feed)
    fns = [st.fn for st in sess.plan.steps]
    assert len(fns) == 1
    predict = traits_of(fns[0]).output_bytes
    assert predict is not None, f"{op}'s kernel declares no output sizes"
    assert sess.plan.steps[0].guard.kind == "declared"  # no inference per run
    args = [feed[f"x{k}"] if f"x{k}" in feed else None for k in range(max(int(n[1:]) for n in feed) + 1)]
    declared = predict(*args)
    actual = sum(np.asarray(o).nbytes for o in outs)
    if op == "SimplifiedLayerNormalization":
        assert actual <= declared <= 2 * actual
    else:
        assert declared == actual, (op, declared, actual)


@pytest.mark.parametrize("shape,bias", [((1, 1, 64), False), ((1, 5, 64), True), ((3, 64), True)])
def test_skip_simplified_norm_host_body_equals_the_portable_one_and_onnxruntime(shape, bias, monkeypatch):
    """SkipSimplifiedLayerNormalization's plain-numpy body (float32 host arrays) gives the portable
    body's four outputs exactly, and onnxruntime's Y and sum (its mean output is unspecified)."""
    from onnxkit_microsoft.kernels import norm

    rng = np.random.default_rng(len(shape))
    x, skip = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    gamma = rng.standard_normal(64).astype(np.float32)
    inputs = [x, skip, gamma] + ([rng.standard_normal(64).astype(np.float32)] if bias else [])
    names = [f"x{k}" for k in range(len(inputs))]
    outs = ["y", "mean", "inv", "sum"]
    node = helper.make_node("SkipSimplifiedLayerNormalization", names, outs, name="n0", domain="com.microsoft",
                            epsilon=1e-5)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape))
                                        for n, v in zip(names, inputs)],
                          [helper.make_empty_tensor_value_info(o) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    model, feed = m.SerializeToString(), dict(zip(names, inputs))
    assert norm._host_f32(*inputs, *([None] * (4 - len(inputs))))
    results = {}
    from onnxkit_cpu import compiled

    for host in (True, False):
        monkeypatch.setattr(norm, "HOST_F32", host)
        with warnings.catch_warnings(), compiled.disabled():  # onnxkit-cpu's compiled loop would serve first
            warnings.simplefilter("ignore")
            results[host] = onnxkit.InferenceSession(model, "cpu").run(None, feed)
    for a, b in zip(results[True], results[False]):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    want = run_ort(model, feed)
    np.testing.assert_allclose(results[True][0], want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(results[True][3], want[3], rtol=1e-6, atol=1e-6)


def _rms_model(op: str, inputs: list, outs: list, **attrs):
    names = [f"x{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, outs, name="n0", domain="com.microsoft" if op.startswith("Skip") else "",
                            **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(v.shape))
                                        for n, v in zip(names, inputs)],
                          [helper.make_empty_tensor_value_info(o) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m.SerializeToString(), dict(zip(names, inputs))


def _run_rms(model, feed, monkeypatch, compiled_on: bool):
    from types import SimpleNamespace

    from onnxkit_cpu import compiled
    from onnxkit_cpu.compiled import rms_norm as loops
    from onnxkit_cpu.overrides import rms_norm as override

    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
    served = []
    spy = SimpleNamespace(get=lambda: _spied(loops.rms_rows, served))
    monkeypatch.setattr(override, "loops", SimpleNamespace(rms_rows=spy))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if compiled_on:
            got = onnxkit.InferenceSession(model, "cpu").run(None, feed)
        else:
            with compiled.disabled():
                got = onnxkit.InferenceSession(model, "cpu").run(None, feed)
    monkeypatch.undo()
    return got, len(served)


@pytest.mark.parametrize("shape,bias", [((1, 1, 64), False), ((1, 5, 576), True), ((3, 70), True), ((2, 3, 1), False)])
def test_compiled_skip_simplified_norm_equals_the_portable_one_and_onnxruntime(shape, bias, monkeypatch):
    """onnxkit-cpu's compiled SkipSimplifiedLayerNormalization (overrides/rms_norm.py) serves the
    float32 forms: Y and the inverse deviation within float32 rounding of the portable kernel's
    and onnxruntime's, the sum equal to the portable one's, the mean output zeros."""
    rng = np.random.default_rng(shape[-1])
    inputs = [rng.standard_normal(shape).astype(np.float32) for _ in range(2)]
    inputs += [rng.standard_normal(shape[-1]).astype(np.float32) for _ in range(2 if bias else 1)]
    model, feed = _rms_model("SkipSimplifiedLayerNormalization", inputs, ["y", "mean", "inv", "sum"], epsilon=1e-5)
    fast, served = _run_rms(model, feed, monkeypatch, True)
    assert served == 1
    slow, served = _run_rms(model, feed, monkeypatch, False)
    assert served == 0
    want = run_ort(model, feed)
    for k in range(4):
        assert fast[k].shape == slow[k].shape and fast[k].dtype == slow[k].dtype == np.float32
    np.testing.assert_allclose(fast[0], slow[0], rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(fast[2], slow[2], rtol=2e-6, atol=0)
    np.testing.assert_array_equal(fast[3], slow[3])
    np.testing.assert_array_equal(fast[1], np.zeros_like(fast[1]))
    np.testing.assert_allclose(fast[0], want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fast[3], want[3], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape,axis", [((1, 1, 576), -1), ((4, 33), 1), ((2, 3, 8), 1)])
def test_compiled_simplified_norm_equals_the_portable_one_and_onnxruntime(shape, axis, monkeypatch):
    """SimplifiedLayerNormalization over the last axis takes the compiled loop (within float32
    rounding of the portable kernel and onnxruntime); over more axes, the portable kernel."""
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    scale = rng.standard_normal(shape[axis:]).astype(np.float32)
    model, feed = _rms_model("SimplifiedLayerNormalization", [x, scale], ["y", "inv"], epsilon=1e-6, axis=axis)
    fast, served = _run_rms(model, feed, monkeypatch, True)
    assert served == (1 if axis in (-1, len(shape) - 1) else 0)
    slow, _ = _run_rms(model, feed, monkeypatch, False)
    want = run_ort(model, feed)
    for k in range(2):
        assert fast[k].shape == slow[k].shape == want[k].shape and fast[k].dtype == np.float32
        np.testing.assert_allclose(fast[k], slow[k], rtol=2e-6, atol=2e-6)
        np.testing.assert_allclose(fast[k], want[k], rtol=1e-5, atol=1e-5)


def test_nbits_dequantized_weight_is_shared_by_the_plans_of_a_session(monkeypatch):
    """Prompts of 12, 16, 20 and 12 rows (more than the token step takes: the portable kernel's
    dequantized product) under ``ONNXKIT_FIRST_RUN=second`` (the cold first plan, then the warm
    plan that replaces it, each with its own kernels), on a session and on a second one made
    before either ran (its kernels find the weight when they first need it): the weight of the
    constant B is dequantized once for all of them; results equal onnxruntime's."""
    from onnxkit_cpu.compiled import nbits_vnni
    from onnxkit_microsoft.kernels import nbits

    monkeypatch.setattr(nbits_vnni, "ENABLED", False)  # the VNNI loop would take the prompts
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "second")
    calls = []
    real = nbits.dequantize
    monkeypatch.setattr(nbits, "dequantize", lambda *a, **k: calls.append(1) or real(*a, **k))
    model = _nbits_model(24, 256, 32, True, False, seed=9)
    sessions = [onnxkit.InferenceSession(model, "cpu") for _ in range(2)]
    for sess in sessions:
        for rows in (12, 16, 20, 12):
            a = np.random.default_rng(rows).standard_normal((1, rows, 256)).astype(np.float32)
            got = sess.run(None, {"A": a})[0]
            want = run_ort(model, {"A": a})[0]
            assert np.abs(got - want).max() <= 4e-6 * np.abs(want).max()
    assert len(calls) == 1, f"dequantized {len(calls)} times"


def test_nbits_weight_outlives_the_plan_that_made_it(monkeypatch):
    """A plan made while the one holding the weight lives adopts it: after that plan is gone a
    prompt on the new plan does not dequantize again (tiered: the warm plan, made beside the cold
    one, serves single-row tokens without the weight, then a prompt)."""
    import gc

    from onnxkit_cpu.compiled import nbits_vnni
    from onnxkit_microsoft.kernels import nbits

    monkeypatch.setattr(nbits_vnni, "ENABLED", False)  # the VNNI loop would take the prompts
    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
    calls = []
    real = nbits.dequantize
    monkeypatch.setattr(nbits, "dequantize", lambda *a, **k: calls.append(1) or real(*a, **k))
    model = _nbits_model(24, 256, 32, False, False, seed=11)
    a = np.random.default_rng(0).standard_normal((1, 12, 256)).astype(np.float32)
    first = onnxkit.InferenceSession(model, "cpu")
    first.run(None, {"A": a})
    second = onnxkit.InferenceSession(model, "cpu")  # its constants are its own copies
    assert len(calls) == 1
    second.run(None, {"A": a[:, :1]})
    del first
    gc.collect()
    got = second.run(None, {"A": a})[0]
    assert len(calls) == 1, f"dequantized {len(calls)} times"
    want = run_ort(model, {"A": a})[0]
    assert np.abs(got - want).max() <= 4e-6 * np.abs(want).max()
