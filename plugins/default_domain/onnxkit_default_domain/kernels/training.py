"""Optimizers of the ai.onnx.preview.training domain: Adagrad, Adam, Momentum (every backend).

Momentum has a standard and a Nesterov mode.  Each updates any number of tensors at once:
inputs ``R, T, X1..Xn, G1..Gn, <state>1..n``, outputs the new values of ``X`` and of each
state, grouped the same way.  Gradient (reverse-mode differentiation of the enclosing graph) is
in ``gradient.py``.

The scalars R (learning rate) and T (update count) are read on the host; the updates are
computed in double precision in the backend's namespace and rounded to each tensor's own
element type.
"""

from __future__ import annotations

import math

from onnxkit.plugin import KernelTable

from ._common import shape_of, size_of

KERNELS = KernelTable()
DOMAIN = "ai.onnx.preview.training"


def _groups(ctx, args, per: int):
    """Split ``R, T, X..., G..., S1..., S2...`` into ``R``, ``T`` and ``per`` equal groups."""
    if len(args) < 2 + per or (len(args) - 2) % per:
        ctx.fail(f"expected R, T and {per} groups of equally many tensors, got {len(args)} inputs")
    n = (len(args) - 2) // per
    r, t = args[0], args[1]
    if r is None or t is None or size_of(r) != 1 or size_of(t) != 1:
        ctx.fail("R (learning rate) and T (update count) must be scalars")
    groups = [list(args[2 + k * n: 2 + (k + 1) * n]) for k in range(per)]
    for k, g in enumerate(groups):
        for i, a in enumerate(g):
            if a is None or shape_of(a) != shape_of(groups[0][i]):
                ctx.fail(f"input group {k} tensor {i} does not have the shape of X{i + 1}")
    return float(ctx.to_host(r).reshape(-1)[0]), int(ctx.to_host(t).reshape(-1)[0]), groups


def _floats(ctx, *names) -> list:
    """The FLOAT attributes named, in order (a default is the schema's)."""
    return [float(ctx.attr(name)) for name in names]


def _f64(xp, a):
    return xp.astype(a, xp.float64)


def _cast(xp, value, like):
    """``value`` rounded to ``like``'s element type, as an array (numpy's 0-d arithmetic gives scalars)."""
    return xp.asarray(xp.astype(value, like.dtype))


@KERNELS.register("Adagrad", 1, domain=DOMAIN)
def adagrad(ctx):
    xp = ctx.xp
    decay, eps, norm = _floats(ctx, "decay_factor", "epsilon", "norm_coefficient")

    def fn(*args):
        r, t, (xs, gs, hs) = _groups(ctx, args, 3)
        rate = r / (1.0 + t * decay)
        new_x, new_h = [], []
        for x, g, h in zip(xs, gs, hs):
            gr = norm * _f64(xp, x) + _f64(xp, g)
            h2 = _f64(xp, h) + gr * gr
            new_x.append(_cast(xp, _f64(xp, x) - rate * gr / (xp.sqrt(h2) + eps), x))
            new_h.append(_cast(xp, h2, h))
        return tuple(new_x + new_h)

    return fn


@KERNELS.register("Adam", 1, domain=DOMAIN)
def adam(ctx):
    xp = ctx.xp
    alpha, beta, eps, norm, norm_post = _floats(ctx, "alpha", "beta", "epsilon", "norm_coefficient",
                                                "norm_coefficient_post")

    def fn(*args):
        r, t, (xs, gs, vs, hs) = _groups(ctx, args, 4)
        rate = r * math.sqrt(1.0 - beta ** t) / (1.0 - alpha ** t) if t > 0 else r
        new_x, new_v, new_h = [], [], []
        for x, g, v, h in zip(xs, gs, vs, hs):
            gr = norm * _f64(xp, x) + _f64(xp, g)
            v2 = alpha * _f64(xp, v) + (1.0 - alpha) * gr
            h2 = beta * _f64(xp, h) + (1.0 - beta) * gr * gr
            x2 = _f64(xp, x) - rate * v2 / (xp.sqrt(h2) + eps)
            new_x.append(_cast(xp, (1.0 - norm_post) * x2, x))
            new_v.append(_cast(xp, v2, v))
            new_h.append(_cast(xp, h2, h))
        return tuple(new_x + new_v + new_h)

    return fn


@KERNELS.register("Momentum", 1, domain=DOMAIN)
def momentum(ctx):
    xp = ctx.xp
    for name in ("alpha", "beta", "norm_coefficient", "mode"):  # required: no default
        if ctx.attr(name) is None:
            ctx.fail(f"the {name} attribute is required")
    alpha, beta, norm = _floats(ctx, "alpha", "beta", "norm_coefficient")
    mode = ctx.attr_str("mode")
    if mode not in ("standard", "nesterov"):
        ctx.fail(f"mode must be 'standard' or 'nesterov', got {mode!r}")

    def fn(*args):
        r, t, (xs, gs, vs) = _groups(ctx, args, 3)
        b = beta if t > 0 else 1.0
        new_x, new_v = [], []
        for x, g, v in zip(xs, gs, vs):
            gr = norm * _f64(xp, x) + _f64(xp, g)
            v2 = alpha * _f64(xp, v) + b * gr
            step = v2 if mode == "standard" else gr + alpha * v2
            new_x.append(_cast(xp, _f64(xp, x) - r * step, x))
            new_v.append(_cast(xp, v2, v))
        return tuple(new_x + new_v)

    return fn
