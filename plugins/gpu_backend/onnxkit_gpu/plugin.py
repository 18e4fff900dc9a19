"""Hook implementations of onnxkit-gpu (entry point ``gpu_backend`` in group ``onnxkit``).

torch is imported when the backend is first used, not when the registry is built (building
the registry must stay cheap for every onnxkit user).  The device is CUDA where torch sees
one, else torch's CPU device (CI has no GPU); ``ONNXKIT_GPU_DEVICE`` overrides, e.g. ``cpu``
or ``cuda:1``.  The backend supplies torch as its array namespace (the portable kernels of the
domain packages compute with it) and its overrides in ``onnxkit_gpu/overrides/<family>.py``.
It declares ``fallback="cpu"``: a node whose kernel is host-only, or with a type outside
:data:`~onnxkit_gpu.device.ELEMENT_TYPES`, runs on the cpu backend's kernel with explicit
transfers, decided when the session is planned and listed (``InferenceSession.fallbacks``,
``onnxkit unsupported MODEL --backend gpu``), never behind the user's back (Clause 4.4).
"""

from __future__ import annotations

import importlib.util

from onnxkit.plugin import Backend, hookimpl

from .device import ELEMENT_TYPES, asarray, namespace, to_numpy, torch_dtype


@hookimpl
def onnxkit_backends():
    if importlib.util.find_spec("torch") is None:
        raise RuntimeError("torch is not installed: `pip install torch` to use the gpu backend")
    return [Backend(name="gpu", device="torch (cuda when present, else cpu)",
                    description="torch; CUDA when present, torch's CPU device otherwise",
                    asarray=asarray, to_numpy=to_numpy, element_types=ELEMENT_TYPES, fallback="cpu",
                    namespace=namespace, dtype=torch_dtype, array_kind="torch")]


@hookimpl
def onnxkit_kernels(backend):
    if backend != "gpu":
        return None
    from .overrides import all_overrides

    return all_overrides()
