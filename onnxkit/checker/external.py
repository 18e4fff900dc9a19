"""External data references (Clause 13; Clause 15.3 for resolution).

:func:`check_external` is called for every tensor whose data_location is EXTERNAL and
detects, without opening any file:

* ``external-with-embedded-data`` (13.1): the tensor also carries contents in the model;
* ``external-unsupported-type`` (13.1): a STRING tensor (raw layout has no strings);
* the reference faults of Table 11 found by :func:`onnxkit.external.parse_reference`:
  ``external-unknown-key``, ``external-duplicate-key``, ``external-missing-location``,
  ``external-invalid-location``, ``external-absolute-path``, ``external-path-traversal``,
  ``external-bad-offset``, ``external-bad-length``, ``external-bad-checksum``;
* ``external-size-mismatch`` (6.3.4, 13.1): a ``length`` that differs from the octets the
  dims and element type need; ``limit-exceeded`` (15.4) a declared size over the limits.

A model loaded with ``allow_outside=True`` (the explicit configuration of 15.3) is checked
under that same configuration: its ``..`` and absolute locations are not refused here.

With ``open_external=True`` the reference is also resolved through
:func:`onnxkit.external.read_external` against the model's directory (symbolic and hard
links refused, size and checksum verified): ``external-short-file``,
``external-size-mismatch``, ``external-checksum-mismatch``, and ``external-unresolved`` for
every other refusal (the message carries onnxkit.storage's reason: not-found, symlink,
hardlink, outside-directory, no-base-dir, ...).
"""

from __future__ import annotations

from onnxkit import records

from .. import ir
from ..dtypes import DataType
from ..errors import LimitExceeded
from ..external import ExternalDataOptions, declared_nbytes, parse_reference, read_external
from ..storage import ExternalRefError
from .codes import external_code
from .context import Context


def _refused(ctx: Context, exc: ExternalRefError, loc: str) -> None:
    code = external_code(exc.code)
    message = str(exc)
    if code == "external-unresolved":
        message = f"[{exc.code}] {message}"
    ctx.emit(code, message, loc)


def check_external(ctx: Context, t: ir.Tensor, loc: str, *, embedded: bool) -> None:
    if embedded:
        ctx.emit("external-with-embedded-data", "the tensor's data_location is EXTERNAL but it also carries "
                 "contents in the model file", loc)
    if t.data_type == DataType.STRING:
        ctx.emit("external-unsupported-type", "a STRING tensor cannot be stored externally: raw layout has no "
                 "strings", loc)
        return
    try:
        need = declared_nbytes(t, ctx.limits)
    except LimitExceeded as exc:
        ctx.emit("limit-exceeded", str(exc), loc)
        return
    except ExternalRefError as exc:  # dims or element type: reported by the tensor checks
        if exc.code not in ("bad-dims", "unsupported-type"):
            _refused(ctx, exc, loc)
        return
    # the explicit configuration of 15.3 the model was loaded with (load(allow_outside=True)) holds here too
    loaded = t.external_options
    allow_outside = bool(getattr(loaded, "allow_outside", False))
    try:
        ref = parse_reference(t, allow_outside=allow_outside)
    except ExternalRefError as exc:
        _refused(ctx, exc, loc)
        return
    if ref.length is not None and ref.length != need:
        ctx.emit("external-size-mismatch", f"length {ref.length} differs from the {need} octets dims "
                 f"{[int(d) for d in t.dims]} of this element type need", loc)
        return
    if ctx.open_external and not embedded:
        probe = records.evolve(t, base_dir=ctx.base_dir)
        try:
            read_external(probe, options=ExternalDataOptions(mode="lazy", allow_outside=allow_outside,
                                                             limits=ctx.limits))
        except ExternalRefError as exc:
            _refused(ctx, exc, loc)
        except LimitExceeded as exc:
            ctx.emit("limit-exceeded", str(exc), loc)
