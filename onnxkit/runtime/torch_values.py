"""torch tensors as host values: their numpy dtype and a numpy copy of their contents.

Shared by the feed conversion (:mod:`onnxkit.runtime.feeds`) and :class:`onnxkit.OrtValue`
(:mod:`onnxkit.runtime.ortvalue`), which import it and not each other's modules.  torch is
imported when a function is called (only values that are torch tensors reach them).
"""

from __future__ import annotations

import numpy as np

__all__ = ["torch_to_numpy", "torch_to_numpy_dtype"]


def torch_to_numpy_dtype(dtype) -> np.dtype:
    """The numpy dtype of a torch dtype (bfloat16 as ml_dtypes.bfloat16)."""
    import torch

    if dtype == torch.bfloat16:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return torch.empty(0, dtype=dtype).numpy().dtype


def torch_to_numpy(t) -> np.ndarray:
    """A torch tensor as a numpy array of its own (copied to the host; bfloat16 as ml_dtypes')."""
    import torch

    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(torch_to_numpy_dtype(t.dtype)).copy()
    return t.numpy().copy()
