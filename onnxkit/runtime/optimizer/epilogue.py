"""The ``epilogue`` plan pass: a Relu, an Add, an Add then Relu, a Clip with bounds known at
planning (Relu6), an Add then such a Clip, or a Swish written as ``Mul(y, Sigmoid(y))`` (SiLU),
after a kernel that can apply it to the array it just made, folded into that kernel's step (onnxruntime's Conv + activation and Conv + Add (+
Relu) fusions, on the plan: no new operator, schema or backend kernel, nothing in
``--optimized-model``; what goes is the separate steps' cost, not different arithmetic).

**Protocol.**  A kernel function may declare the trait ``fuse_epilogue``
(:func:`onnxkit.runtime.kernel.offers_epilogue`): ``fuse_epilogue(ops)`` returns a new kernel
function, or None where it declines.  ``ops`` is a tuple of ``(op_type, fn, side)`` in order:
``("Relu", fn, None)``, ``("Add", fn, side)`` (``side`` 0: the kernel's result is Add's first
input, 1: its second; the other operand becomes the fused function's last argument),
``("Swish", (sigmoid fn, mul fn), side)`` (alone: the Sigmoid step's and the Mul step's kernels;
``side`` 0: ``Mul(y, s)``, 1: ``Mul(s, y)``), ``("Clip", fn, side)`` (always last; ``fn(y)`` is
the Clip step's kernel with its bounds bound
in; ``side`` ``(lo, hi)``: each None where that bound is absent (the kernel's default applies:
a float type's limits), else the bound constant as a 0-d numpy array, which where its dtype is
``y``'s is the very operand the Clip kernel hands ``np.clip``; ``side`` None: bounds the pass
does not know, a Clip-1/6's attributes — see :func:`clip_op`).  ``fn`` is the consumer step's
own kernel: the fused function must compute exactly what calling ``fn`` on the kernel's result
(and the other operand) computes; it may do so in place on an array it made and owns, and
otherwise must call ``fn`` (a broadcasting or mixed-type Add, an absent Clip bound or one of
another dtype, a non-numpy value).

**When it applies** (the top-level plan only).  A step ``P`` with one output ``y``, whose
kernel offers ``fuse_epilogue`` and which has no scope or subgraph (a size guard of ``P``'s,
such as MatMul's, runs first in the fused step on ``P``'s own inputs), followed by a
step ``C`` of the default domain — ``Relu``, ``Add`` or a ``Sum`` of two inputs (handed over
as an ``("Add", fn, side)`` whose ``fn`` is Sum's kernel; then a ``Relu`` or ``Clip`` under the
same rule, if there is one), or ``Clip`` — where ``y`` is read by ``C`` once and by nothing else
(no other step, no subgraph through ``_uses``, not a graph output), ``C`` having no scope or
subgraph (a Clip reading ``y`` as its X); or, where ``y`` is read by exactly two such steps,
once each, a ``Sigmoid`` ``S`` and a ``Mul`` of ``y`` and ``S``'s result, that result read by the
Mul alone (:func:`swish_op`).  A Clip folds only where its bounds are known at
planning: Clip-11+ with ``min``/``max`` absent (``""`` or missing) or constants of the plan
(initializers that are not inputs, folded values; in the folded-defaults variant the defaults
too) of one element each, of a numeric type; a one-input Clip (Clip-1/6's attributes, read
by its kernel, which the fused function then calls).  A bound from a graph input or another
step, or one of more elements (the Clip kernel fails then, by its own name), leaves the Clip a
step of its own.  A consumer's own size guard (Add's broadcasting bound) runs inside the ``fn``
handed over (:func:`guarded`): in that fallback the bytes it charges stay charged until the run
ends (the fused step's output has no slot to release them with: the safe side of
``Limits.max_run_bytes``); the in-place path charges nothing.

**The fused step** takes the place of the last consumer (by then Add's other operand has been
computed; nothing in between reads ``y``); ``P`` and the other consumers are removed.  Its
inputs are ``P``'s (padded with ``""`` up to the kernel's ``epilogue_inputs``, e.g. a Conv
without B) then Add's other operand (a Clip's bounds are not inputs: they are bound into its
``fn``); its output the last consumer's; its node ``P``'s with that output (errors and
profiling name ``P``'s node).  Lifetimes are computed again; the plan's folded-defaults
variant is rewritten too.  ``specialize`` starts from this plan (a fused step with Add reads as
a Conv with a fourth input: typing an inlined If's plan again then fails and that further
round is skipped, as for any untypable plan).

**Exact.**  The fused kernel runs the same operations on the same values in the same order
(a Relu ``np.maximum(y, 0)`` in place, an Add with its operands in the graph's order, a Clip
with both bounds given ``np.clip(y, lo, hi)`` in place with the very 0-d bounds the Clip
kernel would pass, any other Clip its own kernel, a Swish the Sigmoid step's kernel on the
result then the Mul's product in the graph's operand order), so results are bit-identical.  On at
``ORT_ENABLE_EXTENDED`` and above, off with ``session.disable_passes=epilogue``.  Effect: fewer
steps (each folded Relu, Add or Clip is one step and one fresh array less; a Clip step becomes
an in-place pass of ``np.clip``).
"""

from __future__ import annotations

import numpy as np

from onnxkit import records

from ...domains import is_default_domain
from ..budget import current_budget
from ..kernel import binds_constants, traits_of
from ..plan import GraphPlan, Step, assign_lifetimes
from ..usedef import step_index

#: consumers an epilogue can take: op_type -> how many inputs it may read (a Sum of two inputs is
#: an Add: the same elementwise sum, with Add's broadcasting from opset 8 on and same-shape inputs
#: before; the exporters of ResNet-era models wrote residual additions as Sum; a Clip reads X and
#: up to two bounds)
_CONSUMERS = {"Relu": (1,), "Add": (2,), "Sum": (2,), "Clip": (1, 2, 3)}


def plain_default(step: Step) -> bool:
    """A default-domain step with nothing the loop handles specially but its size guard (which a
    fused step keeps calling): no scope, no subgraphs."""
    return is_default_domain(step.node.domain) and not step.scope and not step.subgraphs and not step._uses


def guarded(fn, guard):
    """``fn`` preceded by its step's size ``guard``, whose charge stays on the run's budget until
    the run ends (module docstring): the value ``fn`` makes may be the fused step's output."""
    if guard is None:
        return fn

    def call(*args):
        guard(current_budget(), args)
        return fn(*args)
    return call


def guarded_first(fn, guard, n: int):
    """``fn`` preceded by a producer's size ``guard`` on the first ``n`` arguments (the producer's
    inputs; Add's operand follows them), its charge held until the run ends (module docstring).
    Where ``fn`` binds constants (:func:`~onnxkit.runtime.kernel.binds_constants`: a MatMul's
    fused step on a constant B), so does the guarded function: its specialization guarded alike."""
    def call(*args):
        guard(current_budget(), args[:n])
        return fn(*args)
    spec = traits_of(fn).bind_constants
    if spec is None:
        return call
    bind, positions = spec

    def bind_guarded(*values):
        bound = bind(*values)
        return None if bound is None else guarded_first(bound, guard, n)
    return binds_constants(call, bind_guarded, *positions)


def sole_producer(index, name: str, op_type: str):
    """The :func:`plain_default` ``op_type`` step writing ``name`` where one step reads ``name``,
    once, and nothing else does (``index``: the steps' use-def index, graph outputs included)."""
    s = index.producer(name)
    if s is None or index.use_count(name) != 1 or s.node.op_type != op_type or not plain_default(s):
        return None
    return s


def _consumer(index, name: str, taken: set):
    """The one step reading ``name`` (once, as an input, and nothing else: no subgraph, not a graph
    output) if it may take it as an epilogue and no other producer took it."""
    c = index.sole_reader(name)
    if c is None or id(c) in taken or not plain_default(c) \
            or len(c.inputs) not in _CONSUMERS.get(c.node.op_type, ()) or len(c.outputs) != 1 or not c.outputs[0] \
            or (c.node.op_type == "Clip" and c.inputs[0] != name):     # (a bound is never y: not a constant)
        return None
    return c


def swish_op(index, name: str, taken: set):
    """``(("Swish", (sigmoid fn, mul fn), side), [S, M])`` where ``name`` is read by exactly two
    steps, once each — a Sigmoid ``S`` and a Mul ``M`` of ``name`` and ``S``'s result (``side``
    0: ``Mul(name, s)``, 1: ``Mul(s, name)``) — and ``S``'s result by ``M`` alone (not a graph
    output), both :func:`plain_default` and not taken by another producer; else None."""
    uses = index.uses(name)
    if len(uses) != 2 or any(u.slot < 0 for u in uses):
        return None
    sig = next((u.item for u in uses if u.item.node.op_type == "Sigmoid"), None)
    if sig is None or id(sig) in taken or not plain_default(sig) or len(sig.inputs) != 1 \
            or len(sig.outputs) != 1 or not sig.outputs[0]:
        return None
    mul = index.sole_reader(sig.outputs[0])
    if mul is None or mul is sig or id(mul) in taken or not plain_default(mul) or mul.node.op_type != "Mul" \
            or len(mul.outputs) != 1 or not mul.outputs[0] or sorted(mul.inputs) != sorted([name, sig.outputs[0]]):
        return None
    side = 0 if mul.inputs[0] == name else 1
    return ("Swish", (guarded(sig.fn, sig.guard), guarded(mul.fn, mul.guard)), side), [sig, mul]


def clip_op(c: Step, constants: dict):
    """``("Clip", fn, side)`` for the Clip step ``c`` where its bounds are known at planning
    (module docstring), else None.  ``fn(y)`` calls ``c``'s kernel (with its guard) as the step
    would, the bound constants in place of their names.  ``side``: ``(lo, hi)``, each None
    (absent: the kernel's default, which only ``fn`` applies) or the bound constant reshaped to
    0-d, as the kernel's ``clip_bound`` hands it to ``np.clip`` where its dtype is X's; None for
    a Clip-1/6 with ``min``/``max`` attributes (the kernel read them; the plan does not say the
    node's opset, and a Clip-11+ node carrying such attributes, refused by the checker, ignores
    them: ``fn`` alone knows which)."""
    kernel = guarded(c.fn, c.guard)
    if len(c.inputs) == 1:      # Clip-11+ without bounds, or Clip-1/6
        attributed = any(c.node.attr(n) is not None for n in ("min", "max"))
        return "Clip", kernel, None if attributed else (None, None)
    args = []
    for n in c.inputs[1:]:
        v = constants.get(n) if n else None
        if n and (type(v) is not np.ndarray or v.size != 1 or v.dtype.kind not in "fiu"):
            return None         # a runtime bound, or one the kernel may refuse by name: not folded
        args.append(v)
    bounds = tuple(None if v is None else v.reshape(()) for v in (args + [None])[:2])

    def clip(y):
        return kernel(y, *args)
    return "Clip", clip, bounds


def fuse(steps: list, constants: dict, keep) -> tuple:
    """``(steps, count)``: ``steps`` with epilogues folded (a new list; steps not fused are the
    same objects), and how many consumer steps were removed (``constants``: the plan's, by name:
    a Clip's bounds are looked up there)."""
    index = step_index(steps, keep)
    at = {id(s): k for k, s in enumerate(steps)}
    out, removed, taken, count = list(steps), set(), set(), 0     # taken: ids of consumers some producer took
    for i, p in enumerate(steps):
        offer = traits_of(p.fn).fuse_epilogue
        if offer is None or p.scope or p.subgraphs or p._uses or len(p.outputs) != 1 \
                or not p.outputs[0]:
            continue
        ops, extra, gone = [], [], []
        c = _consumer(index, p.outputs[0], taken)
        if c is not None and c.node.op_type in ("Add", "Sum"):   # not Add(y, y): y read once
            side = 0 if c.inputs[0] == p.outputs[0] else 1
            ops.append(("Add", guarded(c.fn, c.guard), side))
            extra.append(c.inputs[1 - side])
            gone.append(c)
            c = _consumer(index, c.outputs[0], taken)
        if c is not None and c.node.op_type == "Relu":
            ops.append(("Relu", guarded(c.fn, c.guard), None))
            gone.append(c)
        elif c is not None and c.node.op_type == "Clip":
            op = clip_op(c, constants)
            if op is not None:
                ops.append(op)
                gone.append(c)
        elif c is None and not ops:
            swish = swish_op(index, p.outputs[0], taken)
            if swish is not None:
                ops.append(swish[0])
                gone.extend(swish[1])
        fused = offer(tuple(ops)) if ops else None
        if fused is None:
            continue
        pad = traits_of(p.fn).epilogue_inputs
        pad = len(p.inputs) if pad is None else pad
        if p.guard is not None:     # the producer's own size guard first, on its own inputs
            fused = guarded_first(fused, p.guard, len(p.inputs))
        inputs = list(p.inputs) + [""] * max(0, pad - len(p.inputs)) + extra
        name = gone[-1].outputs[0]
        # where the last consumer was: Add's other operand is there by then
        out[at[id(gone[-1])]] = Step(fused, inputs, [name], records.evolve(p.node, output=[name]), p.scope)
        removed.update([i] + [at[id(g)] for g in gone[:-1]])
        taken.update(id(g) for g in gone)
        count += len(gone)
    return rebuilt(steps, out, removed, keep, count)


def rebuilt(steps: list, out: list, removed: set, keep, count: int) -> tuple:
    """``(steps, count)`` of a plan pass: ``steps`` as they were where it changed nothing, else
    ``out`` less the ``removed`` positions, with lifetimes computed again."""
    if not count:
        return steps, 0
    result = [s for k, s in enumerate(out) if k not in removed]
    assign_lifetimes(result, keep)
    return result, count


def on_plan(plan: GraphPlan, fuse_steps) -> int:
    """Apply ``fuse_steps(steps, constants, keep) -> (steps, count)`` to ``plan``'s steps and to
    its folded-defaults variant (replacing both); returns the counts' sum."""
    keep = set(plan.output_names)
    plan.steps, count = fuse_steps(plan.steps, plan.constants, keep)
    if plan.folded is not None:
        constants, steps = plan.folded
        folded, more = fuse_steps(steps, constants, keep | set(plan.defaults))
        plan.folded = (constants, folded)
        count += more
    return count


def run(plan: GraphPlan) -> int:
    """Fold epilogues in ``plan`` (its steps and its folded-defaults variant replaced); returns
    how many steps were removed."""
    return on_plan(plan, fuse)
