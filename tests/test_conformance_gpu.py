"""The gpu (torch) backend on the ONNX 1-3 vectors, on torch's CPU device where there is no GPU.

The backend does not cover every operator; what it does cover must be right: no case may
fail, only pass, be reported unsupported (Clause 4.4) or be refused for an element type torch
has no dtype for.  Each gate asserts the exact figures of ``onnxkit/statement/conformance_figures.json``:
which vectors are unsupported and which are type refusals are named sets there, so a vector
that stops passing, or starts, fails the gate by name.
"""

from __future__ import annotations

import pytest

import conformance_figures as figures
from test_conformance import FOLDERS, assert_gate, run_gate

pytest.importorskip("torch")

#: Node vectors using an element type torch has no dtype for (uint16/32/64, the 8-bit floats,
#: the 4- and 2-bit types): the backend refuses them with "no torch dtype" / "torch has no dtype".
TYPE_REFUSALS = figures.named_set("conformance.gpu.node.type_refusal")
#: Node vectors with an operator the backend has no kernel for (reported unsupported, Clause 4.4).
UNSUPPORTED = figures.named_set("conformance.gpu.node.unsupported")


def test_the_refusal_sets_have_their_stated_sizes():
    assert len(TYPE_REFUSALS) == figures.count("conformance.gpu.node.type_refusal")
    assert len(UNSUPPORTED) == figures.count("conformance.gpu.node.unsupported")
    assert not TYPE_REFUSALS & UNSUPPORTED
    assert figures.expected_counts("gpu", "node")["error"] == len(TYPE_REFUSALS)


@pytest.mark.parametrize("folder", FOLDERS)
def test_vectors_on_gpu_show_the_stated_figures(onnx_vectors_dir, folder):
    outcomes = run_gate(onnx_vectors_dir, folder, "gpu")
    assert_gate("gpu", folder, outcomes)
