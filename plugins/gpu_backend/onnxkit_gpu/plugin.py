"""Hook implementations of onnxkit-gpu (entry point ``gpu_backend`` in group ``onnxkit``).

torch is imported when the backend is first used, not when the registry is built (building
the registry must stay cheap for every onnxkit user).  The device is CUDA where torch sees
one, else torch's CPU device (CI has no GPU); ``ONNXKIT_GPU_DEVICE`` overrides, e.g. ``cpu``
or ``cuda:1``.  Kernels live in ``onnxkit_gpu/kernels/<family>.py``; an operator without one
is reported unsupported on ``gpu`` (Clause 4.4), never run elsewhere behind the user's back.
"""

from __future__ import annotations

import importlib.util

from onnxkit import hookimpl
from onnxkit.registry import Backend

from .device import asarray, to_numpy


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
    from .kernels import all_kernels

    return all_kernels()
