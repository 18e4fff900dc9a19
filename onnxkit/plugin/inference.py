"""The inference-function toolkit of the plugin surface (Clause 9.2): what a domain package's
shape and type inference functions import.

An inference function is ``fn(ctx)`` with ``ctx`` an :class:`InferenceContext` (the node, its
input types, constant inputs where known, attributes with the schema defaults); it returns the
output types, yields unknown rather than guess (9.4) and never equates two distinct dimension
variables (9.3); it raises :class:`InferenceError` (``ctx.fail(...)``) for a node its
definition rejects.  Constants larger than :data:`MAX_CONSTANT_ELEMENTS` elements are not handed
to inference functions.

Extents are plain values: ``int`` (static), ``str`` (a dimension variable) or ``None``
(unknown); a shape is a list of extents, or ``None`` for unknown rank.

Reading types: :func:`elem_of`, :func:`dims_of`, :func:`rank_of`, :func:`tensor` (a tensor
type), :func:`parse_type`, :func:`constraint_type`, :func:`constraint_elem`, :func:`join_types`;
element type tags :data:`BOOL`, :data:`FLOAT`, :data:`INT64`.
Extents: :func:`unify`, :func:`check_equal`, :func:`is_static`, :func:`product`,
:func:`normalize_axis`, :func:`broadcast` / :func:`broadcast_to` (Clause 9.5 broadcasting, on
shapes with variables; :func:`broadcast_multidirectional` / :func:`broadcast_unidirectional`
and :class:`BroadcastError` on static shapes).
Constant inputs: :func:`shape_input`, :func:`int_list`, :func:`scalar`, :func:`axes_of`,
:func:`fold_binary`, :func:`fold_symbolic_binary`.
Ready-made rules (each returns an inference function): :func:`same_as_input`,
:func:`elementwise_rule`, :func:`cast_rule`, :func:`reduction_rule`, :func:`from_constraints`;
their building blocks :func:`elementwise` and :func:`reduce_shape`.

Each function's own docstring states its contract.
"""

from __future__ import annotations

from ..inference.common import (BOOL, FLOAT, INT64, axes_of, broadcast, broadcast_to, cast_rule, check_equal,
                                constraint_elem, constraint_type, dims_of, elem_of, elementwise, elementwise_rule,
                                fold_binary, fold_symbolic_binary, from_constraints, int_list, is_static, join_types,
                                normalize_axis, parse_type, product, rank_of, reduce_shape, reduction_rule,
                                same_as_input, scalar, shape_input, tensor, unify)
from ..inference.context import MAX_CONSTANT_ELEMENTS, InferenceContext, InferenceError
from ..shapes import BroadcastError, broadcast_multidirectional, broadcast_unidirectional

__all__ = ["BOOL", "BroadcastError", "FLOAT", "INT64", "InferenceContext", "InferenceError", "MAX_CONSTANT_ELEMENTS",
           "axes_of", "broadcast", "broadcast_multidirectional", "broadcast_to", "broadcast_unidirectional",
           "cast_rule", "check_equal", "constraint_elem", "constraint_type", "dims_of", "elem_of", "elementwise",
           "elementwise_rule", "fold_binary", "fold_symbolic_binary", "from_constraints", "int_list", "is_static",
           "join_types", "normalize_axis", "parse_type", "product", "rank_of", "reduce_shape", "reduction_rule",
           "same_as_input", "scalar", "shape_input", "tensor", "unify"]
