"""onnxkit-cpu's packed GroupQueryAttention case (overrides/gqa.py ``packed_case``) against the
portable ``gqa_token.chunk_case`` it stands in for: the same decision (served or not) and the same
geometry on decoding steps, prompts and near misses of every condition (types, ranks, extents,
lengths, the rotary caches); a decoding stream through the session equals the general kernel's
presents bit for bit and its output within float32 rounding, and onnxruntime's.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ms_harness import run_ort

import onnxkit
from onnxkit_microsoft.kernels import gqa_token

pytest.importorskip("numba")
override = pytest.importorskip("onnxkit_cpu.overrides.gqa")

N, NKV, H = 4, 2, 16


def _attrs(rotary=True, scale=0.0):
    return {"n": N, "nkv": NKV, "rotary": rotary, "scale": scale, "causal": True, "window": -1}


def _base(rng, s=1, p=5, buf=None, half=H // 2, positions=16):
    buf = p if buf is None else buf
    q = rng.standard_normal((1, s, (N + 2 * NKV) * H)).astype(np.float32)
    pk, pv = (rng.standard_normal((1, NKV, buf, H)).astype(np.float32) for _ in range(2))
    ang = rng.uniform(0, 6, (positions, half))
    t = p + s
    return dict(query=q, past_key=pk, past_value=pv, seqlens_k=np.array([t - 1], np.int32),
                total_sequence_length=np.array(t if p else s, np.int32), cos_cache=np.cos(ang).astype(np.float32),
                sin_cache=np.sin(ang).astype(np.float32))


def _near_misses(rng):
    """(label, attributes, inputs): served cases and one change of each condition."""
    f64 = np.float64
    yield "token", _attrs(), _base(rng)
    yield "token-no-rotary", _attrs(False), _base(rng)
    yield "token-scale", _attrs(scale=0.25), _base(rng)
    yield "prompt", _attrs(), _base(rng, s=6, p=0)
    yield "chunk", _attrs(), _base(rng, s=3, p=4)
    yield "shared-buffer", _attrs(), _base(rng, p=5, buf=12)
    yield "first-token", _attrs(), _base(rng, p=1)
    yield "empty-past-token", _attrs(), _base(rng, s=1, p=0)
    for label, change in [
        ("query-f64", lambda x: x.update(query=x["query"].astype(f64))),
        ("query-list", lambda x: x.update(query=x["query"].tolist())),
        ("query-rank-2", lambda x: x.update(query=x["query"][0])),
        ("query-batch-2", lambda x: x.update(query=np.concatenate([x["query"]] * 2))),
        ("query-no-rows", lambda x: x.update(query=x["query"][:, :0])),
        ("query-width-odd", lambda x: x.update(query=x["query"][:, :, :-1])),
        ("query-head-wider", lambda x: x.update(query=np.concatenate([x["query"]] * 2, axis=2))),
        ("past-f64", lambda x: x.update(past_key=x["past_key"].astype(f64))),
        ("past-value-f64", lambda x: x.update(past_value=x["past_value"].astype(f64))),
        ("past-rank-3", lambda x: x.update(past_key=x["past_key"][0], past_value=x["past_value"][0])),
        ("past-shapes-differ", lambda x: x.update(past_value=x["past_value"][:, :, :-1])),
        ("past-batch-2", lambda x: x.update(past_key=np.concatenate([x["past_key"]] * 2),
                                            past_value=np.concatenate([x["past_value"]] * 2))),
        ("past-heads-1", lambda x: x.update(past_key=x["past_key"][:, :1], past_value=x["past_value"][:, :1])),
        ("past-head-size", lambda x: x.update(past_key=x["past_key"][..., :-1], past_value=x["past_value"][..., :-1])),
        ("seqlens-list", lambda x: x.update(seqlens_k=[int(x["seqlens_k"][0])])),
        ("seqlens-2", lambda x: x.update(seqlens_k=np.array([5, 5], np.int32))),
        ("seqlens-float", lambda x: x.update(seqlens_k=x["seqlens_k"].astype(np.float32))),
        ("seqlens-uint", lambda x: x.update(seqlens_k=x["seqlens_k"].astype(np.uint32))),
        ("total-int", lambda x: x.update(total_sequence_length=int(x["total_sequence_length"]))),
        ("total-2", lambda x: x.update(total_sequence_length=np.array([6, 6], np.int32))),
        ("total-below-t", lambda x: x.update(total_sequence_length=np.array(5, np.int32))),
        ("total-above-t", lambda x: x.update(total_sequence_length=np.array(9, np.int32))),
        ("t-zero", lambda x: x.update(seqlens_k=np.array([-1], np.int32))),
        ("t-beyond-buffer", lambda x: x.update(seqlens_k=np.array([7], np.int32),
                                               total_sequence_length=np.array(8, np.int32))),
        ("cos-missing", lambda x: x.update(cos_cache=None)),
        ("cos-f64", lambda x: x.update(cos_cache=x["cos_cache"].astype(f64))),
        ("sin-f64", lambda x: x.update(sin_cache=x["sin_cache"].astype(f64))),
        ("cos-rank-1", lambda x: x.update(cos_cache=x["cos_cache"][0], sin_cache=x["sin_cache"][0])),
        ("sin-shape", lambda x: x.update(sin_cache=x["sin_cache"][:-1])),
        ("cos-too-short", lambda x: x.update(cos_cache=x["cos_cache"][:5], sin_cache=x["sin_cache"][:5])),
        ("cos-exactly-enough", lambda x: x.update(cos_cache=x["cos_cache"][:6], sin_cache=x["sin_cache"][:6])),
        ("half-too-wide", lambda x: x.update(cos_cache=np.ones((16, H), np.float32),
                                             sin_cache=np.ones((16, H), np.float32))),
        ("half-zero", lambda x: x.update(cos_cache=np.ones((16, 0), np.float32),
                                         sin_cache=np.ones((16, 0), np.float32))),
        ("half-partial", lambda x: x.update(cos_cache=x["cos_cache"][:, :2], sin_cache=x["sin_cache"][:, :2])),
    ]:
        x = _base(rng)
        change(x)
        yield label, _attrs(), x
    x = _base(rng, s=6, p=0)
    x["seqlens_k"] = np.array([3], np.int32)  # a right-padded prompt
    yield "padded-prompt", _attrs(), x
    x = _base(rng, s=3, p=4)
    x["total_sequence_length"] = np.array(2, np.int32)  # more rows than the total
    yield "rows-beyond-total", _attrs(), x


def test_packed_case_decides_as_chunk_case_on_near_misses():
    rng = np.random.default_rng(7)
    served = 0
    for label, a, x in _near_misses(rng):
        args = (x["query"], x["past_key"], x["past_value"], x["seqlens_k"], x["total_sequence_length"],
                x["cos_cache"], x["sin_cache"])
        got = override.packed_case(a, *args)
        want = gqa_token.chunk_case(a, args[0], None, None, *args[1:])
        assert (got is None) == (want is None), label
        if got is None:
            continue
        served += 1
        q, k, v, p, t, length, half, scale = got
        for mine, theirs in ((q, want.q), (k, want.k), (v, want.v)):
            assert mine.shape == theirs.shape and mine.strides == theirs.strides, label
            assert np.shares_memory(mine, x["query"]) and np.array_equal(mine, theirs), label
        assert (p, t, length, half, scale) == (want.p, want.t, want.length, want.half, want.scale), label
    assert served == 12


def _stream_model(rotary: bool):
    from onnx import TensorProto, helper

    names = ["q", "", "", "pk", "pv", "sl", "tl"] + (["cos", "sin"] if rotary else [])
    node = helper.make_node("GroupQueryAttention", names, ["y", "opk", "opv"], domain="com.microsoft",
                            num_heads=N, kv_num_heads=NKV, do_rotary=int(rotary))
    f, i = TensorProto.FLOAT, TensorProto.INT32
    ins = [helper.make_tensor_value_info("q", f, [1, "s", (N + 2 * NKV) * H]),
           helper.make_tensor_value_info("pk", f, [1, NKV, "p", H]),
           helper.make_tensor_value_info("pv", f, [1, NKV, "p", H]),
           helper.make_tensor_value_info("sl", i, [1]), helper.make_tensor_value_info("tl", i, [])]
    if rotary:
        ins += [helper.make_tensor_value_info(c, f, [32, H // 2]) for c in ("cos", "sin")]
    outs = [helper.make_empty_tensor_value_info(o) for o in ("y", "opk", "opv")]
    m = helper.make_model(helper.make_graph([node], "g", ins, outs),
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m.SerializeToString()


@pytest.mark.parametrize("rotary", [True, False])
def test_a_packed_decoding_stream_through_the_compiled_step(rotary, monkeypatch):
    """A prompt then tokens, the presents fed back: the packed case serves every run (spied);
    the presents equal the general kernel's (compiled loops and the token step off) bit for bit,
    the outputs agree with it and with onnxruntime within float32 rounding."""
    from onnxkit_cpu import compiled

    monkeypatch.setenv("ONNXKIT_FIRST_RUN", "warm")
    calls = []
    real = override.packed_case
    monkeypatch.setattr(override, "packed_case", lambda *a: calls.append(1) or real(*a))
    model = _stream_model(rotary)
    rng = np.random.default_rng(3)
    ang = rng.uniform(0, 6, (32, H // 2))
    rot = {"cos": np.cos(ang).astype(np.float32), "sin": np.sin(ang).astype(np.float32)} if rotary else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = onnxkit.InferenceSession(model)
        with compiled.disabled():
            monkeypatch.setattr(gqa_token, "ENABLED", False)
            general = onnxkit.InferenceSession(model)
            monkeypatch.setattr(gqa_token, "ENABLED", True)
    pk = pv = np.zeros((1, NKV, 0, H), np.float32)
    total = 0
    for s in (5, 1, 1, 1, 2, 1):
        total += s
        feed = {"q": rng.standard_normal((1, s, (N + 2 * NKV) * H)).astype(np.float32), "pk": pk, "pv": pv,
                "sl": np.array([total - 1], np.int32), "tl": np.array(total, np.int32), **rot}
        got = fast.run(None, feed)
        monkeypatch.setattr(gqa_token, "ENABLED", False)
        with compiled.disabled():
            want = general.run(None, feed)
        monkeypatch.setattr(gqa_token, "ENABLED", True)
        ref = run_ort(model, feed)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[2], want[2])
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[0], ref[0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got[1], ref[1], rtol=1e-6, atol=1e-6)
        pk, pv = got[1], got[2]
    assert len(calls) == 6
