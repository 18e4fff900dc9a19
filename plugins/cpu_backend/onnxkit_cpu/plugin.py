"""Hook implementations of onnxkit-cpu (entry point ``cpu_backend`` in group ``onnxkit``).

The backend supplies numpy (through array-api-compat) as its array namespace, so it runs every
portable kernel of the domain packages, the host-only ones included (its values are numpy
arrays), and its overrides in ``onnxkit_cpu/overrides/<family>.py``.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import Backend, hookimpl


@hookimpl
def onnxkit_backends():
    return [Backend(name="cpu", device="cpu", description="numpy + ml_dtypes on the host CPU",
                    asarray=np.asarray, to_numpy=np.asarray, namespace=_namespace, host_arrays=True,
                    array_kind="numpy")]


#: numpy's submodules outside the array API that array-api-compat's clone of numpy would import
#: (``dir(numpy)`` touches each lazy one, and importing numpy.f2py alone is costly).  The
#: namespace still reaches them, on demand, through a module ``__getattr__`` (PEP 562).
_NOT_ARRAY_API = frozenset({"f2py", "testing", "ma", "ctypeslib", "polynomial", "random", "char", "rec", "core",
                            "strings"})


def _namespace():
    """numpy as an array API namespace (array-api-compat), cloned without :data:`_NOT_ARRAY_API`."""
    import sys

    compat = sys.modules.get("array_api_compat.numpy")
    if compat is not None:
        return compat
    import numpy

    saved_all, saved_dir = numpy.__all__, numpy.__dict__.get("__dir__")
    listed = [n for n in dir(numpy) if n not in _NOT_ARRAY_API]
    numpy.__all__ = [n for n in saved_all if n not in _NOT_ARRAY_API]
    numpy.__dir__ = lambda: listed
    try:
        import array_api_compat.numpy as compat
    finally:
        numpy.__all__ = saved_all
        if saved_dir is None:
            del numpy.__dir__
        else:
            numpy.__dir__ = saved_dir

    def _rest_of_numpy(name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(numpy, name)

    compat.__getattr__ = _rest_of_numpy
    return compat


@hookimpl
def onnxkit_kernels(backend):
    if backend != "cpu":
        return None
    from .overrides import all_overrides

    return all_overrides(prepare=_namespace)  # before an override module imports array-api-compat's numpy
