"""The fused epilogues of the cpu Conv (:mod:`onnxkit.runtime.optimizer.epilogue`): a following
Relu, Add, Add + Relu, Clip with constant bounds (Relu6) or Add + Clip applied to the Conv's own
fresh result; a Swish (``Mul(y, Sigmoid(y))``) by :func:`swish`.

Two ways, both bit-identical to the separate kernels (the same IEEE operations on the same
operands in the same order; the compiled pass but for which of two NaNs meeting in one
addition it keeps, see :func:`onnxkit_cpu.compiled.conv.finish`):

* **one compiled pass** (:func:`onnxkit_cpu.compiled.conv.finish`, where numba is enabled and
  the convolution computes in its output's float32 / float64): a prepared call's ``fused(x, w,
  b, r, side, relu)`` runs the product, then B (the 1x1 path, whose product leaves it out),
  the Add and the Relu over Y in one pass instead of up to three numpy passes.  It declines
  (None, before computing anything) where it cannot: no compiled loop, another dtype, an Add
  operand that is not a C-contiguous array of Y's shape and dtype (a broadcasting Add);
* **numpy in place** otherwise, on a prepared call's float result (always fresh): the Add
  (``np.add`` with ``out=``, numpy's floating-point warnings off as the cpu Add) then
  ``np.maximum(y, 0, out=y)``; anything else (the portable kernel's result, a broadcasting
  or mixed-type Add, another dtype) runs the consumers' own kernels ``fn``.

A Clip (always last) runs after the Conv, or after the Add by either way above (the compiled
pass with ``relu=False``), as ``np.clip(y, lo, hi, out=y)`` on that fresh float32 / float64
result where both bounds are given as arrays of Y's dtype: the Clip kernel's own ``np.clip``
on the same operands (the 0-d bounds it would cast to Y's type, here already of it), so the
same bits, NaN, -0 and lo > hi included (:func:`clip_in_place`); otherwise (an absent bound,
whose default the kernel decides) the Clip's ``fn``.  MobileNetV2's Conv + Clip(0, 6) pairs:
the Clip's own step (a new array, one pass) becomes an in-place pass.

**Threads.**  The one compiled pass (:func:`finish_rows`: blocks of rows, or of images where B
repeats per image) and the Swish's product (blocks of elements) are split across the run's
intra-op threads (:func:`onnxkit.runtime.threads.parallel_for`, at least :data:`FINISH_WORK`
elements a block): elementwise, so every thread count gives the same bits.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import parallel_for

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


#: elements of Y worth a block of the one-pass epilogue (or of the Swish's product) on an intra-op
#: thread of its own (:func:`onnxkit.runtime.threads.parallel_for`)
FINISH_WORK = 1 << 15


def finish_rows(fin, y, b, r, side, relu) -> None:
    """``fin(y, b, r, side, relu)`` (:func:`onnxkit_cpu.compiled.conv.finish`, ``y`` ``(R, L)``)
    split across the run's intra-op threads by rows: by any rows where ``b`` is empty or has one
    entry per row (``R`` = its length: one image, ``b`` sliced with them), else by whole images
    (``R / M`` of them, ``b`` whole); ``r`` sliced with the rows.  Each element gets the same
    operations whatever the split (an elementwise pass), so the same bits at every count."""
    rows, length = y.shape
    m = b.size
    unit = 1 if m in (0, rows) else m
    items = rows // unit
    add = r.size > 0

    def block(lo, hi):
        a, z = lo * unit, hi * unit
        fin(y[a:z], b[a:z] if m == rows else b, r[a:z] if add else r, side, relu)

    parallel_for(block, items, grain=max(1, FINISH_WORK // max(1, unit * length)), name="conv.epilogue")


def _multiply_flat(a, b, out):
    np.multiply(a, b, out=out)


#: ``np.multiply`` with numpy's floating-point warnings off in the thread that runs it (a pool
#: thread's error state is its own)
_multiply_block = quiet(_multiply_flat)


def _multiply_split(a, b, out) -> None:
    """``np.multiply(a, b, out=out)`` (all three of one shape, C-contiguous), split across the run's
    intra-op threads in blocks of the flat elements (an elementwise product: the same bits),
    numpy's floating-point warnings off in each block."""
    fa, fb, fo = a.reshape(-1), b.reshape(-1), out.reshape(-1)

    def block(lo, hi):
        _multiply_block(fa[lo:hi], fb[lo:hi], fo[lo:hi])

    parallel_for(block, fo.size, grain=FINISH_WORK, name="conv.swish")


def _add_in_place(a, b, out):
    np.add(a, b, out=out)


#: ``out = a + b`` with numpy's floating-point warnings off, as the cpu Add
_add_quiet = quiet(_add_in_place)


def clip_in_place(op):
    """``apply(y)`` for a ``("Clip", fn, side)`` op, ``y`` a fresh float32 / float64 array of the
    Conv's own: ``np.clip(y, lo, hi, out=y)`` where ``side`` is ``(lo, hi)``, both one-element
    numpy arrays of ``y``'s dtype (the Clip kernel's very ufunc call on the very operands,
    written into ``y``), else ``fn(y)``: an absent bound (None: the kernel's default, a float
    type's limits), a bound of another dtype, bounds the pass does not know (``side`` None:
    a Clip-1/6's attributes)."""
    fn, side = op[1], op[2]
    if side is None or any(type(v) is not np.ndarray or v.size != 1 for v in side):
        return fn
    lo, hi = side
    dt = lo.dtype
    if hi.dtype != dt or not (dt == _F32 or dt == _F64):
        return fn

    def apply(y):
        if y.dtype != dt:
            return fn(y)
        np.clip(y, lo, hi, out=y)
        return y
    return apply


def _multiply_into(a, b, out):
    if a.flags.c_contiguous and b.flags.c_contiguous and out.flags.c_contiguous:
        _multiply_split(a, b, out)
    else:
        np.multiply(a, b, out=out)


#: ``out = a * b`` with numpy's floating-point warnings off, as the cpu Mul
_multiply_quiet = quiet(_multiply_into)


def swish(conv, op):
    """The fused kernel of a Conv and ``("Swish", (sigmoid, mul), side)``: ``conv`` (the node's
    own unfused kernel, every dtype) on the inputs, then the Sigmoid step's kernel ``sigmoid``
    on that result ``y``, then the Mul's product of ``y`` and ``s = sigmoid(y)`` in the graph's
    operand order (``side`` 0: ``y * s``, 1: ``s * y``): written into ``s`` by ``np.multiply``
    (the cpu Mul's ufunc on the same operands) where both are float32 / float64 numpy arrays of
    one dtype and shape not sharing memory (``s`` is the Sigmoid kernel's fresh result), else
    the Mul step's kernel ``mul``.  The three kernels' result, bit for bit; one fresh array and
    one step less than the separate Mul."""
    (sigmoid, mul), side = op[1], op[2]

    def fused_swish(x, w, b=None):
        y = conv(x, w, b)
        s = sigmoid(y)
        dt = y.dtype
        if type(y) is np.ndarray and type(s) is np.ndarray and (dt is _F32 or dt is _F64) and s.dtype is dt \
                and s.shape == y.shape and not np.may_share_memory(s, y):
            if side:
                _multiply_quiet(s, y, s)
            else:
                _multiply_quiet(y, s, s)
            return s
        return mul(s, y) if side else mul(y, s)
    return fused_swish


def epilogue(lookup, fallback, ops):
    """The fused kernel of a Conv and its ``ops`` (``("Add", fn, side)``, then ``("Relu", fn,
    None)`` or ``("Clip", fn, side)``, in order; None for anything else).  ``lookup(x, w,
    b)``: the node's prepared call for the inputs' key (None: the portable ``fallback``, whose
    result may not be a fresh array of this kernel's own: the consumers' ``fn`` run on it); a
    prepared call has ``fused(x, w, b, r, side, relu)`` (the one-pass way or None).  A Clip runs
    after the Add (the compiled pass with ``relu=False``, or numpy in place) by
    :func:`clip_in_place`.  The fused kernel runs with numpy's floating-point warnings off, as
    the Conv's own (``quiet``)."""
    kinds = tuple(op[0] for op in ops)
    if kinds not in (("Relu",), ("Clip",), ("Add",), ("Add", "Relu"), ("Add", "Clip")):
        return None
    add = ops[0] if kinds[0] == "Add" else None
    relu = ops[-1][1] if kinds[-1] == "Relu" else None
    clip = ops[-1][1] if kinds[-1] == "Clip" else None
    own_clip = clip_in_place(ops[-1]) if clip is not None else None
    if add is None and relu is not None:
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
    if add is None:
        def fused_clip(x, w, b=None):
            call = lookup(x, w, b)
            if call is None:
                return clip(fallback(x, w, b))
            y = call(x, w, b)
            dt = y.dtype
            return own_clip(y) if dt is _F32 or dt is _F64 else clip(y)
        return quiet(fused_clip)
    add_fn, side = add[1], add[2]
    with_relu = relu is not None
    tail = relu if relu is not None else clip

    def fused_add(x, w, b, r):
        call = lookup(x, w, b)
        if call is None:
            y = fallback(x, w, b)
        else:
            y = call.fused(x, w, b, r, side, with_relu)
            if y is not None:       # a fresh float32 / float64 array (the compiled pass computes in those)
                return y if clip is None else own_clip(y)
            y = call(x, w, b)
            dt = y.dtype
            if (dt is _F32 or dt is _F64) and type(r) is np.ndarray and r.dtype is dt and r.shape == y.shape:
                if side:
                    _add_quiet(r, y, y)
                else:
                    _add_quiet(y, r, y)
                if clip is not None:
                    return own_clip(y)
                return y if relu is None else np.maximum(y, 0, out=y)
        y = add_fn(r, y) if side else add_fn(y, r)
        return y if tail is None else tail(y)
    return quiet(fused_add)
