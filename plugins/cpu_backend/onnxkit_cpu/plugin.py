"""Hook implementations of onnxkit-cpu (entry point ``cpu_backend`` in group ``onnxkit``).

The backend supplies numpy (as array-api-compat presents it: :mod:`onnxkit_cpu.namespace`) as its
array namespace, so it runs every portable kernel of the domain packages, the host-only ones
included (its values are numpy arrays), and its overrides in ``onnxkit_cpu/overrides/<family>.py``.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import Backend, hookimpl


@hookimpl
def onnxkit_backends():
    return [Backend(name="cpu", device="cpu", description="numpy + ml_dtypes on the host CPU",
                    asarray=np.asarray, to_numpy=np.asarray, namespace=_namespace, host_arrays=True,
                    array_kind="numpy")]


def _namespace():
    """numpy as an array API namespace: array-api-compat's, its clone of numpy made on demand
    (:mod:`onnxkit_cpu.namespace`)."""
    from .namespace import numpy_namespace

    return numpy_namespace()


@hookimpl
def onnxkit_kernels(backend):
    if backend != "cpu":
        return None
    from .namespace import watch_imports
    from .overrides import all_overrides

    return all_overrides(prepare=watch_imports)  # before an override module imports array-api-compat's numpy
