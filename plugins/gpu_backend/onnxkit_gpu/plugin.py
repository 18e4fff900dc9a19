"""Hook implementations of onnxkit-gpu (entry point ``gpu_backend`` in group ``onnxkit``).

torch is imported when the registry asks for the backend, not when onnxkit starts.
The device is CUDA where torch sees one, else torch's CPU device (CI has no GPU;
``ONNXKIT_GPU_DEVICE`` overrides, e.g. ``cpu`` or ``cuda:1``).
"""

from __future__ import annotations

import os

from onnxkit import hookimpl
from onnxkit.registry import Backend


def _device() -> str:
    import torch

    return os.environ.get("ONNXKIT_GPU_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


@hookimpl
def onnxkit_backends():
    import torch

    device = _device()

    def asarray(a):
        return torch.as_tensor(a, device=device)

    def to_numpy(t):
        return t.detach().cpu().numpy()

    return [Backend(name="gpu", device=device, description=f"torch {torch.__version__} on {device}",
                    asarray=asarray, to_numpy=to_numpy)]


@hookimpl
def onnxkit_kernels(backend):
    if backend != "gpu":
        return None
    return {}
