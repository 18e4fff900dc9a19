"""The torch device of the gpu backend and the conversions between numpy and torch values.

:data:`ELEMENT_TYPES` are the element types the backend computes exactly on torch.  Nodes
reading or producing any other type (unsigned 16/32/64-bit, the 8-bit floats and the 4/2-bit
types, STRING; maps) are planned on the cpu backend, the gpu backend's declared fallback
(:mod:`onnxkit.runtime.fallback`); :func:`asarray` leaves arrays of those types on the host,
as numpy, never converting them approximately.
"""

from __future__ import annotations

import functools
import os
import sys

import numpy as np

from onnxkit.plugin import DataType, EvaluationError


#: Element type tags (Table 5) computed on torch: the backend's ``element_types``.
ELEMENT_TYPES = frozenset(int(t) for t in (
    DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16, DataType.BFLOAT16, DataType.INT8, DataType.UINT8,
    DataType.INT16, DataType.INT32, DataType.INT64, DataType.BOOL, DataType.COMPLEX64, DataType.COMPLEX128))


@functools.lru_cache(maxsize=None)
def device() -> str:
    """The torch device kernels run on (decided on first use).

    ``ONNXKIT_GPU_DEVICE`` names it (``cpu``, ``cuda``, ``cuda:1``); unset, CUDA where torch
    sees one, else torch's CPU device.  A CUDA device asked for where torch sees none is an
    error, not a silent run on the CPU."""
    import torch

    wanted = os.environ.get("ONNXKIT_GPU_DEVICE")
    if wanted and wanted.startswith("cuda") and not torch.cuda.is_available():
        raise EvaluationError(f"ONNXKIT_GPU_DEVICE={wanted!r}, but torch {torch.__version__} sees no CUDA device")
    return wanted or ("cuda" if torch.cuda.is_available() else "cpu")


def namespace():
    """torch as an array API namespace (array-api-compat)."""
    import array_api_compat.torch

    return array_api_compat.torch


@functools.lru_cache(maxsize=None)
def torch_dtype(np_dtype):
    """The torch dtype of a numpy dtype, or None when torch has none."""
    import torch

    np_dtype = np.dtype(np_dtype)
    ml_dtypes = sys.modules.get("ml_dtypes")  # not imported to ask: a dtype of its exists only once it is
    if ml_dtypes is not None and np_dtype == ml_dtypes.bfloat16:
        return torch.bfloat16
    table = {
        np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64, np.dtype(np.float16): torch.float16,
        np.dtype(np.int8): torch.int8, np.dtype(np.uint8): torch.uint8,
        np.dtype(np.int16): torch.int16, np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64,
        np.dtype(np.bool_): torch.bool, np.dtype(np.complex64): torch.complex64,
        np.dtype(np.complex128): torch.complex128,
    }
    return table.get(np_dtype)


def asarray(a):
    """A numpy array as a torch tensor on the backend's device (a copy: inputs stay untouched).

    An array of an element type torch does not compute here (no torch dtype) is returned as it
    is, on the host: only nodes planned on the fallback read such values."""
    import torch

    if isinstance(a, torch.Tensor):
        return a.to(device())
    arr = np.asarray(a)
    dt = torch_dtype(arr.dtype)
    if dt is None:
        return arr
    if dt == torch.bfloat16:
        return torch.from_numpy(arr.view(np.uint16).copy()).view(torch.bfloat16).to(device())
    return torch.from_numpy(np.array(arr, copy=True)).to(device())


def to_numpy(t):
    """A torch tensor back as a numpy array (bfloat16 as ml_dtypes.bfloat16)."""
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    on_host = t.device.type == "cpu"
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        arr = t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    else:
        arr = t.numpy()
    # on torch's CPU device the array would share the tensor's memory (a folded constant's,
    # for instance): the caller gets its own copy, as a device-to-host transfer would give
    return arr.copy() if on_host else arr
