"""The torch device of the gpu backend and the conversions between numpy and torch values.

Element types torch has no dtype for (unsigned 16/32/64-bit, the narrow types, STRING) are
refused with a clear error naming the type rather than converted approximately.
"""

from __future__ import annotations

import functools
import os

import numpy as np

from onnxkit.errors import EvaluationError


@functools.lru_cache(maxsize=None)
def device() -> str:
    """The torch device kernels run on (decided on first use)."""
    import torch

    return os.environ.get("ONNXKIT_GPU_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


@functools.lru_cache(maxsize=None)
def torch_dtype(np_dtype):
    """The torch dtype of a numpy dtype, or None when torch has none."""
    import ml_dtypes
    import torch

    table = {
        np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64, np.dtype(np.float16): torch.float16,
        np.dtype(ml_dtypes.bfloat16): torch.bfloat16, np.dtype(np.int8): torch.int8, np.dtype(np.uint8): torch.uint8,
        np.dtype(np.int16): torch.int16, np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64,
        np.dtype(np.bool_): torch.bool, np.dtype(np.complex64): torch.complex64,
        np.dtype(np.complex128): torch.complex128,
    }
    return table.get(np.dtype(np_dtype))


def asarray(a):
    """A numpy array as a torch tensor on the backend's device (a copy: inputs stay untouched)."""
    import torch

    if isinstance(a, torch.Tensor):
        return a.to(device())
    arr = np.asarray(a)
    dt = torch_dtype(arr.dtype)
    if dt is None:
        raise EvaluationError(f"the gpu backend has no torch dtype for element type {arr.dtype}")
    if arr.dtype == np.dtype("bfloat16"):
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
