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

:class:`StandIn` is that machinery for any alias (``onnxkit.genai`` uses it for
``onnxruntime_genai``).
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


class _AliasLoader(importlib.abc.Loader):
    """Gives the onnxkit module itself for an aliased name."""

    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:
        """The module was executed when it was imported under its onnxkit name."""


class AliasFinder(importlib.abc.MetaPathFinder):
    """Resolves ``alias`` and ``alias.*`` to ``target`` and its submodules; a name ``target`` lacks
    is a ``ModuleNotFoundError`` that names ``installer`` (the call that put the finder there)."""

    def __init__(self, alias: str, target: str, installer: str):
        self.alias, self.target, self.installer = alias, target, installer

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.alias and not fullname.startswith(self.alias + "."):
            return None
        real = self.target + fullname[len(self.alias):]
        try:
            found = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise ModuleNotFoundError(f"No module named {fullname!r}: onnxkit stands in for {self.alias} here "
                                      f"(onnxkit.{self.installer}) and has no {real!r}", name=fullname)
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(real), is_package=found.submodule_search_locations
                                              is not None)
        if found.submodule_search_locations is not None:
            spec.submodule_search_locations = list(found.submodule_search_locations)
        return spec


class OnnxruntimeFinder(AliasFinder):
    """Resolves ``onnxruntime`` and ``onnxruntime.*`` to ``onnxkit.ort`` and its submodules."""

    def __init__(self):
        super().__init__(ORT, TARGET, "install_as_onnxruntime")


class StandIn:
    """One stand-in: ``import alias`` gives the onnxkit module ``target`` once :meth:`install` ran.

    ``distribution`` / ``version``: the distribution record :meth:`shim_dir` writes (``version`` a
    string or a callable giving it); ``installer``: the ``onnxkit`` function a shim calls;
    ``environ``: the variable :meth:`child_environment` sets to ``"1"``."""

    def __init__(self, alias: str, target: str, installer: str, distribution: str, version, environ: str,
                 finder: AliasFinder = None):
        self.alias, self.target, self.installer = alias, target, installer
        self.distribution, self.version, self.environ = distribution, version, environ
        self.finder = finder or AliasFinder(alias, target, installer)

    def _names(self) -> list:
        return [n for n in sys.modules if n == self.alias or n.startswith(self.alias + ".")]

    def installed(self) -> bool:
        return self.finder in sys.meta_path

    def install(self) -> None:
        if self.finder not in sys.meta_path:
            sys.meta_path.insert(0, self.finder)
        for name in self._names():
            if not getattr(sys.modules[name], "__name__", "").startswith(self.target):
                del sys.modules[name]
        sys.modules[self.alias] = importlib.import_module(self.target)

    def uninstall(self) -> None:
        while self.finder in sys.meta_path:
            sys.meta_path.remove(self.finder)
        for name in self._names():
            if getattr(sys.modules[name], "__name__", "").startswith(self.target):
                del sys.modules[name]

    def shim_dir(self, directory=None) -> str:
        version = self.version() if callable(self.version) else self.version
        d = directory or tempfile.mkdtemp(prefix=f"onnxkit-{self.alias.replace('_', '-')}-")
        pkg = os.path.join(d, self.alias)
        os.makedirs(pkg, exist_ok=True)
        with open(os.path.join(pkg, "__init__.py"), "w", encoding="utf-8") as fh:
            fh.write(f'"""Written by onnxkit ({self.target}.install.shim_dir): onnxkit stands in for {self.alias}."""\n'
                     f"import sys\nimport onnxkit\n\nonnxkit.{self.installer}()   "
                     f'# sys.modules["{self.alias}"] is now onnxkit\'s stand-in\n')
        info = os.path.join(d, f"{self.alias}-{version}.dist-info")
        os.makedirs(info, exist_ok=True)
        with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as fh:
            fh.write(f"Metadata-Version: 2.1\nName: {self.distribution}\nVersion: {version}\n"
                     f"Summary: onnxkit standing in for {self.distribution}\n")
        with open(os.path.join(info, "top_level.txt"), "w", encoding="utf-8") as fh:
            fh.write(self.alias + "\n")
        return d

    def child_environment(self, env=None, directory=None) -> dict:
        env = dict(os.environ if env is None else env)
        d = self.shim_dir(directory)
        env["PYTHONPATH"] = d + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env[self.environ] = "1"
        return env


def _ort_version() -> str:
    from .functions import ORT_API_VERSION

    return ORT_API_VERSION


_FINDER = OnnxruntimeFinder()
_ORT = StandIn(ORT, TARGET, "install_as_onnxruntime", ORT, _ort_version, "ONNXKIT_AS_ONNXRUNTIME", _FINDER)


def installed() -> bool:
    """Whether onnxkit stands in for onnxruntime in this process."""
    return _ORT.installed()


def install_as_onnxruntime() -> None:
    """From now on ``import onnxruntime`` (and its submodules) gives onnxkit's stand-in.

    Idempotent.  onnxruntime modules imported before are replaced in :data:`sys.modules`
    (objects taken from them earlier stay what they were)."""
    _ORT.install()


def uninstall() -> None:
    """Undo :func:`install_as_onnxruntime`: ``import onnxruntime`` finds the real one (if any) again."""
    _ORT.uninstall()


def shim_dir(directory=None) -> str:
    """A folder (new temporary one unless ``directory``) holding an ``onnxruntime`` package that
    installs onnxkit's stand-in when imported, and an ``onnxruntime`` distribution record."""
    return _ORT.shim_dir(directory)


def child_environment(env=None, directory=None) -> dict:
    """``env`` (default :data:`os.environ`) with :func:`shim_dir`'s folder first on ``PYTHONPATH``."""
    return _ORT.child_environment(env, directory)


def run_program(argv, prog: str, usage: str, install, child_env) -> int:
    """The runners' one body (``python -m onnxkit.ort`` / ``python -m onnxkit.genai``): ``argv``
    is ``script.py args...`` or ``-m module args...``; ``child_env()`` (the stand-in's
    :func:`child_environment`'s ``PYTHONPATH`` and switch, asked once a program is to run) goes into ``os.environ`` so that child
    Python processes stand in too, ``install()`` makes this one stand in, then the program runs as
    ``__main__``.  Returns the exit status: 0, or 2 for a usage error (``usage`` on stderr; ``-h``
    prints it on stdout and returns 0) or a missing script (named, after ``prog:``)."""
    import runpy

    argv = list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    os.environ.update(child_env())
    install()
    if argv[0] == "-m":
        if len(argv) < 2:
            print(usage, file=sys.stderr)
            return 2
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    script = argv[0]
    if not os.path.exists(script):
        print(f"{prog}: no such script: {script}", file=sys.stderr)
        return 2
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
    return 0
