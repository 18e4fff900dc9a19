"""Control flow of ai.onnx: If, Loop and Scan, the operators that evaluate subgraphs (every backend).

``If`` evaluates one branch; its outputs may be tensors, sequences or optionals (an absent
optional is ``None``).  ``Loop`` takes an optional trip count ``M`` and an optional condition
``cond`` (absent or empty); without a ``cond`` input the body's condition output is ignored,
as the operator's table of modes says (a ``for`` loop or an infinite loop; onnxruntime stops on
it anyway).  At most ``limits.max_loop_iterations`` iterations run
(:class:`onnxkit.errors.LimitExceeded` otherwise, Clause 15.4); zero iterations give empty scan
outputs typed from the body's declared outputs.  ``Scan`` 8 has a batch axis 0, a scan axis 1,
``sequence_lens`` and ``directions``; from 9 on the axes and directions of every scan input and
output are attributes, and from 11 on those axes may be negative.  The later definitions of each
operator only widen the type lists.

Scan outputs gather one value per iteration: each is charged to the run's budget as it
arrives (:class:`onnxkit.runtime.budget.Accumulation`), so a loop whose accumulated output
would exceed ``Limits.max_value_bytes`` or ``max_run_bytes`` is refused during the iteration
that would cross it.  Every subgraph sees the values of the enclosing scope (Clause 5.4.3): the
kernels are :func:`~onnxkit.plugin.needs_scope` functions and pass the scope to the subgraph's
``run``.

Subgraph values stay on the node's backend (its subgraphs are planned there): only the
conditions, trip counts and sequence lengths are read on the host (``ctx.to_host``), and the
iteration number and condition fed to a Loop body are made with ``ctx.from_host``.
"""

from __future__ import annotations

import numpy as np
from ._common import device_of

from onnxkit.plugin import Accumulation, DEFAULT_LIMITS, KernelTable, ir, needs_scope
from onnxkit.plugin.dtypes import ELEMENT_TYPES

from ._common import norm_axis, shape_of

KERNELS = KernelTable()

_LATER = (19, 21, 23, 24, 25)


# -- helpers -----------------------------------------------------------------------------------
def host_scalar(ctx, value, what: str):
    """The single element of a one-element tensor (a scalar or shape [1]), read on the host."""
    arr = ctx.to_host(value)
    if arr.size != 1:
        ctx.fail(f"{what} must hold exactly one element, got shape {list(arr.shape)}")
    return arr.reshape(-1)[0]


def _graph_attr(ctx, name: str):
    for a in ctx.node.attribute:
        if a.name == name and isinstance(a.value, ir.Graph):
            return a.value
    return None


def declared_zeros(ctx, vi, lead: tuple = (0,)):
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
    return ctx.from_host(np.zeros((*lead, *dims), dtype=dtype))


def _is_tensor(v) -> bool:
    return v is not None and not isinstance(v, (list, dict)) and hasattr(v, "shape") and hasattr(v, "dtype")


def stack(ctx, values: list, what: str):
    """The values of one scan output, one per iteration, stacked along a new first axis;
    ctx.fail if one is not a tensor or their extents differ."""
    shapes = set()
    for v in values:
        shape = getattr(v, "shape", None)
        if shape is None or isinstance(v, (list, dict)):
            ctx.fail(f"{what} must be a tensor in every iteration, got {type(v).__name__}")
        shapes.add(tuple(shape))
    if len(shapes) > 1:
        shapes = sorted(tuple(int(d) for d in s) for s in shapes)
        ctx.fail(f"{what} changes shape across iterations ({[list(s) for s in shapes[:3]]}); "
                 "its extents must be the same in every iteration")
    return ctx.xp.stack(values)


def body_arity(body, supplied: int) -> int:
    """How many of ``body``'s inputs the operator fills, given that it supplies ``supplied`` values.

    Exporters of IR version 3 and earlier list every initializer as a graph input (7.2), so a
    body's trailing inputs may be initializers the operator does not supply: those keep their
    initializer value (a default) and are not counted."""
    names = body.input_names
    k = len(names)
    while k > supplied and names[k - 1] in body.defaults:
        k -= 1
    return k


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
        if type(cond) is np.ndarray and cond.size == 1:   # a host value: read as it is
            take = cond.item()
        elif cond is None:
            ctx.fail("the condition is missing")
        else:
            take = host_scalar(ctx, cond, "cond")
        outs = (then_branch if take else else_branch).run([], scope)
        return tuple(outs) if len(outs) == n_out else tuple(outs[:n_out])

    return run


# -- Loop --------------------------------------------------------------------------------------
@KERNELS.register("Loop", 1, 11, 13, 16, *_LATER)
def loop(ctx):
    xp = ctx.xp
    body = ctx.subgraph("body")
    n_carried = body_arity(body, ctx.num_inputs) - 2
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
        m_host = None if M is None else ctx.to_host(M)
        if m_host is not None and m_host.size:
            trip = int(host_scalar(ctx, m_host, "M (the trip count)"))
        keep_going = True
        c_host = None if cond is None else ctx.to_host(cond)
        use_cond = c_host is not None and c_host.size > 0
        if use_cond:
            keep_going = bool(host_scalar(ctx, c_host, "cond"))
        # else the body's condition output is ignored (a for loop / infinite loop)
        if trip is not None and not use_cond:
            limits.check("max_loop_iterations", max(trip, 0), where=where)
        carried = list(v_initial)
        scans: list = [[] for _ in range(n_scan)]
        acc = Accumulation(ctx.node, "Loop", n_scan, ctx.limits)
        cond_in = ctx.from_host(np.array(keep_going))
        i = 0
        while keep_going and (trip is None or i < trip):
            if i >= max_iter:
                limits.check("max_loop_iterations", i + 1, where=where)
            outs = body.run([ctx.from_host(np.array(i, dtype=np.int64)), cond_in, *carried], scope)
            carried = outs[1:1 + n_carried]
            for k in range(n_scan):
                acc.add(k, outs[1 + n_carried + k])
                scans[k].append(outs[1 + n_carried + k])
            if use_cond:
                c = outs[0]
                if c is None:
                    ctx.fail("the body's condition output has no value")
                keep_going = bool(host_scalar(ctx, c, "the body's condition output"))
                cond_in = xp.reshape(xp.astype(c, xp.bool), ())
            i += 1
        results = carried
        for k in range(n_scan):
            if scans[k]:
                results.append(stack(ctx, scans[k], f"scan output {k}"))
            else:
                results.append(declared_zeros(ctx, scan_vis[k]))
        acc.close()
        return tuple(results)

    return run


# -- Scan --------------------------------------------------------------------------------------
def _per_value_ints(ctx, name: str, n: int, what: str) -> list:
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
    n_state = body_arity(body, ctx.num_inputs - (1 if ctx.since_version < 9 else 0)) - m
    if m < 1 or n_state < 0:
        ctx.fail(f"num_scan_inputs={m} does not fit a body with {n_state + m} inputs")
    k = len(body.output_names) - n_state
    if k < 0:
        ctx.fail(f"the body has {len(body.output_names)} outputs, fewer than its {n_state} state variables")
    graph = _graph_attr(ctx, "body")
    scan_vis = list(graph.output[n_state:]) if graph is not None else [None] * k
    return body, m, n_state, k, scan_vis


def _padded(ctx, rows: list, proto, length: int, what: str):
    """One batch entry's scan output (``rows``, one value per step it took, maybe none) stacked
    and padded with zeros to ``length`` steps; ``proto`` is a value of that output."""
    xp = ctx.xp
    y = stack(ctx, rows, what) if rows else None
    taken = 0 if y is None else int(y.shape[0])
    if taken == length:
        return y
    pad = xp.zeros((length - taken, *shape_of(proto)), dtype=proto.dtype, device=device_of(proto))
    return pad if y is None else xp.concat([y, pad], axis=0)


@KERNELS.register("Scan", 8)
def scan_8(ctx):
    xp = ctx.xp
    body, m, n_state, k, scan_vis = _scan_common(ctx)
    directions = _per_value_ints(ctx, "directions", m, "scan input")

    @needs_scope
    def run(scope, sequence_lens, *args):
        if len(args) != n_state + m:
            ctx.fail(f"{len(args)} state and scan inputs, the body takes {n_state + m}")
        states, xs = list(args[:n_state]), list(args[n_state:])
        for j, x in enumerate(xs):
            if x.ndim < 2:
                ctx.fail(f"scan input {j} must have a batch axis and a sequence axis, got shape {shape_of(x)}")
        batch, max_len = int(xs[0].shape[0]), int(xs[0].shape[1])
        for j, x in enumerate(xs):
            if shape_of(x)[:2] != [batch, max_len]:
                ctx.fail(f"scan input {j} has batch and sequence extents {shape_of(x)[:2]}, "
                         f"scan input 0 has {[batch, max_len]}")
        for i, s in enumerate(states):
            if not _is_tensor(s) or s.ndim < 1 or int(s.shape[0]) != batch:
                ctx.fail(f"state variable {i} must have the batch extent {batch} on axis 0")
        if sequence_lens is None:
            lens = [max_len] * batch
        else:
            lens = ctx.ints(sequence_lens)
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
        results = [stack(ctx, f, f"final state {i}") if batch else states[i] for i, f in enumerate(final_states)]
        for q in range(k):
            rows = per_batch_scans[q]
            proto = next((r[0] for r in rows if r), None)
            if proto is None:
                results.append(declared_zeros(ctx, scan_vis[q], (batch, max_len)))
                continue
            if not _is_tensor(proto):
                ctx.fail(f"scan output {q} must be a tensor in every iteration, got {type(proto).__name__}")
            results.append(xp.stack([_padded(ctx, r, proto, max_len, f"scan output {q}") for r in rows]))
        acc.close()
        return tuple(results)

    return run


@KERNELS.register("Scan", 9, 11, 16, *_LATER)
def scan(ctx):
    xp = ctx.xp
    body, m, n_state, k, scan_vis = _scan_common(ctx)
    in_axes = _per_value_ints(ctx, "scan_input_axes", m, "scan input")
    in_dirs = _per_value_ints(ctx, "scan_input_directions", m, "scan input")
    out_axes = _per_value_ints(ctx, "scan_output_axes", k, "scan output")
    out_dirs = _per_value_ints(ctx, "scan_output_directions", k, "scan output")
    if ctx.since_version < 11 and any(a < 0 for a in in_axes + out_axes):
        ctx.fail("negative scan axes are allowed from Scan-11 on")

    @needs_scope
    def run(scope, *args):
        if len(args) != n_state + m:
            ctx.fail(f"{len(args)} state and scan inputs, the body takes {n_state + m}")
        states, xs = list(args[:n_state]), []
        length = None
        for j, x in enumerate(args[n_state:]):
            a = norm_axis(ctx, in_axes[j], x.ndim, f"scan_input_axes[{j}]")
            if a:
                x = xp.moveaxis(x, a, 0)
            if in_dirs[j]:
                x = xp.flip(x, axis=0)
            if length is None:
                length = int(x.shape[0])
            elif int(x.shape[0]) != length:
                ctx.fail(f"scan input {j} has {int(x.shape[0])} elements on its scan axis, scan input 0 has {length}")
            xs.append(x)
        scans: list = [[] for _ in range(k)]
        acc = Accumulation(ctx.node, "Scan", k, ctx.limits)
        for t in range(length or 0):
            outs = body.run([*states, *(x[t, ...] for x in xs)], scope)  # [t, ...]: 0-d arrays, not scalars
            states = outs[:n_state]
            for q in range(k):
                acc.add(q, outs[n_state + q])
                scans[q].append(outs[n_state + q])
        results = list(states)
        for q in range(k):
            y = stack(ctx, scans[q], f"scan output {q}") if scans[q] else declared_zeros(ctx, scan_vis[q])
            if out_dirs[q]:
                y = xp.flip(y, axis=0)
            a = norm_axis(ctx, out_axes[q], y.ndim, f"scan_output_axes[{q}]")
            if a:
                y = xp.moveaxis(y, 0, a)
            results.append(y)
        acc.close()
        return tuple(results)

    return run
