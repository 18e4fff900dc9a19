"""The onnxkit intermediate representation: record classes (:mod:`onnxkit.records`) for everything Annex B can encode."""

from .attribute import Attribute, AttributeType
from .base import WireInfo, unknown_fields
from .data import MapData, OptionalData, SequenceData, ValueKind
from .graph import (
    DeviceConfiguration, Function, Graph, IntIntListEntry, Model, Node, NodeDeviceConfiguration,
    OperatorInfo, OperatorSetId, OperatorSetInfo, ShardedDim, ShardingSpec, SimpleShardedDim,
    TensorAnnotation, TrainingInfo, ValueInfo,
)
from .tensor import DataLocation, Segment, SparseTensor, StringStringEntry, Tensor
from .types import (
    MAP_KEY_TAGS, Dim, MapType, OpaqueType, OptionalType, SequenceType, Shape, SparseTensorType,
    TensorType, Type, UndefinedType, tensor_type, to_dim,
)

__all__ = [n for n in dir() if not n.startswith("_")]
