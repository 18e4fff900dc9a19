"""``og.Tensor`` and ``og.NamedTensors``: a numpy array with genai's accessors, and a name -> tensor
mapping.  ``Tensor.type()`` gives the ONNX element type number (Clause 6's TensorProto.DataType)."""

from __future__ import annotations

import numpy as np

from ..dtypes import from_numpy_dtype
from ..errors import OnnxkitError
from .errors import GenaiError


class Tensor:
    """onnxruntime-genai's ``Tensor(array)``: ``shape()``, ``type()``, ``data()``, ``as_numpy()``."""

    def __init__(self, array):
        self._array = np.ascontiguousarray(array)

    def shape(self) -> list:
        return list(self._array.shape)

    def type(self) -> int:
        try:
            return int(from_numpy_dtype(self._array.dtype).tag)
        except (OnnxkitError, TypeError):
            raise GenaiError(f"Tensor.type: no ONNX element type for {self._array.dtype}") from None

    def data(self) -> memoryview:
        return memoryview(self._array).cast("B")

    def as_numpy(self) -> np.ndarray:
        return self._array


class NamedTensors:
    """onnxruntime-genai's ``NamedTensors()``: ``nt[name] = array or Tensor``, ``nt[name]``,
    ``name in nt``, ``del nt[name]``, ``len(nt)``, ``keys()``."""

    def __init__(self):
        self._items: dict = {}

    def __getitem__(self, name: str) -> Tensor:
        if name not in self._items:
            raise KeyError(name)
        return self._items[name]

    def __setitem__(self, name: str, value) -> None:
        self._items[str(name)] = value if isinstance(value, Tensor) else Tensor(value)

    def __contains__(self, name) -> bool:
        return name in self._items

    def __delitem__(self, name: str) -> None:
        del self._items[name]

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list:
        return list(self._items)
