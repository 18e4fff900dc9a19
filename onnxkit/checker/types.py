"""The type system (Clause 6): well-formed types, and comparing two statements of one type.

:func:`check_type` detects, for one type wherever it appears (value infos, attribute
``type_protos``, nested element types):

* ``type-kind-missing`` (6.1, B.2.21): a TypeProto with no member of its one-of group (a
  warning: read as undeclared); ``type-kind-multiple`` (B.2.21): one with several members
  (the decoder keeps one and retains the others' octets, :mod:`onnxkit.wire.adapters`);
* ``invalid-elem-type`` (6.2): an element type tag 0 or not listed in Table 5;
* ``invalid-map-key`` (6.8.2): a map key type that is not integral or STRING;
* ``invalid-optional-elem`` (6.8.3): an optional of something other than a tensor, sparse
  tensor, sequence or map type;
* ``opaque-name-missing`` (6.8.4): an opaque type without a name;
* ``negative-dim-value`` (6.5.1): a negative dimension (exporters write -1 for a dynamic
  extent; read as unknown, :attr:`onnxkit.ir.Dim.value`); ``limit-exceeded`` (15.4) an extent
  over ``Limits.max_dim_extent``;
* ``mandatory-field-missing`` (B.2.23-B.2.25): a sequence, map or optional without its
  element (value) type;
* ``ir-version-feature`` (14.1.2): an element type newer than the model's IR version.

:func:`type_key` and :func:`parse_type_string` give types and ONNX 1-2 type strings
(``'tensor(float)'``, ``'seq(tensor(int64))'``, ``'map(int64, float)'``) one comparable
form; :func:`contradiction` compares two statements of one value's type (7.1, 9.4):
different kinds or element types are a ``type-mismatch``, different ranks or two
different static extents a ``shape-mismatch``; unknown parts never contradict anything.
"""

from __future__ import annotations

from typing import Optional

from .. import ir
from ..dtypes import ELEMENT_TYPES, tag_name
from ..ir.types import MAP_KEY_TAGS
from .context import ELEM_TYPE_IR, Context

_OPTIONAL_KINDS = ("tensor", "sparse_tensor", "sequence", "map")


def _absent(obj, name: str) -> bool:
    w = getattr(obj, "_wire", None)
    return w is not None and name in w.absent


def _check_elem(ctx: Context, t, field: str, tag, loc: str) -> bool:
    """True if ``tag`` is a usable element type; reports it otherwise (absence is fields.py's)."""
    if _absent(t, field):
        return False
    if tag not in ELEMENT_TYPES:
        why = "0 (UNDEFINED)" if tag == 0 else f"{tag}, which is not listed in Table 5"
        ctx.emit("invalid-elem-type", f"element type tag is {why}", loc)
        return False
    intro = ELEM_TYPE_IR.get(tag)
    if intro:
        ctx.feature(f"element type {tag_name(tag)}", intro, loc)
    return True


def check_shape(ctx: Context, shape, loc: str) -> None:
    if shape is None:
        return
    limit = ctx.limits.max_dim_extent
    for i, d in enumerate(shape.dim):
        v = d.dim_value
        if v is None:
            continue
        if v < 0:
            ctx.emit("negative-dim-value", f"dimension {i} has dim_value {v}; extents are non-negative, it is read "
                     "as unknown", loc)
        elif v > limit:
            ctx.emit("limit-exceeded", f"dimension {i} has extent {v}, over max_dim_extent={limit}", loc)


#: TypeProto field tags of the one-of group (Table B.25).
_KIND_TAGS = {1: "tensor_type", 4: "sequence_type", 5: "map_type", 7: "opaque_type", 8: "sparse_tensor_type",
              9: "optional_type"}


def _extra_kinds(t) -> list:
    """Group members a decoded TypeProto carried beside the one kept (retained as unknown fields)."""
    w = getattr(t, "_outer_wire", None)
    if w is None or not w.unknown:
        return []
    return sorted({_KIND_TAGS[tag] for tag, _ in w.unknown if tag in _KIND_TAGS})


def check_type(ctx: Context, t, loc: str) -> None:
    """The checks of one type (not of its element types: the walk visits those)."""
    extra = _extra_kinds(t)
    if extra:
        ctx.emit("type-kind-multiple", f"the type sets {t.kind()} and also {', '.join(extra)}; exactly one kind SHALL "
                 "be present (B.2.21)", loc)
    if isinstance(t, ir.UndefinedType):
        ctx.emit("type-kind-missing", "the type sets none of tensor_type, sequence_type, map_type, optional_type, "
                 "sparse_tensor_type, opaque_type; it is read as undeclared", loc)
    elif isinstance(t, (ir.TensorType, ir.SparseTensorType)):
        _check_elem(ctx, t, "elem_type", t.elem_type, loc)
        check_shape(ctx, t.shape, loc)
    elif isinstance(t, ir.SequenceType):
        if t.elem_type is None:
            ctx.emit("mandatory-field-missing", "TypeProto.Sequence.elem_type is mandatory (Annex B) but absent", loc)
    elif isinstance(t, ir.MapType):
        if not _absent(t, "key_type") and t.key_type not in MAP_KEY_TAGS:
            ctx.emit("invalid-map-key", f"map key type {tag_name(t.key_type)} is not an integral type or STRING", loc)
        if t.value_type is None:
            ctx.emit("mandatory-field-missing", "TypeProto.Map.value_type is mandatory (Annex B) but absent", loc)
    elif isinstance(t, ir.OptionalType):
        e = t.elem_type
        if e is None:
            ctx.emit("mandatory-field-missing", "TypeProto.Optional.elem_type is mandatory (Annex B) but absent", loc)
        elif e.kind() not in _OPTIONAL_KINDS and e.kind() != "undefined":
            ctx.emit("invalid-optional-elem", f"an optional's element type is {e.kind()}; it must be a tensor, "
                     "sparse tensor, sequence or map type", loc)
    elif isinstance(t, ir.OpaqueType):
        if not t.name:
            ctx.emit("opaque-name-missing", "an opaque type has no name (the name is required)", loc)


# -- comparable forms -----------------------------------------------------------------------

def elem_name(tag) -> Optional[str]:
    return tag_name(tag).lower() if tag in ELEMENT_TYPES else None


def type_key(t) -> Optional[tuple]:
    """A hashable form of ``t`` without shapes, or None where part of it is unknown or invalid."""
    if isinstance(t, ir.TensorType):
        e = elem_name(t.elem_type)
        return ("tensor", e) if e else None
    if isinstance(t, ir.SparseTensorType):
        e = elem_name(t.elem_type)
        return ("sparse_tensor", e) if e else None
    if isinstance(t, ir.SequenceType):
        k = type_key(t.elem_type)
        return ("seq", k) if k else None
    if isinstance(t, ir.OptionalType):
        k = type_key(t.elem_type)
        return ("optional", k) if k else None
    if isinstance(t, ir.MapType):
        key, v = elem_name(t.key_type), type_key(t.value_type)
        return ("map", key, v) if key and v else None
    if isinstance(t, ir.OpaqueType):
        return ("opaque", t.domain, t.name)
    return None


def _split_args(s: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    out.append(cur)
    return [x.strip() for x in out]


def parse_type_string(s: str) -> Optional[tuple]:
    """The :func:`type_key` form of an ONNX 1-2 type string (a bare element type is a tensor of it)."""
    s = s.strip()
    if "(" not in s:
        return ("tensor", s)
    head, _, rest = s.partition("(")
    if not rest.endswith(")"):
        return None
    args = _split_args(rest[:-1])
    if head in ("tensor", "sparse_tensor") and len(args) == 1:
        return (head, args[0])
    if head in ("seq", "sequence", "optional") and len(args) == 1:
        inner = parse_type_string(args[0])
        return ("seq" if head != "optional" else "optional", inner) if inner else None
    if head == "map" and len(args) == 2:
        inner = parse_type_string(args[1])
        return ("map", args[0], inner) if inner else None
    return None


def type_of_tensor(t: ir.Tensor) -> ir.TensorType:
    """The type an initializer (or a Constant's value) gives its value: element type and full static shape."""
    return ir.TensorType(t.data_type, ir.Shape.of([int(d) for d in t.dims]))


# -- comparing two statements ------------------------------------------------------------------

def contradiction(a, b) -> Optional[tuple]:
    """``(code, message)`` where types ``a`` and ``b`` cannot both hold of one value, else None."""
    if a is None or b is None or isinstance(a, ir.UndefinedType) or isinstance(b, ir.UndefinedType):
        return None
    if a.kind() != b.kind():
        return "type-mismatch", f"{a} vs {b}"
    if isinstance(a, (ir.TensorType, ir.SparseTensorType)):
        if a.elem_type in ELEMENT_TYPES and b.elem_type in ELEMENT_TYPES and a.elem_type != b.elem_type:
            return "type-mismatch", f"element type {tag_name(a.elem_type)} vs {tag_name(b.elem_type)}"
        return shape_contradiction(a.shape, b.shape)
    if isinstance(a, (ir.SequenceType, ir.OptionalType)):
        return contradiction(a.elem_type, b.elem_type)
    if isinstance(a, ir.MapType):
        if a.key_type in ELEMENT_TYPES and b.key_type in ELEMENT_TYPES and a.key_type != b.key_type:
            return "type-mismatch", f"map key type {tag_name(a.key_type)} vs {tag_name(b.key_type)}"
        return contradiction(a.value_type, b.value_type)
    if isinstance(a, ir.OpaqueType) and (a.domain, a.name) != (b.domain, b.name):
        return "type-mismatch", f"{a} vs {b}"
    return None


def shape_contradiction(a, b) -> Optional[tuple]:
    if a is None or b is None:
        return None
    if len(a.dim) != len(b.dim):
        return "shape-mismatch", f"rank {len(a.dim)} {a} vs rank {len(b.dim)} {b}"
    for i, (x, y) in enumerate(zip(a.dim, b.dim)):
        if x.is_static and y.is_static and x.dim_value != y.dim_value:
            return "shape-mismatch", f"extent {x.dim_value} vs {y.dim_value} at dimension {i} ({a} vs {b})"
    return None
