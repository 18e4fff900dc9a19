"""The gpu (torch) backend on the ONNX 1-3 vectors, on torch's CPU device where there is no GPU.

Every node runs somewhere: on torch, or on the cpu backend where the gpu backend has no kernel
or cannot compute the types (a per-node fallback planned and listed, Clause 4.4).  So the gpu
backend passes every vector the cpu backend passes; the 8 ``test_sequence_map_*`` vectors are
refused on both by the feed check's dimension-variable rule (6.5.2, see test_conformance.py).
"""

from __future__ import annotations

import pytest

from onnxkit.conformance import discover, run_all, summary

pytest.importorskip("torch")


def _bad(outcomes, allowed=()):
    return [f"{o.status}: {o.name}: {o.message[:300]}" for o in outcomes if o.name not in allowed and o.status != "pass"]


def test_node_vectors_on_gpu_all_pass_with_per_node_fallbacks(onnx_vectors_dir):
    from test_conformance import SPEC_DIVERGENT

    cases = discover(onnx_vectors_dir / "node")
    for c in cases:
        c.name = f"node/{c.name}"
    outcomes = run_all(cases, "gpu", progress=False)
    counts = summary(outcomes)
    print(f"\nnode vectors on gpu: {counts}")
    bad = _bad(outcomes, SPEC_DIVERGENT)
    assert not bad, "\n".join(bad)
    divergent = [o for o in outcomes if o.name in SPEC_DIVERGENT]
    assert len(divergent) == 8 and all(o.status == "error" and "6.5.2" in o.message for o in divergent)
    assert counts == {"pass": 1876, "fail": 0, "unsupported": 0, "error": 8}


def test_light_models_on_gpu(onnx_vectors_dir):
    outcomes = run_all(discover(onnx_vectors_dir / "light"), "gpu", progress=False)
    bad = _bad(outcomes)
    assert not bad, "\n".join(bad)
    assert summary(outcomes)["pass"] == 9
