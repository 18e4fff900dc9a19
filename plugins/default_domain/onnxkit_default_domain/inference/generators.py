"""Operators that make tensors: Constant, ConstantOfShape, Range, EyeLike, the random
generators, the window functions and MelWeightMatrix."""

from __future__ import annotations

import math

import numpy as np

from onnxkit.plugin.dtypes import ELEMENT_TYPES
from onnxkit.plugin import FunctionTable
from onnxkit.plugin.inference import FLOAT, INT64, MAX_CONSTANT_ELEMENTS, dims_of, elem_of, scalar, shape_input, tensor

from ._util import definition_keys

FUNCTIONS = FunctionTable(definition_keys)

_STRING = 8


@FUNCTIONS.register("Constant")
def _constant(ctx):
    for name in ("value", "sparse_value", "value_float", "value_floats", "value_int", "value_ints", "value_string",
                 "value_strings"):
        if not ctx.has_attr(name):
            continue
        v = ctx.attr(name)
        if name == "value":
            value = None
            if v.size <= MAX_CONSTANT_ELEMENTS and v.data_type != _STRING:
                try:
                    value = np.asarray(v.numpy())
                except Exception:
                    value = None
            ctx.set_output(0, tensor(v.data_type, [int(d) for d in v.dims]), value)
        elif name == "sparse_value":
            vt = v.values
            ctx.set_output(0, tensor(vt.data_type if vt is not None else 0, [int(d) for d in v.dims]))
        elif name == "value_float":
            ctx.set_output(0, tensor(FLOAT, []), np.array(v, dtype=np.float32))
        elif name == "value_floats":
            ctx.set_output(0, tensor(FLOAT, [len(v)]), np.array(v, dtype=np.float32))
        elif name == "value_int":
            ctx.set_output(0, tensor(INT64, []), np.array(v, dtype=np.int64))
        elif name == "value_ints":
            ctx.set_output(0, tensor(INT64, [len(v)]), np.array(v, dtype=np.int64))
        elif name == "value_string":
            ctx.set_output(0, tensor(_STRING, []))
        else:
            ctx.set_output(0, tensor(_STRING, [len(v)]))
        return
    ctx.fail("Constant: no value attribute")


@FUNCTIONS.register("ConstantOfShape")
def _constant_of_shape(ctx):
    v = ctx.attr("value")
    elem = int(v.data_type) if v is not None else FLOAT
    target = shape_input(ctx, 0)
    if target is None:
        st = dims_of(ctx.input_type(0))
        n = st[0] if st is not None and len(st) == 1 and isinstance(st[0], int) else None
        return [tensor(elem, None if n is None else [None] * n)]
    value = None
    if all(isinstance(d, int) for d in target) and int(np.prod(target)) <= MAX_CONSTANT_ELEMENTS:
        row = ELEMENT_TYPES.get(elem)
        if row is not None and row.dtype.kind in "iub":
            fill = np.asarray(v.numpy()).reshape(-1)[0] if v is not None else 0
            value = np.full(target, fill, dtype=row.dtype)
    ctx.set_output(0, tensor(elem, target), value)


@FUNCTIONS.register("Range")
def _range(ctx):
    elem = elem_of(ctx.input_type(0)) or elem_of(ctx.input_type(1)) or elem_of(ctx.input_type(2))
    s, l, d = scalar(ctx, 0), scalar(ctx, 1), scalar(ctx, 2)
    if s is None or l is None or d is None or d == 0:
        return [tensor(elem, [ctx.fresh_dim()])]
    q = (l - s) / d
    row = ELEMENT_TYPES.get(elem)
    if (row is None or row.dtype.kind == "f") and q != round(q) and abs(q - round(q)) < 1e-4 * max(1.0, abs(q)):
        # so close to an integer that the element type's rounding decides: not determined here
        return [tensor(elem, [ctx.fresh_dim()])]
    n = max(int(math.ceil(q)), 0)
    value = None
    if n <= MAX_CONSTANT_ELEMENTS and row is not None and row.dtype.kind in "iu":
        value = (np.arange(n, dtype=np.int64) * int(d) + int(s)).astype(row.dtype)
    ctx.set_output(0, tensor(elem, [n]), value)


@FUNCTIONS.register("EyeLike")
def _eye_like(ctx):
    t = ctx.input_type(0)
    dt = ctx.attr("dtype")
    elem = int(dt) if dt is not None else elem_of(t)
    d = dims_of(t)
    if d is not None and len(d) != 2:
        ctx.fail(f"EyeLike: input must have rank 2, not {len(d)}")
    return [tensor(elem, d if d is not None else [None, None])]


@FUNCTIONS.register(("RandomNormal", "RandomUniform"))
def _random(ctx):
    shape = ctx.attr("shape")
    return [tensor(int(ctx.attr("dtype", FLOAT)), None if shape is None else [int(x) for x in shape])]


@FUNCTIONS.register(("RandomNormalLike", "RandomUniformLike", "Bernoulli"))
def _random_like(ctx):
    t = ctx.input_type(0)
    dt = ctx.attr("dtype")
    return [tensor(int(dt) if dt is not None else elem_of(t), dims_of(t))]


@FUNCTIONS.register("Multinomial")
def _multinomial(ctx):
    d = dims_of(ctx.input_type(0))
    batch = d[0] if d is not None and len(d) == 2 else None
    return [tensor(int(ctx.attr("dtype", 6)), [batch, int(ctx.attr("sample_size", 1))])]


@FUNCTIONS.register(("HannWindow", "HammingWindow", "BlackmanWindow"))
def _window(ctx):
    n = scalar(ctx, 0)
    return [tensor(int(ctx.attr("output_datatype", FLOAT)), [None if n is None else int(n)])]


@FUNCTIONS.register("MelWeightMatrix")
def _mel(ctx):
    bins, dft = scalar(ctx, 0), scalar(ctx, 1)
    return [tensor(int(ctx.attr("output_datatype", FLOAT)),
                   [None if dft is None else int(dft) // 2 + 1, None if bins is None else int(bins)])]
