"""Messages a model to be run seldom carries, defined when first asked for.

Each record class costs time to define (attrs generates and compiles its methods; what it costs:
``benchmarks/records.py``); a session on a model without these messages does not define them.
:mod:`onnxkit.ir`, :mod:`onnxkit.ir.graph` and :mod:`onnxkit.ir.tensor` give them by name
(their ``__getattr__`` imports this module), and the codec looks a message's class up through
:mod:`onnxkit.ir` when it first decodes one (:mod:`onnxkit.wire.adapters`).

* multi-device configuration (IR version 11; Annex B.2): :class:`DeviceConfiguration`,
  :class:`NodeDeviceConfiguration`, :class:`ShardingSpec`, :class:`ShardedDim`,
  :class:`SimpleShardedDim`, :class:`IntIntListEntry`;
* :class:`TensorAnnotation` (a graph's ``quantization_annotation``) and :class:`Segment`
  (``TensorProto.segment``);
* the operator set description messages (Annex B.3): :class:`OperatorInfo`, :class:`OperatorSetInfo`.
"""

from __future__ import annotations

from typing import Optional

from onnxkit import records

from .base import wire_field


@records.define
class IntIntListEntry:
    key: int = 0
    value: list = records.field(factory=list)
    _wire: object = wire_field()


@records.define
class SimpleShardedDim:
    """One of ``dim_value`` / ``dim_param`` (B.2.9) and ``num_shards``."""

    dim_value: Optional[int] = None
    dim_param: Optional[str] = None
    num_shards: int = 0
    _wire: object = wire_field()


@records.define
class ShardedDim:
    axis: int = 0
    simple_sharding: list = records.field(factory=list)
    _wire: object = wire_field()


@records.define
class ShardingSpec:
    tensor_name: str = ""
    device: list = records.field(factory=list)
    index_to_device_group_map: list = records.field(factory=list)
    sharded_dim: list = records.field(factory=list)
    _wire: object = wire_field()


@records.define
class NodeDeviceConfiguration:
    configuration_id: str = ""
    sharding_spec: list = records.field(factory=list)
    pipeline_stage: int = 0
    _wire: object = wire_field()


@records.define
class DeviceConfiguration:
    name: str = ""
    num_devices: int = 0
    device: list = records.field(factory=list)
    _wire: object = wire_field()


@records.define
class TensorAnnotation:
    tensor_name: str = ""
    quant_parameter_tensor_names: list = records.field(factory=list)
    _wire: object = wire_field()


@records.define
class Segment:
    """TensorProto.Segment: the slice of a large tensor this TensorProto holds."""

    begin: int = 0
    end: int = 0
    _wire: object = wire_field()


@records.define
class OperatorInfo:
    """OperatorProto (B.3.1): an entry of a serialized operator set."""

    op_type: str = ""
    since_version: int = 0
    status: int = 0
    doc_string: str = ""
    _wire: object = wire_field()


@records.define
class OperatorSetInfo:
    """OperatorSetProto (B.3.2): a serialized operator set."""

    magic: str = ""
    ir_version: int = 0
    ir_version_prerelease: str = ""
    ir_build_metadata: str = ""
    domain: str = ""
    opset_version: int = 0
    doc_string: str = ""
    operator: list = records.field(factory=list)
    functions: list = records.field(factory=list)
    _wire: object = wire_field()
