"""onnxruntime's ``SparseTensor`` and ``OrtSparseFormat``: a sparse value on the host.

``SparseTensor.sparse_coo_from_numpy(dense_shape, values, indices, device)``: COO, the indices
linear (one per value) or ``[nnz, rank]``; ``sparse_csr_from_numpy(dense_shape, values, inner,
outer, device)``: CSR (rank 2).  The views (``values()``, ``as_coo_view().indices()``,
``as_csrc_view().inner()``/``outer()``) are read-only arrays.  ``to_cuda`` needs the gpu
backend's CUDA and a numeric tensor; ``to_dense()`` (onnxkit's own) gives the dense array.
:func:`coo_of_dense` is what a session returns for a graph output declared a sparse tensor.
"""

from __future__ import annotations

import enum

import numpy as np

from ..dtypes import from_numpy_dtype
from ..errors import OnnxkitError
from ..ir.types import SparseTensorType, type_string


class OrtSparseFormat(enum.IntEnum):
    ORT_SPARSE_UNDEFINED = 0
    ORT_SPARSE_COO = 1
    ORT_SPARSE_CSRC = 2
    ORT_SPARSE_BLOCK_SPARSE = 4


def _readonly(a) -> np.ndarray:
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


class _CooView:
    def __init__(self, indices):
        self._indices = indices

    def indices(self) -> np.ndarray:
        return self._indices


class _CsrView:
    def __init__(self, inner, outer):
        self._inner, self._outer = inner, outer

    def inner(self) -> np.ndarray:
        return self._inner

    def outer(self) -> np.ndarray:
        return self._outer


class SparseTensor:
    """A sparse tensor (see the module docstring)."""

    def __init__(self, fmt: OrtSparseFormat, dense_shape, values, indices=None, inner=None, outer=None,
                 device: str = "cpu"):
        self._format = OrtSparseFormat(fmt)
        self._shape = [int(d) for d in dense_shape]
        if any(d < 0 for d in self._shape):
            raise OnnxkitError(f"SparseTensor: dense shape {self._shape} has a negative extent")
        self._values = _readonly(values)
        self._indices = None if indices is None else _readonly(np.asarray(indices, np.int64))
        self._inner = None if inner is None else _readonly(np.asarray(inner, np.int64))
        self._outer = None if outer is None else _readonly(np.asarray(outer, np.int64))
        self._device = device
        self._check()

    def _check(self) -> None:
        nnz = self._values.shape[0] if self._values.ndim else 0
        size = int(np.prod(self._shape, dtype=np.int64))
        if self._format == OrtSparseFormat.ORT_SPARSE_COO:
            idx = self._indices
            if idx.ndim == 1 and idx.shape[0] == nnz:
                if nnz and (idx.min() < 0 or idx.max() >= size):
                    raise OnnxkitError(f"SparseTensor: a COO index is outside the dense shape {self._shape}")
            elif not (idx.ndim == 2 and idx.shape == (nnz, len(self._shape))):
                raise OnnxkitError(f"SparseTensor: COO indices of shape {list(idx.shape)} for {nnz} values of a "
                                   f"rank-{len(self._shape)} tensor (want [{nnz}] or [{nnz}, {len(self._shape)}])")
        elif self._format == OrtSparseFormat.ORT_SPARSE_CSRC:
            if len(self._shape) != 2:
                raise OnnxkitError(f"SparseTensor: CSR needs a rank-2 dense shape, not {self._shape}")
            if self._inner.shape != (nnz,) or self._outer.shape != (self._shape[0] + 1,):
                raise OnnxkitError(f"SparseTensor: CSR wants {nnz} inner and {self._shape[0] + 1} outer indices, got "
                                   f"{list(self._inner.shape)} and {list(self._outer.shape)}")

    @classmethod
    def sparse_coo_from_numpy(cls, dense_shape, values, coo_indices, ort_device=None) -> "SparseTensor":
        return cls(OrtSparseFormat.ORT_SPARSE_COO, dense_shape, np.asarray(values), indices=coo_indices,
                   device=_device_name(ort_device))

    @classmethod
    def sparse_csr_from_numpy(cls, dense_shape, values, inner_indices, outer_indices, ort_device=None) -> "SparseTensor":
        return cls(OrtSparseFormat.ORT_SPARSE_CSRC, dense_shape, np.asarray(values), inner=inner_indices,
                   outer=outer_indices, device=_device_name(ort_device))

    def format(self) -> OrtSparseFormat:
        return self._format

    def dense_shape(self) -> list:
        return list(self._shape)

    def data_type(self) -> str:
        return type_string(SparseTensorType(int(from_numpy_dtype(self._values.dtype).tag)))

    def device_name(self) -> str:
        return self._device

    def values(self) -> np.ndarray:
        return self._values

    def as_coo_view(self) -> _CooView:
        if self._format != OrtSparseFormat.ORT_SPARSE_COO:
            raise OnnxkitError(f"SparseTensor: this tensor is {self._format.name}, not COO")
        return _CooView(self._indices)

    def as_csrc_view(self) -> _CsrView:
        if self._format != OrtSparseFormat.ORT_SPARSE_CSRC:
            raise OnnxkitError(f"SparseTensor: this tensor is {self._format.name}, not CSR")
        return _CsrView(self._inner, self._outer)

    def as_blocksparse_view(self):
        raise OnnxkitError("SparseTensor: block-sparse tensors are not made by onnxkit")

    def to_cuda(self, ort_device) -> "SparseTensor":
        from .providers import cuda_available

        if self._values.dtype.kind in "USO":
            raise OnnxkitError("SparseTensor.to_cuda: a string tensor cannot live on a CUDA device")
        if self._device == "cuda":
            raise OnnxkitError("SparseTensor.to_cuda: the tensor is on the CUDA device already")
        if not cuda_available():
            raise OnnxkitError("SparseTensor.to_cuda: torch sees no CUDA device")
        out = SparseTensor(self._format, self._shape, self._values, self._indices, self._inner, self._outer, "cuda")
        return out

    def to_dense(self) -> np.ndarray:
        """The dense array (zeros, or empty strings, where no value is given)."""
        dense = np.zeros(int(np.prod(self._shape, dtype=np.int64)),
                         dtype=object if self._values.dtype.kind in "USO" else self._values.dtype)
        if dense.dtype == object:
            dense[:] = ""
        if self._format == OrtSparseFormat.ORT_SPARSE_COO:
            idx = self._indices
            flat = idx if idx.ndim == 1 else np.ravel_multi_index(tuple(idx.T), self._shape)
            dense[flat] = self._values
        else:
            for row in range(self._shape[0]):
                lo, hi = int(self._outer[row]), int(self._outer[row + 1])
                dense[row * self._shape[1] + self._inner[lo:hi]] = self._values[lo:hi]
        return dense.reshape(self._shape)

    def __repr__(self) -> str:
        return f"SparseTensor({self._format.name}, {self.data_type()}, dense_shape={self._shape})"


def coo_of_dense(value) -> SparseTensor:
    """A graph output declared a sparse tensor, as onnxruntime returns it: ``value`` itself where it
    is a :class:`SparseTensor` already, else the COO form of the dense array, its nonzero
    elements (non-empty strings) in row-major order with their linear indices."""
    if isinstance(value, SparseTensor):
        return value
    dense = np.asarray(value)
    flat = dense.reshape(-1)
    indices = np.flatnonzero(flat)
    return SparseTensor(OrtSparseFormat.ORT_SPARSE_COO, dense.shape, flat[indices], indices=indices)


def _device_name(ort_device) -> str:
    if ort_device is None:
        return "cpu"
    name = getattr(ort_device, "name", None)
    return name() if callable(name) else "cpu"
