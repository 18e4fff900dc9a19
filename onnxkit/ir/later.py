"""Which submodule of :mod:`onnxkit.ir` defines each class defined on first look-up, and
:func:`is_a`, which asks about one without defining it.

Each record class costs time to define (``benchmarks/records.py``), paid by every fresh process on
a session's path, so the classes of messages a model to be run seldom carries (:mod:`.seldom`),
model-local functions and training information (:mod:`.function`), sparse tensors (:mod:`.sparse`)
and test data's values (:mod:`.data`) are defined when first looked up (:mod:`onnxkit.ir` and the
modules that name them give them by name).  This module imports nothing of the IR.
"""

from __future__ import annotations

import sys

__all__ = ["LATER", "is_a"]

#: name -> the submodule of onnxkit.ir that defines it on first look-up
LATER = {
    **dict.fromkeys(("DeviceConfiguration", "IntIntListEntry", "NodeDeviceConfiguration", "OperatorInfo",
                     "OperatorSetInfo", "Segment", "ShardedDim", "ShardingSpec", "SimpleShardedDim",
                     "TensorAnnotation"), "seldom"),
    **dict.fromkeys(("MapData", "OptionalData", "SequenceData", "ValueKind"), "data"),
    **dict.fromkeys(("Function", "TrainingInfo"), "function"),
    "SparseTensor": "sparse",
}
#: name -> the full name of the submodule that defines it
_MODULE_OF = {name: f"onnxkit.ir.{module}" for name, module in LATER.items()}


def is_a(obj, name: str) -> bool:
    """``isinstance(obj, cls)`` for the class ``cls`` :mod:`onnxkit.ir` defines on first look-up
    under ``name`` (a key of :data:`LATER`: ``"SparseTensor"``, ``"Function"``, ...), without
    defining it: a class not defined yet has no instances, so the answer is then False."""
    module = sys.modules.get(_MODULE_OF[name])
    cls = getattr(module, name, None) if module is not None else None
    return cls is not None and isinstance(obj, cls)
