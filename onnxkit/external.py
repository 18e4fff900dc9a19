"""External data (Clause 13): parse references, resolve them safely, write them.

* :func:`parse_reference` checks one tensor's reference against Table 11 (13.2).
* :func:`read_external` returns the octets of one external tensor, in raw-storage layout
  (13.1), as a read-only, zero-copy ``memoryview`` of a memory map, after checking the
  declared size against the documented limits and the file size before mapping anything
  (15.4), and the checksum over the whole file where one is given (13.3: SHA-1, or SHA-256
  when the value has 64 hexadecimal digits).
* :func:`attach` is what the loader calls after decoding: it records the model directory
  on every tensor and applies an :class:`ExternalDataOptions` policy.
* :func:`externalize` returns a copy of a model whose large tensors are moved to one data
  file, at page-aligned offsets (13.2).

Default policy (documented per 15.4/15.5): ``mode='lazy'`` (references are checked when
the model is loaded, files are opened when a tensor's contents are first used),
``allow_outside=False`` (a reference resolving outside the model directory is always
refused unless the caller sets ``allow_outside=True`` explicitly, 15.3), limits
:data:`onnxkit.limits.DEFAULT_LIMITS` (``max_tensor_bytes`` 16 GiB, ``max_dim_extent``
2**40, ``max_external_file_bytes`` 1 TiB).  For an untrusted model use ``mode='never'``
and resolve later by calling :func:`attach` again with ``'lazy'`` or ``'eager'`` (15.5).

Every refusal is an :class:`onnxkit.storage.ExternalRefError` (an ``ExternalDataError``
with ``code``, ``tensor``, ``location``, ``clause``), or a ``LimitExceeded`` (``code ==
'limit-exceeded'``) for a documented limit.
"""

from __future__ import annotations

import copy
import hashlib
import mmap
import os
import re
import threading
from collections import OrderedDict
from typing import Iterator, Optional, Union

import attrs
import numpy as np

from .dtypes import DataType, element_type
from .errors import LimitExceeded, OnnxkitError, OnnxkitTypeError
from .ir.attribute import Attribute
from .ir.graph import Function, Graph, Model, Node, TrainingInfo
from .ir.tensor import DataLocation, SparseTensor, StringStringEntry, Tensor
from .limits import DEFAULT_LIMITS, Limits
from .storage import ExternalRefError, LocalFileStorage, Storage, check_location

__all__ = ["ExternalRef", "ExternalDataOptions", "parse_reference", "read_external", "attach", "externalize",
           "iter_tensors", "declared_nbytes", "KEYS"]

#: The keys of Table 11; any other key is refused (13.2).
KEYS = ("location", "offset", "length", "checksum")
_INT = re.compile(r"[0-9]{1,20}")
#: A ``checksum`` value (13.3) and the digest it is: 40 hex digits SHA-1 (the clause's digest),
#: 64 hex digits SHA-256 (onnxkit's answer to the clause's editorial note: the choice is
#: encoded by the digest's length, so no key outside Table 11 is needed).
_DIGEST_BY_LENGTH = {40: "sha1", 64: "sha256"}
_HEX_DIGEST = re.compile(r"[0-9A-Fa-f]{40}|[0-9A-Fa-f]{64}")
CHECKSUM_ALGORITHMS = tuple(_DIGEST_BY_LENGTH.values())


@attrs.frozen
class ExternalRef:
    """One parsed reference (Table 11); ``offset``/``length``/``checksum`` None where absent."""

    location: str
    offset: Optional[int] = None
    length: Optional[int] = None
    checksum: Optional[str] = None


def _mode(_, __, value):
    if value not in ("lazy", "eager", "never"):
        raise ValueError(f"ExternalDataOptions.mode must be 'lazy', 'eager' or 'never', not {value!r}")


@attrs.frozen
class ExternalDataOptions:
    """How external data is resolved (see the module docstring for the defaults).

    ``mode``: ``'lazy'`` check references on load, open files on first use; ``'eager'``
    also open and verify (size, checksum) every file on load; ``'never'`` resolve nothing
    (:func:`read_external` refuses).  ``allow_outside``: the explicit configuration of
    Clause 15.3 that admits ``..`` and absolute locations (symbolic and hard links stay
    refused).  ``limits``: the documented limits of 15.4.  ``storage``: a :class:`Storage`
    or the name of a registered one (default the registry's ``'file'``).
    """

    mode: str = attrs.field(default="lazy", validator=_mode)
    allow_outside: bool = False
    limits: Limits = DEFAULT_LIMITS
    storage: Union[None, str, Storage] = None


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


def _storage(storage, options: Optional[ExternalDataOptions]) -> Storage:
    s = storage if storage is not None else (options.storage if options is not None else None)
    if isinstance(s, str) or s is None:
        try:
            from .registry import get_registry

            table = get_registry().storages
        except Exception:  # the registry cannot be built: the host's own storage still works
            table = {}
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
    if tensor.data_location != DataLocation.EXTERNAL:
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
    with _storage(storage, opts).open(tensor.base_dir, loc, allow_outside=opts.allow_outside, tensor=name) as f:
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


# -- attaching a loaded model -------------------------------------------------------------------

def attach(model, base_dir, options: Optional[ExternalDataOptions] = None, tensors=None) -> None:
    """Record ``base_dir`` (the directory holding the model file) and apply ``options``.

    Called by the loader after decoding; callable again to change the policy (the opt-in
    step of 15.5).  Every tensor of the model (:func:`iter_tensors`) gets ``base_dir``
    (absolute, so resolution does not depend on the working directory later, 13.2 NOTE)
    and the options.  ``'lazy'``: each external reference is checked (keys, location
    syntax, declared size against the limits) without opening a file.  ``'eager'``: each
    is also opened and verified (size, checksum).  ``'never'``: nothing is checked or
    resolved and ``base_dir`` is not recorded on tensors; :func:`read_external` refuses.
    ``tensors``: every tensor of the model when the caller has them already (the decoder
    collects them), sparing a walk of the model.
    """
    opts = options or DEFAULT_OPTIONS
    base = os.path.abspath(os.fspath(base_dir)) if base_dir is not None else None
    if isinstance(model, Model):
        model.base_dir = base
    tensor_base = None if opts.mode == "never" else base
    for t in (iter_tensors(model) if tensors is None else tensors):
        t.base_dir = tensor_base
        if not t.is_external:
            continue
        t.external_options = opts
        if opts.mode == "never":
            continue
        if opts.mode == "lazy":
            declared_nbytes(t, opts.limits)
            parse_reference(t, allow_outside=opts.allow_outside)
        else:
            read_external(t, options=opts)


# -- walking a model -------------------------------------------------------------------------------

def _children(o):
    if isinstance(o, Graph):
        return [*o.initializer, *o.sparse_initializer, *o.node]
    if isinstance(o, Node):
        return o.attribute
    if isinstance(o, Attribute):
        v = o.value
        return v if isinstance(v, list) else [v]
    if isinstance(o, SparseTensor):
        return [o.values, o.indices]
    if isinstance(o, Model):
        return [o.graph, *o.training_info, *o.functions]
    if isinstance(o, TrainingInfo):
        return [o.initialization, o.algorithm]
    if isinstance(o, Function):
        return [*o.attribute_proto, *o.node]
    if isinstance(o, (list, tuple)):
        return o
    return ()


def iter_tensors(root) -> Iterator[Tensor]:
    """Every :class:`Tensor` in ``root`` (a model, graph, function, node, ...), each once, in order.

    Graph initializers, sparse initializers' values and indices, tensors in attributes
    (Constant nodes and any other, TENSOR(S) and SPARSE_TENSOR(S)), subgraphs in attributes,
    model-local functions (default attribute values included) and training_info graphs.
    Iterative, so a deeply nested model cannot exhaust the stack.
    """
    seen = set()
    stack = [iter((root,))]
    while stack:
        try:
            o = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        if o is None or id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, Tensor):
            yield o
            continue
        children = _children(o)
        if children:
            stack.append(iter(children))


# -- writing ---------------------------------------------------------------------------------------

def _clone(v, memo: dict):
    """A structural copy of IR objects: attrs objects, lists and arrays copied; octets shared."""
    if id(v) in memo:
        return memo[id(v)]
    if attrs.has(type(v)):
        new = copy.copy(v)
        memo[id(v)] = new
        for f in attrs.fields(type(v)):
            old = getattr(v, f.name)
            value = _clone(old, memo)
            if value is not old:
                object.__setattr__(new, f.name, value)
        return new
    if isinstance(v, list):
        new = []
        memo[id(v)] = new
        new.extend(_clone(x, memo) for x in v)
        return new
    if isinstance(v, np.ndarray):
        return v.copy()
    if isinstance(v, (dict, set)):
        return copy.copy(v)
    return v  # str, int, bytes, memoryview (shared: octets are never written to), enums


def _typed_to_raw(t: Tensor):
    """Raw-storage octets of a typed-storage tensor, or None where the converter is not available."""
    try:
        from .tensor_data import numpy_to_tensor, tensor_to_numpy
    except ImportError:
        return None
    try:
        return numpy_to_tensor(tensor_to_numpy(t), data_type=t.data_type).raw_data
    except OnnxkitError:  # storage the converter refuses: left embedded, for the checker to report
        return None


def externalize(model: Model, model_path, *, size_threshold: int = 1024, location: Optional[str] = None,
                align: Optional[int] = None, checksum: Union[bool, str] = False, storage=None) -> Model:
    """A copy of ``model`` whose large tensors live in one external data file (Clause 13).

    Every tensor with at least ``size_threshold`` octets of contents, and every tensor
    already external (re-written from its source), goes to ``location`` (default
    ``<model file name>.data``) next to ``model_path``, each at an offset that is a
    multiple of ``align`` (default ``mmap.ALLOCATIONGRANULARITY``, the page size; 13.2).
    References carry location, offset and length, and with ``checksum=True`` (or ``'sha1'``)
    the SHA-1 of the whole data file (13.3), with ``checksum='sha256'`` its SHA-256, computed
    over every octet written.  STRING tensors stay
    embedded (no raw layout).  ``model`` itself is never modified.  The copy's tensors
    have ``base_dir`` set, so they can be read back at once.
    """
    base = os.path.dirname(os.path.abspath(os.fspath(model_path)))
    location = location or os.path.basename(os.fspath(model_path)) + ".data"
    check_location(location)
    align = int(align or mmap.ALLOCATIONGRANULARITY)
    if align < 1:
        raise ValueError(f"align must be a positive number of octets, not {align}")
    out = _clone(model, {})
    plan = []  # (new tensor, source: buffer or callable, nbytes, offset)
    end = 0
    for orig, new in zip(iter_tensors(model), iter_tensors(out)):
        if orig.data_type == DataType.STRING or orig.segment is not None:
            continue
        if orig.is_external:
            nbytes, source = declared_nbytes(orig), (lambda o=orig: read_external(o))
        elif orig.raw_data is not None:
            source = memoryview(orig.raw_data).cast("B")
            nbytes = source.nbytes
            if nbytes < size_threshold or nbytes == 0:
                continue
        else:
            try:
                nbytes = declared_nbytes(orig)
            except (ExternalRefError, LimitExceeded):
                continue
            if nbytes < size_threshold or nbytes == 0:
                continue
            source = _typed_to_raw(orig)
            if source is None or len(source) != nbytes:
                continue
        offset = -(-end // align) * align
        plan.append((new, source, nbytes, offset))
        end = offset + nbytes
    if not plan:
        return out

    if checksum is True:
        checksum = "sha1"
    if checksum and checksum not in CHECKSUM_ALGORITHMS:
        raise ValueError(f"checksum must be False, True, or one of {CHECKSUM_ALGORITHMS}, not {checksum!r}")
    digest = getattr(hashlib, checksum)() if checksum else None

    def chunks():
        pos = 0
        for new, source, nbytes, offset in plan:
            data = source() if callable(source) else source
            if offset > pos:
                pad = bytes(offset - pos)
                if digest is not None:
                    digest.update(pad)
                yield pad
            if digest is not None:
                digest.update(data)
            yield data
            pos = offset + nbytes

    _storage(storage, None).write(base, location, chunks())
    for new, _, nbytes, offset in plan:
        entries = [StringStringEntry("location", location), StringStringEntry("offset", str(offset)),
                   StringStringEntry("length", str(nbytes))]
        if digest is not None:
            entries.append(StringStringEntry("checksum", digest.hexdigest()))
        new.external_data = entries
        new.data_location = DataLocation.EXTERNAL
        new.raw_data = None
        for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
            setattr(new, field, np.zeros(0, dtype=getattr(new, field).dtype))
        new.base_dir = base
    if isinstance(out, Model):
        out.base_dir = base
    return out
