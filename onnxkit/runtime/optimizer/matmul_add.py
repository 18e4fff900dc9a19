"""Rewrite ``Add(MatMul(A, W), C)`` as ``Gemm(A, W, C)``.

With ``A`` of rank 2 (type inference, Clause 9, from the checked inputs and the constants:
never a declared value_info, which a Reshape of a fed shape may contradict at run time),
``W`` a constant of rank 2 and ``C`` a
constant of shape ``[N]``, ``[1]``, ``[1, N]`` or ``[1, 1]`` (so the Add's result has the
MatMul's shape ``[M, N]``), Gemm with ``alpha = beta = 1`` and no transposes computes
``A @ W + C`` — the same products and the same sum, multiplied by exactly 1.  float32/float64
only; the MatMul's output must be read by that Add alone.  Needs Gemm-7's unidirectional
broadcasting of ``C``, so the default domain's opset must be at least 7.
"""

from __future__ import annotations

import numpy as np

from ... import ir
from ...registry import normalize_domain
from .view import GraphView

_FLOAT_TAGS = (1, 11)
_TAG = {np.dtype(np.float32): 1, np.dtype(np.float64): 11}


def _gemm_for(view: GraphView, add):
    """``(MatMul node, Gemm node)`` replacing ``add`` and its MatMul, or None."""
    for k in (0, 1):
        mm = view.producer.get(add.input[k])
        if mm is None or mm.op_type != "MatMul" or normalize_domain(mm.domain) != "" or len(mm.input) != 2:
            continue
        if view.sole_consumer(add.input[k]) is not add:
            continue
        a, w_name, c_name = mm.input[0], mm.input[1], add.input[1 - k]
        typed = view.tensor_type(a)
        w, c = view.constant(w_name), view.constant(c_name)
        if typed is None or typed[0] not in _FLOAT_TAGS or typed[1] is None or len(typed[1]) != 2:
            continue
        if w is None or c is None or w.ndim != 2 or c.dtype != w.dtype:
            continue
        n = w.shape[1]
        if not (c.ndim == 1 and c.shape[0] in (1, n)) and not (c.ndim == 2 and c.shape[0] == 1 and c.shape[1] in (1, n)):
            continue
        if _TAG.get(w.dtype) != typed[0]:
            continue
        view.read_constant(w_name)
        view.read_constant(c_name)
        return mm, ir.Node(input=[a, w_name, c_name], output=[add.output[0]], name=mm.name or add.name,
                           op_type="Gemm", domain=mm.domain)
    return None


def run(view: GraphView) -> int:
    if view.version("") < 7:
        return 0
    fused = 0
    for add in list(view.node):
        if normalize_domain(add.domain) != "" or add.op_type != "Add" or len(add.input) != 2 or not all(add.input):
            continue
        found = _gemm_for(view, add)
        if found is None:
            continue
        mm, gemm = found
        view.node[view.node.index(add)] = gemm  # at the Add's place: C may be defined after the MatMul
        view.remove(mm)
        view.refresh()
        fused += 1
    return fused

