"""com.microsoft.nchwc, onnxruntime's NCHWc layout operators (its ``ORT_ENABLE_ALL`` layout
transformer writes them into the optimized model it saves), operator set 1.

**The blocked layout.**  An NCHWc tensor of shape (N, Cp, H, W) holds, in its row-major order of
elements, the memory onnxruntime's tensor holds: the channels padded to Cp, a multiple of the block
size B, and laid out (N, Cp / B, H, W, B) — the B channels of a block adjacent for each pixel.  The
shape is what the graph states, the element order what onnxruntime's kernels read, so ai.onnx nodes
onnxruntime leaves between the NCHWc nodes (same-shape Add, Concat on the channel axis, Reshape
to (0, Cp / B, 0, 0, B) then a per-channel Add, QuickGelu ...) compute here what they compute there.
B is :func:`block_size`: MLAS's ``MlasNchwcGetBlockSize`` on this machine (16 on an x86-64 CPU with
AVX-512F and on ARM64, 8 on other x86-64), as onnxruntime's kernels use it: a file written where B
differs holds weights reordered for that B, and neither runtime can tell (onnxruntime's documented
limit of these files: they are for the machine that wrote them).

* ``ReorderInput(X)`` (``channels_last``: X is NHWC): the channels padded with zeros to a multiple
  of B, blocked.  onnxruntime requires the channel count to be a multiple of 4; so does this kernel.
* ``ReorderOutput(X)``: the first ``channels`` channels of the blocked X, as NCHW (or NHWC with
  ``channels_last``); X's channel count must be a multiple of B and exceed ``channels`` by less
  than B.
* ``Conv(X, W, B?, Sum?)``: ai.onnx Conv's attributes plus ``activation`` / ``activation_params``
  (FusedConv's).  X is blocked, or, where its channel count is below B, plain NCHW (the first
  convolution of a network).  W is the filter as the layout transformer reordered it, its shape
  (Op, I, kH, kW) with Op the padded output channels: OIHWBo (memory (Op / B, I, kH, kW, B)) where
  X is plain or the convolution is depthwise (one input and one output channel per group), OIHWBiBo
  (memory (Op / B, Ip / B, kH, kW, Bi, Bo)) otherwise.  Y = activation(Conv(X, W) + B + Sum),
  blocked (Sum, blocked, is the residual the transformer folded in).
* ``MaxPool``, ``AveragePool``, ``GlobalMaxPool``, ``GlobalAveragePool``: ai.onnx's on the
  unblocked tensor (the padded channels included), blocked again.
* ``Upsample(X)``: integer ``scales`` (N and C 1); ``mode`` ``nearest`` (``x[o // s]``) or
  ``linear``: bilinear, the source coordinate of output o ``o / s`` (``asymmetric``),
  ``max(0, (o + 0.5) / s - 0.5)`` (``half_pixel``) or ``o (in - 1) / (out - 1)`` (``align_corners``),
  the last input row / column repeated past the edge (onnxruntime's ``NchwcUpsample``).

float32 only (the definitions' type constraint).  Each kernel unblocks, computes on the plain
tensor with the ai.onnx kernels, and blocks the result: the values of onnxruntime's within float
rounding, not its speed.
"""

from __future__ import annotations

import platform

import numpy as np

from onnxkit.plugin import KernelTable

from ._common import activation, device_of, shape_of

KERNELS = KernelTable()
DOMAIN = "com.microsoft.nchwc"


def block_size() -> int:
    """MLAS's NCHWc block size on this machine: 16 with AVX-512F (x86-64) or on ARM64, else 8."""
    machine = platform.machine().lower()
    if machine in ("arm64", "aarch64"):
        return 16
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as features
    return 16 if features.get("AVX512F") else 8


def padded(c: int, b: int) -> int:
    """``c`` rounded up to a multiple of ``b``."""
    return -(-c // b) * b


def to_blocked(xp, x, b: int):
    """Plain (N, C, *S) ``x`` as the blocked (N, Cp, *S) tensor (zeros in the padded channels)."""
    n, c, sp = int(x.shape[0]), int(x.shape[1]), tuple(int(d) for d in x.shape[2:])
    cp = padded(c, b)
    if cp != c:
        x = xp.concat([x, xp.zeros((n, cp - c) + sp, dtype=x.dtype, device=device_of(x))], axis=1)
    y = xp.reshape(x, (n, cp // b, b) + sp)
    y = xp.permute_dims(y, (0, 1) + tuple(range(3, 3 + len(sp))) + (2,))
    return xp.reshape(y, (n, cp) + sp)


def from_blocked(xp, x, b: int):
    """Blocked (N, Cp, *S) ``x`` as the plain (N, Cp, *S) tensor (padded channels kept)."""
    n, cp, sp = int(x.shape[0]), int(x.shape[1]), tuple(int(d) for d in x.shape[2:])
    y = xp.reshape(x, (n, cp // b) + sp + (b,))
    y = xp.permute_dims(y, (0, 1, 2 + len(sp)) + tuple(range(2, 2 + len(sp))))
    return xp.reshape(y, (n, cp) + sp)


def filter_oihwbo(xp, w, b: int):
    """The plain (Op, I, kH, kW) filter of a reordered OIHWBo one (memory (Op / B, I, kH, kW, B))."""
    op, i, sp = int(w.shape[0]), int(w.shape[1]), tuple(int(d) for d in w.shape[2:])
    y = xp.reshape(w, (op // b, i) + sp + (b,))
    y = xp.permute_dims(y, (0, 2 + len(sp), 1) + tuple(range(2, 2 + len(sp))))
    return xp.reshape(y, (op, i) + sp)


def filter_oihwbibo(xp, w, b: int):
    """The plain (Op, Ip, kH, kW) filter of a reordered OIHWBiBo one (memory (Op / B, Ip / B, kH,
    kW, Bi, Bo))."""
    op, ip, sp = int(w.shape[0]), int(w.shape[1]), tuple(int(d) for d in w.shape[2:])
    k = len(sp)
    y = xp.reshape(w, (op // b, ip // b) + sp + (b, b))
    y = xp.permute_dims(y, (0, 3 + k, 1, 2 + k) + tuple(range(2, 2 + k)))
    return xp.reshape(y, (op, ip) + sp)


def _check(ctx, x, what: str, rank: int = 4) -> None:
    if x.dtype != ctx.xp.float32:
        ctx.fail(f"{what} must be float32 (the definition's type), got {x.dtype}")
    if x.ndim != rank:
        ctx.fail(f"{what} must have rank {rank}, got shape {shape_of(x)}")


def _blocked_input(ctx, x, b: int, what: str = "X") -> None:
    _check(ctx, x, what)
    if int(x.shape[1]) % b:
        ctx.fail(f"{what} has {int(x.shape[1])} channels, not a multiple of the NCHWc block size {b} "
                 "(a file written where the block size differs: onnxruntime's NCHWc files are for the machine "
                 "that wrote them)")


@KERNELS.register("ReorderInput", 1, domain=DOMAIN)
def reorder_input(ctx):
    xp, b = ctx.xp, block_size()
    last = bool(int(ctx.attr("channels_last")))

    def run(x):
        _check(ctx, x, "X")
        if last:
            x = xp.permute_dims(x, (0, 3, 1, 2))
        if int(x.shape[1]) % 4:
            ctx.fail(f"X has {int(x.shape[1])} channels; ReorderInput needs a multiple of 4 (as onnxruntime)")
        return to_blocked(xp, x, b)

    return run


@KERNELS.register("ReorderOutput", 1, domain=DOMAIN)
def reorder_output(ctx):
    xp, b = ctx.xp, block_size()
    last = bool(int(ctx.attr("channels_last")))
    channels = ctx.attr("channels")
    if channels is None or int(channels) <= 0:
        ctx.fail("ReorderOutput needs a positive channels attribute")
    channels = int(channels)

    def run(x):
        _blocked_input(ctx, x, b)
        cp = int(x.shape[1])
        if not channels <= cp < channels + b:
            ctx.fail(f"X has {cp} channels: the block-aligned count of channels={channels} is {padded(channels, b)}")
        y = from_blocked(xp, x, b)[:, :channels]
        return xp.permute_dims(y, (0, 2, 3, 1)) if last else y

    return run


@KERNELS.register("Conv", 1, domain=DOMAIN)
def conv(ctx):
    from onnxkit_default_domain.api import make_conv

    xp, b = ctx.xp, block_size()
    plain_conv = make_conv(ctx)
    act = activation(ctx, ctx.attr_str("activation", ""), ctx.attr("activation_params") or ())
    group = int(ctx.attr("group"))

    def run(x, w, bias=None, total=None):
        _check(ctx, x, "X")
        _check(ctx, w, "W")
        cx, op = int(x.shape[1]), int(w.shape[0])
        if op % b:
            ctx.fail(f"W has {op} output channels, not a multiple of the NCHWc block size {b}")
        if cx < b:                                            # plain NCHW input: OIHWBo filter
            wp = filter_oihwbo(xp, w, b)
        else:
            _blocked_input(ctx, x, b)
            x = from_blocked(xp, x, b)
            if group > 1 and int(w.shape[1]) == 1 and op == group:    # depthwise: OIHWBo
                wp = filter_oihwbo(xp, w, b)
            else:
                if int(w.shape[1]) % b:
                    ctx.fail(f"W has {int(w.shape[1])} input channels per group, not a multiple of the block size {b}")
                wp = filter_oihwbibo(xp, w, b)
        y = plain_conv(x, wp, bias)
        if total is not None:
            if shape_of(total) != shape_of(y):
                ctx.fail(f"Sum has shape {shape_of(total)}, the convolution's output {shape_of(y)}")
            y = y + from_blocked(xp, total, b)
        return to_blocked(xp, xp.astype(act(xp, y), x.dtype), b)

    return run


def _pooled(ctx, factory):
    xp, b = ctx.xp, block_size()
    pool = factory(ctx)

    def run(x):
        _blocked_input(ctx, x, b)
        return to_blocked(xp, pool(from_blocked(xp, x, b)), b)

    return run


@KERNELS.register("MaxPool", 1, domain=DOMAIN)
def max_pool(ctx):
    from onnxkit_default_domain.api import max_pool_kernel

    return _pooled(ctx, max_pool_kernel)


@KERNELS.register("AveragePool", 1, domain=DOMAIN)
def average_pool(ctx):
    from onnxkit_default_domain.api import average_pool_kernel

    return _pooled(ctx, average_pool_kernel)


@KERNELS.register("GlobalMaxPool", 1, domain=DOMAIN)
def global_max_pool(ctx):
    from onnxkit_default_domain.api import global_max_pool as pool

    return _pooled(ctx, pool)


@KERNELS.register("GlobalAveragePool", 1, domain=DOMAIN)
def global_average_pool(ctx):
    from onnxkit_default_domain.api import global_average_pool as pool

    return _pooled(ctx, pool)


def _source(mode: str, n_in: int, n_out: int, s: int) -> np.ndarray:
    """The float32 source coordinate of each output index (onnxruntime's NchwcUpsample)."""
    o = np.arange(n_out, dtype=np.float32)
    if s == 1:
        return o
    if mode == "align_corners":
        return o * np.float32(n_in - 1) / np.float32(n_out - 1) if n_out > 1 else np.zeros(n_out, np.float32)
    if mode == "half_pixel":
        return np.maximum(np.float32(0), (o + np.float32(0.5)) / np.float32(s) - np.float32(0.5))
    return o / np.float32(s)


def _taps(src: np.ndarray, n_in: int):
    """``(i0, i1, frac)`` of each source coordinate: the rows read and the weight of the second."""
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    return i0, i1, (src - i0.astype(np.float32)).astype(np.float32)


@KERNELS.register("Upsample", 1, domain=DOMAIN)
def upsample(ctx):
    xp, b = ctx.xp, block_size()
    scales = [int(s) for s in (ctx.attr("scales") or ())]
    if len(scales) != 4 or scales[0] != 1 or scales[1] != 1 or min(scales) < 1:
        ctx.fail(f"scales must be 4 positive integers with N and C 1, got {scales}")
    mode = ctx.attr_str("mode")
    if mode not in ("nearest", "linear"):
        ctx.fail(f"mode {mode!r} is not nearest or linear")
    ctm = ctx.attr_str("coordinate_transformation_mode")
    sh, sw = scales[2], scales[3]

    def run(x):
        _blocked_input(ctx, x, b)
        p = from_blocked(xp, x, b)
        h, w = int(x.shape[2]), int(x.shape[3])
        if mode == "nearest" or 0 in (h, w):
            rows = ctx.from_host(np.arange(h * sh, dtype=np.int64) // sh)
            cols = ctx.from_host(np.arange(w * sw, dtype=np.int64) // sw)
            return to_blocked(xp, xp.take(xp.take(p, rows, axis=2), cols, axis=3), b)
        r0, r1, fr = _taps(_source(ctm, h, h * sh, sh), h)
        c0, c1, fc = _taps(_source(ctm, w, w * sw, sw), w)
        fr = ctx.from_host(fr.reshape(-1, 1))
        fc = ctx.from_host(fc)
        top = xp.take(p, ctx.from_host(r0), axis=2)
        bottom = xp.take(p, ctx.from_host(r1), axis=2)
        rows = top + (bottom - top) * fr
        left = xp.take(rows, ctx.from_host(c0), axis=3)
        right = xp.take(rows, ctx.from_host(c1), axis=3)
        return to_blocked(xp, left + (right - left) * fc, b)

    return run


__all__ = ["KERNELS", "block_size", "to_blocked", "from_blocked", "filter_oihwbo", "filter_oihwbibo", "padded"]
