"""Operator set imports and node signatures (Clauses 5.3.2, 7.3, 7.4, 10.4, 14.5).

:func:`check_imports` (once per model) detects:

* ``opset-import-missing`` (5.3.1): IR version >= 3 and no import at all.  Before IR 3
  there were no imports (onnx-proto-ir3.txt): the default domain at version 1 is implied;
* ``duplicate-opset-import`` and ``invalid-opset-version`` (5.3.2);
* ``unknown-opset-version`` (warning): a version of a known domain no plugin provides.

:func:`check_node` (per node, in graphs and function bodies) detects:

* ``empty-op-type`` (7.3.1);
* ``duplicate-attribute`` (7.4), ``empty-name`` for an attribute;
* ``ref-attr-outside-function`` / ``unresolved-attribute-reference`` (8.4): a reference to
  an attribute parameter outside a function body, or to one the function does not declare;
* ``domain-not-imported`` (5.3.2, 10.4): the node's domain is not imported.  This applies
  to the default domain too: 5.3.2 requires every domain used to be declared;
* ``domain-implicitly-imported`` (warning, a violation of 5.3.2): it is not imported, but
  onnxruntime imports it implicitly (:data:`onnxkit.checker.readings.IMPLICIT_IMPORTS`, where a
  plugin provides that version): the node is checked, and a session evaluates it, at that version;
* ``unknown-domain`` (warning, once per domain): no plugin provides the domain and no
  model-local function matches the node.  The model may well be valid - a custom domain is
  allowed (16.1) - but this consumer cannot check the node, so it says so rather than
  calling the model invalid;
* ``unknown-operator`` (10.2, 10.4): the imported version of a known domain has no such operator;
* ``extension-operator`` (warning, a violation of 5.3.2): it has none, but another plugin adds
  one to that domain as an extension (:meth:`onnxkit.registry.Registry.extension`); the node is
  checked against that definition and the providing distribution is named;
* ``deprecated-operator`` (warning, 14.5);
* ``unknown-attribute``, ``missing-required-attribute`` (10.4), ``attribute-wrong-type`` (7.3.1);
  ``attribute-form-accepted`` (warning) where the wrong type is Constant's ``value`` holding a
  sparse tensor, which onnxruntime reads as ``sparse_value``;
* ``attribute-value-beyond-definition`` (warning, 7.3.1, 14.3): a value the operator's portable
  kernel declares it computes before the version defining it (``accepts_beyond``,
  :mod:`onnxkit.kernel_traits`: ScatterElements' reduction 'max' at 16);
* ``input-arity`` / ``output-arity`` (7.3.1, 7.3.2): fewer or more values than the
  definition's minimum and maximum (a variadic parameter's minimum arity included);
* ``required-input-unsupplied`` / ``required-output-unsupplied`` (7.3.3): an empty name in a
  position that is neither optional nor variadic.

A node matching a model-local function by (domain, op_type, overload) is checked against
the function's signature instead (inputs, outputs, attribute parameters).
"""

from __future__ import annotations

from typing import Optional

from .. import ir
from ..ir.attribute import AttributeType
from ..registry import display_domain, normalize_domain
from ..kernel_traits import operator_traits
from .context import Context, function_key, q
from .readings import implicit_version, is_sparse_constant_value


def check_imports(ctx: Context, model: ir.Model) -> None:
    opsets: dict = {}
    if not model.opset_import:
        if ctx.ir < 3:
            opsets[""] = 1  # IR 1 and 2 had no imports: the default domain at version 1
        else:
            ctx.emit("opset-import-missing", "the model declares no operator set import (mandatory, Table 2)", "model")
    for i, o in enumerate(model.opset_import):
        d = normalize_domain(o.domain)
        loc = f"model / opset_import {i} {q(o.domain)}"
        if d in opsets:
            if opsets[d] == o.version:
                ctx.emit("repeated-opset-import", f"domain {display_domain(d)!r} is imported twice at version "
                         f"{o.version}", loc)
            else:
                ctx.emit("duplicate-opset-import", f"domain {display_domain(d)!r} is imported at two versions "
                         f"({opsets[d]} and {o.version})", loc)
            continue
        if o.version < 1:
            ctx.emit("invalid-opset-version", f"version {o.version} of {display_domain(d)!r} is not a positive integer",
                     loc)
            continue
        opsets[d] = o.version
        if ctx.domain_known(d) and ctx.registry.operator_set(d, o.version) is None:
            versions = ctx.registry.domains().get(d, [])
            ctx.emit("unknown-opset-version", f"no installed plugin provides {display_domain(d)} version {o.version} "
                     f"(known: {versions[0]}..{versions[-1]}); its nodes are not checked", loc)
    ctx.opsets = opsets


def _check_attributes_local(ctx: Context, node: ir.Node, loc: str, function) -> dict:
    """Names unique, non-empty; references resolvable.  Returns ``{name: attribute}``."""
    out: dict = {}
    for a in node.attribute:
        if not a.name:
            if not (a._wire is not None and "name" in a._wire.absent):
                ctx.emit("empty-name", "an attribute has an empty name", f"{loc} / attribute {q(a.name)}")
            continue
        if a.name in out:
            ctx.emit("duplicate-attribute", f"attribute {q(a.name)} is given more than once",
                     f"{loc} / attribute {q(a.name)}")
            continue
        out[a.name] = a
        if a.ref_attr_name:
            aloc = f"{loc} / attribute {q(a.name)}"
            if function is None:
                ctx.emit("ref-attr-outside-function", f"attribute {q(a.name)} refers to {q(a.ref_attr_name)} "
                         "(ref_attr_name) outside a function body", aloc)
            elif a.ref_attr_name not in _function_attributes(function):
                ctx.emit("unresolved-attribute-reference", f"ref_attr_name {q(a.ref_attr_name)} names no attribute "
                         "parameter of the enclosing function", aloc)
    return out


def _function_attributes(fn: ir.Function) -> set:
    return set(fn.attribute) | {a.name for a in fn.attribute_proto}


def check_node(ctx: Context, node: ir.Node, loc: str, env) -> Optional[object]:
    """The operator checks of one node; returns the OpSchema it binds to, or None."""
    attributes = _check_attributes_local(ctx, node, loc, env.function)
    if not node.op_type:
        ctx.emit("empty-op-type", "the node does not name the operator it invokes (op_type is empty)", loc)
        return None
    d = normalize_domain(node.domain)
    version = env.opsets.get(d)
    fn = ctx.functions.get(function_key(d, node.op_type, node.overload))
    if version is None and fn is None:
        version = implicit_version(ctx.registry, d)
        if version is not None:
            ctx.emit("domain-implicitly-imported", f"the node uses domain {display_domain(d)!r}, which the "
                     + ("function or the model" if env.function is not None else "model")
                     + f" does not import; it is read at {display_domain(d)} version {version}, the version "
                     "onnxruntime imports implicitly", loc)
    if version is None:
        ctx.emit("domain-not-imported", f"domain {display_domain(d)!r} is not imported by the "
                 + ("function or the model" if env.function is not None else "model"), loc)
        return None
    if fn is not None:
        _check_call(ctx, node, loc, fn, attributes)
        return None
    if not ctx.domain_known(d):
        if d not in ctx.unchecked_domains:
            ctx.unchecked_domains.add(d)
            ctx.emit("unknown-domain", f"no installed plugin provides domain {display_domain(d)!r}; its nodes are not "
                     "checked against an operator definition", loc)
        return None
    opset = ctx.registry.operator_set(d, version)
    if opset is None:
        return None  # unknown-opset-version was reported at the import
    schema = opset.get(node.op_type)
    if schema is None:
        schema = ctx.registry.extension(d, node.op_type, version)
        if schema is None:
            ctx.emit("unknown-operator", f"{display_domain(d)} version {version} has no operator {node.op_type!r}", loc)
            return None
        ctx.emit("extension-operator", f"{display_domain(d)} version {version} has no operator {node.op_type!r}; "
                 f"it binds to the extension {schema} of {ctx.registry.extension_provider(schema)}, not a "
                 f"{display_domain(d)} definition", loc)
    if schema.deprecated:
        ctx.emit("deprecated-operator", f"{schema} is deprecated at {display_domain(d)} version {version}", loc)
    _check_attributes(ctx, node, loc, schema, attributes)
    _check_arity(ctx, node, loc, schema)
    return schema


def _check_attributes(ctx: Context, node: ir.Node, loc: str, schema, attributes: dict) -> None:
    for name, a in attributes.items():
        adef = schema.attributes.get(name)
        if adef is None:
            ctx.emit("unknown-attribute", f"{schema} defines no attribute {q(name)}", f"{loc} / attribute {q(name)}")
            continue
        try:
            atype = AttributeType(a.type)
        except ValueError:
            continue  # attribute-type-invalid, reported by fields.py
        if atype == AttributeType.SPARSE_TENSOR and is_sparse_constant_value(node):
            ctx.emit("attribute-form-accepted", f"attribute {q(name)} of {schema} holds a sparse tensor, the form "
                     "of sparse_value; it is densified and read as value, as onnxruntime does",
                     f"{loc} / attribute {q(name)}")
            continue
        if atype != AttributeType.UNDEFINED and atype != adef.type:
            ctx.emit("attribute-wrong-type", f"attribute {q(name)} is {atype.name}; {schema} defines it as "
                     f"{AttributeType(adef.type).name}", f"{loc} / attribute {q(name)}")
    for name, adef in schema.attributes.items():
        if adef.required and name not in attributes:
            ctx.emit("missing-required-attribute", f"{schema} requires attribute {q(name)}", loc)
    for name, values, defined_from in _beyond(ctx, schema):
        a = attributes.get(name)
        value = _plain(a.value) if a is not None and not a.ref_attr_name else None
        if value in values and schema.since_version < defined_from:
            ctx.emit("attribute-value-beyond-definition", f"{name}={value!r} is defined from "
                     f"{schema.op_type}-{defined_from}, not by {schema}; its plugin computes it as "
                     f"{schema.op_type}-{defined_from} does (as onnxruntime does)", f"{loc} / attribute {q(name)}")


def _plain(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _beyond(ctx: Context, schema) -> tuple:
    """The attribute values the portable kernel of ``schema`` declares it computes beyond the
    definition (``accepts_beyond``: ``(attribute, values, defined_from)`` rows), cached per definition."""
    cache = ctx.beyond
    key = schema.key
    rows = cache.get(key)
    if rows is None:
        rows = cache[key] = operator_traits(ctx.registry, key).accepts_beyond if ctx.registry is not None else ()
    return rows


def _plural(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _count(what: str, lo: int, hi: int) -> str:
    if hi >= 2**31 - 1:
        return f"at least {_plural(lo, what)}"
    return _plural(lo, what) if lo == hi else f"{lo} to {hi} {what}s"


def _check_arity(ctx: Context, node: ir.Node, loc: str, schema) -> None:
    for what, names, lo, hi, param_at in (
            ("input", node.input, schema.min_input, schema.max_input, schema.input_at),
            ("output", node.output, schema.min_output, schema.max_output, schema.output_at)):
        n = len(names)
        if n < lo or n > hi:
            ctx.emit(f"{what}-arity", f"the node has {_plural(n, what)}; {schema} takes {_count(what, lo, hi)}", loc)
        for j, name in enumerate(names):
            if name:
                continue
            p = param_at(j)
            if p is not None and p.option == "single":
                ctx.emit(f"required-{what}-unsupplied", f"{what} {j} ({p.name}) of {schema} is not optional but its "
                         "name is empty", f"{loc} / {what} {j} ''")


def _check_call(ctx: Context, node: ir.Node, loc: str, fn: ir.Function, attributes: dict) -> None:
    """A node calling a model-local function: its signature is the function's (8.4)."""
    for what, names, formal in (("input", node.input, fn.input), ("output", node.output, fn.output)):
        if len(names) > len(formal):
            ctx.emit(f"{what}-arity", f"the node has {_plural(len(names), what)}; function {fn.name!r} declares "
                     f"{len(formal)}", loc)
    params = _function_attributes(fn)
    for name in attributes:
        if name not in params:
            ctx.emit("unknown-attribute", f"function {fn.name!r} declares no attribute parameter {q(name)}",
                     f"{loc} / attribute {q(name)}")
