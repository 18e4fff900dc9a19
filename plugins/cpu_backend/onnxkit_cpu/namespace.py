"""The cpu backend's array namespace: numpy as array-api-compat presents it, made on demand.

:func:`numpy_namespace` returns one :class:`NumpyNamespace`, a module object whose attributes are
those of array-api-compat's numpy namespace (``array_api_compat.numpy``): the names array-api-compat
defines itself (:data:`WRAPPED`: its wrappers, ``linalg``, ``fft``, its info object...) are taken
from that module, every other public name is numpy's own object, which is what array-api-compat's
clone of numpy holds under that name.  The clone is imported the first time a name of
:data:`WRAPPED` outside :data:`OWN` is looked up, so a model whose kernels read only numpy's own
names and those of :data:`OWN` never imports it.

:data:`OWN` are written here: ``arange``, ``zeros_like``, ``permute_dims`` and ``take_along_axis``
(one numpy call each, as array-api-compat's, a device other than ``"cpu"`` / ``None`` refused with
its error) and, for numpy 2, ``astype`` and ``asarray`` (one numpy call each with array-api-compat's
arguments and results; another device is passed on to array-api-compat's function, which refuses
it); with numpy 1 those two are array-api-compat's.

:data:`WRAPPED` is the set of one array-api-compat release line (:data:`WRAPPED_VERSION`,
``tests`` of the cpu plugin recompute it from the installed package); with any other release
installed the namespace imports the clone on the first look-up and takes every name from it.

The clone is made by :func:`clone`: array-api-compat copies ``dir(numpy)``, which imports each
of numpy's lazily loaded submodules; those outside the array API (:data:`NOT_ARRAY_API`,
``numpy.f2py`` among them) are left out of the copy and still reached, on demand, through the
clone's module ``__getattr__`` (PEP 562).
"""

from __future__ import annotations

import sys
import types

import numpy

#: numpy's submodules outside the array API that array-api-compat's clone of numpy would import
#: (``dir(numpy)`` touches each lazy one, and importing numpy.f2py alone is costly).
NOT_ARRAY_API = frozenset({"f2py", "testing", "ma", "ctypeslib", "polynomial", "random", "char", "rec", "core",
                           "strings"})

#: the array-api-compat release line (major.minor) :data:`WRAPPED` was read from
WRAPPED_VERSION = "1.16"

#: the names of ``array_api_compat.numpy`` that are not numpy's own objects (release line
#: :data:`WRAPPED_VERSION`)
WRAPPED = frozenset({
    "UniqueAllResult", "UniqueCountsResult", "UniqueInverseResult", "__array_api_version__",
    "__array_namespace_info__", "arange", "argsort", "asarray", "astype", "ceil", "clip", "count_nonzero",
    "cumulative_prod", "cumulative_sum", "empty", "empty_like", "eye", "fft", "finfo", "floor", "full", "full_like",
    "iinfo", "linalg", "linspace", "matmul", "matrix_transpose", "nonzero", "ones", "ones_like", "permute_dims",
    "sign", "sort", "std", "take_along_axis", "tensordot", "trunc", "unique_all", "unique_counts",
    "unique_inverse", "unique_values", "var", "zeros", "zeros_like"})


class _Unlisted:
    """While entered: ``numpy.__all__`` and ``dir(numpy)`` without :data:`NOT_ARRAY_API`."""

    def __enter__(self):
        self.saved = numpy.__all__, numpy.__dict__.get("__dir__")
        listed = [n for n in dir(numpy) if n not in NOT_ARRAY_API]
        numpy.__all__ = [n for n in self.saved[0] if n not in NOT_ARRAY_API]
        numpy.__dir__ = lambda: listed

    def __exit__(self, *exc):
        numpy.__all__ = self.saved[0]
        if self.saved[1] is None:
            del numpy.__dir__
        else:
            numpy.__dir__ = self.saved[1]


def _rest_of_numpy(name):
    """The clone's module ``__getattr__``: numpy's names it did not copy."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(numpy, name)


class _CloneLoader:
    """array-api-compat's loader of its numpy module, executing it under :class:`_Unlisted`."""

    def __init__(self, loader):
        self.loader = loader

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader
        with _Unlisted():
            self.loader.exec_module(module)
        module.__getattr__ = _rest_of_numpy


class _CloneFinder:
    """A ``sys.meta_path`` finder that makes the first import of ``array_api_compat.numpy``,
    whoever asks for it (a kernel's ``import``, ``array_api_compat.array_namespace``), the one of
    :func:`clone`; it leaves ``sys.meta_path`` then."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "array_api_compat.numpy":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _CloneLoader(spec.loader)
                return spec
        return None


_FINDER = _CloneFinder()


def watch_imports() -> None:
    """From now on the first import of ``array_api_compat.numpy`` is :func:`clone`'s (no-op when
    it is imported already)."""
    if "array_api_compat.numpy" not in sys.modules and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def clone() -> types.ModuleType:
    """``array_api_compat.numpy``, imported (once) without :data:`NOT_ARRAY_API` in its copy of
    numpy, with a module ``__getattr__`` giving numpy's other names."""
    compat = sys.modules.get("array_api_compat.numpy")
    if compat is None:
        watch_imports()
        import array_api_compat.numpy as compat
    return compat


def _top_level_spec(name: str):
    """The spec ``importlib.util.find_spec(name)`` gives for an unimported top-level module: the
    first of ``sys.meta_path``'s finders that finds it (None where none does), without importing
    importlib.util."""
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        spec = find(name, None) if find is not None else None
        if spec is not None:
            return spec
    return None


def _installed_release() -> str:
    """The installed array-api-compat's ``__version__`` (``""`` where unknown): the imported
    package's, else read from its ``__init__.py`` (``__version__ = '...'``) without importing it."""
    module = sys.modules.get("array_api_compat")
    if module is not None:
        return str(getattr(module, "__version__", ""))
    import re

    try:
        spec = _top_level_spec("array_api_compat")
        with open(spec.origin, encoding="utf-8") as f:
            found = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", f.read(), re.M)
    except (ImportError, ValueError, AttributeError, TypeError, OSError):
        return ""
    return found.group(1) if found else ""


def _known_release() -> bool:
    """Whether the installed array-api-compat is of the release line :data:`WRAPPED` describes."""
    return ".".join(_installed_release().split(".")[:2]) == WRAPPED_VERSION


_NUMPY2 = int(numpy.__version__.split(".")[0]) >= 2


def astype(x, dtype, /, *, copy=True, device=None):
    """The array API's ``astype`` on a numpy array (array-api-compat's, for numpy 2)."""
    if device not in ("cpu", None):
        return clone().astype(x, dtype, copy=copy, device=device)
    return x.astype(dtype=dtype, copy=copy)


def asarray(obj, /, *, dtype=None, device=None, copy=None, **kwargs):
    """The array API's ``asarray`` for numpy (array-api-compat's, for numpy 2: numpy's ``copy``
    takes the standard's None / True / False there)."""
    if device not in ("cpu", None):
        return clone().asarray(obj, dtype=dtype, device=device, copy=copy, **kwargs)
    return numpy.array(obj, copy=copy, dtype=dtype, **kwargs)


def _refuse_device(device) -> None:
    """array-api-compat's refusal of a device numpy does not have."""
    if device not in ("cpu", None):
        raise ValueError(f"Unsupported device for NumPy: {device!r}")


def arange(start, /, stop=None, step=1, *, dtype=None, device=None, **kwargs):
    """The array API's ``arange`` for numpy (array-api-compat's: numpy's, the device checked)."""
    _refuse_device(device)
    return numpy.arange(start, stop=stop, step=step, dtype=dtype, **kwargs)


def zeros_like(x, /, *, dtype=None, device=None, **kwargs):
    """The array API's ``zeros_like`` for numpy (array-api-compat's: numpy's, the device checked)."""
    _refuse_device(device)
    return numpy.zeros_like(x, dtype=dtype, **kwargs)


def permute_dims(x, /, axes):
    """The array API's ``permute_dims``: numpy's ``transpose`` (as array-api-compat's)."""
    return numpy.transpose(x, axes)


def take_along_axis(x, indices, /, *, axis=-1):
    """The array API's ``take_along_axis``, ``axis`` -1 by default (as array-api-compat's)."""
    return numpy.take_along_axis(x, indices, axis=axis)


#: the names of :data:`WRAPPED` answered here without the clone (astype / asarray with numpy 2 only)
OWN = {"arange": arange, "zeros_like": zeros_like, "permute_dims": permute_dims, "take_along_axis": take_along_axis,
       **({"astype": astype, "asarray": asarray} if _NUMPY2 else {})}


class NumpyNamespace(types.ModuleType):
    """``array_api_compat.numpy``'s names, the clone imported on the first look-up it is needed
    for (see the module docstring); each name looked up is kept on the object."""

    def __getattr__(self, name: str):
        if name.startswith("__") and name not in WRAPPED:
            raise AttributeError(name)
        compat = sys.modules.get("array_api_compat.numpy")
        if compat is None and not self.__dict__.setdefault("_known", _known_release()):
            compat = clone()
        if compat is not None:
            value = getattr(compat, name)
        elif name in OWN:
            value = OWN[name]
        elif name in WRAPPED:
            value = getattr(clone(), name)
        else:
            value = getattr(numpy, name)
        setattr(self, name, value)
        return value


_THE_NAMESPACE = None


def numpy_namespace() -> NumpyNamespace:
    """The cpu backend's array namespace (one object, made on the first call)."""
    global _THE_NAMESPACE
    if _THE_NAMESPACE is None:
        # array-api-compat's name for its numpy namespace: what a kernel keying on ``xp.__name__``
        # (or array_api_compat.is_numpy_namespace) reads
        _THE_NAMESPACE = NumpyNamespace("array_api_compat.numpy", "numpy as array-api-compat presents it")
        watch_imports()
    return _THE_NAMESPACE
