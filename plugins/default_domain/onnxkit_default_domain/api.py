"""What other plugins may import from the default domain: its published building blocks.

A backend that specializes ai.onnx kernels (onnxkit-cpu's compiled and numpy bodies,
onnxkit-gpu's torch ones) builds on the portable kernels it replaces: it falls back to them
where its fast path does not apply, reuses their attribute parsing and checks so that it fails
where they fail and with the same message, and reuses the inference geometry so that a shape is
computed once, one way.  A domain that extends ai.onnx operators (onnxkit-microsoft's fused and
quantized Conv, pooling, LSTM) does the same.  This module is that contract, in one place:
another plugin imports from ``onnxkit_default_domain.api`` and from nothing else of this package
(tests/plugins/test_plugin_surface.py fails otherwise).  Each name is imported on its first use, so an
override that needs one family's helpers loads that family only.  Every other module of the package, and every
``_``-prefixed name, is private and may change with the package.

What is published, and what each promises (each function's docstring states its contract):

* **Portable kernel families**, as modules: :mod:`activation`, :mod:`cast`, :mod:`conv`,
  :mod:`elementwise`, :mod:`elementwise_math`, :mod:`image`, :mod:`indexing`, :mod:`linalg`,
  :mod:`quantization`, :mod:`reduction`, :mod:`resize`, :mod:`rnn`, :mod:`selection`.  Their public
  names (no leading ``_``) are
  the factories registered in their ``KERNELS`` tables and the helpers those factories are made
  of; a backend may call them, never patch them.
* **Kernel helpers by name**: the parsing, checks and plans of Conv (:func:`make_conv`,
  :func:`conv_plan`, :class:`Plans`, :func:`check_rank`, :func:`columns`, :func:`conv_nd`,
  :func:`pad_spatial`), pooling (:func:`max_pool_kernel`, :func:`average_pool_kernel`,
  :func:`lp_pool_kernel`, :func:`global_average_pool`, :func:`global_max_pool`,
  :func:`geometry_cache`, :func:`average_divisor`, :func:`declared_attr`, :func:`padded_input`,
  :func:`separable`, :func:`max_pool_padding`), normalization, linear algebra, indexing,
  selection, shape and layout operators, fused attention (:func:`attention_fused` with the
  attribute values :data:`ATTENTION_GUARDED_DEFAULTS` under which its fast path is exact), the
  256 values of a LookupTable's body (:func:`lookup_table`, :func:`planned_table`).
* **Shared helpers** (any array namespace): :func:`norm_axis`, :func:`norm_axes`,
  :func:`scalar_int`, :func:`as_dtype`, :func:`compute_dtype`, :func:`input_type_checker`,
  :func:`device_of` (an array's device, array-api-compat imported only for a non-numpy array),
  :func:`schema_types` (the element types a type parameter of the node's definition allows),
  :func:`quiet` (numpy's floating-point warnings off around a kernel), :func:`erfc` and the
  float32 erf / erfc approximation coefficients (``ERF_*``, ``ERFC32_*``) a compiled body must
  reproduce to match the portable result; :func:`mlas_logistic` and :func:`mlas_tanh`, float32
  sigmoid and tanh as onnxruntime's CPU kernels compute them, and their tables
  (``MLAS_LOGISTIC``, ``MLAS_TANH``) for a compiled body that reproduces them.
* **Inference geometry**: :func:`slice_plan`, :func:`numpy_slices`, :func:`wrap_indices`,
  :func:`flatten_extents`, :func:`window_geometry` / :class:`GeometryError`,
  :func:`pool_attrs` / :func:`pool_geometry`, :func:`gemm_dims`, :func:`matmul_dims`,
  :func:`conv_like_output`.
* **Versions**: :data:`FUSED_DOMAIN` (``ai.onnxkit``, the fused operators' domain),
  :data:`WIDENED_ONLY_VERSIONS` (the shape operators' definitions that only widened their type
  lists: a kernel for the earlier definition serves them unchanged; the layout operators'
  module holds the same figure, tests/plugins/test_plugin_surface.py asserts it).
"""

from __future__ import annotations

import importlib

#: where each published name lives: ``name: (module relative to this package, attribute)``, the
#: attribute None for a published module.  A name is imported the first time it is read (PEP 562),
#: so a backend override that needs Conv's helpers does not import every portable family
#: (tests/plugins/test_kernel_index.py asserts what a fresh process imports).
_PUBLISHED = {
    "FUSED_DOMAIN": (".fused", "FUSED_DOMAIN"),
    "conv_like_output": (".inference.nn", "_conv_like"),
    "gemm_dims": (".inference.nn", "gemm_dims"),
    "matmul_dims": (".inference.nn", "matmul_dims"),
    "GeometryError": (".inference.nn_geometry", "GeometryError"),
    "window_geometry": (".inference.nn_geometry", "window_geometry"),
    "pool_attrs": (".inference.pool", "pool_attrs"),
    "pool_geometry": (".inference.pool", "pool_geometry"),
    "flatten_extents": (".inference.shape_geometry", "flatten_extents"),
    "numpy_slices": (".inference.shape_geometry", "numpy_slices"),
    "slice_plan": (".inference.shape_geometry", "slice_plan"),
    "wrap_indices": (".inference.shape_geometry", "wrap_indices"),
    "activation": (".kernels.activation", None),
    "cast": (".kernels.cast", None),
    "conv": (".kernels.conv", None),
    "elementwise": (".kernels.elementwise", None),
    "elementwise_math": (".kernels.elementwise_math", None),
    "image": (".kernels.image", None),
    "indexing": (".kernels.indexing", None),
    "linalg": (".kernels.linalg", None),
    "quantization": (".kernels.quantization", None),
    "reduction": (".kernels.reduction", None),
    "resize": (".kernels.resize", None),
    "rnn": (".kernels.rnn", None),
    "selection": (".kernels.selection", None),
    "as_dtype": (".kernels._common", "as_dtype"),
    "compute_dtype": (".kernels._common", "compute_dtype"),
    "device_of": (".kernels._common", "device_of"),
    "input_type_checker": (".kernels._common", "input_type_checker"),
    "norm_axes": (".kernels._common", "norm_axes"),
    "norm_axis": (".kernels._common", "norm_axis"),
    "scalar_int": (".kernels._common", "scalar_int"),
    "schema_types": (".kernels._common", "schema_types"),
    "ERFC32_CLIP": (".kernels._math", "ERFC32_CLIP"),
    "ERFC32_P": (".kernels._math", "ERFC32_P"),
    "ERFC32_Q": (".kernels._math", "ERFC32_Q"),
    "erfc": (".kernels._math", "erfc"),
    "MLAS_LOGISTIC": (".kernels._mlas", "LOGISTIC"),
    "MLAS_TANH": (".kernels._mlas", "TANH"),
    "mlas_logistic": (".kernels._mlas", "logistic"),
    "mlas_tanh": (".kernels._mlas", "tanh"),
    "Plans": (".kernels.conv", "Plans"),
    "check_rank": (".kernels.conv", "check_rank"),
    "columns": (".kernels.conv", "columns"),
    "conv_nd": (".kernels.conv", "conv_nd"),
    "conv_plan": (".kernels.conv", "conv_plan"),
    "make_conv": (".kernels.conv", "make_conv"),
    "pad_spatial": (".kernels.conv_geometry", "pad_spatial"),
    "quiet": (".kernels.elementwise", "quiet"),
    "ERF_H": (".kernels.elementwise_math", "ERF_H"),
    "ERF_K": (".kernels.elementwise_math", "ERF_K"),
    "ERF_P": (".kernels.elementwise_math", "ERF_P"),
    "ERF_Q": (".kernels.elementwise_math", "ERF_Q"),
    "ERF_TAYLOR": (".kernels.elementwise_math", "ERF_TAYLOR"),
    "ERF_TOP": (".kernels.elementwise_math", "ERF_TOP"),
    "ATTENTION_GUARDED_DEFAULTS": (".kernels.fused", "_GUARDED_DEFAULTS"),
    "attention_fused": (".kernels.fused", "attention_fused"),
    "lookup_table": (".kernels.fused", "lookup_table"),
    "planned_table": (".kernels.fused", "planned_table"),
    "elements_targets": (".kernels.indexing", "elements_targets"),
    "nd_targets": (".kernels.indexing", "nd_targets"),
    "occurrence_passes": (".kernels.indexing", "occurrence_passes"),
    "scatter_reduction": (".kernels.indexing", "scatter_reduction"),
    "gemm_attrs": (".kernels.linalg", "gemm_attrs"),
    "gemm_checker": (".kernels.linalg", "gemm_checker"),
    "matmul_checker": (".kernels.linalg", "matmul_checker"),
    "batch_norm_kernel": (".kernels.norm", "batch_norm_kernel"),
    "batch_norm_mode": (".kernels.norm", "batch_norm_mode"),
    "group_norm": (".kernels.norm", "group_norm"),
    "instance_norm": (".kernels.norm", "instance_norm"),
    "layer_norm": (".kernels.norm", "layer_norm"),
    "lrn_kernel": (".kernels.norm", "lrn_kernel"),
    "max_pool_padding": (".kernels.pool", "_lowest"),
    "average_divisor": (".kernels.pool", "average_divisor"),
    "average_pool_kernel": (".kernels.pool", "average_pool_kernel"),
    "declared_attr": (".kernels.pool", "declared_attr"),
    "geometry_cache": (".kernels.pool", "geometry_cache"),
    "global_average_pool": (".kernels.pool", "global_average_pool"),
    "global_max_pool": (".kernels.pool", "global_max_pool"),
    "lp_pool_kernel": (".kernels.pool", "lp_pool_kernel"),
    "max_pool_kernel": (".kernels.pool", "max_pool_kernel"),
    "padded_input": (".kernels.pool", "padded_input"),
    "separable": (".kernels.pool", "separable"),
    "lstm": (".kernels.rnn", "lstm"),
    "sort_key": (".kernels.selection", "sort_key"),
    "top_k_args": (".kernels.selection", "top_k_args"),
    "top_k_check": (".kernels.selection", "top_k_check"),
    "top_k_order": (".kernels.selection", "top_k_order"),
    "WIDENED_ONLY_VERSIONS": (".kernels.shape", "_LATEST"),
    "axes_attr": (".kernels.shape", "axes_attr"),
    "concat_axis": (".kernels.shape", "concat_axis"),
    "concat_check": (".kernels.shape", "concat_check"),
    "expand_target": (".kernels.shape", "expand_target"),
    "reshape_allowzero": (".kernels.shape", "reshape_allowzero"),
    "reshape_target": (".kernels.shape", "reshape_target"),
    "shape_bounds": (".kernels.shape", "shape_bounds"),
    "split_args": (".kernels.shape", "split_args"),
    "split_attr_args": (".kernels.shape", "split_attr_args"),
    "split_index": (".kernels.shape", "split_index"),
    "split_lengths": (".kernels.shape", "split_lengths"),
    "squeeze_target": (".kernels.shape", "squeeze_target"),
    "transpose_perm": (".kernels.shape", "transpose_perm"),
    "unsqueeze_target": (".kernels.shape", "unsqueeze_target"),
    "pad_array": (".kernels.shape_layout", "pad_array"),
    "pad_mode": (".kernels.shape_layout", "pad_mode"),
    "pad_plan": (".kernels.shape_layout", "pad_plan"),
    "source_index": (".kernels.shape_layout", "source_index"),
}


def __getattr__(name: str):
    """Import a published name on its first use and keep it here (``from ..api import X`` works as usual)."""
    try:
        module_name, attr = _PUBLISHED[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    module = importlib.import_module(module_name, __package__)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_PUBLISHED))


__all__ = [
    # portable kernel families (modules)
    "activation", "cast", "conv", "elementwise", "elementwise_math", "image", "indexing", "linalg", "quantization",
    "reduction", "resize", "rnn", "selection",
    # conv and pooling
    "Plans", "check_rank", "columns", "conv_nd", "conv_plan", "make_conv", "pad_spatial",
    "average_divisor", "average_pool_kernel", "declared_attr", "geometry_cache", "global_average_pool",
    "global_max_pool", "lp_pool_kernel", "max_pool_kernel", "max_pool_padding", "padded_input", "separable",
    # normalization, linear algebra, recurrent, indexing, selection, attention
    "batch_norm_kernel", "batch_norm_mode", "group_norm", "instance_norm", "layer_norm", "lrn_kernel",
    "gemm_attrs", "gemm_checker", "matmul_checker",
    "lstm", "elements_targets", "nd_targets", "occurrence_passes", "scatter_reduction",
    "sort_key", "top_k_args", "top_k_check", "top_k_order", "ATTENTION_GUARDED_DEFAULTS", "attention_fused",
    "lookup_table", "planned_table",
    # shape and layout
    "axes_attr", "concat_axis", "concat_check", "expand_target", "reshape_allowzero", "reshape_target", "shape_bounds",
    "split_args", "split_attr_args", "split_index", "split_lengths", "squeeze_target", "transpose_perm",
    "unsqueeze_target", "pad_array", "pad_mode", "pad_plan", "source_index", "WIDENED_ONLY_VERSIONS",
    # shared helpers
    "as_dtype", "compute_dtype", "device_of", "input_type_checker", "norm_axes", "norm_axis", "scalar_int",
    "schema_types", "quiet",
    "erfc", "mlas_logistic", "mlas_tanh", "MLAS_LOGISTIC", "MLAS_TANH",
    "ERFC32_CLIP", "ERFC32_P", "ERFC32_Q", "ERF_H", "ERF_K", "ERF_P", "ERF_Q", "ERF_TAYLOR", "ERF_TOP",
    # inference geometry
    "GeometryError", "conv_like_output", "flatten_extents", "gemm_dims", "matmul_dims", "numpy_slices", "pool_attrs",
    "pool_geometry", "slice_plan", "window_geometry", "wrap_indices",
    # versions
    "FUSED_DOMAIN",
]
