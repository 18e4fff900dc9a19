"""Einsum's chain of matrix products (kernels/linalg.py ``einsum_pairwise``, taken for two or more
float operands on numpy) against numpy's own einsum in float64 (an independent reference), onnxruntime 1.32 and
the path it replaces: batched and plain products, outer products, traces and diagonals,
labels summed in one operand, implicit outputs, ellipses (broadcast ones fall back), three and
four operands, empty extents, NaN and inf.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from one_node import build, run  # noqa: E402

from onnxkit_default_domain.kernels import linalg  # noqa: E402

RNG = np.random.default_rng(1729)

CASES = [   # (equation, operand shapes)
    ("bhid,bhjd->bhij", [(2, 3, 5, 4), (2, 3, 6, 4)]),
    ("ij,jk->ik", [(7, 5), (5, 3)]),
    ("ij,jk", [(7, 5), (5, 3)]),
    ("ij,kj->ki", [(4, 6), (3, 6)]),
    ("i,j->ij", [(5,), (4,)]),
    ("i,i->", [(6,), (6,)]),
    ("ii->i", [(5, 5)]),
    ("ii", [(5, 5)]),
    ("bii->b", [(3, 4, 4)]),
    ("ij->", [(3, 4)]),
    ("bhid->bdh", [(1, 2, 5, 3)]),
    ("ijk,ikl->ijl", [(2, 3, 4), (2, 4, 5)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 6)]),
    ("ab,cd->abcd", [(2, 3), (4, 1)]),
    ("ijk,jl->il", [(3, 4, 5), (4, 2)]),          # k summed in its only operand
    ("bi,oij,bj->bo", [(5, 4), (3, 4, 6), (5, 6)]),
    ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(1, 3, 4), (2, 4, 5)]),  # broadcast batch: numpy's einsum
    ("i...,i...->...", [(3, 2, 2), (3, 2, 2)]),
    ("ij,jk->ik", [(0, 5), (5, 3)]),
    ("ij,jk->ik", [(4, 0), (0, 3)]),
    ("iij,jk->ik", [(3, 3, 4), (4, 2)]),
]


def onnxruntime(eq, ops):
    model, feed = build("Einsum", 12, ops, {"equation": eq})
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feed)[0]


@pytest.mark.parametrize("eq,shapes", CASES, ids=[f"{e}-{'x'.join(map(str, s[0]))}" for e, s in CASES])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_einsum_matches_numpy_and_onnxruntime(eq, shapes, dtype, monkeypatch):
    calls = []
    real = linalg.einsum_pairwise
    monkeypatch.setattr(linalg, "einsum_pairwise", lambda *a: calls.append(1) or real(*a))
    ops = [RNG.standard_normal(s).astype(dtype) for s in shapes]
    got, _ = run("cpu", "Einsum", 12, ops, {"equation": eq})
    want = np.einsum(eq, *[o.astype(np.float64) for o in ops])
    assert got.dtype == dtype and got.shape == want.shape
    scale = max(1.0, float(np.abs(want).max(initial=0)))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)
    if dtype == np.float32:
        np.testing.assert_allclose(got, onnxruntime(eq, ops), rtol=1e-5, atol=1e-5 * scale)
    assert bool(calls) == (len(ops) > 1), "the pairwise path is asked for two operands or more"


def test_a_broadcast_label_falls_back_and_nan_inf_propagate():
    a = RNG.standard_normal((1, 3, 4)).astype(np.float32)
    b = RNG.standard_normal((2, 4, 5)).astype(np.float32)
    assert linalg.einsum_pairwise(np, "...ij,...jk->...ik", [a, b]) is None
    a = np.float32([[1, np.nan], [np.inf, 2]])
    b = np.float32([[1, 0], [0, 1]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)       # inf * 0: a NaN result, no warning
        got, _ = run("cpu", "Einsum", 12, [a, b], {"equation": "ij,jk->ik"})
    np.testing.assert_array_equal(np.isnan(got), np.isnan(np.einsum("ij,jk->ik", a, b)))
