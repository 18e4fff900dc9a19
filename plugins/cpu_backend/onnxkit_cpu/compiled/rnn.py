"""The time loop of RNN, GRU and LSTM (default activations) as one compiled call.

:data:`recurrence` holds one compiled loop per cell; ``recurrence.get(cell)`` is that loop
(or None, as :meth:`onnxkit_cpu.compiled.Lazy.get`).  It runs every step of every direction and
batch entry of one node.  Its contract (``ct``: float32 or float64, the compute and element
type; every array C-contiguous; ``D`` directions, ``Bn`` batch entries, ``T`` steps, input
size ``I``, hidden size ``H``, ``G = gates * H``)::

    recurrence.get(cell)(layout, rev0, project, X, wt, bias, rt, rbh, lens, Y, Yh, Yc, work)

* ``cell``: 0 RNN (gate h), 1 GRU (z, r, h), 2 GRU with ``linear_before_reset``, 3 LSTM
  (i, o, f, c~); ``layout``: the node's (0: ``X`` [T, Bn, I], ``Y`` [T, D, Bn, H], the states
  [D, Bn, H]; 1: ``X`` [Bn, T, I], ``Y`` [Bn, T, D, H], the states [Bn, D, H]); ``rev0``: 1
  when direction 0 runs in reverse (direction 1, when there is one, always does).
* ``work`` ct [T * Bn * D * G + G + (gates + 1) * D * Bn * H]: scratch, beginning with the
  projection ``p`` [T * Bn, D * G] = ``X W^T`` of every direction (direction d in columns
  ``d * G:``; rows in ``X``'s order), without bias.  ``project``: 1 when the loop computes
  ``p`` from ``X`` and ``wt`` [I, D * G] (summed in ct, four rows of ``wt`` at a time, as the
  recurrent product below), 0 when the caller has written it (a BLAS product: long
  sequences) and ``X`` / ``wt`` are unread.
* ``bias`` [D, G]: what is added to ``p`` (W's bias plus R's, except GRU's h gate: W's only);
  ``rt`` [D, H, G]: ``R^T``; ``rbh`` [D, H]: GRU's recurrence bias of the h gate (unread by
  the other cells).  The columns of the sigmoid gates (RNN none, GRU z and r, LSTM i, o, f)
  of ``wt`` (or ``p``), ``bias`` and ``rt`` are halved: ``sigmoid(x) = tanh(x / 2) / 2 + 1 / 2``.
* ``lens`` int64 [Bn]: the valid steps of each entry, in [0, T].  Step ``t >= lens[b]``
  leaves the entry's states unchanged and its ``Y`` row zero; the reverse direction thus
  starts at the entry's last valid step.  An entry of length 0 ends with zero states.
* ``Y`` out: every element written.  ``Yh``, ``Yc``: the initial hidden and (LSTM) cell
  states on entry, the final ones on return (``Yc`` unread but by LSTM).

Each step runs every chain (one entry in one direction): the recurrent products of every
chain, then each activation once over the gate-major rows of every chain (long
contiguous blocks vectorize; per-chain blocks of H would leave most in scalar remainders),
then the state updates.

Numerics — the numpy body of the override (:mod:`onnxkit_cpu.overrides.rnn`) operation for
operation (pre-activations, activations, each product and sum of the state updates are
rounded to ``ct`` where the numpy body stores them), except:

* the recurrent product ``h @ R^T``, and the input projection ``X W^T`` where the loop
  computes it, sum in ``ct`` as BLAS does for the numpy body, in another order (four rows of
  ``R^T`` / ``W^T`` at a time, then row by row);
* ``tanh`` (which also makes every sigmoid) is the polynomial in ``tanh`` below, in float64:
  correctly rounded to float32 at every float32 tested (numpy's float32 SIMD tanh: within
  1.3 ulp, wrong in ~15% of them), within ~4 ulp in float64 (numpy's: ~1 ulp).  libm's
  scalar ``tanh`` is one call an element; this one vectorizes;
* ``fastmath={"contract"}`` only: LLVM may fuse a product and the sum that uses it into
  one fused multiply-add, rounded once instead of twice (in the polynomial, the recurrent
  sums and the state updates ``f * c + i * c~``, ``(1 - z) * h~ + z * h``): never less
  accurate per operation; no reassociation, no finite-math assumption.

The differences stay within Clause 11 tolerance of the numpy body and of a float64
reference (``tests/test_compiled_rnn.py``).

NaN propagates (a NaN input gives NaN gates, states and outputs as in numpy), ``tanh(±inf) =
±1``, ``tanh(-0.0) = -0.0``.  Nothing is allocated; nothing raises.

Each cell's loop is its own function (``cell`` a constant of it: the other cells' branches
fold away): a model compiles only the cells it uses, two signatures each at most
(float32, float64).  The first compilation still takes seconds (less than with the four cells
as one function: numba inlines every call of the inner helpers, so each call site is compiled
anew), then numba's disk cache loads it.  A read-only package directory uses numba's user-wide
cache; where neither can be written, :class:`~onnxkit_cpu.compiled.Lazy` compiles without a
cache (each process compiles again, no error): both tried with read-only bind mounts.
"""

from __future__ import annotations

import math

import numpy as np

from . import kernel

U = np.uint64   # an unsigned index: no wraparound test (see recurrence)

# expm1(w) = w * (1 + w/2! + w^2/3! + ...): the coefficients 1/(k+1)!, highest first.  With
# |w| <= 40 / 128 twelve terms leave a relative error below 1e-16.
_EXPM1 = tuple(1.0 / math.factorial(k + 1) for k in range(11, -1, -1))


def _recurrence(cell: int):
    """The loop of one cell, a :class:`~onnxkit_cpu.compiled.Lazy`: ``cell`` is a closure
    constant of the function numba compiles, so its branches on ``cell`` fold away."""

    @kernel(fastmath={"contract"})
    def recurrence(layout, rev0, project, X, wt, bias, rt, rbh, lens, Y, Yh, Yc, work):
        D = rt.shape[0]
        H = rt.shape[1]
        G = rt.shape[2]
        Bn = lens.shape[0]
        TB = X.shape[0] * X.shape[1]
        T = TB // Bn if Bn else 0
        DB = D * Bn                         # chains: chain d * Bn + b runs entry b in direction d
        gates = G // H if H else 0
        hid = 2 if cell == 1 else gates     # the gates whose h @ R^T comes first
        inp = 2 if cell == 1 or cell == 2 else gates   # ... and whose p + bias is added with it
        first = 1 if cell == 0 else 2 if cell != 3 else 4   # the gates activated first ...
        sig = 0 if cell == 0 else 2 if cell != 3 else 3     # ... of which sigmoids
        # 2-D views of the node-layout arrays, and the scratch carved from work: the projection
        # p [T * Bn, D * G], acc [G], the gate-major rows [(gates + 1) * DB, H] (below)
        xs = X.reshape((TB, X.shape[2]))
        y = Y.reshape((T * DB, H))
        yh = Yh.reshape((DB, H))
        yc = Yc.reshape((DB, H))
        n_p = TB * D * G
        p = work[:n_p].reshape((TB, D * G))
        acc = work[n_p:n_p + G]
        flat = work[n_p + G:n_p + G + (gates + 1) * DB * H]
        rows = flat.reshape(((gates + 1) * DB, H))

        # Indexing: a signed index numba cannot prove non-negative gets a wraparound test, which
        # keeps LLVM from vectorizing the loop; so inner loops run an index from 0 over a fixed
        # row, and column offsets are unsigned (U).
        def tanh(x):
            # tanh(|x|) = -e / (2 + e) with e = expm1(-2|x|): expm1 of 2|x| / 128 by its series,
            # then doubled 7 times (expm1(2a) = expm1(a) (expm1(a) + 2)), which keeps the relative
            # accuracy (no cancellation); |x| >= 20 gives 1 in float64.  Branch-free: vectorizes.
            v = np.float64(x)
            a = 2.0 * abs(v)
            a = a if a < 40.0 else 40.0
            w = a * -0.0078125
            s = 0.0
            for c in _EXPM1:
                s = s * w + c
            e = w * s
            for _ in range(7):
                e = e * (e + 2.0)
            t = math.copysign(-e / (2.0 + e), v)
            return t if v == v else v

        def activate(lo, hi, sig):
            # gates lo..hi-1 of every chain (one contiguous block) = tanh(.), those below sig
            # the sigmoid of twice them: tanh(.) * 0.5 + 0.5 (one call site per phase: each
            # site is a copy of this code for numba to compile)
            buf = flat[lo * DB * H:hi * DB * H]
            for g in range(buf.shape[0]):
                buf[g] = tanh(buf[g])
            buf = flat[lo * DB * H:sig * DB * H]
            for g in range(buf.shape[0]):
                buf[g] = buf[g] * 0.5 + 0.5

        def dot(src, row, mat, c0, out):
            # out[:] = src[row] @ mat[:, c0:c0 + out.size], summed in ct (as BLAS does for the
            # numpy body) four rows of mat at a time
            n, K = out.shape[0], mat.shape[0]
            for g in range(n):
                out[g] = 0
            j = 0
            while j + 4 <= K:
                v0, v1, v2, v3 = src[row, j], src[row, j + 1], src[row, j + 2], src[row, j + 3]
                for g in range(n):
                    c = c0 + U(g)
                    out[g] += (v0 * mat[j, c] + v1 * mat[j + 1, c]) + (v2 * mat[j + 2, c] + v3 * mat[j + 3, c])
                j += 4
            while j < K:
                v0 = src[row, j]
                for g in range(n):
                    out[g] += v0 * mat[j, c0 + U(g)]
                j += 1

        def matvec(src, row, ch, lo, hi):
            # gates lo..hi-1 of chain ch (rows gate * DB + ch) = src[row] @ rt[d][:, lo * H:hi * H]
            dot(src, row, rt[ch // Bn], U(lo * H), acc[:(hi - lo) * H])
            for i in range(hi - lo):
                r, a0 = (lo + i) * DB + ch, U(i * H)
                for u in range(H):
                    rows[r, u] = acc[a0 + U(u)]

        def add_input(ch, t, lo, hi):
            # gates lo..hi-1 of chain ch = (p + bias) + themselves: the numpy body's order
            d, b = ch // Bn, ch % Bn
            pr = b * T + t if layout else t * Bn + b
            for i in range(lo, hi):
                r, c0, q0 = i * DB + ch, U(i * H), U(d * G + i * H)
                for u in range(H):
                    rows[r, u] = (p[pr, q0 + U(u)] + bias[d, c0 + U(u)]) + rows[r, u]

        def locate(ch, k):
            # (the time chain ch runs at step k: direction 1 and a reverse direction 0 count
            # down; chain ch's row in yh / yc; the row of y it writes at that time)
            d, b = ch // Bn, ch % Bn
            t = T - 1 - k if (rev0 if ch < Bn else 1) else k
            if layout:
                return t, b * D + d, (b * T + t) * D + d
            return t, ch, (t * D + d) * Bn + b

        if project:                             # p = X W^T, unless the override computed it
            for r in range(TB):
                dot(xs, r, wt, U(0), p[r])
        for k in range(T):
            for ch in range(DB):
                t, s, o = locate(ch, k)
                if t >= lens[ch % Bn]:               # past the entry's length: a zero row, states kept
                    for u in range(H):
                        y[o, u] = 0
                    continue
                matvec(yh, s, ch, 0, hid)
                add_input(ch, t, 0, inp)
            activate(0, first, sig)
            # rows of work: gate 1 (RNN h; GRU z; LSTM i) at z = ch, gate 2 at r = DB + ch, gate 3
            # at hh = 2 * DB + ch, gate 4 at c4 = 3 * DB + ch; the scratch row follows the gates
            for ch in range(DB):
                t, s, o = locate(ch, k)
                if t >= lens[ch % Bn]:
                    continue
                z, r, hh, c4 = ch, DB + ch, 2 * DB + ch, 3 * DB + ch
                if cell == 0:                        # RNN: h' = tanh(.)
                    for u in range(H):
                        y[o, u] = rows[z, u]
                        yh[s, u] = rows[z, u]
                elif cell == 3:                      # LSTM (i, o, f, c~): c' = f * c + i * c~
                    tmp = 4 * DB + ch
                    for u in range(H):
                        rows[tmp, u] = rows[hh, u] * yc[s, u]
                        rows[hh, u] = rows[z, u] * rows[c4, u]
                        yc[s, u] = rows[tmp, u] + rows[hh, u]
                        rows[tmp, u] = yc[s, u]
                elif cell == 1:                      # GRU (z, r, h~): h~ = tanh(p + (r * h) @ Rh^T + Rbh)
                    for u in range(H):
                        rows[c4, u] = rows[r, u] * yh[s, u]
                    matvec(rows, c4, ch, 2, 3)
                    add_input(ch, t, 2, 3)
                    for u in range(H):
                        rows[hh, u] = rows[hh, u] + rbh[ch // Bn, u]
                else:                                # GRU: h~ = tanh(p + r * (h @ Rh^T + Rbh))
                    d, b = ch // Bn, ch % Bn
                    pr, q0, c0 = b * T + t if layout else t * Bn + b, U(d * G + 2 * H), U(2 * H)
                    for u in range(H):
                        rows[hh, u] = rows[hh, u] + rbh[d, u]
                        rows[hh, u] = rows[r, u] * rows[hh, u]
                        rows[hh, u] = (p[pr, q0 + U(u)] + bias[d, c0 + U(u)]) + rows[hh, u]
            if cell == 0:
                continue
            activate(first, first + 1, first)    # LSTM tanh(c'), GRU h~: no sigmoid
            for ch in range(DB):
                t, s, o = locate(ch, k)
                if t >= lens[ch % Bn]:
                    continue
                z, r, hh, c4 = ch, DB + ch, 2 * DB + ch, 3 * DB + ch
                if cell == 3:                        # LSTM: h' = o * tanh(c')
                    for u in range(H):
                        y[o, u] = rows[r, u] * rows[4 * DB + ch, u]
                        yh[s, u] = y[o, u]
                else:                                # GRU: h' = (1 - z) * h~ + z * h
                    for u in range(H):
                        rows[c4, u] = 1.0 - rows[z, u]
                        rows[c4, u] = rows[c4, u] * rows[hh, u]
                        y[o, u] = rows[z, u] * yh[s, u]
                        y[o, u] = rows[c4, u] + y[o, u]
                        yh[s, u] = y[o, u]
        for ch in range(DB):                         # an entry of length 0 ends with zero states
            if lens[ch % Bn] == 0:
                s = locate(ch, 0)[1]
                for u in range(H):
                    yh[s, u] = 0
                    yc[s, u] = 0

    return recurrence


class _PerCell:
    """``get(cell)``: the compiled loop of ``cell`` (see the module docstring), or None where
    :func:`onnxkit_cpu.compiled.enabled` is False."""

    __slots__ = ("lazies",)

    def __init__(self):
        self.lazies = tuple(_recurrence(cell) for cell in range(4))

    def get(self, cell: int):
        return self.lazies[cell].get()


recurrence = _PerCell()
