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

The reading half (references, options, limits, :func:`read_external`) is
:mod:`onnxkit.external_read`, which needs no model, so the tensor codec reads through it
without importing the IR; its names are public here.

Every refusal is an :class:`onnxkit.storage.ExternalRefError` (an ``ExternalDataError``
with ``code``, ``tensor``, ``location``, ``clause``), or a ``LimitExceeded`` (``code ==
'limit-exceeded'``) for a documented limit.
"""

from __future__ import annotations

import copy
import mmap
import os
from typing import Iterator, Optional

from onnxkit import records
import numpy as np

from .dtypes import DataType
from .errors import LimitExceeded, OnnxkitError
from .external_read import (CHECKSUM_ALGORITHMS, DEFAULT_OPTIONS, KEYS, ExternalDataOptions, ExternalRef,
                            declared_nbytes, options_of, parse_reference, read_external, resolve_storage)
from .ir.attribute import Attribute
from .ir.graph import Function, Graph, Model, Node, TrainingInfo
from .ir.tensor import DataLocation, SparseTensor, StringStringEntry, Tensor
from .storage import ExternalRefError, check_location
from .tensor_data import raw_fields, record_base_dir, tensor_to_numpy

__all__ = ["ExternalRef", "ExternalDataOptions", "parse_reference", "read_external", "attach", "externalize",
           "iter_tensors", "declared_nbytes", "KEYS"]

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
    tensors = list(iter_tensors(model)) if tensors is None else tensors
    base = record_base_dir(base_dir, tensors, opts.mode != "never")
    if isinstance(model, Model):
        model.base_dir = base
    for t in tensors:
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
    """A structural copy of IR objects: records, lists and arrays copied; octets shared."""
    if id(v) in memo:
        return memo[id(v)]
    if records.has(type(v)):
        new = copy.copy(v)
        memo[id(v)] = new
        for f in records.fields(type(v)):
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
    """Raw-storage octets of a typed-storage tensor, or None where the converter refuses it."""
    try:
        return raw_fields(tensor_to_numpy(t), t.data_type)["raw_data"]
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
    import hashlib

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

    resolve_storage(storage, None).write(base, location, chunks())
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
