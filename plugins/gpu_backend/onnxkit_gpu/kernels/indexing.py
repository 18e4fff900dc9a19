"""Indexing kernels of ai.onnx on the gpu backend (torch).

Operators and the since_versions (definitions) implemented:

* Slice 1 (``starts``/``ends``/``axes`` attributes), 10, 11, 13 (inputs, with ``steps``)
* Gather 1, 11, 13;  GatherElements 11, 13 (negative indices counted from the end; an index out
  of range is an error naming the node: checked on the host, never a device-side assert)

Starts/ends/axes/steps are read on the host and clamped by the cpu backend's own arithmetic
(:func:`onnxkit_cpu.kernels.indexing.slice_plan`); the data stays on the device.  Slices with
positive steps are views of the input.
"""

from __future__ import annotations

from onnxkit_cpu.kernels.indexing import slice_plan

from onnxkit.runtime import KernelTable

from .shape import _shape, int_list, norm_axis

KERNELS = KernelTable()


# -- Slice -------------------------------------------------------------------------------------
def slice_tensor(ctx, x, starts, ends, axes=None, steps=None):
    import torch

    plan = slice_plan(ctx, x.shape, int_list(starts), int_list(ends),
                      None if axes is None else int_list(axes), None if steps is None else int_list(steps))
    index = [slice(None)] * x.ndim
    reverse = []
    for a, s, e, st in plan:
        if st > 0:
            index[a] = slice(s, max(s, e), st)
        elif s <= e:
            index[a] = slice(0, 0)
        else:
            reverse.append((a, s, e, st))          # torch slicing takes no negative step
    x = x[tuple(index)]
    for a, s, e, st in reverse:
        x = x.index_select(a, torch.arange(s, e, st, device=x.device))
    return x


@KERNELS.register("Slice", 1)
def slice_v1(ctx):
    starts, ends, axes = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes")
    if starts is None or ends is None:
        ctx.fail("Slice-1 needs the 'starts' and 'ends' attributes")
    return lambda x: slice_tensor(ctx, x, starts, ends, axes, None)


@KERNELS.register("Slice", 10, 11, 13)
def slice_(ctx):
    return lambda x, starts, ends, axes=None, steps=None: slice_tensor(ctx, x, starts, ends, axes, steps)


# -- Gather / GatherElements -------------------------------------------------------------------
def check_index(ctx, idx, n: int, what: str = "indices value"):
    """``idx`` as int64 with negative values wrapped; ctx.fail if any lies outside [-n, n-1]
    (checked on the host: an out-of-range index must not reach a device kernel)."""
    import torch

    if idx.dtype.is_floating_point or idx.dtype in (torch.bool,) or idx.dtype.is_complex:
        ctx.fail(f"{what} must be an integer tensor, got {idx.dtype}")
    idx = idx.to(torch.int64)
    if idx.numel():
        lo, hi = torch.aminmax(idx)
        lo, hi = int(lo), int(hi)
        if lo < -n or hi >= n:
            ctx.fail(f"{what} {lo if lo < -n else hi} is out of range for an extent of {n}")
        if lo < 0:
            idx = torch.where(idx < 0, idx + n, idx)
    return idx


@KERNELS.register("Gather", 1, 11, 13)
def gather(ctx):
    axis = int(ctx.attr("axis", 0))

    def fn(x, indices):
        a = norm_axis(ctx, axis, x.ndim)
        idx = check_index(ctx, indices, x.shape[a])
        out = x.index_select(a, idx.reshape(-1))
        return out.reshape(tuple(x.shape[:a]) + tuple(idx.shape) + tuple(x.shape[a + 1:]))

    return fn


@KERNELS.register("GatherElements", 11, 13)
def gather_elements(ctx):
    import torch

    axis = int(ctx.attr("axis", 0))

    def fn(x, indices):
        a = norm_axis(ctx, axis, x.ndim)
        if indices.ndim != x.ndim or any(indices.shape[i] > x.shape[i] for i in range(x.ndim) if i != a):
            ctx.fail(f"indices of shape {_shape(indices)} do not fit data of shape {_shape(x)}")
        idx = check_index(ctx, indices, x.shape[a])
        return torch.gather(x, a, idx)

    return fn
