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
from .runtime.kernel import KernelTable, NodeContext, Unsupported, needs_scope
from .schema import AttributeDef, FormalParameter, OperatorSet, OpSchema, TypeConstraint, build_operator_sets

__all__ = ["AttributeDef", "Backend", "DataType", "EvaluationError", "FormalParameter", "InferenceContext",
           "InferenceError", "KernelTable", "NodeContext", "OnnxkitError", "OpSchema", "OpaqueTypeDef", "OperatorSet",
           "TypeConstraint", "Unsupported", "arrays", "build_operator_sets", "element_type", "family_modules",
           "from_numpy_dtype", "hookimpl", "ir", "merge_family_tables", "needs_scope"]
