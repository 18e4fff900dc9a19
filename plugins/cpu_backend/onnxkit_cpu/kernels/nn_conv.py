"""Names other legacy cpu families still import from the convolution family, which moved to
``onnxkit_default_domain.kernels.conv`` (portable) and its geometry module.

shim: imported by nn_pool.py, nn_norm.py, resize.py and attention.py of this package; removed when those families move.
"""

from __future__ import annotations

import array_api_compat.numpy as _xp
import numpy as np

from onnxkit_default_domain.kernels import conv as _conv
from onnxkit_default_domain.kernels._common import compute_dtype as _compute_dtype
from onnxkit_default_domain.kernels.conv_geometry import conv_geometry, spatial_attrs, window_slice
from onnxkit_default_domain.kernels.conv_geometry import pad_spatial as _pad_spatial

__all__ = ["compute_dtype", "conv_geometry", "conv_nd", "pad_spatial", "spatial_attrs", "window_slice"]


def compute_dtype(dtype) -> np.dtype:
    """The dtype arithmetic is done in: float32/float64 as is, anything else in float32."""
    return np.dtype(_compute_dtype(np, np.dtype(dtype)))


def pad_spatial(x, begin, end, value=0):
    """``x`` with its spatial axes (2..) padded by ``begin``/``end`` (negative pads crop)."""
    return _pad_spatial(_xp, x, begin, end, value)


def conv_nd(ctx, x, w, kernel, strides, dil, begin, end, out_shape, group):
    """The convolution proper on numpy arrays already in the compute dtype (no bias)."""
    plan = _conv.ConvPlan(x.shape[0], x.shape[1], w.shape[0], group, *(tuple(v) for v in (
        kernel, strides, dil, begin, end, out_shape)))
    return _conv.conv_nd(_xp, x, w, plan)
