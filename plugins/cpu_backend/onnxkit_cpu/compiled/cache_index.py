"""Whether numba's on-disk cache holds a loop's machine code, read without importing numba.

A cold plan's deferral estimates the warm plan's setup (:mod:`onnxkit_cpu.compiled`): loading a
loop's cached machine code is cheap, compiling it is not, so the estimate asks :func:`holds`.
The rule is numba's own (``numba/core/caching.py``, numba 0.68), restated here:

* **Where.** numba takes the first locator that accepts the function, in this order: the folder
  ``$NUMBA_CACHE_DIR`` (where set and not empty) joined with ``<parent>_<sha1>``, ``<parent>`` the
  name of the folder holding the module's file and ``<sha1>`` the SHA-1 hex digest of that
  folder's absolute path; the ``__pycache__`` folder beside the module's file, where it can be
  made and written; the user-wide cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``, then
  ``numba``, on Linux; ``~/Library/Caches/numba`` on macOS) with the same ``<parent>_<sha1>``.
* **Which file.** The index is ``<module>.<qualname>-<first line>.py<major><minor><abiflags>.nbi``:
  ``<module>`` the file's name without its extension, ``<qualname>`` the function's qualified
  name without ``<`` and ``>``, ``<first line>`` its code's first line number.
* **Fresh.** The index starts with numba's version (a pickled string), then the source stamp
  (the SHA-256 digest of the module file's bytes) with the overloads: an index of another numba
  version or another source is ignored by numba (the loop is compiled again).  Its data files are
  ``<base>.<n>.nbc``, numbered from 1.

:func:`holds` answers True where the index is fresh and its first data file is there, False
where it is absent or stale, None where the rule cannot tell without numba (a function not from a
file, ``$NUMBA_CACHE_LOCATOR_CLASSES`` set, a ``.numba_config.yaml`` in the working directory, a
platform whose user cache folder is not read here).  The overloads' keys (argument types, the
machine) are numba objects and are not read: an index holding other argument types than a plan
will call counts as holding the loop.  Nothing here imports numba or writes a file; the stored
index is read through an unpickler that resolves no global, so a crafted file imports nothing.
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import re
import sys
from typing import Optional

__all__ = ["holds", "index_path"]


def _hash(name: str):
    """The ``sha1`` / ``sha256`` constructor of CPython's built-in modules (``_sha1``, ``_sha256``;
    ``_sha2`` from 3.12), which give hashlib's digests without importing hashlib and the OpenSSL
    it loads; hashlib's where they are absent."""
    for module in ((f"_{name}",) if name == "sha1" else ("_sha256", "_sha2")):
        try:
            return getattr(__import__(module), name)
        except (ImportError, AttributeError):
            continue
    import hashlib

    return getattr(hashlib, name)


def _writable(folder: str) -> bool:
    """Whether ``folder`` exists and can be written, or could be made under a writable folder."""
    path = os.path.abspath(folder)
    while not os.path.isdir(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return os.access(path, os.W_OK | os.X_OK)


def _subpath(py_file: str) -> str:
    """numba's folder name for a module's file inside a cache root: ``<parent>_<sha1>``."""
    folder = os.path.dirname(os.path.abspath(py_file))
    return f"{os.path.split(folder)[-1]}_{_hash('sha1')(folder.encode()).hexdigest()}"


def _user_cache_root() -> Optional[str]:
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Caches/numba")
    if sys.platform.startswith("win"):
        return None
    return os.path.join(os.getenv("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "numba")


def index_path(fn) -> Optional[str]:
    """The path of the index numba would use for the Python function ``fn`` (whether or not the
    file exists), or None where the rule above cannot tell."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    py_file = code.co_filename
    if (not os.path.isfile(py_file) or os.environ.get("NUMBA_CACHE_LOCATOR_CLASSES")
            or os.path.exists(".numba_config.yaml")):
        return None
    qualname = getattr(fn, "__qualname__", None) or fn.__name__
    module = os.path.splitext(os.path.basename(py_file))[0]
    name = (f"{module}.{qualname.replace('<', '').replace('>', '')}-{code.co_firstlineno}"
            f".py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}.nbi")
    root = os.environ.get("NUMBA_CACHE_DIR", "")
    if root:
        return os.path.join(root, _subpath(py_file), name)
    in_tree = os.path.join(os.path.dirname(py_file), "__pycache__")
    if _writable(in_tree):
        return os.path.join(in_tree, name)
    user = _user_cache_root()
    return None if user is None else os.path.join(user, _subpath(py_file), name)


@functools.lru_cache(maxsize=1)
def _installed_version() -> Optional[str]:
    """numba's version as its index files record it, read from its ``_version.py`` (not imported);
    None where it cannot be read."""
    module = sys.modules.get("numba")
    if module is not None and isinstance(getattr(module, "__version__", None), str):
        return module.__version__
    import importlib.util

    try:
        spec = importlib.util.find_spec("numba")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    try:
        with open(os.path.join(os.path.dirname(spec.origin), "_version.py"), encoding="utf-8") as f:
            found = re.search(r'"version":\s*"([^"]+)"', f.read())
    except OSError:
        return None
    return found.group(1) if found else None


@functools.lru_cache(maxsize=64)
def _source_digest(py_file: str, mtime_ns: int, size: int) -> bytes:
    with open(py_file, "rb") as f:
        return _hash("sha256")(f.read()).digest()


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"{module}.{name} is not read here")


@functools.lru_cache(maxsize=256)
def _fresh(path: str, mtime_ns: int, size: int, digest: bytes, version: Optional[str]) -> bool:
    try:
        with open(path, "rb") as f:
            stored = _NoGlobals(io.BytesIO(f.read(256))).load()
            f.seek(0)
            rest = f.read()
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError):
        return False
    if not isinstance(stored, str) or (version is not None and stored != version):
        return False
    return digest in rest and os.path.isfile(f"{path[:-len('.nbi')]}.1.nbc")


def holds(fn) -> Optional[bool]:
    """Whether numba's on-disk cache holds compiled machine code of ``fn`` for this numba and this
    source (see the module docstring; None: cannot tell)."""
    path = index_path(fn)
    if path is None:
        return None
    try:
        stat = os.stat(path)
        source = os.stat(fn.__code__.co_filename)
        digest = _source_digest(fn.__code__.co_filename, source.st_mtime_ns, source.st_size)
    except OSError:
        return False
    return _fresh(path, stat.st_mtime_ns, stat.st_size, digest, _installed_version())
