"""Inlining the branch an ``If`` takes when its condition is a constant (used by :mod:`.specialize`).

Where a signature's shape arithmetic folds an ``If``'s condition into a constant (an exporter's
``If(Equal(Gather(Shape(x), -1), 1))`` around a Squeeze), every run of that signature evaluates
the same branch.  The branch's steps then run in the enclosing plan itself: no branch run (a
layout, a scope, a list copy per call), and its own shape arithmetic can fold in turn.

:func:`taken_branch` says which branch a step takes: an ai.onnx ``If`` whose condition is a
known one-element numpy array (or numpy scalar), read as the If kernel reads it (``cond.item()``, its truth
value), and whose branch plan takes no inputs.  :func:`inline` gives that branch's steps as
copies for the enclosing plan, and its outputs as the If's:

* a branch output that is a constant of the branch becomes a constant under the If's name;
* one computed by a single branch step and read nowhere else in the branch is renamed (that
  step writes the If's output);
* any other (a value of the enclosing scope, a value also read inside the branch) is passed on
  by an alias step (an Identity node named as the If, ``x -> x``: what the If kernel returns).

It is exact: the same kernels on the same values.  Names are kept, so nested subgraphs of the
branch, which read the enclosing scope by name, see what they saw; a branch is inlined only when
none of its own names (its constants, its steps' outputs) is already a name of the enclosing
plan (:class:`Collision` otherwise: a model whose subgraphs reuse names is left as it is).
Inference types of the branch (the graph at ``path``, :func:`branch_path`) hold in the
enclosing plan too: they were inferred with the enclosing scope's types.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ... import ir
from ...domains import is_default_domain
from ..plan import GraphPlan, Step
from ..usedef import step_index

#: the branch attribute a true / false condition selects
BRANCHES = ("else_branch", "then_branch")


class Collision(Exception):
    """A name of the branch is already a name of the enclosing plan."""


def taken_branch(step, known: dict) -> Optional[str]:
    """The attribute name of the branch the If ``step`` takes with the constants ``known``, or None
    (not an ai.onnx If, condition not a known one-element array, a branch taking inputs)."""
    node = step.node
    if node.op_type != "If" or not is_default_domain(node.domain) or not step.subgraphs \
            or not step.inputs or not step.inputs[0]:
        return None
    cond = known.get(step.inputs[0])
    if not isinstance(cond, (np.ndarray, np.generic)) or cond.size != 1:  # a 0-d result may be a numpy scalar
        return None
    name = BRANCHES[1 if cond.item() else 0]
    plan = step.subgraphs.get(name)
    if type(plan) is not GraphPlan or plan.input_names or len(plan.output_names) < len(step.outputs):
        return None
    return name


def branch_path(step, attr: str, path: str, graph) -> tuple:
    """``(path, graph)`` of the If ``step``'s branch ``attr`` as inference names it (its node's
    label ``name`` or ``op_type#index`` in ``graph``, the graph at ``path``), or ``(None, the
    branch graph)`` where the label is ambiguous or the node is not found in ``graph``."""
    node = step.node
    branch = next((a.value for a in node.attribute if a.name == attr), None)
    if graph is None or path is None:
        return None, branch
    if node.name:
        if sum(1 for n in graph.node if n.name == node.name) != 1:
            return None, branch
        label = node.name
    else:
        idx = next((i for i, n in enumerate(graph.node) if n is node), None)
        if idx is None:
            return None, branch
        label = f"{node.op_type}#{idx}"
    seg = f"{label}.{attr}"
    return (f"{path}/{seg}" if path else seg), branch


def _same(x):
    """The alias of a branch output: the value itself, as the If kernel passes it on."""
    return x


def inline(step, plan: GraphPlan, taken: set) -> tuple:
    """``(steps, constants, renamed)`` that replace the If ``step`` by its branch ``plan``:
    copies of the branch's steps (and alias steps) in order, the branch's constants with ``{If output: value}`` for outputs that are
    branch constants, and ``{If output: branch output}`` (to carry types over).  ``taken``: the
    names of the enclosing plan; the branch's names join it.  :class:`Collision` where one is
    already there."""
    own = set(plan.constants) | {n for s in plan.steps for n in s.outputs if n}
    if own & taken:
        raise Collision(sorted(own & taken)[:3])
    taken |= own
    copies = [s.copy() for s in plan.steps]
    outs = plan.output_names
    index = step_index(copies, keep=outs)
    constants, renamed, aliases = dict(plan.constants), {}, []
    for name, b in zip(step.outputs, outs):
        if not name:
            continue
        renamed[name] = b
        if b in plan.constants:
            constants[name] = plan.constants[b]
        elif index.producer(b) is not None and index.use_count(b) == 1:
            s = index.producer(b)
            s.outputs = [name if n == b else n for n in s.outputs]
        else:
            node = ir.Node(input=[b], output=[name], name=step.node.name, op_type="Identity")
            aliases.append(Step(_same, [b], [name], node, False))
    return copies + aliases, constants, renamed


def collapse_aliases(steps: list, index) -> list:
    """``steps`` without their Identity steps (ai.onnx Identity, the alias steps of :func:`inline`)
    whose output is read only as a step's input (not a graph output, not read by name in a
    subgraph: a use of slot < 0 in ``index``, their :func:`~onnxkit.runtime.usedef.step_index`
    with the graph outputs): the later steps read the Identity's input instead, the same value
    (the Identity kernel passes a tensor on as it is).  ``index`` is kept current (the aliases
    removed from it); ``steps`` own their ``inputs`` lists, which it edits in place."""
    out = []
    for s in steps:
        node = s.node
        if node.op_type == "Identity" and is_default_domain(node.domain) and not s.scope and s.guard is None \
                and len(s.inputs) == 1 and s.inputs[0] and len(s.outputs) == 1 and s.outputs[0] \
                and all(u.slot >= 0 for u in index.uses(s.outputs[0])):
            index.replace_all_uses_with(s.outputs[0], s.inputs[0])
            index.remove(s)
            continue
        out.append(s)
    return out
