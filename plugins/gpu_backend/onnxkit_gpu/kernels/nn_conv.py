"""Convolutions of ai.onnx on the gpu backend (torch).

Operators and the definitions (since_versions) implemented:

* Conv 1, 11, 22 - 1-D/2-D/3-D, ``auto_pad`` NOTSET/VALID/SAME_UPPER/SAME_LOWER, ``pads``
  (asymmetric and negative pads through an explicit ``F.pad``), ``strides``, ``dilations``,
  ``group`` (depthwise included), optional bias.
* ConvTranspose 1, 11, 22 - ``output_shape``, ``output_padding``, ``auto_pad``, ``pads``,
  ``strides``, ``dilations``, groups.
* ConvInteger 10 - int8/uint8 with zero points (scalar, or per output channel for W), int32
  output; computed exactly as a float64 convolution.
* DeformConv 19, 22 - offsets (``offset_group``), optional mask and bias, any rank
  (multilinear sampling, zero outside the image; one gather per corner and kernel offset).
* Col2Im 18 - any rank; one strided add per block offset (integers add exactly, wrapping;
  bool, string and complex inputs are refused).

Computed with ``torch.nn.functional.conv{1,2,3}d`` / ``conv_transpose{1,2,3}d``; a Conv over
more than three spatial axes sums lower-rank convolutions over the first axis's kernel taps;
a ConvTranspose over more than three is refused clearly.  float16 and bfloat16 are computed in float32 and
rounded once at the end (as the cpu backend does); TF32 is disabled for these convolutions
on CUDA so float32 results keep full precision.

The geometry helpers (:func:`conv_geometry`, :func:`spatial_attrs`,
:func:`conv_transpose_geometry`) are the cpu backend's own (:mod:`onnxkit_cpu.kernels.nn_conv`:
host-side arithmetic on shapes and attributes); they and the dtype helpers
(:func:`compute_dtype`, :func:`check_dtype`) are shared with the other nn kernels of this
package.
"""

from __future__ import annotations

import contextlib

from onnxkit_cpu.kernels.nn_conv import col2im_geometry, conv_geometry, conv_transpose_geometry, spatial_attrs

from onnxkit.runtime import KernelTable

KERNELS = KernelTable()


# -- dtype helpers -----------------------------------------------------------------------------

def _torch():
    import torch

    return torch


def float_types():
    torch = _torch()
    return (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def compute_dtype(dtype):
    """The dtype arithmetic is done in: float32/float64 as is, anything else in float32."""
    torch = _torch()
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


def check_dtype(ctx, t, allowed, what="input"):
    """Fail clearly unless ``t`` is a torch tensor of one of the ``allowed`` dtypes."""
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        ctx.fail(f"{what} must be a tensor, got {type(t).__name__}")
    if t.dtype not in allowed:
        ctx.fail(f"{what} has element type {t.dtype}, which this operator does not take on the gpu backend "
                 f"(allowed: {', '.join(str(a).replace('torch.', '') for a in allowed)})")


def check_float(ctx, t, what="input", bf16=True):
    torch = _torch()
    allowed = float_types() if bf16 else (torch.float16, torch.float32, torch.float64)
    check_dtype(ctx, t, allowed, what)


def full_precision(t):
    """A context in which cuDNN convolutions and matmuls on ``t``'s device do not use TF32."""
    torch = _torch()
    if t.device.type != "cuda":
        return contextlib.nullcontext()
    return _NoTF32(torch)


class _NoTF32:
    def __init__(self, torch):
        self.torch = torch

    def __enter__(self):
        b = self.torch.backends
        self.saved = (b.cudnn.allow_tf32, b.cuda.matmul.allow_tf32)
        b.cudnn.allow_tf32 = False
        b.cuda.matmul.allow_tf32 = False

    def __exit__(self, *exc):
        b = self.torch.backends
        b.cudnn.allow_tf32, b.cuda.matmul.allow_tf32 = self.saved
        return False


# -- padding -----------------------------------------------------------------------------------

def pad_spatial(x, begin, end, value=0.0):
    """``x`` with its spatial axes (2..) padded by ``begin``/``end`` (negative pads crop)."""
    if not any(begin) and not any(end):
        return x
    import torch.nn.functional as F

    spec = []
    for b, e in zip(reversed(begin), reversed(end)):
        spec += [int(b), int(e)]
    return F.pad(x, spec, mode="constant", value=value)


def _conv_fn(nd, transpose=False):
    import torch.nn.functional as F

    if transpose:
        return {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
    return {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]


def conv_any(x, w, bias, strides, padding, dil, group):
    """``F.conv{1,2,3}d``; over more spatial axes (``padding`` must then be zeros), a sum over
    the first axis's kernel taps of convolutions one rank lower, that axis folded into the batch."""
    nd = x.dim() - 2
    if nd <= 3:
        return _conv_fn(nd)(x, w, bias, stride=strides, padding=padding, dilation=dil, groups=group)
    n, c = x.shape[:2]
    m, k0 = w.shape[0], w.shape[2]
    s0, d0 = strides[0], dil[0]
    o0 = (x.shape[2] - (k0 - 1) * d0 - 1) // s0 + 1
    acc = None
    for t in range(k0):
        xs = x[:, :, t * d0:t * d0 + (o0 - 1) * s0 + 1:s0]            # (N, C, O0, ...)
        xs = xs.movedim(2, 1).reshape(n * o0, c, *x.shape[3:])
        y = conv_any(xs, w[:, :, t], None, strides[1:], [0] * (nd - 1), dil[1:], group)
        acc = y if acc is None else acc.add_(y)
    y = acc.reshape(n, o0, m, *acc.shape[2:]).movedim(1, 2)
    if bias is not None:
        y = y + bias.reshape((1, -1) + (1,) * nd)
    return y.contiguous()


def _check_rank(ctx, x, w, max_spatial=None):
    if x.dim() < 3 or w.dim() != x.dim():
        ctx.fail(f"X (rank {x.dim()}) and W (rank {w.dim()}) must have the same rank, at least 3")
    if max_spatial is not None and x.dim() - 2 > max_spatial:
        ctx.fail(f"the gpu backend computes this operator over 1 to {max_spatial} spatial axes; "
                 f"X has {x.dim() - 2}")


def _bias(ctx, b, m, ct):
    if b is None:
        return None
    if b.numel() != m:
        ctx.fail(f"B has {b.numel()} values, expected {m}")
    return b.reshape(-1).to(ct)


# -- Conv --------------------------------------------------------------------------------------

@KERNELS.register("Conv", 1, 11, 22)
def conv(ctx):
    group = int(ctx.attr("group", 1))
    bf16 = ctx.since_version >= 22

    def run(x, w, b=None):
        torch = _torch()
        check_float(ctx, x, "X", bf16)
        check_dtype(ctx, w, (x.dtype,), "W")
        if b is not None:
            check_dtype(ctx, b, (x.dtype,), "B")
        _check_rank(ctx, x, w)
        nd = x.dim() - 2
        kernel, strides, dil, pads, auto_pad = spatial_attrs(ctx, nd, w.shape[2:])
        out_shape, begin, end = conv_geometry(ctx, list(x.shape[2:]), kernel, strides, dil, pads, auto_pad)
        n, c = x.shape[:2]
        m = w.shape[0]
        if group <= 0 or c % group or m % group:
            ctx.fail(f"group {group} must divide the input channels {c} and the output channels {m}")
        if w.shape[1] != c // group:
            ctx.fail(f"W has {w.shape[1]} input channels per group, expected {c // group} (X has {c}, group {group})")
        if list(w.shape[2:]) != list(kernel):
            ctx.fail(f"W's kernel {list(w.shape[2:])} differs from kernel_shape {list(kernel)}")
        ct = compute_dtype(x.dtype)
        bias = _bias(ctx, b, m, ct)
        if n == 0 or 0 in out_shape:
            return torch.zeros((n, m, *out_shape), dtype=x.dtype, device=x.device)
        xc, wc = x.to(ct), w.to(ct)
        if begin == end and min(begin) >= 0 and nd <= 3:
            padding = begin
        else:
            xc = pad_spatial(xc, begin, end)
            padding = [0] * nd
        with full_precision(xc):
            y = conv_any(xc, wc, bias, strides, padding, dil, group)
        if list(y.shape[2:]) != list(out_shape):
            y = y[(slice(None), slice(None)) + tuple(slice(0, o) for o in out_shape)]
        return y.to(x.dtype)

    return run


# -- ConvTranspose -----------------------------------------------------------------------------

@KERNELS.register("ConvTranspose", 1, 11, 22)
def conv_transpose(ctx):
    group = int(ctx.attr("group", 1))
    out_pad_attr = ctx.attr("output_padding")
    out_shape_attr = ctx.attr("output_shape")
    bf16 = ctx.since_version >= 22

    def run(x, w, b=None):
        torch = _torch()
        check_float(ctx, x, "X", bf16)
        check_dtype(ctx, w, (x.dtype,), "W")
        if b is not None:
            check_dtype(ctx, b, (x.dtype,), "B")
        _check_rank(ctx, x, w, max_spatial=3)
        nd = x.dim() - 2
        kernel, strides, dil, pads, auto_pad = spatial_attrs(ctx, nd, w.shape[2:])
        if list(w.shape[2:]) != list(kernel) or len(strides) != nd or len(dil) != nd:
            ctx.fail(f"kernel_shape/strides/dilations do not match W {list(w.shape)}")
        if any(s <= 0 for s in strides) or any(d <= 0 for d in dil):
            ctx.fail(f"strides and dilations must be positive, got {strides}, {dil}")
        n, c = x.shape[:2]
        if group <= 0 or c % group or w.shape[0] != c:
            ctx.fail(f"W has {w.shape[0]} input channels, X has {c} (group {group})")
        m = w.shape[1] * group
        in_shape = list(x.shape[2:])
        out_pad, eff, begin, end, final = conv_transpose_geometry(ctx, in_shape, kernel, strides, dil, pads, auto_pad,
                                                                  out_pad_attr, out_shape_attr)
        ct = compute_dtype(x.dtype)
        bias = _bias(ctx, b, m, ct)
        if n == 0 or 0 in final or 0 in in_shape:
            y = torch.zeros((n, m, *final), dtype=ct, device=x.device)
            if bias is not None:
                y = y + bias.reshape((1, -1) + (1,) * nd)
            return y.to(x.dtype)
        xc, wc = x.to(ct), w.to(ct)
        fn = _conv_fn(nd, transpose=True)
        direct = all(bb == ee and bb >= 0 and 0 <= op < max(s, d)
                     for bb, ee, op, s, d in zip(begin, end, out_pad, strides, dil))
        with full_precision(xc):
            if direct:
                # torch's own padding: crop ``begin`` on both sides, then output_padding at the end
                return fn(xc, wc, bias, stride=strides, padding=begin, output_padding=out_pad, groups=group,
                          dilation=dil).to(x.dtype)
            y = fn(xc, wc, None, stride=strides, padding=0, output_padding=0, groups=group, dilation=dil)
        full = [s * (i - 1) + e for s, i, e in zip(strides, in_shape, eff)]
        # crop (negative) or zero-extend the full result to [begin, begin + final)
        y = pad_spatial(y, [-bb for bb in begin], [bb + f - fu for bb, f, fu in zip(begin, final, full)])
        if bias is not None:
            y = y + bias.reshape((1, -1) + (1,) * nd)
        return y.to(x.dtype)

    return run


# -- ConvInteger -------------------------------------------------------------------------------

@KERNELS.register("ConvInteger", 10)
def conv_integer(ctx):
    group = int(ctx.attr("group", 1))

    def run(x, w, x_zero_point=None, w_zero_point=None):
        torch = _torch()
        eight_bit = (torch.int8, torch.uint8)
        check_dtype(ctx, x, eight_bit, "x")
        check_dtype(ctx, w, eight_bit, "w")
        _check_rank(ctx, x, w)
        nd = x.dim() - 2
        kernel, strides, dil, pads, auto_pad = spatial_attrs(ctx, nd, w.shape[2:])
        out_shape, begin, end = conv_geometry(ctx, list(x.shape[2:]), kernel, strides, dil, pads, auto_pad)
        n, c = x.shape[:2]
        m = w.shape[0]
        if group <= 0 or c % group or m % group or w.shape[1] != c // group:
            ctx.fail(f"W {list(w.shape)} does not match X channels {c} with group {group}")
        if list(w.shape[2:]) != list(kernel):
            ctx.fail(f"W's kernel {list(w.shape[2:])} differs from kernel_shape {list(kernel)}")
        # exact in float64: |products| < 2^16, sums far below 2^53, whatever the order
        xf = x.to(torch.float64)
        if x_zero_point is not None:
            check_dtype(ctx, x_zero_point, (x.dtype,), "x_zero_point")
            if x_zero_point.numel() != 1:
                ctx.fail("x_zero_point must be a scalar")
            xf = xf - x_zero_point.reshape(-1)[0].to(torch.float64)
        wf = w.to(torch.float64)
        if w_zero_point is not None:
            check_dtype(ctx, w_zero_point, (w.dtype,), "w_zero_point")
            zp = w_zero_point.to(torch.float64).reshape(-1)
            if zp.numel() == 1:
                wf = wf - zp[0]
            elif zp.numel() == m:
                wf = wf - zp.reshape((-1,) + (1,) * (w.dim() - 1))
            else:
                ctx.fail(f"w_zero_point has {zp.numel()} values, expected 1 or {m}")
        if n == 0 or 0 in out_shape:
            return torch.zeros((n, m, *out_shape), dtype=torch.int32, device=x.device)
        # zero points apply to the data only: padding contributes zeros after the shift
        xf = pad_spatial(xf, begin, end)
        y = conv_any(xf, wf, None, strides, [0] * nd, dil, group)
        y = y[(slice(None), slice(None)) + tuple(slice(0, o) for o in out_shape)]
        return torch.round(y).to(torch.int32)

    return run


# -- Col2Im ------------------------------------------------------------------------------------

@KERNELS.register("Col2Im", 18)
def col2im(ctx):
    def run(x, image_shape, block_shape):
        import itertools

        torch = _torch()
        check_dtype(ctx, x, float_types() + (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64), "input")
        image = [int(v) for v in image_shape.reshape(-1).tolist()]
        block = [int(v) for v in block_shape.reshape(-1).tolist()]
        nd = len(image)
        strides, dil, pads, kp, counts = col2im_geometry(ctx, tuple(x.shape), image, block)
        n, ck, length = x.shape
        if any(cnt <= 0 for cnt in counts):
            ctx.fail(f"input dimension 2 ({length}) differs from the number of blocks {counts}")
        ct = x.dtype if not x.dtype.is_floating_point else compute_dtype(x.dtype)   # integers add exactly
        cols = x.to(ct).reshape(n, ck // kp, *block, *counts)
        full = [image[i] + pads[i] + pads[nd + i] for i in range(nd)]
        buf = torch.zeros((n, ck // kp, *full), dtype=ct, device=x.device)
        lead = (slice(None), slice(None))
        for offs in itertools.product(*(range(k) for k in block)):   # one strided add per block offset
            sl = tuple(slice(o * d, o * d + (cnt - 1) * s + 1, s) for o, d, cnt, s in zip(offs, dil, counts, strides))
            buf[lead + sl] += cols[lead + offs]
        y = buf[lead + tuple(slice(pads[i], pads[i] + image[i]) for i in range(nd))]
        return y.contiguous().to(x.dtype)

    return run


# -- DeformConv --------------------------------------------------------------------------------

def _sample(xg, pos, in_shape):
    """Multilinear samples of ``xg`` ``(N, Cg, *I)`` at ``pos`` ``(N, nd, *P)`` -> ``(N, Cg, *P)``;
    zero outside the image."""
    import itertools

    torch = _torch()
    n, cg = xg.shape[:2]
    nd = len(in_shape)
    flat = xg.reshape(n, cg, -1)
    pshape = tuple(pos.shape[2:])
    npos = 1
    for p in pshape:
        npos *= p
    p = pos.reshape(n, nd, npos)
    base = torch.floor(p)
    frac = p - base
    base = base.to(torch.int64)
    out = torch.zeros((n, cg, npos), dtype=xg.dtype, device=xg.device)
    strides_flat = [1] * nd
    for i in range(nd - 2, -1, -1):
        strides_flat[i] = strides_flat[i + 1] * in_shape[i + 1]
    for corner in itertools.product((0, 1), repeat=nd):
        weight = torch.ones((n, npos), dtype=xg.dtype, device=xg.device)
        idx = torch.zeros((n, npos), dtype=torch.int64, device=xg.device)
        valid = torch.ones((n, npos), dtype=torch.bool, device=xg.device)
        for i, cbit in enumerate(corner):
            ci = base[:, i] + cbit
            weight = weight * (frac[:, i] if cbit else 1 - frac[:, i])
            valid &= (ci >= 0) & (ci < in_shape[i])
            idx += torch.clamp(ci, 0, in_shape[i] - 1) * strides_flat[i]
        weight = torch.where(valid, weight, torch.zeros_like(weight))
        if flat.shape[2]:
            vals = torch.gather(flat, 2, idx[:, None, :].expand(n, cg, npos))
            out += vals * weight[:, None, :]
    return out.reshape(n, cg, *pshape)


@KERNELS.register("DeformConv", 19, 22)
def deform_conv(ctx):
    import itertools

    group = int(ctx.attr("group", 1))
    offset_group = int(ctx.attr("offset_group", 1))
    bf16 = ctx.since_version >= 22

    def run(x, w, offset, b=None, mask=None):
        torch = _torch()
        check_float(ctx, x, "X", bf16)
        for t, name in ((w, "W"), (offset, "offset"), (b, "B"), (mask, "mask")):
            if t is not None:
                check_dtype(ctx, t, (x.dtype,), name)
        if x.dim() < 3 or w.dim() != x.dim():
            ctx.fail(f"X (rank {x.dim()}) and W (rank {w.dim()}) must have the same rank, at least 3")
        nd = x.dim() - 2
        kernel, strides, dil, pads, _ = spatial_attrs(ctx, nd, w.shape[2:])
        out_shape, begin, _ = conv_geometry(ctx, list(x.shape[2:]), kernel, strides, dil, pads, "NOTSET")
        n, c = x.shape[:2]
        m = w.shape[0]
        kp = 1
        for k in kernel:
            kp *= k
        length = 1
        for o in out_shape:
            length *= o
        if offset_group <= 0 or c % offset_group:
            ctx.fail(f"offset_group {offset_group} must divide the input channels {c}")
        if tuple(offset.shape) != (n, offset_group * kp * nd, *out_shape):
            ctx.fail(f"offset has shape {tuple(offset.shape)}, expected {(n, offset_group * kp * nd, *out_shape)}")
        cg, mg = (c // group, m // group) if group > 0 else (0, 0)
        if group <= 0 or c % group or m % group or w.shape[1] != cg:
            ctx.fail(f"W {list(w.shape)} does not match X channels {c} with group {group}")
        ct = compute_dtype(x.dtype)
        dev = x.device
        xc = x.to(ct)
        off = offset.to(ct).reshape(n, offset_group, kp, nd, *out_shape)
        if mask is not None:
            if mask.numel() != n * offset_group * kp * length:
                ctx.fail(f"mask has shape {tuple(mask.shape)}, expected {(n, offset_group * kp, *out_shape)}")
            mk = mask.to(ct).reshape(n, offset_group, kp, *out_shape)
        # sampling positions of every kernel offset: (nd, *O) plus a tap offset per kernel position
        grids = torch.meshgrid(*(torch.arange(o, dtype=ct, device=dev) * s - bb
                                 for o, s, bb in zip(out_shape, strides, begin)), indexing="ij")
        base = torch.stack(grids) if grids else torch.zeros((0,), dtype=ct, device=dev)
        taps = torch.tensor(list(itertools.product(*(range(k) for k in kernel))), dtype=ct, device=dev) \
            * torch.tensor(dil, dtype=ct, device=dev)
        cpo = c // offset_group
        cols = torch.empty((n, c, kp, *out_shape), dtype=ct, device=dev)
        for g in range(offset_group):
            xg = xc[:, g * cpo:(g + 1) * cpo]
            for t in range(kp):
                pos = base[None] + taps[t].reshape((1, nd) + (1,) * nd) + off[:, g, t]
                val = _sample(xg, pos, list(x.shape[2:]))
                if mask is not None:
                    val = val * mk[:, g, t][:, None]
                cols[:, g * cpo:(g + 1) * cpo, t] = val
        with full_precision(xc):
            y = torch.matmul(w.to(ct).reshape(group, mg, cg * kp), cols.reshape(n, group, cg * kp, length))
        y = y.reshape(n, m, *out_shape)
        if b is not None:
            if b.numel() != m:
                ctx.fail(f"B has {b.numel()} values, expected {m}")
            y = y + b.to(ct).reshape((1, -1) + (1,) * nd)
        return y.to(x.dtype)

    return run
