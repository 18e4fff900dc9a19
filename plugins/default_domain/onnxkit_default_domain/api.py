"""What other plugins may import from the default domain: its published building blocks.

A backend that specializes ai.onnx kernels (onnxkit-cpu's compiled and numpy bodies,
onnxkit-gpu's torch ones) builds on the portable kernels it replaces: it falls back to them
where its fast path does not apply, reuses their attribute parsing and checks so that it fails
where they fail and with the same message, and reuses the inference geometry so that a shape is
computed once, one way.  A domain that extends ai.onnx operators (onnxkit-microsoft's fused and
quantized Conv, pooling, LSTM) does the same.  This module is that contract, in one place:
another plugin imports from ``onnxkit_default_domain.api`` and from nothing else of this package
(tests/test_plugin_surface.py fails otherwise).  Every other module of the package, and every
``_``-prefixed name, is private and may change with the package.

What is published, and what each promises (each function's docstring states its contract):

* **Portable kernel families**, as modules: :mod:`activation`, :mod:`cast`, :mod:`conv`,
  :mod:`elementwise`, :mod:`elementwise_math`, :mod:`indexing`, :mod:`linalg`,
  :mod:`quantization`, :mod:`reduction`, :mod:`resize`, :mod:`rnn`.  Their public names (no leading ``_``) are
  the factories registered in their ``KERNELS`` tables and the helpers those factories are made
  of; a backend may call them, never patch them.
* **Kernel helpers by name**: the parsing, checks and plans of Conv (:func:`make_conv`,
  :func:`conv_plan`, :class:`Plans`, :func:`check_rank`, :func:`columns`, :func:`conv_nd`,
  :func:`pad_spatial`), pooling (:func:`max_pool_kernel`, :func:`average_pool_kernel`,
  :func:`lp_pool_kernel`, :func:`global_average_pool`, :func:`global_max_pool`,
  :func:`geometry_cache`, :func:`average_divisor`, :func:`declared_attr`, :func:`padded_input`,
  :func:`separable`, :func:`max_pool_padding`), normalization, linear algebra, indexing,
  selection, shape and layout operators, fused attention (:func:`attention_fused` with the
  attribute values :data:`ATTENTION_GUARDED_DEFAULTS` under which its fast path is exact).
* **Shared helpers** (any array namespace): :func:`norm_axis`, :func:`norm_axes`,
  :func:`scalar_int`, :func:`as_dtype`, :func:`compute_dtype`, :func:`input_type_checker`,
  :func:`schema_types` (the element types a type parameter of the node's definition allows),
  :func:`quiet` (numpy's floating-point warnings off around a kernel), :func:`erfc` and the
  float32 erf / erfc approximation coefficients (``ERF_*``, ``ERFC32_*``) a compiled body must
  reproduce to match the portable result.
* **Inference geometry**: :func:`slice_plan`, :func:`numpy_slices`, :func:`wrap_indices`,
  :func:`flatten_extents`, :func:`window_geometry` / :class:`GeometryError`,
  :func:`pool_attrs` / :func:`pool_geometry`, :func:`gemm_dims`, :func:`matmul_dims`,
  :func:`conv_like_output`.
* **Versions**: :data:`FUSED_DOMAIN` (``ai.onnxkit``, the fused operators' domain),
  :data:`WIDENED_ONLY_VERSIONS` (the shape operators' definitions that only widened their type
  lists: a kernel for the earlier definition serves them unchanged; the layout operators'
  module holds the same figure, tests/test_plugin_surface.py asserts it).
"""

from __future__ import annotations

from .fused import FUSED_DOMAIN
from .inference.nn import _conv_like as conv_like_output
from .inference.nn import gemm_dims, matmul_dims
from .inference.nn_geometry import GeometryError, window_geometry
from .inference.pool import pool_attrs, pool_geometry
from .inference.shape_geometry import flatten_extents, numpy_slices, slice_plan, wrap_indices
from .kernels import (activation, cast, conv, elementwise, elementwise_math, indexing, linalg, quantization, reduction,
                      resize, rnn)
from .kernels._common import (as_dtype, compute_dtype, input_type_checker, norm_axes, norm_axis, scalar_int,
                              schema_types)
from .kernels._math import ERFC32_CLIP, ERFC32_P, ERFC32_Q, erfc
from .kernels.conv import Plans, check_rank, columns, conv_nd, conv_plan, make_conv
from .kernels.conv_geometry import pad_spatial
from .kernels.elementwise import quiet
from .kernels.elementwise_math import ERF_H, ERF_K, ERF_P, ERF_Q, ERF_TAYLOR, ERF_TOP
from .kernels.fused import _GUARDED_DEFAULTS as ATTENTION_GUARDED_DEFAULTS
from .kernels.fused import attention_fused
from .kernels.indexing import elements_targets, nd_targets, occurrence_passes, scatter_reduction
from .kernels.linalg import gemm_attrs, gemm_checker, matmul_checker
from .kernels.norm import batch_norm_kernel, batch_norm_mode, layer_norm, lrn_kernel
from .kernels.pool import _lowest as max_pool_padding
from .kernels.pool import (average_divisor, average_pool_kernel, declared_attr, geometry_cache, global_average_pool,
                           global_max_pool, lp_pool_kernel, max_pool_kernel, padded_input, separable)
from .kernels.rnn import lstm
from .kernels.selection import sort_key, top_k_args, top_k_check, top_k_order
from .kernels.shape import _LATEST as WIDENED_ONLY_VERSIONS
from .kernels.shape import (axes_attr, concat_axis, concat_check, expand_target, reshape_allowzero, reshape_target,
                            shape_bounds, split_args, split_attr_args, split_index, split_lengths, squeeze_target,
                            transpose_perm, unsqueeze_target)
from .kernels.shape_layout import pad_array, pad_mode, pad_plan, source_index

__all__ = [
    # portable kernel families (modules)
    "activation", "cast", "conv", "elementwise", "elementwise_math", "indexing", "linalg", "quantization", "reduction",
    "resize", "rnn",
    # conv and pooling
    "Plans", "check_rank", "columns", "conv_nd", "conv_plan", "make_conv", "pad_spatial",
    "average_divisor", "average_pool_kernel", "declared_attr", "geometry_cache", "global_average_pool",
    "global_max_pool", "lp_pool_kernel", "max_pool_kernel", "max_pool_padding", "padded_input", "separable",
    # normalization, linear algebra, recurrent, indexing, selection, attention
    "batch_norm_kernel", "batch_norm_mode", "layer_norm", "lrn_kernel", "gemm_attrs", "gemm_checker", "matmul_checker",
    "lstm", "elements_targets", "nd_targets", "occurrence_passes", "scatter_reduction",
    "sort_key", "top_k_args", "top_k_check", "top_k_order", "ATTENTION_GUARDED_DEFAULTS", "attention_fused",
    # shape and layout
    "axes_attr", "concat_axis", "concat_check", "expand_target", "reshape_allowzero", "reshape_target", "shape_bounds",
    "split_args", "split_attr_args", "split_index", "split_lengths", "squeeze_target", "transpose_perm",
    "unsqueeze_target", "pad_array", "pad_mode", "pad_plan", "source_index", "WIDENED_ONLY_VERSIONS",
    # shared helpers
    "as_dtype", "compute_dtype", "input_type_checker", "norm_axes", "norm_axis", "scalar_int", "schema_types", "quiet",
    "erfc",
    "ERFC32_CLIP", "ERFC32_P", "ERFC32_Q", "ERF_H", "ERF_K", "ERF_P", "ERF_Q", "ERF_TAYLOR", "ERF_TOP",
    # inference geometry
    "GeometryError", "conv_like_output", "flatten_extents", "gemm_dims", "matmul_dims", "numpy_slices", "pool_attrs",
    "pool_geometry", "slice_plan", "window_geometry", "wrap_indices",
    # versions
    "FUSED_DOMAIN",
]
