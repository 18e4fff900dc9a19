"""Generator kernels of ai.onnx on the gpu backend (torch): tensors made from attributes and shapes.

Operators and the since_versions (definitions) implemented:

* Constant 1, 9 (``value``), 11 (``sparse_value``, made dense), 12, 13, 19, 21, 23, 24, 25
  (``value_float(s)``, ``value_int(s)``)
* ConstantOfShape 9, 20, 21, 23, 24, 25
* Range 11, 27 (``stash_type`` for float16 / bfloat16)

Attribute values are read and checked by the cpu backend's own host-side code
(:mod:`onnxkit_cpu.kernels.generators`) and then moved to the device.  A STRING constant, or a
constant of a type torch lacks, is refused with an error naming the type.
"""

from __future__ import annotations

from onnxkit_cpu.kernels.generators import check_extents, constant_array, fill_value, range_length

from onnxkit.runtime import KernelTable

from ..device import torch_dtype
from .cast import convert
from .shape import _shape, int_list

KERNELS = KernelTable()


# -- Constant / ConstantOfShape ----------------------------------------------------------------
def _to_device(ctx, array, what: str):
    """A host array as a tensor on the device, or a function failing with the reason (a STRING
    array, of dtype object, or one of a type torch lacks)."""
    from onnxkit.dtypes import from_numpy_dtype

    from ..device import asarray

    if array.dtype == object or torch_dtype(array.dtype) is None:
        name = "STRING" if array.dtype == object else from_numpy_dtype(array.dtype).name

        def refuse(*_):
            ctx.fail(f"{what} of element type {name}: the gpu backend has no torch dtype for it")
        return refuse
    return asarray(array)


@KERNELS.register("Constant", 1, 9, 11, 12, 13, 19, 21, 23, 24, 25)
def constant(ctx):
    t = _to_device(ctx, constant_array(ctx), "a constant")
    if callable(t):
        return t
    return lambda: t     # the same tensor is every run's output: kernels never write into inputs


@KERNELS.register("ConstantOfShape", 9, 20, 21, 23, 24, 25)
def constant_of_shape(ctx):
    fill = _to_device(ctx, fill_value(ctx), "a fill value")
    if callable(fill):
        return fill
    import torch

    def fn(shape):
        dims = check_extents(ctx, int_list(shape))
        return torch.empty(dims, dtype=fill.dtype, device=fill.device).fill_(fill)

    return fn


# -- Range -------------------------------------------------------------------------------------
def _range(ctx, start, limit, delta, compute=None):
    import torch

    for what, v in (("start", start), ("limit", limit), ("delta", delta)):
        if v.numel() != 1:
            ctx.fail(f"{what} must be a scalar, got shape {_shape(v)}")
    dtype, dev = start.dtype, start.device
    if not dtype.is_floating_point:
        s, l, d = (int(v.reshape(()).item()) for v in (start, limit, delta))
        n = range_length(ctx, s, l, d)
        return (torch.arange(n, dtype=torch.int64, device=dev) * d + s).to(dtype)
    s, l, d = (float(v.reshape(()).item()) for v in (start, limit, delta))
    n = range_length(ctx, s, l, d)
    work = torch.float64 if compute is None else compute
    out = torch.arange(n, dtype=work, device=dev)
    out = out * torch.tensor(d, dtype=work, device=dev) + torch.tensor(s, dtype=work, device=dev)
    return convert(out, dtype)


@KERNELS.register("Range", 11)
def range_v11(ctx):
    return lambda start, limit, delta: _range(ctx, start, limit, delta)


@KERNELS.register("Range", 27)
def range_v27(ctx):
    import torch

    from .cast import tdtype

    stash = int(ctx.attr("stash_type", 1))
    stash_dtype = tdtype(stash)

    def fn(start, limit, delta):
        dtype = start.dtype
        if dtype not in (torch.float16, torch.bfloat16):
            return _range(ctx, start, limit, delta)
        if stash_dtype == dtype:           # computed in the element type itself
            return _range(ctx, start, limit, delta, compute=dtype)
        if stash_dtype not in (torch.float32, torch.float64):
            ctx.fail(f"stash_type {stash} is not FLOAT or DOUBLE")
        return _range(ctx, start, limit, delta, compute=stash_dtype)

    return fn
