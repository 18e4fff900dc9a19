"""The fused epilogues of the cpu Conv (:mod:`onnxkit.runtime.optimizer.epilogue`): a following
Relu, Add or Add + Relu applied to the Conv's own fresh result.

Two ways, both bit-identical to the separate kernels (the same IEEE operations on the same
operands in the same order; the compiled pass but for which of two NaNs meeting in one
addition it keeps, see :func:`onnxkit_cpu.compiled.conv.finish`):

* **one compiled pass** (:func:`onnxkit_cpu.compiled.conv.finish`, where numba is enabled and
  the convolution computes in its output's float32 / float64): a prepared call's ``fused(x, w,
  b, r, side, relu)`` runs the product, then B (the 1x1 path, whose product leaves it out),
  the Add and the Relu over Y in one pass instead of up to three numpy passes (bias + Add +
  Relu on (256, 3136) float32: 0.69 -> 0.25 ms; Relu alone 0.17 -> 0.11 ms).  It declines
  (None, before computing anything) where it cannot: no compiled loop, another dtype, an Add
  operand that is not a C-contiguous array of Y's shape and dtype (a broadcasting Add);
* **numpy in place** otherwise, on a prepared call's float result (always fresh): the Add
  (``np.add`` with ``out=``, numpy's floating-point warnings off as the cpu Add) then
  ``np.maximum(y, 0, out=y)``; anything else (the portable kernel's result, a broadcasting
  or mixed-type Add, another dtype) runs the consumers' own kernels ``fn``.
"""

from __future__ import annotations

import numpy as np

from onnxkit_default_domain.api import quiet

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)

#: the empty B / Add operand of :func:`onnxkit_cpu.compiled.conv.finish`, per dtype
NO_BIAS = {_F32: np.empty(0, _F32), _F64: np.empty(0, _F64)}
NO_OPERAND = {_F32: np.empty((0, 0), _F32), _F64: np.empty((0, 0), _F64)}


def operand(r, shape, dtype, rows):
    """The Add operand ``r`` as :func:`~onnxkit_cpu.compiled.conv.finish` reads it (``(R, L)``
    ``rows``; the empty operand where ``r`` is None), or False where the compiled pass cannot
    take it (not a C-contiguous ndarray of Y's ``shape`` and ``dtype``)."""
    if r is None:
        return NO_OPERAND[dtype]
    if type(r) is not np.ndarray or r.dtype is not dtype or r.shape != shape or not r.flags.c_contiguous:
        return False
    return r.reshape(rows)


def _add_in_place(a, b, out):
    np.add(a, b, out=out)


#: ``out = a + b`` with numpy's floating-point warnings off, as the cpu Add
_add_quiet = quiet(_add_in_place)


def epilogue(lookup, fallback, ops):
    """The fused kernel of a Conv and its ``ops`` (``("Add", fn, side)`` and/or ``("Relu", fn,
    None)``, in order).  ``lookup(x, w, b)``: the node's prepared call for the inputs' key
    (None: the portable ``fallback``, whose result may not be a fresh array of this kernel's
    own); a prepared call has ``fused(x, w, b, r, side, relu)`` (the one-pass way or None).  The
    fused kernel runs with numpy's floating-point warnings off, as the Conv's own (``quiet``)."""
    add = ops[0] if ops[0][0] == "Add" else None
    relu = ops[-1][1] if ops[-1][0] == "Relu" else None
    if add is None:
        def fused_relu(x, w, b=None):
            call = lookup(x, w, b)
            if call is None:
                return relu(fallback(x, w, b))
            y = call.fused(x, w, b, None, 0, True)
            if y is not None:
                return y
            y = call(x, w, b)
            dt = y.dtype
            return np.maximum(y, 0, out=y) if dt is _F32 or dt is _F64 else relu(y)
        return quiet(fused_relu)
    add_fn, side = add[1], add[2]
    with_relu = relu is not None

    def fused_add(x, w, b, r):
        call = lookup(x, w, b)
        if call is None:
            y = fallback(x, w, b)
        else:
            y = call.fused(x, w, b, r, side, with_relu)
            if y is not None:
                return y
            y = call(x, w, b)
            dt = y.dtype
            if (dt is _F32 or dt is _F64) and type(r) is np.ndarray and r.dtype is dt and r.shape == y.shape:
                if side:
                    _add_quiet(r, y, y)
                else:
                    _add_quiet(y, r, y)
                return y if relu is None else np.maximum(y, 0, out=y)
        y = add_fn(r, y) if side else add_fn(y, r)
        return y if relu is None else relu(y)
    return quiet(fused_add)
