"""Recurrent operators of ai.onnx.

Operators and the definitions (since_versions) implemented:

* ``RNN``  1, 7, 14, 22
* ``GRU``  1, 3, 7, 14, 22 (``linear_before_reset`` from 3 on; 1 has none, i.e. 0)
* ``LSTM`` 1, 7, 14, 22 (peepholes ``P``, ``input_forget``)

Every option: directions forward / reverse / bidirectional, ``sequence_lens`` (steps past a
batch entry's length leave its state unchanged and its ``Y`` rows zero; the reverse direction
starts at the entry's last valid step; an entry of length 0 has zero final states, as in
onnxruntime), ``initial_h`` / ``initial_c``, ``activations`` with
``activation_alpha`` / ``activation_beta`` (consumed in order by the functions that take
them), ``clip`` (applied to the input of every activation), ``layout`` (14+: batch first).
The version 1 attribute ``output_sequence`` only made ``Y`` optional; ``Y`` is produced
whenever the node names it.  Versions 7 / 14 / 22 differ from the previous one only by
``output_sequence`` removed, ``layout`` added and types added, respectively.

float16 and bfloat16 compute in float32, double in float64; outputs keep the input type.
The input projection ``X W^T`` is one matrix product over all steps; each step then does
one product with ``R``.
"""

from __future__ import annotations

import numpy as np

from onnxkit.runtime import KernelTable

KERNELS = KernelTable()


# -- activation functions ----------------------------------------------------------------------
def _sigmoid(x, a, b):
    return 0.5 * (np.tanh(0.5 * x) + 1.0)


def _softplus(x, a, b):
    return np.logaddexp(0, x)


def _elu(x, a, b):
    return np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0)))


#: name (lower case) -> (function, default alpha or None if unused, default beta or None)
_ACTIVATIONS = {
    "relu": (lambda x, a, b: np.maximum(x, 0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (_sigmoid, None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x > a, x, 0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), 0.2, 0.5),
    "elu": (_elu, 1.0, None),
    "softsign": (lambda x, a, b: x / (1 + np.abs(x)), None, None),
    "softplus": (_softplus, None, None),
}


def _activations(ctx, defaults: list, num_dirs: int, unclipped: tuple = ()) -> list:
    """One list of callables per direction, ``len(defaults)`` functions each; the functions at
    positions ``unclipped`` (of each direction) do not clip their input."""
    # Only the node's own list counts: RNN's schema default (Tanh, Tanh) is for two directions.
    names = ctx.attr("activations") if ctx.has_attr("activations") else None
    names = list(defaults) * num_dirs if not names else [
        n.decode() if isinstance(n, (bytes, bytearray)) else str(n) for n in names]
    per = len(defaults)
    if len(names) != per * num_dirs:
        ctx.fail(f"activations lists {len(names)} functions; expected {per * num_dirs} "
                 f"({per} per direction, {num_dirs} direction(s))")
    alphas = list(ctx.attr("activation_alpha") or [])
    betas = list(ctx.attr("activation_beta") or [])
    clip = ctx.attr("clip")
    clip = None if clip is None else float(clip)
    if clip is not None and clip <= 0:
        ctx.fail(f"clip must be positive, got {clip}")
    fns = []
    for k, name in enumerate(names):
        entry = _ACTIVATIONS.get(name.lower())
        if entry is None:
            ctx.fail(f"unknown activation function {name!r}; known: {sorted(_ACTIVATIONS)}")
        f, da, db = entry
        a = (alphas.pop(0) if alphas else da) if da is not None else 0.0
        b = (betas.pop(0) if betas else db) if db is not None else 0.0
        fns.append(_bind(f, float(a), float(b), None if k % per in unclipped else clip))
    return [fns[d * per:(d + 1) * per] for d in range(num_dirs)]


def _bind(f, a, b, clip):
    if clip is None:
        return lambda x: f(x, a, b)
    return lambda x: f(np.clip(x, -clip, clip), a, b)


# -- common ------------------------------------------------------------------------------------
class _Setup:
    __slots__ = ("hidden", "num_dirs", "layout", "acts", "reverse")


def _setup(ctx, defaults: list, unclipped: tuple = ()) -> _Setup:
    s = _Setup()
    # (GRU-1's schema spells its default "foward"; the node's own value is what counts)
    direction = ctx.attr_str("direction") if ctx.has_attr("direction") else "forward"
    if direction not in ("forward", "reverse", "bidirectional"):
        ctx.fail(f"direction must be forward, reverse or bidirectional, got {direction!r}")
    s.num_dirs = 2 if direction == "bidirectional" else 1
    s.reverse = [False, True] if s.num_dirs == 2 else [direction == "reverse"]
    s.hidden = ctx.attr("hidden_size")
    s.layout = int(ctx.attr("layout", 0) or 0)
    if s.layout not in (0, 1):
        ctx.fail(f"layout must be 0 or 1, got {s.layout}")
    s.acts = _activations(ctx, defaults, s.num_dirs, unclipped)
    return s


def _compute_dtype(dtype) -> np.dtype:
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def _prepare(ctx, s: _Setup, X, W, R, gates: int, states: list):
    """Validate and bring inputs to sequence-first compute form.  ``states``: initial states
    (None or arrays).  Returns (X [T,B,I], W, R, compute dtype, states [D,B,H] each)."""
    if X is None or W is None or R is None:
        ctx.fail("X, W and R are required")
    if X.ndim != 3:
        ctx.fail(f"X must be 3-D, got shape {list(X.shape)}")
    ct = _compute_dtype(X.dtype)
    if s.layout:
        X = X.transpose(1, 0, 2)
        states = [None if h is None else h.transpose(1, 0, 2) for h in states]
    T, B, I = X.shape
    H = R.shape[-1]
    if s.hidden is not None and int(s.hidden) != H:
        ctx.fail(f"hidden_size={s.hidden} but R has shape {list(R.shape)}")
    D = s.num_dirs
    if W.shape != (D, gates * H, I):
        ctx.fail(f"W must have shape {[D, gates * H, I]}, got {list(W.shape)}")
    if R.shape != (D, gates * H, H):
        ctx.fail(f"R must have shape {[D, gates * H, H]}, got {list(R.shape)}")
    out_states = []
    for h in states:
        if h is None:
            out_states.append(np.zeros((D, B, H), dtype=ct))
        else:
            if h.shape != (D, B, H):
                ctx.fail(f"an initial state must have shape {[D, B, H]} (sequence-first), got {list(h.shape)}")
            out_states.append(h.astype(ct))
    return X.astype(ct, copy=False), W.astype(ct, copy=False), R.astype(ct, copy=False), ct, out_states


def _lengths(ctx, seq_lens, T: int, B: int):
    """A [T, B, 1] mask of valid steps, or None when every entry runs all T steps."""
    if seq_lens is None:
        return None
    lens = np.asarray(seq_lens).reshape(-1).astype(np.int64)
    if lens.shape != (B,) or (lens < 0).any() or (lens > T).any():
        ctx.fail(f"sequence_lens must hold {B} lengths in [0, {T}], got {lens.tolist()}")
    if (lens == T).all():
        return None
    return (np.arange(T)[:, None] < lens[None, :])[:, :, None]


def _bias(B, d: int, n: int, ct):
    """The summed input and recurrence biases of direction ``d`` (each ``n`` wide), or zeros."""
    if B is None:
        return np.zeros(n, dtype=ct), np.zeros(n, dtype=ct)
    b = B[d].astype(ct)
    return b[:n], b[n:]


def _finish(s: _Setup, X_dtype, Y, finals: list, mask):
    """Y [T,D,B,H] and final states [D,B,H] in the node's layout and element type.  The final
    states of a batch entry of length 0 are zeros (as onnxruntime; the operator leaves it open)."""
    if mask is not None:
        empty = ~mask.any(axis=0)          # [B, 1]
        if empty.any():
            finals = [np.where(empty, 0, f) for f in finals]
    if s.layout:
        Y = Y.transpose(2, 0, 1, 3)
        finals = [f.transpose(1, 0, 2) for f in finals]
    return (np.ascontiguousarray(Y).astype(X_dtype, copy=False),
            *(np.ascontiguousarray(f).astype(X_dtype, copy=False) for f in finals))


def _project(X, W):
    """X [T,B,I] @ W^T [I,G] as one 2-D product (numpy's batched 3-D matmul is much slower)."""
    T, B, I = X.shape
    return (X.reshape(T * B, I) @ W.T).reshape(T, B, W.shape[0])


def _t(M):
    """M^T laid out contiguously (the per-step products run faster on it)."""
    return np.ascontiguousarray(M.T)


def _steps(T: int, reverse: bool):
    return range(T - 1, -1, -1) if reverse else range(T)


def _check_b(ctx, B, D, width):
    if B is not None and B.shape != (D, width):
        ctx.fail(f"B must have shape {[D, width]}, got {list(B.shape)}")


# -- RNN ---------------------------------------------------------------------------------------
@KERNELS.register("RNN", 1, 7, 14, 22)
def rnn(ctx):
    s = _setup(ctx, ["Tanh"])

    def run(X, W, R, B=None, sequence_lens=None, initial_h=None):
        dt = X.dtype
        X, W, R, ct, (H0,) = _prepare(ctx, s, X, W, R, 1, [initial_h])
        T, Bn, _ = X.shape
        Hs = R.shape[-1]
        _check_b(ctx, B, s.num_dirs, 2 * Hs)
        mask = _lengths(ctx, sequence_lens, T, Bn)
        Y = np.zeros((T, s.num_dirs, Bn, Hs), dtype=ct)
        finals = []
        for d in range(s.num_dirs):
            f = s.acts[d][0]
            wb, rb = _bias(B, d, Hs, ct)
            xp = _project(X, W[d]) + (wb + rb)
            rt = _t(R[d])
            h = H0[d]
            for t in _steps(T, s.reverse[d]):
                hn = f(xp[t] + h @ rt)
                if mask is not None:
                    hn = np.where(mask[t], hn, h)
                    Y[t, d] = np.where(mask[t], hn, 0)
                else:
                    Y[t, d] = hn
                h = hn
            finals.append(h)
        return _finish(s, dt, Y, [np.stack(finals)], mask)

    return run


# -- GRU ---------------------------------------------------------------------------------------
@KERNELS.register("GRU", 1, 3, 7, 14, 22)
def gru(ctx):
    s = _setup(ctx, ["Sigmoid", "Tanh"])
    linear_before_reset = int(ctx.attr("linear_before_reset", 0) or 0) if ctx.since_version >= 3 else 0

    def run(X, W, R, B=None, sequence_lens=None, initial_h=None):
        dt = X.dtype
        X, W, R, ct, (H0,) = _prepare(ctx, s, X, W, R, 3, [initial_h])
        T, Bn, _ = X.shape
        Hs = R.shape[-1]
        _check_b(ctx, B, s.num_dirs, 6 * Hs)
        mask = _lengths(ctx, sequence_lens, T, Bn)
        Y = np.zeros((T, s.num_dirs, Bn, Hs), dtype=ct)
        finals = []
        for d in range(s.num_dirs):
            f, g = s.acts[d]
            wb, rb = _bias(B, d, 3 * Hs, ct)
            xp = _project(X, W[d]) + wb         # [T, B, 3H]: z, r, h parts
            xp[..., :2 * Hs] += rb[:2 * Hs]
            rzr = _t(R[d, :2 * Hs])        # [H, 2H]
            rh = _t(R[d, 2 * Hs:])        # [H, H]
            rbh = rb[2 * Hs:]
            h = H0[d]
            for t in _steps(T, s.reverse[d]):
                zr = xp[t, :, :2 * Hs] + h @ rzr
                z = f(zr[:, :Hs])
                r = f(zr[:, Hs:])
                if linear_before_reset:
                    hh = g(xp[t, :, 2 * Hs:] + r * (h @ rh + rbh))
                else:
                    hh = g(xp[t, :, 2 * Hs:] + (r * h) @ rh + rbh)
                hn = (1 - z) * hh + z * h
                if mask is not None:
                    hn = np.where(mask[t], hn, h)
                    Y[t, d] = np.where(mask[t], hn, 0)
                else:
                    Y[t, d] = hn
                h = hn
            finals.append(h)
        return _finish(s, dt, Y, [np.stack(finals)], mask)

    return run


# -- LSTM --------------------------------------------------------------------------------------
@KERNELS.register("LSTM", 1, 7, 14, 22)
def lstm(ctx):
    s = _setup(ctx, ["Sigmoid", "Tanh", "Tanh"], unclipped=(2,))
    input_forget = int(ctx.attr("input_forget", 0) or 0)

    def run(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None):
        dt = X.dtype
        X, W, R, ct, (H0, C0) = _prepare(ctx, s, X, W, R, 4, [initial_h, initial_c])
        T, Bn, _ = X.shape
        Hs = R.shape[-1]
        D = s.num_dirs
        _check_b(ctx, B, D, 8 * Hs)
        if P is not None and P.shape != (D, 3 * Hs):
            ctx.fail(f"P must have shape {[D, 3 * Hs]}, got {list(P.shape)}")
        mask = _lengths(ctx, sequence_lens, T, Bn)
        Y = np.zeros((T, D, Bn, Hs), dtype=ct)
        finals_h, finals_c = [], []
        for d in range(D):
            f, g, hfn = s.acts[d]
            wb, rb = _bias(B, d, 4 * Hs, ct)
            xp = _project(X, W[d]) + (wb + rb)   # [T, B, 4H]: i, o, f, c
            rt = _t(R[d])
            if P is not None:
                pi, po, pf = (P[d].astype(ct)[k * Hs:(k + 1) * Hs] for k in range(3))
            h, c = H0[d], C0[d]
            for t in _steps(T, s.reverse[d]):
                gates = xp[t] + h @ rt
                gi, go, gf, gc = (gates[:, k * Hs:(k + 1) * Hs] for k in range(4))
                if P is not None:
                    gi = gi + pi * c
                    gf = gf + pf * c
                i = f(gi)
                fg = 1 - i if input_forget else f(gf)
                cn = fg * c + i * g(gc)
                if P is not None:
                    go = go + po * cn
                o = f(go)
                hn = o * hfn(cn)
                if mask is not None:
                    m = mask[t]
                    hn = np.where(m, hn, h)
                    cn = np.where(m, cn, c)
                    Y[t, d] = np.where(m, hn, 0)
                else:
                    Y[t, d] = hn
                h, c = hn, cn
            finals_h.append(h)
            finals_c.append(c)
        return _finish(s, dt, Y, [np.stack(finals_h), np.stack(finals_c)], mask)

    return run
