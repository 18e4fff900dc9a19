"""Generate ``onnxkit_microsoft/schemas_data.json.gz`` from onnxruntime's operator registry (build-time tool).

Domains: com.microsoft and com.microsoft.nchwc, operator set 1 each (the only version
onnxruntime defines), restricted to the operators this package implements (:data:`OPERATORS`,
:data:`OTHER_DOMAINS`): a definition the package ships is one it runs; and the extensions
onnxruntime registers in ai.onnx (:data:`EXTENSIONS`).  onnxruntime publishes its schemas through
``onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema()``; this tool records,
per definition, the same fields as the ai.onnx generator
(``plugins/default_domain/tools/schema_gen_common.py``: formal parameters, arity bounds,
attributes with their defaults, type constraints), in the same data format, so
:func:`onnxkit.schema.load_schema_data` reads it.  No doc strings are kept.  Run from anywhere::

    python plugins/microsoft_domain/tools/generate_schemas.py
"""

from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMMON = os.path.join(HERE, "..", "..", "default_domain", "tools", "schema_gen_common.py")
OUTPUT = os.path.join(os.path.dirname(HERE), "onnxkit_microsoft", "schemas_data.json.gz")
DOMAIN = "com.microsoft"

#: The com.microsoft operators this package implements, by the tool that emits them.
OPERATORS = {
    # onnxruntime's graph optimizer (ORT_ENABLE_EXTENDED) and its transformers optimizer
    "optimizer": ["FusedConv", "FusedGemm", "FusedMatMul", "BiasGelu", "FastGelu", "Gelu", "QuickGelu", "BiasAdd",
                  "BiasSoftmax", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
                  "EmbedLayerNormalization", "Attention", "MultiHeadAttention", "RotaryEmbedding",
                  "GroupQueryAttention", "MatMulNBits", "DecoderMaskedMultiHeadAttention"],
    # skl2onnx's converters (text vectorizers, FeatureHasher, kNN / LOF / KernelPCA with cdist)
    "converters": ["Tokenizer", "CDist", "MurmurHash3"],
    # onnxruntime.quantization, QOperator format
    "quantization": ["QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool", "QGemm", "QuantizeLinear",
                     "DequantizeLinear", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QLinearSigmoid",
                     "QLinearLeakyRelu", "QLinearSoftmax", "QLinearConcat", "QLinearAveragePool", "QLinearWhere",
                     "DynamicQuantizeLSTM", "QLinearConv",
                     "QAttention"],
    # onnxruntime-genai's model builder and onnxruntime's LLM quantizers and optimizers
    "llm": ["GatherBlockQuantized", "MatMulBnb4", "MoE", "QMoE", "SparseAttention"],
    # onnxruntime's own Python API tests (sparse initializers)
    "sparse": ["SparseToDenseMatMul"],
}

#: Other domains onnxruntime defines that this package provides (an operator set each), with the
#: operators it implements.
OTHER_DOMAINS = {
    # onnxruntime's NCHWc layout transformer (ORT_ENABLE_ALL): its saved optimized models hold these
    "com.microsoft.nchwc": ["ReorderInput", "ReorderOutput", "Conv", "MaxPool", "AveragePool", "GlobalMaxPool",
                            "GlobalAveragePool", "Upsample"],
}

#: Extension operators (``onnxkit_extension_operators``): definitions onnxruntime registers in a
#: domain this package does not own, by domain ('' = ai.onnx), only those ONNX itself does not
#: define at that since_version.  Recorded with the com.microsoft ones; the data's ``domains``
#: range names this package's domains only, so they make no operator set.
EXTENSIONS = {
    # onnxruntime's transformers optimizer (T5) fuses the root-mean-square norm into this; its graph
    # optimizer's LayerNormFusion writes LayerNormalization-1 in a graph importing ai.onnx < 17
    "": ["SimplifiedLayerNormalization", "LayerNormalization"],
}


def _common():
    spec = importlib.util.spec_from_file_location("schema_gen_common", os.path.normpath(COMMON))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _onnx_defines(domain: str, name: str, since_version: int) -> bool:
    """True if ONNX itself defines ``name`` of ``domain`` at ``since_version`` (not an extension)."""
    from onnx import defs

    return any(s.since_version == since_version for s in defs.get_all_schemas_with_history()
               if s.domain == domain and s.name == name)


def _param(p) -> list:
    # onnxruntime does not expose min_arity; a variadic parameter of its registry takes at least one
    option = p.option.name.lower()
    return [p.name, p.typeStr, option, bool(p.isHomogeneous), 1 if option == "variadic" else 0]


def definition_record(common, schema) -> dict:
    """One onnxruntime schema as a JSON-able record (the fields of ``schema_gen_common.definition_record``)."""
    from onnx import AttributeProto

    rec = {"domain": schema.domain, "name": schema.name, "since_version": int(schema.since_version)}
    if schema.deprecated:
        rec["deprecated"] = True
    if schema.support_level.name != "COMMON":
        rec["support_level"] = schema.support_level.name.lower()
    rec["inputs"] = [_param(p) for p in schema.inputs]
    rec["outputs"] = [_param(p) for p in schema.outputs]
    rec["min_input"], rec["max_input"] = int(schema.min_input), int(schema.max_input)
    rec["min_output"], rec["max_output"] = int(schema.min_output), int(schema.max_output)
    rows = []
    for name in sorted(schema.attributes):
        a = schema.attributes[name]
        row = [name, int(a.type.value), bool(a.required)]
        raw = a._default_value  # a serialized AttributeProto, empty where there is no default
        if raw:
            proto = AttributeProto()
            proto.ParseFromString(raw)
            row.append(common.default_to_json(int(a.type.value), proto))
        rows.append(row)
    if rows:
        rec["attributes"] = rows
    if schema.type_constraints:
        rec["type_constraints"] = [[tc.type_param_str, list(tc.allowed_type_strs)] for tc in schema.type_constraints]
    return rec


def build_document(common) -> dict:
    import onnxruntime
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_c

    wanted = {name for names in OPERATORS.values() for name in names}
    all_schemas = ort_c.get_all_operator_schema()
    schemas = [s for s in all_schemas if s.domain == DOMAIN and s.name in wanted]
    missing = wanted - {s.name for s in schemas}
    if missing:
        raise SystemExit(f"onnxruntime {onnxruntime.__version__} defines no {DOMAIN} {sorted(missing)}")
    for domain, names in OTHER_DOMAINS.items():
        found = [s for s in all_schemas if s.domain == domain and s.name in names]
        if {s.name for s in found} != set(names):
            raise SystemExit(f"onnxruntime {onnxruntime.__version__} defines no {domain} "
                             f"{sorted(set(names) - {s.name for s in found})}")
        schemas += found
    for domain, names in EXTENSIONS.items():
        found = [s for s in all_schemas if s.domain == domain and s.name in names
                 and not _onnx_defines(domain, s.name, int(s.since_version))]
        if {s.name for s in found} != set(names):
            raise SystemExit(f"onnxruntime {onnxruntime.__version__} defines no {domain or 'ai.onnx'} "
                             f"{sorted(set(names) - {s.name for s in found})}")
        schemas += found
    schemas.sort(key=lambda s: (s.domain, s.name, s.since_version))
    return {
        "format": common.FORMAT,
        "source": f"onnxruntime {onnxruntime.__version__}",
        "domains": {d: [1, max(int(s.since_version) for s in schemas if s.domain == d)]
                    for d in (DOMAIN, *OTHER_DOMAINS)},
        "definitions": [definition_record(common, s) for s in schemas],
    }


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=f"Generate {OUTPUT} from onnxruntime's {DOMAIN} schemas")
    ap.add_argument("-o", "--output", default=OUTPUT)
    args = ap.parse_args(argv)
    common = _common()
    doc = build_document(common)
    common.write_document(doc, args.output)
    print(f"wrote {args.output} ({os.path.getsize(args.output)} bytes) from {doc['source']}", file=sys.stderr)
    print(common.summary(doc), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
