"""The validator (Clause 10): ``check_model(model) -> Report`` of every condition found.

A validating consumer SHALL report every condition it classifies as an error (10.1) and
SHOULD report all conditions, not only the first (10.5): :func:`check_model` never stops
at the first finding.  Each :class:`~onnxkit.diagnostics.Diagnostic` has a stable code
(the catalogue is :data:`onnxkit.checker.codes.CODES`), a clause, a message and a
location such as ``graph 'main' / node 3 'conv1' (Conv) / attribute 'kernel_shape'``.

A model is checked against the obligations of its own IR version (Clause 14): IR version 3
requires initializers to be graph inputs, IR version 1 attributes carry no type field, and
so on.  A model without a valid IR version is checked against IR version 14.

The checks, by module:

=================  ==========================================================================
fields             Annex B obligations per IR version: mandatory, deprecated, reserved fields;
                   attribute type/value consistency; features newer than the IR version
types              well-formed types (6.2, 6.5, 6.8)
tensors            tensor contents against dims and element type (6.3.4); sparse tensors
external           external data references (13, 15.3), opened only with ``open_external``
structure          graph structure and scoping (5.4, 7, 10.2), walking every subgraph
operators          operator set imports and node signatures (5.3.2, 7.3, 7.4, 10.4)
typecheck          type constraints and static shapes (10.3, 6.6)
functions          model-local functions (8.4)
metadata           metadata keys (5.5), device configurations, annotations, training bindings
=================  ==========================================================================

Inference hook: ``known_types`` maps a value name, or ``(graph location, name)`` where one
name means different values in sibling subgraphs, to a :class:`onnxkit.ir.Type`.  The type
checks use these types where the model declares none, and a supplied type that contradicts
one the model states is reported (9.4).  The inference engine fills it; the graph location
is the one diagnostics use (``"graph 'main'"``, ``"graph 'main' / node 5 'loop' (Loop) /
attribute 'body' / graph 'body'"``).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Optional, Union

from .. import ir
from ..diagnostics import Report
from ..errors import DecodeError, LimitExceeded
from ..limits import DEFAULT_LIMITS, Limits
from .codes import CODES
from .context import CURRENT_IR, Context, graph_label
from . import fields, functions, metadata, operators, structure, tensors, types
from .walk import walk

__all__ = ["check_model", "CODES"]


def _load(src, limits: Limits):
    from ..api import load

    model = load(src, external_data="never", limits=limits)
    return model, model.base_dir


def _decode_fault(exc: Exception) -> Report:
    report = Report()
    ctx = Context(None, registry=None, limits=DEFAULT_LIMITS)
    if isinstance(exc, DecodeError):
        where = exc.path or "ModelProto"
        if exc.offset is not None:
            where += f" @ byte {exc.offset}"
        ctx.emit("decode-error", exc.reason, where)
    else:
        where = getattr(exc, "path", "") or "model"
        ctx.emit("limit-exceeded", str(exc), where)
    report.extend(ctx.report.diagnostics)
    return report


def _check_ir_version(ctx: Context, model: ir.Model) -> None:
    v = model.ir_version
    wire = model._wire
    present = v != 0 or (wire is not None and "ir_version" in wire.explicit)
    if not present:
        ctx.emit("ir-version-missing", "the model does not state its IR version; it is checked against IR version "
                 f"{CURRENT_IR}", "model")
    elif v < 1:
        ctx.emit("ir-version-invalid", f"ir_version is {v}, not an IR version (a positive integer); the model is "
                 f"checked against IR version {CURRENT_IR}", "model")
    elif v > CURRENT_IR:
        ctx.emit("ir-version-newer", f"ir_version {v} is newer than {CURRENT_IR}, the newest this validator knows; "
                 f"the model is checked against IR version {CURRENT_IR}", "model")
    else:
        ctx.ir = v


def check_model(model: Union[ir.Model, str, os.PathLike, bytes, bytearray, memoryview, Any], *,
                registry=None, open_external: bool = False, limits: Limits = DEFAULT_LIMITS,
                known_types: Optional[Mapping] = None, on_inference: Optional[Callable] = None) -> Report:
    """Validate ``model`` (an IR Model, a path, octets or a binary file) and report every condition found.

    Decoding faults of a path or octets are diagnostics (``decode-error``, ``limit-exceeded``),
    not exceptions; a file that cannot be read raises :class:`onnxkit.errors.OnnxkitError`.
    ``registry``: the operator sets to check against (default: the installed plugins').
    ``open_external``: also resolve external data references and verify the files (15.5
    makes this an explicit step).  ``limits``: the documented limits of 15.4.
    ``known_types``: types from inference (see the module docstring).
    ``on_inference``: called with the :class:`~onnxkit.inference.InferenceResult` of Clause 9.4's
    check when it ran (a session reuses it rather than inferring the model again).
    """
    base_dir = None
    if isinstance(model, ir.Model):
        base_dir = model.base_dir
    else:
        try:
            model, base_dir = _load(model, limits)
        except (DecodeError, LimitExceeded) as exc:
            return _decode_fault(exc)
    if registry is None:
        from ..registry import get_registry

        registry = get_registry()
    ctx = Context(model, registry=registry, limits=limits, open_external=open_external, known_types=known_types,
                  base_dir=base_dir)
    _check_ir_version(ctx, model)
    operators.check_imports(ctx, model)
    functions.index_functions(ctx, model)
    for obj, loc, _parent, _field in walk(model):
        fields.check_object(ctx, obj, loc)
        if isinstance(obj, ir.Type):
            types.check_type(ctx, obj, loc)
        elif isinstance(obj, ir.Tensor):
            tensors.check_tensor(ctx, obj, loc)
        elif ir.is_a(obj, "SparseTensor"):
            tensors.check_sparse(ctx, obj, loc)
        props = getattr(obj, "metadata_props", None)
        if props:
            metadata.check_props(ctx, props, loc or "model")
    try:
        if model.graph is None:
            ctx.emit("graph-missing", "the model has no graph (mandatory, Table 2)", "model")
        else:
            structure.check_graph(ctx, model.graph, graph_label(model.graph),
                                  structure.Env({}, None, ctx.opsets), "top")
        functions.check_functions(ctx, model)
        _check_training(ctx, model)
    except RecursionError:  # only an IR built in Python can nest this deep; decoding bounds it (12.5)
        ctx.emit("limit-exceeded", "graphs nest too deeply to be checked (Clause 15.4)", "model")
    metadata.check_configurations(ctx, model)
    metadata.check_training(ctx, model)
    if model.graph is not None and not ctx.report.errors:
        result = _check_inference(ctx, model, registry)
        if result is not None and on_inference is not None:
            on_inference(result)
    return ctx.report


#: What the inference engine reports that belongs in a Clause 10 report.
INFERENCE_CODES = ("inferred-type-mismatch", "inferred-shape-mismatch", "inference-error", "no-inference-function",
                   "inference-function-failed")


def _check_inference(ctx: Context, model: ir.Model, registry):
    """Clause 9.4: an inferred type or shape contradicting a declared one is reported (Clause 10);
    returns the inference result (None where inference stopped).

    Run on structurally valid models only: on a broken graph what inference derives is noise."""
    from ..inference import infer_model
    from .readings import read_as_onnxruntime

    try:
        # what a session evaluates: the model as onnxruntime reads it (readings.py; the warnings are reported)
        result = infer_model(read_as_onnxruntime(model, registry, ctx.limits), registry=registry)
    except RecursionError:
        ctx.emit("limit-exceeded", "graphs nest too deeply to be inferred (Clause 15.4)", "model")
        return None
    except LimitExceeded as exc:  # the reading's densified Constant (readings.py); the message names the node
        ctx.emit("limit-exceeded", str(exc), "model")
        return None
    except Exception as exc:  # noqa: BLE001
        # Broad: the engine reports every node's fault itself (Clause 9.4), so a raise here is a
        # bug of the engine, and it must not hide the rest of the report: shown as a finding of
        # the report, and logged on onnxkit.check with the traceback.
        from ..log import get_logger

        get_logger("check").warning("type inference stopped: %s: %s", type(exc).__name__, exc, exc_info=exc)
        ctx.emit("inference-function-failed", f"inference stopped: {type(exc).__name__}: {exc}", "model")
        return None
    for d in result.diagnostics:
        if d.code in INFERENCE_CODES:
            ctx.emit(d.code, d.message, d.location)
    return result


def _check_training(ctx: Context, model: ir.Model) -> None:
    """Training graphs (B.2.10) see the main graph's values, as its subgraphs would."""
    if not model.training_info or model.graph is None:
        return
    g = model.graph
    names = {vi.name: vi.type for vi in g.input}
    names.update({t.name: None for t in g.initializer})
    names.update({vi.name: vi.type for vi in g.output})
    for n in g.node:
        names.update({o: None for o in n.output if o})
    for i, ti in enumerate(model.training_info):
        for field in ("initialization", "algorithm"):
            sub = getattr(ti, field)
            if sub is not None:
                structure.check_graph(ctx, sub, f"model / training_info {i} / {field} {graph_label(sub)}",
                                      structure.Env(names, None, ctx.opsets, 1), "training")
