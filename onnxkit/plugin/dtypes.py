"""The element types of the plugin surface (Clause 6, Table 5).

:class:`DataType` is the tag enumeration (``DataType.FLOAT`` == 1, ...); :data:`ELEMENT_TYPES`
maps each tag to its :class:`ElementType` row (numpy dtype, bit width, the TensorProto field
that stores it, ...).  :func:`element_type` (a tag, raising for 0 or an unlisted tag),
:func:`from_numpy_dtype` (a numpy dtype; ``str``/``bytes`` object arrays are STRING) and
:func:`by_name` (``'FLOAT'``, ``'INT4'``, ..., case-insensitive) look a row up; each raises
:class:`~onnxkit.errors.OnnxkitTypeError` naming what it was given where there is none.
"""

from __future__ import annotations

from ..dtypes import ELEMENT_TYPES, DataType, ElementType, by_name, element_type, from_numpy_dtype

__all__ = ["DataType", "ELEMENT_TYPES", "ElementType", "by_name", "element_type", "from_numpy_dtype"]
