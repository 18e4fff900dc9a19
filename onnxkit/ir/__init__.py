"""The onnxkit intermediate representation: record classes (attrs classes, :mod:`onnxkit.records`) for everything Annex B can encode.

The classes of messages a model to be run seldom carries (:mod:`onnxkit.ir.seldom`), model-local
functions and training information (:mod:`onnxkit.ir.function`), sparse tensors
(:mod:`onnxkit.ir.sparse`) and the value messages of test data files (:mod:`onnxkit.ir.data`) are
defined when first looked up here: each record class costs time to define
(``benchmarks/records.py``), paid by every fresh process on a session's path.  :func:`is_a` asks
whether an object is an instance of one of them without defining it.
"""

from importlib import import_module as _import_module

from .attribute import Attribute, AttributeType
from .later import LATER as _LATER, is_a
from .base import WireInfo, unknown_fields
from .graph import Graph, Model, Node, OperatorSetId, ValueInfo
from .tensor import DataLocation, StringStringEntry, Tensor
from .types import (
    MAP_KEY_TAGS, Dim, MapType, OpaqueType, OptionalType, SequenceType, Shape, SparseTensorType,
    TensorType, Type, UndefinedType, tensor_type, to_dim,
)


def __getattr__(name: str):
    module = _LATER.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_LATER))


__all__ = sorted([n for n in globals() if not n.startswith("_")
                  and n not in ("attribute", "base", "display", "graph", "later", "tensor", "types")] + list(_LATER))
