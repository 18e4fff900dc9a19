"""Shared part of the schema generators: ``onnx.defs`` -> onnxkit's schema data.

Build-time only (it imports ``onnx``); the runtime reads the result with
:func:`onnxkit.schema.load_schema_data`.  Used by
``plugins/default_domain/tools/generate_schemas.py`` and, by path,
``plugins/ml_domain/tools/generate_schemas.py``.

Per definition it records domain, name, since_version, deprecation, support level, the
formal inputs/outputs (name, type_str, option, is_homogeneous, min_arity), the input and
output count bounds, attributes (name, type, required, default as plain JSON), type
constraints, every context-independent function body (FunctionProto octets, doc strings
removed, base64) keyed by the domain version it applies from, and whether a
context-dependent body exists (and for which versions).  No doc strings are kept.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import sys

import onnx
import onnx.defs
from onnx import AttributeProto

from onnxkit.schema import encode_schema_document

FORMAT = "onnxkit-schemas/2"

_OPTION = {"Single": "single", "Optional": "optional", "Variadic": "variadic"}

# AttributeProto types whose value is a message, with that message's name.
_MESSAGE_KIND = {
    AttributeProto.TENSOR: ("t", "TensorProto"),
    AttributeProto.GRAPH: ("g", "GraphProto"),
    AttributeProto.SPARSE_TENSOR: ("sparse_tensor", "SparseTensorProto"),
    AttributeProto.TYPE_PROTO: ("tp", "TypeProto"),
    AttributeProto.TENSORS: ("tensors", "TensorProto"),
    AttributeProto.GRAPHS: ("graphs", "GraphProto"),
    AttributeProto.SPARSE_TENSORS: ("sparse_tensors", "SparseTensorProto"),
    AttributeProto.TYPE_PROTOS: ("type_protos", "TypeProto"),
}


def strip_doc_strings(message) -> None:
    """Clear every ``doc_string`` field of a protobuf message and of all messages inside it."""
    for field, value in message.ListFields():
        if field.name == "doc_string":
            message.ClearField("doc_string")
        elif field.type == field.TYPE_MESSAGE:
            repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
            if repeated:
                for v in value:
                    strip_doc_strings(v)
            else:
                strip_doc_strings(value)


def _b64_message(msg) -> dict:
    return {"message": type(msg).DESCRIPTOR.name,
            "b64": base64.b64encode(msg.SerializeToString(deterministic=True)).decode("ascii")}


def default_to_json(attr_type: int, proto: AttributeProto):
    """The default value of an attribute as plain JSON (see :func:`onnxkit.schema.load_schema_data`)."""
    if proto.type != attr_type:
        raise ValueError(f"default of attribute {proto.name!r} has type {proto.type}, declared {attr_type}")
    t = proto.type
    if t == AttributeProto.FLOAT:
        return float(proto.f)
    if t == AttributeProto.INT:
        return int(proto.i)
    if t == AttributeProto.STRING:
        return proto.s.decode("latin-1")
    if t == AttributeProto.FLOATS:
        return [float(v) for v in proto.floats]
    if t == AttributeProto.INTS:
        return [int(v) for v in proto.ints]
    if t == AttributeProto.STRINGS:
        return [s.decode("latin-1") for s in proto.strings]
    if t in _MESSAGE_KIND:
        field, _ = _MESSAGE_KIND[t]
        value = getattr(proto, field)
        if t in (AttributeProto.TENSORS, AttributeProto.GRAPHS, AttributeProto.SPARSE_TENSORS, AttributeProto.TYPE_PROTOS):
            return [_b64_message(v) for v in value]
        return _b64_message(value)
    raise ValueError(f"attribute {proto.name!r}: unsupported default type {t}")


def has_default(proto: AttributeProto) -> bool:
    """onnx reports "no default" as an empty AttributeProto (no name, type UNDEFINED)."""
    return proto.type != AttributeProto.UNDEFINED or bool(proto.name)


def _param(p) -> list:
    return [p.name, p.type_str, _OPTION[p.option.name], bool(p.is_homogeneous), int(p.min_arity)]


def function_bodies(schema) -> dict:
    """``{str(version): base64}`` of every context-independent body, doc strings removed."""
    out = {}
    for v in schema.function_opset_versions:
        data = schema.get_function_with_opset_version(v)
        if not data:
            raise ValueError(f"{schema.domain}::{schema.name}-{schema.since_version}: no body at listed version {v}")
        fp = onnx.FunctionProto()
        fp.ParseFromString(data)
        strip_doc_strings(fp)
        out[str(v)] = base64.b64encode(fp.SerializeToString(deterministic=True)).decode("ascii")
    return out


def definition_record(schema) -> dict:
    """One ``onnx.defs.OpSchema`` as a JSON-able record."""
    rec = {
        "domain": schema.domain,
        "name": schema.name,
        "since_version": int(schema.since_version),
    }
    if schema.deprecated:
        rec["deprecated"] = True
    if schema.support_level != onnx.defs.OpSchema.SupportType.COMMON:
        rec["support_level"] = schema.support_level.name.lower()
    rec["inputs"] = [_param(p) for p in schema.inputs]
    rec["outputs"] = [_param(p) for p in schema.outputs]
    rec["min_input"], rec["max_input"] = int(schema.min_input), int(schema.max_input)
    rec["min_output"], rec["max_output"] = int(schema.min_output), int(schema.max_output)
    attrs = []
    for name in sorted(schema.attributes):
        a = schema.attributes[name]
        row = [a.name, int(a.type.value), bool(a.required)]
        if has_default(a.default_value):
            row.append(default_to_json(int(a.type.value), a.default_value))
        attrs.append(row)
    if attrs:
        rec["attributes"] = attrs
    if schema.type_constraints:
        rec["type_constraints"] = [[tc.type_param_str, list(tc.allowed_type_strs)] for tc in schema.type_constraints]
    if schema.has_function:
        rec["function_bodies"] = function_bodies(schema)
    if schema.has_context_dependent_function:
        rec["has_context_dependent_function"] = True
        rec["context_dependent_function_versions"] = [int(v) for v in schema.context_dependent_function_opset_versions]
    return rec


def domain_versions(domains) -> dict:
    """``{domain: [first, last]}`` from onnx's registry, for the requested domains."""
    ranges = onnx.defs.C.schema_version_map()
    out = {}
    for d in domains:
        if d not in ranges:
            raise ValueError(f"onnx {onnx.__version__} knows no domain {d!r}")
        first, last = ranges[d]
        out[d] = [int(first), int(last)]
    return out


def build_document(domains) -> dict:
    """The whole data document for ``domains`` ('' = ai.onnx)."""
    wanted = set(domains)
    schemas = [s for s in onnx.defs.get_all_schemas_with_history() if s.domain in wanted]
    schemas.sort(key=lambda s: (s.domain, s.name, s.since_version))
    return {
        "format": FORMAT,
        "source": f"onnx {onnx.__version__}",
        "domains": domain_versions(sorted(wanted)),
        "definitions": [definition_record(s) for s in schemas],
    }


def write_document(doc: dict, path: str) -> None:
    """Write the document gzip'd in format /2 (:func:`onnxkit.schema.encode_schema_document`: a
    header line, then one definition per line), reproducibly (no timestamp in the gzip header)."""
    raw = encode_schema_document(doc)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(gzip.compress(raw, compresslevel=9, mtime=0))
    os.replace(tmp, path)


def summary(doc: dict) -> str:
    lines = []
    for d, (first, last) in doc["domains"].items():
        defs = [e for e in doc["definitions"] if e["domain"] == d]
        names = {e["name"] for e in defs}
        lines.append(f"{d or 'ai.onnx'}: versions {first}..{last}, {len(names)} operators, {len(defs)} definitions, "
                     f"{sum(1 for e in defs if 'function_bodies' in e)} with function bodies, "
                     f"{sum(1 for e in defs if e.get('has_context_dependent_function'))} context-dependent")
    return "\n".join(lines)


def main(domains, out_path: str, argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=f"Generate {out_path} from onnx.defs")
    ap.add_argument("-o", "--output", default=out_path)
    args = ap.parse_args(argv)
    doc = build_document(domains)
    write_document(doc, args.output)
    print(f"wrote {args.output} ({os.path.getsize(args.output)} bytes) from onnx {onnx.__version__}", file=sys.stderr)
    print(summary(doc), file=sys.stderr)
    return 0
