"""Rewrite scaled dot-product attention, ``softmax(scale * Q K^T + mask) V``, as one Attention node.

The pattern, anchored at a Softmax over the last axis of a rank-4 value:

* scores ``MatMul(Q', K')``, where ``Q'`` is Q or ``Mul(Q, c)`` and ``K'`` is ``K^T`` or
  ``Mul(K^T, c)`` (the torch exporters scale each by 1/sqrt(sqrt(head size))), then optionally
  ``Mul(scores, c)`` or ``Div(scores, c)`` — every ``c`` a one-element constant of Q's element
  type and rank at most 4 (:func:`~.patterns.keeps_shape`: a ``[1, 1, 1, 1, 1]`` one would make
  the scores rank 5), as is the guard's 0 (scale = their product, a Div's as its inverse,
  positive: Attention scales Q and K by its square root);
* optionally ``Add(scores, mask)`` (either order, guarded patterns only) with a mask of the
  scores' type and rank <= 4 not known to enlarge the scores (type inference; bert's and gpt2's
  ``Where(mask, 0, -inf)``);
* ``Softmax`` over the last axis, optionally guarded by ``Where(IsNaN(p), 0, p)`` (torch's
  scaled_dot_product_attention export), then ``MatMul(p, V)``.

Q, K^T and V are 4-D (B, H, S, D), (B, H, D, Skv), (B, H, Skv, Dv) floating-point tensors of one
element type with equal batch and head dimensions (known equal for an unguarded pattern; not
known to differ for a guarded one, whose fused node broadcasts them as the MatMuls and the Add
would, kernels/fused.py), all as type inference derives them from the checked inputs and the
constants (:meth:`~.view.GraphView.tensor_type`; a declared value_info is not taken: a dynamo
export whose head count inference leaves unknown is not fused unguarded); every intermediate is
read by the next node alone and is neither a graph output nor read by a subgraph.  ``K^T`` made by a Transpose
read only there becomes a Transpose to (B, H, Skv, D) (its perm's last two entries swapped);
otherwise a ``Transpose(K^T, [0, 1, 3, 2])`` is inserted.

The fused node is ai.onnxkit Attention-2 (:mod:`onnxkit_default_domain.fused`: ai.onnx
Attention-23 plus ``nan_to_zero``) with ``scale`` and, for a guarded softmax, ``nan_to_zero = 1``
— the guard's exact semantics.  An unguarded pattern becomes ai.onnx Attention where the model
imports ai.onnx 23 or later (ai.onnxkit Attention-2 with nan_to_zero = 0, the same definition,
otherwise); an unguarded pattern with a mask is not fused (Attention gives zeros for a fully
masked row, the pattern NaN).  A model importing ai.onnxkit 1 already is left alone.  The
fused node computes the same function rounded once instead of at each node (the scale applied
once): within the element type's tolerance (Clause 11), not bit for bit; one difference
remains for an unguarded pattern, a row whose every score is -inf (only from infinite inputs),
which gives zeros instead of NaN.
"""

from __future__ import annotations

from typing import Optional

from ... import ir
from ...registry import normalize_domain
from .patterns import FLOAT_TAGS, FUSED_DOMAIN, is_op, keeps_shape, only_reader, other_input
from .view import GraphView

#: ai.onnx's first Attention, and the ai.onnxkit version holding Attention
ONNX_SINCE, FUSED_VERSION = 23, 2


def _scalar(view: GraphView, name: str) -> Optional[float]:
    """The value of a one-element float constant ``name``, or None."""
    c = view.constant(name)
    if c is None or c.size != 1 or c.dtype.kind != "f":
        return None
    return float(c.reshape(-1)[0])


def _scaled(view: GraphView, name: str):
    """``(x, factor, nodes)``: ``name`` is ``Mul(x, c)`` read once (factor c), else ``name`` itself."""
    node = view.producer.get(name)
    if is_op(node, "Mul") and len(node.input) == 2 and view.sole_consumer(name) is not None:
        for x, c in (node.input, node.input[::-1]):
            f = _scalar(view, c)
            if f is not None and _scalar(view, x) is None:
                return x, f, [node]
    return name, 1.0, []


def _scores(view: GraphView, name: str):
    """``(q, kt, scale, nodes)`` if ``name`` is the (optionally scaled) ``MatMul(Q', K')``, else None."""
    node = view.producer.get(name)
    scale, nodes = 1.0, []
    if (is_op(node, "Mul") or is_op(node, "Div")) and len(node.input) == 2 and view.sole_consumer(name):
        c = node.input[1] if node.op_type == "Div" else next(
            (c for c in node.input if _scalar(view, c) is not None), None)
        f = None if c is None else _scalar(view, c)
        if f is None or f == 0.0 or (node.op_type == "Div" and node.input[0] == c):
            return None
        inner = node.input[0] if node.op_type == "Div" else other_input(node, c)
        scale, nodes = (1.0 / f if node.op_type == "Div" else f), [node]
        name, node = inner, view.producer.get(inner)
        if view.sole_consumer(name) is not nodes[0]:
            return None
    if not is_op(node, "MatMul") or view.sole_consumer(name) is None:
        return None
    q, fq, nq = _scaled(view, node.input[0])
    kt, fk, nk = _scaled(view, node.input[1])
    return q, kt, scale * fq * fk, nodes + [node] + nq + nk


def _guard(view: GraphView, p: str):
    """``(output, nodes)`` of ``Where(IsNaN(p), 0, p)`` reading ``p`` (with the IsNaN) alone, or
    ``(p, [])`` when ``p`` is unguarded; None when ``p`` is read otherwise."""
    if view.sole_consumer(p) is not None:
        return p, []
    readers = view.consumers(p)
    if view.use_count(p) != 2 or len(readers) != 2:
        return None
    isnan = next((n for n in readers if is_op(n, "IsNaN")), None)
    where = next((n for n in readers if is_op(n, "Where")), None)
    if isnan is None or where is None or list(where.input) != [isnan.output[0], where.input[1], p] \
            or view.sole_consumer(isnan.output[0]) is not where or _scalar(view, where.input[1]) != 0.0:
        return None
    return where.output[0], [isnan, where]


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


def _match(view: GraphView, softmax):
    """``(q, kt, v, mask, scale, guarded, nodes, final)`` of the pattern at ``softmax``, or None."""
    axis = next((a.value for a in softmax.attribute if a.name == "axis"), -1 if view.version("") >= 13 else 1)
    x = softmax.input[0]
    if int(axis) not in (-1, 3) or view.sole_consumer(x) is not softmax:
        return None
    mask, add = None, view.producer.get(x)
    found = None
    if is_op(add, "Add") and len(add.input) == 2:
        for s, m in (add.input, add.input[::-1]):
            found = _scores(view, s) if view.sole_consumer(s) is add else None
            if found is not None:
                mask, found = m, (found[0], found[1], found[2], found[3] + [add])
                break
    else:
        found = _scores(view, x)
    guarded = _guard(view, softmax.output[0])
    if found is None or guarded is None:
        return None
    final = only_reader(view, guarded[0], "MatMul")
    if final is None or final.input[0] != guarded[0]:
        return None
    q, kt, scale, nodes = found
    if not scale > 0.0:                 # Attention scales Q and K by sqrt(scale) each
        return None
    v = final.input[1]
    tq, tk, tv = _dims(view, q, 4), _dims(view, kt, 4), _dims(view, v, 4)
    if tq is None or tk is None or tv is None or not tq[0] == tk[0] == tv[0]:
        return None
    (qd, kd, vd), elem = (tq[1], tk[1], tv[1]), tq[0]
    strict = not guarded[1]             # the guarded kernel broadcasts as MatMul and Add do
    if not all(_equal(qd[a], kd[a], strict) and _equal(qd[a], vd[a], strict) for a in (0, 1)) \
            or not _equal(qd[3], kd[2], strict) or not _equal(kd[3], vd[2], strict):
        return None
    if mask is not None and (not guarded[1] or not _mask_fits(view, mask, [qd[0], qd[1], qd[2], kd[3]], elem)):
        return None
    scalars = [i for n in nodes + guarded[1] for i in n.input if i and i not in (q, kt, v, mask)
               and view.constant(i) is not None]
    if not all(keeps_shape(view, view.constant(c), q) for c in scalars):   # Q: 4-D, the scores' type
        return None
    return q, kt, v, mask, scale, bool(guarded[1]), nodes + [softmax] + guarded[1] + [final], final


def _key_input(view: GraphView, kt: str, final) -> str:
    """A name holding K as (B, H, Skv, D): K^T's Transpose re-permuted in place where only the
    pattern reads it, else a new Transpose placed just before the pattern's last node, ``final``."""
    node = view.producer.get(kt)
    name = view.fresh_name(kt + "/K")
    perm = next((list(a.value) for a in node.attribute if a.name == "perm"), None) if is_op(node, "Transpose") else None
    if perm is not None and len(perm) == 4 and view.sole_consumer(kt) is not None:
        swapped = perm[:2] + [perm[3], perm[2]]
        at = next(k for k, n in enumerate(view.node) if n is node)
        view.node[at] = ir.Node(input=list(node.input), output=[name], name=(node.name or name) + "/K",
                                op_type="Transpose", domain=node.domain,
                                attribute=[ir.Attribute(name="perm", type=ir.AttributeType.INTS, value=swapped)])
        return name
    at = next(k for k, n in enumerate(view.node) if n is final)
    view.node.insert(at, ir.Node(input=[kt], output=[name], name=name, op_type="Transpose",
                                 attribute=[ir.Attribute(name="perm", type=ir.AttributeType.INTS, value=[0, 1, 3, 2])]))
    return name


def run(view: GraphView) -> int:
    if 0 < view.version(FUSED_DOMAIN) < FUSED_VERSION:
        return 0
    fused = 0
    for anchor in list(view.node):
        if not is_op(anchor, "Softmax") or not any(n is anchor for n in view.node):
            continue
        found = _match(view, anchor)
        if found is None:
            continue
        q, kt, v, mask, scale, guarded, nodes, final = found
        for n in nodes:
            for i in n.input:
                if i and i not in (q, kt, v, mask):
                    view.read_constant(i)
        ids = {id(n) for n in nodes}
        k = _key_input(view, kt, final)
        onnx_op = not guarded and view.version("") >= ONNX_SINCE
        attributes = [ir.Attribute(name="scale", type=ir.AttributeType.FLOAT, value=float(scale))]
        if guarded:
            attributes.append(ir.Attribute(name="nan_to_zero", type=ir.AttributeType.INT, value=1))
        at = next(i for i, n in enumerate(view.node) if n is final)
        view.node[at] = ir.Node(input=[q, k, v] + ([mask] if mask is not None else []), output=[final.output[0]],
                                name=(anchor.name or final.output[0]) + "/Attention", op_type="Attention",
                                domain="" if onnx_op else FUSED_DOMAIN, attribute=attributes)
        view.node = [n for n in view.node if id(n) not in ids]
        if not onnx_op:
            view.require_opset(FUSED_DOMAIN, FUSED_VERSION)
        view.refresh()
        fused += 1
    return fused


__all__ = ["run"]
