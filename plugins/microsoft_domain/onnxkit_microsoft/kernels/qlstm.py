"""DynamicQuantizeLSTM (com.microsoft 1), what ``onnxruntime.quantization.quantize_dynamic`` writes
for an ai.onnx LSTM, computed as onnxruntime's CPU kernel computes it.

Inputs: X float32 ``[T, B, I]``; W ``[D, I, 4H]`` and R ``[D, H, 4H]``, 8-bit (uint8 or int8) and
stored transposed (gates i, o, f, c along the last axis); B, sequence_lens, initial_h, initial_c
and P as ai.onnx LSTM's; ``W_scale`` / ``W_zero_point`` (and R's) one value per direction,
``[D]``, or one per output column, ``[D, 4H]``, the zero points of the weights' type.  Every
attribute of LSTM-7 (direction, activations with their alpha / beta, clip, input_forget); layout
is sequence-first.

The activations are quantized on the fly, as onnxruntime does:

* **X**, once for the whole sequence: the rows ``X[:max(sequence_lens)]`` (all of X without
  sequence_lens) are quantized together, to uint8 with a per-tensor scale and zero point;
* **H**, at every step: the hidden state the step multiplies by R, all batch entries together
  (the initial state at the first step; at later ones the previous step's ``h``, where an
  entry past its length contributes zeros when the node names ``Y`` and its held state
  otherwise — what onnxruntime keeps in the buffer it reads);
* **the parameters** of a tensor ``v``: ``lo = min(min(v), 0)``, ``hi = max(max(v), 0)``,
  ``scale = (hi - lo) / 255`` (1 where ``hi == lo``), ``zero_point = round(clip(-lo / scale,
  0, 255))``, ``q = clip(round(v / scale) + zero_point, 0, 255)``, rounding half to even, in
  float32;
* **the products** ``sum_k (q - zero_point)(w - w_zero_point)`` are exact integers (float64
  here; int32 there), converted to float32 and multiplied by ``scale * w_scale`` (one value, or
  one per column), the step's recurrent product added to the input's;
* **the gates** then as ai.onnx LSTM (the operator's equations, ONNX Operators: LSTM), in
  float32, in onnxruntime's order: ``(x_w + h_r) [+ c * P] + (Wb + Rb)``, clipped, activated;
  Sigmoid and Tanh as onnxruntime's MLAS approximations (:mod:`._mlas_activations`), bit for bit
  on x86-64 with FMA; the other activation functions as the ai.onnx LSTM's.

What can still differ from onnxruntime: the order of a few float32 operations (one unit in the
last place here and there); where that moves a value of H across a rounding boundary, the next
step's product moves by one quantization step of that element.  onnxruntime with several
intra-op threads quantizes each thread's share of the batch separately (batch > 4, or batch
>= 2 with hidden_size <= 256), so its result depends on its thread count; onnxkit quantizes the
whole batch, as onnxruntime does on one thread (and always for batch 1).  On x86 CPUs without
AVX-VNNI onnxruntime's uint8 x int8 product may saturate 16-bit pair sums (its documented U8S8
caveat); onnxkit's products are exact.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, calls_blas

from . import _mlas_activations as mlas
from ._common import DOMAIN, const, device_of, shape_of
from .quantized import _check8, _name

KERNELS = KernelTable()

#: uint8's top code: a dynamically quantized activation spans [0, QMAX]
QMAX = 255.0


def quantize_u8(xp, v):
    """``(q - zero_point, scale)`` of float32 ``v`` quantized to uint8 with a per-tensor scale
    and zero point taken from its range widened to hold 0 (onnxruntime's dynamic quantization of
    an activation); ``q - zero_point`` is returned as float32 integers in [-255, 255], ``scale`` as
    a 0-d float32 array."""
    zero = const(xp, 0.0, v)
    lo = xp.minimum(xp.min(v), zero)
    hi = xp.maximum(xp.max(v), zero)
    scale = xp.where(hi == lo, const(xp, 1.0, v), (hi - lo) / QMAX)
    zp = xp.round(xp.clip(zero - lo / scale, 0.0, QMAX))
    q = xp.clip(xp.round(v / scale) + zp, 0.0, QMAX)
    return q - zp, scale


def _int_product(xp, a, w):
    """The exact integer product ``a @ w`` of integer-valued float arrays, as float32 (float64
    holds every sum of 8-bit products exactly; the cast rounds as int32 -> float32 does)."""
    return xp.astype(xp.astype(a, xp.float64) @ w, xp.float32)


class _Weights:
    """One weight input, checked: ``centered`` float64 ``[D, K, 4H]`` holding ``w - zero_point``
    and ``scale`` float32 ``[D, 1]`` or ``[D, 4H]``."""

    def __init__(self, ctx, xp, w, scale, zp, what: str, dims: tuple):
        _check8(ctx, w, what)
        if shape_of(w) != list(dims):
            k = "input_size" if what == "W" else "hidden_size"
            ctx.fail(f"{what} must have shape {list(dims)} [num_directions, {k}, 4 * hidden_size], got {shape_of(w)}")
        d, _, g = dims
        for v, name in ((scale, f"{what}_scale"), (zp, f"{what}_zero_point")):
            if v is None:
                ctx.fail(f"{name} is required")
            if shape_of(v) not in ([d], [d, g]):
                ctx.fail(f"{name} has shape {shape_of(v)}: [{d}] (per direction) or [{d}, {g}] (per column) expected")
        if _name(scale) != "float32":
            ctx.fail(f"{what}_scale has element type {_name(scale)}; float32 expected")
        if zp.dtype != w.dtype:
            ctx.fail(f"{what}_zero_point has element type {_name(zp)}, {what} {_name(w)}: one type expected")
        z = xp.reshape(xp.astype(zp, xp.float64), (d, 1, -1))
        self.centered = xp.astype(w, xp.float64) - z
        self.scale = xp.reshape(scale, (d, -1))


def _order(T: int, lens: np.ndarray, reverse: bool) -> np.ndarray:
    """``[T, B]`` time index of each batch entry at each step: the identity forward; reversed
    within each entry's length (and the identity past it) for the reverse direction — its own
    inverse."""
    t = np.arange(T)[:, None]
    if not reverse:
        return np.broadcast_to(t, (T, lens.shape[0])).copy()
    return np.where(t < lens[None, :], lens[None, :] - 1 - t, t)


def _gather_rows(xp, a, order: np.ndarray, ctx):
    """``out[s, b] = a[order[s, b], b]`` for ``a`` ``[T, B, ...]``."""
    T, Bn = order.shape
    flat = xp.reshape(a, (T * Bn, *shape_of(a)[2:]))
    idx = ctx.from_host((order * Bn + np.arange(Bn)[None, :]).reshape(-1).astype(np.int64))
    return xp.reshape(xp.take(flat, idx, axis=0), tuple(shape_of(a)))


@KERNELS.register("DynamicQuantizeLSTM", 1, domain=DOMAIN)
@calls_blas
def dynamic_quantize_lstm(ctx):
    from onnxkit_default_domain.api import rnn

    xp = ctx.xp
    s = rnn.Setup(ctx, ["Sigmoid", "Tanh", "Tanh"], unclipped=(2,))
    acts = _gate_functions(ctx, xp, s)
    input_forget = bool(ctx.attr("input_forget") or 0)
    zeros_past_end = ctx.output_requested(0)   # onnxruntime reads Y's rows back: zeros past an entry's end
    held = {}

    def weights(positions, values, what, dims):
        """The checked, centered weights; kept across runs while the same constant inputs come back."""
        if not all(ctx.is_constant(k) for k in positions):
            return _Weights(ctx, xp, *values, what, dims)
        kept = held.get(what)
        if kept is None or kept[2] != dims or any(a is not b for a, b in zip(kept[0], values)):
            kept = held[what] = (values, _Weights(ctx, xp, *values, what, dims), dims)
        return kept[1]

    def run(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, W_scale=None,
            W_zero_point=None, R_scale=None, R_zero_point=None):
        if X is None or W is None or R is None:
            ctx.fail("X, W and R are required")
        if _name(X) != "float32":
            ctx.fail(f"X has element type {_name(X)}; float32 expected")
        if X.ndim != 3:
            ctx.fail(f"X must be 3-D [seq_length, batch_size, input_size], got shape {shape_of(X)}")
        T, Bn, I = shape_of(X)
        D = s.num_dirs
        if R.ndim != 3:
            ctx.fail(f"R must have rank 3 [num_directions, hidden_size, 4 * hidden_size], got shape {shape_of(R)}")
        H = int(R.shape[1])
        if s.hidden is not None and s.hidden != H:
            ctx.fail(f"hidden_size={s.hidden} but R has shape {shape_of(R)}")
        w = weights((1, 8, 9), (W, W_scale, W_zero_point), "W", (D, I, 4 * H))
        r = weights((2, 10, 11), (R, R_scale, R_zero_point), "R", (D, H, 4 * H))
        for name, v, want in (("B", B, [D, 8 * H]), ("initial_h", initial_h, [D, Bn, H]),
                              ("initial_c", initial_c, [D, Bn, H]), ("P", P, [D, 3 * H])):
            if v is not None and (shape_of(v) != want or _name(v) != "float32"):
                ctx.fail(f"{name} must be float32 of shape {want}, got {_name(v)} {shape_of(v)}")
        lens = np.full(Bn, T, np.int64)
        if sequence_lens is not None:
            lens = ctx.to_host(sequence_lens).reshape(-1).astype(np.int64)
            if lens.shape != (Bn,) or (lens < 0).any() or (lens > T).any():
                ctx.fail(f"sequence_lens must hold {Bn} lengths in [0, {T}], got {lens.tolist()}")
        steps = int(lens.max()) if Bn else 0
        dev = device_of(X)
        Y = xp.zeros((T, D, Bn, H), dtype=xp.float32, device=dev)
        finals_h, finals_c = [], []
        if steps:
            # X[:steps] quantized once; the reverse direction reads the same rows in another order
            xa, x_scale = quantize_u8(xp, xp.reshape(X[:steps], (steps * Bn, I)))
        active = ctx.from_host((np.arange(T)[:, None] < lens[None, :])[:, :, None])   # [T, B, 1], step order
        for d in range(D):
            order = _order(T, lens, s.reverse[d])
            h0 = xp.zeros((Bn, H), dtype=xp.float32, device=dev) if initial_h is None else initial_h[d]
            c0 = xp.zeros((Bn, H), dtype=xp.float32, device=dev) if initial_c is None else initial_c[d]
            if not steps:
                finals_h.append(xp.zeros_like(h0))
                finals_c.append(xp.zeros_like(c0))
                continue
            proj = _int_product(xp, xa, w.centered[d]) * (x_scale * w.scale[d])        # [steps*B, 4H]
            proj = _gather_rows(xp, xp.reshape(proj, (steps, Bn, 4 * H)), order[:steps], ctx)
            bias = None if B is None else B[d, :4 * H] + B[d, 4 * H:]
            peep = None if P is None else [P[d, k * H:(k + 1) * H] for k in range(3)]   # i, o, f
            out, h, c = _direction(xp, proj, r.centered[d], r.scale[d], bias, peep, acts[d], input_forget,
                                   active, h0, c0, H, zeros_past_end)
            Y[:steps, d] = _gather_rows(xp, out, order[:steps], ctx)
            empty = ctx.from_host((lens == 0)[:, None])
            finals_h.append(xp.where(empty, xp.zeros_like(h), h))
            finals_c.append(xp.where(empty, xp.zeros_like(c), c))
        return Y, xp.stack(finals_h, axis=0), xp.stack(finals_c, axis=0)

    return run


def _gate_functions(ctx, xp, s) -> list:
    """Per direction ``[f, g, h]``: Sigmoid and Tanh as onnxruntime computes them
    (:mod:`._mlas_activations`), clipped as the node says (not ``h``); any other function the
    ai.onnx LSTM's (its alpha / beta consumed in order)."""
    names = ctx.attr("activations") if ctx.has_attr("activations") else None
    names = ["sigmoid", "tanh", "tanh"] * s.num_dirs if not names else [
        (n.decode() if isinstance(n, (bytes, bytearray)) else str(n)).lower() for n in names]
    clip = ctx.attr("clip")
    out = []
    for d in range(s.num_dirs):
        fns = []
        for k in range(3):
            name = names[3 * d + k]
            fn = {"sigmoid": mlas.logistic, "tanh": mlas.tanh}.get(name)
            if fn is None:
                fns.append(s.acts[d][k])
            elif clip is None or k == 2:
                fns.append(lambda x, fn=fn: fn(xp, x))
            else:
                fns.append(lambda x, fn=fn, c=float(clip): fn(xp, xp.clip(x, -c, c)))
        out.append(fns)
    return out


def _direction(xp, proj, rc, r_scale, bias, peep, acts, input_forget: bool, active, h, c, H: int,
               zeros_past_end: bool):
    """One direction's steps (in step order): ``proj`` ``[S, B, 4H]`` the scaled input products,
    ``rc`` float64 ``[H, 4H]`` the centered recurrence weights, ``r_scale`` ``[1]`` or ``[4H]``.
    Returns (the outputs ``[S, B, H]``, zero past each entry's length; the final h; the final c)."""
    f, g, hfn = acts
    S = int(proj.shape[0])
    outs = []
    feed = h
    for t in range(S):
        ha, h_scale = quantize_u8(xp, feed)
        gates = proj[t] + _int_product(xp, ha, rc) * (h_scale * r_scale)
        gi, go, gf, gc = (gates[:, k * H:(k + 1) * H] for k in range(4))
        bi, bo, bf, bc = (None,) * 4 if bias is None else (bias[k * H:(k + 1) * H] for k in range(4))
        if peep is not None:
            gi = gi + c * peep[0]
        i = f(gi if bias is None else gi + bi)
        if input_forget:
            fg = 1.0 - i
        else:
            if peep is not None:
                gf = gf + c * peep[2]
            fg = f(gf if bias is None else gf + bf)
        cn = c * fg + i * g(gc if bias is None else gc + bc)
        if peep is not None:
            go = go + cn * peep[1]
        o = f(go if bias is None else go + bo)
        hn = hfn(cn) * o
        m = active[t]
        h = xp.where(m, hn, h)
        c = xp.where(m, cn, c)
        out = xp.where(m, hn, xp.zeros_like(hn))
        outs.append(out)
        feed = out if zeros_past_end else h
    return xp.stack(outs, axis=0), h, c
