"""Storages: how the location of an external data reference is opened (Clause 13, 15.3).

A :class:`Storage` turns ``(base, location)`` into a :class:`StorageFile`: an opened file
whose size and identity are known *before* anything is mapped or allocated (15.4), and
whose octets :meth:`StorageFile.map` gives as a read-only, zero-copy buffer.  Storages
come from the ``onnxkit_storage`` hook; the host's own :class:`LocalFileStorage` (name
``'file'``) is registered through that same hook (``onnxkit.storage_plugin``).

:class:`LocalFileStorage` meets Clause 15.3 as follows (every refusal is an
:class:`ExternalRefError`, a :class:`~onnxkit.errors.ExternalDataError` carrying ``code``):

1. *Syntax* (:func:`check_location`, Clause 13.2 / Table 11): the location must be a
   non-empty relative path without NUL, without a ``..`` component, and not absolute in
   any form (``/x``, ``\\x``, ``C:\\x``, ``C:x``, ``\\\\server\\share``).  Both ``/`` and
   ``\\`` separate components, so a location written on Windows cannot smuggle a ``..``.
2. *Resolution*: every component, not the last alone, is ``lstat``-ed relative to a
   descriptor of the model directory; a symbolic link anywhere is refused, and the
   canonical path must lie inside the model directory.
3. *Constrained open*: the path is opened again component by component with
   ``openat(dir_fd, component, O_NOFOLLOW | O_DIRECTORY)`` (the last one without
   ``O_DIRECTORY``, with ``O_NONBLOCK`` so a FIFO cannot hang the reader); each descriptor
   is ``fstat``-ed and must be the ``(st_dev, st_ino)`` the resolution found, so a file or
   directory swapped between the check and the open is refused (no check-then-open race).
4. The opened file must be a regular file with exactly one hard link (``st_nlink == 1``).

The model directory itself is the caller's choice and is trusted (it may be reached
through a link); everything below it is not.

Resolution outside the model directory (``..`` components, absolute paths) is possible
only with the explicit ``allow_outside=True``, never by default (15.3); symbolic links
and hard links stay refused even then.

Known limit: a mapped file truncated by another process while mapped makes the access
fault (SIGBUS); this is inherent to memory mapping (13.2 invites it).  A session therefore
copies what it keeps by default (``InferenceSession(own_data=True)``); zero-copy mapping is
the explicit ``own_data=False``, for model directories no untrusted writer can reach.

Maps are shared per file (:func:`_shared_map`): 70,000 tensors of one file hold one map
and one descriptor, not one each.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import threading
import weakref
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Optional

from .errors import ExternalDataError

if TYPE_CHECKING:
    import mmap

__all__ = ["ExternalRefError", "Storage", "StorageFile", "LocalFileStorage", "check_location", "split_location"]


def _token() -> str:
    """A random suffix for a temporary file (``secrets`` imported here: an import cost that reading a
    model need not pay)."""
    import secrets

    return secrets.token_hex(6)


class ExternalRefError(ExternalDataError):
    """A refused or unresolvable external data reference.

    ``code`` says which rule (``'path-traversal'``, ``'symlink'``, ``'hardlink'``, ...),
    ``tensor`` and ``location`` which reference, ``clause`` where the rule is stated.
    """

    def __init__(self, code: str, message: str, *, tensor: str = "", location: Optional[str] = None, clause: str = ""):
        self.code = code
        self.tensor = tensor
        self.location = location
        self.clause = clause
        where = []
        if tensor:
            where.append(f"tensor {tensor!r}")
        if location is not None:
            where.append(f"location {location!r}")
        prefix = f"external data of {', '.join(where)}: " if where else "external data: "
        suffix = f" (Clause {clause}; {code})" if clause else f" ({code})"
        super().__init__(prefix + message + suffix)


# -- location syntax (Clause 13.2, Table 11) ---------------------------------------------

_DRIVE = re.compile(r"^[A-Za-z]:")


def split_location(location: str) -> list:
    """Components of ``location``; both ``/`` and ``\\`` separate, empty and ``.`` dropped."""
    return [p for p in re.split(r"[\\/]", location) if p not in ("", ".")]


def check_location(location, *, allow_outside: bool = False, tensor: str = "") -> list:
    """Check the syntax of a location (Clause 13.2) and return its components.

    Refuses a non-string, empty or NUL-containing location, or one ending with a separator
    (``"data.bin/"`` names a directory; ``'invalid-location'``), an
    absolute path in POSIX, drive or UNC form (``'absolute-path'``) and a ``..`` component
    (``'path-traversal'``).  ``allow_outside=True`` admits the last two (Clause 15.3 lets
    an explicit configuration resolve outside the model directory); the first never.
    """
    if not isinstance(location, str) or not location:
        raise ExternalRefError("missing-location", "the reference has no location (Table 11: location is mandatory)",
                               tensor=tensor, location=location if isinstance(location, str) else None, clause="13.2")
    if "\x00" in location:
        raise ExternalRefError("invalid-location", "the location contains a NUL character", tensor=tensor,
                               location=location, clause="13.2")
    if location[-1] in "/\\":
        raise ExternalRefError("invalid-location", "the location ends with a path separator, so it names a directory, "
                               "not a file (Table 11: the location names the file holding the data)", tensor=tensor,
                               location=location, clause="13.2")
    parts = split_location(location)
    if not parts:
        raise ExternalRefError("invalid-location", "the location names no file", tensor=tensor,
                               location=location, clause="13.2")
    if not allow_outside:
        if location[0] in "/\\" or _DRIVE.match(location):
            raise ExternalRefError(
                "absolute-path", "the location is an absolute path; Table 11 requires a path relative to the "
                "directory holding the model file", tensor=tensor, location=location, clause="13.2, 15.3")
        if ".." in parts:
            raise ExternalRefError(
                "path-traversal", "the location contains a parent-directory component '..'", tensor=tensor,
                location=location, clause="13.2, 15.3")
    elif _DRIVE.match(location) or location.startswith(("\\\\", "//")) and os.sep == "/":
        # Drive and UNC forms name nothing on this platform even when outside is allowed.
        raise ExternalRefError("absolute-path", "drive and UNC paths are not supported on this platform",
                               tensor=tensor, location=location, clause="15.3")
    return parts


# -- the contract ----------------------------------------------------------------------------

class StorageFile:
    """An opened external data file: ``size`` and ``key`` are known on open, :meth:`map` maps it.

    ``key`` identifies the file's contents for caches (same key, same octets; the local
    storage uses device, inode, size, mtime and ctime); ``description`` names it in
    messages.  Build one with :meth:`from_buffer` (a storage holding octets in memory) or
    from a descriptor (``fd=``, what :class:`LocalFileStorage` does).  Close it, or use it
    as a context manager; a buffer from :meth:`map` outlives the close.
    """

    def __init__(self, *, size: int, key: Hashable, description: str = "", fd: Optional[int] = None,
                 buffer=None):
        self.size = int(size)
        self.key = key
        self.description = description
        self._fd = fd
        self._buffer = buffer

    @classmethod
    def from_buffer(cls, data, *, key: Hashable, description: str = "") -> "StorageFile":
        view = memoryview(data).cast("B")
        return cls(size=view.nbytes, key=key, description=description, buffer=view.toreadonly())

    def map(self) -> memoryview:
        """The whole file as a read-only ``memoryview`` (format 'B'): a memory map, not a copy.

        One map (and so one descriptor) per file however many tensors read it: maps are
        shared by ``key`` while any view of them lives.  A map the system refuses (address
        space, map count) is an :class:`ExternalRefError` ``'map-failed'``, never an OSError."""
        if self._buffer is None:
            if self._fd is None:
                raise ExternalRefError("closed", "the storage file was closed before it was mapped",
                                       location=self.description or None)
            if self.size == 0:
                self._buffer = memoryview(b"")
            else:
                self._buffer = memoryview(_shared_map(self._fd, self.size, self.key, self.description))
        return self._buffer

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "StorageFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):  # pragma: no cover - safety net
        try:
            self.close()
        except OSError:  # the descriptor is already gone (closed elsewhere): nothing is left to release
            pass


_MAPS: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
_MAPS_LOCK = threading.Lock()


def _shared_map(fd: int, size: int, key: Hashable, description: str) -> mmap.mmap:
    """The read-only map of the file ``key`` names (13.2): one per file while any view of it lives."""
    with _MAPS_LOCK:
        m = _MAPS.get(key)
        if m is not None and not m.closed and len(m) == size:
            return m
        import mmap  # the first external file mapped imports it

        try:
            # mmap dups the descriptor, so the map stays valid after close(); read-only (13.2).
            m = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        except (OSError, ValueError, OverflowError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ExternalRefError("map-failed", f"the file of {size} octets cannot be mapped: {why} (the address "
                                   "space or the number of maps is exhausted)", location=description or None,
                                   clause="15.4") from None
        try:
            _MAPS[key] = m
        except TypeError:  # a key that cannot be hashed: not shared
            pass
        return m


class Storage:
    """The contract a storage plugin implements (hook ``onnxkit_storage``).

    ``name``: unique key in :attr:`Registry.storages` (``'file'`` is the local filesystem).
    ``open(base, location, *, allow_outside=False, tensor='')``: the file ``location`` names,
    relative to ``base`` (for the local storage the model directory; a storage decides what
    its ``base`` is, e.g. an archive), as a :class:`StorageFile`.  It SHALL enforce Clause
    15.3 as its medium allows and raise :class:`ExternalRefError` otherwise, and SHALL NOT
    read or allocate the contents (``size`` first, 15.4).
    ``size(...)``: the size in octets; ``read(...)``: the whole file, mapped.
    ``write(base, location, chunks)``: write the octets
    of ``chunks`` in order as the whole new file; returns the number written.
    """

    name: str = ""

    def open(self, base, location: str, *, allow_outside: bool = False, tensor: str = "") -> StorageFile:
        raise NotImplementedError

    def size(self, base, location: str, *, allow_outside: bool = False, tensor: str = "") -> int:
        with self.open(base, location, allow_outside=allow_outside, tensor=tensor) as f:
            return f.size

    def read(self, base, location: str, *, allow_outside: bool = False, tensor: str = "") -> memoryview:
        """The whole file as a read-only buffer (a memory map where the storage can)."""
        with self.open(base, location, allow_outside=allow_outside, tensor=tensor) as f:
            return f.map()

    def write(self, base, location: str, chunks: Iterable, *, tensor: str = "") -> int:
        raise ExternalRefError("read-only-storage", f"storage {self.name!r} cannot write", tensor=tensor,
                               location=location)


# -- the local filesystem ------------------------------------------------------------------

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_NOCTTY = getattr(os, "O_NOCTTY", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_DIR_FD = os.open in os.supports_dir_fd and os.stat in os.supports_dir_fd and bool(_NOFOLLOW)


class LocalFileStorage(Storage):
    """External data in files on the local filesystem, resolved per Clause 15.3 (module docstring)."""

    name = "file"

    def __repr__(self) -> str:
        return "LocalFileStorage()"

    # A test seam: called after resolution and before the constrained open, with the
    # resolution (a list of (path, (st_dev, st_ino)) for every component).  Tests swap the
    # file here to show the open detects it (Clause 15.3, fourth paragraph).
    def _before_open(self, resolution: list) -> None:
        pass

    def open(self, base, location: str, *, allow_outside: bool = False, tensor: str = "") -> StorageFile:
        parts = check_location(location, allow_outside=allow_outside, tensor=tensor)
        if base is None:
            raise ExternalRefError("no-base-dir", "no model directory is known to resolve the location against "
                                   "(load the model from a path, or call onnxkit.external.attach)",
                                   tensor=tensor, location=location, clause="13.2")
        base = os.path.abspath(os.fspath(base))
        absolute = allow_outside and location[0] in "/\\"

        def refuse(code, message, clause="15.3"):
            return ExternalRefError(code, message, tensor=tensor, location=location, clause=clause)

        try:
            base_fd = os.open("/" if absolute else base, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        except OSError as exc:
            raise refuse("not-found", f"the model directory {base!r} cannot be opened: {exc.strerror}", "13.2") from None
        try:
            if not _DIR_FD:  # pragma: no cover - platforms without openat/O_NOFOLLOW
                return self._open_by_path(base, location, parts, absolute, allow_outside, refuse)
            # 2. Resolution: lstat every prefix relative to the directory descriptor.
            resolution = []
            for i in range(len(parts)):
                prefix = "/".join(parts[: i + 1])
                try:
                    st = os.stat(prefix, dir_fd=base_fd, follow_symlinks=False)
                except FileNotFoundError:
                    raise refuse("not-found", f"{prefix!r} does not exist in {base!r}", "13.2") from None
                except OSError as exc:
                    raise refuse("unreadable", f"{prefix!r} cannot be examined: {exc.strerror}", "13.2") from None
                if stat.S_ISLNK(st.st_mode):
                    which = "the last component" if i == len(parts) - 1 else f"component {prefix!r}"
                    raise refuse("symlink", f"{which} is a symbolic link; no component of an external data path "
                                 "may be one")
                if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
                    raise refuse("not-found", f"{prefix!r} is not a directory", "13.2")
                resolution.append((prefix, (st.st_dev, st.st_ino)))
            if not allow_outside:
                real_base = os.path.realpath(base)
                real = os.path.realpath(os.path.join(base, *parts))
                if os.path.commonpath([real_base, real]) != real_base:
                    raise refuse("outside-directory", f"the location resolves to {real!r}, outside the model "
                                 f"directory {real_base!r}")
            self._before_open(resolution)
            # 3. Constrained open, component by component, each checked against the resolution.
            fd = os.dup(base_fd)
            try:
                for i, part in enumerate(parts):
                    last = i == len(parts) - 1
                    flags = os.O_RDONLY | _NOFOLLOW | _CLOEXEC | (_NONBLOCK | _NOCTTY if last else _DIRECTORY)
                    prefix, identity = resolution[i]
                    try:
                        nfd = os.open(part, flags, dir_fd=fd)
                    except OSError as exc:
                        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
                            raise refuse("symlink", f"{prefix!r} became a symbolic link or changed between "
                                         "resolution and open") from None
                        if exc.errno == errno.ENOENT:
                            raise refuse("file-changed", f"{prefix!r} disappeared between resolution and open") from None
                        raise refuse("unreadable", f"{prefix!r} cannot be opened: {exc.strerror}", "13.2") from None
                    os.close(fd)
                    fd = nfd
                    st = os.fstat(fd)
                    if (st.st_dev, st.st_ino) != identity:
                        raise refuse("file-changed", f"{prefix!r} opened is not the file the resolution "
                                     "identified (it was replaced between resolution and open)")
                return self._checked(fd, st, base, location, refuse)
            except BaseException:  # cleanup only: the descriptor is closed and the fault re-raised as it is
                os.close(fd)
                raise
        finally:
            os.close(base_fd)

    @staticmethod
    def _checked(fd: int, st: os.stat_result, base: str, location: str, refuse) -> StorageFile:
        # 4. What was opened: a regular file with one link.
        if not stat.S_ISREG(st.st_mode):
            raise refuse("not-regular", "the location does not name a regular file", "13.2")
        if st.st_nlink > 1:
            raise refuse("hardlink", f"the file has {st.st_nlink} hard links; a file with more than one may be a "
                         "link to a file outside the model directory")
        key = ("file", st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        return StorageFile(size=st.st_size, key=key, description=os.path.join(base, location), fd=fd)

    def _open_by_path(self, base, location, parts, absolute, allow_outside, refuse):  # pragma: no cover
        # Fallback without openat: lstat every prefix, open, then compare identities.
        path = os.path.join("/" if absolute else base, *parts)
        resolution = []
        for i in range(len(parts)):
            prefix = os.path.join("/" if absolute else base, *parts[: i + 1])
            try:
                st = os.lstat(prefix)
            except OSError as exc:
                raise refuse("not-found", f"{prefix!r}: {exc.strerror}", "13.2") from None
            if stat.S_ISLNK(st.st_mode) or getattr(st, "st_reparse_tag", 0):
                raise refuse("symlink", f"component {prefix!r} is a symbolic link")
            resolution.append((prefix, (st.st_dev, st.st_ino)))
        if not allow_outside:
            real_base, real = os.path.realpath(base), os.path.realpath(path)
            if os.path.commonpath([real_base, real]) != real_base:
                raise refuse("outside-directory", f"the location resolves to {real!r}, outside {real_base!r}")
        self._before_open(resolution)
        fd = os.open(path, os.O_RDONLY | _BINARY | _NOFOLLOW)
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != resolution[-1][1]:
            os.close(fd)
            raise refuse("file-changed", "the file opened is not the file the resolution identified")
        try:
            return self._checked(fd, st, base, location, refuse)
        except BaseException:  # cleanup only: the descriptor is closed and the fault re-raised as it is
            os.close(fd)
            raise

    def write(self, base, location: str, chunks: Iterable, *, tensor: str = "") -> int:
        """Write ``chunks`` as the new file ``location`` under ``base`` (never outside it).

        Intermediate directories are created; none may be a symbolic link.  The data goes
        to a fresh temporary file that then replaces the target atomically, so a reader
        mapping the old file keeps its octets and a hard link at the target is not written
        through.  Returns the number of octets written.
        """
        parts = check_location(location, allow_outside=False, tensor=tensor)
        base = os.path.abspath(os.fspath(base))

        def refuse(code, message):
            return ExternalRefError(code, message, tensor=tensor, location=location, clause="15.3")

        os.makedirs(base, exist_ok=True)
        if not _DIR_FD:  # pragma: no cover
            path = os.path.join(base, *parts)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.tmp-{_token()}"
            with open(tmp, "xb") as f:
                n = _write_all(f, chunks)
            os.replace(tmp, path)
            return n
        fd = os.open(base, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        try:
            for part in parts[:-1]:
                try:
                    os.mkdir(part, dir_fd=fd)
                except FileExistsError:
                    pass
                try:
                    nfd = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=fd)
                except OSError as exc:
                    raise refuse("symlink" if exc.errno in (errno.ELOOP, errno.ENOTDIR) else "write-failed",
                                 f"directory {part!r} cannot be used: {exc.strerror}") from None
                os.close(fd)
                fd = nfd
            name = parts[-1]
            try:  # a directory, FIFO or device at the target is not replaced by a regular file
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise refuse("write-failed", f"{location!r} exists and is not a regular file (a directory, "
                             "FIFO, device, socket or symbolic link): it is not replaced")
            tmp = f".{name}.tmp-{_token()}"
            wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644, dir_fd=fd)
            try:
                with os.fdopen(wfd, "wb") as f:
                    n = _write_all(f, chunks)
                os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
            except BaseException:  # cleanup only: the temporary file is removed and the fault re-raised
                try:
                    os.unlink(tmp, dir_fd=fd)
                except OSError:
                    pass
                raise
            return n
        finally:
            os.close(fd)


def _write_all(f, chunks: Iterable) -> int:
    n = 0
    for chunk in chunks:
        view = memoryview(chunk).cast("B") if not isinstance(chunk, bytes) else chunk
        f.write(view)
        n += len(view)
    return n
