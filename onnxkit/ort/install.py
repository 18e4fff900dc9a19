"""``install_as_onnxruntime()``: ``import onnxruntime`` (and every ``onnxruntime.X``) gives
onnxkit's stand-in (:mod:`onnxkit.ort`, ``onnxruntime.X`` -> ``onnxkit.ort.X``) for the rest
of the process, whether or not onnxruntime is installed.

A finder first on :data:`sys.meta_path` answers every ``onnxruntime`` name: with the onnxkit
module where there is one (the same module object under both names, so ``isinstance`` and
``except`` agree), and with ``ModuleNotFoundError`` naming onnxkit where there is none (e.g.
``onnxruntime.quantization``) -- never with part of the real package.  Modules of onnxruntime
already imported are replaced in :data:`sys.modules`.  :func:`uninstall` undoes it.

:func:`shim_dir` writes a folder that, put first on ``PYTHONPATH``, makes a new Python process
do the same at its first ``import onnxruntime`` (and tells ``importlib.metadata`` that an
``onnxruntime`` distribution of :data:`~onnxkit.ort.functions.ORT_API_VERSION` is there, as
libraries that check the version before importing expect): what the runner and ``onnxkit exec``
use, so that child processes stand in too.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import tempfile

ORT = "onnxruntime"
TARGET = "onnxkit.ort"


def _target(fullname: str) -> str:
    return TARGET + fullname[len(ORT):]


class _AliasLoader(importlib.abc.Loader):
    """Gives the onnxkit module itself for an ``onnxruntime`` name."""

    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:
        """The module was executed when it was imported under its onnxkit name."""


class OnnxruntimeFinder(importlib.abc.MetaPathFinder):
    """Resolves ``onnxruntime`` and ``onnxruntime.*`` to ``onnxkit.ort`` and its submodules."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != ORT and not fullname.startswith(ORT + "."):
            return None
        real = _target(fullname)
        try:
            found = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise ModuleNotFoundError(f"No module named {fullname!r}: onnxkit stands in for onnxruntime here "
                                      f"(onnxkit.install_as_onnxruntime) and has no {real!r}", name=fullname)
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(real), is_package=found.submodule_search_locations
                                              is not None)
        if found.submodule_search_locations is not None:
            spec.submodule_search_locations = list(found.submodule_search_locations)
        return spec


_FINDER = OnnxruntimeFinder()


def installed() -> bool:
    """Whether onnxkit stands in for onnxruntime in this process."""
    return _FINDER in sys.meta_path


def install_as_onnxruntime() -> None:
    """From now on ``import onnxruntime`` (and its submodules) gives onnxkit's stand-in.

    Idempotent.  onnxruntime modules imported before are replaced in :data:`sys.modules`
    (objects taken from them earlier stay what they were)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    for name in [n for n in sys.modules if n == ORT or n.startswith(ORT + ".")]:
        module = sys.modules[name]
        if not getattr(module, "__name__", "").startswith(TARGET):
            del sys.modules[name]
    sys.modules[ORT] = importlib.import_module(TARGET)


def uninstall() -> None:
    """Undo :func:`install_as_onnxruntime`: ``import onnxruntime`` finds the real one (if any) again."""
    while _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in [n for n in sys.modules if n == ORT or n.startswith(ORT + ".")]:
        if getattr(sys.modules[name], "__name__", "").startswith(TARGET):
            del sys.modules[name]


_SHIM = '''"""Written by onnxkit (onnxkit.ort.install.shim_dir): onnxkit stands in for onnxruntime."""
import sys
import onnxkit

onnxkit.install_as_onnxruntime()   # sys.modules["onnxruntime"] is now onnxkit's stand-in
'''


def shim_dir(directory=None) -> str:
    """A folder (new temporary one unless ``directory``) holding an ``onnxruntime`` package that
    installs onnxkit's stand-in when imported, and an ``onnxruntime`` distribution record."""
    from .functions import ORT_API_VERSION

    d = directory or tempfile.mkdtemp(prefix="onnxkit-ort-")
    pkg = os.path.join(d, ORT)
    os.makedirs(pkg, exist_ok=True)
    with open(os.path.join(pkg, "__init__.py"), "w", encoding="utf-8") as fh:
        fh.write(_SHIM)
    info = os.path.join(d, f"{ORT}-{ORT_API_VERSION}.dist-info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as fh:
        fh.write(f"Metadata-Version: 2.1\nName: {ORT}\nVersion: {ORT_API_VERSION}\n"
                 "Summary: onnxkit standing in for onnxruntime\n")
    with open(os.path.join(info, "top_level.txt"), "w", encoding="utf-8") as fh:
        fh.write(ORT + "\n")
    return d


def child_environment(env=None, directory=None) -> dict:
    """``env`` (default :data:`os.environ`) with :func:`shim_dir`'s folder first on ``PYTHONPATH``."""
    env = dict(os.environ if env is None else env)
    d = shim_dir(directory)
    env["PYTHONPATH"] = d + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["ONNXKIT_AS_ONNXRUNTIME"] = "1"
    return env
