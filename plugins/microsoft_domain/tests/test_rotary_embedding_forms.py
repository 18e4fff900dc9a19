"""RotaryEmbedding (com.microsoft) in every form its CPU kernel takes, against onnxruntime 1.32
and a float64 numpy reference: halves or interleaved pairs, the whole head or a partial
``rotary_embedding_dim`` (the rest passed through), ``position_ids`` a (1) offset added to
0..S-1 or one position per token (B, S), 3-D (B, S, N*H) input with ``num_heads`` and 4-D
(B, N, S, H) input."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from ms_harness import check

B, S, N, H, M = 2, 3, 2, 8, 16


def _rng(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def _reference(heads, pos, cos, sin, rot, interleaved, scale=1.0):
    """heads (B, N, S, H) rotated in float64: cos/sin (M, rot/2) rows at pos (B, S)."""
    x = heads.astype(np.float64) * scale
    c, s = cos[pos][:, None].astype(np.float64), sin[pos][:, None].astype(np.float64)  # (B, 1, S, rot/2)
    out = x.copy()
    if interleaved:
        a, b = x[..., 0:rot:2], x[..., 1:rot:2]
        out[..., 0:rot:2], out[..., 1:rot:2] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., :rot // 2], x[..., rot // 2:rot]
        out[..., :rot // 2], out[..., rot // 2:rot] = a * c - b * s, b * c + a * s
    return out


@pytest.mark.parametrize("layout", ["3d", "4d"])
@pytest.mark.parametrize("positions", ["offset", "per_token"])
@pytest.mark.parametrize("rot", [H, H // 2])
@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_forms(interleaved, rot, positions, layout):
    rng = _rng(interleaved, rot, positions, layout)
    heads = rng.standard_normal((B, N, S, H)).astype(np.float32)
    ang = rng.uniform(-3, 3, (M, rot // 2))
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    if positions == "offset":
        pid = np.array([5], np.int64)
        pos = np.broadcast_to(np.arange(S)[None, :] + 5, (B, S))
    else:
        pid = rng.integers(0, M, (B, S)).astype(np.int64)
        pos = pid
    x = heads if layout == "4d" else heads.transpose(0, 2, 1, 3).reshape(B, S, N * H)
    attrs = {"interleaved": interleaved, "num_heads": N}
    if rot != H:
        attrs["rotary_embedding_dim"] = rot
    want = check("RotaryEmbedding", [x, pid, cos, sin], attrs, rtol=1e-5, atol=1e-5)[0]
    ref = _reference(heads, pos, cos, sin, rot, interleaved)
    if layout == "3d":
        ref = ref.transpose(0, 2, 1, 3).reshape(B, S, N * H)
    np.testing.assert_allclose(want, ref, rtol=1e-5, atol=1e-5)
    if rot != H:  # the features past rotary_embedding_dim pass through
        np.testing.assert_array_equal(want.reshape(ref.shape)[..., -1], x[..., -1])
