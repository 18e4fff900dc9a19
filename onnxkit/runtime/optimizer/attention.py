"""Rewrite scaled dot-product attention, ``softmax(scale * Q K^T + mask) V``, as one Attention node.

The pattern (:data:`PATTERN`), anchored at a Softmax over the last axis of a rank-4 value:

* scores ``MatMul(Q', K')``, where ``Q'`` is Q or ``Mul(Q, c)`` and ``K'`` is ``K^T`` or
  ``Mul(K^T, c)`` (the torch exporters scale each by 1/sqrt(sqrt(head size))), then optionally
  ``Mul(scores, c)`` or ``Div(scores, c)`` — every ``c`` a one-element constant keeping Q's
  shape, as is the guard's 0 (:mod:`.rules`; scale = their product, a Div's as its inverse,
  positive: Attention scales Q and K by its square root);
* optionally ``Add(scores, mask)`` (either order, guarded patterns only) with a mask of the
  scores' type and rank <= 4 not known to enlarge the scores (bert's and gpt2's
  ``Where(mask, 0, -inf)``);
* ``Softmax`` over the last axis, optionally guarded by ``Where(IsNaN(p), 0, p)`` (torch's
  scaled_dot_product_attention export), then ``MatMul(p, V)``.

Q, K^T and V are 4-D (B, H, S, D), (B, H, D, Skv), (B, H, Skv, Dv) floating-point tensors of one
element type with equal batch and head dimensions (known equal for an unguarded pattern; not
known to differ for a guarded one, whose fused node broadcasts them as the MatMuls and the Add
would, kernels/fused.py), as type inference derives them from the checked inputs and the
constants (never a declared value_info: a dynamo export whose head count inference leaves
unknown is not fused unguarded); every intermediate is read by the pattern alone.  ``K^T`` made
by a Transpose read only there becomes a Transpose to (B, H, Skv, D) (its perm's last two
entries swapped); otherwise a ``Transpose(K^T, [0, 1, 3, 2])`` is inserted.

The fused node is ai.onnxkit Attention-2 (ai.onnx Attention-23 plus ``nan_to_zero``) with
``scale`` and, for a guarded softmax, ``nan_to_zero = 1`` — the guard's exact semantics; an
unguarded pattern is ``nan_to_zero = 0``: the plain softmax, so a row whose every score is -inf
(only from infinite inputs) gives NaN as the unfused Softmax does (Part 2, Softmax:
``exp(x - max) / sum``, ``-inf - -inf`` being NaN; onnxkit's ai.onnx Attention-23 gives zeros
there, onnx.reference's choice, so it is not the target even where the model imports ai.onnx 23;
the saved file writes ai.onnx Attention there, :mod:`.portable`).  An unguarded pattern with a
mask is not fused.  A model importing ai.onnxkit 1 already is left alone.  The fused node
computes the same function rounded once: within the element type's tolerance (Clause 11), not
bit for bit.
"""

from __future__ import annotations

from typing import Optional

from ... import ir
from .patterns import FLOAT_TAGS, FUSED_DOMAIN
from .rules import AnyOf, Rule, Scalar, Var, op, replace_match, rules_pass
from .view import GraphView, is_default

#: ai.onnx's first Attention (the saved file's form of an unguarded node, :mod:`.portable`), and the
#: ai.onnxkit version holding Attention
ONNX_SINCE, FUSED_VERSION = 23, 2


def _last_axis(view: GraphView, softmax) -> bool:
    axis = softmax.attr("axis", -1 if view.version("") >= 13 else 1)
    return int(axis) in (-1, 3)


q, kt, v, mask = Var("q"), Var("kt"), Var("v"), Var("mask")
_SCORES = op.MatMul(AnyOf((q * Scalar("fq"), q)), AnyOf((kt * Scalar("fk"), kt)))
_SCALED = AnyOf((_SCORES * Scalar("fs"), _SCORES))
_SOFTMAX = op.Softmax(AnyOf((_SCALED + mask, _SCALED)), check=_last_axis, bind="softmax")
_GUARDED = op.Where(op.IsNaN(_SOFTMAX), 0.0, _SOFTMAX, bind="guard")
PATTERN = op.MatMul(AnyOf((_GUARDED, _SOFTMAX)), v)


def _dims(view: GraphView, name: str, rank: Optional[int] = None):
    typed = view.tensor_type(name)
    if typed is None or typed[0] not in FLOAT_TAGS or typed[1] is None or (rank and len(typed[1]) != rank):
        return None
    return typed


def _equal(a, b, strict: bool) -> bool:
    """Dimensions ``a`` and ``b`` are equal (``strict``), or not known to differ."""
    if a is None or b is None:
        return not strict
    return a == b


def _mask_fits(view: GraphView, mask: str, scores: list, elem: int) -> bool:
    """True if ``mask`` (of type ``elem``, rank <= 4) is not known to enlarge ``scores`` by broadcasting."""
    typed = _dims(view, mask)
    if typed is None or typed[0] != elem or not 1 <= len(typed[1]) <= 4:
        return False
    dims = [1] * (4 - len(typed[1])) + list(typed[1])
    return all(d == 1 or _equal(d, s, False) for d, s in zip(dims, scores))


def _scale(match) -> float:
    return match.get("fs", 1.0) * match.get("fq", 1.0) * match.get("fk", 1.0)


def _fits(view: GraphView, match) -> bool:
    """The shapes, types and scale the fused node needs (module docstring)."""
    guarded, m = match.get("guard") is not None, match.get("mask")
    if not _scale(match) > 0.0:                 # Attention scales Q and K by sqrt(scale) each
        return False
    tq, tk, tv = _dims(view, match["q"], 4), _dims(view, match["kt"], 4), _dims(view, match["v"], 4)
    if tq is None or tk is None or tv is None or not tq[0] == tk[0] == tv[0]:
        return False
    (qd, kd, vd), elem = (tq[1], tk[1], tv[1]), tq[0]
    strict = not guarded                        # the guarded kernel broadcasts as MatMul and Add do
    if not all(_equal(qd[a], kd[a], strict) and _equal(qd[a], vd[a], strict) for a in (0, 1)) \
            or not _equal(qd[3], kd[2], strict) or not _equal(kd[3], vd[2], strict):
        return False
    return m is None or (guarded and _mask_fits(view, m, [qd[0], qd[1], qd[2], kd[3]], elem))


def _perm(values: list) -> ir.Attribute:
    return ir.Attribute(name="perm", type=ir.AttributeType.INTS, value=values)


def _key_input(view: GraphView, kt: str, final) -> str:
    """A name holding K as (B, H, Skv, D): K^T's Transpose re-permuted in place where only the
    pattern reads it, else a new Transpose placed just before the pattern's last node, ``final``."""
    node = view.producer_of(kt)
    name = view.fresh_name(kt + "/K")
    perm = node.attr("perm") if is_default(node, "Transpose") else None
    if perm is not None and len(perm) == 4 and view.sole_consumer(kt) is not None:
        view.replace(node, ir.Node(input=list(node.input), output=[name], name=(node.name or name) + "/K",
                                   op_type="Transpose", domain=node.domain, attribute=[_perm([*perm[:2], perm[3], perm[2]])]))
    else:
        view.insert_before(final, ir.Node(input=[kt], output=[name], name=name, op_type="Transpose",
                                          attribute=[_perm([0, 1, 3, 2])]))
    return name


def _rewrite(view: GraphView, match) -> None:
    guarded, m = match.get("guard") is not None, match.get("mask")
    k = _key_input(view, match["kt"], match.root)
    attributes = [ir.Attribute(name="scale", type=ir.AttributeType.FLOAT, value=float(_scale(match)))]
    attributes.append(ir.Attribute(name="nan_to_zero", type=ir.AttributeType.INT, value=int(guarded)))
    replace_match(view, match, "Attention", [match["q"], k, match["v"]] + ([m] if m is not None else []),
                  FUSED_DOMAIN, attributes, "softmax", FUSED_VERSION)


RULES = (Rule("attention", PATTERN, _rewrite, _fits, subject="q"),)
run = rules_pass(RULES, applies=lambda view: not 0 < view.version(FUSED_DOMAIN) < FUSED_VERSION)


__all__ = ["run", "RULES"]
