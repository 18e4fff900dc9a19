"""Activations of ai.onnx on the gpu backend (torch).

Operators and the since_versions implemented (every definition of opsets 1..28):

Relu 1 6 13 14, LeakyRelu 1 6 16, PRelu 1 6 7 9 16, Elu 1 6 22, Selu 1 6 22, Celu 12 28,
Sigmoid 1 6 13, HardSigmoid 1 6 22, HardSwish 14 22, Softplus 1 22, Softsign 1 22,
Tanh 1 6 13, Gelu 20 (``approximate`` 'none' | 'tanh'), Mish 18 22, ThresholdedRelu 10 22,
Shrink 9, Swish 24, Softmax 1 11 13, LogSoftmax 1 11 13, Hardmax 1 11 13.

Version notes.  Softmax/LogSoftmax/Hardmax before 13 coerce the input to 2-D at ``axis``
(``[a0*...*a(k-1), ak*...*a(n-1)]``) and normalise over the second dimension; from 13 on
they work along the single axis ``axis`` (default -1).  Hardmax marks the first maximum.
PRelu 1 and 6 take a slope of one element, of X's shape, or of X's channel count (dimension
1); from 7 on the slope broadcasts to X unidirectionally (6.6.3).  ``consumed_inputs`` is
ignored.  float16 and bfloat16 are computed in float32 and rounded back once, except that
Softmax and LogSoftmax compute float16 in float16, each step rounded (their sums accumulated
in float32), as the reference implementation that generated the ONNX vectors does; Softplus is the exact max(x, 0) + log1p(exp(-|x|)) (torch's own has a
threshold); Gelu 'none' is 0.5 x erfc(-x/sqrt 2), accurate in the negative tail.
Integer inputs (Relu 14, PRelu 9 and 16, Shrink) keep their type: Shrink computes them
in double and truncates, as the cpu backend does.
"""

from __future__ import annotations

import math

from onnxkit.runtime import KernelTable

from .elementwise import low_float

KERNELS = KernelTable()


def _float(fn):
    """``fn(x)`` run on float32 for float16/bfloat16 input, the result rounded back once."""
    def run(x):
        dt = x.dtype
        if low_float(dt):
            return fn(x.float()).to(dt)
        r = fn(x)
        return r if r.dtype == dt else r.to(dt)
    return run


def _register(name, *versions):
    """Register ``make(ctx, torch) -> fn(x)`` wrapped by :func:`_float`."""
    def deco(make):
        def factory(ctx):
            import torch

            return _float(make(ctx, torch))
        KERNELS.register(name, *versions)(factory)
        return make
    return deco


def _softplus(torch, x):
    """log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), without overflow."""
    return torch.clamp(x, min=0) + torch.log1p(torch.exp(-torch.abs(x)))


# ----------------------------------------------------------------------------- rectifiers
@KERNELS.register("Relu", 1, 6, 13, 14)
def _relu(ctx):
    import torch

    return torch.relu


@_register("LeakyRelu", 1, 6, 16)
def _leaky_relu(ctx, torch):
    alpha = float(ctx.attr("alpha", 0.01))
    return lambda x: torch.where(x < 0, x * alpha, x)


@KERNELS.register("PRelu", 1, 6, 7, 9, 16)
def _prelu(ctx):
    import torch

    legacy = ctx.since_version < 7

    def body(x, slope):
        return torch.where(x < 0, x * slope, x)

    def run(x, slope):
        if legacy and tuple(slope.shape) != tuple(x.shape) and slope.numel() != 1:
            if slope.ndim == 1 and x.ndim >= 2 and slope.shape[0] == x.shape[1]:
                slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))     # one slope per channel
        elif legacy and slope.numel() == 1:
            slope = slope.reshape(())
        try:
            ok = tuple(torch.broadcast_shapes(x.shape, slope.shape)) == tuple(x.shape)
        except RuntimeError:
            ok = False
        if not ok:
            ctx.fail(f"slope of shape {list(slope.shape)} does not broadcast unidirectionally to X of shape "
                     f"{list(x.shape)}")
        dt = x.dtype
        if low_float(dt):
            return body(x.float(), slope.float()).to(dt)
        return body(x, slope.to(dt))
    return run


@_register("ThresholdedRelu", 10, 22)
def _thresholded_relu(ctx, torch):
    alpha = float(ctx.attr("alpha", 1.0))
    return lambda x: torch.where(x > alpha, x, torch.zeros((), dtype=x.dtype, device=x.device))


@_register("Elu", 1, 6, 22)
def _elu(ctx, torch):
    alpha = float(ctx.attr("alpha", 1.0))
    return lambda x: torch.expm1(torch.clamp(x, max=0)) * alpha + torch.clamp(x, min=0)


@_register("Selu", 1, 6, 22)
def _selu(ctx, torch):
    alpha, gamma = float(ctx.attr("alpha")), float(ctx.attr("gamma"))
    return lambda x: (torch.expm1(torch.clamp(x, max=0)) * alpha + torch.clamp(x, min=0)) * gamma


@_register("Celu", 12, 28)
def _celu(ctx, torch):
    alpha = float(ctx.attr("alpha", 1.0))
    if alpha == 0.0:
        ctx.fail("alpha must not be 0")

    def fn(x):
        a = torch.tensor(alpha, dtype=x.dtype).item()          # alpha in the element type
        return torch.clamp(torch.expm1(x / a) * a, max=0) + torch.clamp(x, min=0)
    return fn


@KERNELS.register("Shrink", 9)
def _shrink(ctx):
    import torch

    bias, lambd = float(ctx.attr("bias", 0.0)), float(ctx.attr("lambd", 0.5))

    def body(x):
        zero = torch.zeros((), dtype=x.dtype, device=x.device)
        return torch.where(x < -lambd, x + bias, torch.where(x > lambd, x - bias, zero))

    def run(x):
        dt = x.dtype
        if dt.is_floating_point:
            return body(x.float()).to(dt) if low_float(dt) else body(x)
        return torch.trunc(body(x.to(torch.float64))).to(torch.int64).to(dt)   # integers: in double, truncated
    return run


# ----------------------------------------------------------------------------- smooth
@_register("Sigmoid", 1, 6, 13)
def _sigmoid(ctx, torch):
    return torch.sigmoid


@_register("HardSigmoid", 1, 6, 22)
def _hard_sigmoid(ctx, torch):
    alpha, beta = float(ctx.attr("alpha", 0.2)), float(ctx.attr("beta", 0.5))
    return lambda x: torch.clamp(x * alpha + beta, 0, 1)


@_register("HardSwish", 14, 22)
def _hard_swish(ctx, torch):
    return lambda x: x * torch.clamp(x * (1.0 / 6.0) + 0.5, 0, 1)


@_register("Softplus", 1, 22)
def _softplus_kernel(ctx, torch):
    return lambda x: _softplus(torch, x)


@_register("Softsign", 1, 22)
def _softsign(ctx, torch):
    return lambda x: x / (torch.abs(x) + 1)


@_register("Tanh", 1, 6, 13)
def _tanh(ctx, torch):
    return torch.tanh


@_register("Gelu", 20)
def _gelu(ctx, torch):
    mode = ctx.attr_str("approximate", "none")
    if mode not in ("none", "tanh"):
        ctx.fail(f"approximate must be 'none' or 'tanh', got {mode!r}")
    if mode == "tanh":
        c2 = 2.0 * math.sqrt(2.0 / math.pi)
        # 0.5*x*(1 + tanh(u)) = x * sigmoid(2u): no cancellation at 1 + tanh
        return lambda x: x * torch.sigmoid((x * x * 0.044715 + 1) * x * c2)
    inv = -1.0 / math.sqrt(2.0)
    return lambda x: 0.5 * x * torch.special.erfc(x * inv)


@_register("Mish", 18, 22)
def _mish(ctx, torch):
    return lambda x: x * torch.tanh(_softplus(torch, x))


@_register("Swish", 24)
def _swish(ctx, torch):
    alpha = float(ctx.attr("alpha", 1.0))
    return lambda x: x * torch.sigmoid(x * alpha)


# ----------------------------------------------------------------------------- softmax family
def _normalizer(ctx, body):
    """Apply ``body(x, axis)`` as the version requires (2-D coercion before 13)."""
    legacy = ctx.since_version < 13
    axis = int(ctx.attr("axis", 1 if legacy else -1))

    def fn(x):
        r = x.ndim
        a = axis + r if axis < 0 else axis
        if not (0 <= a < r or (legacy and a == r)):
            ctx.fail(f"axis {axis} is out of range for an input of rank {r}")
        if x.numel() == 0:
            return x.clone()
        if legacy:
            n = math.prod(x.shape[:a])
            return body(x.reshape(n, x.numel() // n), 1).reshape(x.shape)
        return body(x, a)
    return fn


def _hardmax(torch, x, axis):
    idx = torch.argmax(x, dim=axis, keepdim=True)         # the first maximum
    y = torch.zeros_like(x)
    return y.scatter_(axis, idx, torch.ones((), dtype=x.dtype, device=x.device).expand(idx.shape))


def _half_steps(torch, body16, body):
    """float16 is computed in float16, each step rounded (sums accumulated in float32), as the
    reference implementation that produced the ONNX vectors does; other types by ``body``
    (bfloat16 through float32)."""
    def run(x, a):
        if x.dtype == torch.float16:
            return body16(x, a)
        if x.dtype == torch.bfloat16:
            return body(x.float(), a).to(x.dtype)
        return body(x, a)
    return run


def _sum16(torch, e, a):
    return torch.sum(e, dim=a, keepdim=True, dtype=torch.float32).to(e.dtype)


def _softmax16(torch, x, a):
    e = torch.exp(x - torch.amax(x, dim=a, keepdim=True))
    return e / _sum16(torch, e, a)


def _log_softmax16(torch, x, a):
    e = x - torch.amax(x, dim=a, keepdim=True)
    return e - torch.log(_sum16(torch, torch.exp(e), a))


@KERNELS.register("Softmax", 1, 11, 13)
def _softmax_kernel(ctx):
    import torch

    return _normalizer(ctx, _half_steps(torch, lambda x, a: _softmax16(torch, x, a),
                                        lambda x, a: torch.softmax(x, a)))


@KERNELS.register("LogSoftmax", 1, 11, 13)
def _log_softmax_kernel(ctx):
    import torch

    return _normalizer(ctx, _half_steps(torch, lambda x, a: _log_softmax16(torch, x, a),
                                        lambda x, a: torch.log_softmax(x, a)))


@_register("Hardmax", 1, 11, 13)
def _hardmax_kernel(ctx, torch):
    return _normalizer(ctx, lambda x, a: _hardmax(torch, x, a))
