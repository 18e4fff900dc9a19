"""Sparse tensors (SparseTensorProto, Clause 6.3.4), defined when first asked for.

:class:`SparseTensor` is :mod:`onnxkit.ir.tensor`'s class (found there and in :mod:`onnxkit.ir`
by name, ``__module__`` ``onnxkit.ir.tensor``, so it pickles as before) that a model without
sparse tensors never instantiates: a record class costs time to define
(``benchmarks/records.py``), so a session on such a model does not define it.  The codec looks a
message's class up through :mod:`onnxkit.ir` when it first decodes one
(:mod:`onnxkit.wire.adapters`); code that asks whether an object is one without defining it
calls :func:`onnxkit.ir.is_a`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np

from onnxkit import records
from onnxkit import record_methods

from ..tensor_data import sparse_to_dense
from .base import wire_field

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = ["SparseTensor"]


@records.define
class SparseTensor:
    """A sparse tensor (SparseTensorProto): ``values`` (1-D), ``indices`` and the dense ``dims``.

    ``indices`` is either [NNZ] linearized indices or [NNZ, rank] coordinates.
    """

    __module__ = "onnxkit.ir.tensor"

    values: Optional[Tensor] = None
    indices: Optional[Tensor] = None
    dims: list = records.field(factory=list)
    _wire: object = wire_field()
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def to_dense(self) -> np.ndarray:
        """The dense array this sparse tensor denotes."""
        return sparse_to_dense(self)
