"""Raw memory given by address, as onnxruntime's ``IOBinding.bind_input`` / ``bind_output``
take it (``buffer_ptr``): viewed, not copied, as an array of the declared element type and shape.

:func:`view_pointer` contracts:

* ``element_type`` is a numpy type or dtype, or an ONNX element type number (Table 5, e.g.
  16 for BFLOAT16: ml_dtypes' dtype); STRING is refused (its elements are no fixed-size octets).
* ``shape`` is a sequence of non-negative ints; the view covers exactly
  ``prod(shape) * itemsize`` octets from the address.
* a ``cpu`` address becomes a writable numpy array over that memory (through ``ctypes``);
  a ``cuda`` address a torch tensor over device memory (through ``__cuda_array_interface__``),
  only where torch sees CUDA, otherwise :class:`~onnxkit.errors.OnnxkitError`: onnxkit would
  read device memory as host memory.
* address 0 (or a negative one) is refused, as onnxruntime refuses a null buffer.

The memory is the caller's: it must stay valid, and hold what the shape and type say, for as
long as the binding is used (as with onnxruntime, nothing here can check that).
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..errors import OnnxkitError


def element_dtype(element_type, what: str) -> np.dtype:
    """The numpy dtype of a numpy type/dtype or of an ONNX element type number."""
    from ..dtypes import ELEMENT_TYPES

    if isinstance(element_type, (int, np.integer)) and not isinstance(element_type, bool):
        et = ELEMENT_TYPES.get(int(element_type))
        if et is None:
            raise OnnxkitError(f"{what}: {int(element_type)} is not an ONNX element type (Table 5)")
        if et.tag == 8:
            raise OnnxkitError(f"{what}: STRING elements cannot be read from raw memory; bind an array of str")
        return np.dtype(et.dtype)
    try:
        dtype = np.dtype(element_type)
    except TypeError:
        raise OnnxkitError(f"{what}: element_type must be a numpy type or an ONNX element type number, not "
                           f"{element_type!r}") from None
    if dtype.kind in "OUSV":
        raise OnnxkitError(f"{what}: {dtype} elements cannot be read from raw memory")
    return dtype


def _shape(shape, what: str) -> tuple:
    try:
        dims = tuple(int(d) for d in shape)
    except TypeError:
        raise OnnxkitError(f"{what}: shape must be a sequence of ints, not {shape!r}") from None
    if any(d < 0 for d in dims):
        raise OnnxkitError(f"{what}: shape {list(dims)} has a negative dimension")
    return dims


def _torch_dtype(dtype: np.dtype):
    import torch

    named = {"bfloat16": "bfloat16", "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
             "float8_e4m3fnuz": "float8_e4m3fnuz", "float8_e5m2fnuz": "float8_e5m2fnuz"}
    if dtype.name in named and hasattr(torch, named[dtype.name]):
        return getattr(torch, named[dtype.name])
    if dtype == np.bool_:
        return torch.bool
    return torch.from_numpy(np.zeros(0, dtype)).dtype


class _CudaMemory:
    """An object torch reads device memory through (``__cuda_array_interface__``, version 3)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None}


def view_pointer(ptr, device: str, device_id: int, element_type, shape, what: str):
    """The memory at ``ptr`` on ``device`` (``'cpu'`` or ``'cuda'``) as an array or tensor of
    ``element_type`` and ``shape``; see the module docstring."""
    if isinstance(ptr, bool) or not isinstance(ptr, (int, np.integer)):
        raise OnnxkitError(f"{what}: buffer_ptr must be an int address, not {type(ptr).__name__}")
    ptr = int(ptr)
    if ptr <= 0:
        raise OnnxkitError(f"{what}: buffer_ptr {ptr} is not an address of memory (a null or negative pointer)")
    dtype = element_dtype(element_type, what)
    dims = _shape(shape, what)
    count = int(np.prod(dims, dtype=np.int64))
    nbytes = count * dtype.itemsize
    if device == "cpu":
        if nbytes == 0:
            return np.zeros(dims, dtype)
        buf = (ctypes.c_char * nbytes).from_address(ptr)
        return np.frombuffer(buf, dtype=dtype, count=count).reshape(dims)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        raise OnnxkitError(f"{what}: buffer_ptr is device memory on cuda:{device_id}, but torch sees no CUDA device "
                           "here: onnxkit reads raw pointers of host memory only (device 'cpu'); bind an array, a "
                           "tensor or an OrtValue instead")
    flat = torch.as_tensor(_CudaMemory(ptr, nbytes), device=f"cuda:{int(device_id)}")
    return flat.view(_torch_dtype(dtype)).reshape(dims)
