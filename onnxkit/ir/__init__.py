"""The onnxkit intermediate representation: record classes (attrs classes, :mod:`onnxkit.records`) for everything Annex B can encode.

The classes of messages a model to be run seldom carries (:mod:`onnxkit.ir.seldom`) and the value
messages of test data files (:mod:`onnxkit.ir.data`) are defined when first looked up here:
each record class costs time to define (``benchmarks/records.py``), paid by every fresh
process on a session's path.
"""

from importlib import import_module as _import_module

from .attribute import Attribute, AttributeType
from .base import WireInfo, unknown_fields
from .graph import Function, Graph, Model, Node, OperatorSetId, TrainingInfo, ValueInfo
from .tensor import DataLocation, SparseTensor, StringStringEntry, Tensor
from .types import (
    MAP_KEY_TAGS, Dim, MapType, OpaqueType, OptionalType, SequenceType, Shape, SparseTensorType,
    TensorType, Type, UndefinedType, tensor_type, to_dim,
)

#: name -> the submodule that defines it on first look-up
_LATER = {
    **dict.fromkeys(("DeviceConfiguration", "IntIntListEntry", "NodeDeviceConfiguration", "OperatorInfo",
                     "OperatorSetInfo", "Segment", "ShardedDim", "ShardingSpec", "SimpleShardedDim",
                     "TensorAnnotation"), "seldom"),
    **dict.fromkeys(("MapData", "OptionalData", "SequenceData", "ValueKind"), "data"),
}


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
                  and n not in ("attribute", "base", "display", "graph", "tensor", "types")] + list(_LATER))
