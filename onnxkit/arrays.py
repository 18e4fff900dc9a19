"""Element-type questions a portable kernel asks of any array namespace (numpy or torch).

The Python array API standard (what ``ctx.xp`` offers) knows the standard dtypes only; ONNX
also has float16 arithmetic rules, bfloat16 and the 8-bit floats (numpy through ml_dtypes,
torch natively for some).  These helpers answer by the dtype's name, so they serve every
namespace alike: ``float16``, ``bfloat16``, ``float8_e4m3fn``... (numpy, ml_dtypes) and
``torch.float16``... (torch).  Results are cached per dtype.
"""

from __future__ import annotations

import functools

#: Float types computed in float32 and rounded back once by the kernels of onnxkit.
NARROW_FLOATS = frozenset({"float16", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                           "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"})


@functools.lru_cache(maxsize=None)
def dtype_name(dtype) -> str:
    """The dtype's plain name: ``float32``, ``bfloat16``, ``int64``, ``bool``, ``object``..."""
    name = str(dtype)
    name = name[6:] if name.startswith("torch.") else name
    return {"bool_": "bool", "O": "object"}.get(name, name)


@functools.lru_cache(maxsize=None)
def is_float(dtype) -> bool:
    """Any real floating type, the narrow ones included."""
    n = dtype_name(dtype)
    return n.startswith("float") or n == "bfloat16"


@functools.lru_cache(maxsize=None)
def is_narrow_float(dtype) -> bool:
    """float16, bfloat16, the 8/6/4-bit floats: computed in float32 by onnxkit's kernels."""
    return dtype_name(dtype) in NARROW_FLOATS


@functools.lru_cache(maxsize=None)
def is_integer(dtype) -> bool:
    """A signed or unsigned integer type (bool is not)."""
    n = dtype_name(dtype)
    return n.startswith("int") or n.startswith("uint")


@functools.lru_cache(maxsize=None)
def is_unsigned(dtype) -> bool:
    return dtype_name(dtype).startswith("uint")


@functools.lru_cache(maxsize=None)
def is_complex(dtype) -> bool:
    return dtype_name(dtype).startswith("complex")


def is_bool(dtype) -> bool:
    return dtype_name(dtype) == "bool"


def widened(xp, x):
    """``x`` in float32 if its type is a narrow float, else ``x`` itself."""
    return xp.astype(x, xp.float32) if is_narrow_float(x.dtype) else x
