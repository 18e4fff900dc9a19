"""The ONNX 1-2 definitions of ai.onnx.ml (operator sets 1..5), read from the generated ``schemas_data.json.gz``.

The data is produced by ``plugins/ml_domain/tools/generate_schemas.py`` from
``onnx.defs`` at build time; nothing here imports ``onnx``.  It is read once per process,
on first use.
"""

from __future__ import annotations

from onnxkit.plugin import SchemaData, packaged_schema_data


def schema_data() -> SchemaData:
    """All definitions and each domain's version range (read once, then cached)."""
    return packaged_schema_data(__package__)


def definitions() -> tuple:
    """Every definition (one :class:`~onnxkit.schema.OpSchema` per (domain, name, since_version))."""
    return schema_data().definitions


def operator_sets() -> list:
    """One :class:`~onnxkit.schema.OperatorSet` per (domain, version) of the data's domains."""
    return schema_data().operator_sets()
