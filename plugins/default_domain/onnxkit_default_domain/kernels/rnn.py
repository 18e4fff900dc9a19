"""Recurrent layers of ai.onnx: RNN, GRU and LSTM (every backend).

Every option of the operators: directions forward / reverse / bidirectional,
``sequence_lens`` (steps past a batch entry's length leave its state unchanged and its ``Y``
rows zero; the reverse direction starts at the entry's last valid step; an entry of length 0
has zero final states, as in onnxruntime), ``initial_h`` / ``initial_c``, ``activations``
with ``activation_alpha`` / ``activation_beta`` (consumed in order by the functions that take
them), ``clip`` (applied to the input of every activation but LSTM's output one), LSTM
peepholes ``P`` and ``input_forget``, GRU ``linear_before_reset`` (from GRU-3; GRU-1 has
none, i.e. 0) and ``layout`` (from the 14 definitions: batch first).  The attribute
``output_sequence`` of the first definitions only made ``Y`` optional; ``Y`` is produced
whenever the node names it.  The later definitions add types only.

float16 and bfloat16 compute in float32, double in float64; outputs keep the input type.
The input projection ``X W^T`` is one matrix product over all steps; each step then does one
product with ``R``.  Sequence lengths are read on the host once per run and become one boolean mask.
"""

from __future__ import annotations

import numpy as np

from ._common import device_of
from onnxkit.plugin import KernelTable, calls_blas

from ._common import compute_dtype, shape_of

KERNELS = KernelTable()


# -- activation functions ----------------------------------------------------------------------
# Each is ``make(xp, alpha, beta) -> f(x)``; ``zero`` below is a 0-d array of x's dtype, so no
# Python float promotes a narrow or bfloat16 value.
def _zero(xp, x):
    return xp.zeros((), dtype=x.dtype, device=device_of(x))


def _sigmoid(xp, a, b):
    return lambda x: 0.5 * (xp.tanh(0.5 * x) + 1.0)


def _elu(xp, a, b):
    return lambda x: xp.where(x >= 0, x, a * xp.expm1(xp.minimum(x, _zero(xp, x))))


#: name (lower case) -> (maker, default alpha or None if unused, default beta or None)
_ACTIVATIONS = {
    "relu": (lambda xp, a, b: lambda x: xp.maximum(x, _zero(xp, x)), None, None),
    "tanh": (lambda xp, a, b: xp.tanh, None, None),
    "sigmoid": (_sigmoid, None, None),
    "affine": (lambda xp, a, b: lambda x: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda xp, a, b: lambda x: xp.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda xp, a, b: lambda x: xp.where(x > a, x, _zero(xp, x)), 1.0, None),
    "scaledtanh": (lambda xp, a, b: lambda x: a * xp.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda xp, a, b: lambda x: xp.clip(a * x + b, 0.0, 1.0), 0.2, 0.5),
    "elu": (_elu, 1.0, None),
    "softsign": (lambda xp, a, b: lambda x: x / (1 + xp.abs(x)), None, None),
    "softplus": (lambda xp, a, b: lambda x: xp.logaddexp(xp.zeros_like(x), x), None, None),
}


def activations(ctx, defaults: list, num_dirs: int, unclipped: tuple = ()) -> list:
    """One list of ``len(defaults)`` callables per direction, from ``activations`` /
    ``activation_alpha`` / ``activation_beta`` / ``clip``; the functions at positions
    ``unclipped`` (of each direction) do not clip their input.  ctx.fail for an unknown name,
    a list of the wrong length or a clip that is not positive."""
    xp = ctx.xp
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
        make, da, db = entry
        a = (alphas.pop(0) if alphas else da) if da is not None else 0.0
        b = (betas.pop(0) if betas else db) if db is not None else 0.0
        f = make(xp, float(a), float(b))
        fns.append(f if clip is None or k % per in unclipped else _clipped(xp, f, clip))
    return [fns[d * per:(d + 1) * per] for d in range(num_dirs)]


def _clipped(xp, f, clip):
    return lambda x: f(xp.clip(x, -clip, clip))


# -- common ------------------------------------------------------------------------------------
class Setup:
    """The attributes every recurrent layer shares, parsed once per node."""

    __slots__ = ("hidden", "num_dirs", "layout", "acts", "reverse", "default_acts")

    def __init__(self, ctx, defaults: list, unclipped: tuple = ()):
        # (GRU-1's schema spells its default "foward"; the node's own value is what counts)
        direction = ctx.attr_str("direction") if ctx.has_attr("direction") else "forward"
        if direction not in ("forward", "reverse", "bidirectional"):
            ctx.fail(f"direction must be forward, reverse or bidirectional, got {direction!r}")
        self.num_dirs = 2 if direction == "bidirectional" else 1
        self.reverse = [False, True] if self.num_dirs == 2 else [direction == "reverse"]
        hidden = ctx.attr("hidden_size")
        self.hidden = None if hidden is None else int(hidden)
        self.layout = int(ctx.attr("layout", 0) or 0) if ctx.since_version >= 14 else 0
        if self.layout not in (0, 1):
            ctx.fail(f"layout must be 0 or 1, got {self.layout}")
        self.acts = activations(ctx, defaults, self.num_dirs, unclipped)
        #: the operator's default activations, unclipped (a backend's fast path may serve only these)
        names = ctx.attr("activations") if ctx.has_attr("activations") else None
        names = [(n.decode() if isinstance(n, (bytes, bytearray)) else str(n)).lower() for n in names or ()]
        self.default_acts = ctx.attr("clip") is None and names in ([], [d.lower() for d in defaults] * self.num_dirs)


def _prepare(ctx, s: Setup, X, W, R, B, gates: int, states: list):
    """Validate and bring the inputs to sequence-first compute form.  ``states``: the initial
    states (None or arrays).  Returns (X [T,B,I], W, R, B or None, compute dtype, states
    [D,B,H] each)."""
    xp = ctx.xp
    require_inputs(ctx, X, W, R)
    ct = compute_dtype(xp, X.dtype)
    if s.layout:
        X = xp.permute_dims(X, (1, 0, 2))
        states = [None if h is None else xp.permute_dims(h, (1, 0, 2)) for h in states]
    H = check_shapes(ctx, s, X, W, R, B, gates, states)
    T, Bn, I = shape_of(X)
    D = s.num_dirs
    out_states = []
    for h in states:
        if h is None:
            out_states.append(xp.zeros((D, Bn, H), dtype=ct, device=device_of(X)))
        else:
            out_states.append(xp.astype(h, ct))
    cast = [None if v is None else xp.astype(v, ct, copy=False) for v in (X, W, R, B)]
    return (*cast, ct, out_states)


def require_inputs(ctx, X, W, R) -> None:
    """ctx.fail unless X, W and R are given and X is 3-D."""
    if X is None or W is None or R is None:
        ctx.fail("X, W and R are required")
    if X.ndim != 3:
        ctx.fail(f"X must be 3-D, got shape {shape_of(X)}")


def check_shapes(ctx, s: Setup, X, W, R, B, gates: int, states: list) -> int:
    """The hidden size; ctx.fail unless W, R, B and the initial states (None or arrays) fit the
    sequence-first X [T, B, I] and the node's hidden_size and directions."""
    T, Bn, I = (int(d) for d in X.shape)
    H = int(R.shape[-1])
    if s.hidden is not None and s.hidden != H:
        ctx.fail(f"hidden_size={s.hidden} but R has shape {shape_of(R)}")
    D = s.num_dirs
    for name, value, want in (("W", W, (D, gates * H, I)), ("R", R, (D, gates * H, H)),
                              ("B", B, (D, 2 * gates * H))):
        if value is not None and tuple(value.shape) != want:
            ctx.fail(f"{name} must have shape {list(want)}, got {shape_of(value)}")
    for h in states:
        if h is not None and tuple(h.shape) != (D, Bn, H):
            ctx.fail(f"an initial state must have shape {[D, Bn, H]} (sequence-first), got {shape_of(h)}")
    return H


def gru_linear_before_reset(ctx) -> bool:
    """GRU's ``linear_before_reset`` (from GRU-3; GRU-1 has none, i.e. 0)."""
    return bool(ctx.attr("linear_before_reset", 0) or 0) if ctx.since_version >= 3 else False


def step_mask(ctx, seq_lens, T: int, B: int):
    """A [T, B, 1] boolean mask of the valid steps (a backend value), or None when every
    entry runs all T steps; ctx.fail for lengths outside [0, T]."""
    if seq_lens is None:
        return None
    lens = ctx.to_host(seq_lens).reshape(-1).astype(np.int64)
    if lens.shape != (B,) or (lens < 0).any() or (lens > T).any():
        ctx.fail(f"sequence_lens must hold {B} lengths in [0, {T}], got {lens.tolist()}")
    if (lens == T).all():
        return None
    return ctx.from_host((np.arange(T)[:, None] < lens[None, :])[:, :, None])


def _biases(xp, B, d: int, n: int, ct, like):
    """The input and recurrence biases of direction ``d`` (each ``n`` wide), or zeros (on the
    device of ``like``)."""
    if B is None:
        zero = xp.zeros(n, dtype=ct, device=device_of(like))
        return zero, zero
    return B[d, :n], B[d, n:]


def _recurrence(xp, m, work: int):
    """``h -> h @ m^T`` for a [G, H] weight ``m``.  When ``work`` (steps x batch entries) is
    large enough to repay it, ``m^T`` is laid out row-major once (BLAS runs the per-step
    products much faster on it than on a transposed view); otherwise, as for the single steps
    a streaming model (silero-vad) runs per call, each step computes ``(m @ h^T)^T`` instead."""
    if work >= 128:
        t = xp.permute_dims(m, (1, 0))
        mt = xp.reshape(xp.reshape(t, (-1,)), tuple(shape_of(t)))   # a reshape of the view copies
        return lambda h: h @ mt
    return lambda h: (m @ h.T).T


def _project(xp, X, W):
    """X [T,B,I] @ W^T [I,G] as one 2-D product (a batched 3-D product is much slower)."""
    T, B, I = shape_of(X)
    return xp.reshape(xp.reshape(X, (T * B, I)) @ xp.permute_dims(W, (1, 0)), (T, B, int(W.shape[0])))


def _steps(T: int, reverse: bool):
    return range(T - 1, -1, -1) if reverse else range(T)


def _run_direction(xp, Y, d: int, reverse: bool, mask, states: list, cell):
    """Run ``cell(t, *states) -> (h, *states)`` over the steps of direction ``d``, writing
    each step's ``h`` into ``Y[t, d]`` (zero past an entry's length; ``Y`` is an array the
    kernel made); returns the final states.  Masked steps keep every state as it was."""
    for t in _steps(int(Y.shape[0]), reverse):
        new = cell(t, *states)
        if mask is not None:
            m = mask[t]
            new = [xp.where(m, n, o) for n, o in zip(new, states)]
            Y[t, d] = xp.where(m, new[0], xp.zeros_like(new[0]))
        else:
            Y[t, d] = new[0]
        states = new
    return states


def _finish(ctx, s: Setup, X_dtype, Y, finals: list, mask):
    """Y [T, D, B, H] and the final states (one [D, B, H] list per state) in the node's layout
    and element type.  The final states of a batch entry of length 0 are zeros (as
    onnxruntime; the operator leaves it open)."""
    xp = ctx.xp
    finals = [xp.stack(f, axis=0) for f in finals]
    if mask is not None:
        empty = xp.logical_not(xp.any(mask, axis=0))      # [B, 1]
        finals = [xp.where(empty, xp.zeros_like(f), f) for f in finals]
    if s.layout:
        Y = xp.permute_dims(Y, (2, 0, 1, 3))
        finals = [xp.permute_dims(f, (1, 0, 2)) for f in finals]
    return (xp.astype(Y, X_dtype, copy=False), *(xp.astype(f, X_dtype, copy=False) for f in finals))


def _run_layer(ctx, s: Setup, gates: int, X, W, R, B, sequence_lens, initial: list, make_cell):
    """The whole layer: inputs prepared, each direction run with the cell
    ``make_cell(d, X, W, R, B, ct, H, work)`` makes for it (``work``: steps x batch entries),
    outputs finished."""
    dt = getattr(X, "dtype", None)
    X, W, R, B, ct, states = _prepare(ctx, s, X, W, R, B, gates, initial)
    T, Bn, _ = shape_of(X)
    Hs = int(R.shape[-1])
    mask = step_mask(ctx, sequence_lens, T, Bn)
    Y = ctx.xp.empty((T, s.num_dirs, Bn, Hs), dtype=ct, device=device_of(X))   # every step is written
    finals = [[] for _ in states]
    for d in range(s.num_dirs):
        cell = make_cell(d, X, W, R, B, ct, Hs, T * Bn)
        last = _run_direction(ctx.xp, Y, d, s.reverse[d], mask, [st[d] for st in states], cell)
        for f, v in zip(finals, last):
            f.append(v)
    return _finish(ctx, s, dt, Y, finals, mask)


# -- RNN ---------------------------------------------------------------------------------------
@KERNELS.register("RNN", 1, 7, 14, 22)
@calls_blas
def rnn(ctx):
    xp = ctx.xp
    s = Setup(ctx, ["Tanh"])

    def make_cell(d, X, W, R, B, ct, Hs, work):
        f = s.acts[d][0]
        wb, rb = _biases(xp, B, d, Hs, ct, W)
        proj = _project(xp, X, W[d]) + (wb + rb)
        rec = _recurrence(xp, R[d], work)
        return lambda t, h: [f(proj[t] + rec(h))]

    def run(X, W, R, B=None, sequence_lens=None, initial_h=None):
        return _run_layer(ctx, s, 1, X, W, R, B, sequence_lens, [initial_h], make_cell)

    return run


# -- GRU ---------------------------------------------------------------------------------------
@KERNELS.register("GRU", 1, 3, 7, 14, 22)
@calls_blas
def gru(ctx):
    xp = ctx.xp
    s = Setup(ctx, ["Sigmoid", "Tanh"])
    linear_before_reset = gru_linear_before_reset(ctx)

    def make_cell(d, X, W, R, B, ct, Hs, work):
        f, g = s.acts[d]
        wb, rb = _biases(xp, B, d, 3 * Hs, ct, W)
        # z, r, h parts; the recurrence bias of z and r is added with the input's
        proj = _project(xp, X, W[d]) + (wb + xp.concat((rb[:2 * Hs], xp.zeros(Hs, dtype=ct, device=device_of(rb)))))
        rzr = _recurrence(xp, R[d, :2 * Hs], work)
        rh = _recurrence(xp, R[d, 2 * Hs:], work)
        rbh = rb[2 * Hs:]

        def cell(t, h):
            p = proj[t]
            zr = f(p[:, :2 * Hs] + rzr(h))
            z, r = zr[:, :Hs], zr[:, Hs:]
            if linear_before_reset:
                hh = g(p[:, 2 * Hs:] + r * (rh(h) + rbh))
            else:
                hh = g(p[:, 2 * Hs:] + rh(r * h) + rbh)
            return [(1 - z) * hh + z * h]

        return cell

    def run(X, W, R, B=None, sequence_lens=None, initial_h=None):
        return _run_layer(ctx, s, 3, X, W, R, B, sequence_lens, [initial_h], make_cell)

    return run


# -- LSTM --------------------------------------------------------------------------------------
@KERNELS.register("LSTM", 1, 7, 14, 22)
@calls_blas
def lstm(ctx):
    xp = ctx.xp
    s = Setup(ctx, ["Sigmoid", "Tanh", "Tanh"], unclipped=(2,))
    input_forget = bool(ctx.attr("input_forget") or 0)

    def run(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None):
        if P is not None and R is not None and shape_of(P) != [s.num_dirs, 3 * int(R.shape[-1])]:
            ctx.fail(f"P must have shape {[s.num_dirs, 3 * int(R.shape[-1])]}, got {shape_of(P)}")

        def make_cell(d, X, W, R, B, ct, Hs, work):
            wb, rb = _biases(xp, B, d, 4 * Hs, ct, W)
            proj = _project(xp, X, W[d]) + (wb + rb)    # [T, B, 4H]: i, o, f, c
            peep = None if P is None else [xp.astype(P[d, k * Hs:(k + 1) * Hs], ct) for k in range(3)]
            return _lstm_cell(proj, _recurrence(xp, R[d], work), Hs, *s.acts[d], peep, input_forget)

        return _run_layer(ctx, s, 4, X, W, R, B, sequence_lens, [initial_h, initial_c], make_cell)

    return run


def _lstm_cell(proj, rec, Hs: int, f, g, hfn, peep, input_forget: bool):
    """One LSTM step ``cell(t, h, c) -> [h, c]``.  Without peepholes the gate function runs
    once over the contiguous i, o, f block (it is elementwise)."""
    if peep is None:
        def cell(t, h, c):
            gates = proj[t] + rec(h)
            iof = f(gates[:, :3 * Hs])
            i, o = iof[:, :Hs], iof[:, Hs:2 * Hs]
            fg = 1 - i if input_forget else iof[:, 2 * Hs:]
            cn = fg * c + i * g(gates[:, 3 * Hs:])
            return [o * hfn(cn), cn]
        return cell
    pi, po, pf = peep

    def cell_p(t, h, c):
        gates = proj[t] + rec(h)
        i = f(gates[:, :Hs] + pi * c)
        fg = 1 - i if input_forget else f(gates[:, 2 * Hs:3 * Hs] + pf * c)
        cn = fg * c + i * g(gates[:, 3 * Hs:])
        o = f(gates[:, Hs:2 * Hs] + po * cn)
        return [o * hfn(cn), cn]
    return cell_p
