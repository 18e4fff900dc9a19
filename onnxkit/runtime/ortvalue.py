"""onnxruntime's ``OrtValue`` and ``IOBinding``: values that may stay on the device.

An :class:`OrtValue` holds a numpy array (device ``cpu``) or a torch tensor (device ``cuda``
or torch's CPU device, for the gpu backend), or a list (a sequence) or None.
``OrtValue.ortvalue_from_numpy(x, "cuda", 0)`` puts ``x`` on ``cuda:0`` as a torch tensor;
DLPack goes both ways (:meth:`OrtValue.to_dlpack`, :meth:`OrtValue.from_dlpack`,
``__dlpack__``).  :class:`IOBinding` binds inputs and outputs by name for
:meth:`InferenceSession.run_with_iobinding`; outputs bound to ``cuda`` are left on the device.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ..dtypes import from_numpy_dtype
from ..errors import OnnxkitError
from ..ir.types import TensorType, type_string


def _torch():
    try:
        import torch
    except ImportError:
        raise OnnxkitError("a device value needs torch: `pip install onnxkit-gpu` (it installs torch)") from None
    return torch


def _torch_device(device_type: str, device_id: int):
    torch = _torch()
    if device_type == "cuda":
        if not torch.cuda.is_available():
            raise OnnxkitError("device 'cuda' was asked for but torch sees no CUDA device; use 'cpu'")
        return torch.device(f"cuda:{int(device_id)}")
    return torch.device("cpu")


def _device(device, device_id=0, vendor_id=-1) -> tuple:
    """``('cpu' | 'cuda', id)`` of a device name or :class:`~onnxkit.runtime.devices.OrtDevice`."""
    from .devices import value_device

    return value_device(device, device_id, vendor_id)


class OrtValue:
    """A value for or from a session; see the module docstring."""

    __slots__ = ("_value",)

    def __init__(self, value):
        self._value = value

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def ortvalue_from_numpy(cls, numpy_obj, device_type="cpu", device_id: int = 0, vendor_id: int = -1) -> "OrtValue":
        """``numpy_obj`` on a device: a name (``'cpu'``, ``'cuda'``) with ``device_id``, or an
        :class:`~onnxkit.runtime.devices.OrtDevice` (onnxruntime's native form).  On ``cpu`` the
        value is the array itself (as onnxruntime, it shares its memory); on ``cuda`` a copy in
        a torch tensor."""
        device, index = _device(device_type, device_id, vendor_id)
        arr = np.asarray(numpy_obj)
        if device == "cpu":
            return cls(arr)
        return cls(_torch().from_numpy(np.ascontiguousarray(arr)).to(_torch_device(device, index)))

    @classmethod
    def ortvalue_from_shape_and_type(cls, shape, element_type=np.float32, device_type="cpu", device_id: int = 0,
                                     vendor_id: int = -1, memory_info=None) -> "OrtValue":
        """A new zero-filled value of ``shape`` and ``element_type`` (a numpy type, or an ONNX
        element type number such as 16 for BFLOAT16) on a device (a name and id, an
        :class:`~onnxkit.runtime.devices.OrtDevice`, or ``memory_info``'s device, which then
        overrides the others)."""
        from .pointers import element_dtype

        if memory_info is not None:
            device_type, device_id = memory_info.device, 0
        dtype = element_dtype(element_type, "ortvalue_from_shape_and_type")
        return cls.ortvalue_from_numpy(np.zeros(tuple(shape), dtype=dtype), device_type, device_id, vendor_id)

    @classmethod
    def ortvalue_from_shape_and_onnx_type(cls, shape, onnx_element_type: int, device="cpu") -> "OrtValue":
        """onnxruntime's native spelling of :meth:`ortvalue_from_shape_and_type` with an ONNX type."""
        return cls.ortvalue_from_shape_and_type(shape, int(onnx_element_type), device)

    @classmethod
    def from_dlpack(cls, data, is_bool_tensor: bool = False) -> "OrtValue":
        """A value sharing the memory of a DLPack capsule or of an object with ``__dlpack__``."""
        if hasattr(data, "__dlpack__") and hasattr(data, "__dlpack_device__"):
            kind = data.__dlpack_device__()[0]
            if kind == 1:  # kDLCPU
                arr = np.from_dlpack(data)
                return cls(arr.astype(bool) if is_bool_tensor else arr)
        torch = _torch()
        t = torch.utils.dlpack.from_dlpack(data)
        if t.device.type == "cpu":
            arr = t.numpy()
            return cls(arr.astype(bool) if is_bool_tensor else arr)
        return cls(t.bool() if is_bool_tensor else t)

    # -- description --------------------------------------------------------------------------
    def _is_torch(self) -> bool:
        return type(self._value).__module__.startswith("torch")

    def is_tensor(self) -> bool:
        return isinstance(self._value, np.ndarray) or self._is_torch()

    def is_tensor_sequence(self) -> bool:
        return isinstance(self._value, list)

    def is_sparse_tensor(self) -> bool:
        return type(self._value).__name__ == "SparseTensor" and hasattr(self._value, "as_coo_view")

    def has_value(self) -> bool:
        return self._value is not None

    def shape(self) -> list:
        if not self.is_tensor():
            raise OnnxkitError(f"this OrtValue holds a {type(self._value).__name__}, not a tensor: it has no shape")
        return [int(d) for d in self._value.shape]

    def _np_dtype(self) -> np.dtype:
        if self._is_torch():
            from .torch_values import torch_to_numpy_dtype

            return torch_to_numpy_dtype(self._value.dtype)
        return self._value.dtype

    def element_type(self) -> int:
        """The ONNX element type tag (Table 5) of the tensor."""
        return int(from_numpy_dtype(self._np_dtype()).tag)

    def data_type(self) -> str:
        """onnxruntime's type string (:func:`~onnxkit.ir.types.type_string`), e.g. ``'tensor(float)'``;
        ``'seq'`` for a sequence (a list does not keep its element type), ``'sparse_tensor(float)'``
        for a sparse tensor."""
        if self.is_tensor_sequence():
            return "seq"
        if self.is_sparse_tensor():
            return self._value.data_type()
        return type_string(TensorType(self.element_type()))

    def device_name(self) -> str:
        if self._is_torch():
            return "cuda" if self._value.device.type == "cuda" else "cpu"
        return "cpu"

    def tensor_size_in_bytes(self) -> int:
        return int(np.prod(self.shape(), dtype=np.int64)) * self._np_dtype().itemsize

    def data_ptr(self) -> int:
        if self._is_torch():
            return int(self._value.data_ptr())
        return int(self._value.ctypes.data)

    # -- out ----------------------------------------------------------------------------------
    def numpy(self):
        """The value on the host: a numpy array (a copy when it lives on a device)."""
        if self._is_torch():
            from .torch_values import torch_to_numpy

            return torch_to_numpy(self._value)
        return self._value

    def to_torch(self):
        """The torch tensor (for a host value, a tensor sharing the array's memory)."""
        if self._is_torch():
            return self._value
        return _torch().from_numpy(self._value)

    def to_dlpack(self):
        """A DLPack capsule of the tensor (shares memory)."""
        if self._is_torch():
            return _torch().utils.dlpack.to_dlpack(self._value)
        return self._value.__dlpack__()

    def __dlpack__(self, stream=None):
        return self._value.__dlpack__() if stream is None else self._value.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._value.__dlpack_device__()

    # -- onnxruntime's remaining OrtValue surface (onnxkit.ort) ----------------------------------
    def __array__(self, dtype=None, copy=None):
        """``np.asarray(ortvalue)``: the tensor on the host (a device tensor is copied)."""
        arr = self.numpy()
        if not isinstance(arr, np.ndarray):
            raise OnnxkitError(f"this OrtValue holds a {type(arr).__name__}, not a tensor: it is no array")
        return arr if dtype is None else arr.astype(dtype, copy=False)

    @classmethod
    def ortvalue_from_numpy_with_onnx_type(cls, data, onnx_element_type: int) -> "OrtValue":
        """An OrtValue of ONNX element type ``onnx_element_type`` whose octets are ``data``'s
        (an array of the same item size, e.g. uint8 codes for FLOAT8E4M3FN, uint16 for BFLOAT16)."""
        from ..dtypes import ELEMENT_TYPES

        et = ELEMENT_TYPES.get(int(onnx_element_type))
        if et is None or et.dtype is None:
            raise OnnxkitError(f"ortvalue_from_numpy_with_onnx_type: element type {onnx_element_type} has no "
                               "numpy representation in onnxkit")
        arr = np.ascontiguousarray(data)
        want = np.dtype(et.dtype)
        if arr.dtype == want:
            return cls(arr)
        if arr.dtype.itemsize != want.itemsize or want.kind == "O":
            raise OnnxkitError(f"ortvalue_from_numpy_with_onnx_type: a {arr.dtype} array cannot hold "
                               f"{et.name} elements ({want.itemsize} octets each)")
        return cls(arr.view(want))

    def _get_c_value(self) -> "OrtValue":
        """onnxruntime's native value (itself here)."""
        return self

    @property
    def _ortvalue(self) -> "OrtValue":
        """onnxruntime's wrapper keeps its native value here; onnxkit's OrtValue is both (itself)."""
        return self

    @classmethod
    def ort_value_from_sparse_tensor(cls, sparse_tensor) -> "OrtValue":
        """An OrtValue holding a :class:`~onnxkit.runtime.sparse.SparseTensor`."""
        from .sparse import SparseTensor

        if not isinstance(sparse_tensor, SparseTensor):
            raise OnnxkitError(f"ort_value_from_sparse_tensor: expected a SparseTensor, got "
                               f"{type(sparse_tensor).__name__}")
        return cls(sparse_tensor)

    def as_sparse_tensor(self):
        """The :class:`~onnxkit.runtime.sparse.SparseTensor` this OrtValue holds."""
        if not self.is_sparse_tensor():
            raise OnnxkitError(f"this OrtValue holds a {type(self._value).__name__}, not a sparse tensor")
        return self._value

    def _check_fits(self, src, what: str) -> None:
        """Raise :class:`OnnxkitError` unless ``src`` (an array or tensor) can be written into this
        tensor as it is: the same shape (no broadcasting) and element type (no conversion, e.g.
        no float truncated into int32), and this tensor writable."""
        if not self.is_tensor():
            raise OnnxkitError(f"{what}: the OrtValue holds a {type(self._value).__name__}, not a tensor")
        shape = [int(d) for d in src.shape]
        if shape != self.shape():
            raise OnnxkitError(f"{what}: shape {shape} does not match the OrtValue's shape {self.shape()}")
        got = OrtValue(src)._np_dtype()
        if got != self._np_dtype():
            raise OnnxkitError(f"{what}: type mismatch: the OrtValue holds {self.data_type()}, the value is "
                               f"{OrtValue(src).data_type()} (no conversion is made)")
        if not self._is_torch() and not self._value.flags.writeable:
            raise OnnxkitError(f"{what}: the OrtValue's array is read-only")

    def update_inplace(self, np_arr) -> None:
        """Overwrite the tensor's contents with ``np_arr``: the same shape and element type (a
        mismatch is an :class:`OnnxkitError`, never broadcast or converted)."""
        src = np_arr if isinstance(np_arr, np.ndarray) else np.asarray(np_arr)
        self._check_fits(src, "update_inplace")
        if self._is_torch():
            self._value.copy_(_torch().from_numpy(np.ascontiguousarray(src)))
        else:
            self._value[...] = src

    def __repr__(self) -> str:
        if self.is_tensor():
            return f"OrtValue({self.data_type()}{self.shape()}, device={self.device_name()})"
        return f"OrtValue({type(self._value).__name__})"


class OrtValueVector(list):
    """A list of :class:`OrtValue` (what onnxruntime's native ``run_with_ort_values`` returns)."""

    def push_back(self, value) -> None:
        self.append(value)

    def numpy(self) -> list:
        return [v.numpy() for v in self]

    def as_dlpack(self) -> list:
        return [v.to_dlpack() for v in self]


class IOBinding:
    """Inputs and outputs bound by name for :meth:`InferenceSession.run_with_iobinding`."""

    def __init__(self, session):
        self._session = session
        self._inputs: dict = {}
        self._outputs: list = []  # [(name, device_type, device_id, OrtValue or None)]
        self._results: Optional[list] = None

    def bind_cpu_input(self, name: str, arr_on_cpu) -> None:
        self._inputs[name] = np.asarray(arr_on_cpu)

    def bind_input(self, name: str, device_type="cpu", device_id: int = 0, element_type=None, shape=None,
                   buffer_ptr=None) -> None:
        """Bind input ``name``, in onnxruntime's three forms:

        * ``bind_input(name, device_type, device_id, element_type, shape, buffer_ptr)``: the
          memory at the address ``buffer_ptr`` (:func:`~onnxkit.runtime.pointers.view_pointer`:
          host memory, or CUDA memory where torch sees CUDA), not copied: it is read at each run;
        * ``bind_input(name, ort_device, element_type, shape, buffer_ptr)`` (the native form,
          an :class:`~onnxkit.runtime.devices.OrtDevice` second);
        * ``bind_input(name, value)``: a numpy array, torch tensor or OrtValue."""
        from .devices import OrtDevice

        what = f"bind_input({name!r})"
        if isinstance(device_type, OrtDevice) and buffer_ptr is None and shape is not None:
            device_id, element_type, shape, buffer_ptr = 0, device_id, element_type, shape  # the native form
        if isinstance(device_type, (str, OrtDevice)):
            if buffer_ptr is None or element_type is None or shape is None:
                raise OnnxkitError(f"{what}: with a device, element_type, shape and buffer_ptr are required; "
                                   "bind an array with bind_cpu_input or an OrtValue with bind_ortvalue_input")
            from .pointers import view_pointer

            device, index = _device(device_type, device_id)
            self._inputs[name] = view_pointer(buffer_ptr, device, index, element_type, shape, what)
            return
        value = device_type
        if isinstance(value, OrtValue):
            value = value._value
        self._inputs[name] = value

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        self._inputs[name] = ortvalue._value

    def bind_output(self, name: str, device_type="cpu", device_id: int = 0, element_type=None,
                    shape=None, buffer_ptr=None) -> None:
        """Ask for output ``name`` on a device (a name and id, or an
        :class:`~onnxkit.runtime.devices.OrtDevice`; ``cuda`` keeps it on the device), or, with
        ``element_type``, ``shape`` and ``buffer_ptr``, have it written into the memory at that
        address (as :meth:`bind_input` views it; at run time the output's shape and type must be
        those: a mismatch is an error, nothing is converted).  Native form:
        ``bind_output(name, ort_device[, element_type, shape, buffer_ptr])``."""
        from .devices import OrtDevice

        what = f"bind_output({name!r})"
        if isinstance(device_type, OrtDevice) and buffer_ptr is None and shape is not None:
            device_id, element_type, shape, buffer_ptr = 0, device_id, element_type, shape  # the native form
        device, index = _device(device_type, device_id)
        if buffer_ptr is None:
            self._bind_output((name, device, index, None))
            return
        if element_type is None or shape is None:
            raise OnnxkitError(f"{what}: `element_type` and `shape` are to be provided if pre-allocated memory is "
                               "provided (buffer_ptr)")
        from .pointers import view_pointer

        target = OrtValue(view_pointer(buffer_ptr, device, index, element_type, shape, what))
        self._bind_output((name, target.device_name(), index, target))

    def _bind_output(self, entry: tuple) -> None:
        """Bind ``(name, device, id, OrtValue or None)``, replacing an earlier binding of the name."""
        self._outputs = [e for e in self._outputs if e[0] != entry[0]] + [entry]

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        """Write output ``name`` into ``ortvalue`` (a writable tensor; at run time its shape and
        element type must be the output's: a mismatch is an error, nothing is converted)."""
        if not isinstance(ortvalue, OrtValue) or not ortvalue.is_tensor():
            raise OnnxkitError(f"bind_ortvalue_output({name!r}): expected an OrtValue holding a tensor, got "
                               f"{ortvalue!r}")
        if not ortvalue._is_torch() and not ortvalue._value.flags.writeable:
            raise OnnxkitError(f"bind_ortvalue_output({name!r}): the OrtValue's array is read-only; "
                               "bind a writable one")
        self._bind_output((name, ortvalue.device_name(), 0, ortvalue))

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = None

    def synchronize_inputs(self) -> None:
        """Nothing to wait for: inputs are copied when the run starts."""

    def synchronize_outputs(self) -> None:
        if self._results and any(v._is_torch() for v in self._results):
            torch = _torch()
            if torch.cuda.is_available():
                torch.cuda.synchronize()

    def _run(self, run_options) -> None:
        sess = self._session
        if getattr(run_options, "_active_adapters", None):
            from ..log import get_logger

            get_logger("run").warning("run_with_iobinding has active adapters specified, but won't have an effect "
                                      "(onnxruntime's rule: bind the adapter's parameters as inputs instead)")
        names = [n for n, *_ in self._outputs] or [o.name for o in sess.get_outputs()]
        device_out = sess._torch and any(d == "cuda" for _, d, _, _ in self._outputs)
        feeds, bindings = sess._feed_values(self._inputs)
        values = sess._fetch(names, sess._evaluate(feeds, run_options), host=not device_out, feeds=feeds,
                             bindings=bindings)
        bound = {n: (d, o) for n, d, _, o in self._outputs}
        pairs = []
        for name, v in zip(names, values):  # every bound OrtValue checked before any is written
            device, target = bound.get(name, ("cpu", None))
            if device == "cpu" and type(v).__module__.startswith("torch"):
                v = OrtValue(v).numpy()
            if target is not None:
                if not hasattr(v, "shape"):
                    raise OnnxkitError(f"output {name!r} is a {type(v).__name__}, not a tensor: it cannot be "
                                       "written into the bound OrtValue")
                target._check_fits(v, f"output {name!r}")
            pairs.append((v, target))
        results = []
        for v, target in pairs:
            if target is not None:
                target.update_inplace(v if isinstance(v, np.ndarray) else OrtValue(v).numpy())
                results.append(target)
            else:
                results.append(OrtValue(v))
        self._results = results

    def get_outputs(self) -> list:
        """The outputs of the last run, as :class:`OrtValue` (in the order they were bound)."""
        if self._results is None:
            raise OnnxkitError("no outputs yet: call InferenceSession.run_with_iobinding first")
        return list(self._results)

    def get_outputs_as_ortvaluevector(self):
        """The outputs of the last run as an ``OrtValueVector`` (a list of :class:`OrtValue`)."""
        return OrtValueVector(self.get_outputs())

    def copy_outputs_to_cpu(self) -> list:
        """The outputs of the last run as numpy arrays."""
        return [v.numpy() for v in self.get_outputs()]
