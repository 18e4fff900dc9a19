""":class:`OpaqueTypeDef` and :class:`PluginFault`: :mod:`onnxkit.registry`'s record classes a
registry without plugin faults or opaque types never instantiates, defined when first asked for.

They are found in :mod:`onnxkit.registry` (and :class:`OpaqueTypeDef` in :mod:`onnxkit.plugin`) by
name and keep ``__module__`` ``onnxkit.registry``, so they pickle and print as before; a record
class costs time to define (``benchmarks/records.py``), paid by every fresh process that defines it.
"""

from __future__ import annotations

from onnxkit import record_methods, records

__all__ = ["OpaqueTypeDef", "PluginFault"]


@records.define
class OpaqueTypeDef:
    """An opaque type of a domain (Clause 6.8.4); values are instances of ``python_type``."""

    __module__ = "onnxkit.registry"

    domain: str
    name: str
    python_type: type = object
    description: str = ""
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ


@records.define
class PluginFault:
    """A fault of one plugin, reported instead of raised."""

    __module__ = "onnxkit.registry"

    plugin: str
    hook: str
    message: str
    __repr__, __eq__ = record_methods.REPR, record_methods.EQ

    def __str__(self) -> str:
        return f"plugin {self.plugin!r} ({self.hook}): {self.message}"
