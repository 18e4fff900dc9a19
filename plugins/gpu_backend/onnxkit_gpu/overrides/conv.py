"""torch's own convolutions for Conv and ConvTranspose (``torch.nn.functional.conv{1,2,3}d``,
``conv_transpose{1,2,3}d``: cuDNN on CUDA), in full precision: TF32 is disabled around them on
CUDA so float32 results keep float32 accuracy.

Attribute parsing, geometry, type and shape checks are the portable family's
(:mod:`onnxkit_default_domain.kernels.conv`); only the call into torch is here.  Asymmetric
and negative pads are applied explicitly first.  A Conv over more than three spatial axes
runs the portable im2col body; a ConvTranspose over more is refused clearly.
"""

from __future__ import annotations

import contextlib

from onnxkit.plugin import KernelTable

from onnxkit_default_domain.api import conv as portable
from onnxkit_default_domain.api import pad_spatial

KERNELS = KernelTable()


def full_precision(t):
    """A context in which cuDNN convolutions and matmuls on ``t``'s device do not use TF32."""
    if t.device.type != "cuda":
        return contextlib.nullcontext()
    return _NoTF32()


class _NoTF32:
    def __enter__(self):
        import torch

        b = torch.backends
        self.saved = (b.cudnn.allow_tf32, b.cuda.matmul.allow_tf32)
        b.cudnn.allow_tf32 = False
        b.cuda.matmul.allow_tf32 = False

    def __exit__(self, *exc):
        import torch

        b = torch.backends
        b.cudnn.allow_tf32, b.cuda.matmul.allow_tf32 = self.saved
        return False


def _torch_conv(nd: int, transpose: bool = False):
    import torch.nn.functional as F

    if transpose:
        return {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[nd]
    return {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]


@KERNELS.register("Conv", 1, 11, 22)
def conv(ctx):
    xp = ctx.xp
    allowed, plans = portable.conv_setup(ctx)
    im2col = portable.conv(ctx)

    def run(x, w, b=None):
        if x.ndim > 5:
            return im2col(x, w, b)
        nd, p, ct, bias = portable.prepare(ctx, xp, allowed, plans, x, w, b)
        bias = None if bias is None else bias.reshape(-1)
        if p.n == 0 or 0 in p.out_shape:
            return xp.zeros((p.n, p.m, *p.out_shape), dtype=x.dtype, device=x.device)
        xc, wc = x.to(ct), w.to(ct)
        if p.begin == p.end and min(p.begin) >= 0:
            padding = list(p.begin)
        else:
            xc, padding = pad_spatial(xp, xc, p.begin, p.end), 0
        with full_precision(xc):
            y = _torch_conv(nd)(xc, wc, bias, stride=p.strides, padding=padding, dilation=p.dil, groups=p.group)
        return y.to(x.dtype)

    return run


@KERNELS.register("ConvTranspose", 1, 11, 22)
def conv_transpose(ctx):
    xp = ctx.xp
    allowed, plans = portable.conv_transpose_setup(ctx)

    def run(x, w, b=None):
        if x.ndim > 5:
            ctx.fail(f"the gpu backend computes this operator over 1 to 3 spatial axes; X has {x.ndim - 2}")
        nd, p, ct, bias = portable.prepare(ctx, xp, allowed, plans, x, w, b)
        bias = None if bias is None else bias.reshape(-1)
        in_shape = list(x.shape[2:])
        if p.n == 0 or 0 in p.out_shape or 0 in in_shape:
            y = xp.zeros((p.n, p.m, *p.out_shape), dtype=ct, device=x.device)
            return (y if bias is None else y + xp.reshape(bias, (1, -1) + (1,) * nd)).to(x.dtype)
        xc, wc = x.to(ct), w.to(ct)
        fn = _torch_conv(nd, transpose=True)
        direct = all(bb == ee and bb >= 0 and 0 <= op < max(s, d)
                     for bb, ee, op, s, d in zip(p.begin, p.end, p.out_pad, p.strides, p.dil))
        with full_precision(xc):
            if direct:   # torch's own padding: crop ``begin`` on both sides, then output_padding at the end
                return fn(xc, wc, bias, stride=p.strides, padding=list(p.begin), output_padding=list(p.out_pad),
                          groups=p.group, dilation=p.dil).to(x.dtype)
            y = fn(xc, wc, None, stride=p.strides, padding=0, output_padding=0, groups=p.group, dilation=p.dil)
        full = [s * (i - 1) + e for s, i, e in zip(p.strides, in_shape, p.eff)]
        # crop (negative) or zero-extend the full result to [begin, begin + out)
        y = pad_spatial(xp, y, [-bb for bb in p.begin], [bb + o - fu for bb, o, fu in zip(p.begin, p.out_shape, full)])
        if bias is not None:
            y = y + xp.reshape(bias, (1, -1) + (1,) * nd)
        return y.to(x.dtype)

    return run
