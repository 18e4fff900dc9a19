"""The gpu (torch) backend on the ONNX 1-3 vectors, on torch's CPU device where there is no GPU.

Every node runs somewhere: on torch, or on the cpu backend where the gpu backend has no kernel
or cannot compute the types (a per-node fallback planned and listed, Clause 4.4).  So the gpu
backend passes every vector the cpu backend passes; the 8 ``test_sequence_map_*`` vectors are
refused on both by the feed check's dimension-variable rule (6.5.2, see test_conformance.py).
Each gate asserts the exact figures of ``onnxkit/statement/conformance_figures.json``: any
vector not passing is named in a set there, so a vector that stops passing, or starts, fails
the gate by name.
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
