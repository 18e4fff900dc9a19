"""GroupQueryAttention, one node, against onnxruntime 1.32 over the axes of onnxruntime's CPU parity
tests (onnxruntime/test/python/transformers/test_gqa_cpu.py): the phase (prompt, token, a later
multi-token prompt), the KV buffer (shared: a past buffer of the cache's full length; or not: the
past tokens only), ``local_window_size``, rotary (off, halves, interleaved), packed QKV, ``softcap``,
``smooth_softmax`` and the custom tree attention inputs (``position_ids`` and ``attention_bias``);
batch rows of different lengths (right padding in the prompt).

The default suite runs a covering subset of that product (every pair of axis values at least
once; :data:`GRID`); ``ONNXKIT_GQA_FULL=1`` runs all of it (:func:`full_grid`).  Compared: the
output's valid rows (a padding row's output is unspecified) and each present buffer's rows
``[0, seqlens_k + 1)``; presents' shapes equal.  Then the optional inputs and outputs one by one
(head_sink, query_seqlens, causal=0, qk_output), the refusals and the shape inference.
"""

from __future__ import annotations

import itertools
import os
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper

from ms_harness import run_ort, run_onnxkit

from onnxkit.errors import OnnxkitError

N, NKV, H = 6, 3, 32
PHASES = ("prompt", "token", "subsequent")
AXES = dict(phase=PHASES, share=(True, False), local=(False, True), rotary=("off", "halves", "interleaved"),
            packed=(False, True), softcap=(0.0, 50.0), smooth=(False, True), tree=(False, True))


def full_grid() -> list:
    return [dict(zip(AXES, values)) for values in itertools.product(*AXES.values())]


def _pairwise() -> list:
    """A small set of configurations covering every pair of axis values (greedy)."""
    names = list(AXES)
    need = {(a, va, b, vb) for i, a in enumerate(names) for b in names[i + 1:] for va in AXES[a] for vb in AXES[b]}
    chosen = []
    candidates = full_grid()
    while need:
        best = max(candidates, key=lambda c: sum((a, c[a], b, c[b]) in need for a, _, b, _ in need))
        covered = {(a, best[a], b, best[b]) for i, a in enumerate(names) for b in names[i + 1:]}
        need -= covered
        chosen.append(best)
    return chosen


GRID = _pairwise() if not os.environ.get("ONNXKIT_GQA_FULL") else full_grid()


def _case(cfg, seed: int = 0):
    """(inputs list, attrs, lens T (B), query rows valid (B, S) bool, present length)."""
    rng = np.random.default_rng(seed)
    phase = cfg["phase"]
    if phase == "prompt":
        b, s = 3, 7
        t = np.array([7, 4, 6])
        p = np.zeros(b, int)
        total = s
    elif phase == "token":
        b, s = 2, 1
        t = np.array([9, 5])
        p = t - s
        total = int(t.max())
    else:
        b, s = 1, 4
        t = np.array([10])
        p = t - s
        total = 10
    buf = 16 if cfg["share"] else (0 if phase == "prompt" else int(p.max()))
    width = (N + 2 * NKV) * H if cfg["packed"] else N * H
    q = rng.standard_normal((b, s, width)).astype(np.float32)
    k = v = None
    if not cfg["packed"]:
        k = rng.standard_normal((b, s, NKV * H)).astype(np.float32)
        v = rng.standard_normal((b, s, NKV * H)).astype(np.float32)
    pk = pv = None
    if buf:
        pk = rng.standard_normal((b, NKV, buf, H)).astype(np.float32)
        pv = rng.standard_normal((b, NKV, buf, H)).astype(np.float32)
    cos = sin = None
    if cfg["rotary"] != "off":
        ang = rng.uniform(0, 2 * np.pi, (32, H // 2))
        cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    pos = bias = None
    if cfg["tree"]:
        pos = (p[:, None] + np.arange(s)[None, :]).astype(np.int64)
        pos = np.minimum(pos, t[:, None] - 1)
        bias = (rng.standard_normal((b, 1, s, total)) * 0.5).astype(np.float32)
    inputs = [q, k, v, pk, pv, (t - 1).astype(np.int32), np.array([total], np.int32), cos, sin, pos, bias]
    attrs = {"num_heads": N, "kv_num_heads": NKV, "local_window_size": 3 if cfg["local"] else -1,
             "do_rotary": int(cfg["rotary"] != "off"), "rotary_interleaved": int(cfg["rotary"] == "interleaved"),
             "softcap": cfg["softcap"], "smooth_softmax": int(cfg["smooth"])}
    valid = (np.arange(s)[None, :] + p[:, None]) < t[:, None]
    return inputs, attrs, t, valid


def _model(inputs, attrs, n_out=3):
    names = [f"x{k}" if v is not None else "" for k, v in enumerate(inputs)]
    while names and not names[-1]:
        names.pop()
    outs = ["y", "present_key", "present_value", "qk"][:n_out]
    node = helper.make_node("GroupQueryAttention", names, outs, name="n0", domain="com.microsoft", **attrs)
    tags = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(np.int32): TensorProto.INT32,
            np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int8): TensorProto.INT8,
            np.dtype(np.uint8): TensorProto.UINT8}
    ins = [helper.make_tensor_value_info(n, tags[v.dtype], list(v.shape))
           for n, v in zip(names, inputs) if v is not None]
    g = helper.make_graph([node], "g", ins, [helper.make_empty_tensor_value_info(o) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m.SerializeToString(), {n: v for n, v in zip(names, inputs) if v is not None}


def _compare(got, want, t, valid, what):
    y, yw = np.asarray(got[0]), np.asarray(want[0])
    assert y.shape == yw.shape and y.dtype == yw.dtype, (what, y.shape, yw.shape)
    np.testing.assert_allclose(y[valid], yw[valid], rtol=1e-4, atol=1e-5, err_msg=f"{what} output")
    for k in (1, 2):
        g, w = np.asarray(got[k]), np.asarray(want[k])
        assert g.shape == w.shape, (what, k, g.shape, w.shape)
        for i, ti in enumerate(t):
            np.testing.assert_allclose(g[i, :, :ti], w[i, :, :ti], rtol=1e-5, atol=1e-6, err_msg=f"{what} present {k}")


def _label(cfg) -> str:
    return "-".join(f"{k}={v}" for k, v in cfg.items())


def run_case(cfg, backend="cpu"):
    inputs, attrs, t, valid = _case(cfg)
    model, feed = _model(inputs, attrs)
    want = run_ort(model, feed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = run_onnxkit(model, feed, backend)
    _compare(got, want, t, valid, _label(cfg))


@pytest.mark.parametrize("cfg", GRID, ids=_label)
def test_gqa_parity_grid(cfg):
    run_case(cfg)


def test_grid_covers_every_pair():
    assert len(full_grid()) == 3 * 2 * 2 * 3 * 2 * 2 * 2 * 2
    if not os.environ.get("ONNXKIT_GQA_FULL"):
        assert len(GRID) < 30
        pairs = {(a, c[a], b, c[b]) for c in GRID for a in AXES for b in AXES if a < b}
        assert len(pairs) == sum(len(AXES[a]) * len(AXES[b]) for a in AXES for b in AXES if a < b)


def test_gqa_on_the_gpu_backend():
    """The torch namespace runs the kernel too (no cpu fallback), the buffer-sharing token step."""
    run_case(dict(phase="token", share=True, local=True, rotary="interleaved", packed=True, softcap=50.0,
                  smooth=True, tree=True), backend="gpu")


def _one(extra_inputs=None, attrs=None, n_out=3, phase="token"):
    cfg = dict(phase=phase, share=True, local=False, rotary="halves", packed=False, softcap=0.0, smooth=False,
               tree=False)
    inputs, base, t, valid = _case(cfg, seed=3)
    inputs = inputs + [None] * (16 - len(inputs))
    for k, v in (extra_inputs or {}).items():
        inputs[k] = v
    return _model(inputs, {**base, **(attrs or {})}, n_out), t, valid


def test_scales_beside_a_float_cache_are_unused():
    (model, feed), t, valid = _one({12: np.full(1, 3.0, np.float32), 13: np.full(1, 0.5, np.float32)})
    _compare(run_onnxkit(model, feed, "cpu"), run_ort(model, feed), t, valid, "k_scale, v_scale")


@pytest.mark.parametrize("phase", ["prompt", "token"])
def test_float16(phase):
    """float16 query, key, value and cache (computed in float32, as onnxruntime converts them)."""
    cfg = dict(phase=phase, share=True, local=True, rotary="interleaved", packed=phase == "token", softcap=0.0,
               smooth=False, tree=False)
    inputs, attrs, t, valid = _case(cfg, seed=7)
    inputs = [x.astype(np.float16) if x is not None and x.dtype == np.float32 else x for x in inputs]
    model, feed = _model(inputs, attrs)
    got, want = run_onnxkit(model, feed, "cpu"), run_ort(model, feed)
    assert all(np.asarray(g).dtype == np.float16 for g in got)
    y, yw = np.asarray(got[0], np.float32), np.asarray(want[0], np.float32)
    np.testing.assert_allclose(y[valid], yw[valid], rtol=2e-3, atol=2e-3)
    for k in (1, 2):
        for i, ti in enumerate(t):
            np.testing.assert_array_equal(np.asarray(got[k])[i, :, :ti], np.asarray(want[k])[i, :, :ti])


@pytest.mark.parametrize("phase", PHASES)
def test_position_ids(phase):
    """Arbitrary position_ids: later steps rotate by each one; the prompt by the first element plus
    the row's index, for every batch row (onnxruntime reads only that element there)."""
    cfg = dict(phase=phase, share=True, local=False, rotary="halves", packed=False, softcap=0.0, smooth=False,
               tree=False)
    inputs, attrs, t, valid = _case(cfg, seed=1)
    b, s = inputs[0].shape[:2]
    inputs[9] = np.random.default_rng(0).integers(0, 20, (b, s)).astype(np.int64)
    model, feed = _model(inputs, attrs)
    _compare(run_onnxkit(model, feed, "cpu"), run_ort(model, feed), t, valid, f"position_ids {phase}")


def test_head_sink():
    (model, feed), t, valid = _one({11: np.array([0.5, -1.0, 2.0, 0.0, 1.0, -3.0], np.float32)})
    _compare(run_onnxkit(model, feed, "cpu"), run_ort(model, feed), t, valid, "head_sink")


def test_query_seqlens_right_padded_chunk():
    """A chunk of S = 4 rows of which Q are valid, after P cached tokens (query_seqlens)."""
    rng = np.random.default_rng(5)
    b, s = 2, 4
    q, k, v = (rng.standard_normal((b, s, m * H)).astype(np.float32) for m in (N, NKV, NKV))
    pk, pv = (rng.standard_normal((b, NKV, 16, H)).astype(np.float32) for _ in range(2))
    ql = np.array([4, 2], np.int32)
    t = np.array([9, 6])
    inputs = [q, k, v, pk, pv, (t - 1).astype(np.int32), np.array([16], np.int32)] + [None] * 9 + [ql]
    model, feed = _model(inputs, {"num_heads": N, "kv_num_heads": NKV})
    valid = np.arange(s)[None, :] < ql[:, None]
    _compare(run_onnxkit(model, feed, "cpu"), run_ort(model, feed), t, valid, "query_seqlens")


def test_not_causal():
    (model, feed), t, valid = _one(attrs={"causal": 0}, phase="subsequent")
    _compare(run_onnxkit(model, feed, "cpu"), run_ort(model, feed), t, valid, "causal=0")


@pytest.mark.parametrize("mode", [1, 2])
@pytest.mark.parametrize("extra", [{}, {"local_window_size": 3}, {"softcap": 5.0}, {"smooth_softmax": 1}],
                         ids=["plain", "window", "softcap", "smooth"])
def test_qk_output(mode, extra):
    (model, feed), t, valid = _one(attrs={"qk_output": mode, **extra}, n_out=4, phase="subsequent")
    got, want = run_onnxkit(model, feed, "cpu"), run_ort(model, feed)
    _compare(got, want, t, valid, "qk_output")
    g, w = np.asarray(got[3]), np.asarray(want[3])
    assert g.shape == w.shape, (g.shape, w.shape)
    np.testing.assert_allclose(g[..., :t[0]], w[..., :t[0]], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("bits,mode,window,backend", [
    (b, m, w, "cpu") for b in (8, 4) for m in ("PER_TENSOR", "PER_CHANNEL") for w in (-1, 4)] + [
    (4, "PER_CHANNEL", 4, "gpu")])
def test_quantized_kv_cache(bits, mode, window, backend):
    """An int8 / int4 KV cache (k_quant_type, v_quant_type, kv_cache_bit_width): a prompt then token
    steps (a window-sized buffer with ``window``), each runtime's presents fed back to itself; the
    outputs equal and the cache's resident rows equal exactly."""
    rng = np.random.default_rng(bits + len(mode))
    b, cap = 2, (16 if window < 0 else 6)
    hc = H if bits == 8 else H // 2
    dtype = np.int8 if bits == 8 else np.uint8
    shape = (1,) if mode == "PER_TENSOR" else (1, NKV, 1, H)
    ks, vs = (rng.uniform(0.01, 0.04, shape).astype(np.float32) for _ in range(2))
    attrs = {"num_heads": N, "kv_num_heads": NKV, "k_quant_type": mode, "v_quant_type": mode,
             "kv_cache_bit_width": bits, "do_rotary": 1, "local_window_size": window,
             "sliding_window_cache": int(window > 0)}
    ang = rng.uniform(0, 2 * np.pi, (32, H // 2))
    rot = [np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)]
    pasts = {r: [np.zeros((b, NKV, cap, hc), dtype) for _ in range(2)] for r in ("ort", "onnxkit")}
    t = np.zeros(b, int)
    for k, s in enumerate([5, 1, 1, 1, 1, 1, 1]):
        t = t + s
        qkv = rng.standard_normal((b, s, (N + 2 * NKV) * H)).astype(np.float32)
        got = {}
        for r, run in (("ort", run_ort), ("onnxkit", lambda m, f: run_onnxkit(m, f, backend))):
            inputs = [qkv, None, None, *pasts[r], (t - 1).astype(np.int32), np.array([int(t.max())], np.int32),
                      *rot, None, None, None, ks, vs]
            model, feed = _model(inputs, attrs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got[r] = run(model, feed)
            pasts[r] = [np.asarray(got[r][1]), np.asarray(got[r][2])]
        kept = t if window < 0 else np.array([_resident(x, cap, window) for x in t])
        _compare(got["onnxkit"], got["ort"], kept, np.ones((b, s), bool), f"{bits}-bit {mode} step {k}")
        for j in (1, 2):
            assert np.asarray(got["onnxkit"][j]).dtype == dtype
            for i, n in enumerate(kept):
                np.testing.assert_array_equal(np.asarray(got["onnxkit"][j])[i, :, :n],
                                              np.asarray(got["ort"][j])[i, :, :n])


def _resident(t, cap, window):
    """Independently of the kernel: the schema's L(T) by its definition, evicting one G at a time."""
    g, kept = cap - window + 1, 0
    for _ in range(int(t)):
        kept += 1
        if kept > cap:
            kept -= g
    return kept


@pytest.mark.parametrize("batch,cap,window,extras", [
    (1, 8, 4, ()), (1, 6, 6, ("rotary",)), (2, 9, 5, ("bias", "rotary")), (1, 7, 3, ("packed", "softcap")),
    (2, 9, 5, ("bias", "rotary", "gpu"))])
def test_sliding_window_cache(batch, cap, window, extras):
    """A window-sized KV buffer (sliding_window_cache = 1) over a prompt, one-token steps past the
    first evictions and a 3-token step (batch 1): each runtime's presents fed back to itself, the
    outputs and the resident rows [0, L(T)) equal (``gpu``: on the torch backend)."""
    backend = "gpu" if "gpu" in extras else "cpu"
    rng = np.random.default_rng(cap)
    lens = np.array([7, 4])[:batch]
    steps = [7] + [1] * 9 + ([3, 1] if batch == 1 else [1, 1])
    pasts = {r: [np.zeros((batch, NKV, cap, H), np.float32) for _ in range(2)] for r in ("ort", "onnxkit")}
    ang = rng.uniform(0, 2 * np.pi, (64, H // 2))
    attrs = {"num_heads": N, "kv_num_heads": NKV, "local_window_size": window, "sliding_window_cache": 1,
             "do_rotary": int("rotary" in extras), "softcap": 30.0 if "softcap" in extras else 0.0}
    t = np.zeros(batch, int)
    for k, s in enumerate(steps):
        t = lens.copy() if k == 0 else t + s
        total = int(t.max())
        packed = "packed" in extras
        q = rng.standard_normal((batch, s, ((N + 2 * NKV) if packed else N) * H)).astype(np.float32)
        kv = [None, None] if packed else [rng.standard_normal((batch, s, NKV * H)).astype(np.float32)
                                          for _ in range(2)]
        rot = [np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)] if "rotary" in extras else [None] * 2
        bias = (rng.standard_normal((batch, 1, s, total)) * 0.5).astype(np.float32) if "bias" in extras else None
        got = {}
        for r, run in (("ort", run_ort), ("onnxkit", lambda m, f: run_onnxkit(m, f, backend))):
            inputs = [q, *kv, *pasts[r], (t - 1).astype(np.int32), np.array([total], np.int32), *rot, None, bias]
            if k == 0 and batch > 1:  # a right-padded prompt needs query_seqlens with a window cache
                inputs += [None] * 5 + [lens.astype(np.int32)]
            model, feed = _model(inputs, attrs)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got[r] = run(model, feed)
            pasts[r] = [np.asarray(got[r][1]), np.asarray(got[r][2])]
        p = t - s if k else np.zeros(batch, int)
        valid = (np.arange(s)[None, :] + p[:, None]) < t[:, None]
        kept = np.array([_resident(x, cap, window) for x in t])
        assert np.asarray(got["onnxkit"][1]).shape == np.asarray(got["ort"][1]).shape == (batch, NKV, cap, H)
        _compare(got["onnxkit"], got["ort"], kept, valid, f"window step {k}")


@pytest.mark.parametrize("inputs,attrs,words", [
    ({12: np.ones(1, np.float32), 13: np.ones(1, np.float32)}, {"k_quant_type": "PER_TENSOR"}, "for both, 4 or 8"),
    ({3: np.zeros((2, NKV, 16, H), np.int8), 4: np.zeros((2, NKV, 16, H), np.int8)}, {}, "an integer one needs"),
    ({12: np.ones(1, np.float32), 13: np.ones(1, np.float32)},
     {"k_quant_type": "PER_TENSOR", "v_quant_type": "PER_TENSOR", "kv_cache_bit_width": 8}, "of type int8"),
    ({3: np.zeros((2, NKV, 16, H), np.int8), 4: np.zeros((2, NKV, 16, H), np.int8), 12: np.ones(3, np.float32),
      13: np.ones(1, np.float32)},
     {"k_quant_type": "PER_TENSOR", "v_quant_type": "PER_TENSOR", "kv_cache_bit_width": 8}, "k_scale has shape"),
    ({14: np.ones(H, np.float32), 15: np.ones(H, np.float32)}, {}, "q_norm_weight"),
    ({}, {"sliding_window_cache": 1, "local_window_size": 40}, "at least local_window_size"),
    ({}, {"sliding_window_cache": 1}, "local_window_size > 0"),
    ({}, {"num_heads": 5}, "multiple of kv_num_heads"),
    ({5: np.array([40, 3], np.int32)}, {}, r"seqlens_k \+ 1"),
    ({8: None}, {}, "cos_cache"),
])
def test_refused_by_name(inputs, attrs, words):
    (model, feed), _, _ = _one(inputs, attrs)
    with pytest.raises(OnnxkitError, match=words):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_onnxkit(model, feed, "cpu")


def test_shape_inference_packed_and_presents():
    """Packed QKV: the output is (B, S, N*H), not the query's shape; presents (B, Nkv, ?, H)."""
    import io

    import onnxkit
    from onnxkit.inference import infer_model

    cfg = dict(phase="token", share=True, local=False, rotary="halves", packed=True, softcap=0.0, smooth=False,
               tree=False)
    inputs, attrs, _, _ = _case(cfg)
    model, _ = _model(inputs, attrs, n_out=4)
    types = {k[1]: str(v) for k, v in infer_model(onnxkit.load(io.BytesIO(model))).types.items() if not k[0]}
    assert types["y"] == f"tensor(float)[2, 1, {N * H}]", types
    assert types["present_key"] == types["present_value"] == f"tensor(float)[2, {NKV}, ?, {H}]", types
    assert types["qk"] == f"tensor(float)[2, {N}, 1, ?]", types
