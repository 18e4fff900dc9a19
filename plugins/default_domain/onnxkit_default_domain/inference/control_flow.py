"""Operators carrying subgraphs: If, Loop, Scan, SequenceMap.

Subgraphs are inferred through ``ctx.subgraph_types`` with the types the operator supplies
to their inputs; they see the enclosing scope (Clause 5.4.3) and its dimension variables
(6.5.2).  Loop-carried values are inferred to a fixed point: an extent that differs between
the initial value and the body's result becomes unknown.
"""

from __future__ import annotations

from onnxkit.plugin import FunctionTable, ir
from onnxkit.plugin.inference import BOOL, INT64, dims_of, elem_of, join_types, normalize_axis, scalar, tensor

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)


@FUNCTIONS.register("If")
def _if(ctx):
    then_t = ctx.subgraph_types("then_branch", [])
    else_t = ctx.subgraph_types("else_branch", [])
    out = []
    for k in range(ctx.num_outputs):
        a = then_t[k] if then_t is not None and k < len(then_t) else None
        b = else_t[k] if else_t is not None and k < len(else_t) else None
        out.append(join_types(a, b))
    return out


def _generalize(initial, produced):
    """The type of a loop-carried value after one more iteration: what both entail (unknown
    where the body's result is unknown or of another element type or kind)."""
    if initial is None or produced is None:
        return None
    return join_types(initial, produced)


@FUNCTIONS.register("Loop")
def _loop(ctx):
    n_carried = max(ctx.num_inputs - 2, 0)
    carried = [ctx.input_type(2 + k) for k in range(n_carried)]
    body_out = None
    for _ in range(6):
        body_out = ctx.subgraph_types("body", [tensor(INT64, []), tensor(BOOL, [])] + carried)
        if body_out is None:
            return None
        new = [_generalize(carried[k], body_out[1 + k] if 1 + k < len(body_out) else None) for k in range(n_carried)]
        if new == carried:
            break
        carried = new
    out = list(carried)
    # without a condition input the loop runs exactly M times (the body's condition is ignored)
    trips = None
    if ctx.has_input(0) and not ctx.has_input(1):
        m = scalar(ctx, 0)
        trips = int(m) if m is not None and int(m) >= 0 else None
    for k in range(ctx.num_outputs - n_carried):
        idx = 1 + n_carried + k
        t = body_out[idx] if body_out is not None and idx < len(body_out) else None
        if isinstance(t, ir.TensorType):
            d = dims_of(t)
            out.append(tensor(elem_of(t), None if d is None else [trips] + d))
        else:
            out.append(None)
    return out


def _scan_dims(ctx, d, axis):
    if d is None:
        return None, None
    a = normalize_axis(ctx, axis, len(d))
    return d[:a] + d[a + 1:], d[a]


@FUNCTIONS.register("Scan", 9)
def _scan(ctx):
    m = int(ctx.attr("num_scan_inputs"))
    n = ctx.num_inputs - m
    in_axes = list(ctx.attr("scan_input_axes") or [0] * m)
    states = [ctx.input_type(k) for k in range(n)]
    slices, length = [], None
    for j in range(m):
        t = ctx.input_type(n + j)
        d, ext = _scan_dims(ctx, dims_of(t), in_axes[j])
        slices.append(tensor(elem_of(t), d) if t is not None else None)
        if length is None and ext is not None:
            length = ext
    body_out = None
    for _ in range(6):
        body_out = ctx.subgraph_types("body", states + slices)
        if body_out is None:
            return None
        new = [_generalize(states[k], body_out[k] if k < len(body_out) else None) for k in range(n)]
        if new == states:
            break
        states = new
    out = list(states)
    k_out = ctx.num_outputs - n
    out_axes = list(ctx.attr("scan_output_axes") or [0] * k_out)
    for j in range(k_out):
        t = body_out[n + j] if n + j < len(body_out) else None
        d = dims_of(t)
        if t is None or d is None:
            out.append(tensor(elem_of(t), None) if t is not None else None)
            continue
        a = normalize_axis(ctx, out_axes[j], len(d) + 1)
        out.append(tensor(elem_of(t), d[:a] + [length] + d[a:]))
    return out


@FUNCTIONS.register("Scan", 8, 8)
def _scan8(ctx):
    m = int(ctx.attr("num_scan_inputs"))
    n = ctx.num_inputs - 1 - m
    states = [ctx.input_type(1 + k) for k in range(n)]
    batch = None
    slices, length = [], None
    for k, t in enumerate(states):
        d = dims_of(t)
        states[k] = tensor(elem_of(t), d[1:]) if d else t
        if d:
            batch = batch if batch is not None else d[0]
    for j in range(m):
        t = ctx.input_type(1 + n + j)
        d = dims_of(t)
        if d is not None and len(d) >= 2:
            batch = batch if batch is not None else d[0]
            length = length if length is not None else d[1]
            slices.append(tensor(elem_of(t), d[2:]))
        else:
            slices.append(tensor(elem_of(t), None) if t is not None else None)
    body_out = ctx.subgraph_types("body", states + slices)
    if body_out is None:
        return None
    out = []
    for k in range(n):
        t = _generalize(states[k], body_out[k] if k < len(body_out) else None)
        d = dims_of(t)
        out.append(tensor(elem_of(t), None if d is None else [batch] + d) if t is not None else None)
    for j in range(ctx.num_outputs - n):
        t = body_out[n + j] if n + j < len(body_out) else None
        d = dims_of(t)
        out.append(tensor(elem_of(t), None if d is None else [batch, length] + d) if t is not None else None)
    return out


@FUNCTIONS.register("SequenceMap")
def _sequence_map(ctx):
    ins = []
    for i in range(ctx.num_inputs):
        t = ctx.input_type(i)
        ins.append(t.elem_type if isinstance(t, ir.SequenceType) else t)
    body_out = ctx.subgraph_types("body", ins)
    if body_out is None:
        return None
    return [ir.SequenceType(t) if t is not None else None for t in body_out]
