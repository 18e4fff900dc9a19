"""The public load / save API (Clause 12, 13).

``load`` memory-maps a file (a regular file only, opened without blocking) and decodes it
with onnxkit's own codec: tensor contents stay views of the mapped file until someone writes
to them; ``load(copy=True)`` reads the file into memory instead.  ``save`` writes the model in tag
order, retained unknown fields included (12.4).  External data (Clause 13) is resolved
through :mod:`onnxkit.external`: lazily by default, never outside the model's directory
unless asked (15.3, 15.5).  Importing this module makes an :class:`onnxkit.ir.Model` pickle as
its encoded bytes (``copyreg``); before that a model pickles field by field, as any record (:mod:`onnxkit.records`).
"""

from __future__ import annotations

import copyreg
import os
import stat
from typing import Any, Optional, Union

from . import ir
from .errors import DecodeError, LimitExceeded, NoSuchFileError, OnnxkitError
from .limits import DEFAULT_LIMITS, Limits
from .tensor_data import record_base_dir
from .wire import decode_message, encode

Source = Union[str, os.PathLike, bytes, bytearray, memoryview, Any]

#: External data modes of :func:`load`: resolve when first read, all at load, or not at all.
EXTERNAL_MODES = ("lazy", "eager", "never")


_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_BINARY", 0))


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def _regular(fd: int, what: str) -> os.stat_result:
    """``fstat`` of an opened model file; refuses anything but a regular file (FIFOs, devices, ...)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise OnnxkitError(f"{what} is {_kind(st.st_mode)}, not a regular file; a model is read from a regular file, "
                           "octets or a file object")
    return st


def _buffer(src: Source, copy: bool = False, limits: Limits = DEFAULT_LIMITS):
    """(buffer, base directory or None) for a path, octets or a binary file object.

    A path is opened without blocking (``O_NONBLOCK``: a FIFO cannot hang the open) and must
    be a regular file (``fstat`` after the open).  It is memory-mapped, or with ``copy=True``
    read into memory, so that later changes to the file cannot reach the model."""
    if isinstance(src, (bytes, bytearray, memoryview)):
        return memoryview(src), None
    if isinstance(src, (str, os.PathLike)):
        path = os.fspath(src)
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except FileNotFoundError:
            raise NoSuchFileError(f"no such model file: {path}") from None
        except IsADirectoryError:
            raise OnnxkitError(f"{path} is a directory, not a model file") from None
        except OSError as exc:
            raise OnnxkitError(f"cannot read {path}: {exc.strerror}") from None
        try:
            st = _regular(fd, f"model file {path}")
            buf = _read_fd(fd, st.st_size, path, copy, limits)
        finally:
            os.close(fd)
        return buf, os.path.dirname(os.path.abspath(path))
    if hasattr(src, "read"):
        name = getattr(src, "name", None)
        base = os.path.dirname(os.path.abspath(name)) if isinstance(name, str) and os.path.exists(name) else None
        try:
            fd = src.fileno()
        except (OSError, AttributeError, ValueError):
            fd = None
        if fd is not None:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode):
                try:
                    at_start = src.seekable() and src.tell() == 0
                except (OSError, ValueError):
                    at_start = False
                if at_start and not copy:
                    return _read_fd(fd, st.st_size, name, False, limits), base
            elif not (stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)):  # a stream the caller chose is read
                _regular(fd, f"file object {name!r}" if name is not None else "the file object")
        data = src.read()
        if not isinstance(data, (bytes, bytearray)):
            raise OnnxkitError("load() needs a binary file object (open the file with 'rb')")
        return memoryview(data), base
    raise OnnxkitError(f"load() takes a path, bytes or a binary file object, not {type(src).__name__}")


def _read_fd(fd: int, size: int, name, copy: bool, limits: Limits) -> memoryview:
    """The octets of the regular file ``fd``: mapped, or read into memory (``copy``)."""
    if size > limits.max_message_bytes:
        raise LimitExceeded(f"model file {name} holds {size} octets, more than max_message_bytes="
                            f"{limits.max_message_bytes} (Clause 12.5)", limit="max_message_bytes", value=size,
                            maximum=limits.max_message_bytes, path=str(name))
    if size == 0:
        return memoryview(b"")
    if not copy:
        import mmap  # a mapped model imports it: a session reads its file into memory

        try:
            return memoryview(mmap.mmap(fd, size, access=mmap.ACCESS_READ))
        except (OSError, ValueError) as exc:  # e.g. the file shrank since fstat, or no address space
            raise OnnxkitError(f"model file {name} cannot be mapped: {getattr(exc, 'strerror', None) or exc}") from None
    data = bytearray(size)
    view = memoryview(data)
    got = 0
    while got < size:
        n = os.preadv(fd, [view[got:]], got) if hasattr(os, "preadv") else _pread_into(fd, view, got)
        if n <= 0:  # the file shrank while read: what is there is what it holds
            break
        got += n
    return view[:got].toreadonly()  # the session's own copy: read-only, so its tensors are known not to change


def _pread_into(fd: int, view: memoryview, at: int) -> int:  # pragma: no cover - platforms without preadv
    chunk = os.pread(fd, len(view) - at, at)
    view[at:at + len(chunk)] = chunk
    return len(chunk)


def load(src: Source, *, external_data: str = "lazy", allow_outside: bool = False,
         limits: Limits = DEFAULT_LIMITS, base_dir: Optional[str] = None, copy: bool = False) -> ir.Model:
    """Read a model (ModelProto) from a path, octets or a binary file object.

    ``external_data``: ``'lazy'`` (default: references are checked now and files opened when a
    tensor is first read), ``'eager'`` (every file opened and verified now) or ``'never'``
    (references kept, reading them refused) — Clause 15.5.  ``allow_outside`` lets a
    reference resolve outside the model's directory; it is never the default (15.3).
    ``base_dir`` sets the directory references resolve against (default: the file's).
    ``copy``: read the file into memory instead of mapping it, so that rewriting or truncating
    it later cannot change the model or fault (what a session does by default).
    A path must name a regular file; it is opened without blocking, so a FIFO or a device is
    refused, never waited on.
    Raises :class:`DecodeError` for malformed octets, :class:`LimitExceeded` past a limit.
    """
    if external_data not in EXTERNAL_MODES:
        raise OnnxkitError(f"external_data must be one of {EXTERNAL_MODES}, not {external_data!r}")
    buf, found_dir = _buffer(src, copy, limits)
    tensors: list = []
    model = decode_message(buf, "ModelProto", limits, tensors=tensors)
    model.base_dir = base_dir or found_dir
    if any(t.is_external for t in tensors):
        from . import external

        external.attach(model, model.base_dir, external.ExternalDataOptions(mode=external_data,
                                                                            allow_outside=allow_outside, limits=limits),
                        tensors=tensors)
    else:  # no tensor is external: only the base directory to record, without the external-data modules
        model.base_dir = record_base_dir(model.base_dir, tensors, external_data != "never")
    return model


def save(model: ir.Model, path: Union[str, os.PathLike], *, external_data: bool = False,
         size_threshold: int = 1024, location: Optional[str] = None, checksum: Union[bool, str] = False) -> None:
    """Write ``model`` to ``path``.

    With ``external_data=True`` every tensor of at least ``size_threshold`` octets goes to
    one data file beside the model (``location``, default ``<file name>.data``), at
    page-aligned offsets (13.2), optionally with a ``checksum`` (13.3): ``True`` or ``'sha1'``
    writes the SHA-1 the clause names, ``'sha256'`` a SHA-256 (64 hexadecimal digits).

    The model goes to a temporary file beside ``path`` that then replaces it; a target that is
    not a regular file, or whose directory does not exist, is refused first (:func:`save_target`),
    and a failed write leaves the target as it was and no temporary file.
    """
    path = os.fspath(path)
    save_target(path)  # refused before anything (external data included) is written
    if external_data:
        from . import external

        model = external.externalize(model, path, size_threshold=size_threshold, location=location, checksum=checksum)
    chunks = encode(model, "ModelProto")
    import secrets  # imported by a save, not by every process that loads a model

    tmp = f"{path}.tmp-{secrets.token_hex(6)}"
    made = False
    try:
        with open(tmp, "xb") as fh:
            made = True
            fh.writelines(chunks)
        save_target(path)
        os.replace(tmp, path)
        made = False
    except OSError as exc:
        raise OnnxkitError(f"cannot save the model to {path!r}: {exc.strerror or exc}") from None
    finally:
        if made:  # whatever failed, the temporary file is not left behind
            try:
                os.unlink(tmp)
            except OSError:
                pass


def save_target(path: str) -> None:
    """Refuse, by an :class:`OnnxkitError` naming ``path``, a file :func:`save` must not write:
    one that exists and is not a regular file (a directory, a FIFO, a device node such as
    ``/dev/null``, a socket: replacing it by a regular file would destroy it), or one whose
    directory does not exist.  A symbolic link is judged by what it points to."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OnnxkitError(f"cannot save the model to {path!r}: {exc.strerror or exc}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (a FIFO, device or socket)"
        raise OnnxkitError(f"cannot save the model to {path!r}: it is {kind}; name a regular file")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise OnnxkitError(f"cannot save the model to {path!r}: its directory {parent!r} does not exist")


def to_bytes(model: ir.Model) -> bytes:
    """``model`` as octets (what :func:`save` writes, without external data)."""
    return b"".join(encode(model, "ModelProto"))


def _reduce_model(model: ir.Model):
    """How a :class:`~onnxkit.ir.Model` pickles once this module is imported: as its encoded
    bytes and the directory its external data resolves against (registered with
    :mod:`copyreg`: the codec registers itself for the IR, which does not import the codec)."""
    return (_model_from_bytes, (to_bytes(model), model.base_dir))


def _model_from_bytes(data: bytes, base_dir: Optional[str]) -> ir.Model:
    """Unpickle a :class:`~onnxkit.ir.Model` (external data references resolve against ``base_dir``)."""
    return load(data, base_dir=base_dir)


copyreg.pickle(ir.Model, _reduce_model)


def canonical_bytes(model: Union[ir.Model, Source]) -> bytes:
    """onnxkit's canonical form (docs/decisions.md, "Canonical form"): equal for encodings that differ only
    in field order, packed vs unpacked form, duplicate fields merged, or non-minimal varints."""
    if not isinstance(model, ir.Model):
        model = decode_message(_buffer(model)[0], "ModelProto")
    return b"".join(encode(model, "ModelProto", canonical=True))


def model_hash(model: Union[ir.Model, Source], *, with_data: bool = False) -> str:
    """SHA-256 of :func:`canonical_bytes`, as hex (``onnxkit hash``).

    The canonical form covers what the model file carries: an external tensor contributes
    its reference (location, offset, length, checksum), not its contents (Clause 12.8 is
    silent; this is onnxkit's position).  With ``with_data=True`` (``onnxkit hash
    --with-data``) the digest also covers, for every external tensor in the order the
    model holds them, its name and the octets its reference selects, so a changed data file
    changes the hash.  ``model`` as a path is loaded (external data resolved lazily, as
    :func:`load` does) for that.
    """
    import hashlib

    if not with_data:
        return hashlib.sha256(canonical_bytes(model)).hexdigest()
    from .external import iter_tensors, read_external

    if not isinstance(model, ir.Model):
        model = load(model)
    digest = hashlib.sha256(canonical_bytes(model))
    for tensor in iter_tensors(model):
        if tensor.is_external:
            contents = read_external(tensor)
            name = tensor.name.encode("utf-8", "surrogateescape")
            for part in (name, contents):
                digest.update(len(part).to_bytes(8, "little"))
                digest.update(part)
    return digest.hexdigest()


# -- value files of the ONNX 1-3 test package (input_N.pb / output_N.pb) ---------------------

_VALUE_MESSAGES = ("TensorProto", "SequenceProto", "MapProto", "OptionalProto")
_KIND_MESSAGE = {"tensor": "TensorProto", "sparse_tensor": "SparseTensorProto", "sequence": "SequenceProto",
                 "map": "MapProto", "optional": "OptionalProto"}


def load_value(src: Source, type: Optional[ir.Type] = None, message: Optional[str] = None):
    """Read a value file: a TensorProto, SequenceProto, MapProto or OptionalProto.

    Returns a numpy array, a list, a dict or None (an absent optional).  Which message the
    file holds is taken from ``message``, else from ``type`` (the model's declared type of the
    value), else guessed: the first of the four that decodes without stray fields and makes sense.
    """
    buf, base = _buffer(src)
    if message is None and type is not None:
        message = _KIND_MESSAGE.get(type.kind())
    if message is not None:
        return value_of(decode_message(buf, message))
    last = None
    for msg in _VALUE_MESSAGES:
        try:
            obj = decode_message(buf, msg)
        except OnnxkitError as exc:
            last = exc
            continue
        if _plausible(obj):
            return value_of(obj)
    raise DecodeError(f"not a TensorProto, SequenceProto, MapProto or OptionalProto ({last})" if last else
                      "not a TensorProto, SequenceProto, MapProto or OptionalProto")


def _no_unknown(obj) -> bool:
    return not ir.unknown_fields(obj)


def _plausible(obj) -> bool:
    from .dtypes import is_valid_tag

    if not _no_unknown(obj):
        return False
    if isinstance(obj, ir.Tensor):
        if not is_valid_tag(obj.data_type):
            return False
        try:
            value_of(obj)
        except OnnxkitError:
            return False
        return True
    if isinstance(obj, ir.SequenceData):
        return 1 <= obj.elem_type <= 5 or not (obj.tensor_values or obj.sequence_values or obj.map_values)
    if isinstance(obj, ir.MapData):
        return is_valid_tag(obj.key_type) and obj.values is not None
    if isinstance(obj, ir.OptionalData):
        return 0 <= obj.elem_type <= 5
    return True


def value_of(obj):
    """A decoded value message as numpy / list / dict / None."""
    if isinstance(obj, ir.Tensor):
        return obj.numpy()
    if ir.is_a(obj, "SparseTensor"):
        return obj
    if isinstance(obj, ir.SequenceData):
        kind = obj.elem_type
        items = {1: obj.tensor_values, 2: obj.sparse_tensor_values, 3: obj.sequence_values, 4: obj.map_values,
                 5: obj.optional_values}.get(kind)
        if items is None:
            items = obj.tensor_values or obj.sequence_values or obj.map_values or obj.optional_values or obj.sparse_tensor_values
        return [value_of(v) for v in items]
    if isinstance(obj, ir.MapData):
        keys = [k.decode("utf-8", "surrogateescape") for k in obj.string_keys] if obj.key_type == 8 else list(obj.keys)
        values = value_of(obj.values) if obj.values is not None else []
        if len(keys) != len(values):
            raise DecodeError(f"MapProto has {len(keys)} keys but {len(values)} values")
        return dict(zip(keys, values))
    if isinstance(obj, ir.OptionalData):
        for v in (obj.tensor_value, obj.sparse_tensor_value, obj.sequence_value, obj.map_value, obj.optional_value):
            if v is not None:
                return value_of(v)
        return None
    raise OnnxkitError(f"not a value message: {type(obj).__name__}")

