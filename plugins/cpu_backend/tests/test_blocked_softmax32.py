"""The compiled float32 softmax of the blocked attention body (compiled/attention.py
``softmax_rows32`` and its exp ``_exp32_py``; overrides/attention.py ``_blocked``).

* the float32 exp against numpy's float64 exp (an independent reference): within 1 ulp over the
  softmax's range [-104, 0], 0 for -inf and below the underflow, NaN for NaN;
* differential: the blocked body with the compiled softmax against the same body with numpy's
  passes (``rows32=None``) and the float64 definition (test_compiled_attention.reference), on
  random shapes including near misses (key counts on and off the vector width, one key, a
  partial last block, masks with fully masked rows, NaN and inf scores, guard on and off);
* the node takes the compiled softmax (a spy counts its calls), and matches onnxruntime running
  the unfused pattern (test_blocked_attention's model).
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnxkit.runtime import InferenceSession  # noqa: E402
from onnxkit_cpu import compiled  # noqa: E402
from onnxkit_cpu.compiled import attention as loops  # noqa: E402
from onnxkit_cpu.overrides import attention as override  # noqa: E402

from test_blocked_attention import _pattern  # noqa: E402
from test_compiled_attention import close, padding_mask, reference, run  # noqa: E402

pytestmark = [pytest.mark.skipif(not compiled.enabled(), reason="compiled loops off"),
              pytest.mark.usefixtures("warm_bodies")]  # the compiled loops, from the first run

RNG = np.random.default_rng(16180)


def _ulps(got, want64):
    """|got - want| in units of the float32 spacing at ``want`` (float64 arithmetic)."""
    spacing = np.spacing(want64.astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want64) / spacing


def test_exp32_within_one_ulp_and_special_values():
    fn = loops.exp32_loop()
    x = np.concatenate([-RNG.random(200_000) * 87.0, -RNG.random(2_000) * 1e-6, -np.arange(0, 88, 0.25)])
    x = x.astype(np.float32)
    y = np.empty_like(x)
    fn(x, y)
    assert _ulps(y, np.exp(x.astype(np.float64))).max() <= 1.0
    tail = np.array([-87.5, -90.0, -100.0, -103.9, -104.0, -110.0, -1e30, -np.inf], np.float32)
    yt = np.empty_like(tail)
    fn(tail, yt)
    want = np.exp(tail.astype(np.float64))
    assert np.all(np.abs(yt.astype(np.float64) - want) <= 2.0 ** -149)      # subnormal results: 1 unit
    assert np.all(yt[-4:] == 0) and np.all(yt[:3] > 0)
    special = np.array([0.0, -0.0, np.nan, 1.0, 10.0], np.float32)
    ys = np.empty_like(special)
    fn(special, ys)
    assert ys[0] == 1 and ys[1] == 1 and np.isnan(ys[2])
    assert _ulps(ys[3:], np.exp(special[3:].astype(np.float64))).max() <= 1.0


def _block(q, k, v, mask, scale, guard, rows32):
    full = None if mask is None else np.broadcast_to(mask, q.shape[:3] + k.shape[2:3])
    return override._blocked(q, k, v, full, scale, guard, rows32)


SHAPES = [  # (B, H, Sq, Skv, D, Dv)
    (1, 2, 70, 65, 16, 16),      # 65 keys: one past the vector width
    (2, 1, 33, 16, 8, 8),        # exactly one AVX-512 vector a row
    (1, 1, 40, 15, 8, 24),       # one short of it, Dv != D
    (2, 2, 9, 1, 4, 4),          # one key: every probability 1
    (1, 3, 50, 1001, 32, 16),    # a row longer than the block: one row a block
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("guard", [1, 0])
@pytest.mark.parametrize("masked", [False, True])
def test_compiled_softmax_matches_numpy_passes_and_reference(shape, guard, masked, monkeypatch):
    monkeypatch.setattr(override, "BLOCK_SCORES", 1000)      # several blocks a head, a partial last one
    b, h, sq, kv, d, dv = shape
    q = RNG.standard_normal((b, h, sq, d)).astype(np.float32)
    k = RNG.standard_normal((b, h, kv, d)).astype(np.float32)
    v = RNG.standard_normal((b, h, kv, dv)).astype(np.float32)
    mask = None
    if masked:
        mask = padding_mask(b, sq, kv=kv) if kv > 3 else np.zeros((b, 1, sq, kv), np.float32)
        mask = mask + (RNG.standard_normal(mask.shape) * 3).astype(np.float32)
        mask[0, :, 2, :] = -np.inf                                    # a query attending nothing
    rows32 = loops.softmax_rows32()
    got = _block(q, k, v, mask, 0.3, guard, rows32)
    numpy_passes = _block(q, k, v, mask, 0.3, guard, None)
    want = reference(q, k, v, mask, scale=0.3, guard=guard)
    assert close(got, want) and close(got, numpy_passes)
    attending = np.ones(got.shape[:3], bool)
    if masked:
        attending[0, :, 2] = False
    assert np.isfinite(got[attending]).all()
    # no less accurate than numpy's passes (both against the float64 definition)
    assert np.abs(got - want)[attending].max() <= 2 * np.abs(numpy_passes - want)[attending].max() + 1e-7
    if masked:  # the query attending nothing: zeros under the guard, else the plain softmax's NaN
        assert np.all(got[0, :, 2] == 0) if guard else np.all(np.isnan(got[0, :, 2]))


@pytest.mark.parametrize("guard", [1, 0])
def test_nan_and_inf_scores_follow_the_rules(guard):
    q, k, v = (RNG.standard_normal((1, 2, 80, 8)).astype(np.float32) for _ in range(3))
    q[0, 0, 7, 1] = np.nan                    # a NaN row of scores
    k[0, 1, 3, 0] = np.inf                    # +inf (q > 0) or -inf (q < 0) in column 3 of head 1
    rows32 = loops.softmax_rows32()
    got = _block(q, k, v, None, 0.25, guard, rows32)
    numpy_passes = _block(q, k, v, None, 0.25, guard, None)
    plus = q[0, 1, :, 0] > 0
    assert plus.any() and not plus.all()
    same = (got == numpy_passes) | (np.isnan(got) & np.isnan(numpy_passes))
    rows_bad = np.zeros(got.shape[:3], bool)
    rows_bad[0, 0, 7] = True
    rows_bad[0, 1] = plus
    assert np.all(same[rows_bad])             # zeros (guard) or NaN rows, as numpy's passes give
    for body in (got, numpy_passes):          # both bodies (numpy's passes: float64, compiled loops off)
        if guard:
            assert np.all(body[rows_bad] == 0)
        else:
            assert np.all(np.isnan(body[rows_bad]))
    assert close(got[~rows_bad], numpy_passes[~rows_bad])
    assert close(got, reference(q, k, v, scale=0.25, guard=guard))


@pytest.fixture
def spy(monkeypatch):
    """``spy["calls"]``: calls of the compiled block softmax by the node's kernel."""
    count = {"calls": 0}

    def wrapped():
        fn = loops.softmax_rows32()
        if fn is None:
            return None

        def counted(*args):
            count["calls"] += 1
            return fn(*args)
        return counted

    monkeypatch.setattr(override, "softmax_rows32", wrapped)
    monkeypatch.setattr(override, "BATCHED_SCORES", 0)      # float32's batched body out of reach
    return count


def test_node_takes_the_compiled_softmax_and_matches_reference(spy):
    q = (RNG.standard_normal((1, 2, 300, 64)) * 0.5).astype(np.float32)
    k = (RNG.standard_normal((1, 2, 300, 64)) * 0.5).astype(np.float32)
    v = RNG.standard_normal((1, 2, 300, 64)).astype(np.float32)
    got = run(q, k, v, guard=0)
    assert spy["calls"] > 0
    assert close(got, reference(q, k, v, scale=1 / 8, guard=0))
    assert close(got, run(q, k, v, guard=0, numpy_body=True))       # the numpy passes


@pytest.mark.parametrize("shape", [(1, 2, 97, 97, 16), (1, 1, 130, 33, 8)])
def test_fused_layer_matches_onnxruntime(spy, shape):
    b, h, s, kv, d = shape
    data = _pattern(b, h, s, kv, d, True)
    feed = {"q": (RNG.standard_normal((b, h, s, d)) * 0.5).astype(np.float32),
            "k": (RNG.standard_normal((b, h, kv, d)) * 0.5).astype(np.float32),
            "v": RNG.standard_normal((b, h, kv, d)).astype(np.float32), "mask": padding_mask(b, s, kv=kv)}
    feed["mask"][0, :, 5, :] = -np.inf
    got = InferenceSession(data).run(None, feed)[0]
    assert spy["calls"] > 0
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    want = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feed)[0]
    assert close(got, want)
