"""Everything a plugin author imports, from one module.

A domain package (operators of its own) writes::

    from onnxkit.plugin import (hookimpl, OperatorSet, OpSchema, FormalParameter, AttributeDef,
                                TypeConstraint, FunctionTable, KernelTable, ir)

    KERNELS = KernelTable()
    FUNCTIONS = FunctionTable([SCALE], domain="com.example")   # SCALE: the OpSchema of Scale-1

    @KERNELS.register("Scale", 1, domain="com.example")
    def scale(ctx):                       # a portable kernel: runs on every backend
        factor = ctx.attr("factor")       # the schema's default where the node gives none
        xp = ctx.xp                       # the backend's array namespace (array API)
        return lambda x: x * xp.asarray(factor, dtype=x.dtype)

    @FUNCTIONS.register("Scale")          # every definition of Scale (its inference function)
    def infer_scale(ctx):
        return [ctx.input_type(0)]

    @hookimpl
    def onnxkit_portable_kernels():
        return KERNELS

    @hookimpl
    def onnxkit_inference_functions():
        return FUNCTIONS

A kernel is registered one way, ``KERNELS.register(op_type, *since_versions, domain=...,
host_only=...)`` on a :class:`KernelTable`; an inference function one way,
``FUNCTIONS.register(op_types, first=1, last=None, domain=...)`` on a :class:`FunctionTable`
(every since_version of the operators' definitions in that range).  A package with one module
per operator family defines the table in each and hands them over with
:func:`lazy_family_tables` from a generated index (:mod:`onnxkit.plugin.lazy`);
``merge_family_tables`` (merging the modules eagerly) is gone and refused by name.

A kernel whose outputs can be larger than its inputs declares their sizes with
``declares_output_bytes(fn, predict)`` (:func:`onnxkit.runtime.budget.declares_output_bytes`): the
run loop refuses what exceeds the limits before ``fn`` runs (otherwise a node of a plugin's own
domain is checked once its kernel returned, or with its inference function's sizes).

A backend package provides a :class:`Backend` (``onnxkit_backends``) and its overrides
(``onnxkit_kernels``).  The contract of every hook is :mod:`onnxkit.hookspecs`; the kernel
contract (factories, the node function, :class:`NodeContext`) is :mod:`onnxkit.runtime.kernel`.

What a kernel declares beyond computing its node is one :class:`KernelTraits` record, set with
:func:`needs_scope` (a node with subgraphs: called with the enclosing scope first),
:func:`binds_constants` (specialized once on constant inputs), :func:`offers_epilogue` (folds a
following Relu / Add), ``KernelTable.register(..., host_only=True)`` (a portable kernel needing
numpy values; :func:`host_only`, its former second spelling, is refused by name) and
:func:`declares_output_bytes`, :func:`reports_bodies` (which body it chose per input-shape key),
or :func:`declare_traits`; :func:`traits_of` reads them.  What a domain package knows of its
*operators* it declares on their portable kernel factories, and the host reads it from there
whichever backend runs the node (:func:`onnxkit.kernel_traits.operator_traits`; the host names
no operator): :func:`size_guard` (the run-time size check an operator whose output can exceed
its inputs needs: ``@size_guard("concat")``, kinds :data:`SIZE_GUARDS`), :func:`nondeterministic`
(random generators, Dropout: never evaluated at planning), :func:`fails_on_values` (integer
division by zero: never dropped unread) and :func:`accepts_beyond` (attribute values its kernels
compute at versions before the one defining them, as onnxruntime does: a checker warning).
A kernel whose computation calls the host's BLAS
declares :func:`calls_blas` (a session limits BLAS's threads only for models with such a node).  A kernel whose fast body needs a slow
one-time setup (a compiler) asks :func:`first_run` at planning: where it returns a record, the
plan is a session's cold plan, and the kernel may take its quick-to-start body and call
``record.defer(what, cost=seconds, setup=(key, seconds))`` (``compile_cost=seconds`` where its code
is not in the compiler's cache); the session then plans again, warm, between two runs once its
runs on the cold plan have spent the estimated setup, the runs known to come counted (no cost
given: before its second run; :mod:`onnxkit.runtime.bodies`).  A kernel that picks its body at planning names it with
:func:`note_planned_body` (reported per node as ``planned``, ``onnxkit run --profile``).

This package is the whole host surface a plugin may import (tests/plugins/test_plugin_surface.py fails
on any other ``onnxkit`` import under ``plugins/``).  Beside the names here:

* :mod:`onnxkit.plugin.inference`: the inference-function toolkit (Clause 9.2);
* :mod:`onnxkit.plugin.dtypes`: the element types (Clause 6, Table 5);
* :mod:`onnxkit.plugin.narrow`: the reduced-precision types' codes, packing and conversion (6.3);
* :mod:`onnxkit.plugin.lazy`: kernel families and inference functions imported when a model needs
  them, from a generated index (:func:`lazy_family_tables`; ``tools/kernel_index.py`` writes it).

Also here: :class:`Accumulation` (values a Loop / Scan kernel gathers, charged to the run's
budget), :data:`DEFAULT_LIMITS`, :func:`normalize_domain` (``"ai.onnx"`` -> ``""``),
:func:`is_default_domain` (the one test for the default domain) and :func:`display_domain` (its name in messages),
:func:`batch_norm_mode` (BatchNormalization's training / inference mode: the rule the optimizer reads too),
:func:`node_attributes` (a node's attributes over its schema's defaults), :func:`subgraphs_of` (a node's
subgraphs: the host's one walker), :func:`type_string` (a type
as onnxruntime spells it: ``tensor(float)``, ``map(string,tensor(float))``), :class:`SchemaData` /
:func:`packaged_schema_data` (a domain's packaged schema file), ``AttributeType``, and
:mod:`onnxkit.records` as ``records`` (the record classes the IR is made of: ``records.evolve`` copies
an IR object with changes, ``records.define`` makes a plugin's own), and the run's intra-op threads
(:mod:`onnxkit.runtime.threads` as ``threads``): :func:`parallel_for` (a kernel's work split in
blocks over the session's intra-op threads, each element computed as on one thread),
:func:`blocks` (how many it makes) and :func:`splits_across_threads` (the operators a backend
splits, which the session's thread limit covers).
"""

from __future__ import annotations

from .. import arrays, ir, records
from ..domains import display_domain, is_default_domain, normalize_domain
from ..dtypes import DataType, element_type, from_numpy_dtype
from ..errors import EvaluationError, OnnxkitError, OnnxkitTypeError
from ..functions import node_attributes, subgraphs_of
from ..hookspecs import hookimpl
from ..inference.context import InferenceContext, InferenceError
from ..inference.table import FunctionTable
from ..kernel_traits import SIZE_GUARDS, accepts_beyond, calls_blas, fails_on_values, nondeterministic, size_guard
from ..ir import AttributeType
from ..ir.types import type_string
from ..limits import DEFAULT_LIMITS, Limits
from ..operator_modes import BatchNormMode, batch_norm_mode
from ..plugin_tools import family_modules, merge_family_tables
from ..registry import Backend
from ..runtime.bodies import first_run, note_planned_body
from .lazy import lazy_family_tables
from ..runtime.budget import Accumulation, declares_output_bytes
from ..runtime import threads
from ..runtime.threads import blocks, parallel_for, splits_across_threads
from ..runtime.kernel import (KernelTable, KernelTraits, NodeContext, Unsupported, binds_constants, declare_traits,
                              host_only, needs_scope, offers_epilogue, reports_bodies, traits_of)
from ..schema import (AttributeDef, FormalParameter, OperatorSet, OpSchema, SchemaData, TypeConstraint,
                      build_operator_sets, packaged_schema_data)

__all__ = ["Accumulation", "AttributeDef", "AttributeType", "Backend", "BatchNormMode", "DEFAULT_LIMITS", "DataType",
           "EvaluationError", "FormalParameter", "FunctionTable", "InferenceContext", "InferenceError", "KernelTable",
           "KernelTraits", "Limits", "NodeContext", "OnnxkitError", "OnnxkitTypeError", "OpSchema", "OpaqueTypeDef",
           "OperatorSet", "SIZE_GUARDS", "SchemaData", "TypeConstraint", "Unsupported", "arrays", "batch_norm_mode",
           "accepts_beyond", "binds_constants", "build_operator_sets", "calls_blas", "declare_traits", "declares_output_bytes",
           "display_domain", "element_type", "fails_on_values", "family_modules", "first_run", "from_numpy_dtype",
           "hookimpl", "host_only", "ir", "is_default_domain", "lazy_family_tables", "merge_family_tables",
           "needs_scope", "node_attributes", "nondeterministic", "normalize_domain", "note_planned_body",
           "offers_epilogue", "packaged_schema_data", "records", "reports_bodies", "size_guard", "subgraphs_of",
           "traits_of", "type_string", "threads", "blocks", "parallel_for", "splits_across_threads"]


def __getattr__(name: str):
    """:class:`~onnxkit.registry.OpaqueTypeDef`, defined when first asked for (:mod:`onnxkit.registry_records`)."""
    if name == "OpaqueTypeDef":
        from ..registry_records import OpaqueTypeDef

        return OpaqueTypeDef
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
