"""Sequences and optionals of ai.onnx.

Operators and the definitions (since_versions) implemented:

* ``SequenceConstruct`` 11, ``SequenceEmpty`` 11, ``SequenceAt`` 11, ``SequenceInsert`` 11,
  ``SequenceErase`` 11, ``SequenceLength`` 11, ``ConcatFromSequence`` 11,
  ``SplitToSequence`` 11, 24 (24 only adds element types);
* ``SequenceMap`` 17 — its body is evaluated once per element (a kernel, not the function body);
* ``Optional`` 15, 28, ``OptionalHasElement`` 15, 18, 28, ``OptionalGetElement`` 15, 18, 28
  (from 18 on the input may also be a plain tensor or sequence; 28 only adds types).

Values: a sequence is a Python ``list`` of arrays (kernels never mutate an input list, they
build a new one); an optional is its element, or ``None`` when it is empty.
"""

from __future__ import annotations

import numpy as np

from onnxkit.runtime import KernelTable, needs_scope

KERNELS = KernelTable()


def _index(ctx, value, what: str = "position") -> int:
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "iu":
        ctx.fail(f"{what} must be one integer, got dtype {arr.dtype} shape {list(arr.shape)}")
    return int(arr.reshape(-1)[0])


def _seq(ctx, value, what: str = "input sequence") -> list:
    if not isinstance(value, list):
        ctx.fail(f"{what} must be a sequence, got {type(value).__name__}")
    return value


def _same_dtype(ctx, tensors, what: str) -> None:
    dtypes = {np.asarray(t).dtype for t in tensors}
    if len(dtypes) > 1:
        ctx.fail(f"{what} must all have one element type, got {sorted(str(d) for d in dtypes)}")


# -- construction and access -------------------------------------------------------------------
@KERNELS.register("SequenceConstruct", 11)
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
    return lambda seq: np.array(len(_seq(ctx, seq)), dtype=np.int64)


# -- tensors <-> sequences ---------------------------------------------------------------------
@KERNELS.register("SplitToSequence", 11, 24)
def split_to_sequence(ctx):
    axis = int(ctx.attr("axis", 0))
    keepdims = int(ctx.attr("keepdims", 1))

    def run(x, split=None):
        r = x.ndim
        if not -r <= axis < r:
            ctx.fail(f"axis {axis} is out of range for rank {r}")
        a = axis % r
        dim = x.shape[a]
        if split is None:
            parts = np.split(x, dim, axis=a) if dim else []
            return [np.squeeze(p, axis=a) for p in parts] if not keepdims else parts
        s = np.asarray(split)
        if s.dtype.kind not in "iu":
            ctx.fail(f"split must be int32 or int64, got {s.dtype}")
        if s.ndim == 0:
            size = int(s)
            if size <= 0:
                ctx.fail(f"split must be positive, got {size}")
            sizes = [size] * (dim // size) + ([dim % size] if dim % size else [])
        elif s.ndim == 1:
            sizes = [int(v) for v in s]
            if any(v < 0 for v in sizes) or sum(sizes) != dim:
                ctx.fail(f"split {sizes} must be non-negative and sum to the extent {dim} of axis {axis}")
        else:
            ctx.fail(f"split must be a scalar or 1-D, got shape {list(s.shape)}")
        bounds = np.cumsum(sizes)[:-1]
        return list(np.split(x, bounds, axis=a)) if sizes else []

    return run


@KERNELS.register("ConcatFromSequence", 11)
def concat_from_sequence(ctx):
    if ctx.attr("axis") is None:
        ctx.fail("attribute axis is required")
    axis = int(ctx.attr("axis"))
    new_axis = int(ctx.attr("new_axis", 0))

    def run(seq):
        seq = _seq(ctx, seq)
        if not seq:
            ctx.fail("the input sequence is empty: there is nothing to concatenate")
        _same_dtype(ctx, seq, "the tensors of the sequence")
        r = seq[0].ndim
        lo, hi = (-r - 1, r) if new_axis else (-r, r - 1)
        if not lo <= axis <= hi:
            ctx.fail(f"axis {axis} is out of range [{lo}, {hi}] for tensors of rank {r}")
        try:
            return np.stack(seq, axis=axis) if new_axis else np.concatenate(seq, axis=axis)
        except ValueError as exc:
            ctx.fail(f"the tensors cannot be {'stacked' if new_axis else 'concatenated'}: {exc}")

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
        return np.array(x is not None)

    return run


@KERNELS.register("OptionalGetElement", 15, 18, 28)
def optional_get_element(ctx):
    def run(x):
        if x is None:
            ctx.fail("the optional input is empty: it has no element to get")
        return x

    return run
