"""Sequences and optionals of ai.onnx (every backend).

Construction and access (SequenceConstruct, SequenceEmpty, SequenceAt, SequenceInsert,
SequenceErase, SequenceLength), tensors to and from sequences (SplitToSequence,
ConcatFromSequence), SequenceMap (its body evaluated once per element by this kernel, not by
the function body) and the optionals (Optional, OptionalHasElement, OptionalGetElement; from
OptionalHasElement-18 / OptionalGetElement-18 on the input may also be a plain tensor or
sequence).  Later definitions only add element types.

Values: a sequence is a Python ``list`` of backend arrays (kernels never mutate an input list,
they build a new one); an optional is its element, or ``None`` when it is empty.  Positions and
split sizes are read on the host; the tensors stay on the backend.
"""

from __future__ import annotations

import numpy as np

from onnxkit.plugin import KernelTable, arrays, needs_scope, size_guard
from onnxkit_default_domain.inference.sequence import split_pieces

from ._common import norm_axis, shape_of

KERNELS = KernelTable()


def _index(ctx, value, what: str = "position") -> int:
    arr = ctx.to_host(value)
    if arr.size != 1 or not arrays.is_integer(arr.dtype):
        ctx.fail(f"{what} must be one integer, got dtype {arr.dtype} shape {list(arr.shape)}")
    return int(arr.reshape(-1)[0])


def _seq(ctx, value, what: str = "input sequence") -> list:
    if not isinstance(value, list):
        ctx.fail(f"{what} must be a sequence, got {type(value).__name__}")
    return value


def _same_dtype(ctx, tensors, what: str) -> None:
    names = {arrays.dtype_name(t.dtype) for t in tensors}
    if len(names) > 1:
        ctx.fail(f"{what} must all have one element type, got {sorted(names)}")


# -- construction and access -------------------------------------------------------------------
@KERNELS.register("SequenceConstruct", 11)
@size_guard("sequence_construct")
def sequence_construct(ctx):
    def run(*inputs):
        if any(x is None for x in inputs):
            ctx.fail("every input must have a value")
        _same_dtype(ctx, inputs, "the inputs")
        return list(inputs)

    return run


@KERNELS.register("SequenceEmpty", 11)
def sequence_empty(ctx):
    return lambda: []


@KERNELS.register("SequenceAt", 11)
def sequence_at(ctx):
    def run(seq, position):
        seq = _seq(ctx, seq)
        n = len(seq)
        p = _index(ctx, position)
        if not -n <= p < n:
            ctx.fail(f"position {p} is out of range for a sequence of {n} tensors (accepted [{-n}, {n - 1}])")
        return seq[p]

    return run


@KERNELS.register("SequenceInsert", 11)
@size_guard("sequence_insert")
def sequence_insert(ctx):
    def run(seq, tensor, position=None):
        seq = _seq(ctx, seq)
        if tensor is None:
            ctx.fail("the tensor to insert has no value")
        if seq:
            _same_dtype(ctx, [seq[0], tensor], "the sequence and the inserted tensor")
        n = len(seq)
        if position is None:
            p = n
        else:
            p = _index(ctx, position)
            if not -n <= p <= n:
                ctx.fail(f"position {p} is out of range for a sequence of {n} tensors (accepted [{-n}, {n}])")
            if p < 0:
                p += n
        out = list(seq)
        out.insert(p, tensor)
        return out

    return run


@KERNELS.register("SequenceErase", 11)
def sequence_erase(ctx):
    def run(seq, position=None):
        seq = _seq(ctx, seq)
        n = len(seq)
        p = -1 if position is None else _index(ctx, position)
        if not -n <= p < n:
            ctx.fail(f"position {p} is out of range for a sequence of {n} tensors (accepted [{-n}, {n - 1}])")
        out = list(seq)
        del out[p]
        return out

    return run


@KERNELS.register("SequenceLength", 11)
def sequence_length(ctx):
    return lambda seq: ctx.from_host(np.array(len(_seq(ctx, seq)), dtype=np.int64))


# -- tensors <-> sequences ---------------------------------------------------------------------
def _split_sizes(ctx, split, dim: int, axis: int) -> list:
    """The piece extents of SplitToSequence's ``split`` input (read on the host), checked."""
    s = ctx.to_host(split)
    if not arrays.is_integer(s.dtype):
        ctx.fail(f"split must be int32 or int64, got {s.dtype}")
    if s.ndim == 0:
        size = int(s)
        if size <= 0:
            ctx.fail(f"split must be positive, got {size}")
        return split_pieces(dim, size)
    if s.ndim != 1:
        ctx.fail(f"split must be a scalar or 1-D, got shape {list(s.shape)}")
    sizes = split_pieces(dim, s.tolist())
    if any(v < 0 for v in sizes) or sum(sizes) != dim:
        ctx.fail(f"split {sizes} must be non-negative and sum to the extent {dim} of axis {axis}")
    return sizes


@KERNELS.register("SplitToSequence", 11, 24)
@size_guard("sequence_split")
def split_to_sequence(ctx):
    xp = ctx.xp
    axis = int(ctx.attr("axis"))
    keepdims = int(ctx.attr("keepdims"))

    def run(x, split=None):
        a = norm_axis(ctx, axis, x.ndim)
        dim = int(x.shape[a])
        sizes = split_pieces(dim, None) if split is None else _split_sizes(ctx, split, dim, axis)
        lead = (slice(None),) * a
        out, start = [], 0
        for n in sizes:
            out.append(x[(*lead, slice(start, start + n))])
            start += n
        if split is None and not keepdims:
            return [xp.squeeze(p, axis=a) for p in out]
        return out

    return run


@KERNELS.register("ConcatFromSequence", 11)
@size_guard("sequence_concat")
def concat_from_sequence(ctx):
    xp = ctx.xp
    if ctx.attr("axis") is None:
        ctx.fail("attribute axis is required")
    axis = int(ctx.attr("axis"))
    new_axis = int(ctx.attr("new_axis"))

    def run(seq):
        seq = _seq(ctx, seq)
        if not seq:
            ctx.fail("the input sequence is empty: there is nothing to concatenate")
        _same_dtype(ctx, seq, "the tensors of the sequence")
        r = seq[0].ndim
        lo, hi = (-r - 1, r) if new_axis else (-r, r - 1)
        if not lo <= axis <= hi:
            ctx.fail(f"axis {axis} is out of range [{lo}, {hi}] for tensors of rank {r}")
        shapes = [shape_of(t) for t in seq]
        a = axis % (r + 1) if new_axis else axis % r
        if new_axis:
            if any(s != shapes[0] for s in shapes):
                ctx.fail(f"the tensors cannot be stacked: their shapes differ ({shapes[:3]}...)")
            return xp.stack(seq, axis=a)
        if any(len(s) != r or s[:a] + s[a + 1:] != shapes[0][:a] + shapes[0][a + 1:] for s in shapes):
            ctx.fail(f"the tensors cannot be concatenated on axis {axis}: their other extents differ ({shapes[:3]}...)")
        return xp.concat(seq, axis=a)

    return run


# -- SequenceMap -------------------------------------------------------------------------------
@KERNELS.register("SequenceMap", 17)
def sequence_map(ctx):
    body = ctx.subgraph("body")
    n_in = len(body.input_names)
    n_out = len(body.output_names)
    if ctx.num_outputs > n_out:
        ctx.fail(f"the node has {ctx.num_outputs} outputs but the body only {n_out}")
    if ctx.num_inputs != n_in:
        ctx.fail(f"the node has {ctx.num_inputs} inputs but the body takes {n_in}")

    @needs_scope
    def run(scope, seq, *extra):
        seq = _seq(ctx, seq)
        n = len(seq)
        for j, e in enumerate(extra):
            if isinstance(e, list) and len(e) != n:
                ctx.fail(f"additional input {j + 1} is a sequence of {len(e)} elements, the input sequence has {n}")
        outs: list = [[] for _ in range(n_out)]
        for i in range(n):
            args = [seq[i], *(e[i] if isinstance(e, list) else e for e in extra)]
            for q, v in enumerate(body.run(args, scope)):
                outs[q].append(v)
        return tuple(outs[:max(ctx.num_outputs, 1)])

    return run


# -- optionals ---------------------------------------------------------------------------------
@KERNELS.register("Optional", 15, 28)
def optional(ctx):
    if ctx.num_inputs == 0 or not ctx.node.input[0]:
        if ctx.attr("type") is None:
            ctx.fail("an Optional without an input needs the attribute type")

    def run(x=None):
        return x

    return run


@KERNELS.register("OptionalHasElement", 15, 18, 28)
def optional_has_element(ctx):
    if ctx.since_version == 15 and (ctx.num_inputs == 0 or not ctx.node.input[0]):
        ctx.fail("OptionalHasElement-15 requires its input")

    def run(x=None):
        return ctx.from_host(np.array(x is not None))

    return run


@KERNELS.register("OptionalGetElement", 15, 18, 28)
def optional_get_element(ctx):
    def run(x):
        if x is None:
            ctx.fail("the optional input is empty: it has no element to get")
        return x

    return run
