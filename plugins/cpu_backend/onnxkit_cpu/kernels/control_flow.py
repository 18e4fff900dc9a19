"""Control flow of ai.onnx: the operators that evaluate subgraphs.

Operators and the definitions (since_versions) implemented:

* ``If``   1, 11, 13, 16, 19, 21, 23, 24, 25 — one branch evaluated; its outputs may be
  tensors, sequences (13+) or optionals (16+, an absent optional is ``None``).
* ``Loop`` 1, 11, 13, 16, 19, 21, 23, 24, 25 — trip count ``M`` and condition ``cond`` both
  optional (absent or empty); loop-carried dependencies (tensors, sequences, optionals);
  scan outputs stacked along a new first axis.  Without a ``cond`` input the body's condition
  output is ignored, as the operator's table of modes says (``for`` loop / infinite loop;
  onnxruntime stops on it anyway).  At most ``limits.max_loop_iterations`` iterations run
  (:class:`onnxkit.errors.LimitExceeded` otherwise, Clause 15.4); zero iterations give empty
  scan outputs typed from the body's declared outputs.
* ``Scan`` 8 (batch axis 0, scan axis 1, ``sequence_lens``, ``directions``) and
  9, 11, 16, 19, 21, 23, 24, 25 (``scan_input_axes``, ``scan_input_directions``,
  ``scan_output_axes``, ``scan_output_directions``; negative axes from 11 on).

Scan outputs gather one value per iteration: each is charged to the run's budget as it
arrives (:class:`onnxkit.runtime.budget.Accumulation`), so a loop whose accumulated output
would exceed ``Limits.max_value_bytes`` or ``max_run_bytes`` is refused during the
iteration that would cross it.

The later versions of each operator only widen the type lists; their semantics are those of
the version they follow.  Every subgraph sees the values of the enclosing scope (Clause
5.4.3): the kernels are :func:`~onnxkit.runtime.needs_scope` functions and pass the scope
to :meth:`GraphPlan.run`.
"""

from __future__ import annotations

import numpy as np

from onnxkit import ir
from onnxkit.dtypes import ELEMENT_TYPES
from onnxkit.limits import DEFAULT_LIMITS
from onnxkit.runtime import KernelTable, needs_scope
from onnxkit.runtime.budget import Accumulation

KERNELS = KernelTable()

_LATER = (19, 21, 23, 24, 25)


# -- helpers -----------------------------------------------------------------------------------
def _scalar(ctx, value, what: str):
    """The single element of a one-element tensor (a scalar or shape [1])."""
    arr = np.asarray(value)
    if arr.size != 1:
        ctx.fail(f"{what} must hold exactly one element, got shape {list(arr.shape)}")
    return arr.reshape(-1)[0]


def _graph_attr(ctx, name: str):
    for a in ctx.node.attribute:
        if a.name == name and isinstance(a.value, ir.Graph):
            return a.value
    return None


def _declared_zeros(vi, lead: tuple = (0,)) -> np.ndarray:
    """Zeros for a scan output no iteration produced: the element type and extents of the
    body's declared output (unknown extents taken as 0) after the leading extents ``lead``."""
    t = getattr(vi, "type", None)
    dtype = np.float32
    dims: list = []
    if isinstance(t, ir.TensorType):
        row = ELEMENT_TYPES.get(t.elem_type)
        if row is not None:
            dtype = row.dtype
        if t.shape is not None:
            dims = [d if isinstance(d, int) else 0 for d in t.shape.values]
    return np.zeros((*lead, *dims), dtype=dtype)


def _stack(ctx, values: list, what: str) -> np.ndarray:
    for v in values:
        if not isinstance(v, (np.ndarray, np.generic)):
            ctx.fail(f"{what} must be a tensor in every iteration, got {type(v).__name__}")
    try:
        return np.stack(values)
    except ValueError:
        shapes = sorted({tuple(v.shape) for v in values})
        ctx.fail(f"{what} changes shape across iterations ({[list(s) for s in shapes[:3]]}); "
                 "its extents must be the same in every iteration")


# -- If ----------------------------------------------------------------------------------------
@KERNELS.register("If", 1, 11, 13, 16, *_LATER)
def if_(ctx):
    then_branch = ctx.subgraph("then_branch")
    else_branch = ctx.subgraph("else_branch")
    n_out = ctx.num_outputs
    for name, g in (("then_branch", then_branch), ("else_branch", else_branch)):
        if len(g.output_names) < n_out:
            ctx.fail(f"{name} has {len(g.output_names)} outputs but the node has {n_out}")

    @needs_scope
    def run(scope, cond):
        if cond is None:
            ctx.fail("the condition is missing")
        branch = then_branch if bool(_scalar(ctx, cond, "cond")) else else_branch
        outs = branch.run([], scope)
        return tuple(outs[:n_out])

    return run


def _body_arity(body, supplied: int) -> int:
    """How many of ``body``'s inputs the operator fills, given that it supplies ``supplied`` values.

    Exporters of IR version 3 and earlier list every initializer as a graph input (7.2), so a
    body's trailing inputs may be initializers the operator does not supply: those keep their
    initializer value (a default) and are not counted."""
    names = body.input_names
    k = len(names)
    while k > supplied and names[k - 1] in body.defaults:
        k -= 1
    return k


# -- Loop --------------------------------------------------------------------------------------
@KERNELS.register("Loop", 1, 11, 13, 16, *_LATER)
def loop(ctx):
    body = ctx.subgraph("body")
    n_carried = _body_arity(body, ctx.num_inputs) - 2
    if n_carried < 0:
        ctx.fail(f"the body must take at least 2 inputs (iteration number, condition), it has {len(body.input_names)}")
    n_scan = len(body.output_names) - 1 - n_carried
    if n_scan < 0:
        ctx.fail(f"the body has {len(body.output_names)} outputs; it must return the condition and the "
                 f"{n_carried} loop-carried values")
    graph = _graph_attr(ctx, "body")
    scan_vis = list(graph.output[1 + n_carried:]) if graph is not None else [None] * n_scan
    limits = ctx.limits if ctx.limits is not None else DEFAULT_LIMITS
    max_iter = limits.max_loop_iterations
    where = f"node {ctx.name!r} (Loop)"

    @needs_scope
    def run(scope, M=None, cond=None, *v_initial):
        if len(v_initial) != n_carried:
            ctx.fail(f"{len(v_initial)} initial values for {n_carried} loop-carried dependencies of the body")
        trip = None
        if M is not None and np.asarray(M).size:
            trip = int(_scalar(ctx, M, "M (the trip count)"))
        keep_going = True
        if cond is not None and np.asarray(cond).size:
            keep_going = bool(_scalar(ctx, cond, "cond"))
            use_cond = True
        else:
            use_cond = False  # the body's condition output is ignored (a for loop / infinite loop)
        if trip is not None and not use_cond:
            limits.check("max_loop_iterations", max(trip, 0), where=where)
        carried = list(v_initial)
        scans: list = [[] for _ in range(n_scan)]
        acc = Accumulation(ctx.node, "Loop", n_scan, ctx.limits)
        cond_in = np.array(keep_going)
        i = 0
        while keep_going and (trip is None or i < trip):
            if i >= max_iter:
                limits.check("max_loop_iterations", i + 1, where=where)
            outs = body.run([np.array(i, dtype=np.int64), cond_in, *carried], scope)
            carried = outs[1:1 + n_carried]
            for k in range(n_scan):
                acc.add(k, outs[1 + n_carried + k])
                scans[k].append(outs[1 + n_carried + k])
            if use_cond:
                c = outs[0]
                if c is None:
                    ctx.fail("the body's condition output has no value")
                keep_going = bool(_scalar(ctx, c, "the body's condition output"))
                cond_in = np.asarray(c, dtype=bool).reshape(())
            i += 1
        results = carried
        for k in range(n_scan):
            if scans[k]:
                results.append(_stack(ctx, scans[k], f"scan output {k}"))
            else:
                results.append(_declared_zeros(scan_vis[k]))
        acc.close()
        return tuple(results)

    return run


# -- Scan --------------------------------------------------------------------------------------
def _ints(ctx, name: str, n: int, what: str) -> list:
    v = ctx.attr(name)
    if v is None:
        return [0] * n
    v = [int(x) for x in v]
    if len(v) != n:
        ctx.fail(f"attribute {name} has {len(v)} entries, expected one per {what} ({n})")
    return v


def _scan_common(ctx):
    body = ctx.subgraph("body")
    m = int(ctx.attr("num_scan_inputs"))
    n_state = _body_arity(body, ctx.num_inputs - (1 if ctx.since_version < 9 else 0)) - m
    if m < 1 or n_state < 0:
        ctx.fail(f"num_scan_inputs={m} does not fit a body with {n_state + m} inputs")
    k = len(body.output_names) - n_state
    if k < 0:
        ctx.fail(f"the body has {len(body.output_names)} outputs, fewer than its {n_state} state variables")
    graph = _graph_attr(ctx, "body")
    scan_vis = list(graph.output[n_state:]) if graph is not None else [None] * k
    return body, m, n_state, k, scan_vis


@KERNELS.register("Scan", 8)
def scan_8(ctx):
    body, m, n_state, k, scan_vis = _scan_common(ctx)
    directions = _ints(ctx, "directions", m, "scan input")

    @needs_scope
    def run(scope, sequence_lens, *args):
        if len(args) != n_state + m:
            ctx.fail(f"{len(args)} state and scan inputs, the body takes {n_state + m}")
        states, xs = list(args[:n_state]), list(args[n_state:])
        for j, x in enumerate(xs):
            if x.ndim < 2:
                ctx.fail(f"scan input {j} must have a batch axis and a sequence axis, got shape {list(x.shape)}")
        batch, max_len = xs[0].shape[0], xs[0].shape[1]
        for j, x in enumerate(xs):
            if x.shape[:2] != (batch, max_len):
                ctx.fail(f"scan input {j} has batch and sequence extents {list(x.shape[:2])}, "
                         f"scan input 0 has {[batch, max_len]}")
        for i, s in enumerate(states):
            if not isinstance(s, np.ndarray) or s.ndim < 1 or s.shape[0] != batch:
                ctx.fail(f"state variable {i} must have the batch extent {batch} on axis 0")
        if sequence_lens is None:
            lens = [max_len] * batch
        else:
            lens = [int(v) for v in np.asarray(sequence_lens).reshape(-1)]
            if len(lens) != batch or any(not 0 <= n <= max_len for n in lens):
                ctx.fail(f"sequence_lens {lens} must hold {batch} lengths in [0, {max_len}]")
        final_states: list = [[] for _ in range(n_state)]
        per_batch_scans: list = [[] for _ in range(k)]
        acc = Accumulation(ctx.node, "Scan", k, ctx.limits)
        for b in range(batch):
            st = [s[b, ...] for s in states]
            outs_b: list = [[] for _ in range(k)]
            n = lens[b]
            for t in range(n):
                elems = [x[b, n - 1 - t, ...] if d else x[b, t, ...] for x, d in zip(xs, directions)]
                outs = body.run([*st, *elems], scope)
                st = outs[:n_state]
                for q in range(k):
                    acc.add(q, outs[n_state + q])
                    outs_b[q].append(outs[n_state + q])
            for i in range(n_state):
                final_states[i].append(st[i])
            for q in range(k):
                per_batch_scans[q].append(outs_b[q])
        results = [_stack(ctx, f, f"final state {i}") if batch else states[i] for i, f in enumerate(final_states)]
        for q in range(k):
            rows = per_batch_scans[q]
            proto = next((r[0] for r in rows if r), None)
            if proto is None:
                results.append(_declared_zeros(scan_vis[q], (batch, max_len)))
                continue
            out = np.zeros((batch, max_len, *np.shape(proto)), dtype=np.asarray(proto).dtype)
            for b, r in enumerate(rows):
                if r:
                    out[b, :len(r)] = _stack(ctx, r, f"scan output {q}")
            results.append(out)
        acc.close()
        return tuple(results)

    return run


@KERNELS.register("Scan", 9, 11, 16, *_LATER)
def scan(ctx):
    body, m, n_state, k, scan_vis = _scan_common(ctx)
    in_axes = _ints(ctx, "scan_input_axes", m, "scan input")
    in_dirs = _ints(ctx, "scan_input_directions", m, "scan input")
    out_axes = _ints(ctx, "scan_output_axes", k, "scan output")
    out_dirs = _ints(ctx, "scan_output_directions", k, "scan output")
    negative_ok = ctx.since_version >= 11
    if not negative_ok and any(a < 0 for a in in_axes + out_axes):
        ctx.fail("negative scan axes are allowed from Scan-11 on")

    @needs_scope
    def run(scope, *args):
        if len(args) != n_state + m:
            ctx.fail(f"{len(args)} state and scan inputs, the body takes {n_state + m}")
        states, xs = list(args[:n_state]), []
        length = None
        for j, x in enumerate(args[n_state:]):
            r = x.ndim
            a = in_axes[j]
            if not -r <= a < r:
                ctx.fail(f"scan_input_axes[{j}]={a} is out of range for rank {r}")
            x = np.moveaxis(x, a % r, 0)
            if in_dirs[j]:
                x = x[::-1]
            if length is None:
                length = x.shape[0]
            elif x.shape[0] != length:
                ctx.fail(f"scan input {j} has {x.shape[0]} elements on its scan axis, scan input 0 has {length}")
            xs.append(x)
        scans: list = [[] for _ in range(k)]
        acc = Accumulation(ctx.node, "Scan", k, ctx.limits)
        for t in range(length):
            outs = body.run([*states, *(x[t, ...] for x in xs)], scope)  # [t, ...]: 0-d arrays, not scalars
            states = outs[:n_state]
            for q in range(k):
                acc.add(q, outs[n_state + q])
                scans[q].append(outs[n_state + q])
        results = list(states)
        for q in range(k):
            if scans[q]:
                y = _stack(ctx, scans[q], f"scan output {q}")
            else:
                y = _declared_zeros(scan_vis[q])
            if out_dirs[q]:
                y = y[::-1]
            r = y.ndim
            a = out_axes[q]
            if not -r <= a < r:
                ctx.fail(f"scan_output_axes[{q}]={a} is out of range for rank {r}")
            a %= r
            if a:
                y = np.moveaxis(y, 0, a)
            results.append(np.ascontiguousarray(y))
        acc.close()
        return tuple(results)

    return run
