"""Type conversion of ai.onnx on the gpu backend (torch): Cast 1 6 9 13 19 21 23 24 25 28 and
CastLike 15 19 21 23 24 25.

Between the element types torch has (FLOAT, DOUBLE, FLOAT16, BFLOAT16, INT8, INT16, INT32,
INT64, UINT8, BOOL), by the rules of the Cast definition (Clause 6.3):

* float -> integer truncates toward zero; integer -> integer keeps the low bits (two's
  complement wrap); a float out of the integer range (or NaN, Inf) is undefined: the low bits
  of the truncated value, as on the cpu backend (NaN and Inf give 0).
* -> BOOL: non-zero (NaN included) is True.  BOOL -> number: 1 / 0.
* -> FLOAT16 / BFLOAT16 / FLOAT / DOUBLE: one round to nearest even of the exact value (a
  DOUBLE or a wide integer is first rounded to FLOAT *to odd*, which keeps the second rounding
  exact: torch's own double -> half conversion rounds twice).

Every other element type (STRING, UINT16/32/64, the FLOAT8 / FLOAT4 / FLOAT6 types, the 2-
and 4-bit integers, complex) is refused with an error naming the type: this backend has no
torch dtype for them and never converts approximately.  ``saturate`` (19+) and ``round_mode``
(24+) only concern FLOAT8 targets, which are refused; ``round_mode`` is still validated.

Cast 1 names the target type by name (a STRING attribute, 'FLOAT', 'INT64', ...); from 6 on
``to`` is the DataType tag.  CastLike takes the element type of its second input.

Also the dtype helpers of this package's kernels: :func:`tdtype` (ONNX tag -> torch dtype),
:func:`tag_of` (torch dtype -> ONNX tag) and :func:`convert` (the conversion above).
"""

from __future__ import annotations

import functools

import numpy as np

from onnxkit.dtypes import DataType, element_type
from onnxkit.errors import OnnxkitTypeError
from onnxkit.runtime import KernelTable
from onnxkit_cpu.kernels.cast import cast_target

from ..device import torch_dtype

KERNELS = KernelTable()

_ROUND_MODES = ("up", "down", "nearest")


# ----------------------------------------------------------------------------- dtype tables
@functools.lru_cache(maxsize=None)
def tdtype(tag: int):
    """The torch dtype of ONNX element type ``tag``, or None when torch has none (or complex)."""
    try:
        et = element_type(int(tag))
    except OnnxkitTypeError:
        return None
    if et.is_complex or et.tag == DataType.STRING:
        return None
    return torch_dtype(et.dtype)


@functools.lru_cache(maxsize=None)
def _torch_to_tag() -> dict:
    import ml_dtypes

    out = {}
    for np_dt in (np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.int8, np.uint8, np.int16, np.int32,
                  np.int64, np.bool_, np.complex64, np.complex128):
        from onnxkit.dtypes import from_numpy_dtype

        out[torch_dtype(np.dtype(np_dt))] = from_numpy_dtype(np_dt).tag
    return out


def tag_of(dt) -> int:
    """The ONNX element type tag of torch dtype ``dt``."""
    return _torch_to_tag()[dt]


def type_name(dt) -> str:
    """The ONNX name of a torch dtype, for messages."""
    tag = _torch_to_tag().get(dt)
    return element_type(tag).name if tag is not None else str(dt)


def is_float(dt) -> bool:
    return dt.is_floating_point


def is_low_float(dt) -> bool:
    """float16 / bfloat16: computed through float32 by kernels that chain several steps."""
    import torch

    return dt in (torch.float16, torch.bfloat16)


# ----------------------------------------------------------------------------- conversion
def _round_to_odd_f32(x64):
    """float64 -> float32 rounded to odd: exact values stay, inexact ones get the truncated
    float32 with its last bit set.  A second rounding of that to a format of at most 22
    significand bits (FLOAT16, BFLOAT16) is then the correctly rounded result."""
    import torch

    f = x64.to(torch.float32)
    back = f.to(torch.float64)
    inexact = back != x64                              # NaN too: it only gets a payload bit
    over = back.abs() > x64.abs()                      # rounded away from zero: step back
    bits = f.view(torch.int32) - (inexact & over).to(torch.int32)
    bits = bits | inexact.to(torch.int32)
    return bits.view(torch.float32)


def _truncated_int64(x):
    """Floats truncated toward zero as int64; NaN/Inf -> 0, beyond +/-2**63 the low 64 bits."""
    import torch

    t = torch.trunc(x.to(torch.float64))
    t = torch.where(torch.isfinite(t), t, torch.zeros((), dtype=t.dtype, device=t.device))
    w = torch.fmod(t, 2.0 ** 64)                       # no host sync to ask whether any is that big
    w = torch.where(w >= 2.0 ** 63, w - 2.0 ** 64, w)
    w = torch.where(w < -2.0 ** 63, w + 2.0 ** 64, w)
    return torch.where(t.abs() >= 2.0 ** 63, w, t).to(torch.int64)


def convert(x, dt):
    """``x`` (a tensor of a torch dtype) converted to torch dtype ``dt`` by the Cast rules."""
    import torch

    src = x.dtype
    if src == dt:
        return x
    if src.is_complex:
        raise OnnxkitTypeError(f"complex input ({type_name(src)}) cannot be cast")
    if dt == torch.bool:
        return x != 0
    if src == torch.bool:
        return x.to(dt)
    if dt.is_floating_point:
        if dt in (torch.float16, torch.bfloat16) and src in (torch.float64, torch.int32, torch.int64):
            return _round_to_odd_f32(x.to(torch.float64)).to(dt)
        return x.to(dt)
    # integer target
    if src.is_floating_point:
        return _truncated_int64(x).to(dt)
    return x.to(dt)                                    # integer -> integer: the low bits


# ----------------------------------------------------------------------------- kernels
def _target(ctx, tag):
    """The torch dtype of target tag ``tag``, or a function that fails with a clear message."""
    dt = tdtype(tag)
    if dt is None:
        name = element_type(tag).name

        def refuse(*_):
            ctx.fail(f"the gpu backend cannot cast to {name}: torch has no dtype for it")
        return None, refuse
    return dt, None


def _options(ctx):
    mode = ctx.attr_str("round_mode", "up") if ctx.since_version >= 24 else "up"
    if mode not in _ROUND_MODES:
        ctx.fail(f"round_mode must be one of {_ROUND_MODES}, got {mode!r}")


def _run(ctx, x, dt):
    try:
        return convert(x, dt)
    except OnnxkitTypeError as exc:
        ctx.fail(str(exc))


@KERNELS.register("Cast", 1, 6, 9, 13, 19, 21, 23, 24, 25, 28)
def _cast_kernel(ctx):
    tag = cast_target(ctx)
    _options(ctx)
    dt, refuse = _target(ctx, tag)
    if refuse is not None:
        return refuse
    return lambda x: _run(ctx, x, dt)


@KERNELS.register("CastLike", 15, 19, 21, 23, 24, 25)
def _cast_like_kernel(ctx):
    _options(ctx)

    def run(x, like):
        if like.dtype.is_complex:
            ctx.fail(f"cannot cast to the complex type {type_name(like.dtype)}")
        return _run(ctx, x, like.dtype)
    return run
