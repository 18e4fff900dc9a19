"""The gpu (torch) backend on the ONNX 1-3 vectors, on torch's CPU device where there is no GPU.

The backend does not cover every operator; what it does cover must be right: no case may
fail or error, only pass or be reported unsupported (Clause 4.4).
"""

from __future__ import annotations

import pytest

from onnxkit.conformance import discover, run_all, summary

pytest.importorskip("torch")


#: Element types torch has no dtype for (uint16/32/64, the narrow types, strings) are refused
#: with these words when a value of such a type reaches the backend: a clear refusal, not a result.
DTYPE_REFUSALS = ("no torch dtype", "torch has no dtype")


def _bad(outcomes, allowed=()):
    return [f"{o.status}: {o.name}: {o.message[:300]}" for o in outcomes
            if o.name not in allowed and (o.status == "fail" or
                                          (o.status == "error" and not any(r in o.message for r in DTYPE_REFUSALS)))]


def test_node_vectors_on_gpu_pass_or_are_unsupported(onnx_vectors_dir):
    from test_conformance import SPEC_DIVERGENT

    cases = discover(onnx_vectors_dir / "node")
    for c in cases:
        c.name = f"node/{c.name}"
    outcomes = run_all(cases, "gpu", progress=False)
    counts = summary(outcomes)
    print(f"\nnode vectors on gpu: {counts}")
    bad = _bad(outcomes, SPEC_DIVERGENT)
    assert not bad, "\n".join(bad)
    assert counts["pass"] >= 300  # the families the backend has: elementwise, shape, reduction, nn


def test_light_models_on_gpu(onnx_vectors_dir):
    outcomes = run_all(discover(onnx_vectors_dir / "light"), "gpu", progress=False)
    bad = [f"{o.status}: {o.name}: {o.message[:300]}" for o in outcomes if o.status != "pass"]
    assert not bad, "\n".join(bad)
