"""The numpy body of a small 1-D convolution of one image and one group (silero VAD's STFT and
encoder convolutions, each called once per streamed chunk): the ``columns`` body's product
(:class:`~.conv.Prepared`: ``(M, C*K) @ (C*K, L)``, then B added) with its columns gathered
by one ``take`` of flat indices made once per input shape, instead of the padded buffer's
fill, the window view's copy across the intra-op threads and the result's finish.  The
columns hold the same values in the same layout, so the product, and the result, are the
``columns`` body's bit for bit.

X is copied into a per-thread buffer one element longer than X (that element zero: every
index of a window position in the padding points at it); ``take`` then reads every window.
"""

from __future__ import annotations

import numpy as np

#: the most column elements (``C * K * L``) the gather takes (the shapes of a streamed chunk;
#: beyond, the columns body's blocked copies and cache-sized scratch serve)
LINE_ELEMENTS = 1 << 16


def takes(plan, depthwise: bool) -> bool:
    """Whether a :class:`Line` serves ``plan`` (one spatial axis, one image, one group, columns
    of at most :data:`LINE_ELEMENTS` elements)."""
    return (len(plan.kernel) == 1 and plan.n == 1 and plan.group == 1 and not depthwise
            and plan.c * plan.kernel[0] * plan.out_shape[0] <= LINE_ELEMENTS)


class Line:
    """One input shape's gather: ``index`` ``(C*K, L)`` into X flattened (cropped X: ``inner``
    elements a channel) followed by the zero, ``out`` the result's shape ``(1, M, L)``; ``ct``
    the compute dtype; ``local`` the node's ``threading.local`` (the buffer, per thread)."""

    __slots__ = ("index", "size", "x_shape", "out", "ct", "local")

    def __init__(self, plan, lo, inner, ct, local):
        (k,), (s,), (d,), (length,) = plan.kernel, plan.strides, plan.dil, plan.out_shape
        c, n_in = plan.c, inner[0]
        pos = np.arange(length)[None, :] * s + np.arange(k)[:, None] * d - lo[0]      # (K, L) in X
        flat = np.arange(c)[:, None, None] * n_in + pos[None]
        self.size = c * n_in
        self.index = np.where(((pos >= 0) & (pos < n_in))[None], flat, self.size).reshape(c * k, length)
        self.x_shape = (1, c, n_in)
        self.out = (1, plan.m, length)
        self.ct, self.local = ct, local

    def __call__(self, x, wg, bias):
        """The convolution of ``x`` (cropped already) by ``wg`` ``(M, C*K)``, plus ``bias``
        (``(M, 1)`` or None): a fresh ``(1, M, L)`` array in the compute dtype."""
        mine = getattr(self.local, "line", None)
        if mine is None:
            buf = np.zeros(self.size + 1, self.ct)
            mine = self.local.line = (buf, buf[:self.size].reshape(self.x_shape))
        mine[1][...] = x
        y = np.matmul(wg, mine[0].take(self.index))
        if bias is not None:
            y += bias
        return y.reshape(self.out)
