"""Everything a plugin author imports, from one module.

A domain package (operators of its own) writes::

    from onnxkit.plugin import (hookimpl, OperatorSet, OpSchema, FormalParameter, AttributeDef,
                                TypeConstraint, KernelTable, ir)

    KERNELS = KernelTable()

    @KERNELS.register("Scale", 1, domain="com.example")
    def scale(ctx):                       # a portable kernel: runs on every backend
        factor = ctx.attr("factor", 1.0)
        xp = ctx.xp                       # the backend's array namespace (array API)
        return lambda x: x * xp.asarray(factor, dtype=x.dtype)

    @hookimpl
    def onnxkit_portable_kernels():
        return KERNELS

A kernel whose outputs can be larger than its inputs declares their sizes with
``declares_output_bytes(fn, predict)`` (:func:`onnxkit.runtime.budget.declares_output_bytes`): the
run loop refuses what exceeds the limits before ``fn`` runs (otherwise a node of a plugin's own
domain is checked once its kernel returned, or with its inference function's sizes).

A backend package provides a :class:`Backend` (``onnxkit_backends``) and its overrides
(``onnxkit_kernels``).  The contract of every hook is :mod:`onnxkit.hookspecs`; the kernel
contract (factories, the node function, :class:`NodeContext`) is :mod:`onnxkit.runtime.kernel`.
"""

from __future__ import annotations

from . import arrays, ir
from .dtypes import DataType, element_type, from_numpy_dtype
from .errors import EvaluationError, OnnxkitError
from .hookspecs import hookimpl
from .inference.context import InferenceContext, InferenceError
from .plugin_tools import family_modules, merge_family_tables
from .registry import Backend, OpaqueTypeDef
from .runtime.budget import declares_output_bytes
from .runtime.kernel import (KernelTable, KernelTraits, NodeContext, Unsupported, binds_constants, declare_traits,
                             host_only, needs_scope, offers_epilogue, traits_of)
from .schema import AttributeDef, FormalParameter, OperatorSet, OpSchema, TypeConstraint, build_operator_sets

__all__ = ["AttributeDef", "Backend", "DataType", "EvaluationError", "FormalParameter", "InferenceContext",
           "InferenceError", "KernelTable", "KernelTraits", "NodeContext", "OnnxkitError", "OpSchema", "OpaqueTypeDef",
           "OperatorSet", "TypeConstraint", "Unsupported", "arrays", "binds_constants", "build_operator_sets",
           "declare_traits", "declares_output_bytes", "element_type", "family_modules", "from_numpy_dtype", "hookimpl",
           "host_only", "ir", "merge_family_tables", "needs_scope", "offers_epilogue", "traits_of"]
