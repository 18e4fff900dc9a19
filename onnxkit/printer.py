"""A model as text, in the ONNX textual syntax (the one ``onnx.parser`` reads, ``onnx.printer`` writes).

    <ir_version: 8, opset_import: ["" : 13]>
    main (float[N,3] X) => (float[N,3] Y)
       <float[3] b = {1, 2, 3}>
    {
       [add0] Y = Add (X, b)
    }

:func:`to_text` prints a :class:`~onnxkit.ir.Model`, :class:`~onnxkit.ir.Graph`,
:class:`~onnxkit.ir.Function`, :class:`~onnxkit.ir.Node` or a type.  Every model field the
syntax has is printed (header fields that differ from their default, graphs, nodes with their
names, attributes with explicit types, initializers with all their values, value_info,
functions with attribute defaults), so the text parses back to an equal model.  What the
syntax cannot say is printed as a ``#`` comment and is lost on parsing: doc strings of graphs
and nodes, sparse initializers, metadata of values and nodes, training information.
Floating-point values are written with the fewest digits that read back to the same value;
the 16- and 8-bit float types as their bit patterns, as ``onnx.printer`` does.
"""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np

from . import ir
from .dtypes import ELEMENT_TYPES, tag_name

__all__ = ["to_text"]

INDENT = "   "
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Words the parser reads as type or keyword where a name may stand: always quoted.
_KEYWORDS = frozenset({"seq", "map", "optional", "sparse_tensor", "tensor", "graph", "type_proto"} |
                      {tag_name(t).lower() for t in ELEMENT_TYPES})
_ATTR_TYPE = {
    ir.AttributeType.FLOAT: "float", ir.AttributeType.INT: "int", ir.AttributeType.STRING: "string",
    ir.AttributeType.TENSOR: "tensor", ir.AttributeType.GRAPH: "graph", ir.AttributeType.FLOATS: "floats",
    ir.AttributeType.INTS: "ints", ir.AttributeType.STRINGS: "strings", ir.AttributeType.TENSORS: "tensors",
    ir.AttributeType.GRAPHS: "graphs", ir.AttributeType.TYPE_PROTO: "type_proto",
    ir.AttributeType.TYPE_PROTOS: "type_protos", ir.AttributeType.SPARSE_TENSOR: "sparse_tensor",
    ir.AttributeType.SPARSE_TENSORS: "sparse_tensors",
}


def to_text(obj) -> str:
    """``obj`` (model, graph, function, node, type or tensor) in the ONNX textual syntax."""
    if isinstance(obj, ir.Model):
        return _model(obj)
    if isinstance(obj, ir.Graph):
        return "\n".join(_graph(obj, 0))
    if isinstance(obj, ir.Function):
        return "\n".join(_function(obj))
    if isinstance(obj, ir.Node):
        return "\n".join(_node(obj, 0))
    if isinstance(obj, ir.Type):
        return _type(obj)
    if isinstance(obj, ir.Tensor):
        return _tensor(obj, with_name=True, sep=" = ")
    raise TypeError(f"to_text: cannot print a {type(obj).__name__}")


# -- lexical ----------------------------------------------------------------------------------
def _string(s) -> str:
    if isinstance(s, (bytes, bytearray, memoryview)):
        s = bytes(s).decode("utf-8", errors="replace")
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _name(s: str) -> str:
    return s if _IDENT.match(s) and s not in _KEYWORDS else _string(s)


def _names(names: Iterable[str]) -> str:
    return ", ".join(_name(n) for n in names)  # an unsupplied value (7.3.3) is written ""


def _float(v, dtype) -> str:
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    text = repr(float(v)) if dtype == np.float64 else str(np.float32(v))
    return text[:-2] if text.endswith(".0") else text


# -- types and tensors ------------------------------------------------------------------------
def _dims(shape) -> str:
    return "[" + ",".join("?" if d.value is None else (_name(d.value) if isinstance(d.value, str) else str(d.value))
                          for d in shape.dim) + "]"


def _type(t) -> str:
    """The type in the ONNX textual syntax (``float[N,3]``, ``seq(float[])``, ``map(int64, float)``),
    which this printer writes and onnx's parser reads: a different spelling from onnxruntime's
    type string (:func:`onnxkit.ir.types.type_string`, ``tensor(float)``), on purpose."""
    if isinstance(t, ir.TensorType):
        elem = tag_name(t.elem_type).lower()
        if t.shape is None:
            return f"{elem}[]"  # unknown rank; a bare ``float`` is rank 0
        return elem + (_dims(t.shape) if t.shape.dim else "")
    if isinstance(t, ir.SparseTensorType):
        inner = tag_name(t.elem_type).lower() + ("" if t.shape is None or not t.shape.dim else _dims(t.shape))
        return f"sparse_tensor({inner})"
    if isinstance(t, ir.SequenceType):
        return f"seq({_type(t.elem_type)})"
    if isinstance(t, ir.MapType):
        return f"map({tag_name(t.key_type).lower()}, {_type(t.value_type)})"
    if isinstance(t, ir.OptionalType):
        return f"optional({_type(t.elem_type)})"
    return str(t)


def _values(arr: np.ndarray, tag: int) -> list:
    et = ELEMENT_TYPES[tag]
    flat = arr.reshape(-1)
    if tag == 8:
        return [_string(v if isinstance(v, (bytes, str)) else str(v)) for v in flat]
    if et.is_complex:
        parts = np.stack([flat.real, flat.imag], axis=-1).reshape(-1)
        return [_float(v, parts.dtype) for v in parts]
    if et.is_float and arr.dtype not in (np.float32, np.float64):
        bits = np.dtype(f"u{arr.dtype.itemsize}")
        return [str(int(v)) for v in np.ascontiguousarray(flat).view(bits)]
    if arr.dtype.kind == "f":
        return [_float(v, arr.dtype) for v in flat]
    return [str(int(v)) for v in flat]


def _tensor(t: ir.Tensor, with_name: bool, sep: str = " ") -> str:
    elem = tag_name(t.data_type).lower()
    head = elem + ("[" + ",".join(str(int(d)) for d in t.dims) + "]" if t.dims else "")
    if with_name or t.name:
        head += " " + _name(t.name)
    data = ", ".join(_values(np.asarray(t.numpy()), t.data_type))
    return f"{head}{sep if with_name else ' '}{{{data}}}"


def _value_info(vi: ir.ValueInfo) -> str:
    """``type name``; the bare name where there is no type, or only an empty TypeProto (no member
    of its one-of group set, B.2.21: it says nothing, and the textual syntax has no word for it;
    it reads back as a value with no type)."""
    if vi.type is None or isinstance(vi.type, ir.UndefinedType):
        return _name(vi.name)
    return f"{_type(vi.type)} {_name(vi.name)}"


# -- attributes, nodes, graphs ----------------------------------------------------------------
def _attr_value(a: ir.Attribute, depth: int) -> str:
    T = ir.AttributeType
    v = a.value
    if a.type == T.FLOAT:
        return _float(v, np.float32)
    if a.type == T.INT:
        return str(int(v))
    if a.type == T.STRING:
        return _string(v)
    if a.type == T.TENSOR:
        return _tensor(v, with_name=False)
    if a.type == T.GRAPH:
        return "\n".join(_graph(v, depth + 1)).lstrip()
    if a.type == T.FLOATS:
        return "[" + ", ".join(_float(x, np.float32) for x in v) + "]"
    if a.type == T.INTS:
        return "[" + ", ".join(str(int(x)) for x in v) + "]"
    if a.type == T.STRINGS:
        return "[" + ", ".join(_string(x) for x in v) + "]"
    if a.type == T.TENSORS:
        return "[" + ", ".join(_tensor(x, with_name=False) for x in v) + "]"
    if a.type == T.GRAPHS:
        return "[" + ", ".join("\n".join(_graph(g, depth + 1)).lstrip() for g in v) + "]"
    if a.type == T.TYPE_PROTO:
        return _type(v)
    if a.type == T.TYPE_PROTOS:
        return "[" + ", ".join(_type(x) for x in v) + "]"
    return "[]  # sparse tensors cannot be written in the textual syntax"


def _attribute(a: ir.Attribute, depth: int) -> str:
    kind = _ATTR_TYPE.get(a.type)
    typed = f"{a.name}: {kind}" if kind else a.name
    if a.ref_attr_name:
        return f"{typed} = @{a.ref_attr_name}"
    return f"{typed} = {_attr_value(a, depth)}"


def _node(node: ir.Node, depth: int) -> list:
    pad = INDENT * (depth + 1)
    lines = [f"{pad}# {line}" for line in node.doc_string.splitlines()] if node.doc_string else []
    outs = list(node.output)
    op = (f"{node.domain}." if node.domain else "") + node.op_type + (f":{node.overload}" if node.overload else "")
    head = f"[{_name(node.name)}] " if node.name else ""
    attrs = ""
    if node.attribute:
        attrs = " <" + ", ".join(_attribute(a, depth) for a in node.attribute) + ">"
    lines.append(f"{pad}{head}{_names(outs)} = {op}{attrs} ({_names(node.input)})")
    return lines


def _body(nodes, depth: int) -> list:
    out = []
    for n in nodes:
        out.extend(_node(n, depth))
    return out


def _graph(g: ir.Graph, depth: int) -> list:
    pad = INDENT * depth
    lines = [f"{pad}# {line}" for line in g.doc_string.splitlines()] if g.doc_string else []
    lines.append(f"{pad}{_name(g.name)} ({', '.join(_value_info(v) for v in g.input)}) => "
                 f"({', '.join(_value_info(v) for v in g.output)})")
    decls = [_tensor(t, with_name=True, sep=" = ") for t in g.initializer] + [_value_info(v) for v in g.value_info]
    if decls:
        lines.append(f"{pad}{INDENT}<" + ", ".join(decls) + ">")
    for sp in g.sparse_initializer:
        name = sp.values.name if sp.values is not None else ""
        lines.append(f"{pad}{INDENT}# sparse initializer {name!r} cannot be written in the textual syntax")
    lines.append(pad + "{")
    lines.extend(_body(g.node, depth))
    lines.append(pad + "}")
    return lines


def _opsets(opsets) -> str:
    return "[" + ", ".join(f"{_string(o.domain)} : {int(o.version)}" for o in opsets) + "]"


def _function(f: ir.Function) -> list:
    header = [f"domain: {_string(f.domain)}"]
    if f.opset_import:
        header.append(f"opset_import: {_opsets(f.opset_import)}")
    if f.overload:
        header.append(f"overload: {_string(f.overload)}")
    if f.doc_string:
        header.append(f"doc_string: {_string(f.doc_string)}")
    params = [a for a in f.attribute] + [_attribute(a, 0) for a in f.attribute_proto]
    lines = ["<" + ", ".join(header) + ">",
             f"{_name(f.name)}" + (f" <{', '.join(params)}>" if params else "") +
             f" ({_names(f.input)}) => ({_names(f.output)})"]
    if f.value_info:
        lines.append(INDENT + "<" + ", ".join(_value_info(v) for v in f.value_info) + ">")
    lines.append("{")
    lines.extend(_body(f.node, 0))
    lines.append("}")
    return lines


def _model(m: ir.Model) -> str:
    header = [f"ir_version: {int(m.ir_version)}", f"opset_import: {_opsets(m.opset_import)}"]
    for field in ("producer_name", "producer_version", "domain"):
        if getattr(m, field):
            header.append(f"{field}: {_string(getattr(m, field))}")
    if m.model_version:
        header.append(f"model_version: {int(m.model_version)}")
    if m.doc_string:
        header.append(f"doc_string: {_string(m.doc_string)}")
    if m.metadata_props:
        header.append("metadata_props: [" + ", ".join(f"{_string(p.key)}: {_string(p.value)}"
                                                      for p in m.metadata_props) + "]")
    parts = ["<\n" + ",\n".join(INDENT + h for h in header) + "\n>"]
    if m.graph is not None:
        parts.append("\n".join(_graph(m.graph, 0)))
    if m.training_info:
        parts.append("# training_info cannot be written in the textual syntax")
    for f in m.functions:
        parts.append("\n".join(_function(f)))
    return "\n".join(parts) + "\n"
