"""The catalogue of diagnostic codes of the validator (Clause 10.5): one row per code.

Each code is stable, kebab-case, and has exactly one severity and one clause.  Clause 10.5
leaves the classification to the implementation; onnxkit's position (the validation policy):

* an *error* means the model's result is undefined or cannot be computed: the conditions of
  Clauses 10.2-10.4, bad encodings, type-constraint violations, unknown operators...  A
  session refuses such a model;
* a *warning* means a condition that cannot change the result.  It is either a
  *violation* (a SHALL of Part 1 is broken, e.g. a stale declared shape or a duplicate node
  name: ``violation=True``) or advisory (the model conforms but relies on behaviour the
  document leaves open, or the consumer cannot check something, e.g. a domain no plugin
  provides).  A session runs the model and reports warnings; ``strict=True`` (Clause 8.6 to
  the letter) refuses on errors and violations alike.

:data:`RECLASSIFIED` lists the codes whose condition breaks a SHALL yet is a warning, each
with the reason (the conformance statement's validation policy, docs/conformance.md, states them).  :func:`emit` in
:mod:`onnxkit.checker.context` takes the severity and clause from here, so a code never
changes meaning between call sites.

docs/diagnostics.md, the table of codes, is generated from :data:`CODES`: ``python -c "from
onnxkit.checker.codes import markdown; print(markdown())"`` prints it as Markdown.
"""

from __future__ import annotations

from onnxkit import record_methods, records

E, W = "error", "warning"


#: A warning that is a violation of a SHALL (refused under ``strict=True``).
V = "violation"


@records.frozen
class Code:
    """One code: ``severity`` 'error' or 'warning'; ``violation``: refused under strict (every error is)."""

    code: str
    clause: str
    severity: str
    meaning: str
    violation: bool = True
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH

    @property
    def strict(self) -> str:
        """What ``strict=True`` does with the condition: 'refused' or 'reported'."""
        return "refused" if self.violation else "reported"


def _c(code, clause, severity, meaning):
    if severity == V:
        return Code(code, clause, W, meaning, True)
    return Code(code, clause, severity, meaning, severity == E)


_ROWS = [
    # -- encoding and the model record (Clauses 12, 14, Annex B) --------------------------
    _c("decode-error", "12", E, "the octets are not a valid encoding of a ModelProto (offset and message path given)"),
    _c("limit-exceeded", "12.5, 15.4", E, "a documented resource limit of onnxkit.limits is exceeded (the model is refused)"),
    _c("ir-version-missing", "5.3.1, 14.1", E, "ModelProto.ir_version is absent; the model is checked against IR version 14"),
    _c("ir-version-invalid", "14.2", E, "ir_version is 0 (_START_VERSION) or negative, not an IR version"),
    _c("ir-version-newer", "14.1.2", W, "ir_version is newer than 14, the newest this validator knows; checked against 14"),
    _c("ir-version-feature", "14.1.2, 14.2", V, "the model uses a field or element type introduced after its declared IR version"),
    _c("graph-missing", "5.3.1", E, "the model has no top-level graph"),
    _c("mandatory-field-missing", "Annex B.1", E, "a field Annex B marks mandatory (at the model's IR version) is absent"),
    _c("deprecated-field", "Annex B.1", V, "a field Annex B marks deprecated is present (a consumer ignores it)"),
    _c("reserved-field", "12.6", E, "a tag Annex B records as reserved is used"),
    # -- operator set imports (5.3.2, 10.4) -------------------------------------------------
    _c("opset-import-missing", "5.3.1, 5.3.2", E, "the model (IR version >= 3) declares no operator set import"),
    _c("duplicate-opset-import", "5.3.2", E, "one domain is imported at two different versions ('' and 'ai.onnx' are the same domain)"),
    _c("repeated-opset-import", "5.3.2", W, "one domain is imported twice at the same version (harmless; written by some exporters)"),
    _c("invalid-opset-version", "5.3.2", E, "an operator set version is not a positive integer"),
    _c("unknown-domain", "5.3.2, 16.1", W, "no installed plugin provides this domain: its nodes cannot be checked"),
    _c("unknown-opset-version", "5.3.2, 14.4", W, "no installed plugin provides this version of a known domain: its nodes cannot be checked"),
    _c("domain-not-imported", "5.3.2, 10.4", E, "a node (or function) uses a domain the model does not import"),
    _c("domain-implicitly-imported", "5.3.2", V, "a node uses a domain the model does not import, one onnxruntime imports "
       "implicitly (com.microsoft, ai.onnx.ml...): evaluated at the version onnxruntime assumes (named)"),
    _c("unknown-operator", "10.2, 10.4", E, "the operator is not present in the imported version of its domain"),
    _c("extension-operator", "5.3.2", V, "the imported version of its domain has no such operator; it binds to an extension "
       "another plugin adds to that domain (named)"),
    _c("deprecated-operator", "14.5", W, "the operator is deprecated at the imported version (still to be evaluated)"),
    _c("empty-op-type", "7.3.1", E, "a node does not name the operator it invokes"),
    # -- attributes (7.4, 10.4, Annex B.2.2) -------------------------------------------------
    _c("duplicate-attribute", "7.4", E, "two attributes of one node (or function) have the same name"),
    _c("unknown-attribute", "10.4", V, "an attribute that is not defined for the operator (or function); no kernel reads it"),
    _c("missing-required-attribute", "10.4", E, "a required attribute of the operator is absent"),
    _c("attribute-wrong-type", "7.3.1", E, "the attribute's type is not the type the operator definition gives it"),
    _c("attribute-form-accepted", "7.3.1", V, "the attribute's type is not the definition's but a form onnxruntime reads "
       "(Constant's value holding a sparse tensor): read as onnxruntime reads it (densified)"),
    _c("sparse-constant-output", "10.3", V, "a Constant holding a sparse value has its output declared sparse_tensor "
       "of that element type (Constant's T admits tensors only): read as onnxruntime reads it, a sparse initializer"),
    _c("attribute-value-beyond-definition", "7.3.1, 14.3", V, "an attribute value the node's definition does not admit, "
       "which a later version's does; the operator's plugin declares it computed as that version defines it"),
    _c("attribute-type-mismatch", "Annex B.2.2", E, "the attribute's type field does not match the value field present, or several value fields are present"),
    _c("attribute-value-missing", "Annex B.2.2", E, "the attribute's type is given but the field carrying that type's value is absent"),
    _c("attribute-type-invalid", "Annex B.2.2", E, "the attribute's type is UNDEFINED or not a value of Table B.4"),
    _c("ref-attr-outside-function", "8.4, Annex B.2.2", E, "ref_attr_name is used outside a function body"),
    _c("unresolved-attribute-reference", "8.4", E, "ref_attr_name names no attribute parameter of the enclosing function"),
    # -- node signature (7.3) ---------------------------------------------------------------
    _c("input-arity", "7.3.1, 7.3.2", E, "the node has more or fewer inputs than the operator admits"),
    _c("output-arity", "7.3.1, 7.3.2", E, "the node has more or fewer outputs than the operator admits"),
    _c("required-input-unsupplied", "7.3.3", E, "an empty input name in a position the operator does not mark optional"),
    _c("required-output-unsupplied", "7.3.3", E, "an empty output name in a position the operator does not mark optional"),
    # -- graph structure (5.4, 7, 10.2) ------------------------------------------------------
    _c("graph-name-missing", "7.1", V, "a graph has no name"),
    _c("empty-name", "5.4.1", E, "an empty name where a name is required (not an unsupplied operator input or output)"),
    _c("undefined-value", "5.4.2, 7.5, 10.2", E, "a value is used but defined nowhere (graph, enclosing scopes)"),
    _c("duplicate-definition", "5.4.2, 7.5, 10.2", E, "a value is defined more than once in one graph (SSA)"),
    _c("duplicate-initializer", "5.4.1", E, "two initializers of one graph have the same name"),
    _c("duplicate-node-name", "5.4.1", V, "two nodes of one graph have the same (non-empty) name"),
    _c("duplicate-value-info", "5.4.1", V, "two value_info entries of one graph have the same name"),
    _c("graph-cycle", "7.5, 10.2", E, "the nodes of a graph form a cycle"),
    _c("not-topologically-sorted", "7.5", V, "a node uses a value produced by a later node (the graph is acyclic)"),
    _c("undefined-output", "7.1, 5.4.2", E, "a graph output names a value the graph does not define"),
    _c("shadowed-name", "5.4.3", E, "a subgraph defines a name already visible from an enclosing graph"),
    _c("shadowed-node-output", "5.4.3", V, "a subgraph defines a name that is an output of the node carrying it (or an enclosing subgraph)"),
    _c("subgraph-cycle", "5.4.3, 7.1", E, "a graph is a subgraph of itself, directly or through other graphs (an IR built in Python)"),
    _c("subgraph-input-initializer", "7.2", E, "(IR >= 4) a subgraph name is both an input the operator supplies and an initializer"),
    _c("initializer-not-input", "7.2, Annex B (IR <= 3)", V, "(IR <= 3) an initializer is not also a graph input"),
    # -- types (Clause 6) ---------------------------------------------------------------------
    _c("missing-type", "6.5.1, 7.1", V, "an input or output of the top-level graph has no type"),
    _c("missing-shape", "6.5.1, 7.1", V, "a tensor input or output of the top-level graph has no shape (rank unknown)"),
    _c("type-kind-missing", "6.1, Annex B.2.21", V, "a TypeProto sets none of tensor/sequence/map/optional/sparse/opaque; read as undeclared"),
    _c("type-kind-multiple", "Annex B.2.21", E, "a TypeProto sets more than one of tensor/sequence/map/optional/sparse/opaque"),
    _c("invalid-elem-type", "6.2", E, "an element type tag is 0 (UNDEFINED) or not listed in Table 5"),
    _c("invalid-map-key", "6.8.2", E, "a map key type is not an integral type or STRING"),
    _c("invalid-optional-elem", "6.8.3", E, "an optional type's element is not a tensor, sparse tensor, sequence or map type"),
    _c("opaque-name-missing", "6.8.4", E, "an opaque type has no name"),
    _c("negative-extent", "6.3.4, 6.5.1", E, "a tensor's dims entry is negative"),
    _c("negative-dim-value", "6.5.1", V, "a type's dimension has a negative dim_value (-1 for a dynamic extent); read as unknown"),
    _c("type-mismatch", "7.1, 9.4", E, "two statements of one value's type disagree (kind or element type)"),
    _c("shape-mismatch", "6.5, 9.4, 10.3", V, "two statements of one value's shape disagree (ranks or static extents)"),
    # -- inference (Clause 9), run on a structurally valid model ------------------------------
    _c("inferred-type-mismatch", "9.4", E, "the type inference derives contradicts the type the model declares"),
    _c("inferred-shape-mismatch", "9.4", V, "the shape inference derives contradicts the shape the model declares"),
    _c("inference-error", "9.4", E, "a node's input types or shapes contradict its operator's definition"),
    _c("no-inference-function", "9.2", W, "a bound definition has no inference function: its outputs stay unknown"),
    _c("inference-function-failed", "9.4", W, "an inference function failed; its outputs stay unknown"),
    _c("broadcast-mismatch", "6.6, 10.3", E, "the static shapes of an elementwise operator's inputs do not broadcast"),
    _c("type-constraint-violation", "10.3", E, "an input or output type is not admitted by the operator's type constraint"),
    _c("type-variable-mismatch", "10.3", E, "one type variable of the operator is bound to two different types in one node"),
    # -- tensors (6.3.4, Annex B.2.16, B.2.18) -------------------------------------------------
    _c("tensor-storage-conflict", "6.3.4", E, "a tensor has both raw and typed storage (or two typed fields)"),
    _c("string-raw-data", "6.3.4, Annex B.2.16", E, "a STRING tensor carries raw_data"),
    _c("tensor-wrong-field", "Annex B.2.16", E, "typed storage in a field that does not carry the tensor's element type"),
    _c("tensor-size-mismatch", "6.3.4", E, "the amount of stored data does not match dims and the element type"),
    _c("nonzero-padding", "6.3.4", V, "padding bits of narrow-type storage are not zero"),
    _c("invalid-data-location", "13.1, Annex B.2.16", E, "data_location is neither DEFAULT (0) nor EXTERNAL (1)"),
    _c("tensor-segment", "Annex B.2.16", W, "a tensor is segmented (TensorProto.segment); reassembly is left open"),
    _c("sparse-tensor-invalid", "Annex B.2.18", E, "a sparse tensor lacks values/indices or their shapes are inconsistent"),
    _c("sparse-index-out-of-range", "Annex B.2.18", E, "a sparse tensor index lies outside its dims"),
    # -- external data (13, 15.3) ----------------------------------------------------------------
    _c("external-with-embedded-data", "13.1", E, "an EXTERNAL tensor also carries contents in the model file"),
    _c("external-data-not-external", "13.1", E, "a tensor has external_data entries but its data_location is DEFAULT"),
    _c("external-unknown-key", "13.2", E, "an external reference carries a key not in Table 11"),
    _c("external-duplicate-key", "13.2", E, "an external reference repeats a key"),
    _c("external-missing-location", "13.2", E, "an external reference has no location"),
    _c("external-invalid-location", "13.2", E, "the location is malformed (NUL, names no file)"),
    _c("external-absolute-path", "13.2, 15.3", E, "the location is an absolute path"),
    _c("external-path-traversal", "13.2, 15.3", E, "the location contains a parent-directory component"),
    _c("external-bad-offset", "13.2", E, "offset is not a non-negative decimal integer"),
    _c("external-bad-length", "13.2", E, "length is not a non-negative decimal integer"),
    _c("external-bad-checksum", "13.3", E, "checksum is not a SHA-1 digest"),
    _c("external-unsupported-type", "13.1", E, "a STRING (or undefined) tensor cannot be stored externally"),
    _c("external-size-mismatch", "6.3.4, 13.1", E, "length (or the file) does not match the octets dims need"),
    _c("external-unresolved", "13.2, 15.3", E, "(open_external) the reference cannot be resolved; message gives onnxkit.storage's reason code"),
    _c("external-short-file", "13.2", E, "(open_external) the file is shorter than offset + length"),
    _c("external-checksum-mismatch", "13.3", E, "(open_external) the file's SHA-1 does not match the checksum"),
    # -- functions (8.4) ----------------------------------------------------------------------------
    _c("duplicate-function", "8.4", E, "two model-local functions have the same (domain, name, overload)"),
    _c("function-recursion", "8.4", E, "a model-local function calls itself, directly or through other functions"),
    _c("function-domain-not-imported", "8.4, 5.3.2", E, "a model-local function's domain is not imported by the model"),
    _c("function-opset-mismatch", "8.4", W, "a function imports a domain at a version other than the model's"),
    # -- metadata, devices, annotations (5.5, Annex B) ---------------------------------------------
    _c("duplicate-metadata-key", "5.5", V, "two metadata_props entries of one message have the same key"),
    _c("invalid-metadata-value", "5.5", W, "an Image.* metadata value is not one of those Table 4 lists"),
    _c("duplicate-device-configuration", "Annex B.2.12", W, "two device configurations of the model have the same name"),
    _c("device-count-mismatch", "Annex B.2.12", W, "num_devices differs from the number of devices listed"),
    _c("unknown-device-configuration", "Annex B.2.6", W, "a node's device configuration names no configuration of the model"),
    _c("unknown-sharding-tensor", "Annex B.2.7", W, "a sharding spec names a value that is not an input or output of its node"),
    _c("unknown-annotation-tensor", "Annex B.2.14", W, "a quantization annotation names a value the graph does not define"),
    _c("training-binding-invalid", "Annex B.2.10", W, "a training_info binding names no initializer or no output of its graph"),
]

#: The codes whose condition breaks a SHALL of Part 1 yet cannot change the result: error -> warning
#: (Clause 10.5 leaves severities open).  Each is refused under ``strict=True``.  The validation
#: policy (docs/conformance.md) has one line per entry.
RECLASSIFIED: dict = {
    "graph-name-missing": "a graph's name is never referenced by evaluation (7.1)",
    "duplicate-node-name": "a node name is diagnostic only (7.3.1); nodes are bound by position",
    "duplicate-value-info": "value_info only annotates; contradicting entries are reported as type-mismatch",
    "initializer-not-input": "(IR <= 3) the initializer is read as a constant, as IR version 4 and later read it",
    "missing-type": "an input's fed value, an output's computed value is what evaluation uses; the feed is not checked",
    "missing-shape": "the rank is not stated, so the feed's rank is not checked; evaluation is unchanged",
    "type-kind-missing": "an empty TypeProto (spox, torch exporter inside nested If) is read as an absent type",
    "negative-dim-value": "dim_value -1 (paddle2onnx) is read as an unknown extent, in the checker and the feed check",
    "shape-mismatch": "a stale declared shape (torch exporter); operators compute from their inputs, not from declarations",
    "inferred-shape-mismatch": "as shape-mismatch; a session checks declared against computed outputs at run time",
    "shadowed-node-output": "that output does not exist while the subgraph runs, so no use is ambiguous (onnx.checker "
                            "and onnxruntime accept it)",
    "nonzero-padding": "the padding bits of narrow-type storage are not read",
    "duplicate-metadata-key": "metadata SHALL NOT affect the result (5.5)",
    "extension-operator": "the node is evaluated by the named plugin's extension (onnxruntime's operators in "
                          "ai.onnx), checked against that definition",
    "unknown-attribute": "no kernel reads an attribute its operator (or function) does not define "
                         "(onnxsim's onnxsim_transient_constant); a defined attribute of the wrong type stays "
                         "an error (attribute-wrong-type)",
    "domain-implicitly-imported": "onnxruntime imports every domain it registers that a model leaves out, at its "
                                  "newest version there (onnxkit.checker.readings.IMPLICIT_IMPORTS: com.microsoft "
                                  "1, ai.onnx.ml 5); the node is evaluated at that version, as onnxruntime does",
    "attribute-form-accepted": "onnxruntime reads Constant's attribute by its type, so a sparse tensor under value "
                               "is the sparse_value form; it is densified before planning, as onnxruntime does",
    "sparse-constant-output": "onnxruntime makes an initializer of every Constant, a sparse one of a sparse value; "
                              "the value is the one the Constant denotes, returned as onnxruntime returns a sparse "
                              "initializer: COO, its nonzero elements with linear indices",
    "attribute-value-beyond-definition": "the kernel computes the value as the later definition defines it, as "
                                         "onnxruntime does (ScatterElements / ScatterND reduction min and max at "
                                         "16, defined from 18); declared by the operator's plugin (accepts_beyond)",
    "not-topologically-sorted": "evaluation follows the data flow of an acyclic graph, not the listed order; the "
                                "nodes are evaluated in a topological order, as onnxruntime does (graph-cycle "
                                "stays an error)",
}

#: The audit of the errors (the validation policy's rule: a violation no kernel reads cannot change
#: the result, so it is a warning): every code that stays an error, grouped by why its condition
#: can change the result or leaves it undefined.  Each code is in exactly one group (asserted by
#: tests/checker/test_check_cmd.py); docs/diagnostics.md prints the groups.
KEPT_ERRORS: tuple = (
    ("no model to evaluate: the octets, the record or a documented limit fail (onnxruntime refuses too)",
     ("decode-error", "limit-exceeded", "ir-version-missing", "ir-version-invalid", "graph-missing",
      "mandatory-field-missing", "reserved-field", "opset-import-missing", "invalid-opset-version")),
    ("no definition to bind the node to, or two (the result depends on which); a domain onnxruntime imports "
     "implicitly is the warning domain-implicitly-imported instead; onnxruntime refuses these too (a function of "
     "a domain not imported: 'No opset import for domain'), but for a domain imported at two versions, where it "
     "takes the last: a choice the result depends on, which onnxkit does not make silently",
     ("duplicate-opset-import", "domain-not-imported", "unknown-operator", "empty-op-type", "duplicate-function",
      "function-recursion", "function-domain-not-imported")),
    ("kernels read the attribute: a value of another type, two values, none, or a reference to nothing change "
     "or undefine what they compute (Constant's sparse value is the one form read otherwise: "
     "attribute-form-accepted)",
     ("duplicate-attribute", "missing-required-attribute", "attribute-wrong-type", "attribute-type-mismatch",
      "attribute-value-missing", "attribute-type-invalid", "ref-attr-outside-function",
      "unresolved-attribute-reference")),
    ("the node's values do not match its signature: a kernel would read a value that does not exist or drop one "
     "the definition computes; onnxruntime refuses an empty required output too",
     ("input-arity", "output-arity", "required-input-unsupplied", "required-output-unsupplied")),
    ("a name means no value or two values (Clause 5.4): which one a use reads is what the SHALL settles; "
     "onnxruntime refuses a subgraph redefining an outer name (SSA) too; a cycle has no evaluation order "
     "(an order that is merely not topological is the warning not-topologically-sorted)",
     ("empty-name", "undefined-value", "duplicate-definition", "duplicate-initializer", "graph-cycle",
      "undefined-output", "shadowed-name", "subgraph-cycle", "subgraph-input-initializer")),
    ("a type that is not a type, or two element types for one value: kernels, the feed check and the output "
     "check read element types (a stale shape is the warning shape-mismatch)",
     ("type-kind-multiple", "invalid-elem-type", "invalid-map-key", "invalid-optional-elem", "opaque-name-missing",
      "negative-extent", "type-mismatch", "inferred-type-mismatch")),
    ("the operator is not defined for these types or shapes: no kernel result is defined (onnxruntime refuses)",
     ("inference-error", "broadcast-mismatch", "type-constraint-violation", "type-variable-mismatch")),
    ("the stored value is ambiguous or cannot be read: the octets a kernel gets would differ or be missing",
     ("tensor-storage-conflict", "string-raw-data", "tensor-wrong-field", "tensor-size-mismatch",
      "invalid-data-location", "sparse-tensor-invalid", "sparse-index-out-of-range", "external-with-embedded-data",
      "external-data-not-external", "external-unknown-key", "external-duplicate-key", "external-missing-location",
      "external-invalid-location", "external-absolute-path", "external-path-traversal", "external-bad-offset",
      "external-bad-length", "external-unsupported-type", "external-size-mismatch", "external-unresolved",
      "external-short-file", "external-checksum-mismatch")),
    ("refused when the model is loaded (onnxkit.external_read parses every reference), so a session never gets "
     "to evaluate it; and the file's integrity cannot be verified (13.3)",
     ("external-bad-checksum",)),
)

#: code -> :class:`Code`.
CODES: dict[str, Code] = {r.code: r for r in _ROWS}
assert len(CODES) == len(_ROWS), "duplicate code in the catalogue"
assert all(CODES[c].severity == W and CODES[c].violation for c in RECLASSIFIED)

#: ExternalRefError codes of onnxkit.external / onnxkit.storage that keep their own checker code.
EXTERNAL_OWN = {"unknown-key", "duplicate-key", "missing-location", "invalid-location", "absolute-path",
                "path-traversal", "bad-offset", "bad-length", "bad-checksum", "unsupported-type", "size-mismatch",
                "short-file", "checksum-mismatch", "embedded-and-external"}


def external_code(ref_code: str) -> str:
    """The checker code for an :class:`onnxkit.storage.ExternalRefError` code."""
    if ref_code == "embedded-and-external":
        return "external-with-embedded-data"
    if ref_code == "bad-dims":
        return "negative-extent"
    if ref_code in EXTERNAL_OWN:
        return f"external-{ref_code}"
    return "external-unresolved"


def markdown() -> str:
    """The catalogue as a Markdown table (docs/diagnostics.md): code, clause, severity, under strict, meaning."""
    lines = ["| code | clause | severity | strict | meaning |", "|---|---|---|---|---|"]
    lines += [f"| `{r.code}` | {r.clause} | {r.severity} | {r.strict} | {r.meaning} |" for r in _ROWS]
    return "\n".join(lines)


def document() -> str:
    """The whole of docs/diagnostics.md: the policy, the reclassified codes with reasons, the table."""
    head = [
        "# Diagnostic codes of `onnxkit check` (Clause 10)",
        "",
        "Generated by `python -c \"from onnxkit.checker.codes import document; print(document(), end='')\"` "
        "(from `onnxkit/checker/codes.py`); a test keeps this file equal to it.",
        "",
        "Each code has one severity and one clause (Clause 10.5 leaves the classification to the implementation).",
        "An *error* means the model's result is undefined or cannot be computed: a session refuses the model.",
        "A *warning* means a condition that cannot change the result: a session runs the model and reports it once",
        "(Python `warnings`, category `onnxkit.ConformanceWarning`, and the `onnxkit.check` logger).",
        "The *strict* column says what `InferenceSession(model, strict=True)`, `onnxkit run --strict` and",
        "`onnxkit check --strict` do: every error and every warning that breaks a SHALL of Part 1 is *refused*",
        "(Clause 8.6 to the letter); advisory warnings (the model conforms but relies on behaviour left open, or",
        "something cannot be checked here) are only *reported*.",
        "",
        "## Codes that break a SHALL yet are warnings",
        "",
    ]
    head += [f"- `{c}`: {why}." for c, why in RECLASSIFIED.items()]
    head += ["", "## Codes that stay errors, and why", "",
             "Audited against the validation policy's rule (a violation no kernel reads cannot change the result, "
             "so it is a", "warning): each error below can change the result or leaves it undefined.", ""]
    head += [f"- {why}: " + ", ".join(f"`{c}`" for c in codes) + "." for why, codes in KEPT_ERRORS]
    return "\n".join(head + ["", "## The codes", "", markdown(), ""])


def refuses(diagnostic, strict: bool) -> bool:
    """True where ``diagnostic`` refuses a model: every error; under ``strict`` also a warning whose code
    the table marks a violation (a warning-level use of an error code, e.g. inference's note that an
    operator is unknown so its outputs stay unknown, is not one)."""
    if diagnostic.severity == E:
        return True
    row = CODES.get(diagnostic.code)
    return strict and row is not None and row.severity == W and row.violation
