"""cpu kernel of ai.onnxkit Elementwise (the optimizer's elementwise-region fusion,
``onnxkit.runtime.optimizer.elementwise``): one generated compiled pass over the region's result.

At planning the kernel reads each input's broadcast layout from the types the planner gives
(:func:`layouts`: the input's shape against the output's, each extent a number or a symbol; a
layout of :mod:`onnxkit_cpu.compiled.fused_elementwise`) and asks for the region's generated loop
(:func:`onnxkit_cpu.compiled.fused_elementwise.region_loop`, under the first-run policy of every
compiled loop: none on a cold first run).  A run whose inputs are float32 arrays of those layouts
makes Y (C order; read as one row where no input is a vector or per-row one) and runs the loop on
contiguous blocks of Y's elements across the run's intra-op
threads (:func:`onnxkit.runtime.threads.parallel_for`, blocks of :data:`REGION_WORK` element
steps at least; the loop is ``nogil``, and each element is computed alone, so the thread count
does not change a bit).  Everything else — no loop (compiled
loops off, deferred on a cold plan, a layout not known at planning), inputs of another type or
shape than planned — runs the body's nodes as the default domain's kernel does, with the
session's kernels: the same bits (the loop's precision, bit-identical to those kernels, is stated
in :mod:`onnxkit_cpu.compiled.fused_elementwise`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from onnxkit.plugin import KernelTable, parallel_for, splits_across_threads
from onnxkit_default_domain.api import FUSED_DOMAIN

from ..compiled import fused_elementwise as loops

KERNELS = KernelTable()
F32 = np.dtype(np.float32)
#: work of a block worth a thread of its own, in element steps (a block of fewer costs more to
#: hand over than it saves): a region's block holds REGION_WORK / (its steps' cost) elements, at
#: least ELEMENT_WORK
REGION_WORK = 262144
ELEMENT_WORK = 16384
#: the cost of one element of a step, in element steps (an Add's is 1); others 1
STEP_COST = {"Sigmoid": 8, "Tanh": 8, "Sqrt": 2, "Div": 2, "Reciprocal": 2, "Pow": 2}

splits_across_threads((FUSED_DOMAIN, "Elementwise"))


def _dims(t) -> Optional[list]:
    shape = getattr(t, "shape", None)
    if shape is None or getattr(t, "elem_type", 0) != 1:
        return None
    values = list(shape.values)
    return None if any(d is None for d in values) else values


def layout(dims, out: list) -> Optional[str]:
    """How an input of shape ``dims`` broadcasts to ``out``: ``"F"`` (the same shape), ``"S"``
    (one element), ``"V"`` (along the last axis), ``"R"`` (one per row), or None."""
    if dims is None or len(dims) > len(out):
        return None
    padded = [1] * (len(out) - len(dims)) + list(dims)
    if padded == out:
        return "F"
    if all(d == 1 for d in padded):
        return "S"
    if all(d == 1 for d in padded[:-1]) and padded[-1] == out[-1]:
        return "V"
    if padded[:-1] == out[:-1] and padded[-1] == 1:
        return "R"
    return None


def broadcast(shapes: list) -> Optional[list]:
    """The multidirectional broadcast of ``shapes`` (extents numbers or symbols; Clause 10), or
    None where an extent of the result is not known (two different extents but 1 on one axis)."""
    rank = max(len(d) for d in shapes)
    out = []
    for axis in range(rank):
        seen = {d[axis - rank + len(d)] for d in shapes if axis - rank + len(d) >= 0} - {1}
        if len(seen) > 1:
            return None
        out.append(seen.pop() if seen else 1)
    return out


def layouts(ctx) -> Optional[str]:
    """Each input's layout against the broadcast of the inputs' shapes (the types the planner
    gives), or None where a shape is not known."""
    dims = [_dims(ctx.input_type(i)) for i in range(len(ctx.node.input))]
    out = None if not dims or None in dims else broadcast(dims)
    if not out:
        return None
    found = [layout(d, out) for d in dims]
    return None if None in found else "".join(found)


def shape_of(xs, kinds: str) -> Optional[tuple]:
    """Y's shape where every input is a float32 array of its planned layout (a full input of
    lower rank has Y's trailing extents, Y's others 1), else None."""
    ref = max((x.shape for x, k in zip(xs, kinds) if k == "F"), key=len, default=None)
    if ref is None:
        try:
            ref = np.broadcast_shapes(*(np.shape(x) for x in xs))
        except ValueError:
            return None
    if not ref:
        return None
    n, lead, rank = ref[-1], ref[:-1], len(ref)
    for x, k in zip(xs, kinds):
        if not isinstance(x, np.ndarray) or x.dtype != F32 or x.ndim > rank:
            return None
        if k == "F" and x.shape != ref and (x.shape != ref[rank - x.ndim:] or any(d != 1 for d in ref[:rank - x.ndim])) \
                or k == "S" and x.size != 1 \
                or k == "V" and (x.size != n or (x.ndim and x.shape[-1] != n)) \
                or k == "R" and x.shape != lead + (1,):
            return None
    return ref


@KERNELS.register("Elementwise", 4, domain=FUSED_DOMAIN)
def elementwise_region(ctx):
    """Elementwise-4: the region's generated loop where planned (module docstring), else its body."""
    body = ctx.subgraph("body")
    kinds = layouts(ctx)
    loop = None if kinds is None else loops.region_loop(ctx.attr("body"), kinds)
    rows = kinds is not None and ("V" in kinds or "R" in kinds)
    cost = sum(STEP_COST.get(n.op_type, 1) for n in ctx.attr("body").node)
    grain = max(ELEMENT_WORK, REGION_WORK // max(1, cost))

    def nodes(*xs):
        return body.run(list(xs))[0]

    if loop is None:
        return nodes

    kept: dict = {}     # the inputs' shapes -> (Y's shape, its size, its row length), inputs of their layouts

    def run(*xs):
        try:
            key = tuple([x.shape for x in xs])
        except AttributeError:           # not an array
            return nodes(*xs)
        for x in xs:
            if type(x) is not np.ndarray or x.dtype is not F32:
                key = None
                break
        found = kept.get(key)
        if found is None:
            shape = shape_of(xs, kinds)
            if shape is None:
                return nodes(*xs)
            size = int(np.prod(shape))
            found = (shape, size, shape[-1] if rows else size)   # no vector or per-row input: one row
            if key is not None:
                kept[key] = found
        shape, size, n = found
        yf = np.empty(size, F32)
        flats = [x.reshape(-1) for x in xs]          # C order: a view, or a contiguous copy
        if size < 2 * grain:
            if size:
                loop(0, size, n, yf, *flats)
            return yf.reshape(shape)

        def block(lo, hi):
            loop(lo, hi, n, yf, *flats)

        parallel_for(block, size, grain=grain, name="elementwise.region")
        return yf.reshape(shape)
    return run
