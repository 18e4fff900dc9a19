"""Reading one tensor's external data (Clause 13.1-13.3, 15.3-15.5): references, limits, octets.

The half of :mod:`onnxkit.external` that needs no model: it works on one tensor through its
fields (``name``, ``data_type``, ``dims``, ``external_data``, ``data_location``, ``base_dir``,
``external_options`` and the storage fields), so the tensor codec (:mod:`onnxkit.tensor_data`)
reads external contents through it without depending on the IR or the model-level operations.
Its names are public through :mod:`onnxkit.external`; the contracts are stated there and on
each function.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Optional, Union

from onnxkit import records
from onnxkit import record_methods
import numpy as np

from .dtypes import DataType, element_type
from .errors import LimitExceeded, OnnxkitTypeError
from .limits import DEFAULT_LIMITS, Limits
from .storage import ExternalRefError, LocalFileStorage, Storage, check_location

__all__ = ["CHECKSUM_ALGORITHMS", "DEFAULT_OPTIONS", "EXTERNAL", "ExternalDataOptions", "ExternalRef", "KEYS",
           "declared_nbytes", "options_of", "parse_reference", "read_external", "resolve_storage"]

#: ``TensorProto.DataLocation.EXTERNAL`` (Clause 13.1; :class:`onnxkit.ir.DataLocation` names it).
EXTERNAL = 1

#: The keys of Table 11; any other key is refused (13.2).
KEYS = ("location", "offset", "length", "checksum")
_INT = re.compile(r"[0-9]{1,20}")
#: A ``checksum`` value (13.3) and the digest it is: 40 hex digits SHA-1 (the clause's digest),
#: 64 hex digits SHA-256 (onnxkit's answer to the clause's editorial note: the choice is
#: encoded by the digest's length, so no key outside Table 11 is needed).
_DIGEST_BY_LENGTH = {40: "sha1", 64: "sha256"}
_HEX_DIGEST = re.compile(r"[0-9A-Fa-f]{40}|[0-9A-Fa-f]{64}")
CHECKSUM_ALGORITHMS = tuple(_DIGEST_BY_LENGTH.values())


@records.frozen
class ExternalRef:
    """One parsed reference (Table 11); ``offset``/``length``/``checksum`` None where absent."""

    location: str
    offset: Optional[int] = None
    length: Optional[int] = None
    checksum: Optional[str] = None
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH


def _mode(_, __, value):
    if value not in ("lazy", "eager", "never"):
        raise ValueError(f"ExternalDataOptions.mode must be 'lazy', 'eager' or 'never', not {value!r}")


@records.frozen
class ExternalDataOptions:
    """How external data is resolved (see the module docstring for the defaults).

    ``mode``: ``'lazy'`` check references on load, open files on first use; ``'eager'``
    also open and verify (size, checksum) every file on load; ``'never'`` resolve nothing
    (:func:`read_external` refuses).  ``allow_outside``: the explicit configuration of
    Clause 15.3 that admits ``..`` and absolute locations (symbolic and hard links stay
    refused).  ``limits``: the documented limits of 15.4.  ``storage``: a :class:`Storage`
    or the name of a registered one (default the registry's ``'file'``).
    """

    mode: str = records.field(default="lazy", validator=_mode)
    allow_outside: bool = False
    limits: Limits = DEFAULT_LIMITS
    storage: Union[None, str, Storage] = None
    __repr__, __eq__, __hash__ = record_methods.REPR, record_methods.EQ, record_methods.HASH


DEFAULT_OPTIONS = ExternalDataOptions()


def _refuse(code: str, message: str, tensor, location=None, clause: str = "13.2") -> ExternalRefError:
    return ExternalRefError(code, message, tensor=getattr(tensor, "name", "") or "", location=location, clause=clause)


# -- Table 11 --------------------------------------------------------------------------------

def parse_reference(tensor: Tensor, *, allow_outside: bool = False) -> ExternalRef:
    """The reference of ``tensor`` (Clause 13.2, Table 11), its location syntax checked.

    Refuses a key not in Table 11 (``'unknown-key'``), a repeated key (``'duplicate-key'``),
    no location (``'missing-location'``), an offset or length that is not a non-negative
    decimal integer (``'bad-offset'``, ``'bad-length'``), a checksum that is not 40 hex
    digits (``'bad-checksum'``) and a location :func:`onnxkit.storage.check_location` refuses.
    """
    values: dict = {}
    for entry in tensor.external_data:
        key, value = getattr(entry, "key", None), getattr(entry, "value", None)
        if key not in KEYS:
            raise _refuse("unknown-key", f"key {key!r} is not one of Table 11 ({', '.join(KEYS)}); a consumer "
                          "shall reject a reference carrying a key not listed", tensor)
        if key in values:
            raise _refuse("duplicate-key", f"key {key!r} appears more than once", tensor, values.get("location"))
        values[key] = value
    location = values.get("location")
    if not location:
        raise _refuse("missing-location", "the reference has no 'location' (mandatory in Table 11)", tensor)
    check_location(location, allow_outside=allow_outside, tensor=getattr(tensor, "name", ""))
    ints = {}
    for key in ("offset", "length"):
        if key in values:
            v = values[key]
            if not isinstance(v, str) or not _INT.fullmatch(v):
                raise _refuse(f"bad-{key}", f"{key} {v!r} is not a non-negative decimal integer", tensor, location)
            ints[key] = int(v)
    checksum = values.get("checksum")
    if checksum is not None and (not isinstance(checksum, str) or not _HEX_DIGEST.fullmatch(checksum)):
        raise _refuse("bad-checksum", f"checksum {checksum!r} is neither a SHA-1 digest (40 hexadecimal digits) "
                                      "nor a SHA-256 digest (64)",
                      tensor, location, "13.3")
    return ExternalRef(location, ints.get("offset"), ints.get("length"), checksum.lower() if checksum else None)


def declared_nbytes(tensor: Tensor, limits: Limits = DEFAULT_LIMITS) -> int:
    """Octets the raw storage of ``tensor`` needs: ceil(N * bits / 8) (6.3.4), checked against limits (15.4).

    Raises ``LimitExceeded`` (``code 'limit-exceeded'``) for a dimension or a size over the
    limits, before anything is opened or allocated.
    """
    name = tensor.name
    try:
        et = element_type(tensor.data_type, where=f"tensor {name!r}")
    except OnnxkitTypeError as exc:
        raise _refuse("unsupported-type", str(exc), tensor) from None
    if et.tag == DataType.STRING:
        raise _refuse("unsupported-type", "a STRING tensor has no raw storage, so it cannot be external", tensor,
                      clause="13.1")
    n = 1
    for d in tensor.dims:
        if not isinstance(d, (int, np.integer)) or d < 0:
            raise _refuse("bad-dims", f"dimension {d!r} is not a non-negative integer", tensor)
        _check_limit(limits, "max_dim_extent", int(d), name)
        n *= int(d)
    nbytes = (n * et.bits + 7) // 8
    _check_limit(limits, "max_tensor_bytes", nbytes, name)
    return nbytes


def _check_limit(limits: Limits, which: str, value: int, name: str, location: Optional[str] = None) -> None:
    where = f"tensor {name!r}" + (f", location {location!r}" if location is not None else "")
    try:
        limits.check(which, value, where=where)
    except LimitExceeded as exc:
        exc.code = "limit-exceeded"
        raise


# -- options recorded per tensor by attach() ---------------------------------------------------



def options_of(tensor: Tensor) -> Optional[ExternalDataOptions]:
    """The options :func:`attach` recorded for ``tensor``, or None."""
    return tensor.external_options


def resolve_storage(storage, options: Optional[ExternalDataOptions]) -> Storage:
    """The storage to open or write through: ``storage`` (a :class:`Storage` or a registered
    name), else the options' storage, else the registry's ``'file'`` (the host's own when no
    plugin provides it); an unknown name is refused by name."""
    s = storage if storage is not None else (options.storage if options is not None else None)
    if isinstance(s, str) or s is None:
        from .registry import get_registry

        # building the registry reports plugin faults instead of raising: a raise here is a bug, and propagates
        table = get_registry().storages
        if s is None:
            return table.get("file") or LocalFileStorage()
        if s not in table:
            raise ExternalRefError("unknown-storage", f"no storage named {s!r} is registered "
                                   f"(known: {', '.join(sorted(table)) or 'none'})", clause="13")
        return table[s]
    return s


# -- checksums (13.3), hashed once per file ------------------------------------------------------

_DIGESTS: "OrderedDict" = OrderedDict()
_DIGESTS_LOCK = threading.Lock()
_DIGESTS_MAX = 256


def _file_digest(key, buffer, algorithm: str) -> str:
    """The hex digest (``'sha1'`` or ``'sha256'``) of a whole external file, cached per file."""
    key = (key, algorithm)
    with _DIGESTS_LOCK:
        digest = _DIGESTS.get(key)
        if digest is not None:
            _DIGESTS.move_to_end(key)
            return digest
    import hashlib  # imported here: its import cost is paid only by a model with a digest to check

    digest = getattr(hashlib, algorithm)(buffer).hexdigest()
    with _DIGESTS_LOCK:
        _DIGESTS[key] = digest
        while len(_DIGESTS) > _DIGESTS_MAX:
            _DIGESTS.popitem(last=False)
    return digest


def _carries_contents(t: Tensor) -> bool:
    if t.raw_data is not None and len(t.raw_data):
        return True
    return bool(t.string_data) or any(getattr(t, f).size for f in
                                      ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"))


# -- reading -----------------------------------------------------------------------------------

def read_external(tensor: Tensor, *, storage=None, options: Optional[ExternalDataOptions] = None) -> memoryview:
    """The octets of external tensor ``tensor`` (raw-storage layout, 13.1), read-only and zero-copy.

    Resolved against ``tensor.base_dir`` through ``storage`` (default: the options'
    storage, else the registry's ``'file'``).  ``options`` default to those :func:`attach`
    recorded for the tensor, else :data:`DEFAULT_OPTIONS`.  In order: the declared size
    against the limits (15.4), the reference (13.2), the safe open (15.3), the file size
    against the limit and against offset + length (13.2, 15.4; before mapping), the length
    against what the dims need (6.3.4), the checksum over the whole file (13.3).
    """
    opts = options or options_of(tensor) or DEFAULT_OPTIONS
    name = tensor.name
    if opts.mode == "never":
        raise _refuse("resolution-disabled", "external data resolution was disabled (ExternalDataOptions(mode="
                      "'never')); call onnxkit.external.attach(model, base_dir, ExternalDataOptions(mode='lazy')) "
                      "to resolve it", tensor, clause="15.5")
    if tensor.data_location != EXTERNAL:
        raise _refuse("not-external", "the tensor's data location is not EXTERNAL", tensor, clause="13.1")
    if _carries_contents(tensor):
        raise _refuse("embedded-and-external", "the tensor is external and also carries contents in the model "
                      "file", tensor, clause="13.1")
    need = declared_nbytes(tensor, opts.limits)
    ref = parse_reference(tensor, allow_outside=opts.allow_outside)
    loc = ref.location
    if ref.length is not None and ref.length != need:
        raise _refuse("size-mismatch", f"length {ref.length} differs from the {need} octets dims {list(tensor.shape)}"
                      " of this element type need", tensor, loc, "6.3.4, 13.1")
    if tensor.base_dir is None:
        raise _refuse("no-base-dir", "no model directory is recorded for the tensor (load the model from a path, "
                      "or call onnxkit.external.attach)", tensor, loc)
    opened = resolve_storage(storage, opts).open(tensor.base_dir, loc, allow_outside=opts.allow_outside, tensor=name)
    with opened as f:
        _check_limit(opts.limits, "max_external_file_bytes", f.size, name, loc)
        offset = ref.offset or 0
        length = ref.length if ref.length is not None else max(f.size - offset, 0)
        if offset + length > f.size:
            raise _refuse("short-file", f"the file has {f.size} octets, shorter than offset {offset} + length "
                          f"{length} = {offset + length}", tensor, loc)
        if length != need:
            raise _refuse("size-mismatch", f"the contents run {length} octets (offset {offset} to the end of the "
                          f"file) but dims {list(tensor.shape)} need {need}", tensor, loc, "6.3.4, 13.1")
        buffer = f.map()
        if ref.checksum is not None:
            algorithm = _DIGEST_BY_LENGTH[len(ref.checksum)]
            actual = _file_digest(f.key, buffer, algorithm)
            if actual != ref.checksum:
                raise _refuse("checksum-mismatch", f"{algorithm.upper()} of the file is {actual}, the reference says "
                              f"{ref.checksum}", tensor, loc, "13.3")
    return buffer[offset:offset + length]
