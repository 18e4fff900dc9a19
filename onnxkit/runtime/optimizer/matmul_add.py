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
from .rules import Rule, Var, op, rules_pass
from .view import GraphView

_FLOAT_TAGS = (1, 11)
_TAG = {np.dtype(np.float32): 1, np.dtype(np.float64): 11}


def _gemm_fits(view: GraphView, match) -> bool:
    """A of rank 2 (inference), W a rank-2 constant, C a constant of W's type broadcasting as ``[N]``."""
    typed = view.tensor_type(match["a"])
    w, c = view.constant(match["w"]), view.constant(match["c"])
    if typed is None or typed[0] not in _FLOAT_TAGS or typed[1] is None or len(typed[1]) != 2:
        return False
    if w is None or c is None or w.ndim != 2 or c.dtype != w.dtype or _TAG.get(w.dtype) != typed[0]:
        return False
    n = w.shape[1]
    return (c.ndim == 1 and c.shape[0] in (1, n)) or (c.ndim == 2 and c.shape[0] == 1 and c.shape[1] in (1, n))


def _gemm(view: GraphView, match) -> None:
    """One Gemm at the Add's place (C may be defined after the MatMul)."""
    mm, w_name, c_name = match["matmul"], match["w"], match["c"]
    view.read_constant(w_name)
    view.read_constant(c_name)
    view.replace_pattern(match.nodes, ir.Node(input=[match["a"], w_name, c_name], output=[match.output],
                                              name=mm.name or match.root.name, op_type="Gemm", domain=mm.domain))


RULES = (Rule("matmul_add", op.MatMul(Var("a"), Var("w"), bind="matmul") + Var("c"), _gemm, _gemm_fits),)
run = rules_pass(RULES, applies=lambda view: view.version("") >= 7)
