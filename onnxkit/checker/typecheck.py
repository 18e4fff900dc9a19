"""Type constraints and static shapes of a node (Clause 10.3, 6.6).

:func:`check_node` uses the types known for the node's values - declared (graph inputs
and outputs, value_info), given by an initializer or a Constant node, or supplied by the
``known_types`` hook (inference) - and detects:

* ``type-constraint-violation`` (10.3): an input's (or a declared output's) type is not one
  the operator's type constraint (or fixed type) admits;
* ``type-variable-mismatch`` (10.3): one type variable bound to two different types in one
  node.  Heterogeneous variadic parameters (Loop's, If's, Scan's values) bind per value and
  are exempt;
* ``broadcast-mismatch`` (6.6): the static extents of the inputs of an operator with
  multidirectional broadcasting (Add, Sub, Mul, Div, Pow, Mod, the comparisons and logical
  operators, BitShift, the Bitwise operators, Where; Max, Min, Sum, Mean from version 8)
  or unidirectional broadcasting (PRelu's slope) clash: two static extents at one position,
  neither 1, differ.  Versions before 7 (legacy ``broadcast`` attribute) are not checked;
* ``shape-mismatch`` (6.6, 10.3): the declared shape of such an operator's output has another
  rank than the broadcast of its inputs, or a static extent the broadcast contradicts.

Unknown types, unknown ranks, unknown extents and dimension variables never make an error
(9.4, 9.5): the checks only compare what is statically known.
"""

from __future__ import annotations

from typing import Mapping, Optional

from .. import ir
from ..domains import is_default_domain
from ..dtypes import DataType
from ..ir.attribute import AttributeType
from ..inference.engine import sparse_constant_type
from ..ir.types import type_string
from ..shapes import BroadcastError, broadcast_multidirectional, broadcast_unidirectional
from .context import Context, q
from .types import parse_type_string, type_key, type_of_tensor

#: Operators with multidirectional broadcasting, and the first definition version that has it.
MULTIDIRECTIONAL = {op: 7 for op in ("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Greater", "Less", "And", "Or",
                                     "Xor", "GreaterOrEqual", "LessOrEqual", "Mod", "BitShift", "BitwiseAnd",
                                     "BitwiseOr", "BitwiseXor", "Where")}
MULTIDIRECTIONAL.update({op: 8 for op in ("Max", "Min", "Sum", "Mean")})
UNIDIRECTIONAL = {"PRelu": 7}


def constant_type(node: ir.Node) -> Optional[ir.Type]:
    """The type of a Constant node's output, from its value attribute (None if it cannot tell)."""
    for a in node.attribute:
        v = a.value
        if a.ref_attr_name or v is None:
            continue
        if a.name == "value" and isinstance(v, ir.Tensor):
            return type_of_tensor(v)
        if a.name == "sparse_value" and isinstance(v, ir.SparseTensor) and v.values is not None:
            return ir.TensorType(v.values.data_type, ir.Shape.of([int(d) for d in v.dims]))
        scalar = {"value_float": (DataType.FLOAT, AttributeType.FLOAT), "value_int": (DataType.INT64, AttributeType.INT),
                  "value_string": (DataType.STRING, AttributeType.STRING)}.get(a.name)
        if scalar and a.type == scalar[1]:
            return ir.TensorType(scalar[0], ir.Shape.of([]))
        vector = {"value_floats": (DataType.FLOAT, AttributeType.FLOATS), "value_ints": (DataType.INT64, AttributeType.INTS),
                  "value_strings": (DataType.STRING, AttributeType.STRINGS)}.get(a.name)
        if vector and a.type == vector[1] and isinstance(v, list):
            return ir.TensorType(vector[0], ir.Shape.of([len(v)]))
    return None


def _allowed(ctx: Context, schema, param) -> Optional[frozenset]:
    """The type keys ``param`` admits (None when a type string cannot be read: nothing is checked)."""
    key = (schema.key, param.type_str)
    cache = ctx._allowed_cache
    if key in cache:
        return cache[key]
    keys = set()
    for s in schema.allowed_types(param):
        k = parse_type_string(s)
        if k is None:
            keys = None
            break
        keys.add(k)
    out = frozenset(keys) if keys is not None else None
    cache[key] = out
    return out


def _constrained(ctx: Context, schema) -> frozenset:
    """The type variables ``schema``'s type constraints name (read once per definition and check)."""
    cache = ctx._constrained_cache
    found = cache.get(schema.key)
    if found is None:
        found = cache[schema.key] = frozenset(tc.type_param for tc in schema.type_constraints)
    return found


def check_node(ctx: Context, node: ir.Node, loc: str, schema, types: Mapping) -> None:
    bound: dict = {}
    constrained = _constrained(ctx, schema)
    for what, names, param_at in (("input", node.input, schema.input_at), ("output", node.output, schema.output_at)):
        for j, name in enumerate(names):
            if not name:
                continue
            t = types.get(name)
            k = type_key(t) if t is not None else None
            p = param_at(j) if k is not None else None
            if p is None:
                continue
            allowed = _allowed(ctx, schema, p)
            if allowed is not None and k not in allowed:
                where = f"{loc} / {what} {j} {q(name)}"
                if what == "output" and reads_as_sparse_initializer(node, t):
                    ctx.emit("sparse-constant-output", f"output {j} is declared {type_string(t)}: the Constant's "
                             "sparse value is read as onnxruntime reads it, a sparse initializer (returned sparse "
                             "where it is a graph output, dense to the nodes reading it)", where)
                    continue
                said = f"{what} {j} ({p.name}) has type {type_string(t)}, which {schema} does not admit for {p.type_str}"
                if what == "input":  # onnxruntime's sentence for this refusal too: callers match its words
                    said += (f" (Type Error: Type '{type_string(t)}' of input parameter ({name}) of operator "
                             f"({node.op_type}) in node ({node.name}) is invalid.)")
                ctx.emit("type-constraint-violation", said, where)
                continue
            if p.type_str in constrained and (p.option != "variadic" or p.is_homogeneous):
                prev = bound.get(p.type_str)
                if prev is None:
                    bound[p.type_str] = (k, what, j, name, t)
                elif prev[0] != k:
                    ctx.emit("type-variable-mismatch", f"type variable {p.type_str} is {type_string(prev[4])} at "
                             f"{prev[1]} {prev[2]} {q(prev[3])} but {type_string(t)} here", f"{loc} / {what} {j} {q(name)}")
    _check_broadcast(ctx, node, loc, schema, types)


def reads_as_sparse_initializer(node: ir.Node, t) -> bool:
    """A Constant holding a sparse value whose output is declared sparse_tensor of its element type."""
    return sparse_constant_type(node, (t,)) is not None


def _shape_of(types: Mapping, name: str):
    t = types.get(name) if name else None
    if isinstance(t, ir.TensorType) and t.shape is not None:
        return t.shape
    return None


def _check_broadcast(ctx: Context, node: ir.Node, loc: str, schema, types: Mapping) -> None:
    op = node.op_type
    if not is_default_domain(schema.domain):
        return
    if op in MULTIDIRECTIONAL and schema.since_version >= MULTIDIRECTIONAL[op]:
        shapes = [_shape_of(types, n) for n in node.input]
        known = [s.values for s in shapes if s is not None]
        try:
            result = broadcast_multidirectional(known)
        except BroadcastError as exc:
            ctx.emit("broadcast-mismatch", f"the input shapes do not broadcast (6.6.2): {exc}", loc)
            return
        if len(known) == len(node.input) and known:
            _compare_output(ctx, node, loc, result.shape, types)
    elif op in UNIDIRECTIONAL and schema.since_version >= UNIDIRECTIONAL[op] and len(node.input) >= 2:
        a, b = _shape_of(types, node.input[0]), _shape_of(types, node.input[1])
        if a is None or b is None:
            return
        try:
            broadcast_unidirectional(a.values, b.values)
        except BroadcastError as exc:
            ctx.emit("broadcast-mismatch", f"input 1 does not broadcast to input 0 (6.6.3): {exc}", loc)
            return
        _compare_output(ctx, node, loc, a.values, types)


def _compare_output(ctx: Context, node: ir.Node, loc: str, result: tuple, types: Mapping) -> None:
    if not node.output or not node.output[0]:
        return
    out = _shape_of(types, node.output[0])
    if out is None:
        return
    where = f"{loc} / output 0 {q(node.output[0])}"
    if len(out.dim) != len(result):
        ctx.emit("shape-mismatch", f"the output is declared with rank {len(out.dim)} {out}, but the inputs broadcast "
                 f"to rank {len(result)} {list(result)}", where)
        return
    for i, (r, d) in enumerate(zip(result, out.dim)):
        if isinstance(r, int) and d.is_static and d.dim_value != r:
            ctx.emit("shape-mismatch", f"the output is declared {out}, but the inputs broadcast to extent {r} at "
                     f"dimension {i} ({list(result)})", where)
            return
