"""The compiled bodies of ai.onnxkit Attention-2 (float64: the loop of onnxkit_cpu/compiled/attention.py;
float32: overrides/attention.py ``_batched`` around compiled/activation.py's float32 softmax rows) against the
numpy body (the same kernel planned under ``compiled.disabled()``: kernels/fused.py) and an
independent float64 reference of the definition.  Tests that expect the compiled path count the
loop's calls (a spy around the loop the factory asks for), so they fail if the kernel silently
stops taking it.

What the loop must keep (its docstring): results within Clause 11's tolerance of the
reference (float32 and float64); with nan_to_zero = 1 a NaN probability is 0 (fully masked rows,
NaN and inf in Q or K), with 0 the plain softmax: a row whose maximum is -inf gives NaN, and NaN propagates.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper  # noqa: E402

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit.tolerances import tolerance_for  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.overrides import attention as override  # noqa: E402

pytestmark = pytest.mark.skipif(not compiled.available(), reason="numba is not installed")

RNG = np.random.default_rng(314)


@pytest.fixture
def spy(monkeypatch):
    """``spy["calls"]``: calls of the compiled loop (the factory is given a counting wrapper)."""
    fn, count = override.attention_loop(), {"calls": 0}

    def counted(*args):
        count["calls"] += 1
        return fn(*args)

    monkeypatch.setattr(override, "attention_loop", lambda: counted if compiled.enabled() else None)
    batched = override._batched

    def counted_batched(*args):      # float32: the batched body around the compiled float32 softmax
        count["calls"] += 1
        return batched(*args)

    monkeypatch.setattr(override, "_batched", counted_batched)
    return count


def run(q, k, v, mask=None, scale=None, guard=1, numpy_body=False):
    """One ai.onnxkit Attention-2 node over the arrays (under ``compiled.disabled()`` when ``numpy_body``)."""
    inputs = [q, k, v] + ([mask] if mask is not None else [])
    names = [f"x{i}" for i in range(len(inputs))]
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), None) for n, a in zip(names, inputs)]
    attrs = {"nan_to_zero": guard} if guard is not None else {}
    if scale is not None:
        attrs["scale"] = scale
    node = helper.make_node("Attention", names, ["y"], domain="ai.onnxkit", **attrs)
    ops = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnxkit", 2)]
    m = helper.make_model(helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", TP.UNDEFINED, None)]),
                          opset_imports=ops, ir_version=8)
    data = m.SerializeToString()
    if numpy_body:
        with compiled.disabled():
            s = InferenceSession(data, validate=False)
    else:
        s = InferenceSession(data, validate=False)
    return s.run(None, dict(zip(names, inputs)))[0]


def reference(q, k, v, mask=None, scale=None, guard=1):
    """The definition in float64, elementwise loops of numpy's einsum (no code under test)."""
    q64, k64, v64 = (a.astype(np.float64) for a in (q, k, v))
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else float(np.float32(scale))   # a FLOAT attribute
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.einsum("bhid,bhjd->bhij", q64, k64) * scale
        if mask is not None:
            s = s + mask.astype(np.float64)
        m = s.max(axis=-1, keepdims=True)
        e = np.exp(s - m)            # a row of -inf: -inf - -inf is NaN, as the unfused Softmax
        tot = e.sum(axis=-1, keepdims=True)
        p = e / tot
        if guard:
            p = np.where(np.isnan(p), 0.0, p)
        return np.einsum("bhij,bhjc->bhic", p, v64).astype(q.dtype)


def close(a, b) -> bool:
    tol = tolerance_for(b.dtype)
    with np.errstate(invalid="ignore"):
        return a.shape == b.shape and a.dtype == b.dtype and bool(np.all(
            (np.abs(a.astype(np.float64) - b) <= tol.atol + tol.rtol * np.abs(b.astype(np.float64)))
            | (np.isnan(a) & np.isnan(b)) | (a == b)))


def qkv(b, h, s, d, dv=None, t=np.float32, kv=None):
    kv = s if kv is None else kv
    return ((RNG.standard_normal((b, h, s, d)) * 0.5).astype(t), (RNG.standard_normal((b, h, kv, d)) * 0.5).astype(t),
            RNG.standard_normal((b, h, kv, dv or d)).astype(t))


def padding_mask(b, s, t=np.float32, kv=None):
    """bert's mask: 0 for real tokens, -inf for the padding keys of some batch entries, (B, 1, S, Skv)."""
    kv = s if kv is None else kv
    m = np.zeros((b, 1, s, kv), t)
    m[-1, :, :, kv - 3:] = -np.inf
    return m


def causal_mask(b, s, t=np.float32):
    """gpt2's mask: causal and padding, -inf where masked, (B, 1, S, S)."""
    m = np.where(np.tril(np.ones((s, s), bool)), 0.0, -np.inf).astype(t)
    return np.ascontiguousarray(np.broadcast_to(m, (b, 1, s, s)))


@pytest.mark.parametrize("t", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["bert", "gpt2", "vit", "dv16", "cross"])
def test_compiled_matches_numpy_body_and_reference(spy, t, case):
    if case == "bert":
        (q, k, v), mask, guard = qkv(3, 2, 9, 32, t=t), padding_mask(3, 9, t), 1
    elif case == "gpt2":
        (q, k, v), mask, guard = qkv(3, 2, 9, 32, t=t), causal_mask(3, 9, t), 1
    elif case == "vit":
        (q, k, v), mask, guard = qkv(3, 2, 17, 32, t=t), None, 0
    elif case == "dv16":
        (q, k, v), mask, guard = qkv(2, 12, 5, 64, dv=16, t=t), padding_mask(2, 5, t), 1
    else:       # more keys than queries
        (q, k, v), mask, guard = qkv(1, 3, 4, 8, t=t, kv=11), padding_mask(1, 4, t, kv=11), 1
    got = run(q, k, v, mask, scale=0.2, guard=guard)
    assert spy["calls"] == 1
    assert close(got, run(q, k, v, mask, scale=0.2, guard=guard, numpy_body=True))
    assert close(got, reference(q, k, v, mask, scale=0.2, guard=guard))


def test_default_scale_is_one_over_sqrt_head_size(spy):
    q, k, v = qkv(1, 2, 6, 16)
    assert close(run(q, k, v, guard=0), reference(q, k, v, scale=0.25, guard=0)) and spy["calls"] == 1


@pytest.mark.parametrize("mshape", [(9,), (1, 9), (1, 1, 1, 9), (3, 1, 1, 9), (2, 9, 9), (3, 2, 9, 9)])
def test_mask_broadcasts(spy, mshape):
    q, k, v = qkv(3, 2, 9, 8)
    mask = RNG.standard_normal(mshape).astype(np.float32)
    got = run(q, k, v, mask)
    assert spy["calls"] == 1
    assert close(got, reference(q, k, v, mask)) and close(got, run(q, k, v, mask, numpy_body=True))


def test_a_mask_broadcast_over_the_keys_takes_the_numpy_body(spy):
    q, k, v = qkv(2, 2, 5, 8)
    mask = RNG.standard_normal((2, 1, 5, 1)).astype(np.float32)
    got = run(q, k, v, mask)
    assert spy["calls"] == 0 and close(got, reference(q, k, v, mask))


def test_non_contiguous_inputs(spy):
    q, k, v = (np.transpose(RNG.standard_normal((2, 7, 3, 16)).astype(np.float32), (0, 2, 1, 3)) for _ in range(3))
    mask = padding_mask(2, 7)[..., ::1]
    got = run(q, k, v, mask)
    assert spy["calls"] == 1 and close(got, reference(q, k, v, mask))


def test_fortran_ordered_inputs(spy):
    """Inputs of any memory layout (numpy then keeps it through its products): the result is the
    same as on C-contiguous copies, and the reference's."""
    q, k, v = qkv(2, 2, 33, 8, kv=65)
    mask = np.where(RNG.random((2, 1, 33, 65)) < 0.3, -np.inf, 0.0).astype(np.float32)
    qf, kf, vf, mf = (np.asfortranarray(a) for a in (q, k, v, mask))
    got = run(qf, kf, vf, mf)
    assert spy["calls"] == 1
    assert close(got, reference(q, k, v, mask)) and np.array_equal(got, run(q, k, v, mask))


def test_guard_zeros_nan_rows_like_the_unfused_pattern(spy):
    q, k, v = qkv(3, 2, 9, 32)
    mask = padding_mask(3, 9)
    mask[0, :, 2, :] = -np.inf          # a query attending nothing
    q[1, 0, 4, 3] = np.nan              # a NaN query row
    k[2, 1, 5, 0] = np.inf              # an infinite key: +-inf and NaN scores
    got = run(q, k, v, mask)
    assert spy["calls"] == 1
    assert np.all(got[0, :, 2] == 0) and np.all(got[1, 0, 4] == 0)
    assert close(got, reference(q, k, v, mask)) and close(got, run(q, k, v, mask, numpy_body=True))


def test_unguarded_fully_masked_row_gives_nan_as_the_unfused_softmax(spy):
    q, k, v = qkv(2, 2, 6, 8)
    mask = np.zeros((2, 1, 6, 6), np.float32)
    mask[0, :, 1, :] = -np.inf
    q[1, 1, 3, 0] = np.nan
    got = run(q, k, v, mask, guard=0)
    assert spy["calls"] == 1
    assert np.all(np.isnan(got[0, :, 1])) and np.all(np.isnan(got[1, 1, 3]))
    assert not np.isnan(got[0, :, 0]).any()
    assert close(got, reference(q, k, v, mask, guard=0)) and close(got, run(q, k, v, mask, guard=0, numpy_body=True))


def test_nan_and_inf_in_v_propagate(spy):
    q, k, v = qkv(1, 2, 5, 8)
    v[0, 1, 2, 3] = np.inf
    v[0, 0, 4, 1] = np.nan
    got = run(q, k, v)
    assert spy["calls"] == 1
    assert np.all(np.isinf(got[0, 1, :, 3])) and np.all(np.isnan(got[0, 0, :, 1]))
    assert close(got, run(q, k, v, numpy_body=True))


def test_empty_queries_take_the_numpy_body(spy):
    q, k, v = qkv(2, 2, 0, 8, kv=4)
    got = run(q, k, v)
    assert got.shape == (2, 2, 0, 8) and spy["calls"] == 0


def test_broadcast_heads_take_the_numpy_body(spy):
    q, _, _ = qkv(2, 4, 5, 8)
    k, v = (RNG.standard_normal((2, 1, 5, 8)).astype(np.float32) for _ in range(2))
    got = run(q, k, v)
    assert spy["calls"] == 0
    assert close(got, reference(q, np.broadcast_to(k, (2, 4, 5, 8)), np.broadcast_to(v, (2, 4, 5, 8))))
