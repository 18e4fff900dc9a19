"""numpy fast paths of RNN, GRU and LSTM with their default activations (RNN: Tanh; GRU:
Sigmoid, Tanh; LSTM: Sigmoid, Tanh, Tanh), no ``clip``, and (LSTM) no peepholes and no
``input_forget``: every other node, and every call with inputs the fast path does not take
(not numpy float arrays, no steps or no batch entries), runs the portable kernel
(:mod:`onnxkit_default_domain.kernels.rnn`), whose checks, attribute parsing and sequence
masking this module reuses.

What makes a step cheap:

* the weights are prepared once per node while ``W``, ``R`` and ``B`` are the same objects
  and the plan holds them (:class:`~._plans.Held`: constants the planner declares,
  ``ctx.is_constant``, such as initializers and folded values, or its own defaults; a runtime
  input, which a caller may write between runs, is prepared each call): ``W^T`` of every
  direction as one
  contiguous matrix, ``R`` contiguous, the biases summed;
* the input projection of every step and direction is one (batched) matrix product, each
  direction's steps in the order it runs them, its bias added in one call;
* a step does every direction at once: one batched product ``h @ R^T`` ([D, B, gates * H]),
  then each elementwise operation is one numpy call into a buffer the kernel made (no
  allocation per step); LSTM's gates live gate-major ([4, D, B, H], the projection laid out
  so once per call, its bias added by the same call), so every elementwise call after the
  step's first addition reads and writes contiguous blocks (numpy runs those much faster
  than strided gate columns);
* what does not depend on the values is decided once per input shapes (the checks of
  ``check_shapes``), and bidirectional inputs are stacked by two copies, not ``np.stack``;
* the sigmoid is the portable kernel's ``0.5 * (tanh(0.5 x) + 1)``, its ``0.5 x`` folded into
  the sigmoid gates' rows of ``W``, ``R`` and ``B`` (a power-of-two scale is exact), so one
  ``tanh`` serves every gate of an LSTM step; ``t * 0.5 + 0.5`` equals ``(t + 1) * 0.5``
  exactly, and the other gates pass ``* 1 + (-0.0)``, an identity even for a signed zero
  (LSTM skips that identity: its gate-major sigmoid gates are one block).

Results are those of the portable kernel's formulas, operation for operation; only the
summation order inside the matrix products may differ (Clause 11 tolerance of the products).

**Compiled loop.**  Where :mod:`onnxkit_cpu.compiled` is enabled at planning, float32 and
float64 calls whose steps are small (at most :data:`COMPILED_WORK` multiply-adds per step:
the corpus's LSTMs, hidden 24 and 128, batch 1-3) run the whole time loop of every direction
as one call of the cell's loop in :mod:`onnxkit_cpu.compiled.rnn`, which also computes the
input projection where that is small (at most :data:`COMPILED_WORK` multiply-adds in all:
silero's single step, the tagger's 7 steps; else one BLAS product of ``X`` in the node's
layout with every direction's prepared ``W^T`` side by side, written into the loop's
scratch).  What depends only on the input shapes and the weight objects — the checks, the
weights in the loop's layout, the output shapes — is made once (a :class:`_Call` per input
shapes), and the loop's scratch is per thread, so a call is a few numpy calls around the
loop.  Its outputs are C-contiguous in the node's layout.  Its numerics are stated in that
module: the same operations, with ``tanh`` correctly rounded in float32 (numpy's SIMD tanh
is not, within ~1.3 ulp), the products summed in another order, and multiply-adds possibly
fused (one rounding instead of two): within Clause 11 tolerance of this body (the tests
compare both and a float64 reference).
"""

from __future__ import annotations

import threading

import numpy as np

from onnxkit.plugin import KernelTable
from onnxkit_cpu.compiled import rnn as loops
from onnxkit_cpu.overrides.conv_depthwise import Scratch
from onnxkit_cpu.overrides._plans import Held, remember
from onnxkit_default_domain.api import rnn as portable

KERNELS = KernelTable()

#: The most multiply-adds per step (directions x batch x gates x hidden^2) the compiled loop
#: takes: beyond, BLAS's batched product per step repays the numpy body's per-call costs and
#: the numpy body is the faster (for an LSTM of hidden 128 the crossing lies between 2^17 and
#: 2^18).
COMPILED_WORK = 1 << 17


def _takes(X, W, R) -> bool:
    """True when the fast path serves these inputs (else the portable kernel runs)."""
    return (type(X) is np.ndarray and type(W) is np.ndarray and type(R) is np.ndarray and X.ndim == 3
            and X.dtype.kind == "f" and X.shape[0] > 0 and X.shape[1] > 0)


def _weights(W, R, B, D: int, gates: int, H: int, sig: int, ct, split: bool) -> tuple:
    """``(W^T [D, I, G], bias [D, 1, 1, G], R^T [D, H, G], rbh, consts)`` in the compute type
    ``ct``, the columns of the first ``sig`` gates halved.  ``split`` (GRU): the bias holds the
    recurrence bias of z and r only, the h gate's ``rbh`` [D, 1, H] is returned apart (None
    otherwise).  ``consts``: the per-column scale and shift that finish the sigmoid gates after
    one ``tanh`` over every gate, and the scalars 1 and 0.5."""
    G = gates * H
    scale = np.ones(G, ct)
    scale[:sig * H] = 0.5
    wt = np.ascontiguousarray(np.swapaxes(W.astype(ct), 1, 2) * scale)
    rt = np.ascontiguousarray(np.swapaxes(R.astype(ct), 1, 2) * scale)
    b = np.zeros((D, 2 * G), ct) if B is None else B.astype(ct)
    wb, rb = b[:, :G], b[:, G:]
    rbh = None
    if split:
        rbh = np.ascontiguousarray(rb[:, None, 2 * H:])
        rb = np.concatenate((rb[:, :2 * H], np.zeros((D, H), ct)), axis=1)
    bias = ((wb + rb) * scale)[:, None, None, :]
    shift = np.where(scale == 0.5, scale, ct(-0.0))    # a sigmoid gate: t * 0.5 + 0.5; else t * 1 + (-0.0)
    return wt, bias, rt, rbh, (scale, shift, np.array(1, ct), np.array(0.5, ct))


class _Layer:
    """The per-call work of one node: weights cached by identity (constants only: :meth:`prepared`),
    the projection of every step, the steps run by ``steps(...)`` or by the compiled loop, the
    outputs assembled as the portable kernel's.  ``cell`` names the compiled loop's cell (see
    :mod:`onnxkit_cpu.compiled.rnn`); ``self.loop`` is that loop, taken at planning, or None
    (numba unavailable or disabled: every call runs the numpy steps)."""

    def __init__(self, ctx, s, gates: int, sig: int, cell: int, split: bool = False):
        self.ctx, self.s, self.gates, self.sig, self.split = ctx, s, gates, sig, split
        self.cell, self.loop = cell, loops.recurrence.get(cell)
        #: where the plan holds W, R and B (:class:`~._plans.Held`): what is derived from them is kept
        self.held = (Held(ctx, 1), Held(ctx, 2), Held(ctx, 3))
        self.cache = None   # (W, R, B, ct, prepared weights): replaced whole, never edited
        self.checked: dict = {}   # input shapes check_shapes passed -> their hidden size
        #: (X's shape and dtype, the states' shapes) -> the _Call made for them, the compiled
        #: loop's (None: the numpy steps serve those inputs); an item set is atomic
        self.calls: dict = {}

    def hidden(self, X, W, R, B, states: list) -> int:
        """The hidden size, the inputs' shapes checked once per distinct shapes."""
        key = (X.shape, W.shape, R.shape, None if B is None else B.shape,
               *[None if h is None else h.shape for h in states])
        H = self.checked.get(key)
        if H is None:
            H = portable.check_shapes(self.ctx, self.s, X, W, R, B, self.gates, states)
            if len(self.checked) < 64:   # a few shapes per node; one item set is atomic
                self.checked[key] = H
        return H

    def constant(self, W, R, B) -> bool:
        """Whether the plan holds W, R and B (None: absent): what is derived from them may be
        kept while the same objects come back."""
        w, r, b = self.held
        return w(W) and r(R) and (B is None or b(B))

    def prepared(self, W, R, B, H: int, ct) -> tuple:
        """The prepared weights of W, R, B: kept while the same arrays come back where the plan
        holds them (:meth:`constant`: initializers, folded values, its defaults); made again
        each call for runtime inputs (a caller may write one in place between runs)."""
        c = self.cache
        if c is None or c[0] is not W or c[1] is not R or c[2] is not B or c[3] is not ct:
            c = (W, R, B, ct, _weights(W, R, B, self.s.num_dirs, self.gates, H, self.sig, ct, self.split))
            if self.constant(W, R, B):
                self.cache = c
        return c[4]

    def run(self, X, W, R, B, sequence_lens, states: list, steps):
        """Y and the final states; ``steps(p, bias, rt, rbh, consts, hs, states, keep) -> final
        states`` ([D, B, H] each) runs the recurrence, writing step k's hidden states into
        ``hs[k]``; ``p[:, k]`` is step k's projection before its ``bias`` ([D, 1, 1, G]) is
        added, ``keep[k]`` (None without sequence_lens) the entries step k leaves unchanged."""
        ctx, s = self.ctx, self.s
        if self.loop is not None:
            h0 = states[0]
            c0 = states[-1]
            key = (X.shape, X.dtype, None if h0 is None else h0.shape, None if c0 is None else c0.shape)
            c = self.calls.get(key)
            if c is None or not c.kept or c.W is not W or c.R is not R or c.B is not B:
                c = self.call_for(key, X, W, R, B, states)
            if c.fn is not None:
                return c.run(self.lengths(sequence_lens, c), X, states)
        dt = X.dtype
        if s.layout:
            X = X.transpose(1, 0, 2)
            states = [None if h is None else h.transpose(1, 0, 2) for h in states]
        H = self.hidden(X, W, R, B, states)
        ct = np.float64 if dt == np.float64 else np.float32
        T, Bn, I = X.shape
        D = s.num_dirs
        wt, bias, rt, rbh, consts = self.prepared(W, R, B, H, ct)
        if D == 1:
            X = X.astype(ct, copy=False)
            xs = (X[::-1] if s.reverse[0] else X)[None]
        else:                                                     # [D, T, B, I], in step order
            xs = np.empty((D, T, Bn, I), ct)
            for d, rev in enumerate(s.reverse):
                np.copyto(xs[d], X[::-1] if rev else X)
        p = np.matmul(xs.reshape(D, T * Bn, I), wt).reshape(D, T, Bn, -1)
        mask = portable.step_mask(ctx, sequence_lens, T, Bn)      # [T, B, 1] by time, or None
        keep = None
        if mask is not None:
            keep = np.empty((T, D, Bn, 1), bool)
            for d in range(D):
                np.logical_not(mask[::-1] if s.reverse[d] else mask, out=keep[:, d])
        init = [np.zeros((D, Bn, H), ct) if h is None else h.astype(ct, copy=False) for h in states]
        hs = np.empty((T, D, Bn, H), ct)
        finals = [f.copy() for f in steps(p, bias, rt, rbh, consts, hs, init, keep)]
        if s.reverse == [False]:
            Y = hs
        else:
            Y = np.empty((T, D, Bn, H), ct)
            for d in range(D):
                np.copyto(Y[:, d], hs[::-1, d] if s.reverse[d] else hs[:, d])
        if mask is not None:
            np.copyto(Y, 0, where=np.logical_not(mask)[:, None])
            empty = np.logical_not(mask.any(axis=0))   # [B, 1]: entries of length 0
            for f in finals:
                np.copyto(f, 0, where=empty)
        if s.layout:
            Y = Y.transpose(2, 0, 1, 3)
            finals = [f.transpose(1, 0, 2) for f in finals]
        return (Y.astype(dt, copy=False), *(f.astype(dt, copy=False) for f in finals))

    def call_for(self, key: tuple, X, W, R, B, states: list) -> "_Call":
        """The :class:`_Call` of these inputs (made and kept under ``key``): the compiled loop's
        for float32 / float64 inputs whose steps are small (:data:`COMPILED_WORK`), with their
        shapes checked, else one whose ``fn`` is None (the numpy steps)."""
        s, dt = self.s, X.dtype
        fn = None
        if (dt == np.float32 or dt == np.float64) and (
                s.num_dirs * X.shape[s.layout ^ 1] * self.gates * R.shape[-1] ** 2 <= COMPILED_WORK):
            fn = self.loop
        c = _Call(W, R, B, fn, self.constant(W, R, B))
        if fn is not None:
            lay = s.layout
            seq = X.transpose(1, 0, 2) if lay else X
            H = self.hidden(seq, W, R, B, [h if h is None or not lay else h.transpose(1, 0, 2) for h in states])
            c.prepare(self, seq.shape, H, dt.type)
        return remember(self.calls, key, c)

    def lengths(self, sequence_lens, c: "_Call"):
        """Every entry's number of steps (int64 [Bn]); ctx.fail for lengths outside [0, T]."""
        if sequence_lens is None:
            return c.full
        T, Bn = c.T, c.full.shape[0]
        lens = np.asarray(sequence_lens).reshape(-1).astype(np.int64)
        if lens.shape != (Bn,) or (lens < 0).any() or (lens > T).any():
            self.ctx.fail(f"sequence_lens must hold {Bn} lengths in [0, {T}], got {lens.tolist()}")
        return lens


class _Call:
    """One node's compiled call for given input shapes and weights (the objects ``W``, ``R``,
    ``B``, held): the loop ``fn`` (None: the numpy steps), the weights laid out for it, the
    output shapes and the size of its per-thread scratch.  Made whole, then published.
    ``kept``: whether it may serve a later call with the same objects (held by the plan:
    :meth:`_Layer.constant`); else it is made again each call."""

    __slots__ = ("W", "R", "B", "fn", "args", "T", "full", "ct", "y_shape", "s_shape", "project",
                 "mat", "work", "kept")

    def __init__(self, W, R, B, fn, kept: bool):
        self.W, self.R, self.B, self.fn = W, R, B, fn
        self.kept = kept

    def prepare(self, layer: _Layer, seq_shape: tuple, H: int, ct) -> None:
        s = layer.s
        T, Bn, I = seq_shape
        D, gates = s.num_dirs, layer.gates
        G = gates * H
        wt, bias, rt, rbh = layer.prepared(self.W, self.R, self.B, H, ct)[:4]
        rbh = np.zeros((D, H), ct) if rbh is None else np.ascontiguousarray(rbh.reshape(D, H))
        wt = np.ascontiguousarray(wt.transpose(1, 0, 2).reshape(I, D * G))   # every direction side by side
        #: the loop computes the projection where it is small; else one BLAS product, here
        self.project = int(T * Bn * I * D * G <= COMPILED_WORK)
        self.mat = (Bn * T, I, T * Bn * D * G)
        self.args = (s.layout, int(s.reverse[0]), self.project, wt, np.ascontiguousarray(bias.reshape(D, G)), rt, rbh)
        self.T, self.ct = T, ct
        self.full = np.full(Bn, T, np.int64)
        self.y_shape = (Bn, T, D, H) if s.layout else (T, D, Bn, H)
        self.s_shape = (Bn, D, H) if s.layout else (D, Bn, H)
        n_work = T * Bn * D * G + G + (gates + 1) * D * Bn * H
        #: the loop's work array, per thread (kept while small, as the convolutions' scratch)
        self.work = Scratch(lambda: np.empty(n_work, ct), n_work * np.dtype(ct).itemsize, threading.local())

    def run(self, lens, X, states: list) -> tuple:
        """Y and the final states, C-contiguous in the node's layout, by one call of the loop."""
        ct = self.ct
        work = self.work.get()
        X = np.ascontiguousarray(X)
        layout, rev0, project, wt, bias, rt, rbh = self.args
        if not project:
            rows, I, n = self.mat
            np.matmul(X.reshape(rows, I), wt, out=work[:n].reshape(rows, -1))
        Y = np.empty(self.y_shape, ct)
        finals = [np.zeros(self.s_shape, ct) if h is None else np.array(h, ct, order="C") for h in states]
        self.fn(layout, rev0, project, X, wt, bias, rt, rbh, lens, Y, finals[0], finals[-1], work)
        return (Y, *finals)


def _sigmoid_of_halved(x, one, half) -> None:
    """``x = 0.5 * (tanh(x) + 1)`` in place, for an ``x`` already holding half the gate input."""
    np.tanh(x, out=x)
    np.add(x, one, out=x)
    np.multiply(x, half, out=x)


def _hold(k: int, keep, new: list, old: list) -> None:
    """Entries that step ``k`` does not reach keep their states (sequence_lens)."""
    if keep is not None:
        for n, o in zip(new, old):
            np.copyto(n, o, where=keep[k])


# -- RNN ---------------------------------------------------------------------------------------
def _rnn_steps(p, bias, rt, rbh, consts, hs, init, keep):
    np.add(p, bias, out=p)
    h = init[0]
    for k in range(p.shape[1]):
        hn = hs[k]
        np.matmul(h, rt, out=hn)
        np.add(p[:, k], hn, out=hn)
        np.tanh(hn, out=hn)
        _hold(k, keep, [hn], [h])
        h = hn
    return [h]


@KERNELS.register("RNN", 1, 7, 14, 22)
def rnn(ctx):
    slow = portable.rnn(ctx)
    s = portable.Setup(ctx, ["Tanh"])
    if not s.default_acts:
        return slow
    layer = _Layer(ctx, s, 1, 0, 0)

    def run(X, W, R, B=None, sequence_lens=None, initial_h=None):
        if not _takes(X, W, R):
            return slow(X, W, R, B, sequence_lens, initial_h)
        return layer.run(X, W, R, B, sequence_lens, [initial_h], _rnn_steps)

    return run


# -- GRU ---------------------------------------------------------------------------------------
def _gru_update(z, hh, h, hn, tmp, one) -> None:
    """``hn = (1 - z) * hh + z * h``."""
    np.subtract(one, z, out=tmp)
    np.multiply(tmp, hh, out=tmp)
    np.multiply(z, h, out=hn)
    np.add(tmp, hn, out=hn)


def _gru_steps(linear_before_reset: bool):
    def steps(p, bias, rt, rbh, consts, hs, init, keep):
        np.add(p, bias, out=p)
        D, T, Bn, G = p.shape
        H = G // 3
        ct = p.dtype.type
        one, half = consts[2:]
        h = init[0]
        zr, gh, tmp = np.empty((D, Bn, 2 * H), ct), np.empty((D, Bn, H), ct), np.empty((D, Bn, H), ct)
        z, rr = zr[..., :H], zr[..., H:]
        r_zr, r_h = rt[..., :2 * H], rt[..., 2 * H:]
        p_zr, p_h = p[..., :2 * H], p[..., 2 * H:]
        for k in range(T):
            np.matmul(h, r_zr, out=zr)
            np.add(p_zr[:, k], zr, out=zr)
            _sigmoid_of_halved(zr, one, half)
            if linear_before_reset:                 # p + r * (h @ Rh^T + Rbh)
                np.matmul(h, r_h, out=gh)
                np.add(gh, rbh, out=gh)
                np.multiply(rr, gh, out=gh)
                np.add(p_h[:, k], gh, out=gh)
            else:                                   # p + (r * h) @ Rh^T, then + Rbh
                np.multiply(rr, h, out=tmp)
                np.matmul(tmp, r_h, out=gh)
                np.add(p_h[:, k], gh, out=gh)
                np.add(gh, rbh, out=gh)
            np.tanh(gh, out=gh)
            hn = hs[k]
            _gru_update(z, gh, h, hn, tmp, one)
            _hold(k, keep, [hn], [h])
            h = hn
        return [h]

    return steps


@KERNELS.register("GRU", 1, 3, 7, 14, 22)
def gru(ctx):
    slow = portable.gru(ctx)
    s = portable.Setup(ctx, ["Sigmoid", "Tanh"])
    if not s.default_acts:
        return slow
    lbr = portable.gru_linear_before_reset(ctx)
    layer = _Layer(ctx, s, 3, 2, 2 if lbr else 1, split=True)
    steps = _gru_steps(lbr)

    def run(X, W, R, B=None, sequence_lens=None, initial_h=None):
        if not _takes(X, W, R):
            return slow(X, W, R, B, sequence_lens, initial_h)
        return layer.run(X, W, R, B, sequence_lens, [initial_h], steps)

    return run


# -- LSTM --------------------------------------------------------------------------------------
def _lstm_steps(p, bias, rt, rbh, consts, hs, init, keep):
    """The recurrence with the gates gate-major: ``a`` [4, D, B, H] holds i, o, f, c~ of every
    direction, each a contiguous block, as does the projection ``pg`` of each step."""
    D, T, Bn, G = p.shape
    H = G // 4
    ct = p.dtype.type
    half = consts[3]
    pg = np.empty((T, 4, D, Bn, H), ct)          # step k's projection plus bias: pg[k], gate-major
    np.add(p.reshape(D, T, Bn, 4, H), bias.reshape(D, 1, 1, 4, H), out=pg.transpose(2, 0, 3, 1, 4))
    g = np.empty((D, Bn, G), ct)
    g_gates = g.reshape(D, Bn, 4, H).transpose(2, 0, 1, 3)   # h @ R^T seen gate-major
    a = np.empty((4, D, Bn, H), ct)
    i, o, f, gg = a
    sig = a[:3]                                  # i, o, f: tanh of half their input
    cs = np.empty((2, D, Bn, H), ct)
    tmp = np.empty((D, Bn, H), ct)
    h, c = init
    for k in range(T):
        np.matmul(h, rt, out=g)
        np.add(pg[k], g_gates, out=a)
        np.tanh(a, out=a)
        np.multiply(sig, half, out=sig)          # the sigmoid: t * 0.5 + 0.5
        np.add(sig, half, out=sig)
        cn, hn = cs[k & 1], hs[k]
        np.multiply(f, c, out=cn)                # c' = f * c + i * tanh(.)
        np.multiply(i, gg, out=tmp)
        np.add(cn, tmp, out=cn)
        np.tanh(cn, out=tmp)                     # h' = o * tanh(c')
        np.multiply(o, tmp, out=hn)
        _hold(k, keep, [hn, cn], [h, c])
        h, c = hn, cn
    return [h, c]


def _lstm_one_step(layer: _Layer, X, W, R, B, h0, c0) -> tuple:
    """One step of one direction (a streaming model's call: silero's): the operations of
    :func:`_lstm_steps` in its order (``(x W^T + bias) + h R^T``, one ``tanh`` over the gates, the
    sigmoid gates' ``t * 0.5 + 0.5``, ``c' = f * c + i * c~``, ``h' = o * tanh(c')``) on each
    batch entry's gates as one row ([1, B, 4H]: i, o, f, c~ side by side), every elementwise
    operation one numpy call on column ranges of those rows: no gate-major copies, no step
    buffers.  Y is [1, 1, B, H]; Y_h and Y_c [1, B, H], each its own array."""
    dt = X.dtype
    ct = np.float64 if dt == np.float64 else np.float32
    H = layer.hidden(X, W, R, B, [h0, c0])
    wt, bias, rt, _, consts = layer.prepared(W, R, B, H, ct)
    half = consts[3]
    same = dt == ct
    a = np.matmul(X if same else X.astype(ct), wt[0])        # [1, B, 4H]: i, o, f, c~
    np.add(a, bias[0], out=a)
    if h0 is not None:
        np.add(a, np.matmul(h0 if h0.dtype == ct else h0.astype(ct), rt[0]), out=a)
    else:
        np.add(a, np.zeros(a.shape, ct), out=a)                # h R^T of h = 0
    np.tanh(a, out=a)
    sig = a[..., :3 * H]
    np.multiply(sig, half, out=sig)
    np.add(sig, half, out=sig)
    g = a[..., 3 * H:]
    c = np.multiply(a[..., 2 * H:3 * H], 0 if c0 is None else c0)
    np.multiply(a[..., :H], g, out=g)
    np.add(c, g, out=c)
    y = np.tanh(c)
    np.multiply(a[..., H:2 * H], y, out=y)
    if same:
        return y[None], y.copy(), c
    return y[None].astype(dt), y.astype(dt), c.astype(dt)


@KERNELS.register("LSTM", 1, 7, 14, 22)
def lstm(ctx):
    slow = portable.lstm(ctx)
    s = portable.Setup(ctx, ["Sigmoid", "Tanh", "Tanh"], unclipped=(2,))
    if not s.default_acts or bool(ctx.attr("input_forget")):
        return slow
    layer = _Layer(ctx, s, 4, 3, 3)
    #: one step (either direction: the same for one step) in the default layout may take
    #: :func:`_lstm_one_step`
    one = s.num_dirs == 1 and not s.layout

    def run(X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None):
        if P is not None or not _takes(X, W, R):
            return slow(X, W, R, B, sequence_lens, initial_h, initial_c, P)
        if one and X.shape[0] == 1 and sequence_lens is None and layer.loop is None:
            return _lstm_one_step(layer, X, W, R, B, initial_h, initial_c)
        return layer.run(X, W, R, B, sequence_lens, [initial_h, initial_c], _lstm_steps)

    return run
