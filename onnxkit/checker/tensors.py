"""Tensor contents (Clause 6.3.4, Annex B.2.16) and sparse tensors (Annex B.2.18).

:func:`check_tensor` detects, for every TensorProto of the model (initializers, attribute
values, sparse tensor parts, function attribute defaults):

* ``invalid-elem-type`` (6.2): ``data_type`` 0 or not in Table 5;
* ``negative-extent`` (6.5.1) / ``limit-exceeded`` (15.4): a negative or over-limit dims entry, or dims
  whose non-zero extents times the element size exceed ``max_tensor_bytes`` (e.g. ``[2**32, 2**32, 0]``);
* ``invalid-data-location`` (13.1, B.20): data_location other than DEFAULT or EXTERNAL;
* ``tensor-segment`` (warning): a segmented tensor, whose size cannot be checked alone;
* ``external-data-not-external`` (13.1): external_data entries on a DEFAULT tensor;
* ``tensor-storage-conflict`` (6.3.4): raw and typed storage both present, or two typed fields;
* ``string-raw-data`` (6.3.4, B.2.16): a STRING tensor in raw_data;
* ``tensor-wrong-field`` (B.2.16): typed storage in a field that does not carry the type;
* ``tensor-size-mismatch`` (6.3.4): the stored amount does not match dims (raw: ceil(N*w/8)
  octets; typed: N values, 2N for complex, Table 7's count for 2/4/6-bit types);
* ``nonzero-padding`` (6.3.4): padding bits of narrow raw storage, or unoccupied bits of
  narrow typed storage, are not zero.

EXTERNAL tensors are handed to :mod:`onnxkit.checker.external`.

:func:`check_sparse` detects ``sparse-tensor-invalid`` (values or indices missing, values
not 1-D, indices not integral or not of shape [NNZ] / [NNZ, rank]), ``negative-extent``
for its dims, and ``sparse-index-out-of-range``.
"""

from __future__ import annotations

import numpy as np

from .. import ir
from ..dtypes import ELEMENT_TYPES, DataType, tag_name
from ..errors import OnnxkitError
from ..narrow import TYPED_PER_INT32
from .context import ELEM_TYPE_IR, Context

_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def _dims_ok(ctx: Context, dims, loc: str, what: str = "dims") -> bool:
    ok = True
    for i, d in enumerate(dims):
        if d < 0:
            ctx.emit("negative-extent", f"{what}[{i}] is {d}; extents are non-negative", loc)
            ok = False
        elif d > ctx.limits.max_dim_extent:
            ctx.emit("limit-exceeded", f"{what}[{i}] is {d}, over max_dim_extent={ctx.limits.max_dim_extent}", loc)
            ok = False
    return ok


def check_tensor(ctx: Context, t: ir.Tensor, loc: str) -> None:
    """The checks of one TensorProto (see the module docstring)."""
    et = ELEMENT_TYPES.get(t.data_type)
    if et is None:
        why = "0 (UNDEFINED)" if t.data_type == 0 else f"{t.data_type}, which is not listed in Table 5"
        ctx.emit("invalid-elem-type", f"the tensor's data_type is {why}", loc)
        return
    intro = ELEM_TYPE_IR.get(int(t.data_type))
    if intro:
        ctx.feature(f"element type {et.name}", intro, loc)
    if not _dims_ok(ctx, t.dims, loc):
        return
    n = 1
    span = max(1, et.bits // 8)  # octets the non-zero extents span: must fit the limits even when N = 0
    for d in t.dims:
        n *= int(d)
        span *= int(d) or 1
    if span > ctx.limits.max_tensor_bytes:
        ctx.emit("limit-exceeded", f"dims {[int(d) for d in t.dims]}: the product of the non-zero extents times the "
                 f"element size is {span} octets, over max_tensor_bytes={ctx.limits.max_tensor_bytes} (it overflows "
                 "what an array can index)", loc)
        return
    if t.data_location not in (0, 1):
        ctx.emit("invalid-data-location", f"data_location is {t.data_location}; Table B.20 defines 0 (DEFAULT) and "
                 "1 (EXTERNAL)", loc)
        return
    present = [f for f in _TYPED_FIELDS if len(getattr(t, f)) > 0]
    raw = t.raw_data is not None and len(t.raw_data) > 0
    if t.data_location == 1:
        from . import external  # with the external-data modules: imported by a model that has an external tensor

        external.check_external(ctx, t, loc, embedded=raw or bool(present))
        return
    if t.external_data:
        ctx.emit("external-data-not-external", "the tensor has external_data entries but its data_location is "
                 "DEFAULT: its contents are taken from the model file", loc)
    if t.segment is not None:
        ctx.emit("tensor-segment", "the tensor is a segment of a larger one (TensorProto.segment); its size is not "
                 "checked and reassembling segments is left open", loc)
        return
    if raw and present:
        ctx.emit("tensor-storage-conflict", f"raw_data and typed storage ({', '.join(present)}) are both present; a "
                 "tensor uses one or the other", loc)
        return
    if len(present) > 1:
        ctx.emit("tensor-storage-conflict", f"several typed fields hold data ({', '.join(present)})", loc)
        return
    dims = [int(d) for d in t.dims]
    if et.tag == DataType.STRING:
        if raw:
            ctx.emit("string-raw-data", "a STRING tensor carries raw_data; STRING elements are stored in string_data",
                     loc)
            return
        if present and present[0] != "string_data":
            ctx.emit("tensor-wrong-field", f"STRING elements are carried in string_data, not {present[0]}", loc)
            return
        if len(t.string_data) != n:
            ctx.emit("tensor-size-mismatch", f"string_data has {len(t.string_data)} elements; dims {dims} need {n}", loc)
        return
    if raw:
        _check_raw(ctx, t, et, n, dims, loc)
        return
    if present and present[0] != et.typed_field:
        ctx.emit("tensor-wrong-field", f"element type {et.name} is carried in {et.typed_field}, not {present[0]}", loc)
        return
    data = getattr(t, et.typed_field)
    count = len(data)
    if et.is_narrow:
        per = TYPED_PER_INT32[et.bits]
        need = -(-n // per)
    else:
        need = 2 * n if et.is_complex else n
    if count != need:
        unit = "32-bit integers (Table 7)" if et.is_narrow else ("values (real, imaginary pairs)" if et.is_complex else "values")
        ctx.emit("tensor-size-mismatch", f"{et.typed_field} holds {count} values; {n} {et.name} elements (dims {dims}) "
                 f"need {need} {unit}", loc)
        return
    if et.is_narrow and count:
        _check_typed_padding(ctx, np.asarray(data, dtype=np.int64), et, n, loc)


def _check_raw(ctx: Context, t: ir.Tensor, et, n: int, dims: list, loc: str) -> None:
    nbytes = len(t.raw_data) if not isinstance(t.raw_data, memoryview) else t.raw_data.nbytes
    need = (n * et.bits + 7) // 8
    if nbytes != need:
        ctx.emit("tensor-size-mismatch", f"raw_data has {nbytes} octets; {n} {et.name} elements (dims {dims}, "
                 f"{et.bits} bits each) need {need}", loc)
        return
    used = (n * et.bits) % 8
    if et.is_narrow and used:
        last = t.raw_data[-1]
        if last & (0xFF << used) & 0xFF:
            ctx.emit("nonzero-padding", f"the {8 - used} padding bits of the last octet of raw_data are not zero", loc)


def _check_typed_padding(ctx: Context, data: np.ndarray, et, n: int, loc: str) -> None:
    per = TYPED_PER_INT32[et.bits]
    masks = np.full(data.size, (1 << (per * et.bits)) - 1, dtype=np.int64)
    rest = n % per
    if rest:
        masks[-1] = (1 << (rest * et.bits)) - 1
    bad = np.flatnonzero((data & 0xFFFFFFFF) & ~masks)
    if bad.size:
        ctx.emit("nonzero-padding", f"int32_data[{int(bad[0])}] has bits set outside the {et.name} elements it "
                 "carries (Table 7: every other bit SHALL be zero)", loc)


def check_sparse(ctx: Context, sp: ir.SparseTensor, loc: str) -> None:
    """The checks of one SparseTensorProto (its parts' contents are checked as tensors)."""
    if sp.values is None or sp.indices is None:
        missing = " and ".join(p for p in ("values", "indices") if getattr(sp, p) is None)
        ctx.emit("sparse-tensor-invalid", f"the sparse tensor has no {missing}", loc)
        return
    if not _dims_ok(ctx, sp.dims, loc):
        return
    dims = [int(d) for d in sp.dims]
    v, ix = sp.values, sp.indices
    if len(v.dims) != 1:
        ctx.emit("sparse-tensor-invalid", f"values must be 1-D [NNZ], but has dims {list(v.dims)}", loc)
        return
    nnz = int(v.dims[0])
    ix_type = ELEMENT_TYPES.get(ix.data_type)
    if ix_type is None or not ix_type.is_integral:
        ctx.emit("sparse-tensor-invalid", f"indices must have an integer element type, not {tag_name(ix.data_type)}",
                 loc)
        return
    ix_dims = [int(d) for d in ix.dims]
    if ix_dims not in ([nnz], [nnz, len(dims)]):
        ctx.emit("sparse-tensor-invalid", f"indices have dims {ix_dims}; for {nnz} values and rank {len(dims)} they "
                 f"must be [{nnz}] (linear) or [{nnz}, {len(dims)}] (coordinates)", loc)
        return
    if ix.is_external or not nnz:
        return
    try:
        idx = np.asarray(ix.numpy()).astype(np.int64)
    except (OnnxkitError, ValueError, TypeError):
        return  # the indices tensor's own fault, reported by check_tensor
    if idx.ndim == 1:
        total = 1
        for d in dims:
            total *= d
        bad = np.flatnonzero((idx < 0) | (idx >= total))
        if bad.size:
            ctx.emit("sparse-index-out-of-range", f"linear index {int(idx[bad[0]])} (entry {int(bad[0])}) is outside "
                     f"0..{total - 1} for dims {dims}", loc)
    else:
        bad = np.argwhere((idx < 0) | (idx >= np.asarray(dims, dtype=np.int64)))
        if bad.size:
            i, j = (int(b) for b in bad[0])
            ctx.emit("sparse-index-out-of-range", f"coordinate {int(idx[i, j])} of entry {i} (axis {j}) is outside "
                     f"0..{dims[j] - 1}", loc)
