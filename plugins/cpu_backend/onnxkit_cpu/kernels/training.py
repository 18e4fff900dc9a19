"""Training kernels of the ai.onnx.preview.training domain.

Operators and the definitions (since_versions) implemented:

* Adagrad 1, Adam 1, Momentum 1 (standard and Nesterov) -- each updates any number of
  tensors at once: inputs ``R, T, X1..Xn, G1..Gn, <state>1..n``, outputs the new values of
  ``X`` and of each state, grouped the same way.

Gradient 1 (reverse-mode differentiation of the enclosing graph) is in ``gradient.py``.

Updates are computed in double precision and rounded to each tensor's own element type.
"""

from __future__ import annotations

import numpy as np

from onnxkit.runtime import KernelTable

KERNELS = KernelTable()
DOMAIN = "ai.onnx.preview.training"


def _groups(ctx, args, per: int):
    """Split ``R, T, X..., G..., S1..., S2...`` into ``R``, ``T`` and ``per`` equal groups."""
    if len(args) < 2 + per or (len(args) - 2) % per:
        ctx.fail(f"expected R, T and {per} groups of equally many tensors, got {len(args)} inputs")
    n = (len(args) - 2) // per
    r, t = args[0], args[1]
    if r is None or t is None or np.size(r) != 1 or np.size(t) != 1:
        ctx.fail("R (learning rate) and T (update count) must be scalars")
    groups = [list(args[2 + k * n: 2 + (k + 1) * n]) for k in range(per)]
    for k, g in enumerate(groups):
        for i, a in enumerate(g):
            if a is None or np.shape(a) != np.shape(groups[0][i]):
                ctx.fail(f"input group {k} tensor {i} does not have the shape of X{i + 1}")
    return float(np.asarray(r).reshape(-1)[0]), int(np.asarray(t).reshape(-1)[0]), groups


def _f64(a):
    return np.asarray(a).astype(np.float64)


@KERNELS.register("Adagrad", 1, domain=DOMAIN)
def adagrad(ctx):
    decay = float(ctx.attr("decay_factor", 0.0))
    eps = float(ctx.attr("epsilon", 0.0))
    norm = float(ctx.attr("norm_coefficient", 0.0))

    def fn(*args):
        r, t, (xs, gs, hs) = _groups(ctx, args, 3)
        rate = r / (1.0 + t * decay)
        new_x, new_h = [], []
        for x, g, h in zip(xs, gs, hs):
            gr = norm * _f64(x) + _f64(g)
            h2 = _f64(h) + gr * gr
            new_x.append((_f64(x) - rate * gr / (np.sqrt(h2) + eps)).astype(x.dtype))
            new_h.append(h2.astype(h.dtype))
        return tuple(new_x + new_h)

    return fn


@KERNELS.register("Adam", 1, domain=DOMAIN)
def adam(ctx):
    alpha = float(ctx.attr("alpha", 0.9))
    beta = float(ctx.attr("beta", 0.999))
    eps = float(ctx.attr("epsilon", 0.0))
    norm = float(ctx.attr("norm_coefficient", 0.0))
    norm_post = float(ctx.attr("norm_coefficient_post", 0.0))

    def fn(*args):
        r, t, (xs, gs, vs, hs) = _groups(ctx, args, 4)
        rate = r * np.sqrt(1.0 - beta ** t) / (1.0 - alpha ** t) if t > 0 else r
        new_x, new_v, new_h = [], [], []
        for x, g, v, h in zip(xs, gs, vs, hs):
            gr = norm * _f64(x) + _f64(g)
            v2 = alpha * _f64(v) + (1.0 - alpha) * gr
            h2 = beta * _f64(h) + (1.0 - beta) * gr * gr
            x2 = _f64(x) - rate * v2 / (np.sqrt(h2) + eps)
            new_x.append(((1.0 - norm_post) * x2).astype(x.dtype))
            new_v.append(v2.astype(v.dtype))
            new_h.append(h2.astype(h.dtype))
        return tuple(new_x + new_v + new_h)

    return fn


@KERNELS.register("Momentum", 1, domain=DOMAIN)
def momentum(ctx):
    alpha = float(ctx.attr("alpha", 0.0))
    beta = float(ctx.attr("beta", 0.0))
    norm = float(ctx.attr("norm_coefficient", 0.0))
    mode = ctx.attr_str("mode", "standard")
    if mode not in ("standard", "nesterov"):
        ctx.fail(f"mode must be 'standard' or 'nesterov', got {mode!r}")
    for name in ("alpha", "beta", "norm_coefficient", "mode"):
        if ctx.attr(name) is None:
            ctx.fail(f"the {name} attribute is required")

    def fn(*args):
        r, t, (xs, gs, vs) = _groups(ctx, args, 3)
        b = beta if t > 0 else 1.0
        new_x, new_v = [], []
        for x, g, v in zip(xs, gs, vs):
            gr = norm * _f64(x) + _f64(g)
            v2 = alpha * _f64(v) + b * gr
            step = v2 if mode == "standard" else gr + alpha * v2
            new_x.append((_f64(x) - r * step).astype(x.dtype))
            new_v.append(v2.astype(v.dtype))
        return tuple(new_x + new_v)

    return fn
