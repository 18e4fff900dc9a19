"""The blocked body of ai.onnxkit Attention-2 for long sequences (overrides/attention.py
``_blocked``: BLAS products over blocks of query rows, the score matrix never whole) against an
independent float64 reference of the definition, the portable kernel (kernels/fused.py, taken
when the blocked threshold is out of reach and compiled loops are off), and onnxruntime running
the unfused pattern the exporters write (which onnxkit's optimizer fuses into the node).

Every test that expects the blocked body counts its calls (a spy), so it fails if the kernel
silently stops taking it; block sizes are shrunk so that sequence lengths fall on, and off, a
block boundary (a partial last block), with one case at the default block size.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.overrides import attention as override  # noqa: E402

from test_compiled_attention import close, padding_mask, reference, run  # noqa: E402

RNG = np.random.default_rng(2718)


@pytest.fixture
def spy(monkeypatch):
    """``spy["calls"]``: calls of the blocked body; blocks of 1,000 scores (several per head)."""
    body, count = override._blocked, {"calls": 0}

    def counted(*args):
        count["calls"] += 1
        return body(*args)

    monkeypatch.setattr(override, "_blocked", counted)
    monkeypatch.setattr(override, "BLOCK_SCORES", 1000)
    monkeypatch.setattr(override, "BATCHED_SCORES", 0)      # float32's batched body out of reach
    return count


def portable(q, k, v, mask=None, scale=None, guard=1):
    """The portable kernel's result: the blocked threshold out of reach, compiled loops off."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(override, "BLOCKED_MIN_SCORES", 1 << 62)
        return run(q, k, v, mask, scale=scale, guard=guard, numpy_body=True)


def qkv(b, h, s, d, dv=None, kv=None, t=np.float32):
    kv = s if kv is None else kv
    return ((RNG.standard_normal((b, h, s, d)) * 0.5).astype(t), (RNG.standard_normal((b, h, kv, d)) * 0.5).astype(t),
            RNG.standard_normal((b, h, kv, dv or d)).astype(t))


def causal(s, kv, t=np.float32):
    return np.where(np.tril(np.ones((s, kv), bool), kv - s), 0.0, -np.inf).astype(t)


CASES = {   # (B, H, Sq, D, Dv, Skv, mask shape or kind); 1,000 // Skv rows a block
    "self-97": (2, 3, 97, 16, None, None, None),          # 10 rows a block, last block 7 rows
    "self-100": (1, 2, 100, 8, None, None, None),         # exactly 10 blocks
    "cross-70x130": (2, 2, 70, 16, 24, 130, "padding"),   # Dv != D, more keys than queries
    "one-block-row": (1, 1, 5, 8, None, 1001, None),      # Skv > block: one row a block
    "causal-64": (2, 2, 64, 32, None, None, "causal"),
    "mask-row": (3, 2, 80, 8, None, None, (80,)),
    "mask-heads": (3, 2, 80, 8, None, None, (3, 2, 80, 80)),
}


def _mask(kind, b, s, kv, t):
    if kind is None:
        return None
    if kind == "padding":
        return padding_mask(b, s, t, kv=kv)
    if kind == "causal":
        return causal(s, kv, t)
    return RNG.standard_normal(kind).astype(t)


@pytest.mark.parametrize("t", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("guard", [1, 0])
def test_blocked_matches_reference_and_portable(spy, t, case, guard):
    b, h, s, d, dv, kv, kind = CASES[case]
    q, k, v = qkv(b, h, s, d, dv, kv, t)
    mask = _mask(kind, b, s, kv or s, t)
    got = run(q, k, v, mask, scale=0.3, guard=guard)
    assert spy["calls"] == 1
    assert close(got, reference(q, k, v, mask, scale=0.3, guard=guard))
    assert close(got, portable(q, k, v, mask, scale=0.3, guard=guard))


def test_default_block_size_and_scale(monkeypatch):
    q, k, v = qkv(1, 2, 300, 64)
    calls = []
    body = override._blocked
    monkeypatch.setattr(override, "_blocked", lambda *a: calls.append(1) or body(*a))
    monkeypatch.setattr(override, "BATCHED_SCORES", 0)      # float32's batched body out of reach
    got = run(q, k, v, guard=0)
    assert calls and close(got, reference(q, k, v, scale=1 / 8, guard=0))


def test_below_the_threshold_the_blocked_body_is_not_taken(spy):
    q, k, v = qkv(2, 2, 63, 8, kv=65)          # 4,095 scores a head
    got = run(q, k, v)
    assert spy["calls"] == 0 and close(got, reference(q, k, v))


def test_guard_zeros_rows_of_nan_inf_and_all_masked(spy):
    q, k, v = qkv(2, 2, 90, 16)
    mask = padding_mask(2, 90)
    mask[0, :, 17, :] = -np.inf                 # a query attending nothing
    q[1, 0, 44, 3] = np.nan                     # a NaN query row
    k[1, 1, 5, 0] = np.inf                      # an infinite key: a +inf score zeros its row, -inf drops it
    got = run(q, k, v, mask)
    plus = q[1, 1, :, 0] > 0                    # the rows whose score of key 5 is +inf
    assert spy["calls"] == 1 and plus.any() and not plus.all()
    assert np.all(got[0, :, 17] == 0) and np.all(got[1, 0, 44] == 0) and np.all(got[1, 1][plus] == 0)
    assert np.isfinite(got).all()
    assert close(got, reference(q, k, v, mask)) and close(got, portable(q, k, v, mask))


def test_unguarded_fully_masked_row_gives_nan_as_the_unfused_softmax(spy):
    q, k, v = qkv(2, 2, 90, 8)
    mask = np.zeros((2, 1, 90, 90), np.float32)
    mask[0, :, 1, :] = -np.inf
    q[1, 1, 3, 0] = np.nan
    got = run(q, k, v, mask, guard=0)
    assert spy["calls"] == 1
    assert np.all(np.isnan(got[0, :, 1])) and np.all(np.isnan(got[1, 1, 3]))
    assert np.isfinite(np.delete(got[1, 1], 3, axis=0)).all() and np.isfinite(got[0, :, 0]).all()
    assert close(got, reference(q, k, v, mask, guard=0))
    assert close(got, portable(q, k, v, mask, guard=0))


def test_nan_and_inf_in_v_propagate(spy):
    q, k, v = qkv(1, 2, 70, 8)
    v[0, 1, 2, 3] = np.inf
    v[0, 0, 4, 1] = np.nan
    got = run(q, k, v)
    assert spy["calls"] == 1
    assert np.all(np.isinf(got[0, 1, :, 3])) and np.all(np.isnan(got[0, 0, :, 1]))


def test_blocked_body_is_taken_with_compiled_loops_off(spy):
    q, k, v = qkv(1, 2, 80, 8)
    got = run(q, k, v, numpy_body=True)
    assert spy["calls"] == 1 and close(got, reference(q, k, v))


def _pattern(b, h, s, kv, d, masked: bool) -> bytes:
    """The unfused layer as torch's SDPA export writes it: Q and K^T each times 1/sqrt(sqrt(D)),
    MatMul, an additive float mask, Softmax, ``Where(IsNaN(p), 0, p)``, MatMul."""
    f = 1 / math.sqrt(math.sqrt(d))
    c = lambda n, x: helper.make_tensor(n, TP.FLOAT, [], [x])  # noqa: E731
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("Mul", ["q", "f"], ["qs"]), helper.make_node("Mul", ["kt", "f"], ["ks"]),
             helper.make_node("MatMul", ["qs", "ks"], ["scores"])]
    last = "scores"
    if masked:
        nodes.append(helper.make_node("Add", ["scores", "mask"], ["biased"]))
        last = "biased"
    nodes += [helper.make_node("Softmax", [last], ["p"], axis=-1), helper.make_node("IsNaN", ["p"], ["nan"]),
              helper.make_node("Where", ["nan", "zero", "p"], ["pg"]), helper.make_node("MatMul", ["pg", "v"], ["y"])]
    vi = lambda n, shape: helper.make_tensor_value_info(n, TP.FLOAT, shape)  # noqa: E731
    inputs = [vi("q", [b, h, s, d]), vi("k", [b, h, kv, d]), vi("v", [b, h, kv, d])]
    if masked:
        inputs.append(vi("mask", [b, 1, s, kv]))
    g = helper.make_graph(nodes, "attention", inputs, [vi("y", [b, h, s, d])], [c("f", f), c("zero", 0.0)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


@pytest.mark.parametrize("shape", [(1, 2, 97, 97, 16), (2, 3, 70, 131, 32), (1, 1, 257, 33, 8)])
@pytest.mark.parametrize("masked", [False, True])
def test_fused_layer_matches_onnxruntime(spy, shape, masked):
    b, h, s, kv, d = shape
    data = _pattern(b, h, s, kv, d, masked)
    q, k, v = qkv(b, h, s, d, kv=kv)
    feed = {"q": q, "k": k, "v": v}
    if masked:
        feed["mask"] = padding_mask(b, s, kv=kv)
        feed["mask"][0, :, 3, :] = -np.inf     # one fully masked row: the guard's zeros
    got = InferenceSession(data).run(None, feed)[0]
    assert spy["calls"] == 1
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert close(got, want)


@pytest.mark.skipif(not compiled.available(), reason="numba is not installed")
def test_compiled_loop_and_blocked_body_agree_at_the_threshold(spy, monkeypatch):
    q, k, v = qkv(2, 2, 64, 16)               # 4,096 scores: blocked
    mask = padding_mask(2, 64)
    got = run(q, k, v, mask)
    assert spy["calls"] == 1
    monkeypatch.setattr(override, "BLOCKED_MIN_SCORES", 4097)
    assert close(got, run(q, k, v, mask)) and spy["calls"] == 1
