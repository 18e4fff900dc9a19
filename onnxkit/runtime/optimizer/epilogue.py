"""The ``epilogue`` plan pass: a Relu, an Add or an Add then Relu after a kernel that can apply
it to the array it just made, folded into that kernel's step (onnxruntime's Conv + activation
and Conv + Add (+ Relu) fusions, done on the plan instead of the graph).

Why on the plan and not as a graph rewrite into a fused operator: the rewrite would need a new
operator (an ``ai.onnxkit`` version, its schema, inference, a portable kernel and every
backend's), would show up in ``--optimized-model`` output, and would buy nothing more, since
what is saved is the cost of the separate steps (the loop's per-node cost and one ufunc call
each), not different arithmetic.  Here the graph and every backend stay as they are; only a
kernel that *offers* it takes part.

**Protocol.**  A kernel function (the ``run`` a factory returns) may carry an attribute
``fuse_epilogue``: ``fuse_epilogue(ops)`` returns a new kernel function, or None where the
kernel declines.  ``ops`` is a tuple of ``(op_type, fn, side)``, in order: ``("Relu", fn,
None)``, ``("Add", fn, side)`` (``side`` 0: the kernel's result is Add's first input, 1: its
second; the other operand becomes the fused function's last argument).  ``fn`` is the
consumer step's own kernel: the fused function must compute exactly what calling ``fn`` on
the kernel's result (and the other operand) computes — it may do so in place on an array it
made itself and owns (its fresh output), and otherwise must call ``fn`` (e.g. a broadcasting
or mixed-type Add, a value that is not a numpy array).

**When it applies.**  A step ``P`` (one output ``y``) whose kernel offers ``fuse_epilogue``,
followed by a step ``C`` of the default domain (``Relu``, or ``Add`` followed in turn by a
``Relu`` under the same rule, or an ``Add`` alone) where ``y`` is read by ``C`` once and by no
other step, is not a graph output, not read by any subgraph (``_uses``), and neither step has a scope or
subgraphs (nor ``P`` a size guard).  A consumer's own size guard (Add's broadcasting bound)
runs inside its ``fn`` (:func:`guarded`: the bytes are released as soon as it returned, so a
run's budget counts them only while the consumer runs; the in-place path allocates nothing).  The fused step takes the place of the last consumer (where Add's other operand has been
computed; ``P``'s inputs were there before ``P``, and nothing between reads ``y``), and ``P``
and the other consumers are removed.  Its inputs: ``P``'s (padded
with ``""`` to ``pad`` inputs, where ``P`` reads fewer than its last optional one, then
Add's other operand); its output ``C``'s (or the Relu's); its node ``P``'s with that output
(errors and profiling name ``P``'s node).  The value ``y`` is never stored.  Lifetimes
are computed again.  Both the plan and its variant with folded defaults are rewritten; the
graph (and so the ``specialize`` pass, which starts from the plan) sees the fused steps.

**Exact.**  The fused kernel runs the same operations on the same values in the same order
(a Relu ``np.maximum(y, 0)`` in place, an Add with its operands in the graph's order), so
results are bit-identical.  On at ``ORT_ENABLE_EXTENDED`` and above (where onnxruntime fuses
Conv with activations), off with ``session.disable_passes=epilogue``.
"""

from __future__ import annotations

import attrs

from ..budget import current_budget
from ..plan import GraphPlan, Planner, Step

#: consumers an epilogue can take: op_type -> how many inputs it reads
_CONSUMERS = {"Relu": 1, "Add": 2}


def _default(step: Step) -> bool:
    return step.node.domain in ("", "ai.onnx")


def _plain(step: Step, guard_ok: bool = False) -> bool:
    """Whether ``step`` has nothing the loop handles specially (a guard unless ``guard_ok``, a
    scope, subgraphs)."""
    return (guard_ok or step.guard is None) and not step.scope and not step.subgraphs and not step._uses


def guarded(fn, guard):
    """``fn`` preceded by its step's size ``guard`` (charged to the run's budget, and released once
    ``fn`` returned: the fused kernel calls it on a value it then returns or drops at once)."""
    if guard is None:
        return fn

    def call(*args):
        budget = current_budget()
        charged = guard(budget, args)
        try:
            return fn(*args)
        finally:
            budget.live -= charged
    return call


def _readers(steps: list) -> dict:
    """name -> number of times a step reads it (as an input or through a subgraph)."""
    count: dict = {}
    for s in steps:
        for n in (*s.inputs, *s._uses):
            if n:
                count[n] = count.get(n, 0) + 1
    return count


def _consumer(steps, at: dict, readers: dict, keep, name: str):
    """``(index, step)`` of the one step reading ``name`` if it may take it as an epilogue."""
    if readers.get(name) != 1 or name in keep:
        return None
    k = at.get(name)
    if k is None:
        return None
    c = steps[k]
    if not _default(c) or not _plain(c, guard_ok=True) or c.node.op_type not in _CONSUMERS:
        return None
    if len(c.inputs) != _CONSUMERS[c.node.op_type] or len(c.outputs) != 1 or not c.outputs[0]:
        return None
    return k, c


def fuse(steps: list, keep) -> tuple:
    """``(steps, count)``: ``steps`` with epilogues folded (a new list; steps not fused are the
    same objects), and how many consumer steps were removed."""
    readers = _readers(steps)
    at = {}
    for k, s in enumerate(steps):
        for n in s.inputs:
            if n and readers.get(n) == 1:
                at[n] = k
    out = list(steps)
    removed = set()
    count = 0
    for i, p in enumerate(steps):
        offer = getattr(p.fn, "fuse_epilogue", None)
        if offer is None or not _plain(p) or len(p.outputs) != 1 or not p.outputs[0]:
            continue
        ops, extra, gone, name = [], [], [], p.outputs[0]
        while True:
            found = _consumer(steps, at, readers, keep, name)
            if found is None or found[0] in removed or found[0] <= i:
                break
            k, c = found
            op = c.node.op_type
            if op == "Add":
                if ops or c.inputs[0] == c.inputs[1]:      # one Add, first; not Add(y, y)
                    break
                side = 0 if c.inputs[0] == name else 1
                ops.append(("Add", guarded(c.fn, c.guard), side))
                extra.append(c.inputs[1 - side])
            else:
                ops.append(("Relu", guarded(c.fn, c.guard), None))
            gone.append(k)
            name = c.outputs[0]
            if op == "Relu":
                break
        if not ops:
            continue
        fused = offer(tuple(ops))
        if fused is None:
            continue
        pad = getattr(p.fn, "epilogue_inputs", len(p.inputs))
        inputs = list(p.inputs) + [""] * max(0, pad - len(p.inputs)) + extra
        step = Step(fused, inputs, [name], attrs.evolve(p.node, output=[name]), p.scope)
        out[gone[-1]] = step        # where the last consumer was: Add's other operand is there by then
        removed.add(i)
        removed.update(gone[:-1])
        count += len(gone)
    if not count:
        return steps, 0
    result = [s for k, s in enumerate(out) if k not in removed]
    Planner._lifetimes(result, keep)
    return result, count


def run(plan: GraphPlan) -> int:
    """Fold epilogues in ``plan`` (its steps and its folded-defaults variant replaced); returns
    how many steps were removed."""
    keep = set(plan.output_names)
    plan.steps, count = fuse(plan.steps, keep)
    if plan.folded is not None:
        constants, steps = plan.folded
        folded, more = fuse(steps, keep | set(plan.defaults))
        plan.folded = (constants, folded)
        count += more
    return count
