"""Hook implementations of onnxkit-cpu (entry point ``cpu_backend`` in group ``onnxkit``)."""

from __future__ import annotations

import numpy as np

from onnxkit import hookimpl
from onnxkit.registry import Backend


@hookimpl
def onnxkit_backends():
    return [Backend(name="cpu", device="cpu", description="numpy + ml_dtypes on the host CPU",
                    asarray=np.asarray, to_numpy=np.asarray, namespace=_namespace, host_arrays=True)]


def _namespace():
    """numpy as an array API namespace (array-api-compat)."""
    import array_api_compat.numpy

    return array_api_compat.numpy


@hookimpl
def onnxkit_kernels(backend):
    if backend != "cpu":
        return None
    from .kernels import all_kernels
    from .overrides import all_overrides

    table = all_kernels()
    table.update(all_overrides())
    return table
