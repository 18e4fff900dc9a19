"""Hook implementations of onnxkit-gpu (entry point ``gpu_backend`` in group ``onnxkit``).

torch is imported when the backend is first used, not when the registry is built (building
the registry must stay cheap for every onnxkit user).  The device is CUDA where torch sees
one, else torch's CPU device (CI has no GPU); ``ONNXKIT_GPU_DEVICE`` overrides, e.g. ``cpu``
or ``cuda:1``.
"""

from __future__ import annotations

import functools
import importlib.util
import os

from onnxkit import hookimpl
from onnxkit.registry import Backend


@functools.lru_cache(maxsize=None)
def device() -> str:
    """The torch device kernels run on (decided on first use)."""
    import torch

    return os.environ.get("ONNXKIT_GPU_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


def asarray(a):
    import torch

    return torch.as_tensor(a, device=device())


def to_numpy(t):
    return t.detach().cpu().numpy()


@hookimpl
def onnxkit_backends():
    if importlib.util.find_spec("torch") is None:
        raise RuntimeError("torch is not installed: `pip install torch` to use the gpu backend")
    return [Backend(name="gpu", device="torch (cuda when present, else cpu)",
                    description="torch; CUDA when present, torch's CPU device otherwise",
                    asarray=asarray, to_numpy=to_numpy)]


@hookimpl
def onnxkit_kernels(backend):
    if backend != "gpu":
        return None
    return {}
